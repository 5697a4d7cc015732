"""The in-process backend hands requests to the episode-side handler as they are, and gives
the trainer side the handler's trace records, as a worker would (stand-in handler, no
Verifiers): one call start per call, the call id as rid prefix, a group the caller stops
waiting for runs on until the call ends."""

from __future__ import annotations

import asyncio
from typing import Any

from miles_verifiers.errors import describe_error
from miles_verifiers.protocol.messages import (
    CallStart,
    Done,
    EpisodeErrorRecord,
    GroupRequest,
    GroupResult,
)
from miles_verifiers.protocol.records import TaskRecord, TraceRecord
from miles_verifiers.trainer.backends.in_process import InProcessEpisodes
from tests.workers.scenarios import group, make_call, run

RECORD = TraceRecord(
    id="t1",
    task=TaskRecord(type="Task", idx=0, prompt="p", label="5"),
    branches=[],
    rewards={},
    metrics={},
    reward=0.0,
    num_turns=0,
    num_output_tokens=0,
    num_total_tokens=0,
    stop_condition=None,
    is_truncated=False,
    last_reply="",
)


class StandInHandler:
    """Answers like :class:`WorkerHandler`; a group waits for ``release`` when given one."""

    def __init__(self, result: GroupResult | None = None) -> None:
        self.result = result or GroupResult(traces=[RECORD])
        self.starts: list[CallStart] = []
        self.ended: list[str] = []
        self.release: asyncio.Event | None = None
        self.groups: list[asyncio.Task[Any]] = []

    async def handle(self, body: Any) -> Any:
        if isinstance(body, CallStart):
            await asyncio.sleep(0)  # a start that takes a moment: later groups must wait for it
            self.starts.append(body)
            return Done()
        assert isinstance(body, GroupRequest)
        self.groups.append(asyncio.current_task())  # type: ignore[arg-type]
        if self.release is not None:
            await self.release.wait()
        return self.result

    async def end_call(self, call_id: str) -> None:
        self.ended.append(call_id)
        for task in self.groups:
            task.cancel()


def test_a_call_starts_once_with_its_call_id_as_rid_prefix() -> None:
    handler = StandInHandler()
    backend = InProcessEpisodes(handler)  # type: ignore[arg-type]
    call = make_call(backend, "mvt_c1")

    async def scenario() -> None:
        await asyncio.gather(*(backend.run_group(call, group(call)) for _ in range(3)))

    run(scenario())
    assert [(s.call_id, s.rid_prefix) for s in handler.starts] == [("mvt_c1", "mvt_c1")]
    assert call.prefixes == ["mvt_c1"]


def test_the_trainer_side_gets_the_handlers_records_themselves() -> None:
    handler = StandInHandler()
    backend = InProcessEpisodes(handler)  # type: ignore[arg-type]
    call = make_call(backend, "mvt_c1")

    result = run(backend.run_group(call, group(call)))

    assert result.ok and result.traces[0] is RECORD


def test_a_failed_episode_reads_as_it_does_from_a_worker() -> None:
    failed = GroupResult(
        traces=[],
        failure="episode_timeout",
        error=EpisodeErrorRecord(type="EpisodeTimeoutError", message="ran past 1 s"),
    )
    backend = InProcessEpisodes(StandInHandler(failed))  # type: ignore[arg-type]
    call = make_call(backend, "mvt_c1")

    result = run(backend.run_group(call, group(call)))

    assert result.failure == "episode_timeout"
    assert result.error is not None
    assert describe_error(result.error) == "EpisodeTimeoutError: ran past 1 s"


def test_a_group_the_caller_stops_waiting_for_runs_until_the_call_ends() -> None:
    handler = StandInHandler()
    handler.release = asyncio.Event()
    backend = InProcessEpisodes(handler)  # type: ignore[arg-type]
    call = make_call(backend, "mvt_c1")

    async def scenario() -> tuple[bool, bool, list[str]]:
        waiting = asyncio.ensure_future(backend.run_group(call, group(call)))
        while not handler.groups:
            await asyncio.sleep(0.01)
        waiting.cancel()
        await asyncio.wait([waiting])
        running_after_cancel = not handler.groups[0].done()
        failed = await backend.end_call(call, timeout_s=5)
        await asyncio.wait(handler.groups)
        return running_after_cancel, handler.groups[0].cancelled(), failed

    assert run(scenario()) == (True, True, [])
    assert handler.ended == ["mvt_c1"]


def test_a_call_that_ran_no_group_has_nothing_to_end() -> None:
    handler = StandInHandler()
    backend = InProcessEpisodes(handler)  # type: ignore[arg-type]

    assert run(backend.end_call(make_call(backend, "mvt_c1"), timeout_s=5)) == []
    assert handler.ended == []
