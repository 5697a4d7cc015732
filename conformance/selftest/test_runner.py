"""The selftests' runs are forked from one pre-imported process, and each still runs as a fresh
``python -m pytest`` would: in its own directory, with its own environment, and bounded."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from miles_verifiers_conformance.selftest.runner import run_pytest

FIRST = """
import os, sys

def test_first():
    assert os.getcwd() == sys.path[0] == os.environ["EXPECTED_CWD"]
    assert os.environ["ONLY_IN_THE_FIRST_RUN"] == "1"
"""
SECOND = """
import os, sys

def test_second():
    assert os.getcwd() == sys.path[0] == os.environ["EXPECTED_CWD"]
    assert "ONLY_IN_THE_FIRST_RUN" not in os.environ
"""
SLOW = """
import os, time

def test_slow():
    with open("pid", "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
"""


def test_each_run_gets_its_own_directory_environment_and_import_path(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for project, text in ((first, FIRST), (second, SECOND)):
        project.mkdir()
        (project / "test_run.py").write_text(text, encoding="utf-8")

    one = run_pytest(
        ["test_run.py"],
        cwd=first,
        report_base=first / "r",
        env={"EXPECTED_CWD": str(first), "ONLY_IN_THE_FIRST_RUN": "1"},
    )
    two = run_pytest(
        ["test_run.py"], cwd=second, report_base=second / "r", env={"EXPECTED_CWD": str(second)}
    )

    assert one.returncode == 0, one.output
    assert two.returncode == 0, two.output


def test_a_run_past_its_timeout_is_ended_and_the_next_run_goes_ahead(tmp_path: Path) -> None:
    (tmp_path / "test_slow.py").write_text(SLOW, encoding="utf-8")

    with pytest.raises(subprocess.TimeoutExpired):
        run_pytest(["test_slow.py"], cwd=tmp_path, report_base=tmp_path / "r", timeout_s=10)
    after = run_pytest(["--co"], cwd=tmp_path, report_base=tmp_path / "r")

    assert not Path(f"/proc/{(tmp_path / 'pid').read_text()}").exists()
    assert after.returncode == 0, after.output
    assert "test_slow" in after.output
