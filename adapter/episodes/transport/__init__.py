"""SGLang transport: what Verifiers' ``TrainClient`` is given in place of an ``AsyncOpenAI``.

It turns Renderers' token-in/token-out generate requests into SGLang's native ``/generate`` and
returns the exact sampled token ids and logprobs.
"""

from miles_verifiers.episodes.transport.transport import SGLangTransport

__all__ = ["SGLangTransport"]
