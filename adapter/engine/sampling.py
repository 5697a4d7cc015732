"""Translation of OpenAI/vLLM-flavoured sampling params into SGLang's ``SamplingParams``.

SGLang takes no unknown keys (HTTP 500 in 0.5.15, 400 in 0.5.23), so only the keys it accepts
are forwarded, each type-checked first: a wrong type gets HTTP 422 from the Rust router and a
bare, retried HTTP 500 from SGLang 0.5.16 (production's base).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from miles_verifiers.engine.errors import InvalidSamplingParams, PromptTooLongError
from miles_verifiers.engine.limits import EngineLimits
from miles_verifiers.engine.settings import TransportSettings


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_strings(value: object) -> bool:
    return isinstance(value, str) or (
        isinstance(value, list) and all(isinstance(item, str) for item in value)
    )


_U64_MAX = 2**64 - 1
Kind = tuple[Callable[[object], bool], str]
_INT: Kind = (_is_int, "an integer")
_NUMBER: Kind = (
    lambda value: isinstance(value, (int, float)) and not isinstance(value, bool),
    "a number",
)
_BOOL: Kind = (lambda value: isinstance(value, bool), "true or false")
_STR: Kind = (lambda value: isinstance(value, str), "a string")
_STRINGS: Kind = (_is_strings, "a string or a list of strings")
_OBJECT: Kind = (lambda value: isinstance(value, Mapping), "an object")
# SGLang itself takes a negative seed, but the Rust router reads it as u64 (HTTP 422).
_SEED: Kind = (
    lambda value: _is_int(value) and 0 <= value <= _U64_MAX,
    f"an integer in [0, {_U64_MAX}]",
)

# The API fields of SGLang's SamplingParams present in both 0.5.15 and 0.5.23 (Miles runs a fork
# between the two), with the type each takes (None: checked with the clamp). 0.5.23's
# ``beam_width`` and ``watermark`` are left out: 0.5.15 rejects them.
SGLANG_SAMPLING_TYPES: Mapping[str, Kind | None] = {
    "max_new_tokens": None,
    "min_new_tokens": None,
    "stop": _STRINGS,
    "stop_token_ids": None,
    "stop_regex": _STRINGS,
    "temperature": _NUMBER,
    "top_p": _NUMBER,
    "top_k": _INT,
    "min_p": _NUMBER,
    "frequency_penalty": _NUMBER,
    "presence_penalty": _NUMBER,
    "repetition_penalty": _NUMBER,
    "n": _INT,
    "json_schema": _STR,
    "regex": _STR,
    "ebnf": _STR,
    "structural_tag": _STR,
    "ignore_eos": _BOOL,
    "skip_special_tokens": _BOOL,
    "spaces_between_special_tokens": _BOOL,
    "no_stop_trim": _BOOL,
    "custom_params": _OBJECT,
    "stream_interval": _INT,
    "logit_bias": _OBJECT,
    "sampling_seed": _SEED,
}
SGLANG_SAMPLING_KEYS = frozenset(SGLANG_SAMPLING_TYPES)

# OpenAI/vLLM names with a direct SGLang equivalent.
RENAMED_KEYS: Mapping[str, str] = {
    "max_tokens": "max_new_tokens",
    "max_completion_tokens": "max_new_tokens",
    "min_tokens": "min_new_tokens",
    "seed": "sampling_seed",
}


# Keys whose value the transport decides: the configured value always wins.
_SET_BY_TRANSPORT = frozenset({"n", "skip_special_tokens", "no_stop_trim"})


@dataclass(frozen=True)
class SamplingTranslation:
    """SGLang sampling params, plus what was left out, for a debug log."""

    params: dict[str, Any]
    dropped: tuple[str, ...]  # caller keys SGLang would reject (e.g. logprobs, reasoning_effort)
    overridden: tuple[str, ...]  # caller keys whose value the settings replaced


def merge_stop_token_ids(renderer_ids: object, configured: Iterable[int]) -> list[int]:
    """The renderer's stop ids, then the configured ones, each id once, in first-seen order."""
    if renderer_ids is None:
        renderer_ids = []
    if isinstance(renderer_ids, (str, bytes, Mapping)) or not isinstance(renderer_ids, Iterable):
        raise InvalidSamplingParams(
            f"sampling_params.stop_token_ids must be a list of token ids, got {renderer_ids!r}"
        )
    merged: dict[int, None] = {}
    for token_id in [*renderer_ids, *configured]:
        if not _is_int(token_id) or token_id < 0:
            raise InvalidSamplingParams(
                f"sampling_params.stop_token_ids holds {token_id!r}; stop ids must be "
                "non-negative integers"
            )
        merged[token_id] = None
    return list(merged)


