"""Miles hooks the suite plugs into an adapter by path, as a user would with Miles flags.

``--dynamic-sampling-filter-path miles_verifiers_conformance.hooks.drop_listed_prompts`` drops every group
whose task prompt is one of ``args.conformance_drop_prompts``: a drop pattern that depends on
the task alone, so the suite can predict exactly which tasks a run must keep.

Paths are dotted (``package.module.attribute``): Miles' own loader splits a hook path at its
last dot, so a ``module:attribute`` path would load under a lenient adapter and fail in Miles.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any

from miles_verifiers_conformance.world import prompt_matches

DROP_FILTER_PATH = "miles_verifiers_conformance.hooks.drop_listed_prompts"
# Every hook path the suite passes to an adapter (checked against Miles' loader by a selftest).
HOOK_PATHS = (DROP_FILTER_PATH,)
DROP_REASON = "conformance_drop_pattern"


def drop_listed_prompts(args: Namespace, samples: list[Any], **_: Any) -> Any:
    """A Miles dynamic filter: ``fn(args, samples) -> DynamicFilterOutput``."""
    from miles_verifiers.trainer.contract.compat import contract

    listed = getattr(args, "conformance_drop_prompts", ())
    flat = [s for item in samples for s in (item if isinstance(item, list) else [item])]
    dropped = any(prompt_matches(sample.prompt, text) for sample in flat for text in listed)
    return contract().DynamicFilterOutput(keep=not dropped, reason=DROP_REASON if dropped else None)


CONSTANT_REWARD_PATH = "miles_verifiers_conformance.hooks.constant_reward"
HOOK_PATHS += (CONSTANT_REWARD_PATH,)


async def constant_reward(args: Namespace, sample: Any, **_: Any) -> float:
    """A Miles ``--custom-rm-path`` reward model returning a plain number for every sample."""
    return 1.0
