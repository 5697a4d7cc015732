"""Token snapshots: a readable syrupy extension, the version pin and the drift recorder.

Snapshot files are plain text meant for review (decoded text next to token ids). They hold
what the pinned Verifiers and Renderers produce, so ``__snapshots__/.versions.toml`` records
those versions; a run under other versions fails with the refresh command instead of a
confusing diff. Each comparison is recorded for the drift summary (``drift.py``).

Loaded as a pytest plugin by ``plugin.py``; it provides the ``token_snapshot`` fixture.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import tomllib
from collections.abc import Callable, Mapping
from importlib import metadata
from pathlib import Path

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from miles_verifiers_conformance.drift import DriftEntry
from miles_verifiers_testkit.miles.configs import WORKER_PYTHON

SNAPSHOT_DIR = Path(__file__).parent / "__snapshots__"
# A dot file: syrupy ignores those, where it would delete any other unknown file on update.
VERSIONS_FILE = SNAPSHOT_DIR / ".versions.toml"
PINNED_PACKAGES = ("verifiers", "renderers")
REFRESH_COMMAND = "tox -e snapshots -- --snapshot-update"

DRIFT_KEY = pytest.StashKey[list[DriftEntry]]()


class TokenSnapshotExtension(SingleFileSnapshotExtension):
    """One readable ``.txt`` file per snapshot case."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


def installed_versions(packages: tuple[str, ...] = PINNED_PACKAGES) -> dict[str, str]:
    """The versions of ``packages`` where the episodes run: in the interpreter
    ``MILES_VERIFIERS_EPISODE_WORKER_PYTHON`` names when it is set (the trainer's own may have
    no Verifiers or Renderers at all), else in this one."""
    python = os.environ.get(WORKER_PYTHON)
    if python:
        return dict(_versions_in(python, packages))
    return _versions_here(packages)


def _versions_here(packages: tuple[str, ...]) -> dict[str, str]:
    versions = {}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@functools.cache
def _versions_in(python: str, packages: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    # Plain standard library: the episodes' interpreter need not have this suite installed.
    script = (
        "import json, sys\n"
        "from importlib import metadata\n"
        "def version(name):\n"
        "    try:\n"
        "        return metadata.version(name)\n"
        "    except metadata.PackageNotFoundError:\n"
        "        return 'not installed'\n"
        "print(json.dumps({name: version(name) for name in sys.argv[1:]}))"
    )
    done = subprocess.run(
        [python, "-c", script, *packages], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"could not read the episode side's package versions with {python} "
            f"({WORKER_PYTHON}): {done.stderr.strip()[-2000:]}"
        )
    return tuple(json.loads(done.stdout.strip().splitlines()[-1]).items())


def read_versions(path: Path) -> dict[str, str] | None:
    if not path.exists():
        return None
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {str(k): str(v) for k, v in data.get("versions", {}).items()}


def write_versions(path: Path, versions: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    body = "".join(f'{name} = "{version}"\n' for name, version in sorted(versions.items()))
    path.write_text(
        "# Versions the token snapshots in this folder were recorded with.\n"
        f"# Rewritten by `{REFRESH_COMMAND}`.\n[versions]\n" + body,
        encoding="utf-8",
    )


def version_mismatch(
    recorded: Mapping[str, str] | None, installed: Mapping[str, str]
) -> str | None:
    """Why the committed snapshots cannot be compared with this install, or None."""
    if recorded is None:
        return (
            f"No snapshot versions are recorded ({VERSIONS_FILE.name} is missing). Record them with "
            f"`{REFRESH_COMMAND}` and commit the result."
        )
    differing = {
        k: (recorded.get(k, "unrecorded"), v) for k, v in installed.items() if recorded.get(k) != v
    }
    if not differing:
        return None
    changes = ", ".join(f"{k} {old} -> {new}" for k, (old, new) in differing.items())
    return (
        f"The token snapshots were recorded with other package versions ({changes}). Rendered "
        f"prompts may legitimately differ, so they are not compared. Refresh them with "
        f"`{REFRESH_COMMAND}`, review the drift summary it prints, and commit the snapshots."
    )


VERSIONS_CHECKED = pytest.StashKey[dict[Path, str | None]]()


def _versions_problem(config: pytest.Config, versions_file: Path) -> str | None:
    """Check (or, on --snapshot-update, write) a snapshot folder's versions, once a session."""
    checked = config.stash.setdefault(VERSIONS_CHECKED, {})
    if versions_file not in checked:
        installed = installed_versions()
        if config.option.update_snapshots:
            write_versions(versions_file, installed)
            checked[versions_file] = None
        else:
            checked[versions_file] = version_mismatch(read_versions(versions_file), installed)
    return checked[versions_file]


@pytest.fixture
def token_snapshot(
    snapshot: SnapshotAssertion, request: pytest.FixtureRequest
) -> Callable[[str], None]:
    """Compare a snapshot text with the committed file and record the drift.

    Fails without comparing when the folder's snapshots were recorded with other Verifiers or
    Renderers versions.
    """
    assertion = snapshot.use_extension(TokenSnapshotExtension)
    # Per test: the reporter sends it with the test's report (to the xdist controller).
    drift = request.node.stash.setdefault(DRIFT_KEY, [])
    folder = Path(assertion.extension.dirname(test_location=assertion.test_location)).parent
    problem = _versions_problem(request.config, folder / VERSIONS_FILE.name)
    if problem:
        pytest.fail(problem, pytrace=False)

    def check(text: str) -> None:
        location = Path(
            assertion.extension.get_location(
                test_location=assertion.test_location, index=assertion.index
            )
        )
        old = location.read_text(encoding="utf-8") if location.exists() else None
        drift.append(DriftEntry(case=request.node.nodeid, old_text=old, new_text=text))
        assert text == assertion

    return check
