"""Episode-level integration: every fixture taskset, end to end, through real Verifiers 0.2.0.

Each test loads a fixture EnvConfig with ``EnvConfig.model_validate(tomllib...)``, builds the
real ``Environment``, and runs ``env.episode(task, ctx, n)`` inside ``env.serving()``. The
model context holds Verifiers' own ``TrainClient`` around the project's ``SGLangTransport``,
rendering with the exact Qwen3 tokenizer and speaking real HTTP to the loopback SGLang engine
(the only stand-in: there is no GPU here). The rollout function is not involved.

One engine serves the module; each test sets its policy and faults and puts them back after.
Every episode runs under a deadline, so a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import verifiers.v1 as vf
from verifiers.v1.clients.train import TrainClient
from verifiers.v1.errors import ProviderError

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport import SGLangTransport
from miles_verifiers.episodes.v02.clients import shared_renderer_pool
from miles_verifiers.protocol.messages import RendererSpecModel
from miles_verifiers_testkit.engine import FaultKind, FaultPlan, PolicyConfig
from miles_verifiers_testkit.miles import (
    FIXTURE_CONFIGS,
    MODEL,
    GenerateCall,
    RecordingEngine,
    serve_recording_engine,
)
from tests.fixture_tasksets import require_installed

require_installed()

MAX_RESPONSE_LEN = 256
# Wall-clock bound on one episode: far above what any of these takes, far below a hang.
EPISODE_DEADLINE_S = 60.0
QUICK_RETRY = {"max_retries": 1, "initial_backoff_s": 0.0, "max_backoff_s": 0.0}


# --- the engine, and what it saw ---------------------------------------------------------------


@pytest.fixture(scope="module")
def served_engine() -> Iterator[tuple[RecordingEngine, str]]:
    with serve_recording_engine(MODEL) as (engine, running):
        yield engine, running.base_url


@pytest.fixture
def engine(served_engine: tuple[RecordingEngine, str]) -> Iterator[RecordingEngine]:
    """The module's engine with clean knobs and counters; the knobs are reset afterwards too."""
    served, _ = served_engine
    served.reset(policy=PolicyConfig(accuracy=1.0))
    yield served
    served.wait_until_idle()
    served.reset()


@pytest.fixture
def engine_url(served_engine: tuple[RecordingEngine, str]) -> str:
    return served_engine[1]


# --- the client Verifiers talks to -------------------------------------------------------------


