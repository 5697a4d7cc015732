"""``--config``: a Verifiers TOML path, or the name of a fixture config shipped in the package.

Fixture configs live in ``miles_verifiers.fixtures`` as ``configs/<name>.toml`` with
underscores (``mv_arith.toml``); they are named on the command line like their tasksets,
with dashes (``mv-arith``). Either spelling is accepted.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from miles_verifiers.errors import CommandLineError

FIXTURE_PACKAGE = "miles_verifiers.fixtures"
FIXTURE_CONFIG_DIR = "configs"


class ConfigNameError(CommandLineError, ValueError):
    """``--config`` is neither a TOML path nor a known fixture config name."""


def fixture_config_dir() -> Path:
    # The package is installed unpacked (setuptools), so its data files are real paths that
    # can be handed to VERIFIERS_CONFIG as they are.
    return Path(str(importlib.resources.files(FIXTURE_PACKAGE) / FIXTURE_CONFIG_DIR))


def fixture_config_names() -> list[str]:
    """The fixture configs, by command-line name (``mv-arith``, ...), sorted."""
    directory = fixture_config_dir()
    if not directory.is_dir():
        return []
    return sorted(path.stem.replace("_", "-") for path in directory.glob("*.toml"))


def _looks_like_path(value: str) -> bool:
    return value.lower().endswith(".toml") or "/" in value or "\\" in value or value.startswith(".")


def resolve_config(value: str) -> Path:
    """The absolute config path for a ``--config`` value.

    Anything that looks like a path (a ``.toml`` suffix or a directory separator) is taken as
    one, made absolute but not checked here: the adapter's own config loading reports a
    missing or malformed file with its fix. Anything else must be a fixture name.
    """
    text = value.strip()
    if not text:
        raise ConfigNameError(
            "--config is empty. Fix: pass a Verifiers .toml path or a fixture config name "
            f"({', '.join(fixture_config_names()) or 'none installed'})."
        )
    if _looks_like_path(text):
        return Path(text).expanduser().absolute()
    candidate = fixture_config_dir() / f"{text.replace('-', '_')}.toml"
    if candidate.is_file():
        return candidate
    names = fixture_config_names()
    raise ConfigNameError(
        f"--config {text!r} is not a fixture config name and not a .toml path. Fix: pass "
        f"one of {', '.join(names) if names else '(no fixture configs are installed)'}, or "
        "the path of a Verifiers .toml config."
    )
