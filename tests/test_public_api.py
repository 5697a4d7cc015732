"""The public surface: what Miles and users may import from miles_verifiers, and nothing else."""

from __future__ import annotations

import ast
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import miles_verifiers

ROOT = Path(__file__).resolve().parents[1]

# Miles loads the first two by --rollout-function-path; the rest are for users.
PUBLIC = {
    "VerifiersRolloutFn",
    "generate_rollout",
    "AdapterSettings",
    "MilesVerifiersError",
    "SetupError",
    "RolloutCallError",
    "EngineError",
    "CommandLineError",
    "__version__",
}


def test_the_package_exports_exactly_the_public_names() -> None:
    assert set(miles_verifiers.__all__) == PUBLIC


def test_every_public_name_imports() -> None:
    for name in PUBLIC:
        assert getattr(miles_verifiers, name) is not None


def test_the_top_level_shows_the_two_sides_and_the_seam() -> None:
    names = {info.name for info in pkgutil.iter_modules(miles_verifiers.__path__)}

    assert names == {
        "trainer",  # Miles' process
        "protocol",  # what crosses the seam
        "episodes",  # wherever the episodes run
        "engine",  # what SGLang accepts, as both sides read it
        "cli",  # the miles-verifiers command
        "errors",
        "versions",
        "owned_tasks",
    }


def test_the_readme_documents_every_public_name() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Public API", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"`(\w+)`", section))

    assert PUBLIC - {"__version__"} <= documented


def loaded_after(code: str, names: set[str]) -> list[str]:
    """Which of ``names`` (top-level packages) a fresh interpreter has imported after ``code``."""
    script = f"import sys; {code}; print(sorted({{m.partition('.')[0] for m in sys.modules}} & {names!r}))"
    result = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True, timeout=120
    )
    return ast.literal_eval(result.stdout.strip())


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    assert (
        loaded_after("import miles_verifiers", {"verifiers", "renderers", "transformers", "httpx"})
        == []
    )


def test_the_entry_point_miles_loads_imports_nothing_episodes_run_on() -> None:
    episode_side = {"verifiers", "renderers", "transformers", "openai", "mcp"}

    assert (
        loaded_after("import miles_verifiers; miles_verifiers.VerifiersRolloutFn", episode_side)
        == []
    )
