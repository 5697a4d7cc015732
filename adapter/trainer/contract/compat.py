"""Whose rollout-function contract types a run uses: Miles' own, or the test kit's port.

Inside a Miles run the rollout function must hand back Miles' classes (Miles checks
``isinstance`` on its outputs), so they are used whenever ``miles`` is importable. Without
Miles (tests, dry runs) the test kit's port stands in, found through the kit's
``miles_verifiers.contract`` entry point: the adapter never imports the kit by name.
``MILES_VERIFIERS_CONTRACT=miles|port|auto`` overrides the choice (default ``auto``).

Miles' ``Sample`` routes by ``routing_key``; miles-rl 0.0.2's by ``session_id`` (and lacks a
few newer fields). :func:`build_sample` works with either.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any, Literal

from miles_verifiers.errors import SetupError

CONTRACT_ENV_VAR = "MILES_VERIFIERS_CONTRACT"
PORT_ENTRY_POINT_GROUP = "miles_verifiers.contract"
KIT_INSTALL_HINT = "pip install miles-verifiers-testkit, or pip install ./fixtures from a checkout"

# The Miles module defining each name a run uses; the port defines them all in one.
MILES_MODULES: Mapping[str, tuple[str, ...]] = {
    "miles.utils.types": ("Sample",),
    "miles.rollout.base_types": (
        "RolloutFnConstructorInput",
        "RolloutFnTrainInput",
        "RolloutFnEvalInput",
        "RolloutFnTrainOutput",
        "RolloutFnEvalOutput",
    ),
    "miles.rollout.filter_hub.base_types": ("DynamicFilterOutput", "call_dynamic_filter"),
}

# Field that carries the router's routing key, newest generation first.
ROUTING_KEY_FIELDS: tuple[str, ...] = ("routing_key", "session_id")


class ContractUnavailableError(SetupError, ImportError):
    """Neither Miles' contract types nor the test kit's port can be used."""


@dataclass(frozen=True)
class Contract:
    """The contract types one run uses, all from the same source."""

    source: Literal["miles", "port"]
    Sample: type
    RolloutFnConstructorInput: type
    RolloutFnTrainInput: type
    RolloutFnEvalInput: type
    RolloutFnTrainOutput: type
    RolloutFnEvalOutput: type
    DynamicFilterOutput: type
    call_dynamic_filter: Callable[..., Any]


def port_contract() -> Contract:
    """The test kit's port of the contract; raises when the kit is not installed."""
    found = sorted(entry_points(group=PORT_ENTRY_POINT_GROUP), key=lambda point: point.name)
    if not found:
        raise ContractUnavailableError(
            "Miles' rollout contract types are needed, and neither Miles nor the test kit's "
            "port of them is installed. The rollout function runs inside Miles, which provides "
            f"them; tests and dry runs without Miles need the test kit ({KIT_INSTALL_HINT})."
        )
    port = found[0].load()
    names = [name for module_names in MILES_MODULES.values() for name in module_names]
    return Contract("port", **{name: getattr(port, name) for name in names})


def miles_contract(
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> Contract:
    """Miles' own contract types; raises :class:`ContractUnavailableError` if they won't import."""
    try:
        types = {
            name: getattr(import_module(module), name)
            for module, names in MILES_MODULES.items()
            for name in names
        }
    except ImportError as error:
        raise ContractUnavailableError(
            "Miles is installed but its rollout contract could not be imported "
            f"({type(error).__name__}: {error}). Fix the Miles install (its own dependencies "
            f"such as torch and ray must import), or, for tests and dry runs, set "
            f"{CONTRACT_ENV_VAR}=port to use the test kit's port instead."
        ) from error
    return Contract("miles", **types)


def resolve_contract(
    environ: Mapping[str, str] | None = None,
    find_spec: Callable[[str], Any] = importlib.util.find_spec,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> Contract:
    """Miles' types when ``miles`` is importable, else the test kit's port.

    A Miles install that is present but broken is an error rather than a silent fallback:
    the port's classes handed to a real Miles would fail later and far less clearly.
    """
    env = os.environ if environ is None else environ
    choice = (env.get(CONTRACT_ENV_VAR) or "auto").strip().lower()
    if choice not in ("auto", "miles", "port"):
        raise ValueError(
            f"{CONTRACT_ENV_VAR}={env.get(CONTRACT_ENV_VAR)!r} is not a contract choice; "
            "use 'auto' (Miles when importable), 'miles' or 'port' (the test kit's port)."
        )
    if choice == "port" or (choice == "auto" and find_spec("miles") is None):
        return port_contract()
    return miles_contract(import_module)


@functools.lru_cache(maxsize=1)
def contract() -> Contract:
    """The process-wide choice, resolved once from the environment."""
    return resolve_contract()


def sample_field_names(sample_cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(sample_cls))


def routing_field_of(sample_cls: type) -> str:
    """The Sample field that carries the routing key (``routing_key`` or ``session_id``)."""
    names = sample_field_names(sample_cls)
    for name in ROUTING_KEY_FIELDS:
        if name in names:
            return name
    raise TypeError(
        f"{sample_cls.__module__}.{sample_cls.__qualname__} has neither a routing_key nor a "
        "session_id field, so requests cannot be pinned to one engine; this Miles version "
        "is not supported."
    )


def build_sample(sample_cls: type, *, routing_key: str | None = None, **fields: Any) -> Any:
    """Construct ``sample_cls`` from ``fields``, whichever Sample generation it is.

    Fields the class lacks are skipped when they carry their default (``None``), so callers
    can always pass e.g. ``rollout_id=None``; a real value for a missing field is an error,
    because dropping it would silently change what Miles trains on.
    """
    names = sample_field_names(sample_cls)
    unsupported = sorted(k for k, v in fields.items() if k not in names and v is not None)
    if unsupported:
        raise TypeError(
            f"{sample_cls.__module__}.{sample_cls.__qualname__} has no field(s) "
            f"{', '.join(unsupported)}; this Miles version cannot carry them. Leave them "
            "unset or upgrade Miles."
        )
    sample = sample_cls(**{k: v for k, v in fields.items() if k in names})
    if routing_key is not None:
        setattr(sample, routing_field_of(sample_cls), routing_key)
    return sample
