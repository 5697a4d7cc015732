"""A selective ``--snapshot-update`` rewrites what it selected and keeps every other snapshot."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.selftest.runner import PLUGIN_CONFTEST, run_pytest

# Two snapshot tests in one file, of two clauses; each one's text comes from the environment.
SNAPSHOT_TESTS = """
import os

import pytest


@pytest.mark.clause("SNP-3")
def test_training(token_snapshot):
    token_snapshot(os.environ.get("TRAINING_TEXT", "training v1"))


@pytest.mark.clause("SNP-4")
def test_eval(token_snapshot):
    token_snapshot("eval v1")
"""


def snapshot_project(root: Path) -> Path:
    (root / "conftest.py").write_text(PLUGIN_CONFTEST, encoding="utf-8")
    (root / "test_pair.py").write_text(SNAPSHOT_TESTS, encoding="utf-8")
    return root / "__snapshots__" / "test_pair"


@pytest.mark.clause("SUITE-1")
def test_updating_one_clause_keeps_the_snapshots_of_the_others(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    snapshots = snapshot_project(project)
    first = run_pytest(
        ["test_pair.py", "--snapshot-update"], cwd=project, report_base=tmp_path / "first"
    )
    assert first.returncode == 0, first.output[-3000:]
    assert (snapshots / "test_eval.txt").read_text(encoding="utf-8") == "eval v1"

    selective = run_pytest(
        ["test_pair.py", "--snapshot-update", "--clause", "SNP-3"],
        cwd=project,
        report_base=tmp_path / "second",
        env={"TRAINING_TEXT": "training v2"},
    )

    assert selective.returncode == 0, selective.output[-3000:]
    assert (snapshots / "test_training.txt").read_text(encoding="utf-8") == "training v2"
    assert (snapshots / "test_eval.txt").exists(), selective.output[-3000:]
    assert (snapshots / "test_eval.txt").read_text(encoding="utf-8") == "eval v1"
