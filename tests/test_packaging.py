"""What the two distributions ship: the adapter alone in miles-verifiers, the test kit in
miles-verifiers-testkit, and every package folder listed where it belongs."""

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
    assert _listed(ROOT / "pyproject.toml") == _package_folders(
        ROOT / "adapter", "miles_verifiers"
    )


def test_every_test_kit_package_folder_is_listed_for_its_wheel() -> None:
    assert _listed(ROOT / "fixtures" / "pyproject.toml") == _package_folders(
        ROOT / "fixtures", "miles_verifiers_testkit"
    )


@pytest.fixture(scope="module")
def adapter_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    # Build from a clean copy: a build/ folder left in the checkout would leak old files in.
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(ROOT / "adapter", source / "adapter", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "--wheel-dir", str(out), str(source)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = out.glob("miles_verifiers-*.whl")
    return zipfile.ZipFile(wheel)


def test_the_adapter_wheel_holds_no_test_kit_code(adapter_wheel: zipfile.ZipFile) -> None:
    names = adapter_wheel.namelist()
    code = [n for n in names if n.endswith(".py")]

    assert code and all(n.startswith("miles_verifiers/") for n in code)
    assert not [n for n in names if "testkit" in n or "fixtures" in n or n.endswith(".toml")]


def test_nothing_in_the_adapter_wheel_imports_the_test_kit(adapter_wheel: zipfile.ZipFile) -> None:
    offenders = [
        name
        for name in adapter_wheel.namelist()
        if name.endswith(".py") and b"miles_verifiers_testkit" in adapter_wheel.read(name)
    ]

    assert offenders == []


def test_the_adapter_wheel_is_marked_as_typed(adapter_wheel: zipfile.ZipFile) -> None:
    assert "miles_verifiers/py.typed" in adapter_wheel.namelist()
