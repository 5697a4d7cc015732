"""Every ``miles-verifiers`` command in README.md's code blocks runs as written.

The commands are read from the README itself, so an edit there is checked here. Two changes
keep the run short and safe on a shared machine: training sizes shrink to one group of one
sample (:data:`SMALL_SIZES`), and ``engine serve`` gets a free port instead of 30000.
Commands that cannot run here are listed in :data:`NOT_RUN` with the reason; a command in
neither list fails the test, so none is silently ignored.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from miles_verifiers_testkit.loopback_http import client
from miles_verifiers_testkit.tokenizers import offline_environ

pytestmark = pytest.mark.slow

README = Path(__file__).resolve().parents[2] / "README.md"
PROGRAM = "miles-verifiers"

# Flag values replaced to keep the run short; the command is otherwise run as written.
SMALL_SIZES = {"--rollout-batch-size": "1", "--n-samples-per-prompt": "1", "--num-rollout": "1"}

# Commands that cannot run in a test, by their first words, with the reason.
NOT_RUN = {
    "miles-verifiers rollout --config my_env.toml --engine-url": (
        "needs a real SGLang server (or router) at the URL and the user's own config; its "
        "flags are elided with '...'"
    ),
}

COMMAND_TIMEOUT_S = 300


def readme_commands(text: str) -> list[str]:
    """The ``miles-verifiers ...`` lines of the README's fenced code blocks, with backslash
    continuations joined and trailing ``#`` comments dropped."""
    commands = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words and words[0] == PROGRAM:
                commands.append(shlex.join(words))
    return commands


COMMANDS = readme_commands(README.read_text(encoding="utf-8"))


def _skip_reason(command: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if command.startswith(start)), None)


def _shrunk(words: list[str]) -> list[str]:
    out = list(words)
    for index, word in enumerate(out[:-1]):
        if word in SMALL_SIZES:
            out[index + 1] = SMALL_SIZES[word]
    return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _environment() -> dict[str, str]:
    return {**os.environ, **offline_environ()}


def _argv(words: list[str]) -> list[str]:
    # The installed console script is ``miles_verifiers.cli.main:main``; run that with this Python.
    return [sys.executable, "-m", "miles_verifiers.cli.main", *words[1:]]


def _run_to_completion(words: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        _argv(_shrunk(words)),
        cwd=cwd,
        env=_environment(),
        capture_output=True,
        text=True,
        timeout=COMMAND_TIMEOUT_S,
    )


def _healthy(url: str) -> bool:
    try:
        with client(url, timeout=2.0) as http:
            return http.get(f"{url}/health").status_code == 200
    except httpx.HTTPError:
        return False


def _serve_then_stop(words: list[str], cwd: Path) -> tuple[int, str]:
    """Start a serving command on a free port, wait for /health, Ctrl-C it."""
    port = str(_free_port())
    words = [
        port if prev == "--port" else word for prev, word in zip(["", *words], words, strict=False)
    ]
    process = subprocess.Popen(
        _argv(words), cwd=cwd, env=_environment(), stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + COMMAND_TIMEOUT_S
        while process.poll() is None and not _healthy(f"http://127.0.0.1:{port}"):
            assert time.monotonic() < deadline, "the engine never answered /health"
            time.sleep(0.1)
        assert process.poll() is None, process.communicate(timeout=30)[1]
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)
    return process.returncode, stderr


def test_the_readme_has_commands_and_every_skip_names_one_of_them():
    assert COMMANDS, "no miles-verifiers command found in README.md code blocks"
    for start in NOT_RUN:
        assert any(c.startswith(start) for c in COMMANDS), f"stale NOT_RUN entry: {start}"


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(shlex.split(c)[1:4]) for c in COMMANDS])
def test_the_readme_command_runs_as_written(command: str, tmp_path: Path) -> None:
    reason = _skip_reason(command)
    if reason is not None:
        pytest.skip(reason)
    words = shlex.split(command)
    if words[1:3] == ["engine", "serve"]:
        code, stderr = _serve_then_stop(words, tmp_path)
    else:
        finished = _run_to_completion(words, tmp_path)
        code, stderr = finished.returncode, finished.stderr
    assert code == 0, f"{command}\n{stderr}"
    assert "Traceback" not in stderr
