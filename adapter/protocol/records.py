"""A Verifiers trace as a plain record: the one thing the episode side hands the trainer side.

Verifiers computes everything on the episode side (branches, masks, log-probs, totals), so the
trainer side never re-derives a Verifiers rule, whichever backend ran the episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict


class ProtocolModel(BaseModel):
    """What crosses the protocol: a newer minor's extra fields are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class NodeRecord(ProtocolModel):
    mask: list[bool]
    logprobs: list[float]
    # Its place in the trace's graph: a turn several branches share is trained once.
    node_id: int | None = None


class BranchRecord(ProtocolModel):
    index: int
    token_ids: list[int]
    # The branch's log-probs aligned to token_ids, as Verifiers spreads them.
    logprobs: list[float]
    num_turns: int
    nodes: list[NodeRecord]
    # Verifiers >= 0.4 marks branches not to train; older versions train every branch.
    trainable: bool = True

    @property
    def sampled_mask(self) -> list[bool]:
        """Per token: did the model sample it (the nodes' masks end to end)."""
        return [m for node in self.nodes for m in node.mask]


class TaskRecord(ProtocolModel):
    type: str
    idx: Any = None
    prompt: Any = ""  # already serialised (a string or a list of message dicts)
    label: Any = None  # label, else answer; numbers as strings


class ErrorRecord(ProtocolModel):
    """The trace's latest error, field for field as Verifiers records it."""

    type: str
    message: str


class EpisodeErrorRecord(ProtocolModel):
    """Why an episode failed as a whole (its class name and message)."""

    type: str
    message: str
    # The seat whose trace failed the episode; None: its own hooks or deadline failed it.
    seat: str | None = None
    # The episode ran past a deadline (0.4's ``is_timeout``, or the adapter's own).
    timeout: bool = False


class PrefixCacheRecord(ProtocolModel):
    cached_tokens: int
    prompt_tokens: int


class TraceRecord(ProtocolModel):
    id: str
    task: TaskRecord
    branches: list[BranchRecord]
    rewards: dict[str, float]
    metrics: dict[str, float]
    reward: float
    num_turns: int
    num_output_tokens: int
    num_total_tokens: int
    stop_condition: str | None
    is_truncated: bool
    last_reply: str
    error: ErrorRecord | None = None
    prefix_cache: PrefixCacheRecord | None = None
    # Rewards Verifiers left unscored (None): the worker fails such a rollout (episode_error).
    unscored: list[str] = []
    # Verifiers' own verdict, never inferred; None from a 2.0 worker.
    ok: bool | None = None
    # 0.4 ``trace.is_timeout``: an agent timeout is a stop, the trace stays ok and is scored.
    is_timeout: bool = False
    # Errors an ok trace keeps from the attempts Verifiers retried before it succeeded.
    recovered_errors: int = 0
    # Set when the trace's episode is not ok, whatever the trace's own verdict.
    episode_error: EpisodeErrorRecord | None = None
    # Errors an ok episode keeps from the attempts Verifiers retried ([retries]).
    episode_recovered_errors: int = 0
    # Which rollout of its group (the slot) the trace belongs to; None: in list order.
    rollout: int | None = None

    @property
    def failed(self) -> bool:
        """Verifiers judged the trace failed (a 2.0 worker sends no ``ok``: an error is one)."""
        return self.error is not None if self.ok is None else not self.ok

    @property
    def episode_failed(self) -> bool:
        """Verifiers judged the trace's episode not ok (a failed seat, hook or deadline)."""
        return self.episode_error is not None

    @property
    def rollout_failed(self) -> bool:
        """The rollout cannot be trained: its trace or its episode failed."""
        return self.failed or self.episode_failed


def serialize_prompt(prompt: Any) -> str | list[Any]:
    if prompt is None:
        return ""
    if isinstance(prompt, (list, tuple)):
        return [
            m.model_dump(mode="json", exclude_none=True) if hasattr(m, "model_dump") else m
            for m in prompt
        ]
    return prompt


def branch_record(branch: Any, node_ids: dict[int, int], count_turns: bool) -> BranchRecord:
    """``count_turns``: the turns are the nodes the model sampled in (0.4's branches keep no
    ``num_turns``); a node without log-probs has none."""
    return BranchRecord(
        index=branch.index,
        token_ids=list(branch.token_ids),
        logprobs=[float(x) for x in branch.logprobs],
        num_turns=sum(any(n.mask) for n in branch.nodes) if count_turns else branch.num_turns,
        nodes=[
            NodeRecord(
                mask=[bool(m) for m in n.mask],
                logprobs=[float(x) for x in (n.logprobs or ())],
                node_id=node_ids.get(id(n)),
            )
            for n in branch.nodes
        ],
        trainable=bool(getattr(branch, "trainable", True)),
    )


def task_record(task: Any) -> TaskRecord:
    """The record of a Verifiers task: its type, index, serialised prompt and label."""
    data = task.data
    label = getattr(data, "label", None)
    if label is None:
        label = getattr(data, "answer", None)
    if isinstance(label, (int, float)) and not isinstance(label, bool):
        label = str(label)
    return TaskRecord(
        type=str(getattr(task, "type", "")),
        idx=getattr(data, "idx", None),
        prompt=serialize_prompt(getattr(data, "prompt", None)),
        label=label,
    )


def trace_fields(
    trace: Any, prefix_cache: Callable[[str], Any] | None, *, count_turns: bool
) -> dict[str, Any]:
    """The fields both Verifiers generations hold alike (``prefix_cache``: the engine's usage)."""
    usage = prefix_cache(trace.id) if prefix_cache is not None else None
    # A branch holds the very node objects of the trace's graph: their position there is the id.
    node_ids = {id(node): position for position, node in enumerate(getattr(trace, "nodes", ()))}
    return {
        "id": trace.id,
        "task": task_record(trace.task),
        "branches": [branch_record(b, node_ids, count_turns) for b in trace.branches],
        "reward": float(trace.reward),
        "num_turns": int(trace.num_turns),
        "num_output_tokens": int(trace.num_output_tokens),
        "num_total_tokens": int(trace.num_total_tokens),
        "stop_condition": trace.stop_condition,
        "is_truncated": bool(trace.is_truncated),
        "last_reply": trace.last_reply,
        "prefix_cache": (
            PrefixCacheRecord(cached_tokens=usage.cached_tokens, prompt_tokens=usage.prompt_tokens)
            if usage is not None
            else None
        ),
    }


def trace_record(trace: Any, prefix_cache: Callable[[str], Any] | None = None) -> TraceRecord:
    """The record of a Verifiers trace; ``prefix_cache`` looks up the engine's cache usage."""
    error = trace.error
    return TraceRecord(
        **trace_fields(trace, prefix_cache, count_turns=False),
        rewards={k: float(v) for k, v in trace.rewards.items()},
        metrics={k: float(v) for k, v in trace.metrics.items()},
        error=ErrorRecord(type=error.type, message=error.message) if error is not None else None,
        # Verifiers 0.2's own verdict: it has no ok stamp and no retries.
        ok=not trace.has_error,
    )
