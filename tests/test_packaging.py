"""What the three distributions ship: the adapter alone in miles-verifiers, the test kit in
miles-verifiers-testkit, the conformance suite (a pytest plugin) in
miles-verifiers-conformance, and every package folder listed where it belongs."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _package_folders(folder: Path, name: str) -> set[str]:
    found = {name}
    for init in folder.rglob("__init__.py"):
        rel = init.parent.relative_to(folder)
        # Skipped: the taskset distributions, and what builds and caches leave behind.
        if rel.parts and not {"environments", "build", "__pycache__"} & set(rel.parts):
            found.add(".".join([name, *rel.parts]))
    return found


def _listed(pyproject: Path) -> set[str]:
    return set(tomllib.loads(pyproject.read_text())["tool"]["setuptools"]["packages"])


def test_every_adapter_package_folder_is_listed_for_the_wheel() -> None:
    assert _listed(ROOT / "pyproject.toml") == _package_folders(ROOT / "adapter", "miles_verifiers")


def test_every_test_kit_package_folder_is_listed_for_its_wheel() -> None:
    assert _listed(ROOT / "fixtures" / "pyproject.toml") == _package_folders(
        ROOT / "fixtures", "miles_verifiers_testkit"
    )


def test_every_conformance_package_folder_is_listed_for_its_wheel() -> None:
    assert _listed(ROOT / "conformance" / "pyproject.toml") == _package_folders(
        ROOT / "conformance", "miles_verifiers_conformance"
    )


def _build_wheel(source: Path, out: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--wheel-dir",
            str(out),
            str(source),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def conformance_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    source = tmp_path_factory.mktemp("conformance-source") / "conformance"
    shutil.copytree(
        ROOT / "conformance",
        source,
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"),
    )
    out = tmp_path_factory.mktemp("conformance-wheel")
    _build_wheel(source, out)
    (wheel,) = out.glob("miles_verifiers_conformance-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_conformance_wheel_registers_the_suite_as_a_pytest_plugin(
    conformance_wheel: zipfile.ZipFile,
) -> None:
    (entry_points,) = [n for n in conformance_wheel.namelist() if n.endswith("entry_points.txt")]
    text = conformance_wheel.read(entry_points).decode()

    assert "[pytest11]" in text
    assert "miles_verifiers_conformance.entry_point" in text


def test_the_conformance_wheel_ships_its_snapshots_clause_table_selftests_and_contract(
    conformance_wheel: zipfile.ZipFile,
) -> None:
    names = set(conformance_wheel.namelist())
    package = "miles_verifiers_conformance/"
    committed = [
        p.relative_to(ROOT / "conformance").as_posix()
        for folder in ("__snapshots__", "__rendered_prompts__")
        for p in (ROOT / "conformance" / folder).rglob("*")
        if p.is_file()
    ]

    assert any("__rendered_prompts__" in name for name in committed)
    assert committed and {package + name for name in committed} <= names
    for shipped in ("clauses.py", "conftest.py", "selftest/doubles.py", "ADAPTER_CONTRACT.md"):
        assert package + shipped in names


@pytest.fixture(scope="module")
def adapter_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # Build from a clean copy: a build/ folder left in the checkout would leak old files in.
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(
        ROOT / "adapter", source / "adapter", ignore=shutil.ignore_patterns("__pycache__")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    _build_wheel(source, out)
    (wheel,) = out.glob("miles_verifiers-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_adapter_wheel_holds_no_test_kit_code(adapter_wheel: zipfile.ZipFile) -> None:
    names = adapter_wheel.namelist()
    code = [n for n in names if n.endswith(".py")]

    assert code and all(n.startswith("miles_verifiers/") for n in code)
    assert not [n for n in names if "testkit" in n or "fixtures" in n or n.endswith(".toml")]


def test_the_adapter_wheel_holds_no_conformance_code(adapter_wheel: zipfile.ZipFile) -> None:
    names = adapter_wheel.namelist()

    assert not [n for n in names if "conformance" in n or "snapshots__" in n or "prompts__" in n]
    assert not [
        n
        for n in names
        if n.endswith(".py") and b"miles_verifiers_conformance" in adapter_wheel.read(n)
    ]


def test_nothing_in_the_adapter_wheel_imports_the_test_kit(adapter_wheel: zipfile.ZipFile) -> None:
    offenders = [
        name
        for name in adapter_wheel.namelist()
        if name.endswith(".py") and b"miles_verifiers_testkit" in adapter_wheel.read(name)
    ]

    assert offenders == []


def test_the_adapter_wheel_is_marked_as_typed(adapter_wheel: zipfile.ZipFile) -> None:
    assert "miles_verifiers/py.typed" in adapter_wheel.namelist()
