"""The suite as an installed pytest plugin: the ``pytest11`` entry point of its distribution.

Once ``miles-verifiers-conformance`` is installed, pytest loads this module in every run, so
the suite's options exist wherever it is run from::

    pytest --pyargs miles_verifiers_conformance --adapter pkg.mod:RolloutFn --replacement-error pkg.mod:Err

The options, the ``clause`` marker, the report and the snapshots are ``plugin.py``'s. This
module adds what a run outside this repository lacks (here the root conftest does it):

- the offline tokenizers and their environment, prepared when the first file of the suite is
  collected (not at start-up: the plugin is loaded in unrelated pytest runs too, and must not
  switch Hugging Face offline there);
- a usage error, before any test runs, when ``--adapter`` or ``--replacement-error`` cannot be
  imported, saying what to pass, instead of one set-up error per test.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

# Re-exported so pytest registers them for the installed plugin. conftest.py re-exports them
# too; plugin.py adds its options only once, whichever registration comes first.
from miles_verifiers_conformance.plugin import (  # noqa: F401
    DEFAULT_ADAPTER,
    DEFAULT_REPLACEMENT_ERROR,
    pytest_addoption,
    pytest_configure,
)

SUITE_DIR = Path(__file__).resolve().parent
_PREPARED = pytest.StashKey[bool]()
# option -> what it must name, for the error message.
_IMPORTED_OPTIONS = {
    "--adapter": "your rollout function class, or your legacy generate_rollout function",
    "--replacement-error": "the exception class your adapter raises when it runs out of "
    "group replacements",
}


def in_suite(path: Path) -> bool:
    return path.resolve().is_relative_to(SUITE_DIR)


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> None:
    config = parent.config
    if file_path.suffix != ".py" or config.stash.get(_PREPARED, False) or not in_suite(file_path):
        return
    config.stash[_PREPARED] = True
    # Before any test module imports huggingface_hub or transformers: they read these at import.
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    os.environ.update(offline_environ())
    build_all()


_DEFAULTS = {"--adapter": DEFAULT_ADAPTER, "--replacement-error": DEFAULT_REPLACEMENT_ERROR}


def import_problem(spec: str, option: str) -> str | None:
    """Why ``spec`` (``module:attribute``) cannot be loaded for ``option``, or None."""
    module_name, _, attribute = spec.partition(":")
    fix = (
        f"Pass {option} MODULE:ATTRIBUTE naming {_IMPORTED_OPTIONS.get(option, 'the object')}, "
        "importable in this environment."
    )
    if spec == _DEFAULTS.get(option):
        fix = f"{option} was not given and its default is this project's own adapter. {fix}"
    if not module_name or not attribute:
        return f"{option} {spec!r} is not of the form MODULE:ATTRIBUTE. {fix}"
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return f"{option} {spec!r}: module {module_name!r} cannot be imported ({exc}). {fix}"
    if not hasattr(module, attribute):
        return f"{option} {spec!r}: module {module_name!r} has no attribute {attribute!r}. {fix}"
    return None


# First, so that a usage error stops the run before the reporter records anything to write.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    # Only a run that selected tests of the suite needs the adapter.
    if not any(in_suite(Path(item.path)) for item in session.items):
        return
    problems = [
        problem
        for option in _IMPORTED_OPTIONS
        if (problem := import_problem(str(session.config.getoption(option)), option))
    ]
    if problems:
        raise pytest.UsageError("\n".join(problems))
