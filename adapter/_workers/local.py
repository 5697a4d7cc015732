"""The local backend: each worker is a child process speaking frames over stdin/stdout.

The child is started with the trainer's own interpreter (``sys.executable -m
miles_verifiers._workers.child``) and exits when its stdin closes, so a trainer that dies
leaves no orphan. Miles calls the rollout function on a background event loop thread;
asyncio's child watcher reaps children started from any thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import time

from miles_verifiers._workers.framing import FrameError, encode_frame, read_frame, tag, untag
from miles_verifiers._workers.link import WorkerLostError
from miles_verifiers._workers.protocol import PROTOCOL_VERSION

logger = logging.getLogger(__name__)

CHILD_MODULE = "miles_verifiers._workers.child"
# How long a stopped worker gets to exit after SIGTERM before it is killed.
TERMINATE_GRACE_S = 2.0


class LocalWorker:
    """One child process and the futures of its unanswered requests."""

    def __init__(self, process: asyncio.subprocess.Process, name: str) -> None:
        self._process = process
        self._name = name
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._write_lock = asyncio.Lock()
        self._lost: str | None = None
        self._reader = asyncio.get_running_loop().create_task(
            self._read_replies(), name=f"{name}-reader"
        )

    @classmethod
    async def start(cls, name: str) -> LocalWorker:
        env = dict(os.environ)
        env["MILES_VERIFIERS_WORKER_PROTOCOL"] = PROTOCOL_VERSION
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            CHILD_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        return cls(process, name)

    @property
    def pid(self) -> int:
        return self._process.pid

    @property
    def alive(self) -> bool:
        return self._lost is None and self._process.returncode is None

    @property
    def description(self) -> str:
        return f"episode worker {self._name} (pid {self.pid})"

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        if not self.alive:
            raise WorkerLostError(f"{self.description} is gone: {self._lost or 'it exited'}")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            stdin = self._process.stdin
            assert stdin is not None
            # The write counts against the timeout too: a worker that stops reading its pipe
            # would otherwise block the drain for ever.
            async with asyncio.timeout(timeout_s):
                async with self._write_lock:
                    stdin.write(encode_frame(tag(request_id, payload)))
                    await stdin.drain()
                return await future
        except TimeoutError as error:
            raise WorkerLostError(
                f"{self.description} did not answer within {timeout_s:g} s"
            ) from error
        except (ConnectionError, BrokenPipeError) as error:
            self._mark_lost(f"its pipe broke ({error})")
            raise WorkerLostError(f"{self.description} is gone: its pipe broke") from error
        finally:
            self._pending.pop(request_id, None)

    async def _read_replies(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        reason = "it closed its output"
        try:
            while True:
                frame = await read_frame(stdout)
                if frame is None:
                    break
                request_id, payload = untag(frame)
                future = self._pending.get(request_id)
                if future is not None and not future.done():
                    future.set_result(payload)
        except FrameError as error:
            reason = f"its output is corrupt ({error})"
        except asyncio.CancelledError:
            reason = "the trainer stopped reading it"
            raise
        finally:
            with contextlib.suppress(Exception):
                code = await asyncio.wait_for(self._process.wait(), 5.0)
                reason = f"{reason}; exit code {code}"
            self._mark_lost(reason)

    def _mark_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(WorkerLostError(f"{self.description} was lost: {reason}"))

    def kill(self) -> None:
        """SIGTERM, a short bounded wait, then SIGKILL (safe from any thread)."""
        self._lost = self._lost or "it was stopped"
        stop_process(self.pid, self._process)


def stop_process(pid: int, process: asyncio.subprocess.Process | None = None) -> None:
    if not _running(pid, process):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + TERMINATE_GRACE_S
    while time.monotonic() < deadline and _running(pid, process):
        time.sleep(0.02)
    if _running(pid, process):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _running(pid: int, process: asyncio.subprocess.Process | None) -> bool:
    if process is not None and process.returncode is not None:
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            # The state letter follows the command name in parentheses; Z is a zombie.
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, IndexError, ProcessLookupError):
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
