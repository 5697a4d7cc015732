"""The episode worker's generation for Verifiers 0.4 (the Env / slots / run_slot V1 API).

A group of ``n`` rollouts is ``n`` slots of one task, each an independent episode with its own
model context (so its own sampling seed). The model client is Verifiers' own ``TrainClient``,
reaching the call's SGLang transport through the seam in :mod:`.upstream`. Only trainable
agents' traces become records, exactly one per rollout. Each slot is judged by Verifiers' own
stamps: its record carries the episode's verdict (``episode_error``), so training drops the group
while evaluation fails that rollout only; a slot with no trainable trace fails the group. A
trace's own stamps travel as Verifiers set them: ``ok`` (not an empty error list: a trace that
recovered under retries keeps its errors) and ``is_timeout``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from miles_verifiers.episodes.calls import EnvironmentPool
from miles_verifiers.episodes.v04.config import describe04, load04, renderer_config04
from miles_verifiers.episodes.v04.upstream import TransportLoans, install_transport_hook
from miles_verifiers.episodes.worker import Built, OpenCall
from miles_verifiers.errors import UNSUPPORTED_REQUEST_CODE, tag_with_code
from miles_verifiers.protocol.messages import (
    CallStart,
    DescribeRequest,
    EpisodeErrorRecord,
    GroupRequest,
    GroupResult,
    ReplyBody,
    WorkerSetup,
)
from miles_verifiers.protocol.records import ErrorRecord, TraceRecord, trace_fields

# The TrainClientConfig's API key variable: none is needed, and Verifiers' default would make it
# read the Prime CLI's config.
API_KEY_VAR = "MILES_VERIFIERS_NO_API_KEY"

# Error types of a group failed for a reason of this worker's (the trainer shows them).
TRAINABLE_COUNT_ERROR = "TrainableTraceCountError"
UNSCORED_ERROR = "UnscoredRewardError"
EPISODE_ERROR = "EpisodeError"
EPISODE_TIMEOUT = "EpisodeTimeoutError"
# The error recorded for a trace Verifiers judged not ok without saying why.
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


def client_config04(setup: WorkerSetup, base_url: str) -> Any:
    """The TrainClientConfig of one call: the marker address and the renderer to use."""
    from verifiers.v1 import TrainClientConfig

    spec = setup.renderer
    return TrainClientConfig(
        base_url=base_url,
        api_key_var=API_KEY_VAR,
        renderer_model_name=spec.tokenizer_source,
        renderer=renderer_config04(spec.identity),
    )


def contexts04(
    model: str,
    client: Any,
    chat_template_kwargs: dict[str, Any],
    sampling: Sequence[dict[str, Any]],
) -> list[Any]:
    """One model context per slot (its own seed, when the trainer sent one)."""
    from verifiers.v1 import ModelContext, SamplingConfig

    extra = {"chat_template_kwargs": chat_template_kwargs} if chat_template_kwargs else {}
    return [
        ModelContext(
            model=model, client=client, sampling=SamplingConfig.model_validate({**values, **extra})
        )
        for values in sampling
    ]


def _error(
    kind: str, message: str, *, seat: str | None = None, timeout: bool = False
) -> EpisodeErrorRecord:
    return EpisodeErrorRecord(
        type=kind, message=" ".join(message.split())[:2000], seat=seat, timeout=timeout
    )


def _trainable(trace: Any) -> bool:
    return bool(getattr(trace.agent, "trainable", True))


def episode_verdict(episode: Any) -> EpisodeErrorRecord | None:
    """Why Verifiers judged ``episode`` not ok (None when it is ok, or when only the trainable
    trace failed: its own verdict speaks).

    ``ok`` decides, never the error list: an episode that recovered under ``[retries]`` keeps
    the failed attempts' errors. A failed untrainable seat (a user simulator, a judge) is named.
    """
    if episode.ok:
        return None
    timeout = bool(getattr(episode, "is_timeout", False))
    kind = EPISODE_TIMEOUT if timeout else EPISODE_ERROR
    seats = [t for t in episode.traces if not t.ok and not _trainable(t)]
    if seats:
        trace = seats[0]
        error = trace.last_error
        cause = (
            f"{error.type}: {error.message}"
            if error is not None
            else f"its trace stopped as {trace.stop_condition!r} and is not ok"
        )
        seat = getattr(getattr(trace, "agent", None), "name", None)
        return _error(kind, f"seat {seat!r} failed: {cause}", seat=seat, timeout=timeout)
    if any(not t.ok for t in episode.traces):
        return None
    last = episode.errors[-1] if episode.errors else None
    cause = f"{last.type}: {last.message}" if last is not None else "no error was recorded"
    return _error(kind, f"the episode is not ok: {cause}", timeout=timeout)


def _unscored(record: TraceRecord) -> EpisodeErrorRecord | None:
    if record.rollout_failed or not record.unscored:
        return None
    return _error(
        UNSCORED_ERROR,
        f"trace {record.id} finished cleanly but Verifiers left its reward(s) "
        f"{', '.join(record.unscored)} unscored (None); a rollout is trained only with every "
        "reward scored",
    )


@dataclass(frozen=True)
class LateSlot:
    """A slot cancelled at the group's deadline, with the traces it had reached."""

    task: Any
    reached: tuple[Any, ...]
    deadline_s: float


