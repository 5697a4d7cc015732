"""The local backend's process handling: a request times out even when the worker stops
reading its pipe, a worker ends cleanly on SIGTERM, and stopping one ends its whole process
group without blocking the event loop."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any

from miles_verifiers._seam.link import WorkerLostError
from miles_verifiers._seam.local import LocalWorker
from tests.workers.processes import ProcessInfo, descendants, still_running, wait_until

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


async def stubborn_worker(grace_s: float) -> LocalWorker:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        STUBBORN,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    assert await process.stdout.readline() == b"ready\n"
    return LocalWorker(process, "stubborn", terminate_grace_s=grace_s)


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
        worker = LocalWorker(process, "deaf")
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
        worker = await stubborn_worker(grace_s=0.5)
        seen = stubborn_processes()
        assert len(seen) == 2
        await asyncio.to_thread(worker.kill)
        return seen

    seen = run(scenario())

    assert wait_until(lambda: not still_running(seen), timeout_s=10), still_running(seen)


def test_stopping_a_worker_leaves_its_event_loop_free_meanwhile() -> None:
    async def scenario() -> tuple[bool, list[ProcessInfo]]:
        worker = await stubborn_worker(grace_s=2.0)
        seen = stubborn_processes()
        stopping = asyncio.ensure_future(worker.stop())
        await asyncio.sleep(0.2)  # the loop runs this while the worker has its grace
        free_meanwhile = not stopping.done()
        await stopping
        return free_meanwhile, seen

    free_meanwhile, seen = run(scenario())

    assert free_meanwhile
    assert wait_until(lambda: not still_running(seen), timeout_s=10), still_running(seen)


def test_a_worker_ends_cleanly_on_sigterm() -> None:
    async def scenario() -> int:
        worker = await LocalWorker.start("signalled")
        await worker.request(1, b"{}", timeout_s=30)  # refused, but answered: it is serving
        worker._process.send_signal(signal.SIGTERM)
        return await worker._process.wait()

    assert run(scenario()) == 0
