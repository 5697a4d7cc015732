"""A Verifiers 0.4 trace as the protocol's :class:`TraceRecord`. The stamps travel as Verifiers
set them: ``ok`` (not an empty error list: a trace that recovered under retries keeps its
errors) and ``is_timeout``; a trace not ok without an error gets one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from miles_verifiers.protocol.records import ErrorRecord, TraceRecord, trace_fields

# The error type recorded for a trace Verifiers judged not ok without saying why.
NOT_OK_ERROR = "TraceNotOk"


def error_record(trace: Any) -> ErrorRecord | None:
    error = trace.last_error
    if error is not None:
        return ErrorRecord(type=error.type, message=error.message)
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
    ok = bool(trace.ok)
    return TraceRecord(
        **trace_fields(trace, prefix_cache, count_turns=True),
        rewards={name: float(r.score) for name, r in trace.rewards.items() if r is not None},
        metrics={k: float(v) for k, v in trace.metrics.items() if v is not None},
        error=error_record(trace),
        unscored=sorted(name for name, r in trace.rewards.items() if r is None),
        ok=ok,
        is_timeout=bool(getattr(trace, "is_timeout", False)),
        recovered_errors=len(trace.errors) if ok else 0,
        rollout=rollout,
    )
