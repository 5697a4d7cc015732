"""The fixture taskset packages, and the check that test folders needing them run first.

They are separate distributions under ``fixtures/environments/``; a conftest that calls
:func:`require_installed` at import time turns a missing one into one clear error at
collection instead of an ``ImportError`` per test module.
"""

from __future__ import annotations

import importlib.util

FIXTURE_TASKSETS = (
    "mv_arith",
    "mv_dialogue",
    "mv_tools",
    "mv_group",
    "mv_compact",
    "mv_longprompt",
    "mv_faulty",
)


def require_installed(names: tuple[str, ...] = FIXTURE_TASKSETS) -> None:
    """Raise ImportError naming every missing package and the command that installs it."""
    missing = [name for name in names if importlib.util.find_spec(name) is None]
    if missing:
        paths = " ".join(f"./fixtures/environments/{name}" for name in missing)
        raise ImportError(
            f"fixture taskset packages are not installed: {', '.join(missing)}. "
            f"Install them from the repository root with: pip install --no-deps {paths}"
        )
