"""Where the handler that answers the protocol's messages lives, named by a string.

The trainer side must not import the episode side (which brings Verifiers and its
dependencies), yet the in-process backend and the Ray actor run the handler in a process the
trainer started. They name it here, the same way the local backend names the module its
workers run (``python -m miles_verifiers.episodes.child``), and resolve it only when a worker
starts.
"""

from __future__ import annotations

import importlib
from typing import Any

HANDLER = "miles_verifiers.episodes.worker:WorkerHandler"
"""``module:attribute`` of the class that answers the messages of :mod:`.messages`."""


def load_handler_class() -> Any:
    """The class :data:`HANDLER` names, imported now (with the episode side's dependencies)."""
    module_name, _, attribute = HANDLER.partition(":")
    return getattr(importlib.import_module(module_name), attribute)
