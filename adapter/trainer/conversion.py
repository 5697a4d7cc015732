"""Verifiers traces to Miles samples.

A branch (root-to-leaf path of a trace's message graph) is a token sequence Miles trains on.
The sample's prompt ends where the branch's first sampled token starts; everything after it is
the "response", with a loss mask that is 1 on model-sampled tokens and 0 on tool/user/template
tokens of later turns, and the engine's log-probs aligned to it.

How a trace with several branches is treated is the :class:`BranchPolicy`: ``reject`` refuses
it (one sample per trace), ``siblings`` makes every trainable branch a sample sharing the
trace's ``rollout_id`` and reward. A sampled turn several branches share is trained in the
first branch that holds it only; later branches keep it as context with loss mask 0.

Functions here are pure over trace records (:class:`~miles_verifiers.protocol.records.TraceRecord`
and its branch and node records: what the episode side, in this process or a worker, made of
Verifiers' ``Trace``) and return the contract ``Sample`` chosen by
:mod:`miles_verifiers.trainer.contract.compat` unless a class is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, cast

from miles_verifiers.engine.errors import ENGINE_ABORTED_CODE, UNUSABLE_ANSWER_CODE
from miles_verifiers.errors import RolloutCallError, recorded_error_code
from miles_verifiers.protocol.records import (
    BranchRecord,
    NodeRecord,
    TraceRecord,
    serialize_prompt,
)
from miles_verifiers.trainer.contract.compat import build_sample, contract
from miles_verifiers.trainer.metrics import DROP_EMPTY_TRACE

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


# -- pieces -----------------------------------------------------------------------------------


def looks_like_engine_abort(error: Any) -> bool:
    """True for a trace error that records an SGLang abort rather than a failure."""
    return recorded_error_code(error) == ENGINE_ABORTED_CODE


def looks_like_contract_breach(error: Any) -> bool:
    """True for a trace error recording an engine answer the transport refused as untrustworthy
    (positive logprobs, too many tokens, ids outside the vocabulary, misaligned metadata)."""
    return recorded_error_code(error) == UNUSABLE_ANSWER_CODE


def trace_reward(
    trace: TraceRecord, reward_key: str | None, *, key_flag: str = "--reward-key"
) -> float | dict[str, float]:
    """The reward in the shape ``--reward-key`` asks for.

    No key: the verifiers total (sum of weighted rewards) as a float. A key: every reward
    component plus the total under ``"reward"`` (a component of that name is shadowed by the
    total). A clean trace must have the key; an errored trace, whose rewards verifiers left
    empty and whose total is 0, reads 0.0 for it. ``key_flag`` is the flag named in the
    error (evaluation reads ``--eval-reward-key``).
    """
    total = float(trace.reward)
    if not reward_key:
        return total
    rewards = {name: float(value) for name, value in trace.rewards.items()}
    rewards[TOTAL_REWARD_KEY] = total
    if reward_key not in rewards:
        if trace.failed:
            rewards[reward_key] = 0.0
        else:
            raise RewardKeyError(
                f"{key_flag} {reward_key!r} is not a reward of trace {trace.id}; it has "
                f'{sorted(rewards)}. Fix: pass one of those as {key_flag} ("reward" is the '
                f"weighted total), or leave {key_flag} unset to use the total."
            )
    return rewards


# Verifiers' stop conditions, as the worker's Verifiers names them, that end a clean trace
# short of where it would have gone: Miles trains those as TRUNCATED. 0.2.0: the turn and token
# caps, ``context_length`` (an overlong prompt) and ``harness_timeout``; 0.4.0 drops the last
# two (an overlong prompt is a provider error there) and adds ``compaction_failed``. A 0.4 agent
# timeout is a stop, not a failure: the trace stays ok and is scored, and Verifiers stamps it
# ``is_timeout``, which is read as such (TRUNCATED, the reason in the metadata). A trace
# Verifiers judged failed (not ok; 0.2: an error recorded) is FAILED, or ABORTED for an engine
# abort; a trace that recovered under retries is not failed. Any other clean stop
# (``agent_completed``, an environment's own ``@stop`` such as ``user_done``) is COMPLETED,
# unless its last turn hit the length limit (the worker's ``is_truncated`` says so).
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


def sample_status(trace: TraceRecord, status_enum: Any, is_abort: Callable[[Any], bool]) -> Any:
    """ABORTED (engine abort) > FAILED (any other failure) > TRUNCATED > COMPLETED."""
    if trace.failed:
        return status_enum.ABORTED if is_abort(trace.error) else status_enum.FAILED
    if trace.is_timeout or trace.stop_condition in TRUNCATING_STOPS or trace.is_truncated:
        return status_enum.TRUNCATED
    return status_enum.COMPLETED


def verdict_metadata(trace: TraceRecord) -> dict[str, Any]:
    """What the sample says of Verifiers' verdicts: the error of a failed trace, a timeout,
    and how many errors a recovered trace or episode kept from its retried attempts."""
    info: dict[str, Any] = {}
    if trace.failed and trace.error is not None:
        info["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    if trace.is_timeout:
        info["timeout"] = True
    if trace.recovered_errors:
        info["recovered_errors"] = trace.recovered_errors
    if trace.episode_recovered_errors:
        info["episode_recovered_errors"] = trace.episode_recovered_errors
    return info


def _check_logprobs(trace_id: str, nodes: Sequence[NodeRecord]) -> None:
    # Branch.logprobs fills 0.0 where a sampled node has no log-prob; a 0.0 log-prob claims
    # probability 1, so training on it would be silently wrong.
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

    @property
    def response_length(self) -> int:
        return len(self.tokens) - self.prompt_length


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
    first = next((i for i, sampled in enumerate(mask) if sampled), len(tokens))
    return BranchTokens(
        tokens=tokens,
        prompt_length=first,
        loss_mask=[int(bool(m)) for m in mask[first:]],
        rollout_log_probs=[float(lp) for lp in logprobs[first:]],
    )


def node_keys(branch: BranchRecord) -> list[Hashable]:
    """One identity per node of ``branch``: equal keys in two branches of a trace mean the
    same node of its message graph.

    A node is known by its ``node_id``. A record from a worker that sends no ids falls back on
    the path: a node is the same as another when everything from the root up to and including
    it is.
    """
    keys: list[Hashable] = []
    path: Hashable = None
    cursor = 0
    tokens = list(branch.token_ids)
    for node in branch.nodes:
        width = len(node.mask)
        span = tuple(tokens[cursor : cursor + width])
        path = hash((path, span, tuple(node.mask), tuple(node.logprobs)))
        cursor += width
        node_id = node.node_id
        keys.append(("node", node_id) if node_id is not None else ("path", path))
    return keys


def fresh_mask(branch: BranchRecord, trained: set[Hashable]) -> list[bool]:
    """The branch's sampled mask less the nodes in ``trained``; adds the rest to it."""
    mask: list[bool] = []
    for node, key in zip(branch.nodes, node_keys(branch), strict=True):
        seen = key in trained
        mask.extend(bool(m) and not seen for m in node.mask)
        if any(node.mask):
            trained.add(key)
    return mask


