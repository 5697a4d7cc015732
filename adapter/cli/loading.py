"""Loading a rollout function (a class, or a legacy function) from its dotted path."""

from __future__ import annotations

import importlib
from typing import Any

from miles_verifiers.errors import CommandLineError

DEFAULT_ROLLOUT_FUNCTION = "miles_verifiers.VerifiersRolloutFn"


class RolloutFunctionPathError(CommandLineError, ValueError):
    """``--rollout-function-path`` does not name an importable callable."""


def load_rollout_function(path: str) -> Any:
    """The rollout class or legacy function at ``package.module.Name``."""
    module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise RolloutFunctionPathError(
            f"--rollout-function-path {path!r} is not a dotted path. Fix: write it as "
            "package.module.Name, e.g. miles_verifiers.VerifiersRolloutFn."
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise RolloutFunctionPathError(
            f"--rollout-function-path {path!r}: module {module_name!r} cannot be imported "
            f"({type(error).__name__}: {error}). Fix: install the package providing it, or "
            "correct the path."
        ) from error
    target = getattr(module, attribute, None)
    if target is None:
        raise RolloutFunctionPathError(
            f"--rollout-function-path {path!r}: module {module_name!r} has no {attribute!r}. "
            "Fix: correct the name."
        )
    if not callable(target):
        raise RolloutFunctionPathError(
            f"--rollout-function-path {path!r} names a {type(target).__name__}, not a class "
            "or a function. Fix: point it at the rollout class or legacy rollout function."
        )
    return target
