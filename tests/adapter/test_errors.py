"""One exception hierarchy: every adapter error is matched by type, even after Verifiers
has recorded it on a trace as text."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import httpx
import pytest
import verifiers.v1 as vf
from verifiers.v1.errors import model_error

import miles_verifiers
from miles_verifiers import errors
from miles_verifiers.engine.errors import (
    EngineAborted,
    InvalidPrompt,
    MalformedOutput,
    RequestRejected,
)
from miles_verifiers.episodes.transport.errors import (
    EngineAbortedError,
    MalformedEngineResponseError,
    error_for_output,
    error_for_rejection,
)
from miles_verifiers.episodes.v02.clients import UnsupportedRequestError
from miles_verifiers.errors import is_unsupported_request
from miles_verifiers.trainer.conversion import looks_like_engine_abort

FAMILIES = (
    errors.SetupError,
    errors.RolloutCallError,
    errors.EngineError,
    errors.CommandLineError,
)


def _adapter_exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(miles_verifiers.__path__, "miles_verifiers."):
        if info.name.startswith("miles_verifiers_testkit"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and value.__module__.startswith("miles_verifiers")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return sorted(found.values(), key=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def _recorded(error: Exception) -> vf.trace.Error:
    """What Verifiers keeps on the trace once the TrainClient reported ``error``."""
    provider = model_error(error) if not isinstance(error, vf.ProviderError) else error
    return vf.trace.Error(type=type(provider).__name__, message=str(provider))


def _response() -> httpx.Response:
    return httpx.Response(200, request=httpx.Request("POST", "http://127.0.0.1:1/generate"))


@pytest.mark.parametrize(
    "error_cls", _adapter_exception_classes(), ids=lambda cls: f"{cls.__module__}.{cls.__name__}"
)
def test_every_adapter_exception_belongs_to_exactly_one_family(error_cls: type) -> None:
    if error_cls in (errors.MilesVerifiersError, *FAMILIES):
        return
    assert issubclass(error_cls, errors.MilesVerifiersError)
    assert sum(issubclass(error_cls, family) for family in FAMILIES) == 1


def test_the_hierarchy_is_exported_from_the_package() -> None:
    for name in ("MilesVerifiersError", "SetupError", "RolloutCallError", "EngineError"):
        assert getattr(miles_verifiers, name) is getattr(errors, name)
        assert name in miles_verifiers.__all__


def test_an_engine_abort_is_still_an_abort_after_verifiers_recorded_it() -> None:
    raised = error_for_output(
        EngineAborted("aborted by request", status_code=None, partial_tokens=3),
        _response(),
        None,
    )
    recorded = _recorded(raised)

    assert errors.recorded_error_code(recorded) == EngineAbortedError.trace_code
    assert looks_like_engine_abort(recorded)


def test_an_unusable_answer_is_not_mistaken_for_an_abort() -> None:
    raised = error_for_output(MalformedOutput("logprobs missing"), _response(), None)
    recorded = _recorded(raised)

    assert errors.recorded_error_code(recorded) == MalformedEngineResponseError.trace_code
    assert not looks_like_engine_abort(recorded)


def test_a_refused_request_is_recognised_as_refused() -> None:
    request = httpx.Request("POST", "http://127.0.0.1:1/generate")
    raised = error_for_rejection(InvalidPrompt("no prompt ids"), request)

    assert errors.recorded_error_code(_recorded(raised)) == RequestRejected.trace_code


def test_an_unsupported_request_is_recognised_after_recording() -> None:
    raised = UnsupportedRequestError("streaming was asked for.", "turn streaming off.")

    assert is_unsupported_request(raised)
    assert is_unsupported_request(_recorded(raised))


def test_a_message_that_only_mentions_an_abort_is_not_an_abort() -> None:
    recorded = vf.trace.Error(type="ProviderError", message="SGLang aborted the request: x")

    assert errors.recorded_error_code(recorded) is None
    assert not looks_like_engine_abort(recorded)


def test_two_classes_cannot_claim_one_code() -> None:
    with pytest.raises(TypeError, match="engine_aborted"):

        class Impostor(errors.EngineError):
            trace_code = "engine_aborted"


def test_tagging_needs_a_class_with_a_code() -> None:
    with pytest.raises(TypeError, match="no code"):
        errors.tag_message(errors.EngineError, "x")
