"""Miles hooks the rollout tests plug in by path, as a user would with Miles flags.

Each reads its knobs from ``args`` (the Miles namespace), the way real hooks do, and records
what it saw on ``args`` so a test can check when and with what it was called.
"""

from __future__ import annotations

from argparse import Namespace
from typing import Any


def drop_listed_prompts(args: Namespace, samples: list[Any], **_: Any) -> Any:
    """Dynamic filter: drop a group whose prompt is one of ``args.test_drop_prompts``."""
    from miles_verifiers.trainer.contract.compat import contract

    listed = getattr(args, "test_drop_prompts", ())
    dropped = any(text in str(sample.prompt) for sample in samples for text in listed)
    return contract().DynamicFilterOutput(
        keep=not dropped, reason="listed_prompt" if dropped else None
    )


async def length_reward(args: Namespace, sample: Any, **_: Any) -> float:
    """Per-sample custom reward model: the response length."""
    return float(sample.response_length)


async def group_size_reward(args: Namespace, samples: list[Any], **_: Any) -> list[float]:
    """Group reward model (--group-rm): every sample gets the group's size."""
    return [float(len(samples))] * len(samples)


def scalar_reward(args: Namespace, sample: Any, **_: Any) -> float:
    return 1.0


DICT_REWARD = {"score": 0.75, "details": "ok"}


async def dict_reward(args: Namespace, sample: Any, **_: Any) -> dict[str, Any]:
    """Per-sample reward model returning a dict; ``--reward-key score`` picks its value."""
    return dict(DICT_REWARD)


async def group_dict_reward(args: Namespace, samples: list[Any], **_: Any) -> list[Any]:
    """Group reward model (--group-rm) returning one dict per sample."""
    return [dict(DICT_REWARD) for _ in samples]


def remember_returned_groups(args: Namespace, groups: list[list[Any]]) -> None:
    """Sample filter: records the returned groups and excludes the first sample from the loss."""
    args.test_sample_filter_calls = getattr(args, "test_sample_filter_calls", []) + [
        [[s.index for s in g] for g in groups]
    ]
    groups[0][0].remove_sample = True


def remember_all_groups(args: Namespace, groups: list[list[Any]], data_source: Any) -> None:
    """All-samples hook: records every consumed group and the data source it was given."""
    args.test_all_groups_calls = getattr(args, "test_all_groups_calls", []) + [
        ([[s.index for s in g] for g in groups], data_source)
    ]


NOT_A_FUNCTION = 42
