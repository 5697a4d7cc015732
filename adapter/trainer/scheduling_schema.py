"""The on-disk schema of the task-scheduler state, validated in full (JSON types strictly)
before it is trusted: a damaged or hand-edited file must never steer training."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

_ROLLOUT_ID = re.compile(r"0|[1-9][0-9]*")


class SavedCursor(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    position: NonNegativeInt
    carry_over: list[NonNegativeInt]

    @model_validator(mode="after")
    def _carry_over_is_queued_in_task_order(self) -> SavedCursor:
        if any(b <= a for a, b in zip(self.carry_over, self.carry_over[1:], strict=False)):
            raise ValueError("carry_over must be strictly increasing (no repeats)")
        if self.carry_over and self.carry_over[-1] >= self.position:
            raise ValueError(
                f"carry_over offset {self.carry_over[-1]} is not before position {self.position}"
            )
        return self


class SavedState(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    format: Literal[2]
    num_tasks: PositiveInt
    seed: int
    shuffle: bool
    rollout_batch_size: PositiveInt | None
    n_samples_per_prompt: PositiveInt | None
    over_sampling_batch_size: PositiveInt | None
    checkpoints: list[NonNegativeInt]
    starts: dict[str, SavedCursor]

    @model_validator(mode="after")
    def _consistent(self) -> SavedState:
        bad = [k for k in self.starts if not _ROLLOUT_ID.fullmatch(k)]
        if bad:
            raise ValueError(f"starts has keys that are not rollout ids: {bad[:3]}")
        ordered = sorted((int(k), c) for k, c in self.starts.items())
        for (rid, cursor), (next_rid, following) in zip(ordered, ordered[1:], strict=False):
            if following.position < cursor.position:
                raise ValueError(
                    f"the cursor position goes back from {cursor.position} (rollout {rid}) to "
                    f"{following.position} (rollout {next_rid})"
                )
        if len(set(self.checkpoints)) != len(self.checkpoints):
            raise ValueError("checkpoints has repeats")
        orphans = [c for c in self.checkpoints if str(c + 1) not in self.starts]
        if orphans:
            raise ValueError(f"checkpoints {orphans[:3]} have no saved start after them")
        return self


def describe_validation_error(error: ValidationError) -> str:
    """One line naming each offending field, e.g. ``starts.3.position: ...``."""
    parts = []
    for problem in error.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in problem["loc"]) or "the file"
        parts.append(f"{where}: {problem['msg']}")
    return "; ".join(parts)
