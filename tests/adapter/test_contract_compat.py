"""Choosing Miles' types or the test kit's port, and Sample helpers for both Sample generations."""

from __future__ import annotations

import dataclasses
import importlib.util
import types

import pytest

from miles_verifiers.trainer.contract import compat
from miles_verifiers.trainer.contract.compat import (
    ContractUnavailableError,
    build_sample,
    resolve_contract,
    routing_field_of,
)
from miles_verifiers_testkit.miles.contract import filters, rollout, sample


@dataclasses.dataclass
class SessionIdSample:
    """Stand-in for miles-rl 0.0.2's Sample, which routes by ``session_id`` and lacks
    ``routing_key``/``rollout_id``; only the fields these tests touch are reproduced."""

    class Status:
        COMPLETED = "completed"

    group_index: int | None = None
    index: int | None = None
    tokens: list[int] = dataclasses.field(default_factory=list)
    session_id: str | None = None


def no_miles(name: str):
    return None


def miles_present(name: str):
    return object()


def fake_miles_modules(name: str) -> types.ModuleType:
    """Importer standing in for an installed Miles: serves the port's modules under Miles' names."""
    served = {
        "miles.utils.types": sample,
        "miles.rollout.base_types": rollout,
        "miles.rollout.filter_hub.base_types": filters,
    }
    return served[name]


def broken_import(name: str):
    raise ModuleNotFoundError("No module named 'torch'")


def test_without_miles_the_port_is_used():
    chosen = resolve_contract(environ={}, find_spec=no_miles)
    assert chosen.source == "port"
    assert chosen.Sample is sample.Sample
    assert chosen.RolloutFnTrainOutput is rollout.RolloutFnTrainOutput
    assert chosen.call_dynamic_filter is filters.call_dynamic_filter


def test_with_miles_importable_its_types_are_used():
    chosen = resolve_contract(environ={}, find_spec=miles_present, import_module=fake_miles_modules)
    assert chosen.source == "miles"


def test_installed_but_broken_miles_is_an_error_not_a_silent_fallback():
    with pytest.raises(ContractUnavailableError, match="MILES_VERIFIERS_CONTRACT=port"):
        resolve_contract(environ={}, find_spec=miles_present, import_module=broken_import)


def test_env_var_can_force_the_port_even_with_miles_installed():
    chosen = resolve_contract(
        environ={"MILES_VERIFIERS_CONTRACT": "port"},
        find_spec=miles_present,
        import_module=broken_import,
    )
    assert chosen.source == "port"


def test_without_miles_or_the_kit_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setattr(compat, "entry_points", lambda group: [])
    with pytest.raises(ContractUnavailableError, match="runs inside Miles"):
        resolve_contract(environ={}, find_spec=no_miles)


def test_env_var_can_require_miles():
    with pytest.raises(ContractUnavailableError):
        resolve_contract(
            environ={"MILES_VERIFIERS_CONTRACT": "miles"},
            find_spec=no_miles,
            import_module=broken_import,
        )


def test_unknown_env_var_value_is_rejected_with_the_choices():
    with pytest.raises(ValueError, match="'auto'"):
        resolve_contract(environ={"MILES_VERIFIERS_CONTRACT": "yes"}, find_spec=no_miles)


@pytest.mark.skipif(importlib.util.find_spec("miles") is not None, reason="Miles is installed here")
def test_process_wide_contract_is_the_port_without_miles():
    assert compat.contract().source == "port"
    assert routing_field_of(compat.contract().Sample) == "routing_key"


def test_a_sample_class_without_routing_field_is_rejected_by_name():
    @dataclasses.dataclass
    class Bare:
        index: int = 0

    with pytest.raises(TypeError, match="Bare"):
        routing_field_of(Bare)


def test_build_sample_sets_routing_key_on_either_generation():
    assert build_sample(sample.Sample, routing_key="k", index=1).routing_key == "k"
    assert build_sample(SessionIdSample, routing_key="k", index=1).session_id == "k"
    assert routing_field_of(SessionIdSample) == "session_id"


def test_build_sample_skips_unset_fields_the_older_sample_lacks():
    built = build_sample(SessionIdSample, index=2, rollout_id=None)
    assert built == SessionIdSample(index=2)


def test_build_sample_refuses_to_drop_a_real_value():
    with pytest.raises(TypeError, match="rollout_id"):
        build_sample(SessionIdSample, index=2, rollout_id=5)
