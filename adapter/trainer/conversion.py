"""Trace records to Miles samples.

A branch (a root-to-leaf path of a trace's message graph) is one token sequence: the prompt ends
at its first sampled token, the response after it has loss mask 1 on model-sampled tokens and 0
on tool/user/template tokens, with the engine's log-probs aligned. :class:`BranchPolicy` says
what a trace with several branches becomes (README: multi-branch traces).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Required, TypedDict, Unpack

from miles_verifiers.engine.errors import ENGINE_ABORTED_CODE, UNUSABLE_ANSWER_CODE
from miles_verifiers.errors import RolloutCallError, recorded_error_code
from miles_verifiers.protocol.records import (
    BranchRecord,
    NodeRecord,
    TaskRecord,
    TraceRecord,
    serialize_prompt,
)
from miles_verifiers.trainer.contract.compat import build_sample, contract

# Key under which the verifiers total reward is stored in a dict-shaped reward.
TOTAL_REWARD_KEY = "reward"

# Sample.metadata key holding what verifiers knows about the trace.
METADATA_KEY = "verifiers"


class BranchPolicy(str, Enum):
    """What a trace with several trainable branches becomes."""

    SIBLINGS = "siblings"  # one sample per trainable branch, sharing the trace's rollout_id
    REJECT = "reject"  # an error (MultipleBranchesError): one sample per trace


class ConversionError(RolloutCallError, ValueError):
    """A trace cannot be turned into a training sample."""


class MultipleBranchesError(ConversionError):
    """A trace's message graph has more than one branch (leaf)."""

    def __init__(self, trace_id: str, branch_count: int) -> None:
        self.trace_id = trace_id
        self.branch_count = branch_count
        super().__init__(
            f"trace {trace_id} has {branch_count} branches, but the Miles adapter trains on one "
            "token sequence per trace. A branch starts whenever a turn's prompt does not extend "
            "the tokens of the previous turn. Usual causes: (1) the harness or taskset compacts "
            "or rewrites the conversation history; (2) the chat template drops earlier "
            "reasoning (<think> blocks) when it re-renders the history, so the re-rendered "
            "turn no longer matches the sampled tokens. Fix: turn compaction/history rewriting "
            "off for training, and keep earlier reasoning in the rendered history (or turn "
            "thinking off, e.g. --apply-chat-template-kwargs '{\"enable_thinking\": false}')."
        )


class TokenMetadataMismatchError(ConversionError):
    """A branch's tokens, mask and log-probs do not line up."""


class MissingLogprobsError(ConversionError):
    """A sampled node carries fewer log-probs than sampled tokens."""


class RewardKeyError(ConversionError):
    """``--reward-key`` names a reward the trace does not have."""


def looks_like_engine_abort(error: Any) -> bool:
    """True for a trace error that records an SGLang abort rather than a failure."""
    return recorded_error_code(error) == ENGINE_ABORTED_CODE


def looks_like_contract_breach(error: Any) -> bool:
    """True for a trace error recording an engine answer the transport refused as untrustworthy."""
    return recorded_error_code(error) == UNUSABLE_ANSWER_CODE


def trace_reward(
    trace: TraceRecord | None,
    reward_key: str | None,
    *,
    key_flag: str = "--reward-key",
    strict: bool = True,
) -> float | dict[str, float]:
    """The reward in the shape ``--reward-key`` asks for.

    No key: the verifiers total as a float. A key: every reward component plus the total under
    ``"reward"`` (shadowing a component of that name). A clean trace must have the key (else
    :class:`RewardKeyError` naming ``key_flag``); a failed trace, no trace, or ``strict=False``
    reads 0.0 for a missing one.
    """
    total = float(trace.reward) if trace is not None else 0.0
    if not reward_key:
        return total
    rewards = {k: float(v) for k, v in (trace.rewards.items() if trace is not None else ())}
    rewards[TOTAL_REWARD_KEY] = total
    if reward_key not in rewards:
        if strict and trace is not None and not trace.failed:
            raise RewardKeyError(
                f"{key_flag} {reward_key!r} is not a reward of trace {trace.id}; it has "
                f'{sorted(rewards)}. Fix: pass one of those as {key_flag} ("reward" is the '
                f"weighted total), or leave {key_flag} unset to use the total."
            )
        rewards[reward_key] = 0.0
    return rewards


