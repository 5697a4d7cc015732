"""``--config``: a Verifiers TOML path, or the name of a test-kit fixture config.

The kit's ``configs/mv_arith.toml`` is named like its taskset, ``mv-arith`` (either spelling
works); without the kit only paths are accepted.
"""

from __future__ import annotations

from pathlib import Path

from miles_verifiers.cli.kit import find_kit
from miles_verifiers.errors import CommandLineError


class ConfigNameError(CommandLineError, ValueError):
    """``--config`` is neither a TOML path nor a known fixture config name."""


def _fixture_config_dir() -> Path | None:
    kit = find_kit()
    return kit.config_dir if kit is not None else None


def fixture_config_names() -> list[str]:
    """The fixture configs, by command-line name (``mv-arith``, ...), sorted."""
    directory = _fixture_config_dir()
    if directory is None or not directory.is_dir():
        return []
    return sorted(path.stem.replace("_", "-") for path in directory.glob("*.toml"))


def _looks_like_path(value: str) -> bool:
    return value.lower().endswith(".toml") or "/" in value or "\\" in value or value.startswith(".")


def resolve_config(value: str) -> Path:
    """The absolute config path for a ``--config`` value. A path is not checked here: the
    adapter's config loading reports a missing or malformed file with its fix."""
    text = value.strip()
    if not text:
        raise ConfigNameError(
            "--config is empty. Fix: pass a Verifiers .toml path or a fixture config name "
            f"({', '.join(fixture_config_names()) or 'none installed'})."
        )
    if _looks_like_path(text):
        return Path(text).expanduser().absolute()
    directory = _fixture_config_dir()
    candidate = None if directory is None else directory / f"{text.replace('-', '_')}.toml"
    if candidate is not None and candidate.is_file():
        return candidate
    names = fixture_config_names()
    raise ConfigNameError(
        f"--config {text!r} is not a fixture config name and not a .toml path. Fix: pass "
        f"one of {', '.join(names) if names else '(no fixture configs are installed)'}, or "
        "the path of a Verifiers .toml config."
    )
