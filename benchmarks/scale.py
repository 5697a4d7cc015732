"""How much work each benchmark does: one preset per purpose.

``standard`` is what ``tox -e bench`` runs: sized so the whole suite fits in about 6 minutes
on an otherwise idle 2-core machine, leaving room for tox's install inside 15. ``smoke`` runs every
benchmark once on a tiny batch, to check the machinery (a few seconds each).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class RolloutPoint:
    """One end-to-end point: a concurrency, and ``groups x samples`` rollouts per call."""

    concurrency: int
    groups: int
    samples_per_group: int
    rounds: int | None = None
    """Measured calls; None takes the scale's ``rounds``."""

    @property
    def rollouts_per_call(self) -> int:
        return self.groups * self.samples_per_group


@dataclass(frozen=True)
class SaturationPlan:
    """The latency model the engine runs with, and the load put through it.

    Per sequence the engine decodes a token every ``decode_s_per_token`` seconds and serves at
    most ``batch_capacity`` sequences at once, so its capacity is
    ``batch_capacity / decode_s_per_token`` output tokens/s.
    """

    name: str
    description: str
    prefill_s_per_token: float
    decode_s_per_token: float
    batch_capacity: int
    concurrency: int
    groups: int
    samples_per_group: int
    rounds: int | None = None
    """Measured calls; None takes the scale's ``rounds``."""
    min_new_tokens: int = 0
    """Every reply at least this long (0: the fixture's own, about 10 tokens)."""

    @property
    def capacity_tokens_per_s(self) -> float:
        return self.batch_capacity / self.decode_s_per_token

    @property
    def point(self) -> RolloutPoint:
        """The load as a rollout point."""
        return RolloutPoint(self.concurrency, self.groups, self.samples_per_group, self.rounds)


@dataclass(frozen=True)
class Scale:
    name: str
    rounds: int
    engine_requests: int
    engine_concurrency: int
    transport_requests: int
    transport_concurrency: int
    rollout_points: dict[str, tuple[RolloutPoint, ...]] = field(default_factory=dict)
    saturation: tuple[SaturationPlan, ...] = ()
    memory_rollouts: int = 1000
    memory_calls: int = 10
    max_response_tokens: int = 256
    cold_rounds: int = 5
    """Fresh processes measured for construction + first call, one measurement each."""
    cold_rollouts: int = 32
    """Rollouts in the cold first call: 8 groups x 4 samples."""
    worker_counts: tuple[int, ...] = (1, 2, 4)
    """Episode worker counts measured beside the in-process path (``bench_workers.py``)."""
    worker_points: dict[str, RolloutPoint] = field(default_factory=dict)
    """Per taskset, the zero-latency point every worker count is measured at."""
    worker_saturation: tuple[SaturationPlan, ...] = ()
    """Latency-modelled plans every worker count is measured at."""
    stock04_point: RolloutPoint = RolloutPoint(concurrency=4, groups=2, samples_per_group=2)
    """The stock-harness 0.4 row (``bench_stock04.py``): Verifiers' own loop, 1 and 2 workers."""


def one_engine_batch(
    name: str,
    description: str,
    decode_s_per_token: float,
    *,
    min_new_tokens: int = 0,
    sequences: int = 64,
    samples_per_group: int = 4,
    rounds: int | None = 2,
) -> SaturationPlan:
    """One engine with ``sequences`` in its batch and prompts at 50k tokens/s, loaded with
    twice that many requests in flight from ``sequences`` groups. The defaults are the
    standard scale's: 64 sequences, 128 requests from 64 groups of 4, two measured calls."""
    return SaturationPlan(
        name=name,
        description=description,
        prefill_s_per_token=0.00002,
        decode_s_per_token=decode_s_per_token,
        batch_capacity=sequences,
        concurrency=2 * sequences,
        groups=sequences,
        samples_per_group=samples_per_group,
        rounds=rounds,
        min_new_tokens=min_new_tokens,
    )


def smoke_batch(
    name: str, description: str, decode_s_per_token: float, *, min_new_tokens: int = 0
) -> SaturationPlan:
    """The smoke scale's engine: 8 sequences, 16 requests from 8 groups of 2, one round."""
    return one_engine_batch(
        name,
        description,
        decode_s_per_token,
        min_new_tokens=min_new_tokens,
        sequences=8,
        samples_per_group=2,
        rounds=None,
    )


