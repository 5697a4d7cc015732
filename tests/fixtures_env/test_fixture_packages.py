"""The taskset packages are laid out the way `prime env install` and Verifiers' loaders expect."""

import importlib.metadata
import tomllib
from pathlib import Path

import pytest
import verifiers.v1 as vf
from verifiers.v1.loaders import harness_class, taskset_class

from miles_verifiers_testkit.harness import FixtureHarness

ENV_ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "environments"
MODULES = sorted(p.name for p in ENV_ROOT.iterdir() if (p / "pyproject.toml").exists())


def test_all_seven_tasksets_are_packaged():
    assert MODULES == [
        "mv_arith",
        "mv_compact",
        "mv_dialogue",
        "mv_faulty",
        "mv_group",
        "mv_longprompt",
        "mv_tools",
    ]


@pytest.mark.parametrize("module", MODULES)
def test_package_is_named_with_dashes_and_imports_with_underscores(module):
    project = tomllib.loads((ENV_ROOT / module / "pyproject.toml").read_text())
    assert project["project"]["name"] == module.replace("_", "-")
    assert project["tool"]["setuptools"]["packages"] == [module]
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"
    assert (ENV_ROOT / module / module / "__init__.py").exists()


@pytest.mark.parametrize("module", MODULES)
def test_package_depends_on_verifiers_and_miles_verifiers(module):
    project = tomllib.loads((ENV_ROOT / module / "pyproject.toml").read_text())
    names = {
        dep.split("=")[0].split("<")[0].split(">")[0].strip()
        for dep in project["project"]["dependencies"]
    }
    assert names == {"verifiers", "miles-verifiers"}


@pytest.mark.parametrize("module", MODULES)
def test_installed_package_matches_the_source_tree(module):
    dist = importlib.metadata.distribution(module.replace("_", "-"))
    installed = {
        f.name: Path(dist.locate_file(f)).read_text() for f in dist.files if f.suffix == ".py"
    }
    source = {p.name: p.read_text() for p in (ENV_ROOT / module / module).glob("*.py")}
    assert installed == source, (
        f"the installed {module} is stale; reinstall it with "
        f"pip install --no-deps ./fixtures/environments/{module}"
    )


@pytest.mark.parametrize("module", MODULES)
def test_taskset_id_resolves_to_one_taskset_with_the_fixture_harness_as_default(module):
    taskset_id = module.replace("_", "-")
    assert issubclass(taskset_class(taskset_id), vf.Taskset)
    assert vf.default_harness_id(taskset_id) == taskset_id
    assert issubclass(harness_class(taskset_id), FixtureHarness)
