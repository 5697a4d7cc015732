"""SGLang transport: what Verifiers' ``TrainClient`` is given in place of an ``AsyncOpenAI``.

It turns Renderers' token-in/token-out generate requests into SGLang's native ``/generate`` and
returns the exact sampled token ids and logprobs.
"""

from miles_verifiers.engine.errors import (
    InvalidPrompt,
    InvalidSamplingParams,
    MultimodalNotSupported,
    RequestRejected,
)
from miles_verifiers.engine.identity import EngineModelMismatchError
from miles_verifiers.engine.settings import (
    EngineAddressError,
    RetryPolicy,
    RoutingPolicy,
    TimeoutPolicy,
    TransportSettings,
)
from miles_verifiers.engine.workers import AbortReport, WorkerListError
from miles_verifiers.episodes.transport.errors import (
    EngineAbortedError,
    MalformedEngineResponseError,
)
from miles_verifiers.episodes.transport.transport import SGLangTransport

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
