"""The local backend: each worker is a process speaking frames over a pair of pipes.

Workers are forked, in milliseconds, by a :class:`WorkerTemplate` that has already imported
Verifiers in the workers' interpreter. A worker runs in a session of its own and exits when its
stdin closes, so a dead trainer leaves no orphan; it is not our child, so /proc tells whether
it runs. Stopping one: SIGTERM and SIGCONT, up to :data:`TERMINATE_GRACE_S` to end what it
started, then SIGKILL to its group, its descendants and whatever carries its token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass

from miles_verifiers.protocol import procs
from miles_verifiers.protocol.framing import FrameError, encode_frame, read_frame, tag, untag
from miles_verifiers.protocol.messages import PROTOCOL_VERSION
from miles_verifiers.trainer.backends.pool import WorkerLostError

logger = logging.getLogger(__name__)

TEMPLATE_MODULE = "miles_verifiers.episodes.template"
# A fork answers in milliseconds once the template has imported Verifiers (seconds of CPU).
TEMPLATE_REPLY_TIMEOUT_S = 300.0
# A stopped worker's own bound on ending what it started, and a margin.
TERMINATE_GRACE_S = procs.STOP_BOUND_S + 5.0


class WorkerTemplate:
    """The process workers are forked from, started at the first fork (thread-safe)."""

    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._channel: socket.socket | None = None
        self._closed = False
        self._tokenizer_options: list[str] = []

    def preload_tokenizer(self, source: str, copies: int) -> None:
        """Have the template load ``copies`` tokenizers of ``source`` when it starts."""
        self._tokenizer_options = ["--tokenizer", source, "--copies", str(copies)]

    def child_environ(self) -> dict[str, str]:
        """This environment, with the workers' interpreter's directory first on ``PATH``."""
        env = dict(os.environ)
        env["PATH"] = procs.path_with_bin_first(self.python, env.get("PATH"))
        return env

    def fork(
        self, environ: dict[str, str], *, entry: str = "worker", stderr: int | None = None
    ) -> tuple[int, int, int]:
        """A new process running ``entry``: its pid, stdin's write end and stdout's read end
        (ours to close); a dead template is started again, once."""
        message = json.dumps({"entry": entry, "environ": environ}).encode()
        extra = [] if stderr is None else [stderr]
        with self._lock:
            for _ in range(2):
                if self._closed:  # close() may have ended it mid-fork
                    raise WorkerLostError("the episode workers' template was closed")
                try:
                    return self._fork(message, extra)
                except (OSError, ValueError) as error:
                    failure, code = error, self._end()
            reason = str(failure) or type(failure).__name__
            if code is not None and code >= 0:
                reason = f"it exited with code {code} (its error output is on stderr)"
            raise WorkerLostError(
                f"the episode workers' template ({self.python} -m {TEMPLATE_MODULE}) did not "
                f"fork a {entry}: {reason}"
            ) from failure

    def _fork(self, message: bytes, extra: list[int]) -> tuple[int, int, int]:
        channel = self._running()
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        try:
            socket.send_fds(channel, [message], [stdin_read, stdout_write, *extra])
            pid = int(channel.recv(32) or b"0")
            if pid <= 0:
                raise ConnectionResetError("it exited")
        except BaseException:
            os.close(stdin_write)
            os.close(stdout_read)
            raise
        finally:
            os.close(stdin_read)
            os.close(stdout_write)
        return pid, stdin_write, stdout_read

    def close(self) -> None:
        """End the template, not its workers (bounded, any thread); a fork under way fails."""
        self._closed = True
        process = self._process
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        with self._lock:
            self._end()

    def _running(self) -> socket.socket:
        if self._process is not None and self._process.poll() is None and self._channel:
            return self._channel
        self._end()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Workers get their own token and protocol variables at each fork.
        env = {k: v for k, v in os.environ.items() if k != procs.TOKEN_VARIABLE}
        try:
            self._process = subprocess.Popen(
                [self.python, "-m", TEMPLATE_MODULE, *self._tokenizer_options],
                stdin=theirs.fileno(),
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        ours.settimeout(TEMPLATE_REPLY_TIMEOUT_S)
        self._channel = ours
        return ours

    def _end(self) -> int | None:
        """Kill the template; its exit code."""
        if self._channel is not None:
            self._channel.close()
            self._channel = None
        process, self._process = self._process, None
        if process is None:
            return None
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5.0)
        return process.returncode


def _end_fork(forked: tuple[int, int, int]) -> None:
    pid, stdin_fd, stdout_fd = forked
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    os.close(stdin_fd)
    os.close(stdout_fd)


@dataclass(frozen=True)
class WorkerPipes:
    """A worker's pid and its pipes on the event loop that reads them."""

    pid: int
    stdin: asyncio.StreamWriter
    stdout: asyncio.StreamReader


