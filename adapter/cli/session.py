"""One run: build the rollout function, bring up the engine, make Miles' calls, record them.

The order is Miles' (§1.2-1.3): the function is constructed while no engine exists and the
router address is unset; then the engine starts and its address is written into the same
``args``; then each planned call runs in a worker thread (``asyncio.to_thread``) from a driver
coroutine, with coroutine results executed on one persistent background event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

from miles_verifiers.cli.engine import EngineAddress, engine_target, point_args_at
from miles_verifiers.cli.loading import build_rollout_function
from miles_verifiers.cli.loop import BackgroundLoop, call_rollout_function
from miles_verifiers.cli.outputs import RunOutputs, check_output_paths, run_outputs
from miles_verifiers.cli.records import eval_records, jsonable, train_records
from miles_verifiers.cli.redaction import redact
from miles_verifiers.cli.reporting import error_text
from miles_verifiers.cli.schedule import PlannedCall, ResumePoint, resume_point
from miles_verifiers.cli.summary import (
    EvalCallStats,
    RunStatus,
    RunSummary,
    RunTally,
    TrainCallStats,
)
from miles_verifiers.errors import CommandLineError
from miles_verifiers.trainer.contract.compat import Contract, contract


class RolloutOutputError(CommandLineError, TypeError):
    """The rollout function returned something that is not Miles' output type for the call."""


class ConstructionError(CommandLineError, RuntimeError):
    """The rollout function could not be built; the cause is chained."""


class RunObserver(Protocol):
    """Hears about a run's progress (the CLI draws a progress bar from it)."""

    def constructed(self, seconds: float) -> None: ...

    def engine_ready(self, address: EngineAddress) -> None: ...

    def call_started(self, call: PlannedCall) -> None: ...

    def call_finished(self, call: PlannedCall, stats: TrainCallStats | EvalCallStats) -> None: ...


class SilentObserver:
    def constructed(self, seconds: float) -> None:
        pass

    def engine_ready(self, address: EngineAddress) -> None:
        pass

    def call_started(self, call: PlannedCall) -> None:
        pass

    def call_finished(self, call: PlannedCall, stats: TrainCallStats | EvalCallStats) -> None:
        pass


@dataclass(frozen=True)
class RunRequest:
    args: argparse.Namespace
    calls: Sequence[PlannedCall]
    rollout_function_path: str
    # None: start the embedded loopback engine serving ``engine_model``.
    engine_url: str | None
    engine_model: str
    output: Path
    metrics_output: Path
    # Per-call limit; None waits as long as the call takes.
    call_timeout_s: float | None


@dataclass(frozen=True)
class RunResult:
    summary: RunSummary
    samples_written: int
    output: Path
    metrics_output: Path
    engine: EngineAddress
    # Where an interrupted run carries on; None when complete (or only the final eval is left).
    resume: ResumePoint | None


def make_input(call: PlannedCall, types: Contract) -> Any:
    # Only rollout_id: older Miles inputs have no other field, and weight_version's default
    # (None) is what Miles passes before any weight update, which never happens here.
    if call.evaluation:
        return types.RolloutFnEvalInput(rollout_id=call.rollout_id)
    return types.RolloutFnTrainInput(rollout_id=call.rollout_id)


def _require_output(call: PlannedCall, output: Any) -> None:
    wanted = "data" if call.evaluation else "samples"
    if not hasattr(output, wanted):
        expected = "RolloutFnEvalOutput" if call.evaluation else "RolloutFnTrainOutput"
        raise RolloutOutputError(
            f"the rollout function returned {type(output).__name__} for {call.kind} rollout "
            f"{call.rollout_id}; Miles expects a {expected} (with .{wanted})."
        )


@dataclass
class _Recorder:
    tally: RunTally
    outputs: RunOutputs
    written: int = 0
    calls_done: int = 0

    def record(
        self, call: PlannedCall, output: Any, wall_s: float
    ) -> TrainCallStats | EvalCallStats:
        _require_output(call, output)
        metrics = getattr(output, "metrics", None)
        stats: TrainCallStats | EvalCallStats
        if call.evaluation:
            self.written += self.outputs.write(eval_records(output.data, call.rollout_id))
            stats = self.tally.add_eval(call.rollout_id, output.data, metrics, wall_s)
        else:
            self.written += self.outputs.write(train_records(output.samples, call.rollout_id))
            stats = self.tally.add_train(call.rollout_id, output.samples, metrics, wall_s)
        self.calls_done += 1
        return stats


async def _drive(
    fn: Callable[[Any], Any],
    request: RunRequest,
    types: Contract,
    loop: BackgroundLoop,
    recorder: _Recorder,
    observer: RunObserver,
) -> None:
    for call in request.calls:
        observer.call_started(call)
        started = time.monotonic()
        try:
            output = await asyncio.to_thread(
                call_rollout_function, fn, make_input(call, types), loop, request.call_timeout_s
            )
        except asyncio.CancelledError:
            loop.cancel_all()  # so the worker thread returns and the process can exit
            raise
        stats = recorder.record(call, output, time.monotonic() - started)
        observer.call_finished(call, stats)


def metrics_document(
    request: RunRequest,
    tally: RunTally,
    summary: RunSummary,
    versions: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    document = {
        "status": summary.status,
        "args": redact(jsonable(vars(request.args))),
        "train": [asdict(call) for call in tally.train_calls],
        "eval": [asdict(call) for call in tally.eval_calls],
        "summary": summary.as_dict(),
    }
    if versions is not None:  # what each side ran (the adapter's rollout function says)
        document["versions"] = jsonable(dict(versions))
    return document


def run_rollouts(request: RunRequest, observer: RunObserver | None = None) -> RunResult:
    """Run ``request.calls``, writing each call's samples as it completes. On Ctrl-C (or
    SIGTERM, which the command turns into one) after a completed call, the completed calls'
    samples and metrics are put in place, marked interrupted. On a failure, or an interrupt
    before any call completed, it raises and any earlier outputs stay as they were."""
    check_output_paths(request.output, request.metrics_output)
    observer = observer or SilentObserver()
    started = time.monotonic()
    types = contract()
    try:
        fn = build_rollout_function(request.rollout_function_path, request.args, types)
    except Exception as error:
        raise ConstructionError(
            f"{request.rollout_function_path} could not be constructed: {error_text(error)}"
        ) from error
    observer.constructed(time.monotonic() - started)
    if request.args.start_rollout_id is None:
        # Miles resolves the start id after construction (from the checkpoint, else 0).
        request.args.start_rollout_id = 0
    tally = RunTally(reward_args=request.args)
    with run_outputs(request.output, request.metrics_output) as outputs:
        recorder = _Recorder(tally, outputs)
        try:
            with (
                engine_target(request.engine_url, request.engine_model) as address,
                BackgroundLoop() as loop,
            ):
                point_args_at(request.args, address)
                observer.engine_ready(address)
                asyncio.run(_drive(fn, request, types, loop, recorder, observer))
        except KeyboardInterrupt:
            if recorder.calls_done == 0:
                raise
        resume = resume_point(request.calls, recorder.calls_done)
        status: RunStatus = (
            "complete" if recorder.calls_done == len(request.calls) else "interrupted"
        )
        summary = tally.finish(time.monotonic() - started, status)
        versions = getattr(fn, "versions", None)
        outputs.publish(
            metrics_document(
                request, tally, summary, versions if isinstance(versions, Mapping) else None
            )
        )
    return RunResult(
        summary, recorder.written, request.output, request.metrics_output, address, resume
    )
