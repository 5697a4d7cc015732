"""SIGTERM handled as Ctrl-C, so a run stopped by a job scheduler keeps what it completed."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from types import FrameType


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[list[int]]:
    """While open, SIGTERM does what Ctrl-C does (through whatever SIGINT handler is in place:
    Python's KeyboardInterrupt, or asyncio's, which cancels the running task). Yields the list
    of SIGTERMs received."""
    received: list[int] = []

    def handle(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        on_interrupt = signal.getsignal(signal.SIGINT)
        if not callable(on_interrupt):  # SIGINT ignored (a background job): interrupt anyway
            raise KeyboardInterrupt
        on_interrupt(signal.SIGINT, frame)

    try:
        previous = signal.signal(signal.SIGTERM, handle)
    except ValueError:  # not the main thread: signals are not ours to handle
        yield received
        return
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)
