"""One event loop in a daemon thread running every rollout coroutine, as Miles does (§1.3), with a
timeout per call so a stuck rollout cannot hang the run; the legacy path and the test kit use it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, Self

from miles_verifiers.errors import RolloutCallError


class RolloutCallTimeout(RolloutCallError, TimeoutError):
    """A rollout-function call did not finish within the runner's per-call limit."""


class BackgroundLoop:
    """One persistent event loop in a daemon thread; a context manager."""

    def __init__(self, name: str = "miles-verifiers-rollout-loop") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._lock = threading.Lock()
        self._in_flight: set[concurrent.futures.Future[Any]] = set()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    def start(self) -> Self:
        self._thread.start()
        return self

    def is_current(self) -> bool:
        """Whether the calling code runs on this loop (waiting on it from there would deadlock)."""
        try:
            return asyncio.get_running_loop() is self._loop
        except RuntimeError:
            return False

    def run(self, coroutine: Coroutine[Any, Any, Any], timeout: float | None) -> Any:
        """Run ``coroutine`` on the loop and wait for it (from any other thread)."""
        future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        with self._lock:
            self._in_flight.add(future)
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError as error:
            future.cancel()
            raise RolloutCallTimeout(
                f"the rollout call did not finish within {timeout:g} s and was cancelled. Fix: "
                "raise --call-timeout, or look at the engine (is it reachable and serving?)."
            ) from error
        finally:
            with self._lock:
                self._in_flight.discard(future)

    def cancel_all(self) -> None:
        """Cancel every call in flight (their waiting threads then return at once)."""
        with self._lock:
            futures = list(self._in_flight)
        for future in futures:
            future.cancel()

    def close(self, timeout: float = 10.0) -> None:
        """Cancel leftover tasks, stop the loop and join its thread (bounded)."""
        if not self._thread.is_alive():
            self._loop.close()
            return
        self.cancel_all()

        async def _cancel_leftovers() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            if tasks:
                await asyncio.wait(tasks, timeout=timeout)
            await self._loop.shutdown_asyncgens()

        try:
            asyncio.run_coroutine_threadsafe(_cancel_leftovers(), self._loop).result(timeout + 1)
        except (concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            pass  # best effort: the thread is a daemon and the process may exit anyway
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
