"""The engine's error vocabulary, as both sides read it: refusals, signals, classification
(the trainer recognises those recorded on a trace by their code)."""

from __future__ import annotations

import json

import httpx

from miles_verifiers.errors import EngineError

# The codes (miles_verifiers.errors.tag_message) of an aborted generation and of an answer
# unusable for training: the trainer decides by them.
ENGINE_ABORTED_CODE = "engine_aborted"
UNUSABLE_ANSWER_CODE = "unusable_answer"

# Wordings SGLang (and OpenAI-style servers) use when a prompt does not fit the context window.
_CONTEXT_LENGTH_PHRASES = (
    "context length",
    "context_length",
    "maximum context",
    "longer than the model",
    "prompt is too long",
    "prompt_too_long",
    # SGLang's scheduler: a prompt at or over max_req_input_len, or one its KV pool cannot hold.
    "exceeds the maximum allowed length",
    "kv memory budget",
)


class RequestRejected(EngineError, ValueError):
    """The transport refuses the request itself; it is never sent (reported as HTTP 400)."""

    trace_code = "request_refused"


class MultimodalNotSupported(RequestRejected):
    """The request carries images or other multimodal features, which this transport cannot send."""


class InvalidPrompt(RequestRejected):
    """The prompt token ids are missing, empty or not a list of non-negative integers."""


class InvalidSamplingParams(RequestRejected):
    """A sampling parameter has a value the transport cannot translate for SGLang."""


class MalformedOutput(EngineError, ValueError):
    """SGLang's /generate answer is inconsistent or incomplete (pure-layer signal)."""


class EngineAborted(EngineError):
    """SGLang finished the request with ``finish_reason.type == "abort"`` (pure-layer signal)."""

    def __init__(self, message: str, *, status_code: int | None, partial_tokens: int) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.partial_tokens = partial_tokens


class PromptTooLongError(EngineError, ValueError):
    """The prompt is over a limit or leaves no room to generate."""


def is_context_length_message(message: str) -> bool:
    folded = message.casefold()
    return any(phrase in folded for phrase in _CONTEXT_LENGTH_PHRASES)


def is_retryable_status(status_code: int) -> bool:
    """5xx may be transient (engine restarting, overloaded); 4xx never changes on a resend."""
    return 500 <= status_code <= 599


def is_retryable_transport_error(exc: BaseException) -> bool:
    """Failing to reach the engine, or a dropped connection; not a read timeout or a full pool."""
    return isinstance(
        exc,
        httpx.ConnectError
        | httpx.ConnectTimeout
        | httpx.ReadError
        | httpx.WriteError
        | httpx.RemoteProtocolError,
    )


def engine_error_message(response: httpx.Response) -> str:
    """The reason in an SGLang error body: ``{"error": {"message": ...}}``, ``{"error": ...}``
    (0.5.23's schema gate), ``{"message": ...}``, ``{"detail": ...}`` or plain text."""
    text = response.text
    try:
        body = json.loads(text)
    except ValueError:
        return text.strip() or f"HTTP {response.status_code} with an empty body"
    if isinstance(body, dict):
        error = body.get("error")
        nested = error.get("message") if isinstance(error, dict) else error
        for reason in (nested, body.get("message"), body.get("detail")):
            if isinstance(reason, str):
                return reason
    return text.strip()
