"""The command line that carries on an interrupted run.

It is the same command line, starting at the next training rollout (``--start-rollout-id``)
and reading the task cursor from the ``--save`` directory the interrupted run kept it in
(``--load``, which the rollout function reads first). Regular output files get new names
(``samples.from-15.jsonl``) so the interrupted run's outputs are kept beside the resumed
run's; a stream output (a pipe, ``/dev/stdout``) stays as it is.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from miles_verifiers.cli.outputs import replaced_file
from miles_verifiers.cli.schedule import ResumePoint

SKIP_EVAL_FLAG = "--skip-eval-before-train"


def resumed_output(path: Path, start_rollout_id: int) -> Path:
    """Where the resumed run writes what ``path`` held: ``name.from-<id>.suffix``."""
    if replaced_file(path) is None:
        return path
    stem = re.sub(r"\.from-\d+$", "", path.stem)
    return path.with_name(f"{stem}.from-{start_rollout_id}{path.suffix}")


def _without(words: Sequence[str], flag: str, *, valued: bool) -> list[str]:
    kept: list[str] = []
    skip_next = False
    for word in words:
        if skip_next:
            skip_next = False
        elif word == flag:
            skip_next = valued
        elif not (valued and word.startswith(f"{flag}=")):
            kept.append(word)
    return kept


def resume_words(
    words: Sequence[str],
    point: ResumePoint,
    *,
    save_dir: str | None,
    evaluates: bool,
    output: Path,
    metrics_output: Path,
) -> list[str]:
    """``words`` (the command line after the program name) changed to resume at ``point``.

    ``evaluates``: the run has ``--eval-interval``, so whether it evaluates before its first
    rollout is set to what the interrupted run still owed."""
    replaced = {
        "--start-rollout-id": str(point.start_rollout_id),
        "--output": str(resumed_output(output, point.start_rollout_id)),
        "--metrics-output": str(resumed_output(metrics_output, point.start_rollout_id)),
    }
    if save_dir:
        replaced["--load"] = save_dir
    resumed = list(words)
    for flag in replaced:
        resumed = _without(resumed, flag, valued=True)
    if evaluates:
        resumed = _without(resumed, SKIP_EVAL_FLAG, valued=False)
    for flag, value in replaced.items():
        resumed += [flag, value]
    if evaluates and not point.evaluate_first:
        resumed.append(SKIP_EVAL_FLAG)
    return resumed
