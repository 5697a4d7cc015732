"""The engine's failures as what Verifiers expects: ``openai`` exceptions and overlong prompts.

Verifiers' ``TrainClient`` turns ``openai`` exceptions into a ``ProviderError`` with an HTTP
status (connection 503, timeout 504, a status error its own) and ends a trace cleanly on an
overlong prompt; anything else is a harness failure.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

import httpx
import openai

from miles_verifiers.engine.errors import (
    ENGINE_ABORTED_CODE,
    UNUSABLE_ANSWER_CODE,
    EngineAborted,
    MalformedOutput,
    PromptTooLongError,
    RequestRejected,
    engine_error_message,
    is_context_length_message,
)
from miles_verifiers.engine.proxies import proxy_failure_note
from miles_verifiers.errors import EngineError, tag_message

# The Rust sglang-router's 422 text names the JSON path it could not read, e.g.
# "...into the target type: sampling_params.sampling_seed: invalid value: ...".
_ROUTER_FIELD = re.compile(r"target type: ([A-Za-z_][\w.\[\]]*):")


class EngineAbortedError(EngineError, openai.APIStatusError):
    """SGLang aborted the generation; its partial output is discarded. ``status_code`` is the
    abort's own 4xx/5xx when SGLang gives one, else 503 (the harness may retry the turn)."""

    trace_code = ENGINE_ABORTED_CODE

    def __init__(
        self, message: str, *, response: httpx.Response, body: object | None, status_code: int
    ) -> None:
        super().__init__(message, response=response, body=body)
        self.status_code = status_code


class MalformedEngineResponseError(EngineError, openai.APIResponseValidationError):
    """SGLang answered 2xx, but its token metadata cannot be trusted for training (502)."""

    trace_code = UNUSABLE_ANSWER_CODE


_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


# Verifiers >= 0.3's harness utilities tell a context overflow from other 400s by phrases like
# this one in the error text (the wording of Renderers' own pre-flight check).
_OVERFLOW_PHRASE = "maximum context length"


def overlong_prompt(message: str) -> Exception:
    """The error for a prompt that does not fit, as the installed Verifiers takes it: 0.2.0's
    ``OverlongPromptError`` (the trace ends as ``context_length``), else Renderers' (a 400 the
    harness sees as a context overflow), else :class:`PromptTooLongError`."""
    if _OVERFLOW_PHRASE not in message.casefold():
        message = f"{message} (over the {_OVERFLOW_PHRASE})"
    try:
        from verifiers.v1.errors import OverlongPromptError
    except ImportError:
        try:
            from renderers import OverlongPromptError as RenderersOverlong
        except ImportError:
            return PromptTooLongError(message)
        # Its constructor only takes the two lengths and words the text itself; ours names
        # the limit that refused the prompt, which may be the engine's own 400.
        error = RenderersOverlong.__new__(RenderersOverlong)
        Exception.__init__(error, message)
        return error
    return OverlongPromptError(message)


def error_for_status(response: httpx.Response, sampling_keys: Sequence[str] = ()) -> Exception:
    """The exception for a non-2xx SGLang answer: an overlong prompt for a context-length 400,
    else the matching ``openai`` class. A bare 500 names ``sampling_keys``: older SGLang answers
    that, and nothing else, when it cannot build its ``SamplingParams`` from them."""
    status = response.status_code
    reason = engine_error_message(response)
    message = f"SGLang answered HTTP {status}: {reason}"
    # SGLang's HTTP server says just this for an exception its handler does not catch.
    if status == 500 and reason.strip().casefold() == "internal server error" and sampling_keys:
        message += (
            f" (SGLang 0.5.16 and older answer this when a sampling param cannot be used; this "
            f"request set {', '.join(sorted(sampling_keys))})"
        )
    if status == 400 and is_context_length_message(reason):
        return overlong_prompt(message)
    if status == 422:
        # Only the Rust sglang-router says 422 (SGLang itself says 400): its typed request
        # struct could not hold a field. The same body will never be accepted.
        field = _ROUTER_FIELD.search(reason)
        named = f" field {field.group(1)!r}" if field else " request body"
        message = (
            f"the SGLang router refused the{named} (HTTP 422, not retried): {reason}. Fix the "
            "value in the sampling settings or drop it"
        )
    body = None
    with contextlib.suppress(ValueError):
        body = response.json()
    other = openai.InternalServerError if status >= 500 else openai.APIStatusError
    return _STATUS_ERRORS.get(status, other)(message, response=response, body=body)


def error_for_transport_failure(
    exc: httpx.RequestError, request: httpx.Request, *, proxy: str | None = None
) -> openai.APIConnectionError:
    """``APITimeoutError`` (504) for a timeout, else ``APIConnectionError`` (503), naming
    ``proxy`` when the request went through one (the failure may be the proxy's)."""
    if isinstance(exc, httpx.TimeoutException):
        return openai.APITimeoutError(request=request)
    via = proxy_failure_note(proxy, "the engine host")
    return openai.APIConnectionError(
        message=f"could not talk to SGLang at {request.url}{via}: {type(exc).__name__}: {exc}",
        request=request,
    )


def error_for_rejection(exc: RequestRejected, request: httpx.Request) -> openai.BadRequestError:
    """A request the transport refused to send, as a 400 (the harness must not retry it)."""
    body: dict[str, Any] = {"error": {"message": str(exc), "type": type(exc).__name__}}
    response = httpx.Response(400, json=body, request=request)
    return openai.BadRequestError(
        tag_message(type(exc), f"the SGLang transport refused the request: {exc}"),
        response=response,
        body=body,
    )


def error_for_output(
    exc: EngineAborted | MalformedOutput, response: httpx.Response, body: object | None
) -> openai.APIError:
    """The exception for a 2xx answer that is an abort or cannot be trusted."""
    if isinstance(exc, EngineAborted):
        status = exc.status_code if exc.status_code and 400 <= exc.status_code <= 599 else 503
        return EngineAbortedError(
            tag_message(
                EngineAbortedError,
                f"SGLang aborted the request after {exc.partial_tokens} token(s): {exc}",
            ),
            response=response,
            body=body,
            status_code=status,
        )
    return MalformedEngineResponseError(
        response,
        body,
        message=tag_message(
            MalformedEngineResponseError,
            f"SGLang at {response.request.url} broke the /generate contract; its answer is "
            f"unusable for training: {exc}",
        ),
    )
