"""Type checks for the sampling params the transport forwards, before anything is sent.

A value of the wrong type fails late and obscurely on the serving side: the Rust
``sglang-router`` (0.3.x) refuses the whole body with HTTP 422, SGLang 0.5.16 (the base of the
fork production Miles runs) crashes building its ``SamplingParams`` and answers a bare HTTP 500
(which the router and this transport then retry), and only 0.5.23 says 400. Checking the types
here turns all of those into one immediate, non-retried refusal that names the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from miles_verifiers.engine.errors import InvalidSamplingParams

__all__ = ["check_sampling_types"]

_U64_MAX = 2**64 - 1
_INT_KEYS = frozenset({"top_k", "n", "stream_interval"})
_NUMBER_KEYS = frozenset(
    {"temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty", "repetition_penalty"}
)
_BOOL_KEYS = frozenset(
    {"ignore_eos", "skip_special_tokens", "no_stop_trim", "spaces_between_special_tokens"}
)
_STR_KEYS = frozenset({"json_schema", "regex", "ebnf", "structural_tag"})
_STR_OR_LIST_KEYS = frozenset({"stop", "stop_regex"})
_OBJECT_KEYS = frozenset({"logit_bias", "custom_params"})


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _problem(key: str, value: Any) -> str | None:
    """What is wrong with ``value`` for SGLang's ``key``, or None."""
    if key in _INT_KEYS and not _is_int(value):
        return "an integer"
    if key == "sampling_seed" and not (_is_int(value) and 0 <= value <= _U64_MAX):
        # SGLang itself takes a negative seed, but the Rust router reads it as u64 (HTTP 422).
        return f"an integer in [0, {_U64_MAX}]"
    if key in _NUMBER_KEYS and not _is_number(value):
        return "a number"
    if key in _BOOL_KEYS and not isinstance(value, bool):
        return "true or false"
    if key in _STR_KEYS and not isinstance(value, str):
        return "a string"
    if key in _STR_OR_LIST_KEYS and not (
        isinstance(value, str)
        or (isinstance(value, list) and all(isinstance(item, str) for item in value))
    ):
        return "a string or a list of strings"
    if key in _OBJECT_KEYS and not isinstance(value, Mapping):
        return "an object"
    return None


def check_sampling_types(params: Mapping[str, Any], source_of: Mapping[str, str]) -> None:
    """Raise ``InvalidSamplingParams`` naming the first key whose value SGLang cannot take.

    ``source_of`` maps an SGLang key to the caller's own name for it (e.g. seed ->
    sampling_seed), so the message names what the caller wrote.
    """
    for key, value in params.items():
        expected = _problem(key, value)
        if expected is not None:
            name = source_of.get(key, key)
            renamed = f" (SGLang {key})" if name != key else ""
            raise InvalidSamplingParams(
                f"sampling param {name!r}{renamed} must be {expected}, got {value!r}; SGLang "
                "0.5.16 answers such a value with HTTP 500 and the sglang-router with HTTP 422"
            )