@dataclass(frozen=True)
class TrainableBranch:
    """A branch to train: its position among the trace's branches and its split tokens
    (the loss mask already 0 on sampled turns an earlier branch trains)."""

    branch: BranchRecord
    position: int
    split: BranchTokens


def is_trainable(branch: BranchRecord) -> bool:
    """Verifiers marks untrainable branches (>= 0.4: an abandoned compaction attempt); older
    versions have no such flag and their records say every branch is trainable."""
    return branch.trainable


def trainable_branches(trace_id: str, branches: Sequence[BranchRecord]) -> list[TrainableBranch]:
    """The trainable branches in graph order, each sampled token trained once overall.

    A branch whose sampled turns earlier branches already train, and an untrainable branch,
    are left out (an untrainable branch's turns stay trainable in a later branch holding them).
    """
    trained: set[Hashable] = set()
    chosen: list[TrainableBranch] = []
    for position, branch in enumerate(branches):
        if not is_trainable(branch):
            continue
        split = branch_tokens(trace_id, branch)
        mask = fresh_mask(branch, trained)
        if len(mask) != len(split.tokens):
            raise TokenMetadataMismatchError(
                f"trace {trace_id}: branch {position} has {len(split.tokens)} tokens but its "
                f"nodes' masks cover {len(mask)}. This is a verifiers/renderer bug: report it "
                "with the trace."
            )
        first = next((i for i, m in enumerate(mask) if m), None)
        if first is None:
            continue
        # Turns an earlier branch trains end up before the response: context, never trained.
        split = replace(
            split,
            prompt_length=first,
            loss_mask=[int(m) for m in mask[first:]],
            rollout_log_probs=[float(lp) for lp in list(branch.logprobs)[first:]],
        )
        chosen.append(TrainableBranch(branch, position, split))
    return chosen


