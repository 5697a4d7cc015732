"""SGLang's native ``/generate`` call from a Renderers generate request (pure functions).

Renderers posts ``{"model", "token_ids", "sampling_params", ["features", "cache_salt",
"priority"]}``; SGLang wants ``{"input_ids", "sampling_params", "return_logprob", "rid", ...}``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from miles_verifiers.engine.errors import (
    InvalidPrompt,
    MultimodalNotSupported,
    PromptTooLongError,
    RequestRejected,
)
from miles_verifiers.engine.limits import EngineLimits
from miles_verifiers.engine.sampling import translate_sampling
from miles_verifiers.engine.settings import TransportSettings
from miles_verifiers.episodes.transport.errors import overlong_prompt

# Request-body keys that carry images, audio or video in some engine dialect.
_MULTIMODAL_KEYS = ("features", "multi_modal_data", "image_data", "video_data", "audio_data")
# Body keys Renderers may send that are understood here; anything else is reported as dropped.
_KNOWN_BODY_KEYS = frozenset(
    {"model", "token_ids", "sampling_params", "cache_salt", "priority", "return_token_ids"}
)
# Verifiers adds this only on bridged turns, which always continue an earlier turn of a session.
CONTINUATION_HINT_KEY = "routed_experts_prompt_start"


@dataclass(frozen=True)
class GenerateCall:
    """One SGLang ``/generate`` request: JSON payload and extra headers."""

    payload: dict[str, Any]
    headers: dict[str, str]
    dropped_keys: tuple[str, ...]  # request keys not forwarded; "body.<k>" for top-level ones
    overridden_keys: tuple[str, ...]  # sampling keys whose value the settings replaced


def is_known_continuation(body: Mapping[str, Any]) -> bool:
    """True when the request itself proves it is not the first turn of its session."""
    if not isinstance(body, Mapping):
        return False
    sampling = body.get("sampling_params")
    return isinstance(sampling, Mapping) and sampling.get(CONTINUATION_HINT_KEY) is not None


def _prompt_ids(body: Mapping[str, Any]) -> list[int]:
    token_ids = body.get("token_ids")
    if not isinstance(token_ids, list) or not token_ids:
        raise InvalidPrompt(
            "the request needs 'token_ids', a non-empty list of prompt token ids "
            f"(got {type(token_ids).__name__})"
        )
    for index, token_id in enumerate(token_ids):
        if not isinstance(token_id, int) or isinstance(token_id, bool) or token_id < 0:
            raise InvalidPrompt(
                f"token_ids[{index}] is {token_id!r}; prompt token ids must be non-negative "
                "integers"
            )
    return token_ids


def _reject_multimodal(body: Mapping[str, Any]) -> None:
    present = [key for key in _MULTIMODAL_KEYS if body.get(key)]
    if present:
        raise MultimodalNotSupported(
            f"the request carries multimodal input ({', '.join(present)}); the SGLang transport "
            "sends text token ids only. Use a text-only renderer and taskset, or drop the images"
        )


def _extra_key(settings: TransportSettings, cache_salt: object) -> str | None:
    if cache_salt is not None and not isinstance(cache_salt, str):
        raise RequestRejected(f"cache_salt must be a string, got {type(cache_salt).__name__}")
    parts = [part for part in (settings.extra_key, cache_salt) if part]
    return ":".join(parts) if parts else None


def _priority(settings: TransportSettings, requested: object) -> int | None:
    if requested is None:
        return settings.priority
    if not isinstance(requested, int) or isinstance(requested, bool):
        raise RequestRejected(f"priority must be an integer, got {requested!r}")
    return requested


def build_generate_call(
    body: Mapping[str, Any],
    *,
    settings: TransportSettings,
    rid: str,
    session_id: str | None,
    first_prompt: bool,
    engine_limits: EngineLimits | None = None,
) -> GenerateCall:
    """One Renderers request as an SGLang ``/generate`` call: ``RequestRejected`` for input the
    transport will not send, an overlong-prompt error past ``max_prompt_len`` (a session's
    ``first_prompt`` only) or with no room left to generate."""
    if not isinstance(body, Mapping):
        raise RequestRejected(f"the request body must be a JSON object, got {type(body).__name__}")
    _reject_multimodal(body)
    prompt = _prompt_ids(body)
    limit = settings.max_prompt_len
    if first_prompt and limit is not None and len(prompt) > limit:
        raise overlong_prompt(
            f"the first prompt of the rollout has {len(prompt)} tokens, over the limit of "
            f"{limit} (max_prompt_len)"
        )
    try:
        sampling = translate_sampling(
            body.get("sampling_params"),
            settings=settings,
            prompt_len=len(prompt),
            engine_limits=engine_limits,
        )
    except PromptTooLongError as exc:
        raise overlong_prompt(str(exc)) from None
    payload: dict[str, Any] = {  # an option left unset (None) is not sent
        "rid": rid,
        "input_ids": prompt,
        "sampling_params": sampling.params,
        "return_logprob": True,
        "lora_path": settings.lora_path,
        "extra_key": _extra_key(settings, body.get("cache_salt")),
        "priority": _priority(settings, body.get("priority")),
    }
    unknown_body_keys = tuple(
        f"body.{key}" for key in body if key not in _KNOWN_BODY_KEYS and key not in _MULTIMODAL_KEYS
    )
    headers = {}
    if settings.routing.sends_routing_key and session_id:
        headers[settings.routing_header] = session_id  # the router's routing key
    return GenerateCall(
        payload={key: value for key, value in payload.items() if value is not None},
        headers=headers,
        dropped_keys=sampling.dropped + unknown_body_keys,
        overridden_keys=sampling.overridden,
    )