def judge_episodes(episodes: Sequence[Any], prefix_cache: Any = None) -> GroupResult:
    """The records of the group's slots (an episode or a :class:`LateSlot` each), each with its
    episode's verdict, and why the group fails when a slot yields no trainable trace."""
    records: list[TraceRecord] = []
    # Why the first slot that yielded no trainable trace failed (the group fails with it).
    missing: EpisodeErrorRecord | None = None
    for slot, episode in enumerate(episodes):
        idx = episode.task.data.idx
        verdict: EpisodeErrorRecord | None
        if isinstance(episode, LateSlot):
            traces, recovered = episode.reached, 0
            verdict = _error(
                EPISODE_TIMEOUT,
                f"rollout {slot} of task {idx} ran past its deadline of {episode.deadline_s:g} s "
                "and was cancelled",
                timeout=True,
            )
        else:
            traces, verdict = episode.traces, episode_verdict(episode)
            recovered = len(episode.errors) if episode.ok else 0
        trainable = [t for t in traces if _trainable(t)]
        for trace in trainable:
            record = trace_record04(trace, prefix_cache, rollout=slot)
            update = {
                "episode_error": verdict or _unscored(record),
                "episode_recovered_errors": recovered,
            }
            records.append(record.model_copy(update=update))
        if len(trainable) > 1:
            # Every episode of such an environment does the same: stop the call, naming the fix,
            # rather than drop group after group until the replacement budget runs out.
            message = (
                f"rollout {slot} of task {idx} yielded {len(trainable)} traces of trainable "
                "agents (best-of-n, or several trainable seats), but Miles trains exactly one "
                "trace per rollout. Fix: leave one trainable seat (mark the others untrainable "
                "in the environment's setup(), as 0.4's user simulators and judges are); "
                "episodes that keep several traces are not supported."
            )
            refusal = _error(
                TRAINABLE_COUNT_ERROR, tag_with_code(UNSUPPORTED_REQUEST_CODE, message)
            )
            return GroupResult(traces=records, failure="episode_error", error=refusal)
        if not trainable and missing is None:
            missing = verdict or _error(
                TRAINABLE_COUNT_ERROR,
                f"rollout {slot} of task {idx} yielded no trace of a trainable agent",
            )
    if missing is None:
        return GroupResult(traces=records)
    failure = "episode_timeout" if missing.timeout else "episode_error"
    return GroupResult(traces=records, failure=failure, error=missing)


async def run_slots(
    environment: Any,
    task: Any,
    contexts: Sequence[Any],
    *,
    semaphore: asyncio.Semaphore | None,
    deadline_s: float,
    prefix_cache: Any = None,
) -> GroupResult:
    """``len(contexts)`` independent episodes of ``task``, slot ``k`` with ``contexts[k]``.

    Never raises for the episodes' own failures: a slot still running at the deadline is
    cancelled and its reached traces carry the timeout; finished slots keep their verdicts."""
    slots = environment.slots(task, len(contexts))
    runs = [
        asyncio.ensure_future(environment.run_slot(slot, context, semaphore))
        for slot, context in zip(slots, contexts, strict=True)
    ]
    try:
        await asyncio.wait(runs, timeout=deadline_s)
    finally:
        late = [run for run in runs if not run.done()]
        for run in late:
            run.cancel()
        if late:
            await asyncio.wait(late)
    outcomes: list[Any] = []
    for slot, run in zip(slots, runs, strict=True):
        if run.cancelled():
            outcomes.append(LateSlot(task, tuple(slot.traces), deadline_s))
            continue
        error = run.exception()
        if error is not None:
            error_record = _error(type(error).__name__, str(error))
            return GroupResult(traces=[], failure="episode_error", error=error_record)
        outcomes.append(run.result())
    return judge_episodes(outcomes, prefix_cache)


class Generation04:
    """Verifiers 0.4's generation (see the module docstring)."""

    def __init__(self) -> None:
        self._loans: TransportLoans | None = None

    def build(self, setup: WorkerSetup) -> Built:
        """Load the environment and its tasks the way the describe step did."""
        import verifiers.v1 as vf

        loaded = load04(setup.config_path, setup.config_text)
        config = loaded.config
        return Built(
            setup,
            loaded.tasks,
            EnvironmentPool(lambda: vf.load_environment(config), first=loaded.environment),
        )

    def describe(self, request: DescribeRequest) -> ReplyBody:
        return describe04(request)

    def open_call(self, built: Built, start: CallStart, transport: Any) -> tuple[Any, str]:
        if self._loans is None:
            self._loans = install_transport_hook(TransportLoans())
        base_url, lent = self._loans.lend(start.call_id, transport)
        return lent, base_url

    def close_call(self, call_id: str) -> None:
        if self._loans is not None:
            self._loans.take_back(call_id)

    async def run_group(self, built: Built, call: OpenCall, request: GroupRequest) -> GroupResult:
        client = client_config04(built.setup, call.base_url)
        kwargs = json.loads(built.setup.renderer.chat_template_kwargs_json or "{}")
        return await run_slots(
            call.environment,
            built.tasks[request.task_index],
            contexts04(call.start.model, client, kwargs, request.sampling),
            semaphore=call.semaphore,
            deadline_s=request.deadline_s,
            prefix_cache=call.transport.prefix_cache_usage,
        )
