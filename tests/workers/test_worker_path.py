"""An episode worker's programs are its own virtualenv's: the directory of the workers'
interpreter, as the path was given (a virtualenv's ``python`` is a symlink), comes first on the
``PATH`` its episodes inherit, for local workers and Ray actors alike."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from miles_verifiers.protocol import procs
from miles_verifiers.protocol.procs import path_with_bin_first
from miles_verifiers.trainer.backends.local import LocalWorker, WorkerTemplate

TOOL = "mv-only-in-the-worker-venv"


# Loaded by the worker venv's interpreter at start-up: as a worker forked from its template
# starts, it runs the program as an episode's harness would, and writes down what it got.
PROBE = f"""
import os, subprocess
from miles_verifiers.episodes import child

_serve = child.main

def main():
    try:
        got = subprocess.run([{TOOL!r}], capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        got = "not found"
    with open(os.environ["MV_TEST_PROBE_OUTPUT"], "w") as output:
        output.write(got)
    _serve()

child.main = main
"""


def worker_venv(root: Path, *, probe: bool = False) -> Path:
    """A real virtualenv (its ``python`` a symlink) that sees this environment's packages,
    with a program of its own in its ``bin``; its python's path as a user would give it."""
    venv = root / "episodes"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = (venv / "lib").glob("python3*/site-packages")
    ours = sysconfig.get_paths()["purelib"]
    lines = [f"import site; site.addsitedir({ours!r})"]
    if probe:
        (site / "mv_test_probe.py").write_text(PROBE)
        lines.append("import mv_test_probe")
    (site / "trainer_packages.pth").write_text("\n".join(lines) + "\n")
    tool = venv / "bin" / TOOL
    tool.write_text("#!/bin/sh\necho found-in-worker-venv\n")
    tool.chmod(0o755)
    python = venv / "bin" / "python"
    assert python.is_symlink()
    return python


def test_a_workers_subprocesses_find_the_programs_of_the_worker_venv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    python = worker_venv(tmp_path, probe=True)
    output = tmp_path / "probe.txt"
    monkeypatch.setenv("MV_TEST_PROBE_OUTPUT", str(output))
    template = WorkerTemplate(str(python))

    async def scenario() -> None:
        worker = await LocalWorker.start("venv", template)
        try:
            await worker.request(1, b"{}", timeout_s=60)  # refused, but answered: it is serving
        finally:
            await worker.stop()

    try:
        asyncio.run(asyncio.wait_for(scenario(), 120))
    finally:
        template.close()

    assert output.read_text() == "found-in-worker-venv"


def test_the_describe_step_and_workers_get_the_directory_as_given_not_resolved(
    tmp_path: Path,
) -> None:
    python = worker_venv(tmp_path)

    environ = WorkerTemplate(str(python)).child_environ()

    first = environ["PATH"].split(os.pathsep)[0]
    assert first == str(python.parent)
    assert first != str(python.resolve().parent)


def test_the_workers_directory_moves_first_when_path_already_holds_it() -> None:
    path = os.pathsep.join(["/usr/bin", "/opt/episodes/bin", "/bin"])

    assert path_with_bin_first("/opt/episodes/bin/python", path) == os.pathsep.join(
        ["/opt/episodes/bin", "/usr/bin", "/bin"]
    )


def test_a_ray_actor_puts_its_interpreters_directory_first_on_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from miles_verifiers.trainer.backends.ray import _EpisodeWorkerActor

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setattr(procs, "become_child_subreaper", lambda: True)

    _EpisodeWorkerActor("/opt/episodes/bin/python")

    assert os.environ["PATH"] == "/opt/episodes/bin:/usr/bin:/bin"
