"""The asyncio tasks one rollout call started, so that the call can cancel what outlives it."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any


class OwnedTasks:
    """Tasks started for one call. A finished task leaves the set by itself; whatever is
    still running when the call ends is cancelled by :meth:`cancel_running`."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(
        self, coroutine: Coroutine[Any, Any, Any], *, name: str | None = None
    ) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def cancel_running(self) -> list[asyncio.Task[Any]]:
        """Cancel the tasks not yet done and return them (to wait for, bounded)."""
        running = [task for task in self._tasks if not task.done()]
        for task in running:
            task.cancel()
        return running