# Stop conditions that end a clean trace short (Miles trains them as TRUNCATED), as 0.2 and 0.4
# name them; a 0.4 agent timeout is a stop too (``is_timeout``). Any other clean stop is
# COMPLETED unless its last turn hit the length limit (``is_truncated``).
TRUNCATING_STOPS = frozenset(
    {
        "max_turns",
        "max_input_tokens",
        "max_output_tokens",
        "max_total_tokens",
        "context_length",
        "harness_timeout",
        "compaction_failed",
    }
)


def sample_status(trace: TraceRecord | None, status_enum: Any) -> Any:
    """ABORTED (engine abort) > FAILED (any other failure, or no trace) > TRUNCATED > COMPLETED."""
    if trace is None:
        return status_enum.FAILED
    if trace.failed:
        return status_enum.ABORTED if looks_like_engine_abort(trace.error) else status_enum.FAILED
    if trace.is_timeout or trace.stop_condition in TRUNCATING_STOPS or trace.is_truncated:
        return status_enum.TRUNCATED
    return status_enum.COMPLETED


def _branch_info(
    branch: BranchRecord, trace: TraceRecord, which: dict[str, int] | None
) -> dict[str, Any]:
    """The branch; the error of a failed trace, a timeout, the errors a recovered trace or
    episode kept; ``which`` sibling it is, if any."""
    info: dict[str, Any] = {"branch_index": branch.index, "num_turns": branch.num_turns}
    if trace.failed and trace.error is not None:
        info["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    if trace.is_timeout:
        info["timeout"] = True
    if trace.recovered_errors:
        info["recovered_errors"] = trace.recovered_errors
    if trace.episode_recovered_errors:
        info["episode_recovered_errors"] = trace.episode_recovered_errors
    if which is not None:
        info["branch"] = which
    return info


def _check_logprobs(trace_id: str, nodes: Sequence[NodeRecord]) -> None:
    # A sampled node without its log-probs reads 0.0 (probability 1): silently wrong to train on.
    for position, node in enumerate(nodes):
        sampled = sum(1 for m in node.mask if m)
        if sampled and len(node.logprobs) != sampled:
            raise MissingLogprobsError(
                f"trace {trace_id}: node {position} of its branch has {sampled} sampled tokens "
                f"but {len(node.logprobs)} log-probs. Fix: generate through a client that "
                "returns per-token log-probs (the Miles SGLang transport does); evaluation-only "
                "clients cannot produce training samples."
            )


@dataclass(frozen=True)
class BranchTokens:
    tokens: list[int]
    prompt_length: int
    loss_mask: list[int]
    rollout_log_probs: list[float]


def _split(tokens: list[int], mask: Sequence[Any], logprobs: Sequence[float]) -> BranchTokens:
    """Prompt up to the first token ``mask`` trains, response (``mask`` as its loss mask) after."""
    first = next((i for i, m in enumerate(mask) if m), len(tokens))
    return BranchTokens(
        tokens,
        first,
        [int(bool(m)) for m in mask[first:]],
        [float(lp) for lp in logprobs[first:]],
    )


def branch_tokens(trace_id: str, branch: BranchRecord) -> BranchTokens:
    """Split a branch at its first sampled token into prompt and response."""
    _check_logprobs(trace_id, branch.nodes)
    tokens = list(branch.token_ids)
    mask = list(branch.sampled_mask)
    logprobs = list(branch.logprobs)
    if not (len(tokens) == len(mask) == len(logprobs)):
        raise TokenMetadataMismatchError(
            f"trace {trace_id}: its branch has {len(tokens)} tokens, {len(mask)} mask entries "
            f"and {len(logprobs)} log-probs; all three must match. This is a verifiers/renderer "
            "bug: report it with the trace."
        )
    return _split(tokens, mask, logprobs)


def fresh_mask(branch: BranchRecord, trained: set[Hashable]) -> list[bool]:
    """The branch's sampled mask less the nodes in ``trained``; adds the rest to it. A node is
    known by its ``node_id``, else (a worker that sends no ids) by the path from the root up to
    and including it, so equal keys in two branches mean the same node."""
    mask: list[bool] = []
    path: Hashable = None
    cursor = 0
    tokens = list(branch.token_ids)
    for node in branch.nodes:
        width = len(node.mask)
        span = tuple(tokens[cursor : cursor + width])
        path = hash((path, span, tuple(node.mask), tuple(node.logprobs)))
        cursor += width
        key = ("node", node.node_id) if node.node_id is not None else ("path", path)
        seen = key in trained
        mask.extend(bool(m) and not seen for m in node.mask)
        if any(node.mask):
            trained.add(key)
    return mask


def trainable_branches(
    trace_id: str, branches: Sequence[BranchRecord]
) -> list[tuple[BranchRecord, BranchTokens]]:
    """The trainable branches in graph order, each sampled token trained once overall: a branch
    with nothing left to train, or marked untrainable by Verifiers, is left out."""
    trained: set[Hashable] = set()
    chosen = []
    for position, branch in enumerate(branches):
        if not branch.trainable:
            continue
        tokens = branch_tokens(trace_id, branch).tokens
        mask = fresh_mask(branch, trained)
        if len(mask) != len(tokens):
            raise TokenMetadataMismatchError(
                f"trace {trace_id}: branch {position} has {len(tokens)} tokens but its "
                f"nodes' masks cover {len(mask)}. This is a verifiers/renderer bug: report it "
                "with the trace."
            )
        # Turns an earlier branch trains end up before the response: context, never trained.
        split = _split(tokens, mask, list(branch.logprobs))
        if split.loss_mask:
            chosen.append((branch, split))
    return chosen


def _branches(trace: TraceRecord, policy: BranchPolicy) -> list[BranchRecord]:
    branches = list(trace.branches)
    if policy is BranchPolicy.REJECT and len(branches) > 1:
        raise MultipleBranchesError(trace.id, len(branches))
    return branches


class SampleFields(TypedDict, total=False):
    """What the conversion functions put in every sample besides the trace's own data."""

    group_index: Required[int]
    reward_key: str | None
    weight_version: int | str | None
    sample_cls: type | None  # None: the contract's Sample


def trace_to_samples(
    trace: TraceRecord,
    *,
    index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    **fields: Unpack[SampleFields],
) -> list[Any]:
    """The training samples of ``trace``; empty when no model turn was committed.

    ``reject``: one sample (:class:`MultipleBranchesError` for several branches). ``siblings``:
    one per trainable branch, all with ``rollout_id = index`` and the trace's one reward, and
    ``metadata["verifiers"]["branch"]`` saying which of how many.
    """
    branches = _branches(trace, policy)
    chosen = trainable_branches(trace.id, branches)
    siblings = policy is BranchPolicy.SIBLINGS
    return [
        new_sample(
            trace,
            trace.task,
            split,
            _branch_info(
                branch,
                trace,
                {"number": number, "of": len(chosen), "graph_branches": len(branches)}
                if siblings
                else None,
            ),
            index=index,
            rollout_id=index if siblings else None,
            **fields,
        )
        for number, (branch, split) in enumerate(chosen)
    ]


def trace_to_sample(
    trace: TraceRecord,
    *,
    index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    **fields: Unpack[SampleFields],
) -> Any | None:
    """One sample standing for the whole trace (an evaluation entry), or None when it has no
    trainable branch: its last trainable branch with every sampled token it holds."""
    branches = _branches(trace, policy)
    candidates = [b for b in branches if b.trainable]
    if not candidates:
        return None
    branch = candidates[-1]
    return new_sample(
        trace,
        trace.task,
        branch_tokens(trace.id, branch),
        _branch_info(
            branch, trace, {"graph_branches": len(branches)} if len(branches) > 1 else None
        ),
        index=index,
        **fields,
    )


def new_sample(
    trace: TraceRecord | None,
    task: TaskRecord,
    split: BranchTokens | None,
    info: dict[str, Any],
    *,
    index: int,
    rollout_id: int | None = None,
    status: str | None = None,
    group_index: int,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
) -> Any:
    """A sample of ``split`` (None: an empty sample, no tokens, reward read leniently) with
    ``info`` in its metadata; its status from the trace unless ``status`` names one."""
    cls: Any = sample_cls if sample_cls is not None else contract().Sample
    tokens = split or BranchTokens([], 0, [], [])
    info = {
        "trace_id": trace.id if trace is not None else None,
        "task_index": task.idx,
        "rewards": dict(trace.rewards) if trace is not None else {},
        "metrics": dict(trace.metrics) if trace is not None else {},
        "stop_condition": trace.stop_condition if trace is not None else None,
        **info,
    }
    sample = build_sample(
        cls,
        routing_key=info["trace_id"],
        group_index=group_index,
        index=index,
        rollout_id=rollout_id,
        # A list of its own per sample (hooks may edit one), as the prompt of each trace had.
        prompt=serialize_prompt(task.prompt),
        tokens=tokens.tokens,
        response=trace.last_reply if trace is not None and split is not None else "",
        response_length=len(tokens.tokens) - tokens.prompt_length,
        label=task.label,
        reward=trace_reward(trace, reward_key, strict=split is not None),
        loss_mask=tokens.loss_mask,
        rollout_log_probs=tokens.rollout_log_probs,
        weight_versions=[] if weight_version is None else [str(weight_version)],
        status=sample_status(trace, cls.Status) if status is None else getattr(cls.Status, status),
        metadata={METADATA_KEY: info},
    )
    if trace is None or split is None:
        return sample
    # Where Miles reads rollout/prefix_cache_hit_rate (a Miles without the field: left as is).
    cache = getattr(sample, "prefix_cache_info", None)
    if cache is not None and trace.prefix_cache is not None:
        cache.cached_tokens = trace.prefix_cache.cached_tokens
        cache.total_prompt_tokens = trace.prefix_cache.prompt_tokens
    sample.validate()
    return sample


@dataclass(frozen=True)
class ConvertedGroup:
    """The samples of one task's traces, per rollout in rollout order; an empty tuple where a
    trace had nothing to train."""

    per_trace: tuple[tuple[Any, ...], ...]

    @property
    def samples(self) -> list[Any]:
        """Every sample, siblings included, in rollout then branch order."""
        return [s for rollout in self.per_trace for s in rollout]

    @property
    def representatives(self) -> list[Any]:
        """One sample per rollout (its last trainable branch), where Miles expects one."""
        return [rollout[-1] for rollout in self.per_trace if rollout]

    @property
    def rollouts(self) -> list[list[Any]]:
        """One list per rollout that has samples: its siblings in branch order."""
        return [list(rollout) for rollout in self.per_trace if rollout]

    @property
    def complete(self) -> bool:
        return all(self.per_trace)


def training_output(groups: Sequence[ConvertedGroup]) -> list[list[Any]]:
    """A training call's groups as Miles' output holds them: flat lists of samples, or, once a
    rollout of the call has siblings, every group as one list per rollout (Miles' manager
    flattens a whole level at a time, so all groups must nest alike)."""
    if any(len(rollout) > 1 for group in groups for rollout in group.per_trace):
        return [group.rollouts for group in groups]
    return [group.samples for group in groups]


def convert_group(
    traces: Sequence[TraceRecord],
    *,
    first_index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    **fields: Unpack[SampleFields],
) -> ConvertedGroup:
    """Convert one task's traces; the i-th gets ``index = first_index + i`` (rollout order)."""
    return ConvertedGroup(
        tuple(
            tuple(trace_to_samples(trace, index=first_index + position, policy=policy, **fields))
            for position, trace in enumerate(traces)
        )
    )
