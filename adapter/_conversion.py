"""Verifiers traces to Miles samples.

One trace becomes one sample: the trace's single branch (root-to-leaf path of its message
graph) is the token sequence Miles trains on. The sample's prompt ends where the first
sampled token starts; everything after it is the "response", with a loss mask that is 1 on
model-sampled tokens and 0 on tool/user/template tokens of later turns, and the engine's
log-probs aligned to it.

Functions here are pure over verifiers' ``Trace``/``Branch``/``MessageNode`` objects (or
anything shaped like them) and return the contract ``Sample`` chosen by
:mod:`miles_verifiers._contract.compat` unless a class is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from miles_verifiers._contract.compat import build_sample, contract
from miles_verifiers._errors import RolloutCallError, recorded_error_class
from miles_verifiers._metrics import DROP_EMPTY_TRACE

# Key under which the verifiers total reward is stored in a dict-shaped reward.
TOTAL_REWARD_KEY = "reward"

# Sample.metadata key holding what verifiers knows about the trace.
METADATA_KEY = "verifiers"


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
    from miles_verifiers._transport.errors import EngineAbortedError

    found = recorded_error_class(error)
    return found is not None and issubclass(found, EngineAbortedError)


def looks_like_contract_breach(error: Any) -> bool:
    """True for a trace error recording an engine answer the transport refused as untrustworthy
    (positive logprobs, too many tokens, ids outside the vocabulary, misaligned metadata)."""
    from miles_verifiers._transport.errors import MalformedEngineResponseError

    found = recorded_error_class(error)
    return found is not None and issubclass(found, MalformedEngineResponseError)


def trace_reward(
    trace: Any, reward_key: str | None, *, key_flag: str = "--reward-key"
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
        if trace.has_error:
            rewards[reward_key] = 0.0
        else:
            raise RewardKeyError(
                f"{key_flag} {reward_key!r} is not a reward of trace {trace.id}; it has "
                f'{sorted(rewards)}. Fix: pass one of those as {key_flag} ("reward" is the '
                f"weighted total), or leave {key_flag} unset to use the total."
            )
    return rewards


def task_label(data: Any) -> Any:
    """``label`` of the task data, else ``answer``, else None; numbers become strings."""
    label = getattr(data, "label", None)
    if label is None:
        label = getattr(data, "answer", None)
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        return str(label)
    return label


def serialize_prompt(prompt: Any) -> str | list[Any]:
    if prompt is None:
        return ""
    if isinstance(prompt, (list, tuple)):
        return [
            m.model_dump(mode="json", exclude_none=True) if hasattr(m, "model_dump") else m
            for m in prompt
        ]
    return prompt


def sample_status(trace: Any, status_enum: Any, is_abort: Callable[[Any], bool]) -> Any:
    """ABORTED (engine abort) > FAILED (any other error) > TRUNCATED > COMPLETED."""
    if trace.has_error:
        return status_enum.ABORTED if is_abort(trace.error) else status_enum.FAILED
    if trace.is_truncated:
        return status_enum.TRUNCATED
    return status_enum.COMPLETED


def _check_logprobs(trace_id: str, nodes: Sequence[Any]) -> None:
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


def branch_tokens(trace_id: str, branch: Any) -> BranchTokens:
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


# -- one trace, one group ---------------------------------------------------------------------


def trace_to_sample(
    trace: Any,
    *,
    group_index: int,
    index: int,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    is_abort: Callable[[Any], bool] = looks_like_engine_abort,
    prefix_cache: Callable[[str], Any] | None = None,
) -> Any | None:
    """The sample for ``trace``, or None when it has no branch (no model turn was committed,
    e.g. an overlong first prompt), which the caller should treat as an empty trace.

    ``weight_version`` is the engine weight version the rollout ran under (the rollout input's
    ``weight_version``); ``extra_metadata`` is merged into ``Sample.metadata``.
    """
    branches = trace.branches
    if not branches:
        return None
    if len(branches) > 1:
        raise MultipleBranchesError(trace.id, len(branches))
    branch = branches[0]
    split = branch_tokens(trace.id, branch)
    cls = sample_cls if sample_cls is not None else contract().Sample
    data = trace.task.data

    info: dict[str, Any] = {
        "trace_id": trace.id,
        "branch_index": branch.index,
        "task_index": getattr(data, "idx", None),
        "rewards": dict(trace.rewards),
        "metrics": dict(trace.metrics),
        "stop_condition": trace.stop_condition,
        "num_turns": branch.num_turns,
    }
    if trace.error is not None:
        info["error"] = trace.error.model_dump(mode="json", exclude_none=True)
    metadata: dict[str, Any] = {METADATA_KEY: info}
    if extra_metadata:
        metadata.update(extra_metadata)

    sample = build_sample(
        cls,
        routing_key=trace.id,
        group_index=group_index,
        index=index,
        prompt=serialize_prompt(getattr(data, "prompt", None)),
        tokens=split.tokens,
        response=trace.last_reply,
        response_length=split.response_length,
        label=task_label(data),
        reward=trace_reward(trace, reward_key),
        loss_mask=split.loss_mask,
        rollout_log_probs=split.rollout_log_probs,
        weight_versions=[] if weight_version is None else [str(weight_version)],
        status=sample_status(trace, cast(Any, cls).Status, is_abort),
        metadata=metadata,
    )
    if prefix_cache is not None:
        record_prefix_cache(sample, prefix_cache(trace.id))
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
    """The samples of one task's traces, in rollout order; None where a trace had no branch."""

    per_trace: tuple[Any | None, ...]

    @property
    def samples(self) -> list[Any]:
        return [s for s in self.per_trace if s is not None]

    @property
    def complete(self) -> bool:
        return all(s is not None for s in self.per_trace)

    @property
    def drop_reason(self) -> str | None:
        """Why training should drop this group (None: keep it)."""
        return None if self.complete else DROP_EMPTY_TRACE


def convert_group(
    traces: Sequence[Any],
    *,
    group_index: int,
    first_index: int,
    reward_key: str | None = None,
    weight_version: int | str | None = None,
    sample_cls: type | None = None,
    extra_metadata: Mapping[str, Any] | None = None,
    is_abort: Callable[[Any], bool] = looks_like_engine_abort,
    prefix_cache: Callable[[str], Any] | None = None,
) -> ConvertedGroup:
    """Convert one task's traces; the i-th trace gets ``index = first_index + i``.

    Indices follow rollout order, not completion order, so they are reproducible; a natural
    choice is ``first_index = group_index * n_samples_per_prompt``.
    """
    return ConvertedGroup(
        tuple(
            trace_to_sample(
                trace,
                group_index=group_index,
                index=first_index + position,
                reward_key=reward_key,
                weight_version=weight_version,
                sample_cls=sample_cls,
                extra_metadata=extra_metadata,
                is_abort=is_abort,
                prefix_cache=prefix_cache,
            )
            for position, trace in enumerate(traces)
        )
    )
