"""The local backend's process handling: workers are forked from one template, which is started
again when it has died; a request times out even when the worker stops reading its pipe, a
worker ends cleanly on SIGTERM, and stopping one ends its whole process group without blocking
the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from typing import Any

from miles_verifiers.trainer.backends.local import (
    TEMPLATE_MODULE,
    LocalWorker,
    WorkerPipes,
    WorkerTemplate,
)
from miles_verifiers.trainer.backends.pool import WorkerLostError
from tests.workers.processes import (
    ProcessInfo,
    descendants,
    episode_workers,
    leftovers,
    still_running,
    wait_until,
)

# Bounds each scenario (a hang fails the test instead of stalling the suite).
SCENARIO_BOUND_S = 60.0

# Reads nothing and ignores SIGTERM, after starting a grandchild in the same process group.
STUBBORN = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "stubborn-grandchild"])
print("ready", flush=True)
time.sleep(600)
"""


def run(scenario: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(scenario, SCENARIO_BOUND_S)

    return asyncio.run(bounded())


async def stubborn_worker(grace_s: float) -> tuple[LocalWorker, asyncio.subprocess.Process]:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        STUBBORN,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert await process.stdout.readline() == b"ready\n"
    return LocalWorker(pipes_of(process), "stubborn", terminate_grace_s=grace_s), process


def pipes_of(process: asyncio.subprocess.Process) -> WorkerPipes:
    assert process.stdin is not None and process.stdout is not None
    return WorkerPipes(process.pid, process.stdin, process.stdout)


def stubborn_processes() -> list[ProcessInfo]:
    """The stubborn worker and its grandchild, once both show (a process that was just
    started may show no command line for a moment, while its exec completes)."""

    def both() -> list[ProcessInfo]:
        return [p for p in descendants() if "sleep(600)" in p.cmdline]

    wait_until(lambda: len(both()) == 2, timeout_s=10)
    return both()


def test_a_request_times_out_when_the_worker_stops_reading_its_pipe() -> None:
    async def scenario() -> str:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "import time; time.sleep(600)",  # reads nothing
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        worker = LocalWorker(pipes_of(process), "deaf")
        try:
            # Far more than the pipe and the transport's buffer hold: the write cannot finish.
            await worker.request(1, b"x" * (16 * 2**20), timeout_s=0.5)
        except WorkerLostError as error:
            return str(error)
        finally:
            process.kill()
            await process.wait()
        return "answered"

    assert "did not answer within 0.5 s" in run(scenario())


def test_stopping_a_worker_that_ignores_sigterm_kills_its_process_group() -> None:
    async def scenario() -> list[ProcessInfo]:
        worker, process = await stubborn_worker(grace_s=0.5)
        seen = stubborn_processes()
        assert len(seen) == 2
        await asyncio.to_thread(worker.kill)
        await process.wait()  # reaped on its own loop, before that loop closes
        return seen

    seen = run(scenario())

    assert wait_until(lambda: not still_running(seen), timeout_s=10), still_running(seen)


def test_stopping_a_worker_leaves_its_event_loop_free_meanwhile() -> None:
    async def scenario() -> tuple[bool, list[ProcessInfo]]:
        worker, process = await stubborn_worker(grace_s=2.0)
        seen = stubborn_processes()
        stopping = asyncio.ensure_future(worker.stop())
        await asyncio.sleep(0.2)  # the loop runs this while the worker has its grace
        free_meanwhile = not stopping.done()
        await stopping
        await process.wait()
        return free_meanwhile, seen

    free_meanwhile, seen = run(scenario())

    assert free_meanwhile
    assert wait_until(lambda: not still_running(seen), timeout_s=10), still_running(seen)


def test_a_worker_ends_cleanly_on_sigterm() -> None:
    # The worker's own code, in a child of this process so that its exit code can be read.
    async def scenario() -> int:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from miles_verifiers.episodes.child import main; main()",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        worker = LocalWorker(pipes_of(process), "signalled")
        await worker.request(1, b"{}", timeout_s=30)  # refused, but answered: it is serving
        process.send_signal(signal.SIGTERM)
        return await process.wait()

    assert run(scenario()) == 0


def test_workers_are_forked_from_one_template_that_close_ends() -> None:
    template = WorkerTemplate()

    async def scenario() -> list[int]:
        workers = [await LocalWorker.start(name, template) for name in ("a", "b")]
        for worker in workers:
            await worker.request(1, b"{}", timeout_s=30)  # refused, but answered: serving
        parents = [_parent(worker.pid) for worker in workers]
        for worker in workers:
            await worker.stop()
        return parents

    try:
        parents = run(scenario())
        (template_pid,) = set(parents)
        assert TEMPLATE_MODULE in _cmdline(template_pid)
    finally:
        template.close()
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def test_a_template_that_died_is_started_again_for_the_next_worker() -> None:
    template = WorkerTemplate()

    async def start_one(name: str) -> int:
        worker = await LocalWorker.start(name, template)
        await worker.request(1, b"{}", timeout_s=30)
        parent = _parent(worker.pid)
        await worker.stop()
        return parent

    try:
        first = run(start_one("before"))
        os.kill(first, signal.SIGKILL)
        second = run(start_one("after"))
    finally:
        template.close()

    assert second != first
    assert wait_until(lambda: not leftovers(), timeout_s=10), leftovers()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as stat:
        return int(stat.read().rsplit(b")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
        return cmdline.read().replace(b"\0", b" ").decode()


def test_a_worker_start_given_up_while_the_template_loads_leaves_no_worker() -> None:
    template = WorkerTemplate()

    async def scenario() -> None:
        # Far shorter than the template's imports: the fork is answered after the give-up.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(LocalWorker.start("late", template), 0.1)

    try:
        run(scenario())  # returns once the fork under way has been answered
        assert [p for p in descendants() if TEMPLATE_MODULE in p.cmdline]  # forks were served
        assert wait_until(lambda: not episode_workers(), timeout_s=10), episode_workers()
    finally:
        template.close()
