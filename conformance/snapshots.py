"""Token snapshots: a readable syrupy extension, the version pin and the drift recorder.

Snapshot files are plain text meant for review (decoded text next to token ids). The rollout
snapshots hold what the pinned Verifiers and Renderers produce, so ``__snapshots__/.versions.toml``
records those versions; a run under other versions fails with the refresh command instead of a
confusing diff. The rendered prompts depend on Renderers alone and are kept in one folder per
Renderers release (``__rendered_prompts__/renderers-<version>/``), outside ``__snapshots__``:
syrupy scans that folder with its default extension wherever no assertion ran there (the xdist
controller always), and would count another release's files as unused snapshots, failing the
run (or delete them on update). Each comparison is recorded for the
drift summary (``drift.py``); a first recording for a new release is compared with the newest
older release's.

Loaded as a pytest plugin by ``plugin.py``; it provides the ``token_snapshot`` and
``renderers_snapshot`` fixtures.
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
from packaging.version import Version
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation

from miles_verifiers_conformance.drift import DriftEntry
from miles_verifiers_testkit.miles.configs import WORKER_PYTHON

SNAPSHOT_DIR = Path(__file__).parent / "__snapshots__"
RENDERED_DIRNAME = "__rendered_prompts__"
# A dot file: syrupy ignores those, where it would delete any other unknown file on update.
VERSIONS_FILE = SNAPSHOT_DIR / ".versions.toml"
PINNED_PACKAGES = ("verifiers", "renderers")
REFRESH_COMMAND = "tox -e snapshots -- --snapshot-update"

DRIFT_KEY = pytest.StashKey[list[DriftEntry]]()


class TokenSnapshotExtension(SingleFileSnapshotExtension):
    """One readable ``.txt`` file per snapshot case."""

    _write_mode = WriteMode.TEXT
    file_extension = "txt"


def renderers_folder(version: str) -> str:
    return f"renderers-{version}"


@functools.cache  # one class per version: syrupy scans each extension class's folder once
def renderers_extension(version: str) -> type[TokenSnapshotExtension]:
    """Snapshots kept per Renderers version (``__rendered_prompts__/renderers-<version>/``),
    so the output of each release a supported Verifiers pulls in stays committed side by side."""

    class RenderersVersionExtension(TokenSnapshotExtension):
        @classmethod
        def dirname(cls, *, test_location: PyTestLocation) -> str:
            site = Path(test_location.filepath).parent / RENDERED_DIRNAME
            return str(site / renderers_folder(version) / test_location.basename)

    return RenderersVersionExtension


# Runs in the episode side's interpreter, which need not have this suite installed: the
# package is loaded from its folder (the rendering modules import only the standard library
# and renderers).
_RENDER_SCRIPT = """
import importlib.util, json, sys
folder = sys.argv[1]
spec = importlib.util.spec_from_file_location(
    "miles_verifiers_conformance", folder + "/__init__.py", submodule_search_locations=[folder]
)
package = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = package
spec.loader.exec_module(package)
from miles_verifiers_conformance.render_corpus import render_documents
print(json.dumps(render_documents()))
"""


def rendered_prompts() -> dict[str, str]:
    """The rendered-prompt snapshot texts (``render_corpus.render_documents``) from the
    Renderers where the episodes run: ``MILES_VERIFIERS_EPISODE_WORKER_PYTHON``'s when set,
    else this interpreter's."""
    python = os.environ.get(WORKER_PYTHON)
    if not python:
        from miles_verifiers_conformance.render_corpus import render_documents

        return render_documents()
    done = subprocess.run(
        [python, "-c", _RENDER_SCRIPT, str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(
            f"could not render the prompt corpus with {python} ({WORKER_PYTHON}): "
            f"{done.stderr.strip()[-2000:]}"
        )
    documents: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return documents


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


def _versions_problem(
    config: pytest.Config, versions_file: Path, packages: tuple[str, ...]
) -> str | None:
    """Check (or, on --snapshot-update, write) a snapshot folder's versions, once a session."""
    checked = config.stash.setdefault(VERSIONS_CHECKED, {})
    if versions_file not in checked:
        installed = installed_versions(packages)
        if config.option.update_snapshots:
            write_versions(versions_file, installed)
            checked[versions_file] = None
        else:
            checked[versions_file] = version_mismatch(read_versions(versions_file), installed)
    return checked[versions_file]


def earlier_version_snapshot(location: Path) -> Path | None:
    """The same case in the newest Renderers folder older than ``location``'s, if any: what a
    first recording for a new Renderers release is compared against in the drift summary."""
    collection, folder = location.parent, location.parent.parent
    prefix = renderers_folder("")
    if not folder.name.startswith(prefix):
        return None
    this = Version(folder.name.removeprefix(prefix))
    older = [
        (Version(other.name.removeprefix(prefix)), other / collection.name / location.name)
        for other in folder.parent.glob(f"{prefix}*")
        if Version(other.name.removeprefix(prefix)) < this
    ]
    existing = [(version, path) for version, path in older if path.exists()]
    return max(existing)[1] if existing else None


def _checker(
    assertion: SnapshotAssertion, request: pytest.FixtureRequest, packages: tuple[str, ...]
) -> Callable[[str], None]:
    # Per test: the reporter sends it with the test's report (to the xdist controller).
    drift = request.node.stash.setdefault(DRIFT_KEY, [])
    folder = Path(assertion.extension.dirname(test_location=assertion.test_location)).parent
    problem = packages and _versions_problem(request.config, folder / VERSIONS_FILE.name, packages)
    if problem:
        pytest.fail(problem, pytrace=False)

    def check(text: str) -> None:
        location = Path(
            assertion.extension.get_location(
                test_location=assertion.test_location, index=assertion.index
            )
        )
        case, baseline = request.node.nodeid, location
        if not location.exists():
            baseline = earlier_version_snapshot(location) or location
            if baseline != location:
                case += f" (against {baseline.parent.parent.name})"
        old = baseline.read_text(encoding="utf-8") if baseline.exists() else None
        drift.append(DriftEntry(case=case, old_text=old, new_text=text))
        assert text == assertion

    return check


def _assertion(
    request: pytest.FixtureRequest, extension: type[TokenSnapshotExtension]
) -> SnapshotAssertion:
    # Built here rather than from syrupy's `snapshot` fixture: that one registers an assertion
    # with the default extension too, whose clean-up on --snapshot-update would delete every
    # snapshot file it does not own, the other Renderers releases' folders included.
    return SnapshotAssertion(
        update_snapshots=request.config.option.update_snapshots,
        update_new_snapshots_only=request.config.option.update_new_snapshots_only,
        extension_class=extension,
        test_location=PyTestLocation(request.node),
        session=request.config._syrupy,  # type: ignore[attr-defined]
    )


@pytest.fixture
def token_snapshot(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """Compare a snapshot text with the committed file and record the drift.

    Fails without comparing when the folder's snapshots were recorded with other Verifiers or
    Renderers versions.
    """
    return _checker(_assertion(request, TokenSnapshotExtension), request, PINNED_PACKAGES)


@pytest.fixture
def renderers_snapshot(request: pytest.FixtureRequest) -> Callable[[str], None]:
    """As ``token_snapshot``, in the folder of the episode side's Renderers version (the
    folder's name is its version pin).

    Fails without comparing when no snapshots were recorded for that version.
    """
    (version,) = installed_versions(("renderers",)).values()
    assertion = _assertion(request, renderers_extension(version))
    folder = Path(assertion.extension.dirname(test_location=assertion.test_location)).parent
    if not folder.is_dir() and not request.config.option.update_snapshots:
        recorded = sorted(p.name for p in folder.parent.glob(f"{renderers_folder('')}*"))
        pytest.fail(
            f"No rendered-prompt snapshots are recorded for renderers {version} (recorded: "
            f"{', '.join(recorded) or 'none'}). Record them with `{REFRESH_COMMAND}`, review "
            "the drift summary it prints against the previous release, and commit the folder.",
            pytrace=False,
        )
    return _checker(assertion, request, ())
