"""The public surface: what Miles and users may import from miles_verifiers, and nothing else."""

from __future__ import annotations

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


def test_importing_the_package_loads_no_heavy_dependency() -> None:
    code = (
        "import sys, miles_verifiers; "
        "print(sorted(m for m in ('verifiers', 'renderers', 'transformers', 'httpx') "
        "if m in sys.modules))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )

    assert result.stdout.strip() == "[]"


def test_the_entry_point_miles_loads_imports_nothing_episodes_run_on() -> None:
    code = (
        "import sys, miles_verifiers; miles_verifiers.VerifiersRolloutFn; "
        "print(sorted({m.partition('.')[0] for m in sys.modules} & "
        "{'verifiers', 'renderers', 'transformers', 'openai', 'mcp'}))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )

    assert result.stdout.strip() == "[]"
