"""A snapshot changed on purpose is reported by the drift summary."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from miles_verifiers_conformance.drift import DriftEntry, first_difference, parse_ids
from miles_verifiers_conformance.selftest.runner import (
    REPO_ROOT,
    plugin_site,
    run_pytest,
)
from miles_verifiers_conformance.snapshots import (
    RENDERED_DIRNAME,
    earlier_version_snapshot,
    installed_versions,
    renderers_folder,
    version_mismatch,
)

# The snapshot text comes from an environment variable so one test file can change it between runs.
SNAPSHOT_TEST = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.mark.clause("SNP-1")
    def test_case(token_snapshot):
        token_snapshot("model: demo\\n  ids: [" + os.environ["DEMO_IDS"] + "]\\n")
    """
)


@pytest.mark.clause("SUITE-2")
def test_drift_names_token_counts_and_first_difference() -> None:
    entry = DriftEntry("case", "  ids: [1, 2, 3]\n  ids: [4]\n", "  ids: [1, 2, 9, 4, 5]\n")

    assert parse_ids(entry.old_text or "") == [1, 2, 3, 4]
    assert entry.describe() == "case: tokens 4 -> 5, first difference at position 2 (id 3 -> 9)"


@pytest.mark.clause("SUITE-2")
def test_first_difference_counts_a_pure_extension() -> None:
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference([1, 2], [1, 2]) is None


def recorded_demo(tmp_path: Path) -> Path:
    """A snapshot demo site whose snapshot is recorded (ids 1, 2, 3); its report base."""
    plugin_site(tmp_path, test_demo=SNAPSHOT_TEST)
    report = tmp_path / "r"
    first = run_pytest(
        ["--snapshot-update"], cwd=tmp_path, report_base=report, env={"DEMO_IDS": "1, 2, 3"}
    )
    assert first.returncode == 0, first.output
    return report


@pytest.mark.clause("SUITE-2")
def test_update_run_reports_the_changed_case(tmp_path: Path) -> None:
    report = recorded_demo(tmp_path)

    check = run_pytest([], cwd=tmp_path, report_base=report, env={"DEMO_IDS": "1, 7, 3, 4"})
    update = run_pytest(
        ["--snapshot-update"], cwd=tmp_path, report_base=report, env={"DEMO_IDS": "1, 7, 3, 4"}
    )

    assert check.returncode != 0
    assert "differ from the committed ones" in check.output
    assert "--snapshot-update" in check.output
    assert update.returncode == 0, update.output
    assert "snapshot drift summary" in update.output
    assert (
        "test_demo.py::test_case: tokens 3 -> 4, first difference at position 1 (id 2 -> 7)"
        in update.output
    )


@pytest.mark.clause("SUITE-2")
def test_a_run_split_over_xdist_workers_reports_the_changed_case(tmp_path: Path) -> None:
    report = recorded_demo(tmp_path)

    check = run_pytest(["-n", "2"], cwd=tmp_path, report_base=report, env={"DEMO_IDS": "1, 7, 3"})

    assert "bringing up nodes" in check.output, check.output[-3000:]  # xdist ran it
    assert check.returncode != 0
    assert "differ from the committed ones" in check.output, check.output[-3000:]
    assert (
        "test_demo.py::test_case: tokens 3 -> 3, first difference at position 1 (id 2 -> 7)"
        in check.output
    )


