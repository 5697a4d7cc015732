"""Which tasks each training rollout runs, in a way that survives restarts.

The taskset is cycled epoch after epoch; a task's *offset* ``o`` is position ``o % N`` of epoch
``o // N``, each epoch in load order or (``--rollout-shuffle``) a permutation derived from
(``--rollout-seed``, epoch) alone. A rollout takes offsets from a :class:`Cursor` (carry-over
first) and is settled in task order (:func:`settle`), so which tasks train never depends on
timing. :class:`TaskStream` keeps the cursor across calls, saved under ``--save`` as a
:class:`SchedulerState` that is validated in full (a damaged or hand-edited file must never steer
training) and must match the current run.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import random
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from enum import Enum
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    NonNegativeInt,
    PositiveInt,
    ValidationError,
    model_validator,
)

from miles_verifiers.errors import RolloutCallError

logger = logging.getLogger(__name__)

STATE_FILE_NAME = "miles_verifiers_scheduler.json"
# Format 2 records the batch shape and Miles' checkpoints; format 1 files are refused.
STATE_FORMAT = 2
# Newest starts always kept, beyond --save-interval: Miles may prefetch (train_async) a
# rollout or two ahead of the saved step, and saves off cadence are learnt a rollout late.
DEFAULT_HISTORY = 8
# Starts kept for checkpoints (cadence or reported): bounds the file for very long runs.
MAX_CHECKPOINT_STARTS = 256


class SchedulingError(RolloutCallError, ValueError):
    """A scheduling input or saved state the scheduler cannot use."""


class SchedulerStateMismatchError(SchedulingError):
    """The saved state was written for a different task stream (taskset size, seed, shuffle)."""


def _epoch_seed(seed: int, epoch: int) -> int:
    # Unrelated permutations for nearby pairs, independent of Python's hash randomisation.
    digest = hashlib.sha256(f"miles-verifiers/epoch-order/{seed}/{epoch}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


@functools.lru_cache(maxsize=4)
def _shuffled_epoch(num_tasks: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(num_tasks))
    random.Random(_epoch_seed(seed, epoch)).shuffle(order)
    return tuple(order)


@dataclass(frozen=True)
class TaskOrder:
    """Maps stream offsets to task indices (positions in the loaded taskset)."""

    num_tasks: int
    seed: int = 42
    shuffle: bool = False

    def __post_init__(self) -> None:
        if self.num_tasks < 1:
            raise SchedulingError(f"the task stream needs at least one task, got {self.num_tasks}.")

    def epoch_of(self, offset: int) -> int:
        return offset // self.num_tasks

    def epoch_order(self, epoch: int) -> tuple[int, ...]:
        """Task indices of one epoch, in the order the stream visits them."""
        if not self.shuffle:
            return tuple(range(self.num_tasks))
        return _shuffled_epoch(self.num_tasks, self.seed, epoch)

    def task_index(self, offset: int) -> int:
        if offset < 0:
            raise SchedulingError(f"stream offsets start at 0, got {offset}.")
        if not self.shuffle:
            return offset % self.num_tasks
        return self.epoch_order(self.epoch_of(offset))[offset % self.num_tasks]


@dataclass(frozen=True)
class Cursor:
    """Where the stream stands: the next fresh offset and the offsets carried over to run first."""

    position: int = 0
    carry_over: tuple[int, ...] = ()

    def take(self, count: int) -> tuple[list[int], Cursor]:
        """The next ``count`` offsets (carry-over first, in task order) and the cursor after."""
        if count < 0:
            raise SchedulingError(f"cannot take {count} tasks.")
        from_queue = list(self.carry_over[:count])
        fresh = list(range(self.position, self.position + count - len(from_queue)))
        rest = Cursor(self.position + len(fresh), self.carry_over[len(from_queue) :])
        return from_queue + fresh, rest


class Outcome(Enum):
    PENDING = "pending"  # dispatched, not finished (or finished but not yet judged)
    KEPT = "kept"  # finished and passed every check and filter
    DROPPED = "dropped"  # finished and rejected (error, empty trace, filter)


@dataclass(frozen=True)
class Settlement:
    """How a rollout ends, in task order."""

    accepted: tuple[int, ...]  # the first `target` kept offsets: the rollout's groups
    dropped: tuple[int, ...]  # dropped offsets before the last accepted one: consumed
    carry_over: tuple[int, ...]  # every dispatched offset after the last accepted one


def settle(
    dispatched: Sequence[int], outcomes: Mapping[int, Outcome], target: int
) -> Settlement | None:
    """The settlement once the first ``target`` kept groups in task order (``dispatched``, in
    the order taken) are known; None while the answer could still change."""
    if target < 1:
        raise SchedulingError(f"a rollout needs a target of at least one group, got {target}.")
    accepted: list[int] = []
    dropped: list[int] = []
    for position, offset in enumerate(dispatched):
        outcome = outcomes.get(offset, Outcome.PENDING)
        if outcome is Outcome.PENDING:
            return None
        if outcome is Outcome.DROPPED:
            dropped.append(offset)
            continue
        accepted.append(offset)
        if len(accepted) == target:
            return Settlement(tuple(accepted), tuple(dropped), tuple(dispatched[position + 1 :]))
    return None


class DispatchBudgetError(SchedulingError):
    """A rollout would dispatch more groups than its budget: nearly everything is dropped."""


def tasks_to_dispatch(
    dispatched: Sequence[int],
    outcomes: Mapping[int, Outcome],
    target: int,
    over_sampling_batch_size: int,
    max_dispatched: int | None = None,
) -> int:
    """How many more offsets to take now: ``over_sampling_batch_size`` first, then exactly the
    shortfall (one replacement per drop); past ``max_dispatched``, :class:`DispatchBudgetError`."""
    if not dispatched:
        count = max(target, over_sampling_batch_size)
    else:
        alive = sum(
            1 for o in dispatched if outcomes.get(o, Outcome.PENDING) is not Outcome.DROPPED
        )
        count = max(0, target - alive)
    if count and max_dispatched is not None and len(dispatched) + count > max_dispatched:
        dropped = sum(1 for o in dispatched if outcomes.get(o) is Outcome.DROPPED)
        raise DispatchBudgetError(
            f"this rollout has dispatched {len(dispatched)} task groups for a target of {target} "
            f"and {dropped} of them were dropped; {count} more would pass the budget of "
            f"{max_dispatched}. Fix: look at the drop reasons (rollout/dynamic_filter/drop_* "
            "metrics and the episode errors in the log): a failing environment or a dynamic "
            "filter that rejects almost every group, e.g. a zero-std filter on tasks the model "
            "always or never solves."
        )
    return count


def cursor_after(cursor_after_dispatch: Cursor, settlement: Settlement) -> Cursor:
    """The cursor the next rollout starts from: this rollout's carry-over merged, in task order,
    with any queued carry-over it never dispatched."""
    queue = sorted(set(settlement.carry_over) | set(cursor_after_dispatch.carry_over))
    return Cursor(cursor_after_dispatch.position, tuple(queue))


@dataclass(frozen=True)
class CheckpointPlan:
    """Which rollout ids Miles may resume at: every ``--save-interval`` and ``--num-rollout``
    (saves off that cadence are learnt from ``latest_checkpointed_iteration.txt``)."""

    save_interval: int | None = None
    num_rollout: int | None = None

    def is_resume_point(self, rollout_id: int) -> bool:
        if rollout_id < 1:
            return False
        if self.num_rollout is not None and rollout_id == self.num_rollout:
            return True
        return self.save_interval is not None and rollout_id % self.save_interval == 0

    @property
    def recent(self) -> int:
        """How many of the newest starts to keep whatever the cadence."""
        return (self.save_interval or 0) + DEFAULT_HISTORY


def _prune(
    starts: Mapping[int, Cursor], checkpoints: frozenset[int], plan: CheckpointPlan
) -> tuple[dict[int, Cursor], frozenset[int]]:
    """The starts worth keeping: the recent ones and those of (possible) checkpoints, bounded."""
    if not starts:
        return {}, frozenset()
    newest = max(starts)
    recent = {r for r in starts if r > newest - plan.recent}
    pinned = sorted(r for r in starts if plan.is_resume_point(r) or (r - 1) in checkpoints)
    keep = recent | set(pinned[-MAX_CHECKPOINT_STARTS:])
    return (
        {r: starts[r] for r in sorted(keep)},
        frozenset(c for c in checkpoints if c + 1 in keep),
    )


@dataclass(frozen=True)
class SchedulerState:
    """The task stream's identity (taskset size, shuffle, seed, batch shape when known) and the
    cursor at the start of each rollout Miles may resume at; ``checkpoints`` are those Miles
    reported, whose following starts are kept off the cadence too."""

    num_tasks: int
    seed: int
    shuffle: bool
    starts: Mapping[int, Cursor] = field(default_factory=dict)
    rollout_batch_size: int | None = None
    n_samples_per_prompt: int | None = None
    over_sampling_batch_size: int | None = None
    checkpoints: frozenset[int] = frozenset()

    @staticmethod
    def for_order(
        order: TaskOrder,
        *,
        rollout_batch_size: int | None = None,
        n_samples_per_prompt: int | None = None,
        over_sampling_batch_size: int | None = None,
    ) -> SchedulerState:
        return SchedulerState(
            order.num_tasks,
            order.seed,
            order.shuffle,
            {},
            rollout_batch_size,
            n_samples_per_prompt,
            over_sampling_batch_size,
        )

    @property
    def order(self) -> TaskOrder:
        return TaskOrder(self.num_tasks, self.seed, self.shuffle)

    def check_matches(self, expected: TaskOrder | SchedulerState) -> None:
        """Raise unless this state was written for the stream ``expected`` describes (a
        :class:`SchedulerState` also checks every batch option it sets)."""
        current = (
            expected if isinstance(expected, SchedulerState) else SchedulerState.for_order(expected)
        )
        differences = []
        if self.num_tasks != current.num_tasks:
            differences.append(f"the taskset had {self.num_tasks} tasks, now {current.num_tasks}")
        if self.shuffle != current.shuffle:
            differences.append(
                f"--rollout-shuffle was {'on' if self.shuffle else 'off'}, now "
                f"{'on' if current.shuffle else 'off'}"
            )
        if self.shuffle and current.shuffle and self.seed != current.seed:
            differences.append(f"--rollout-seed was {self.seed}, now {current.seed}")
        for name, flag in _BATCH_FLAGS.items():
            now = getattr(current, name)
            then = getattr(self, name)
            if now is not None and then != now:
                was = "not recorded" if then is None else f"{then}"
                differences.append(f"{flag} was {was}, now {now}")
        if differences:
            raise SchedulerStateMismatchError(
                "the saved task-scheduler state belongs to a different task stream ("
                + "; ".join(differences)
                + "), so resuming from it would train on the wrong tasks. Fix: restore the "
                f"previous settings, or delete {STATE_FILE_NAME} in the --save directory to "
                "restart the stream at rollout_id * rollout_batch_size."
            )

    def cursor_for(self, rollout_id: int, rollout_batch_size: int) -> tuple[Cursor, bool]:
        """The cursor rollout ``rollout_id`` starts from, and whether it is the fallback for a
        rollout with no saved start, ``rollout_id * rollout_batch_size`` (tasks may repeat or
        be skipped)."""
        saved = self.starts.get(rollout_id)
        if saved is not None:
            return saved, False
        return Cursor(rollout_id * rollout_batch_size), True

    def record(
        self, rollout_id: int, cursor: Cursor, plan: CheckpointPlan | None = None
    ) -> SchedulerState:
        """A new state with ``cursor`` as the start of ``rollout_id``; later starts and
        checkpoints are forgotten (a past being rewritten), earlier ones pruned."""
        kept = {rid: c for rid, c in self.starts.items() if rid < rollout_id}
        kept[rollout_id] = cursor
        checkpoints = frozenset(c for c in self.checkpoints if c < rollout_id)
        starts, checkpoints = _prune(kept, checkpoints, plan or CheckpointPlan())
        return replace(self, starts=starts, checkpoints=checkpoints)

    def note_checkpoint(self, iteration: int, plan: CheckpointPlan | None = None) -> SchedulerState:
        """A new state that keeps the start after checkpoint ``iteration`` (ignored at or past
        the newest start: a checkpoint of a past being rewritten)."""
        if iteration < 0 or iteration + 1 not in self.starts:
            return self
        starts, checkpoints = _prune(
            self.starts, self.checkpoints | {iteration}, plan or CheckpointPlan()
        )
        return replace(self, starts=starts, checkpoints=checkpoints)


_BATCH_FLAGS = {
    "rollout_batch_size": "--rollout-batch-size",
    "n_samples_per_prompt": "--n-samples-per-prompt",
    "over_sampling_batch_size": "--over-sampling-batch-size",
}


_ROLLOUT_ID = re.compile(r"0|[1-9][0-9]*")


class SavedCursor(BaseModel):
    """A :class:`Cursor` on disk (JSON types strictly)."""

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
    """A :class:`SchedulerState` on disk (JSON types strictly)."""

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


def dumps_state(state: SchedulerState) -> str:
    data = {**asdict(state), "format": STATE_FORMAT, "checkpoints": sorted(state.checkpoints)}
    return json.dumps(data, indent=1, sort_keys=True)


def loads_state(text: str) -> SchedulerState:
    """Parse and fully validate a saved state."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise SchedulingError(
            f"task-scheduler state is not JSON ({error}). Fix: delete {STATE_FILE_NAME} to "
            "restart the stream."
        ) from error
    if not isinstance(data, Mapping):
        raise SchedulingError(
            f"task-scheduler state is not a JSON object. Fix: delete {STATE_FILE_NAME} to "
            "restart the stream."
        )
    if data.get("format") != STATE_FORMAT:
        raise SchedulingError(
            f"task-scheduler state has format {data.get('format')!r}; this version reads "
            f"format {STATE_FORMAT} only. Fix: delete {STATE_FILE_NAME} to restart the "
            "stream at rollout_id * rollout_batch_size."
        )
    try:
        saved = SavedState.model_validate(data)
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'the file'}: {e['msg']}"
            for e in error.errors(include_url=False, include_input=False)
        )
        raise SchedulingError(
            f"task-scheduler state is invalid ({problems}). Fix: delete {STATE_FILE_NAME} to "
            "restart the stream at rollout_id * rollout_batch_size, or restore an intact copy."
        ) from error
    starts = sorted((int(rid), c) for rid, c in saved.starts.items())
    return SchedulerState(
        **saved.model_dump(exclude={"format", "starts", "checkpoints"}),
        starts={rid: Cursor(c.position, tuple(c.carry_over)) for rid, c in starts},
        checkpoints=frozenset(saved.checkpoints),
    )


