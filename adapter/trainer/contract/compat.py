"""The one place that decides whose contract types the adapter uses: Miles' or the port's.

Inside a Miles run the rollout function must hand back Miles' own classes (Miles checks
``isinstance`` on its outputs and wraps anything else), so when ``miles`` is importable its
types are used. Everywhere else the project's port (:mod:`miles_verifiers.trainer.contract`) stands
in. ``MILES_VERIFIERS_CONTRACT=port|miles|auto`` overrides the choice (default ``auto``).

Two generations of Miles' ``Sample`` exist: the current one routes by ``routing_key``, while
miles-rl 0.0.2 has ``session_id`` instead (and lacks a few newer fields). The helpers here
(:func:`set_routing_key`, :func:`build_sample`) work with either.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

from miles_verifiers.errors import SetupError

CONTRACT_ENV_VAR = "MILES_VERIFIERS_CONTRACT"

# Field that carries the router's routing key, newest generation first.
ROUTING_KEY_FIELDS: tuple[str, ...] = ("routing_key", "session_id")

ContractSource = Literal["miles", "port"]


class ContractUnavailableError(SetupError, ImportError):
    """Miles' contract types were required (or Miles is installed) but cannot be imported."""


@dataclass(frozen=True)
class Contract:
    """The contract types one run uses, all from the same source."""

    source: ContractSource
    Sample: type
    RolloutFnConstructorInput: type
    RolloutFnTrainInput: type
    RolloutFnEvalInput: type
    RolloutFnTrainOutput: type
    RolloutFnEvalOutput: type
    DynamicFilterOutput: type
    MetricGatherer: type
    call_dynamic_filter: Callable[..., Any]

    @property
    def routing_field(self) -> str:
        return routing_field_of(self.Sample)


def _build(
    source: ContractSource, types: ModuleType, base: ModuleType, filters: ModuleType
) -> Contract:
    return Contract(
        source=source,
        Sample=types.Sample,
        RolloutFnConstructorInput=base.RolloutFnConstructorInput,
        RolloutFnTrainInput=base.RolloutFnTrainInput,
        RolloutFnEvalInput=base.RolloutFnEvalInput,
        RolloutFnTrainOutput=base.RolloutFnTrainOutput,
        RolloutFnEvalOutput=base.RolloutFnEvalOutput,
        DynamicFilterOutput=filters.DynamicFilterOutput,
        MetricGatherer=filters.MetricGatherer,
        call_dynamic_filter=filters.call_dynamic_filter,
    )


def port_contract() -> Contract:
    """The project's own port of the contract (no Miles needed)."""
    from miles_verifiers.trainer.contract import filters, rollout, sample

    return _build("port", sample, rollout, filters)


def miles_contract(
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> Contract:
    """Miles' own contract types; raises :class:`ContractUnavailableError` if they won't import."""
    try:
        types = import_module("miles.utils.types")
        base = import_module("miles.rollout.base_types")
        filters = import_module("miles.rollout.filter_hub.base_types")
    except ImportError as error:
        raise ContractUnavailableError(
            "Miles is installed but its rollout contract could not be imported "
            f"({type(error).__name__}: {error}). Fix the Miles install (its own dependencies "
            f"such as torch and ray must import), or set {CONTRACT_ENV_VAR}=port to run on "
            "the project's port without Miles."
        ) from error
    return _build("miles", types, base, filters)


def resolve_contract(
    environ: Mapping[str, str] | None = None,
    find_spec: Callable[[str], Any] = importlib.util.find_spec,
    import_module: Callable[[str], ModuleType] = importlib.import_module,
) -> Contract:
    """Pick the contract: Miles' when ``miles`` is importable, else the port.

    A Miles install that is present but broken is an error rather than a silent fallback:
    handing the port's classes to a real Miles would fail later and far less clearly.
    """
    env = os.environ if environ is None else environ
    choice = (env.get(CONTRACT_ENV_VAR) or "auto").strip().lower()
    if choice not in ("auto", "miles", "port"):
        raise ValueError(
            f"{CONTRACT_ENV_VAR}={env.get(CONTRACT_ENV_VAR)!r} is not a contract choice; "
            "use 'auto' (Miles when importable), 'miles' or 'port'."
        )
    if choice == "port":
        return port_contract()
    if choice == "auto" and find_spec("miles") is None:
        return port_contract()
    return miles_contract(import_module)


@functools.lru_cache(maxsize=1)
def contract() -> Contract:
    """The process-wide choice, resolved once from the environment."""
    return resolve_contract()


# -- Sample helpers that work on both Sample generations --------------------------------


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


def set_routing_key(sample: Any, key: str | None) -> None:
    setattr(sample, routing_field_of(type(sample)), key)


def get_routing_key(sample: Any) -> str | None:
    return getattr(sample, routing_field_of(type(sample)))


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
        set_routing_key(sample, routing_key)
    return sample
