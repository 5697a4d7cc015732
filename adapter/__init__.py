"""miles-verifiers: run Verifiers V1 environments as a Miles rollout function.

Miles loads ``VerifiersRolloutFn`` (or, on the legacy path, ``generate_rollout``); both are
imported lazily, so importing the package loads no verifiers, renderers or transformers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

from miles_verifiers.errors import (
    CommandLineError,
    EngineError,
    MilesVerifiersError,
    RolloutCallError,
    SetupError,
)

__all__ = [
    "AdapterSettings",
    "CommandLineError",
    "EngineError",
    "MilesVerifiersError",
    "RolloutCallError",
    "SetupError",
    "VerifiersRolloutFn",
    "__version__",
    "generate_rollout",
]

if TYPE_CHECKING:
    from miles_verifiers.trainer.rollout import (
        AdapterSettings,
        VerifiersRolloutFn,
        generate_rollout,
    )

_LAZY = {"AdapterSettings", "VerifiersRolloutFn", "generate_rollout"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from miles_verifiers.trainer import rollout

        return getattr(rollout, name)
    raise AttributeError(f"module 'miles_verifiers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
