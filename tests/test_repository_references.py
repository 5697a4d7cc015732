"""The repository stands on its own: nothing in it sends a reader to files outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# Spelled in two parts so that this file does not match itself.
OUTSIDE_NOTES = "shared" + "/reference"


def _tracked_text_files() -> list[Path]:
    listing = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True, timeout=60
    )
    names = [name for name in listing.stdout.decode().split("\0") if name]
    return [REPO_ROOT / name for name in names if (REPO_ROOT / name).is_file()]


def test_no_tracked_file_points_at_the_teams_notes_outside_the_repository() -> None:
    offenders = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue  # binary files cannot hold a pointer a reader would follow
        if OUTSIDE_NOTES in text:
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert offenders == [], f"these files point outside the repository: {offenders}"