STANDARD = Scale(
    name="standard",
    rounds=3,
    engine_requests=1500,
    engine_concurrency=64,
    transport_requests=300,
    transport_concurrency=32,
    rollout_points={
        # Single turn: cheap, so the full range of concurrencies with real batches.
        "mv-arith": (
            RolloutPoint(concurrency=1, groups=4, samples_per_group=4),
            RolloutPoint(concurrency=32, groups=32, samples_per_group=4),
            RolloutPoint(concurrency=256, groups=64, samples_per_group=4),
        ),
        # A user simulator per rollout (a Python subprocess, about 4 s of CPU each): the
        # environment dominates, so small batches and two measured calls.
        "mv-dialogue": (
            RolloutPoint(concurrency=1, groups=1, samples_per_group=2, rounds=2),
            RolloutPoint(concurrency=8, groups=2, samples_per_group=4, rounds=2),
        ),
        # An MCP tool server per rollout: as expensive, sized the same.
        "mv-tools": (
            RolloutPoint(concurrency=1, groups=1, samples_per_group=2, rounds=2),
            RolloutPoint(concurrency=8, groups=2, samples_per_group=4, rounds=2),
        ),
    },
    saturation=(
        # A small model on one GPU: 50 tokens/s per sequence, 64 sequences in the batch. The
        # fixture replies are short (~10 tokens), so this is a request rate far above a real
        # RL run's: it finds where the trainer-side process runs out of CPU.
        one_engine_batch(
            name="decode50",
            description="50 tokens/s per sequence, 64 sequences",
            decode_s_per_token=0.02,
        ),
        # The same batch with each request held about one second, as long RL responses hold
        # it: the request rate (~60/s per engine) of a real run.
        one_engine_batch(
            name="rl-rate",
            description="~1 s per request, 64 sequences",
            decode_s_per_token=0.1,
        ),
    ),
    memory_rollouts=1000,
    memory_calls=10,
    # Four variants each (in-process, 1, 2, 4 workers): the simulator and tool tasksets spend
    # ~4 s of environment CPU per rollout, so their batches stay small.
    worker_points={
        "mv-arith": RolloutPoint(concurrency=64, groups=32, samples_per_group=4, rounds=3),
        "mv-dialogue": RolloutPoint(concurrency=8, groups=1, samples_per_group=4, rounds=2),
        "mv-tools": RolloutPoint(concurrency=8, groups=1, samples_per_group=4, rounds=2),
    },
    worker_saturation=(
        # About one second per request either way: ~10-token replies at 10 tokens/s, or
        # 200-token replies at 200 tokens/s per sequence.
        one_engine_batch(
            name="rl-rate-short",
            description="~1 s per request, ~10-token replies, 64 sequences",
            decode_s_per_token=0.1,
        ),
        one_engine_batch(
            name="rl-rate-long",
            description="~1 s per request, 200-token replies, 64 sequences",
            decode_s_per_token=0.005,
            min_new_tokens=200,
        ),
    ),
    # Each episode runs Verifiers' chat program in a subprocess (~1.5 CPU-s), so 2 cores serve
    # about one episode per second: 8 episodes a round, four sides, a warm-up and 5 rounds
    # (about 6 minutes on a quiet 2-core machine, 10 on a loaded one).
    stock04_point=RolloutPoint(concurrency=4, groups=4, samples_per_group=2, rounds=5),
)

SMOKE = Scale(
    name="smoke",
    rounds=1,
    engine_requests=64,
    engine_concurrency=8,
    transport_requests=16,
    transport_concurrency=4,
    rollout_points={
        "mv-arith": (
            RolloutPoint(concurrency=1, groups=2, samples_per_group=2),
            RolloutPoint(concurrency=8, groups=4, samples_per_group=2),
        ),
        "mv-dialogue": (RolloutPoint(concurrency=2, groups=1, samples_per_group=2),),
        "mv-tools": (RolloutPoint(concurrency=2, groups=1, samples_per_group=2),),
    },
    saturation=(smoke_batch("smoke", "100 tokens/s per sequence, 8 sequences", 0.01),),
    memory_rollouts=64,
    memory_calls=4,
    cold_rounds=2,
    cold_rollouts=8,
    worker_counts=(1, 2),
    worker_points={
        "mv-arith": RolloutPoint(concurrency=8, groups=4, samples_per_group=2),
        "mv-dialogue": RolloutPoint(concurrency=2, groups=1, samples_per_group=2),
        "mv-tools": RolloutPoint(concurrency=2, groups=1, samples_per_group=2),
    },
    worker_saturation=(
        smoke_batch("smoke-short", "~0.1 s per request, ~10-token replies, 8 sequences", 0.01),
        smoke_batch(
            "smoke-long",
            "~0.1 s per request, 50-token replies, 8 sequences",
            0.002,
            min_new_tokens=50,
        ),
    ),
)

PRESETS: dict[str, Scale] = {scale.name: scale for scale in (STANDARD, SMOKE)}
