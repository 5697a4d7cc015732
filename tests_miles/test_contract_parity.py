"""The project's port of Miles' contract, held field by field against Miles' real classes.

Deliberate differences are only in annotations, where the port is the more precise: it writes
``X | None`` where Miles defaults an ``X`` field to None, ``Any`` where Miles stores numpy
arrays, ``dict[str, Any]`` where Miles writes a bare ``dict``, and ``Any`` for message values
(tool calls are not strings). Everything else (names, order, defaults, type structure) must
be equal.
"""

from __future__ import annotations

import dataclasses
import enum
import importlib
import types
import typing
from typing import Any

import pytest

from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers_testkit.miles.contract import filters as port_filters
from miles_verifiers_testkit.miles.contract import rollout as port_rollout
from miles_verifiers_testkit.miles.contract import sample as port_sample

_NO_DEFAULT = "<required>"


def _default(field: dataclasses.Field) -> Any:
    if field.default is not dataclasses.MISSING:
        value = field.default
        return value.value if isinstance(value, enum.Enum) else value
    if field.default_factory is not dataclasses.MISSING:
        made = field.default_factory()
        return dataclasses.asdict(made) if dataclasses.is_dataclass(made) else made
    return _NO_DEFAULT


def _normalise(hint: Any) -> Any:
    """An annotation with ``| None`` dropped and numpy arrays read as ``Any``."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = {_normalise(a) for a in typing.get_args(hint) if a is not type(None)}
        return members.pop() if len(members) == 1 else frozenset(members)
    if getattr(hint, "__module__", "") == "numpy" or hint is type(None):
        return Any
    if origin is not None:
        return (origin, tuple(_normalise(a) for a in typing.get_args(hint)))
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return ("enum", hint.__qualname__)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return ("dataclass", hint.__qualname__)
    return hint


def _matches(port: Any, miles: Any) -> bool:
    """Whether a normalised port annotation agrees with Miles' (``Any`` in the port matches
    anything; a bare generic in Miles matches any parameters)."""
    if port is Any or port == miles:
        return True
    if isinstance(port, frozenset) and isinstance(miles, frozenset):
        return len(port) == len(miles) and all(any(_matches(p, m) for m in miles) for p in port)
    if isinstance(port, tuple) and len(port) == 2 and isinstance(port[1], tuple):
        if port[0] is miles:
            return True
        if isinstance(miles, tuple) and len(miles) == 2 and port[0] is miles[0]:
            return len(port[1]) == len(miles[1]) and all(
                _matches(p, m) for p, m in zip(port[1], miles[1], strict=True)
            )
    return False


def _mismatches(port_cls: type, miles_cls: type) -> list[str]:
    port, miles = _shape(port_cls), _shape(miles_cls)
    if [n for n, _, _ in port] != [n for n, _, _ in miles]:
        return [
            f"field names/order: port {[n for n, _, _ in port]} vs Miles {[n for n, _, _ in miles]}"
        ]
    return [
        f"{p_name}: port ({p_type}, default {p_default!r}) "
        f"vs Miles ({m_type}, default {m_default!r})"
        for (p_name, p_type, p_default), (_, m_type, m_default) in zip(port, miles, strict=True)
        if p_default != m_default or not _matches(p_type, m_type)
    ]


def _shape(cls: type) -> list[tuple[str, Any, Any]]:
    hints = typing.get_type_hints(cls, localns={cls.__name__: cls, **vars(cls)})
    return [(f.name, _normalise(hints[f.name]), _default(f)) for f in dataclasses.fields(cls)]


def _miles(module: str) -> Any:
    return importlib.import_module(module)


def test_the_adapter_runs_on_miles_own_contract_types_here() -> None:
    assert contract().source == "miles"
    assert contract().Sample is _miles("miles.utils.types").Sample


@pytest.mark.parametrize(
    "name", ["Sample", "Sample.SpecInfo", "Sample.PrefixCacheInfo", "AdapterRef", "RewardSpec"]
)
def test_the_port_has_every_sample_field_with_miles_type_and_default(name: str) -> None:
    def resolve(root: Any) -> type:
        for part in name.split("."):
            root = getattr(root, part)
        return root

    assert _mismatches(resolve(port_sample), resolve(_miles("miles.utils.types"))) == []


def test_the_port_has_exactly_miles_sample_status_members() -> None:
    port = {m.name: m.value for m in port_sample.Sample.Status}
    miles = {m.name: m.value for m in _miles("miles.utils.types").Sample.Status}
    assert port == miles


def test_the_port_sample_has_every_public_method_of_miles_sample() -> None:
    def methods(cls: type) -> set[str]:
        return {
            n
            for n, v in vars(cls).items()
            if callable(v) or isinstance(v, (staticmethod, classmethod, property))
        }

    miles_methods = {
        n for n in methods(_miles("miles.utils.types").Sample) if not n.startswith("_")
    }
    port_methods = {n for n in methods(port_sample.Sample) if not n.startswith("_")}
    assert miles_methods - {"Status", "SpecInfo", "PrefixCacheInfo"} <= port_methods


def test_a_sample_round_trips_between_the_port_and_miles_through_to_dict() -> None:
    miles_sample_cls = _miles("miles.utils.types").Sample
    port = port_sample.Sample(
        group_index=1,
        index=3,
        prompt="p",
        tokens=[1, 2, 3],
        response="r",
        response_length=2,
        reward={"acc": 1.0},
        loss_mask=[1, 1],
        rollout_log_probs=[-0.1, -0.2],
        status=port_sample.Sample.Status.TRUNCATED,
        metadata={"k": "v"},
        routing_key="key",
    )
    as_miles = miles_sample_cls.from_dict(port.to_dict())
    assert as_miles.to_dict() == port.to_dict()
    assert port_sample.Sample.from_dict(as_miles.to_dict()).to_dict() == as_miles.to_dict()


@pytest.mark.parametrize(
    "name",
    [
        "RolloutFnConstructorInput",
        "RolloutFnBaseInput",
        "RolloutFnTrainInput",
        "RolloutFnEvalInput",
        "RolloutFnTrainOutput",
        "RolloutFnEvalOutput",
    ],
)
def test_the_port_rollout_types_have_miles_fields_and_defaults(name: str) -> None:
    miles_cls = getattr(_miles("miles.rollout.base_types"), name)
    port_cls = getattr(port_rollout, name)
    assert [(f.name, _default(f)) for f in dataclasses.fields(port_cls)] == [
        (f.name, _default(f)) for f in dataclasses.fields(miles_cls)
    ]


@pytest.mark.parametrize("name", ["DynamicFilterOutput"])
def test_the_port_filter_types_have_miles_fields_and_defaults(name: str) -> None:
    miles_cls = getattr(_miles("miles.rollout.filter_hub.base_types"), name)
    assert _mismatches(getattr(port_filters, name), miles_cls) == []
