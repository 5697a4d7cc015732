"""SGLang transport: what Verifiers' ``TrainClient`` is given in place of an ``AsyncOpenAI``.

It turns Renderers' token-in/token-out generate requests into SGLang's native ``/generate`` and
returns the exact sampled token ids and logprobs.
"""

from miles_verifiers._transport.errors import (
    EngineAbortedError,
    InvalidPrompt,
    InvalidSamplingParams,
    MalformedEngineResponseError,
    MultimodalNotSupported,
    RequestRejected,
)
from miles_verifiers._transport.identity import EngineModelMismatchError
from miles_verifiers._transport.settings import (
    EngineAddressError,
    RetryPolicy,
    RoutingPolicy,
    TimeoutPolicy,
    TransportSettings,
)
from miles_verifiers._transport.transport import SGLangTransport
from miles_verifiers._transport.workers import AbortReport, WorkerListError

__all__ = [
    "AbortReport",
    "EngineAbortedError",
    "EngineAddressError",
    "EngineModelMismatchError",
    "InvalidPrompt",
    "InvalidSamplingParams",
    "MalformedEngineResponseError",
    "MultimodalNotSupported",
    "RequestRejected",
    "RetryPolicy",
    "RoutingPolicy",
    "SGLangTransport",
    "TimeoutPolicy",
    "TransportSettings",
    "WorkerListError",
]