RENDERERS_TEST = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.mark.clause("SNP-1")
    def test_case(renderers_snapshot):
        renderers_snapshot("model: demo\\n  ids: [" + os.environ["DEMO_IDS"] + "]\\n")
    """
)


def _recorded(tmp_path: Path, version: str, ids: str) -> Path:
    snapshot = (
        tmp_path / RENDERED_DIRNAME / renderers_folder(version) / "test_demo" / "test_case.txt"
    )
    snapshot.parent.mkdir(parents=True)
    snapshot.write_text(f"model: demo\n  ids: [{ids}]\n")
    return snapshot


@pytest.mark.clause("SUITE-2")
def test_a_first_recording_for_a_renderers_release_drifts_against_the_previous_release(
    tmp_path: Path,
) -> None:
    plugin_site(tmp_path, test_demo=RENDERERS_TEST)
    older = _recorded(tmp_path, "0.0.1", "1, 2, 3")

    run = run_pytest(
        ["--snapshot-update"], cwd=tmp_path, report_base=tmp_path / "r", env={"DEMO_IDS": "1, 5"}
    )

    assert run.returncode == 0, run.output
    assert (
        "test_demo.py::test_case (against renderers-0.0.1): tokens 3 -> 2, first difference at "
        "position 1 (id 2 -> 5)"
    ) in run.output
    assert older.exists()  # the other release's folder is kept


@pytest.mark.clause("SNP-1")
def test_a_renderers_release_with_no_snapshots_is_refused_with_the_refresh_command(
    tmp_path: Path,
) -> None:
    plugin_site(tmp_path, test_demo=RENDERERS_TEST)
    _recorded(tmp_path, "0.0.1", "1, 2, 3")

    run = run_pytest([], cwd=tmp_path, report_base=tmp_path / "r", env={"DEMO_IDS": "1, 2, 3"})

    assert run.returncode != 0
    installed = installed_versions(("renderers",))["renderers"]
    assert f"No rendered-prompt snapshots are recorded for renderers {installed}" in run.output
    assert "(recorded: renderers-0.0.1)" in run.output
    assert "tox -e snapshots -- --snapshot-update" in run.output


@pytest.mark.clause("SNP-1")
def test_another_renderers_releases_snapshots_are_not_unused_in_a_run_over_xdist_workers(
    tmp_path: Path,
) -> None:
    # The xdist controller runs no assertion, so syrupy scans the test site with its default
    # extension: the other release's folder must be out of its sight.
    plugin_site(tmp_path, test_demo=RENDERERS_TEST)
    _recorded(tmp_path, installed_versions(("renderers",))["renderers"], "1, 2, 3")
    other = _recorded(tmp_path, "0.0.1", "1, 2")

    run = run_pytest(
        ["-n", "2"], cwd=tmp_path, report_base=tmp_path / "r", env={"DEMO_IDS": "1, 2, 3"}
    )

    assert "bringing up nodes" in run.output, run.output[-3000:]
    assert run.returncode == 0, run.output[-3000:]
    assert "unused" not in run.output
    assert other.exists()


@pytest.mark.clause("SUITE-2")
def test_the_baseline_of_a_new_release_is_the_newest_older_release(tmp_path: Path) -> None:
    for version in ("0.1.9", "0.1.10", "0.1.13"):
        _recorded(tmp_path, version, "1")
    new = tmp_path / RENDERED_DIRNAME / "renderers-0.1.12" / "test_demo" / "test_case.txt"

    baseline = earlier_version_snapshot(new)

    assert baseline is not None and baseline.parent.parent.name == "renderers-0.1.10"
    assert earlier_version_snapshot(tmp_path / "__snapshots__" / "test_demo" / "x.txt") is None


@pytest.mark.clause("SNP-2")
def test_snapshots_from_other_versions_are_refused_with_the_refresh_command() -> None:
    problem = version_mismatch(
        {"verifiers": "0.2.0", "renderers": "0.0.1"}, {"verifiers": "0.2.0", "renderers": "0.1.10"}
    )

    assert problem is not None
    assert "renderers 0.0.1 -> 0.1.10" in problem
    assert "tox -e snapshots -- --snapshot-update" in problem


@pytest.mark.clause("SNP-2")
def test_matching_versions_are_accepted_and_missing_ones_are_not() -> None:
    versions = {"verifiers": "0.2.0", "renderers": "0.1.10"}

    assert version_mismatch(versions, versions) is None
    assert "--snapshot-update" in (version_mismatch(None, versions) or "")


@pytest.mark.clause("SUITE-2")
def test_a_real_rendered_prompt_changed_on_purpose_is_reported(tmp_path: Path) -> None:
    # A copy of the suite whose committed qwen3 single-turn snapshot has one token altered.
    suite = tmp_path / "conformance"
    shutil.copytree(REPO_ROOT / "conformance", suite, ignore=shutil.ignore_patterns("__pycache__"))
    folder = (
        suite / RENDERED_DIRNAME / renderers_folder(installed_versions(("renderers",))["renderers"])
    )
    snapshot = next((folder / "test_render_snapshots").glob("*qwen3-single_turn*"))
    text = snapshot.read_text()
    ids = parse_ids(text)
    snapshot.write_text(text.replace(f"ids: [{ids[0]}, {ids[1]},", f"ids: [{ids[0]}, 99999,", 1))

    run = run_pytest(
        ["conformance/test_render_snapshots.py", "-k", "qwen3-single_turn", "--snapshot-update"],
        cwd=tmp_path,
        report_base=tmp_path / "r",
    )

    assert run.returncode == 0, run.output
    assert (
        f"[qwen3-single_turn]: tokens {len(ids)} -> {len(ids)}, first difference at position 1 "
        f"(id 99999 -> {ids[1]})"
    ) in run.output
