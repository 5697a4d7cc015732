"""The local backend's process handling: a request times out even when the worker stops
reading its pipe."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from miles_verifiers._workers.link import WorkerLostError
from miles_verifiers._workers.local import LocalWorker

# Bounds each scenario (a hang fails the test instead of stalling the suite).
SCENARIO_BOUND_S = 60.0


def run(scenario: Any) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(scenario, SCENARIO_BOUND_S)

    return asyncio.run(bounded())


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
