"""The versions the token snapshots are checked against are those of the interpreter the
episodes run in: with workers in a virtualenv of their own, the trainer's has no Verifiers."""

from __future__ import annotations

from pathlib import Path

import pytest

from miles_verifiers_conformance.snapshots import installed_versions
from miles_verifiers_testkit.miles.configs import WORKER_PYTHON


def test_with_a_worker_interpreter_the_versions_are_read_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stand-in interpreter that answers the version query as a venv with these would.
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho \'{"verifiers": "9.9.9", "renderers": "8.8.8"}\'\n')
    python.chmod(0o755)
    monkeypatch.setenv(WORKER_PYTHON, str(python))

    assert installed_versions() == {"verifiers": "9.9.9", "renderers": "8.8.8"}


def test_without_one_they_are_this_interpreters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WORKER_PYTHON, raising=False)

    assert installed_versions(("surely-not-installed-dist",)) == {
        "surely-not-installed-dist": "not installed"
    }
