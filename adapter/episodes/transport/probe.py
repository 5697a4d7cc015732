"""The answer to Renderers' pre-flight ``GET /models`` probe.

Renderers asks once per (base_url, model) for ``{"data": [{"id": model, "max_model_len": n}]}``
and, when it finds its model, refuses any prompt strictly longer than ``n`` before sending it.
The transport answers from its settings, as SGLang's ``/v1/models`` would: ``max_model_len`` is
the context length. Without a context length, or for a model not listed, the probe finds nothing
and Renderers skips its check; the transport's own limits still apply.
"""

from __future__ import annotations

from typing import Any

from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.v02.upstream import MODELS_PATHS

__all__ = ["MODELS_PATHS", "models_listing"]


def models_listing(settings: TransportSettings) -> dict[str, Any]:
    if settings.context_len is None:
        return {"object": "list", "data": []}
    return {
        "object": "list",
        "data": [
            {
                "id": name,
                "object": "model",
                "owned_by": "sglang",
                "max_model_len": settings.context_len,
            }
            for name in settings.served_model_names
        ],
    }
