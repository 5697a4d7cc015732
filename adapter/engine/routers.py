"""What the router in front of the engines does to a ``/generate`` body.

Miles' default, the Rust ``sglang-router`` (0.3.x), re-serialises it: sampling keys outside its
``SamplingParams`` are dropped silently, values outside its types get HTTP 422. Miles' own router
(``--use-miles-router``) forwards the body unchanged, as a worker reached directly sees it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable


class RouterKind(enum.StrEnum):
    SGLANG_ROUTER = "sglang-router"
    PASS_THROUGH = "pass-through"  # Miles' own router, or none: the body arrives unchanged

    @classmethod
    def for_miles(cls, use_miles_router: bool) -> RouterKind:
        return cls.PASS_THROUGH if use_miles_router else cls.SGLANG_ROUTER


# The sampling keys sglang-router 0.3.x keeps when it re-serialises /generate.
RUST_ROUTER_SAMPLING_KEYS: frozenset[str] = frozenset(
    {
        "temperature",
        "max_new_tokens",
        "top_p",
        "top_k",
        "frequency_penalty",
        "presence_penalty",
        "repetition_penalty",
        "stop",
        "ignore_eos",
        "skip_special_tokens",
        "json_schema",
        "regex",
        "ebnf",
        "min_p",
        "min_new_tokens",
        "stop_token_ids",
        "no_stop_trim",
        "n",
        "sampling_seed",
    }
)


def keys_dropped_by_router(sglang_keys: Iterable[str], router: RouterKind) -> tuple[str, ...]:
    """The SGLang sampling keys in ``sglang_keys`` that ``router`` would silently drop, sorted."""
    if router is not RouterKind.SGLANG_ROUTER:
        return ()
    return tuple(sorted({key for key in sglang_keys if key not in RUST_ROUTER_SAMPLING_KEYS}))
