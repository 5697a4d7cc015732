"""A Verifiers 0.4 trace as the protocol's :class:`TraceRecord` (worker side), the record the 0.2
worker sends. A branch's turn count is its sampled nodes, an unscored reward is None, and the
stamps travel as Verifiers set them: ``ok`` (never an empty error list: a trace that recovered
under retries keeps its errors) and ``is_timeout``; a trace not ok without an error gets one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from miles_verifiers.protocol.records import (
    BranchRecord,
    ErrorRecord,
    NodeRecord,
    TraceRecord,
    trace_fields,
    trace_node_ids,
)

# The error type recorded for a trace Verifiers judged not ok without saying why.
NOT_OK_ERROR = "TraceNotOk"


def branch_record(branch: Any, node_ids: dict[int, int]) -> BranchRecord:
    nodes = list(branch.nodes)
    return BranchRecord(
        index=branch.index,
        token_ids=list(branch.token_ids),
        logprobs=[float(x) for x in branch.logprobs],
        num_turns=sum(1 for node in nodes if any(node.mask)),
        nodes=[
            NodeRecord(
                mask=[bool(m) for m in node.mask],
                logprobs=[float(x) for x in (node.logprobs or ())],
                node_id=node_ids.get(id(node)),
            )
            for node in nodes
        ],
        trainable=bool(getattr(branch, "trainable", True)),
    )


def error_record(trace: Any) -> ErrorRecord | None:
    error = trace.last_error
    if error is not None:
        return ErrorRecord(type=error.type, message=error.message, traceback=error.traceback)
    if trace.ok:
        return None
    return ErrorRecord(
        type=NOT_OK_ERROR,
        message=f"Verifiers judged the trace not ok (stop condition {trace.stop_condition!r}) "
        "and recorded no error",
    )


def trace_record04(
    trace: Any, prefix_cache: Callable[[str], Any] | None = None, *, rollout: int | None = None
) -> TraceRecord:
    """The record of a 0.4 trace; ``prefix_cache`` looks up the engine's cache usage."""
    error = error_record(trace)
    ok = bool(trace.ok)
    node_ids = trace_node_ids(trace)
    rewards = {name: r.score for name, r in trace.rewards.items() if r is not None}
    return TraceRecord(
        **trace_fields(trace, prefix_cache(trace.id) if prefix_cache is not None else None),
        branches=[branch_record(b, node_ids) for b in trace.branches],
        rewards={name: float(score) for name, score in rewards.items()},
        metrics={k: float(v) for k, v in trace.metrics.items() if v is not None},
        error=error,
        unscored=sorted(name for name, r in trace.rewards.items() if r is None),
        ok=ok,
        is_timeout=bool(getattr(trace, "is_timeout", False)),
        recovered_errors=len(trace.errors) if ok else 0,
        rollout=rollout,
    )
