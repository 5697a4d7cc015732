"""A second process that claims a --save directory, for the lock tests."""

from __future__ import annotations

import contextlib
import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

# A second process: claims the directory, says so, and holds it until its stdin closes.
HOLDER = """
import sys
from miles_verifiers.trainer.state_dir import claim
try:
    claim(sys.argv[1])
except Exception as error:
    print("refused", type(error).__name__, flush=True)
    raise SystemExit(0)
print("claimed", flush=True)
sys.stdin.read()
"""


def _first_line(process: subprocess.Popen[str], timeout_s: float = 60.0) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout_s):
            raise AssertionError("the other process said nothing")
    return process.stdout.readline().strip()


@contextlib.contextmanager
def other_process(directory: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(directory)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        yield process, _first_line(process)
    finally:
        assert process.stdin is not None
        process.stdin.close()
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:  # pragma: no cover - only if the child hangs
            process.kill()
            process.wait(timeout=60)
