"""The local backend: each worker is a child process speaking frames over stdin/stdout.

The child is started with the interpreter ``MILES_VERIFIERS_EPISODE_WORKER_PYTHON`` names,
else the trainer's own (``python -m miles_verifiers._episodes.child``), in a session of its own,
and exits when its stdin closes, so a trainer that dies leaves no orphan. Miles calls the
rollout function on a background event loop thread; asyncio's child watcher reaps children
started from any thread.

Stopping a worker: SIGTERM (and SIGCONT, so a stopped worker can act on it), up to
:data:`TERMINATE_GRACE_S` for it to close its environments and end what it started, then
SIGKILL to its process group, to every process it had started (seen before the SIGTERM) and
to every process carrying its token (see :mod:`.procs`), wherever that was reparented.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
import uuid

from miles_verifiers._episodes.child import STOP_BOUND_S
from miles_verifiers._seam import procs
from miles_verifiers._seam.framing import FrameError, encode_frame, read_frame, tag, untag
from miles_verifiers._seam.link import WorkerLostError
from miles_verifiers._seam.protocol import PROTOCOL_VERSION

logger = logging.getLogger(__name__)

CHILD_MODULE = "miles_verifiers._episodes.child"
# How long a stopped worker gets to exit after SIGTERM before it is killed: its own bound on
# closing its environments and ending what it started, and a margin.
TERMINATE_GRACE_S = STOP_BOUND_S + 5.0


class LocalWorker:
    """One child process and the futures of its unanswered requests."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        name: str,
        token: str | None = None,
        *,
        terminate_grace_s: float = TERMINATE_GRACE_S,
    ) -> None:
        self._process = process
        self._name = name
        self._token = token
        self._grace_s = terminate_grace_s
        started = procs.stat_of(process.pid)
        self._ref = procs.ProcessRef(process.pid, started.start) if started else None
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._write_lock = asyncio.Lock()
        self._lost: str | None = None
        self._reader = asyncio.get_running_loop().create_task(
            self._read_replies(), name=f"{name}-reader"
        )

    @classmethod
    async def start(cls, name: str, python: str | None = None) -> LocalWorker:
        """Start a worker with ``python`` (another virtualenv's interpreter), else the trainer's."""
        env = dict(os.environ)
        env["MILES_VERIFIERS_WORKER_PROTOCOL"] = PROTOCOL_VERSION
        token = env[procs.TOKEN_VARIABLE] = uuid.uuid4().hex
        process = await asyncio.create_subprocess_exec(
            python or sys.executable,
            "-m",
            CHILD_MODULE,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, ended whole when it stops
        )
        return cls(process, name, token)

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
        """Stop the worker (see the module docstring); blocking and bounded, any thread."""
        started = self._begin_stop()
        deadline = time.monotonic() + self._grace_s
        while time.monotonic() < deadline and self._running():
            time.sleep(0.02)
        self._finish_stop(started)

    async def stop(self) -> None:
        """:meth:`kill` without blocking the event loop the worker was started on."""
        try:
            started = await asyncio.to_thread(self._begin_stop)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._process.wait(), self._grace_s)
            await asyncio.to_thread(self._finish_stop, started)
        except asyncio.CancelledError:
            # A cancelled call must not leave a hung worker half stopped: finish off the loop.
            threading.Thread(target=self.kill, name=f"stop {self.description}").start()
            raise

    def _running(self) -> bool:
        if self._process.returncode is not None:
            return False
        return self._ref is None or procs.alive(self._ref)

    def _begin_stop(self) -> list[procs.ProcessRef]:
        """What the worker started (it is their subreaper), then SIGTERM and SIGCONT."""
        self._lost = self._lost or "it was stopped"
        if not self._running():
            return []
        started = procs.descendants(self.pid)
        for signum in (signal.SIGTERM, signal.SIGCONT):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)
        return started

    def _finish_stop(self, started: list[procs.ProcessRef]) -> None:
        """SIGKILL whatever of the worker is left (nothing, after a clean exit)."""
        if self._running():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
        procs.kill_group(self.pid)
        procs.send(started, signal.SIGKILL)
        if self._token is not None:
            procs.send(procs.carrying_token(self._token), signal.SIGKILL)
