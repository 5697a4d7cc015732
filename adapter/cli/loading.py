"""Loading and building a rollout function from its dotted path, as Miles' manager does (§1.2).

A class is constructed with ``RolloutFnConstructorInput(args, data_source)``; a plain function
is wrapped so that it is called with the legacy signature
``fn(args, rollout_id, data_source, evaluation=...)`` and an untyped result is wrapped into the
typed output. The same instance serves training and evaluation.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from miles_verifiers.errors import CommandLineError
from miles_verifiers.trainer.contract.compat import Contract

DEFAULT_ROLLOUT_FUNCTION = "miles_verifiers.VerifiersRolloutFn"


class RolloutFunctionPathError(CommandLineError, ValueError):
    """``--rollout-function-path`` does not name an importable callable."""


def load_object(path: str) -> Any:
    """The object at ``package.module.name``."""
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
    try:
        return getattr(module, attribute)
    except AttributeError as error:
        raise RolloutFunctionPathError(
            f"--rollout-function-path {path!r}: module {module_name!r} has no {attribute!r}. "
            "Fix: correct the name."
        ) from error


@dataclass
class LegacyRolloutFunction:
    """A plain rollout function behind the class-style call ``fn(input)``."""

    function: Callable[..., Any]
    args: argparse.Namespace
    data_source: Any
    contract: Contract

    def __call__(self, call_input: Any) -> Any:
        evaluation = bool(call_input.evaluation)
        result = self.function(
            self.args, call_input.rollout_id, self.data_source, evaluation=evaluation
        )
        if evaluation:
            if isinstance(result, self.contract.RolloutFnEvalOutput):
                return result
            return self.contract.RolloutFnEvalOutput(data=result)
        if isinstance(result, self.contract.RolloutFnTrainOutput):
            return result
        return self.contract.RolloutFnTrainOutput(samples=result)


def build_rollout_function(
    path: str, args: argparse.Namespace, contract: Contract, data_source: Any = None
) -> Callable[[Any], Any]:
    """Load ``path`` and build the callable Miles would call (a class is constructed here)."""
    target = load_object(path)
    if inspect.isclass(target):
        built: Callable[[Any], Any] = cast(Any, target)(
            contract.RolloutFnConstructorInput(args=args, data_source=data_source)
        )
        return built
    if callable(target):
        return LegacyRolloutFunction(target, args, data_source, contract)
    raise RolloutFunctionPathError(
        f"--rollout-function-path {path!r} names a {type(target).__name__}, not a class or a "
        "function. Fix: point it at the rollout class or legacy rollout function."
    )