class LocalWorker:
    """One forked worker process and the futures of its unanswered requests."""

    def __init__(
        self,
        pipes: WorkerPipes,
        name: str,
        token: str | None = None,
        *,
        terminate_grace_s: float = TERMINATE_GRACE_S,
    ) -> None:
        self._pipes = pipes
        self._name = name
        self._token = token
        self._grace_s = terminate_grace_s
        self._ref = procs.ref_of(pipes.pid)
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        self._write_lock = asyncio.Lock()
        self._lost: str | None = None
        # Held: the event loop keeps only a weak reference to a task.
        self._reader = asyncio.get_running_loop().create_task(
            self._read_replies(), name=f"{name}-reader"
        )

    @classmethod
    async def start(cls, name: str, template: WorkerTemplate) -> LocalWorker:
        """Fork a worker from ``template`` and connect its pipes to this event loop."""
        env = template.child_environ()
        env["MILES_VERIFIERS_WORKER_PROTOCOL"] = PROTOCOL_VERSION
        token = env[procs.TOKEN_VARIABLE] = uuid.uuid4().hex
        # The fork runs on a thread; if this start is given up meanwhile, whichever of the two
        # comes second ends the forked worker, so none is left unowned.
        lock = threading.Lock()
        forks: list[tuple[int, int, int]] = []
        given_up = False

        def fork() -> None:
            forked = template.fork(env)
            with lock:
                if not given_up:
                    forks.append(forked)
                    return
            _end_fork(forked)

        try:
            await asyncio.to_thread(fork)
        except BaseException:
            with lock:
                given_up = True
            if forks:
                _end_fork(forks.pop())
            raise
        pid, stdin_fd, stdout_fd = forks[0]
        loop = asyncio.get_running_loop()
        try:
            reader = asyncio.StreamReader(limit=2**20, loop=loop)
            await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
                os.fdopen(stdout_fd, "rb", 0),
            )
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(loop=loop), os.fdopen(stdin_fd, "wb", 0)
            )
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            raise
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        return cls(WorkerPipes(pid, writer, reader), name, token)

    @property
    def pid(self) -> int:
        return self._pipes.pid

    @property
    def alive(self) -> bool:
        return self._lost is None and self._running()

    @property
    def description(self) -> str:
        return f"episode worker {self._name} (pid {self.pid})"

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        if not self.alive:
            raise WorkerLostError(f"{self.description} is gone: {self._lost or 'it exited'}")
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = future
        try:
            stdin = self._pipes.stdin
            # The write counts too: a worker that stops reading would block the drain for ever.
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
        stdout = self._pipes.stdout
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
            self._pipes.stdin.close()
            self._mark_lost(reason)

    def _mark_lost(self, reason: str) -> None:
        if self._lost is None:
            self._lost = reason
        for future in self._pending.values():
            if not future.done():
                future.set_exception(WorkerLostError(f"{self.description} was lost: {reason}"))

    def kill(self) -> None:
        """Stop the worker (see the module docstring); blocking, bounded, any thread."""
        started = self._begin_stop()
        deadline = time.monotonic() + self._grace_s
        while time.monotonic() < deadline and self._running():
            time.sleep(0.02)
        self._finish_stop(started)

    async def stop(self) -> None:
        """:meth:`kill` without blocking the event loop the worker was started on."""
        try:
            started = await asyncio.to_thread(self._begin_stop)
            deadline = time.monotonic() + self._grace_s
            while time.monotonic() < deadline and self._running():
                await asyncio.sleep(0.02)
            await asyncio.to_thread(self._finish_stop, started)
        except asyncio.CancelledError:
            # A cancelled call must not leave a hung worker half stopped: finish off the loop.
            threading.Thread(target=self.kill, name=f"stop {self.description}").start()
            raise

    def _running(self) -> bool:
        # Without /proc, the worker counts as running until its pipe closes.
        return procs.alive(self._ref) if self._ref is not None else self._lost is None

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
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        procs.send(started, signal.SIGKILL)
        if self._token is not None:
            procs.send(procs.carrying_token(self._token), signal.SIGKILL)
