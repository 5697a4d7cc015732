"""Multi-branch traces trained as siblings, through Miles' own post-processing.

The adapter's output goes through what Miles' rollout manager does with it: the flattening
and compact-rollout check of ``postprocess_rollout_data``, then ``convert_samples_to_train_data``
(reward normalisation per rollout, whole-rollout loss-mask sums). The batch mixes one task
that compacts (two branches per rollout) with neighbours that never branch, in both orders.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tests.rollout.rollout_support import RecordingEngine, write_config
from tests_miles.support import build, run_args, train, train_data

CLASS_PATH = "miles_verifiers.VerifiersRolloutFn"
LEGACY_PATH = "miles_verifiers.generate_rollout"
TASKS, N = 3, 2


@pytest.fixture(params=[0, 1, 2], ids=["branching-first", "branching-middle", "branching-last"])
def compacting(request: pytest.FixtureRequest, tmp_path: Path, use_config: Any) -> int:
    """A batch where one task (the returned position) compacts once: two branches per rollout."""
    branching = request.param
    config = write_config(
        tmp_path,
        "mv_compact",
        taskset={"num_tasks": TASKS, "steps": 2, "steps_by_task": {str(branching): 4}},
        harness={"compact_every": 2},
    )
    use_config(config)
    return branching


def call_args() -> Any:
    return run_args(
        rollout_batch_size=TASKS, n_samples_per_prompt=N, over_sampling_batch_size=TASKS
    )


def rows_by_rollout(data: dict[str, Any]) -> dict[int, list[int]]:
    rows: dict[int, list[int]] = defaultdict(list)
    for row, rollout_id in enumerate(data["rollout_ids"]):
        rows[rollout_id].append(row)
    return dict(rows)


@pytest.mark.parametrize("path", [CLASS_PATH, LEGACY_PATH])
def test_miles_turns_a_batch_with_siblings_into_train_data_one_row_per_branch(
    path: str, engine: RecordingEngine, engine_port: int, compacting: int
) -> None:
    args = call_args()
    flat, data = train_data(args, train(build(path, args, engine_port), rollout_id=0))

    assert len(flat) == TASKS * N + N  # the branching task's rollouts have two samples each
    rows = rows_by_rollout(data)
    assert len(rows) == TASKS * N
    assert sorted(len(r) for r in rows.values()) == [1] * (TASKS - 1) * N + [2] * N


@pytest.mark.parametrize("path", [CLASS_PATH, LEGACY_PATH])
def test_miles_normalises_one_shared_reward_per_rollout(
    path: str, engine: RecordingEngine, engine_port: int, compacting: int
) -> None:
    args = call_args()
    flat, data = train_data(args, train(build(path, args, engine_port), rollout_id=0))

    per_rollout: dict[int, float] = {}
    by_task: dict[int, list[float]] = defaultdict(list)
    for rollout_id, rows in rows_by_rollout(data).items():
        assert len({data["raw_reward"][r] for r in rows}) == 1
        assert len({data["rewards"][r] for r in rows}) == 1
        per_rollout[rollout_id] = data["rewards"][rows[0]]
        by_task[flat[rows[0]].group_index].append(per_rollout[rollout_id])
    # Each rollout counts once in its group's baseline, however many branches it has.
    assert sorted(len(v) for v in by_task.values()) == [N] * TASKS
    for rewards in by_task.values():
        assert sum(rewards) == pytest.approx(0.0, abs=1e-6)


@pytest.mark.parametrize("path", [CLASS_PATH, LEGACY_PATH])
def test_miles_weighs_each_rollout_by_the_loss_mask_of_all_its_siblings(
    path: str, engine: RecordingEngine, engine_port: int, compacting: int
) -> None:
    args = call_args()
    _, data = train_data(args, train(build(path, args, engine_port), rollout_id=0))

    for rows in rows_by_rollout(data).values():
        whole = sum(sum(data["loss_masks"][r]) for r in rows)
        assert whole > 0
        assert [data["rollout_mask_sums"][r] for r in rows] == [whole] * len(rows)