def state_path(directory: str | os.PathLike[str]) -> Path:
    return Path(directory) / STATE_FILE_NAME


def write_state(directory: str | os.PathLike[str], state: SchedulerState) -> Path:
    """Write ``state`` under ``directory`` atomically (a temporary file, synced, then renamed)."""
    target = state_path(directory)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{STATE_FILE_NAME}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(dumps_state(state))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    # Makes the rename durable; where a directory cannot be synced the old state is read back.
    with contextlib.suppress(OSError):
        fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return target


def read_state(
    directory: str | os.PathLike[str], expected: TaskOrder | SchedulerState | None = None
) -> SchedulerState | None:
    """The saved state under ``directory`` (None: none), validated in full and checked against
    ``expected``; every error names the file."""
    path = state_path(directory)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise SchedulingError(
            f"{path}: cannot read the task-scheduler state ({error}). Fix: make it readable, "
            "or delete it to restart the stream at rollout_id * rollout_batch_size."
        ) from error
    try:
        state = loads_state(text)
        if expected is not None:
            state.check_matches(expected)
    except SchedulingError as error:
        raise type(error)(f"{path}: {error}") from error
    return state


# Miles (Megatron's checkpointing) writes the newest saved rollout id here under --save.
LATEST_CHECKPOINT_FILE_NAME = "latest_checkpointed_iteration.txt"