# -- one trace, one group ---------------------------------------------------------------------


def trace_to_samples(
    trace: TraceRecord,
    *,
    group_index: int,
    index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    is_abort: Callable[[Any], bool] = looks_like_engine_abort,
) -> list[Any]:
    """The samples for ``trace``: empty when it has nothing to train (no model turn was
    committed, e.g. an overlong first prompt), which the caller should treat as an empty trace.

    ``reject``: one sample, and :class:`MultipleBranchesError` for several branches.
    ``siblings``: one sample per trainable branch (see :func:`trainable_branches`), all with
    ``rollout_id = index`` (the rollout's position, so stable across calls and resumes), the
    trace's one reward, and ``metadata["verifiers"]["branch"]`` saying which of how many.
    ``weight_version`` is the engine weight version the rollout ran under; ``extra_metadata``
    is merged into ``Sample.metadata``.
    """
    branches = list(trace.branches)
    if not branches:
        return []
    if policy is BranchPolicy.REJECT and len(branches) > 1:
        raise MultipleBranchesError(trace.id, len(branches))
    chosen = trainable_branches(trace.id, branches)
    siblings = policy is BranchPolicy.SIBLINGS
    made = []
    for number, trainable in enumerate(chosen):
        branch_info = (
            {"branch": {"number": number, "of": len(chosen), "graph_branches": len(branches)}}
            if siblings
            else {}
        )
        made.append(
            _branch_sample(
                trace,
                trainable.branch,
                trainable.split,
                group_index=group_index,
                index=index,
                rollout_id=index if siblings else None,
                reward_key=reward_key,
                weight_version=weight_version,
                sample_cls=sample_cls,
                extra_metadata=extra_metadata,
                branch_info=branch_info,
                is_abort=is_abort,
            )
        )
    return made


def trace_to_sample(
    trace: TraceRecord,
    *,
    group_index: int,
    index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    is_abort: Callable[[Any], bool] = looks_like_engine_abort,
) -> Any | None:
    """One sample standing for the whole trace (an evaluation entry), or None when it has no
    branch. ``reject`` refuses several branches; ``siblings`` takes the last trainable branch
    (the latest context, where the rollout ended) with every sampled token it holds."""
    branches = list(trace.branches)
    if not branches:
        return None
    if policy is BranchPolicy.REJECT and len(branches) > 1:
        raise MultipleBranchesError(trace.id, len(branches))
    candidates = [b for b in branches if is_trainable(b)]
    if not candidates:
        return None
    branch = candidates[-1]
    return _branch_sample(
        trace,
        branch,
        branch_tokens(trace.id, branch),
        group_index=group_index,
        index=index,
        rollout_id=None,
        reward_key=reward_key,
        weight_version=weight_version,
        sample_cls=sample_cls,
        extra_metadata=extra_metadata,
        branch_info={"branch": {"graph_branches": len(branches)}} if len(branches) > 1 else {},
        is_abort=is_abort,
    )


