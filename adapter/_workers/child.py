"""A local episode worker process: ``python -m miles_verifiers._workers.child``.

Reads length-prefixed request frames from stdin and writes reply frames to stdout, serving
requests concurrently. The protocol owns the real stdout: file descriptor 1 is pointed at
stderr first, so a library that prints cannot corrupt a frame. When stdin closes (the trainer
closed it, exited or was killed) the worker ends its calls within bounded time and exits, so
it never outlives its parent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from miles_verifiers._workers.framing import encode_frame, read_frame, tag, untag
from miles_verifiers._workers.worker import WorkerHandler

logger = logging.getLogger(__name__)

# Bound on ending every open call once stdin has closed (each step is bounded already).
EXIT_GRACE_S = 30.0


def _protocol_stdout() -> int:
    """A private duplicate of stdout for frames; fd 1 then goes to stderr."""
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

    async def answer(frame: bytes) -> None:
        request_id, payload = untag(frame)
        reply = encode_frame(tag(request_id, await handler.handle_frame(payload)))
        async with write_lock:
            # One frame at a time; the write happens off the loop so episodes keep running.
            await asyncio.to_thread(_write_all, out_fd, reply)

    try:
        while True:
            frame = await read_frame(reader)
            if frame is None:
                break
            task = loop.create_task(answer(frame))
            running.add(task)
            task.add_done_callback(running.discard)
    finally:
        for task in running:
            task.cancel()
        try:
            async with asyncio.timeout(EXIT_GRACE_S):
                await handler.close()
        except TimeoutError:
            logger.warning("the episode worker's calls did not end within %.0f s", EXIT_GRACE_S)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def main() -> None:
    out_fd = _protocol_stdout()
    logging.basicConfig(
        level=os.environ.get("MILES_VERIFIERS_WORKER_LOG_LEVEL", "WARNING"),
        format="[episode worker %(process)d] %(levelname)s %(name)s: %(message)s",
    )
    try:
        asyncio.run(serve(WorkerHandler(), out_fd))
    finally:
        # Skip interpreter teardown: leftover non-daemon threads of a library must not keep a
        # worker whose parent is gone alive.
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