def read_latest_checkpoint(directory: str | os.PathLike[str]) -> int | None:
    """The rollout id of Miles' newest checkpoint under ``directory``, or None if unknown."""
    try:
        text = (Path(directory) / LATEST_CHECKPOINT_FILE_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    text = text.strip()
    # Anything but a plain rollout id (e.g. "release") names no rollout to resume at.
    return int(text) if text.isascii() and text.isdigit() else None


class TaskStream:
    """The training cursor across calls: read from ``--load`` (else ``--save``) at the first,
    written back under ``--save`` after each; a rollout with no saved start begins at
    ``rollout_id * rollout_batch_size`` (logged once)."""

    def __init__(
        self,
        order: TaskOrder,
        rollout_batch_size: int,
        save_dir: str | None,
        load_dir: str | None = None,
        *,
        n_samples_per_prompt: int | None = None,
        over_sampling_batch_size: int | None = None,
        plan: CheckpointPlan | None = None,
    ) -> None:
        self._batch = rollout_batch_size
        self._save_dir = save_dir
        self._load_dir = load_dir
        self._plan = plan or CheckpointPlan()
        # The (empty) state this run would write: a saved one must match it.
        self.identity = SchedulerState.for_order(
            order,
            rollout_batch_size=rollout_batch_size,
            n_samples_per_prompt=n_samples_per_prompt,
            over_sampling_batch_size=over_sampling_batch_size,
        )
        self._state: SchedulerState | None = None
        self._warned_fallback = False

    def _load(self) -> SchedulerState:
        for directory in (self._load_dir, self._save_dir):
            if not directory:
                continue
            saved = read_state(directory, expected=self.identity)
            if saved is not None:
                logger.info("resuming the Verifiers task stream from %s", state_path(directory))
                return saved
        return self.identity

    def start(self, rollout_id: int) -> Cursor:
        """The cursor rollout ``rollout_id`` starts from."""
        resuming = self._state is None
        if self._state is None:
            self._state = self._load()
        cursor, fallback = self._state.cursor_for(rollout_id, self._batch)
        self._state = self._state.record(rollout_id, cursor, self._plan)
        if resuming and rollout_id > 0:
            # Miles resumes only after a checkpoint, so the one before this rollout exists:
            # keep its start even when latest_checkpointed_iteration.txt names another one.
            self._state = self._state.note_checkpoint(rollout_id - 1, self._plan)
        if fallback and rollout_id > 0 and not self._warned_fallback:
            self._warned_fallback = True
            where = (
                f"no saved task-scheduler state for it under --save {self._save_dir}"
                if self._save_dir
                else "--save is not set, so no task-scheduler state is kept"
            )
            logger.warning(
                "training rollout %d starts at task offset %d (rollout_id x --rollout-batch-size): "
                "%s. If this run resumes an earlier one, some tasks may repeat or be skipped.",
                rollout_id,
                cursor.position,
                where,
            )
        return cursor

    def finish(
        self, rollout_id: int, cursor_after_dispatch: Cursor, settlement: Settlement
    ) -> Cursor:
        """Record (and persist) where rollout ``rollout_id + 1`` starts."""
        assert self._state is not None, "start() must be called before finish()"
        following = cursor_after(cursor_after_dispatch, settlement)
        state = self._state.record(rollout_id + 1, following, self._plan)
        if self._save_dir:
            latest = read_latest_checkpoint(self._save_dir)
            if latest is not None:
                state = state.note_checkpoint(latest, self._plan)
            write_state(self._save_dir, state)
        self._state = state
        return following
