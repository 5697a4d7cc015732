"""Error classification: every SGLang failure becomes what Verifiers maps to the right outcome."""

from __future__ import annotations

import httpx
import openai
import pytest
from verifiers.v1.errors import OverlongPromptError, ProviderError, model_error

from miles_verifiers.engine.errors import (
    EngineAborted,
    MalformedOutput,
    MultimodalNotSupported,
    engine_error_message,
    is_retryable_status,
    is_retryable_transport_error,
)
from miles_verifiers.episodes.transport.errors import (
    EngineAbortedError,
    MalformedEngineResponseError,
    error_for_output,
    error_for_rejection,
    error_for_status,
    error_for_transport_failure,
)

REQUEST = httpx.Request("POST", "http://engine.test:30000/generate")


def answer(status: int, **kwargs: object) -> httpx.Response:
    return httpx.Response(status, request=REQUEST, **kwargs)  # type: ignore[arg-type]


def verifiers_outcome(exc: Exception) -> ProviderError:
    """What TrainClient.get_response turns the exception into (vf/clients/train.py)."""
    if isinstance(exc, ProviderError):
        return exc
    assert isinstance(exc, openai.OpenAIError), f"{type(exc)} would become a HarnessError"
    return model_error(exc)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"error": {"message": "top_p must be in (0, 1], got 0.0."}}, "top_p must be in (0, 1]"),
        ({"error": "unknown field `foo`, expected one of ..."}, "unknown field `foo`"),
        (
            {"object": "error", "message": "bad shape", "type": "Bad Request", "code": 400},
            "bad shape",
        ),
    ],
)
def test_every_sglang_error_body_shape_yields_its_message(body: object, message: str) -> None:
    assert message in engine_error_message(answer(400, json=body))


def test_plain_text_error_body_is_used_as_is() -> None:
    assert engine_error_message(answer(502, text="upstream down\n")) == "upstream down"


def test_empty_error_body_names_the_status() -> None:
    assert engine_error_message(answer(503)) == "HTTP 503 with an empty body"


@pytest.mark.parametrize(
    "message",
    [
        "The input (300 tokens) is longer than the model's context length (256 tokens).",
        "Requested token count exceeds the model's maximum context length of 256 tokens. You ...",
    ],
)
def test_context_length_400_is_an_overlong_prompt(message: str) -> None:
    error = error_for_status(answer(400, json={"error": {"message": message}}))
    assert isinstance(error, OverlongPromptError)
    assert isinstance(verifiers_outcome(error), OverlongPromptError)


def test_an_overlong_prompt_says_maximum_context_length_whatever_the_engine_said() -> None:
    # Verifiers >= 0.3's harnesses tell a context overflow from other 400s by such phrases.
    reason = "The input (300 tokens) is longer than the model's context length (256 tokens)."
    error = error_for_status(answer(400, json={"error": {"message": reason}}))
    assert "maximum context length" in str(error)
    assert reason in str(error)


@pytest.mark.parametrize(
    "message",
    [
        "Input length (509 tokens) exceeds the maximum allowed length (506 tokens). Use a "
        "shorter input or enable --allow-auto-truncate.",
        "Request prompt exceeds the KV memory budget: input_len=509.",
    ],
)
def test_sglang_scheduler_length_refusals_are_an_overlong_prompt(message: str) -> None:
    error = error_for_status(answer(400, json={"error": {"message": message}}))
    assert isinstance(error, OverlongPromptError)


def test_other_400_is_a_bad_request_provider_error() -> None:
    error = error_for_status(answer(400, json={"error": {"message": "top_k must be -1"}}))
    assert isinstance(error, openai.BadRequestError)
    outcome = verifiers_outcome(error)
    assert type(outcome) is ProviderError
    assert outcome.status_code == 400
    assert "top_k must be -1" in str(outcome)


@pytest.mark.parametrize(
    ("status", "error_cls"),
    [
        (401, openai.AuthenticationError),
        (403, openai.PermissionDeniedError),
        (404, openai.NotFoundError),
        (409, openai.ConflictError),
        (422, openai.UnprocessableEntityError),
        (429, openai.RateLimitError),
        (418, openai.APIStatusError),
        (500, openai.InternalServerError),
        (503, openai.InternalServerError),
    ],
)
def test_http_statuses_map_to_the_matching_openai_error(
    status: int, error_cls: type[openai.APIStatusError]
) -> None:
    error = error_for_status(answer(status, text="nope"))
    assert type(error) is error_cls
    assert verifiers_outcome(error).status_code == status


def test_connection_failure_is_a_503_provider_error() -> None:
    error = error_for_transport_failure(httpx.ConnectError("refused"), REQUEST)
    assert type(error) is openai.APIConnectionError
    assert verifiers_outcome(error).status_code == 503


@pytest.mark.parametrize(
    "exc", [httpx.ReadTimeout("slow"), httpx.ConnectTimeout("slow"), httpx.PoolTimeout("full")]
)
def test_timeouts_are_504_provider_errors(exc: httpx.TimeoutException) -> None:
    error = error_for_transport_failure(exc, REQUEST)
    assert isinstance(error, openai.APITimeoutError)
    assert verifiers_outcome(error).status_code == 504


def test_a_refused_request_is_a_400_provider_error() -> None:
    error = error_for_rejection(MultimodalNotSupported("no images"), REQUEST)
    assert isinstance(error, openai.BadRequestError)
    outcome = verifiers_outcome(error)
    assert outcome.status_code == 400
    assert "no images" in str(outcome)


def test_abort_is_a_503_provider_error_by_default() -> None:
    error = error_for_output(
        EngineAborted("Aborted", status_code=None, partial_tokens=4), answer(200), None
    )
    assert isinstance(error, EngineAbortedError)
    outcome = verifiers_outcome(error)
    assert type(outcome) is ProviderError
    assert outcome.status_code == 503
    assert "aborted the request after 4 token(s): Aborted" in str(outcome)


def test_abort_with_its_own_error_status_keeps_it() -> None:
    error = error_for_output(
        EngineAborted("bad", status_code=400, partial_tokens=0), answer(200), None
    )
    assert verifiers_outcome(error).status_code == 400


def test_malformed_answer_is_a_502_provider_error() -> None:
    error = error_for_output(MalformedOutput("ids differ"), answer(200), {"x": 1})
    assert isinstance(error, MalformedEngineResponseError)
    outcome = verifiers_outcome(error)
    assert outcome.status_code == 502
    assert "ids differ" in str(outcome)


@pytest.mark.parametrize(
    ("status", "retry"),
    [(500, True), (503, True), (599, True), (400, False), (404, False), (429, False)],
)
def test_only_5xx_statuses_are_retried(status: int, retry: bool) -> None:
    assert is_retryable_status(status) is retry


@pytest.mark.parametrize(
    ("exc", "retry"),
    [
        (httpx.ConnectError("x"), True),
        (httpx.ConnectTimeout("x"), True),
        (httpx.RemoteProtocolError("x"), True),
        (httpx.ReadError("x"), True),
        (httpx.ReadTimeout("x"), False),
        (httpx.PoolTimeout("x"), False),
    ],
)
def test_connection_failures_are_retried_but_read_timeouts_are_not(
    exc: Exception, retry: bool
) -> None:
    assert is_retryable_transport_error(exc) is retry
