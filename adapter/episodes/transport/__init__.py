"""SGLang transport: what Verifiers' ``TrainClient`` is given in place of an ``AsyncOpenAI``,
sending token-in/token-out generate requests to SGLang's native ``/generate``."""

from miles_verifiers.episodes.transport.transport import SGLangTransport

__all__ = ["SGLangTransport"]
