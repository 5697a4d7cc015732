"""A local episode worker process: :func:`main`, forked by :mod:`.template`, with the pipes to
the trainer as stdin and stdout (length-prefixed frames, answered concurrently).

When stdin closes or SIGTERM comes, the worker ends its calls within bounded time, ends what it
started, and exits, so it never outlives its parent. As child subreaper it also finds processes
that left their parent; past :data:`STOP_BOUND_S` after SIGTERM a watchdog thread ends them and
exits, even if the event loop is stuck.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading

from miles_verifiers.episodes.worker import WorkerHandler
from miles_verifiers.protocol import procs
from miles_verifiers.protocol.framing import encode_frame, read_frame, tag, untag
from miles_verifiers.protocol.procs import DESCENDANT_GRACE_S, EXIT_GRACE_S, STOP_BOUND_S

logger = logging.getLogger(__name__)


def protocol_stdout() -> int:
    """A private duplicate of stdout for replies; fd 1 then goes to stderr, so a library that
    prints cannot corrupt one."""
    sys.stdout.flush()
    fd = os.dup(1)
    os.dup2(2, 1)
    return fd


async def serve(handler: WorkerHandler, out_fd: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**20)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    write_lock = asyncio.Lock()
    running: set[asyncio.Task[None]] = set()
    terminated = asyncio.Event()
    watchdog = threading.Timer(STOP_BOUND_S, _give_up)
    watchdog.daemon = True

    def on_terminate(*_: object) -> None:
        if watchdog.ident is None:
            watchdog.start()
        with contextlib.suppress(RuntimeError):  # the loop has closed: the worker is exiting
            loop.call_soon_threadsafe(terminated.set)

    # A plain handler (not the loop's) runs even while the loop is stuck in Python code.
    signal.signal(signal.SIGTERM, on_terminate)

    async def answer(frame: bytes) -> None:
        request_id, payload = untag(frame)
        reply = encode_frame(tag(request_id, await handler.handle_frame(payload)))
        async with write_lock:
            # One frame at a time; the write happens off the loop so episodes keep running.
            await asyncio.to_thread(_write_all, out_fd, reply)

    try:
        while True:
            frame = await _next_frame(reader, terminated)
            if frame is None:
                break
            task = loop.create_task(answer(frame))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        if watchdog.ident is None:  # stdin closed: the way out is bounded all the same
            watchdog.start()
        for task in running:
            task.cancel()
        try:
            async with asyncio.timeout(EXIT_GRACE_S):
                await handler.close()
        except TimeoutError:
            logger.warning("the episode worker's calls did not end within %.0f s", EXIT_GRACE_S)


async def _next_frame(reader: asyncio.StreamReader, terminated: asyncio.Event) -> bytes | None:
    """The next request frame; None once stdin closed or SIGTERM came."""
    reading = asyncio.ensure_future(read_frame(reader))
    waiting = asyncio.ensure_future(terminated.wait())
    try:
        await asyncio.wait({reading, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
        reading.cancel()
    if terminated.is_set():
        if reading.done() and not reading.cancelled():
            reading.exception()  # retrieved: a frame after SIGTERM is not answered
        return None
    return reading.result()


def _give_up() -> None:
    logger.warning("the episode worker did not stop within %.0f s; ending it", STOP_BOUND_S)
    procs.end(procs.descendants(os.getpid()), 0.0)
    os._exit(1)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main() -> None:
    out_fd = protocol_stdout()
    procs.become_child_subreaper()
    logging.basicConfig(
        level=os.environ.get("MILES_VERIFIERS_WORKER_LOG_LEVEL", "WARNING"),
        format="[episode worker %(process)d] %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(WorkerHandler(), out_fd))
        procs.end(procs.descendants(os.getpid()), DESCENDANT_GRACE_S)
    finally:
        # Skip interpreter teardown: leftover non-daemon threads of a library must not keep a
        # worker whose parent is gone alive.
        sys.stderr.flush()
        os._exit(0)
