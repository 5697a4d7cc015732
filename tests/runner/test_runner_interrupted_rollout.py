"""An interrupted or killed ``rollout`` keeps every rollout it completed, and says how to resume;
a stream output (a pipe, a device) is written to as it is.

The interrupted runs are real ``miles-verifiers rollout`` processes (the real rollout function,
fixture taskset and embedded engine) signalled once their partial samples file holds whole
rollouts; the other runs go through the same command line in-process.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from miles_verifiers_testkit.runner.outputs import leftover_partials
from miles_verifiers_testkit.tokenizers import offline_environ
from tests.runner.runner_support import run_command

pytestmark = pytest.mark.slow

BATCH, N = 2, 2
# Long enough that no run ends before it is signalled.
ENDLESS = "100000"
WAIT_S = 300.0


def _argv(tmp: Path, *extra: str, num_rollout: str = ENDLESS) -> list[str]:
    config = tmp / "arith.toml"
    config.write_text('max_turns = 4\n\n[taskset]\nid = "mv-arith"\nnum_tasks = 5\nseed = 0\n')
    return [
        "rollout",
        "--config", str(config),
        "--rollout-batch-size", str(BATCH),
        "--n-samples-per-prompt", str(N),
        "--num-rollout", num_rollout,
        "--rollout-max-response-len", "64",
        "--rollout-num-gpus", "1",
        "--sglang-enable-deterministic-inference",  # same tokens in every run
        "--save", str(tmp / "ckpt"),
        "--output", str(tmp / "samples.jsonl"),
        "--metrics-output", str(tmp / "metrics.json"),
        "--no-progress",
        *extra,
    ]  # fmt: skip


def _lines(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")
    # A killed run may have left a line half-written; only whole lines count.
    return [json.loads(line) for line in text[: text.rfind("\n") + 1].splitlines()]


def _train_ids(lines: list[dict]) -> list[int]:
    return sorted({line["rollout_id"] for line in lines if not line["evaluation"]})


def _rollouts_on_disk(output: Path) -> list[int]:
    return _train_ids([line for path in leftover_partials(output) for line in _lines(path)])


@dataclass(frozen=True)
class Signalled:
    code: int
    stdout: str
    stderr: str
    output: Path
    metrics: Path
    # Partial samples files beside --output right after the process ended.
    partials: list[Path]


def _run_and_signal(tmp: Path, signum: int, rollouts: int) -> Signalled:
    """Run ``rollout`` as a process, send ``signum`` once ``rollouts`` rollouts are on disk."""
    output = tmp / "samples.jsonl"
    out, err = tmp / "stdout.txt", tmp / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-X", "faulthandler", "-m", "miles_verifiers.cli.main", *_argv(tmp)],
            cwd=tmp,
            env={**os.environ, **offline_environ()},
            stdout=stdout,
            stderr=stderr,
        )
        try:
            deadline = time.monotonic() + WAIT_S
            while len(_rollouts_on_disk(output)) < rollouts:
                assert process.poll() is None, err.read_text()
                assert time.monotonic() < deadline, f"no {rollouts} rollouts: {err.read_text()}"
                time.sleep(0.2)
            process.send_signal(signum)
            try:
                process.wait(timeout=WAIT_S)
            except subprocess.TimeoutExpired:
                pytest.fail(_stuck(process, signum, err), pytrace=False)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)
    return Signalled(
        process.returncode,
        out.read_text(),
        err.read_text(),
        output,
        tmp / "metrics.json",
        leftover_partials(output),
    )


def _stuck(process: subprocess.Popen, signum: int, err: Path) -> str:
    """Why a signalled run did not end: its signal masks, then every thread's stack (SIGABRT
    makes the faulthandler the run was started with print them)."""
    status = Path(f"/proc/{process.pid}/status").read_text()
    masks = [
        line for line in status.splitlines() if line.startswith(("SigBlk", "SigIgn", "SigCgt"))
    ]
    process.send_signal(signal.SIGABRT)
    process.wait(timeout=60)
    return (
        f"the run did not end within {WAIT_S:g} s of signal {signum}; its masks "
        f"{masks}; its stderr, thread stacks last:\n{err.read_text()[-8000:]}"
    )


@pytest.fixture(scope="module")
def ctrl_c(tmp_path_factory: pytest.TempPathFactory) -> Signalled:
    return _run_and_signal(tmp_path_factory.mktemp("ctrl-c"), signal.SIGINT, rollouts=2)


def test_ctrl_c_exits_130_keeping_every_completed_rollout_and_no_partial_file(ctrl_c):
    assert ctrl_c.code == 130, ctrl_c.stderr
    lines = _lines(ctrl_c.output)
    held = _train_ids(lines)
    assert len(held) >= 2 and held == list(range(len(held)))
    assert len(lines) == len(held) * BATCH * N
    assert ctrl_c.partials == []


def test_ctrl_c_leaves_metrics_marked_interrupted_naming_the_rollouts_held(ctrl_c):
    document = json.loads(ctrl_c.metrics.read_text())
    assert document["status"] == "interrupted"
    assert document["summary"]["train_rollout_ids"] == _train_ids(_lines(ctrl_c.output))
    assert "│ run " in ctrl_c.stdout and "interrupted" in ctrl_c.stdout


def _resume_command(stderr: str) -> list[str]:
    (line,) = [line for line in stderr.splitlines() if line.startswith("To resume: ")]
    return shlex.split(line.removeprefix("To resume: "))


def _with_value(words: list[str], flag: str, value: str) -> list[str]:
    index = words.index(flag)
    return [*words[: index + 1], value, *words[index + 2 :]]


def _tasks_and_tokens(lines: list[dict]) -> list[tuple]:
    return [
        (line["rollout_id"], line["sample"]["group_index"], line["sample"]["tokens"])
        for line in lines
    ]


def test_the_interrupted_and_resumed_runs_hold_an_uninterrupted_run_exactly_once(ctrl_c, tmp_path):
    held = len(_train_ids(_lines(ctrl_c.output)))
    total = str(held + 2)
    words = _resume_command(ctrl_c.stderr)
    assert words[:2] == ["miles-verifiers", "rollout"]
    resumed_words = _with_value(words[1:], "--num-rollout", total)
    code, _, stderr = run_command(resumed_words)
    assert code == 0, stderr
    resumed = Path(resumed_words[resumed_words.index("--output") + 1])
    code, _, stderr = run_command(_argv(tmp_path, num_rollout=total))
    assert code == 0, stderr

    pieced = _lines(ctrl_c.output) + _lines(resumed)
    assert _tasks_and_tokens(pieced) == _tasks_and_tokens(_lines(tmp_path / "samples.jsonl"))
    assert _train_ids(pieced) == list(range(held + 2))


def test_sigterm_is_handled_as_ctrl_c(tmp_path):
    run = _run_and_signal(tmp_path, signal.SIGTERM, rollouts=1)
    assert run.code == 128 + signal.SIGTERM, run.stderr
    assert json.loads(run.metrics.read_text())["status"] == "interrupted"
    assert _train_ids(_lines(run.output))
    assert "To resume: miles-verifiers rollout" in run.stderr
    assert "Traceback" not in run.stderr


def test_a_killed_run_leaves_its_partial_file_and_the_next_run_names_it(tmp_path):
    run = _run_and_signal(tmp_path, signal.SIGKILL, rollouts=1)
    (partial,) = run.partials
    assert _train_ids(_lines(partial))
    assert not run.output.exists()

    code, _, stderr = run_command(_argv(tmp_path, num_rollout="1"))

    assert code == 0, stderr
    assert f"warning: {partial} was left by an earlier run" in stderr
    assert partial.exists()


def test_samples_stream_into_a_fifo_which_stays_a_fifo(tmp_path):
    fifo = tmp_path / "samples.fifo"
    os.mkfifo(fifo)
    received: list[str] = []
    reader = threading.Thread(
        target=lambda: received.extend(fifo.open().read().splitlines()), daemon=True
    )
    reader.start()
    argv = _argv(tmp_path, "--output", str(fifo), num_rollout="1")
    code, _, stderr = run_command(argv)
    reader.join(timeout=WAIT_S)

    assert code == 0, stderr
    assert len(received) == BATCH * N
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_output_with_no_space_fails_the_run_naming_it_and_is_not_replaced(tmp_path):
    full = tmp_path / "samples.jsonl"
    full.symlink_to("/dev/full")  # a link, so that no version of the runner can touch /dev/full
    code, _, stderr = run_command(_argv(tmp_path, num_rollout="1"))

    assert code == 1
    assert f"cannot write the samples to {full}" in stderr and "Traceback" not in stderr
    assert os.readlink(full) == "/dev/full"


def test_samples_sent_to_standard_output_come_out_there_and_the_summary_goes_to_stderr(
    tmp_path, capfd
):
    # Under capfd, standard output is a regular file: like `rollout ... > samples.jsonl`.
    code, stdout, stderr = run_command(_argv(tmp_path, "--output", "/dev/stdout", num_rollout="1"))
    written = capfd.readouterr().out

    assert code == 0, stderr
    assert len([json.loads(line) for line in written.splitlines()]) == BATCH * N
    assert stdout == "" and "Rollout summary" in stderr
