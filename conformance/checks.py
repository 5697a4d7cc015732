"""Assertions shared by the property tests: what a valid Miles output looks like.

Each raises ``AssertionError`` with a message that says which sample broke which rule, so a
failing example in the report reads as a contract violation, not as a stack trace.
"""

from __future__ import annotations

from argparse import Namespace
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from miles_verifiers_conformance.miles_side import flatten

TRAINABLE_STATUSES = frozenset({"completed", "truncated"})


def status_name(sample: Any) -> str:
    status = sample.status
    return str(getattr(status, "value", status)).lower()


def check_train_output(output: Any, args: Namespace, contract: Any) -> list[list[Any]]:
    """TRN-1/TRN-2: the typed output, its shape, and every sample's own consistency."""
    groups = check_train_shape(output, args, contract)
    check_train_samples(groups)
    return groups


def check_train_shape(output: Any, args: Namespace, contract: Any) -> list[list[Any]]:
    """TRN-1: the typed output holds --rollout-batch-size groups of --n-samples-per-prompt."""
    assert isinstance(output, contract.RolloutFnTrainOutput), (
        f"a train call must return RolloutFnTrainOutput, got {type(output).__name__}"
    )
    assert output.metrics is None or isinstance(output.metrics, dict), "metrics must be a dict"
    groups = output.samples
    assert isinstance(groups, list), "samples must be a list of groups"
    assert len(groups) == args.rollout_batch_size, (
        f"expected {args.rollout_batch_size} groups (--rollout-batch-size), got {len(groups)}"
    )
    for position, group in enumerate(groups):
        count = len(rollouts_of(group))
        assert count == args.n_samples_per_prompt, (
            f"group {position} holds {count} rollouts, expected {args.n_samples_per_prompt} "
            "(--n-samples-per-prompt)"
        )
    return [flatten(g) if isinstance(g, list) else [g] for g in groups]


def rollouts_of(group: Any) -> list[list[Any]]:
    """A group's rollouts: a sample is one rollout, a list of samples is one rollout's
    siblings (the shape Miles' compact-rollout check reads at depth 2)."""
    if not isinstance(group, list):
        return [[group]]
    return [flatten(item) if isinstance(item, list) else [item] for item in group]


def check_train_samples(groups: Sequence[Sequence[Any]]) -> None:
    """TRN-2: each sample trainable, with its prompt/response token layout consistent."""
    for position, group in enumerate(groups):
        for sample in group:
            check_sample(sample, where=f"group {position}")
            assert status_name(sample) in TRAINABLE_STATUSES, (
                f"group {position}: a train sample has status {status_name(sample)}; only "
                "completed or truncated samples may be trained on"
            )


def check_sample(sample: Any, *, where: str = "") -> None:
    """BR-3/TRN-2: Sample.validate() and the prompt/response token layout."""
    label = f"{where}: " if where else ""
    try:
        sample.validate()
    except AssertionError as error:
        raise AssertionError(f"{label}Sample.validate() failed: {error}") from None
    n = sample.response_length
    assert n > 0, f"{label}a trainable sample has an empty response"
    assert len(sample.tokens) > n, (
        f"{label}tokens ({len(sample.tokens)}) must hold a prompt before the response ({n})"
    )
    assert sample.loss_mask is not None and len(sample.loss_mask) == n, (
        f"{label}loss_mask must cover the response"
    )
    assert sample.rollout_log_probs is not None and len(sample.rollout_log_probs) == n, (
        f"{label}rollout_log_probs must cover the response"
    )
    assert set(sample.loss_mask) <= {0, 1}, f"{label}loss_mask holds values other than 0 and 1"
    assert sample.loss_mask[0] == 1, f"{label}the response must start at the first sampled token"


def sampled_runs(sample: Any) -> list[tuple[int, int]]:
    """Absolute ``[start, end)`` token ranges of the sample's sampled (mask 1) tokens."""
    prompt_length = len(sample.tokens) - sample.response_length
    runs: list[tuple[int, int]] = []
    start: int | None = None
    for offset, flag in enumerate(list(sample.loss_mask) + [0]):
        if flag and start is None:
            start = offset
        elif not flag and start is not None:
            runs.append((prompt_length + start, prompt_length + offset))
            start = None
    return runs


def trained_replies(sample: Any) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Each trained run of a sample as (the tokens before it, its tokens): one engine reply."""
    return [
        (tuple(sample.tokens[:start]), tuple(sample.tokens[start:end]))
        for start, end in sampled_runs(sample)
    ]


def check_untrained_replies(
    samples: Sequence[Any], calls: Sequence[Any], untrainable: Callable[[Any], bool], what: str
) -> None:
    """The engine replies ``untrainable`` picks (by their call) are trained in no sample, and
    every other reply is trained exactly once; ``what`` names the picked replies."""
    replies = Counter((tuple(c.input_ids), tuple(c.output[0])) for c in calls)
    picked = {(tuple(c.input_ids), tuple(c.output[0])) for c in calls if untrainable(c)}
    trained = Counter(reply for sample in samples for reply in trained_replies(sample))

    assert picked, f"the engine answered no {what}; the test proves nothing"
    assert not picked & trained.keys(), f"{len(picked & trained.keys())} {what} are trained"
    kept = Counter({reply: n for reply, n in replies.items() if reply not in picked})
    assert trained == kept, (
        f"every reply but the {what} must be trained exactly once: "
        f"{sum((kept - trained).values())} untrained, {sum((trained - kept).values())} extra"
    )


def sample_fingerprint(sample: Any) -> tuple[Any, ...]:
    """What must be identical between two runs that should produce the same sample."""
    return (
        sample.group_index,
        sample.index,
        str(sample.prompt),
        tuple(sample.tokens),
        sample.response_length,
        tuple(sample.loss_mask or ()),
        tuple(sample.rollout_log_probs or ()),
        repr(sample.reward),
        status_name(sample),
        sample.label,
    )


def output_fingerprint(groups: Sequence[Sequence[Any]]) -> list[list[tuple[Any, ...]]]:
    return [[sample_fingerprint(s) for s in group] for group in groups]


def check_round_trip(sample: Any, calls: Sequence[Any], *, where: str = "") -> None:
    """TRP-3: every sampled run of the sample is one engine reply, ids and logprobs exact.

    ``calls`` are the engine's logged ``/generate`` calls (``world.GenerateCall``). A run
    ``[start, end)`` must be the output of a call whose prompt was exactly the sample's tokens
    before ``start``, with the same logprobs.
    """
    label = f"{where}: " if where else ""
    prompt_length = len(sample.tokens) - sample.response_length
    for start, end in sampled_runs(sample):
        ids = list(sample.tokens[start:end])
        logprobs = list(sample.rollout_log_probs[start - prompt_length : end - prompt_length])
        candidates = [
            c for c in calls if c.input_ids == list(sample.tokens[:start]) and c.output[0] == ids
        ]
        assert candidates, (
            f"{label}sampled tokens [{start}, {end}) do not match any engine reply to the prompt before them"
        )
        assert any(c.output[1] == logprobs for c in candidates), (
            f"{label}the logprobs of sampled tokens [{start}, {end}) differ from the engine's"
        )