def new_token_budget(
    requested: int | None,
    *,
    prompt_len: int,
    max_response_len: int,
    context_len: int | None,
    engine_limits: EngineLimits | None = None,
) -> int:
    """``max_new_tokens``: the ask, capped by the response limit and the context's room;
    :class:`PromptTooLongError` for no room, or a prompt at the engine's limit (HTTP 400)."""
    budget = max_response_len if requested is None else min(requested, max_response_len)
    if engine_limits is not None:
        limit = engine_limits.max_req_input_len
        if limit is not None and prompt_len >= limit:
            raise PromptTooLongError(
                f"the prompt has {prompt_len} tokens; the SGLang engine accepts prompts of fewer "
                f"than {limit} tokens (its max_req_input_len, from its context length and KV pool)"
            )
        room = engine_limits.new_token_room(prompt_len)
        if room is not None and room <= 0:
            raise PromptTooLongError(
                f"the prompt has {prompt_len} tokens and leaves no room to generate within the "
                f"SGLang engine's context length of {engine_limits.context_length} tokens"
            )
        if room is not None:
            budget = min(budget, room)
    if context_len is not None:
        room = context_len - prompt_len
        if room <= 0:
            raise PromptTooLongError(
                f"the prompt has {prompt_len} tokens and leaves no room to generate within the "
                f"context window of {context_len} tokens (context_len)"
            )
        budget = min(budget, room)
    return budget


def translate_sampling(
    raw: Mapping[str, Any] | None,
    *,
    settings: TransportSettings,
    prompt_len: int,
    engine_limits: EngineLimits | None = None,
) -> SamplingTranslation:
    """SGLang ``sampling_params`` from a Renderers dict: names renamed (both names must agree),
    None left out, stop ids merged, configured stops when none, the settings' ``n``/trim/special
    switches, ``max_new_tokens`` clamped (``min_new_tokens`` to it), other keys dropped."""
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise InvalidSamplingParams(f"sampling_params must be an object, got {type(raw).__name__}")
    params: dict[str, Any] = {}
    source_of: dict[str, str] = {}
    dropped: list[str] = []
    caller_forced: dict[str, tuple[str, Any]] = {}
    for key, value in raw.items():
        if value is None:
            continue
        target = RENAMED_KEYS.get(key, key)
        if target not in SGLANG_SAMPLING_KEYS:
            dropped.append(key)
            continue
        if target in _SET_BY_TRANSPORT:
            caller_forced[target] = (key, value)
            continue
        if target in params and params[target] != value:
            raise InvalidSamplingParams(
                f"sampling params {source_of[target]!r}={params[target]!r} and {key!r}={value!r} "
                f"both set SGLang's {target!r}; keep one of them"
            )
        params[target] = value
        source_of[target] = key

    for key, value in params.items():  # the first value SGLang cannot take, by the caller's name
        kind = SGLANG_SAMPLING_TYPES.get(key)
        if kind is not None and not kind[0](value):
            name = source_of[key]
            renamed = f" (SGLang {key})" if name != key else ""
            raise InvalidSamplingParams(
                f"sampling param {name!r}{renamed} must be {kind[1]}, got {value!r}; SGLang "
                "0.5.16 answers such a value with HTTP 500 and the sglang-router with HTTP 422"
            )
    stop_ids = merge_stop_token_ids(params.pop("stop_token_ids", None), settings.stop_token_ids)
    if stop_ids:
        params["stop_token_ids"] = stop_ids
    if "stop" not in params and settings.stop:
        params["stop"] = list(settings.stop)

    requested = params.get("max_new_tokens")
    if requested is not None and (not _is_int(requested) or requested < 1):
        raise InvalidSamplingParams(
            f"max_tokens (SGLang max_new_tokens) must be a positive integer, got {requested!r}"
        )
    params["max_new_tokens"] = new_token_budget(
        requested,
        prompt_len=prompt_len,
        max_response_len=settings.max_response_len,
        context_len=settings.context_len,
        engine_limits=engine_limits,
    )
    if "min_new_tokens" in params:
        minimum = params["min_new_tokens"]
        if not _is_int(minimum) or minimum < 0:
            raise InvalidSamplingParams(
                f"min_tokens (SGLang min_new_tokens) must be a non-negative integer, "
                f"got {minimum!r}"
            )
        # SGLang refuses min_new_tokens > max_new_tokens; the clamp above must not create that.
        params["min_new_tokens"] = min(minimum, params["max_new_tokens"])

    forced = {
        "n": 1,
        "no_stop_trim": settings.no_stop_trim,
        "skip_special_tokens": settings.skip_special_tokens,
    }
    params.update(forced)
    overridden = tuple(
        key for target, (key, value) in caller_forced.items() if value != forced[target]
    )
    return SamplingTranslation(params=params, dropped=tuple(dropped), overridden=overridden)