def _branch_sample(
    trace: TraceRecord,
    branch: BranchRecord,
    split: BranchTokens,
    *,
    group_index: int,
    index: int,
    rollout_id: int | None,
    reward_key: str | None,
    weight_version: int | str | None,
    sample_cls: type | None,
    extra_metadata: Mapping[str, Any] | None,
    branch_info: Mapping[str, Any],
    is_abort: Callable[[Any], bool],
) -> Any:
    cls = sample_cls if sample_cls is not None else contract().Sample
    task = trace.task

    info: dict[str, Any] = {
        "trace_id": trace.id,
        "branch_index": branch.index,
        "task_index": task.idx,
        "rewards": dict(trace.rewards),
        "metrics": dict(trace.metrics),
        "stop_condition": trace.stop_condition,
        "num_turns": branch.num_turns,
        **branch_info,
    }
    info.update(verdict_metadata(trace))
    metadata: dict[str, Any] = {METADATA_KEY: info}
    if extra_metadata:
        metadata.update(extra_metadata)

    sample = build_sample(
        cls,
        routing_key=trace.id,
        group_index=group_index,
        index=index,
        rollout_id=rollout_id,
        # A list of its own per sample (hooks may edit one), as the prompt of each trace had.
        prompt=serialize_prompt(task.prompt),
        tokens=split.tokens,
        response=trace.last_reply,
        response_length=split.response_length,
        label=task.label,
        reward=trace_reward(trace, reward_key),
        loss_mask=split.loss_mask,
        rollout_log_probs=split.rollout_log_probs,
        weight_versions=[] if weight_version is None else [str(weight_version)],
        status=sample_status(trace, cast(Any, cls).Status, is_abort),
        metadata=metadata,
    )
    record_prefix_cache(sample, trace.prefix_cache)
    sample.validate()
    return sample


def record_prefix_cache(sample: Any, usage: Any) -> None:
    """Put the engine's prompt and cached-token counts of a trace on its sample, where Miles
    reads them for ``rollout/prefix_cache_hit_rate`` (samples of a Miles without the field,
    or traces the engine never answered, are left as they are)."""
    info = getattr(sample, "prefix_cache_info", None)
    if info is None or usage is None:
        return
    info.cached_tokens = usage.cached_tokens
    info.total_prompt_tokens = usage.prompt_tokens


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
        """One sample per rollout (its last trainable branch): what stands for the rollout
        where Miles expects one sample per rollout (dynamic filter, per-rollout metrics)."""
        return [rollout[-1] for rollout in self.per_trace if rollout]

    @property
    def rollouts(self) -> list[list[Any]]:
        """One list per rollout that has samples: its siblings in branch order."""
        return [list(rollout) for rollout in self.per_trace if rollout]

    @property
    def has_siblings(self) -> bool:
        """Whether a rollout of the group has more than one sample."""
        return any(len(rollout) > 1 for rollout in self.per_trace)

    @property
    def complete(self) -> bool:
        return all(self.per_trace)

    @property
    def drop_reason(self) -> str | None:
        """Why training should drop this group (None: keep it)."""
        return None if self.complete else DROP_EMPTY_TRACE


def training_output(groups: Sequence[ConvertedGroup]) -> list[list[Any]]:
    """A training call's groups as Miles' output holds them.

    Flat lists of samples while no rollout of the call has siblings. Otherwise every group is
    one list per rollout, a one-branch rollout included: Miles wants the siblings of a rollout
    in a list of their own (at depth 2, sharing one ``rollout_id``), and its manager flattens
    the output a whole level at a time while the first item is a list, so a call whose groups
    nest to different depths would leave lists among the samples it trains on.
    """
    if any(group.has_siblings for group in groups):
        return [group.rollouts for group in groups]
    return [group.samples for group in groups]


def convert_group(
    traces: Sequence[TraceRecord],
    *,
    group_index: int,
    first_index: int,
    policy: BranchPolicy = BranchPolicy.REJECT,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    is_abort: Callable[[Any], bool] = looks_like_engine_abort,
) -> ConvertedGroup:
    """Convert one task's traces; the i-th trace gets ``index = first_index + i`` (and, with
    ``siblings``, the same ``rollout_id``).

    Indices follow rollout order, not completion order, so they are reproducible; a natural
    choice is ``first_index = group_index * n_samples_per_prompt``.
    """
    return ConvertedGroup(
        tuple(
            tuple(
                trace_to_samples(
                    trace,
                    group_index=group_index,
                    index=first_index + position,
                    policy=policy,
                    reward_key=reward_key,
                    weight_version=weight_version,
                    sample_cls=sample_cls,
                    extra_metadata=extra_metadata,
                    is_abort=is_abort,
                )
            )
            for position, trace in enumerate(traces)
        )
    )
