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


# The SGLang sampling keys (:mod:`.sampling`) sglang-router 0.3.x drops re-serialising /generate.
RUST_ROUTER_DROPPED_KEYS: frozenset[str] = frozenset(
    {
        "stop_regex",
        "structural_tag",
        "spaces_between_special_tokens",
        "custom_params",
        "stream_interval",
        "logit_bias",
    }
)


def keys_dropped_by_router(sglang_keys: Iterable[str], router: RouterKind) -> tuple[str, ...]:
    """The SGLang sampling keys in ``sglang_keys`` that ``router`` would silently drop, sorted."""
    if router is not RouterKind.SGLANG_ROUTER:
        return ()
    return tuple(sorted({key for key in sglang_keys if key in RUST_ROUTER_DROPPED_KEYS}))