class ObservedTransport(SGLangTransport):
    """The real transport, also keeping each request body Renderers hands to ``post``."""

    def __init__(self, settings: TransportSettings) -> None:
        super().__init__(settings)
        self.renderer_bodies: list[dict[str, Any]] = []

    async def post(
        self, path: str, *, body: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> httpx.Response:
        self.renderer_bodies.append(json.loads(json.dumps(body)))
        return await super().post(path, body=body, **kwargs)


class ObservedTrainClient(TrainClient):
    """Verifiers' ``TrainClient``, also keeping each ``ProviderError`` it raises (Verifiers
    0.2.0 records no status on the trace, so the status is read here)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.provider_errors: list[ProviderError] = []

    async def get_response(self, *args: Any, **kwargs: Any) -> vf.Response:
        try:
            return await super().get_response(*args, **kwargs)
        except ProviderError as error:
            self.provider_errors.append(error)
            raise


@pytest.fixture(scope="module")
def renderer_pool() -> Any:
    """One Qwen3 renderer pool for every client of the module (tokenizer loading dominates)."""
    return shared_renderer_pool(
        RendererSpecModel(tokenizer_source=MODEL, identity=MODEL, pool_size=1)
    )


def make_client(
    renderer_pool: Any, url: str, **overrides: Any
) -> tuple[ObservedTrainClient, ObservedTransport]:
    values: dict[str, Any] = {
        "engine_url": url,
        "max_response_len": MAX_RESPONSE_LEN,
        "served_model_names": (MODEL,),
        "retry": QUICK_RETRY,
    }
    values.update(overrides)
    transport = ObservedTransport(TransportSettings(**values))
    client = ObservedTrainClient(transport, renderer_model_name=MODEL)  # type: ignore[arg-type]
    # TrainClient builds this pool lazily on first use; hand it the shared, identical one.
    client._pool = renderer_pool
    return client, transport


@pytest.fixture
def client(engine: RecordingEngine, engine_url: str, renderer_pool: Any) -> ObservedTrainClient:
    """A client of the module's engine (its knobs and counters clean) with default settings."""
    return make_client(renderer_pool, engine_url)[0]


def sampling(**extra: Any) -> vf.SamplingConfig:
    return vf.SamplingConfig.model_validate(
        {"temperature": 1.0, "top_p": 1.0, "max_tokens": MAX_RESPONSE_LEN, **extra}
    )


# --- episodes ---------------------------------------------------------------------------------


def load_config(name: str, **taskset: Any) -> vf.EnvConfig:
    """``fixtures/configs/<name>.toml`` with ``[taskset]`` keys replaced (e.g. fewer tasks)."""
    raw = tomllib.loads((FIXTURE_CONFIGS / f"{name}.toml").read_text())
    raw["taskset"] = {**raw["taskset"], **taskset}
    return vf.EnvConfig.model_validate(raw)


def run_episode(
    config: vf.EnvConfig,
    client: TrainClient,
    *,
    n: int = 1,
    task_index: int = 0,
    sampling_seeds: list[int] | None = None,
) -> list[vf.Trace]:
    """Run one episode of ``n`` rollouts of one task; each rollout may get its own seed."""

    async def scenario() -> list[vf.Trace]:
        env = vf.Environment(config)
        task = env.taskset.load()[task_index]
        ctx = vf.ModelContext(model=MODEL, client=client, sampling=sampling())
        try:
            async with env.serving():
                episode = env.episode(task, ctx, n=n)
                for rollout, seed in zip(episode.rollouts, sampling_seeds or [], strict=False):
                    rollout.ctx = vf.ModelContext(
                        model=MODEL, client=client, sampling=sampling(sampling_seed=seed)
                    )
                return await asyncio.wait_for(episode.run(), EPISODE_DEADLINE_S)
        finally:
            await client.close()

    return asyncio.run(scenario())


def completion_parts(branch: Any) -> tuple[list[int], list[float]]:
    """The sampled token ids of a branch and their logprobs, in order."""
    ids = [t for t, sampled in zip(branch.token_ids, branch.sampled_mask, strict=True) if sampled]
    logprobs = [
        lp for lp, sampled in zip(branch.logprobs, branch.sampled_mask, strict=True) if sampled
    ]
    return ids, logprobs


def engine_completion(exchange: GenerateCall) -> tuple[list[int], list[float]]:
    triples = exchange.response["meta_info"]["output_token_logprobs"]
    return [t for _, t, _ in triples], [lp for lp, _, _ in triples]


# --- mv-arith ---------------------------------------------------------------------------------


def test_arith_right_answer_is_rewarded_on_one_aligned_branch(
    engine: RecordingEngine, client: ObservedTrainClient
) -> None:
    (trace,) = run_episode(load_config("mv_arith", num_tasks=2), client)

    assert not trace.has_error, trace.errors
    assert trace.rewards == {"correct": 1.0}
    assert trace.num_branches == 1
    (branch,) = trace.branches
    assert len(branch.token_ids) == len(branch.sampled_mask) == len(branch.logprobs)
    (exchange,) = engine.calls()
    # The trainable tokens and logprobs are exactly what the engine sampled, prompt first.
    assert completion_parts(branch) == engine_completion(exchange)
    prompt_len = len(exchange.request["input_ids"])
    assert branch.token_ids[:prompt_len] == exchange.request["input_ids"]
    assert not any(branch.sampled_mask[:prompt_len])


def test_arith_wrong_answer_records_a_zero_reward(
    engine: RecordingEngine, client: ObservedTrainClient
) -> None:
    engine.set_policy(PolicyConfig(accuracy=0.0))
    (trace,) = run_episode(load_config("mv_arith", num_tasks=2), client)

    assert not trace.has_error, trace.errors
    assert trace.rewards == {"correct": 0.0}
    assert trace.num_branches == 1


# --- mv-group ---------------------------------------------------------------------------------


def test_group_rewards_land_on_every_trace_and_differ_across_seeds(
    engine: RecordingEngine, client: ObservedTrainClient
) -> None:
    engine.set_policy(PolicyConfig(accuracy=0.5))
    seeds = [0, 1, 2, 3, 4, 5]
    traces = run_episode(
        load_config("mv_group", num_tasks=2), client, n=len(seeds), sampling_seeds=seeds
    )

    assert len(traces) == len(seeds)
    assert all(not trace.has_error for trace in traces), [t.errors for t in traces]
    assert all(set(trace.rewards) == {"correct", "agreement"} for trace in traces)
    assert {trace.rewards["correct"] for trace in traces} == {0.0, 1.0}
    assert len({trace.reward for trace in traces}) >= 2
    seeds_sent = sorted(x.request["sampling_params"]["sampling_seed"] for x in engine.calls())
    assert seeds_sent == seeds


# --- mv-dialogue ------------------------------------------------------------------------------


@dataclass(frozen=True)
class DialogueRun:
    trace: vf.Trace
    exchanges: list[GenerateCall]
    rejected_calls: int
    renderer_bodies: list[dict[str, Any]]


@pytest.fixture(scope="module")
def dialogue_run(served_engine: tuple[RecordingEngine, str]) -> DialogueRun:
    """One three-round mv-dialogue episode (its user simulator is a subprocess, so it is run
    once and its record shared by the dialogue tests).

    The renderers run with Qwen3 thinking off: with thinking on, Qwen3's template drops earlier
    reasoning when a new user question arrives, so Renderers re-renders user turns instead of
    bridging them (tool results are bridged either way).
    """
    engine, url = served_engine
    engine.set_policy(PolicyConfig(accuracy=1.0))
    engine.set_faults(FaultPlan())
    engine.clear()
    pool = shared_renderer_pool(
        RendererSpecModel(
            tokenizer_source=MODEL,
            identity=MODEL,
            chat_template_kwargs_json='{"enable_thinking": false}',
            pool_size=1,
        )
    )
    client, transport = make_client(pool, url)
    try:
        (trace,) = run_episode(load_config("mv_dialogue", num_tasks=2, rounds=3), client)
    finally:
        engine.set_policy(PolicyConfig())
    return DialogueRun(
        trace=trace,
        exchanges=engine.calls(),
        rejected_calls=engine.stats().rejected_calls,
        renderer_bodies=transport.renderer_bodies,
    )


def test_dialogue_ends_on_user_done_with_one_branch(dialogue_run: DialogueRun) -> None:
    trace = dialogue_run.trace
    assert not trace.has_error, trace.errors
    assert trace.stop_condition == "user_done"
    assert trace.num_branches == 1
    assert trace.rewards == {"correct_rounds": 1.0}


def test_dialogue_every_turn_reaches_the_engine_and_none_is_rejected(
    dialogue_run: DialogueRun,
) -> None:
    assert len(dialogue_run.exchanges) == 3 == dialogue_run.trace.num_turns
    assert [x.status for x in dialogue_run.exchanges] == [200, 200, 200]
    assert dialogue_run.rejected_calls == 0


def test_dialogue_later_turns_extend_the_earlier_prompt_and_completion_exactly(
    dialogue_run: DialogueRun,
) -> None:
    exchanges = dialogue_run.exchanges
    for earlier, later in itertools.pairwise(exchanges):
        sent_before = earlier.request["input_ids"] + earlier.response["output_ids"]
        assert later.request["input_ids"][: len(sent_before)] == sent_before
    (branch,) = dialogue_run.trace.branches
    last = exchanges[-1]
    assert branch.token_ids == last.request["input_ids"] + last.response["output_ids"]
    assert len(branch.token_ids) == len(branch.sampled_mask) == len(branch.logprobs)


def test_dialogue_bridge_hint_reaches_the_transport_but_not_the_engine(
    dialogue_run: DialogueRun,
) -> None:
    exchanges = dialogue_run.exchanges
    hints = [
        body["sampling_params"].get("routed_experts_prompt_start")
        for body in dialogue_run.renderer_bodies
    ]
    # Verifiers marks a bridged turn with where the previous turn's tokens end.
    expected = [None] + [
        len(x.request["input_ids"]) + len(x.response["output_ids"]) - 1 for x in exchanges[:-1]
    ]
    assert hints == expected
    assert all("routed_experts_prompt_start" not in x.request["sampling_params"] for x in exchanges)


# --- mv-tools ---------------------------------------------------------------------------------


def test_tools_calculator_call_is_made_and_the_answer_rewarded(client: ObservedTrainClient) -> None:
    (trace,) = run_episode(load_config("mv_tools", num_tasks=2), client)

    assert not trace.has_error, trace.errors
    assert trace.metrics["tool_calls"] == 1.0
    assert trace.rewards == {"correct": 1.0}
    assert trace.num_branches == 1
    assert [call.name for m in trace.assistant_messages for call in m.tool_calls or []] == [
        "calculator_add"
    ]


# --- mv-compact -------------------------------------------------------------------------------


def test_compaction_leaves_several_branches_on_the_trace(client: ObservedTrainClient) -> None:
    (trace,) = run_episode(load_config("mv_compact", num_tasks=2), client)

    assert not trace.has_error, trace.errors
    assert trace.num_branches >= 2
    assert trace.rewards["correct_steps"] == 1.0
    for branch in trace.branches:
        assert len(branch.token_ids) == len(branch.sampled_mask) == len(branch.logprobs)


# --- mv-longprompt ----------------------------------------------------------------------------


def test_long_prompt_over_the_context_length_stops_cleanly_as_context_length(
    engine: RecordingEngine, engine_url: str, renderer_pool: Any
) -> None:
    client, _ = make_client(renderer_pool, engine_url, context_len=4096)
    (trace,) = run_episode(load_config("mv_longprompt", num_tasks=1), client)

    assert trace.stop_condition == "context_length"
    assert trace.is_truncated is True
    assert trace.has_error is False
    # Refused before sending: the engine never had to reject it.
    assert engine.calls() == []


# --- mv-faulty --------------------------------------------------------------------------------


def test_faulty_taskset_records_its_injected_reward_fault_as_a_task_error(
    engine: RecordingEngine, client: ObservedTrainClient
) -> None:
    config = load_config("mv_faulty", num_tasks=8, fault_rate=1.0, faults=["reward_error"])
    traces = run_episode(config, client, n=2)

    assert len(traces) == 2
    for trace in traces:
        assert [e.type for e in trace.errors] == ["TaskError"]
        assert "injected fault reward_error" in trace.error.message
        # The per-rollout reward is lost with the error; the group reward still lands.
        assert "correct" not in trace.rewards
        assert set(trace.rewards) == {"agreement"}
        assert trace.num_branches == 1


# --- engine faults ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "status", "sends", "says"),
    [
        # 5xx and a dropped connection are retried (max_retries=1), then given up on.
        pytest.param(
            FaultPlan.always(FaultKind.SERVER_ERROR, error_status=503), 503, 2, "HTTP 503", id="5xx"
        ),
        pytest.param(
            FaultPlan.always(FaultKind.DROP_CONNECTION), 503, 2, "could not talk", id="drop"
        ),
        pytest.param(FaultPlan.always(FaultKind.ABORT), 503, 1, "aborted", id="abort"),
        pytest.param(
            FaultPlan.always(FaultKind.MALFORMED_BODY), 502, 1, "unusable", id="malformed"
        ),
        # A read timeout is not resent: the engine may still be generating.
        pytest.param(
            FaultPlan.always(FaultKind.DELAY, delay_s=1.0), 504, 1, "timed out", id="delay"
        ),
    ],
)
def test_an_engine_fault_is_captured_on_the_trace_as_a_provider_error(
    engine: RecordingEngine,
    engine_url: str,
    renderer_pool: Any,
    plan: FaultPlan,
    status: int,
    sends: int,
    says: str,
) -> None:
    engine.set_faults(plan)
    client, transport = make_client(renderer_pool, engine_url, timeouts={"read_s": 0.3})
    (trace,) = run_episode(load_config("mv_arith", num_tasks=2), client)

    assert trace.has_error
    assert [e.type for e in trace.errors] == ["ProviderError"]
    assert says in trace.error.message
    assert trace.stop_condition == "error"
    assert trace.num_branches == 0
    assert [error.status_code for error in client.provider_errors] == [status]
    assert len(transport.renderer_bodies) == 1
    assert sum(engine.stats().faults.values()) == sends
