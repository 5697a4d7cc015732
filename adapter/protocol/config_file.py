"""The ``VERIFIERS_CONFIG`` file: the trainer side reads it and sends its text across, the
episode side parses that text; both raise the same errors, each naming the variable and a fix.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from miles_verifiers.errors import SetupError

CONFIG_ENV_VAR = "VERIFIERS_CONFIG"


class ConfigError(SetupError, ValueError):
    """A problem with the Verifiers config or taskset; ``field`` names what to change."""

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        self.field = field
        self.fix = fix
        super().__init__(f"{message} Fix: {fix}")


class ConfigPathError(ConfigError):
    """``VERIFIERS_CONFIG`` is unset, or points at something that is not a TOML file."""


class ConfigSyntaxError(ConfigError):
    """The config file is not valid TOML."""


def config_path_from_env(environ: Mapping[str, str] | None = None) -> Path:
    """The config path from ``VERIFIERS_CONFIG``, made absolute against the working directory."""
    env = os.environ if environ is None else environ
    raw = (env.get(CONFIG_ENV_VAR) or "").strip()
    if not raw:
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR} is not set, so there is no Verifiers config to load. The rollout "
            "function runs inside Miles' RolloutManager (a Ray actor), which sees only the "
            "environment Ray hands it.",
            field=CONFIG_ENV_VAR,
            fix=f"set {CONFIG_ENV_VAR}=/abs/path/to/env.toml where the rollout manager runs: "
            "in Ray's runtime_env env_vars for the job, or in the environment of every Ray "
            "node before it starts.",
        )
    return Path(raw).expanduser().absolute()


def parse_config_text(text: str, path: Path) -> dict[str, Any]:
    """Parse TOML text; ``path`` only labels the error."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigSyntaxError(
            f"{CONFIG_ENV_VAR} file {path} is not valid TOML: {error}.",
            field=CONFIG_ENV_VAR,
            fix="correct the TOML at the position shown (strings need quotes, tables use "
            "[section] headers).",
        ) from error


def read_config_file(path: Path) -> dict[str, Any]:
    """Read and parse the config file at ``path``."""
    if path.suffix.lower() != ".toml":
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR}={path} does not name a .toml file; Verifiers configs are TOML.",
            field=CONFIG_ENV_VAR,
            fix=f"point {CONFIG_ENV_VAR} at the environment's .toml config.",
        )
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR}={path} {what} (as seen from {os.getcwd()}, the working "
            "directory of this process).",
            field=CONFIG_ENV_VAR,
            fix="use an absolute path to an existing file, readable on the machine that runs "
            "the rollout manager.",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR} file {path} cannot be read: {error}.",
            field=CONFIG_ENV_VAR,
            fix="make the file readable UTF-8 text.",
        ) from error
    return parse_config_text(text, path)
