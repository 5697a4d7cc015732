"""Loading a rollout function from its dotted path, and constructing it as Miles' manager does
(a class from ``RolloutFnConstructorInput(args, data_source)``; a legacy function as it is).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from typing import Any

from miles_verifiers.errors import CommandLineError
from miles_verifiers.trainer.contract.compat import Contract

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


def construct_rollout_function(target: Any, args: argparse.Namespace, contract: Contract) -> Any:
    """What Miles' manager builds from ``target`` before any engine exists."""
    if not inspect.isclass(target):
        return target
    cls: Any = target  # any class: its constructor is the rollout function's own
    return cls(contract.RolloutFnConstructorInput(args=args, data_source=None))
