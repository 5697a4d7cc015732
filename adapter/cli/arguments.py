"""The command-line surface shared by ``check`` and the kit's ``rollout`` and ``demo``: a
sub-parser with the runner's options, the typed Miles flags and the passthrough, and its
reading into a config path (``--config``: a Verifiers TOML path, or a fixture config's name,
``mv-arith`` or ``mv_arith``) and the Miles namespace."""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from miles_verifiers.cli.flags import (
    EXTRA_FLAGS_DEST,
    EXTRA_FLAGS_OPTION,
    PASSTHROUGH_DEST,
    accept_passthrough,
    add_miles_arguments,
    given_miles_flags,
    parse_passthrough,
)
from miles_verifiers.cli.kit import find_kit, fixture_config_names, is_fixture_model
from miles_verifiers.cli.loading import DEFAULT_ROLLOUT_FUNCTION
from miles_verifiers.cli.namespace import build_namespace
from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR
from miles_verifiers.errors import CommandLineError


class ConfigNameError(CommandLineError, ValueError):
    """``--config`` is neither a TOML path nor a known fixture config name."""


def new_subparser(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, description: str
) -> argparse.ArgumentParser:
    """A sub-command parser with the shared options and Miles passthrough."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=description,
        usage="%(prog)s [options] [--other-miles-flag [VALUE ...] ...]",
        allow_abbrev=False,  # an unknown flag must never be read as a known one's prefix
    )
    accept_passthrough(parser)
    runner = parser.add_argument_group("runner options")
    runner.add_argument(
        "--config",
        default=None,
        help="Verifiers V1 TOML config, or a fixture config name "
        f"({', '.join(fixture_config_names())}); default: ${CONFIG_ENV_VAR}",
    )
    runner.add_argument(
        "--no-fixture-tokenizers",
        dest="fixture_tokenizers",
        action="store_false",
        help="do not build and use the offline fixture tokenizers for fixture model ids "
        "(the Hugging Face cache and network settings are then left alone)",
    )
    runner.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    runner.add_argument(
        EXTRA_FLAGS_OPTION,
        dest=EXTRA_FLAGS_DEST,
        action="append",
        default=None,
        metavar="NAME",
        help="let --NAME through although this Miles-flag list does not know it (a flag of a "
        "newer Miles); repeat for each such flag. Any other unknown flag is an error.",
    )
    add_miles_arguments(parser)
    return parser


def resolve_config(value: str) -> Path:
    """The absolute config path for a ``--config`` value. A path is not checked here: the
    adapter's config loading reports a missing or malformed file with its fix."""
    text = value.strip()
    if not text:
        raise ConfigNameError(
            "--config is empty. Fix: pass a Verifiers .toml path or a fixture config name "
            f"({', '.join(fixture_config_names()) or 'none installed'})."
        )
    if text.lower().endswith(".toml") or "/" in text or "\\" in text or text.startswith("."):
        return Path(text).expanduser().absolute()
    kit = find_kit()
    candidate = None if kit is None else kit.config_dir / f"{text.replace('-', '_')}.toml"
    if candidate is not None and candidate.is_file():
        return candidate
    names = fixture_config_names()
    raise ConfigNameError(
        f"--config {text!r} is not a fixture config name and not a .toml path. Fix: pass "
        f"one of {', '.join(names) if names else '(no fixture configs are installed)'}, or "
        "the path of a Verifiers .toml config."
    )


def resolve_config_option(cli: argparse.Namespace) -> Path | None:
    """The ``--config`` path, or None to leave ``VERIFIERS_CONFIG`` as the environment has it."""
    value = getattr(cli, "config", None)
    return resolve_config(value) if value else None


def cli_namespace(
    cli: argparse.Namespace,
    config_path: Path | None,
    preset: Mapping[str, Any] | None = None,
) -> argparse.Namespace:
    """The Miles namespace for this command line (raises on unreadable passthrough flags)."""
    passthrough = parse_passthrough(getattr(cli, PASSTHROUGH_DEST, None) or [])
    placeholder = config_path or _env_config_path()
    return build_namespace(
        given_miles_flags(cli), passthrough, config_path=placeholder, preset=preset
    )


def _env_config_path() -> Path | None:
    raw = os.environ.get(CONFIG_ENV_VAR, "").strip()
    return Path(raw) if raw else None


def rollout_function_path(args: argparse.Namespace) -> str:
    return getattr(args, "rollout_function_path", None) or DEFAULT_ROLLOUT_FUNCTION


def wants_fixture_tokenizers(cli: argparse.Namespace, args: argparse.Namespace) -> bool:
    """Use the offline fixture tokenizers when the run's tokenizer is one of the fixture models
    (unless the user opted out)."""
    source = getattr(args, "sglang_tokenizer_path", None) or args.hf_checkpoint
    return bool(getattr(cli, "fixture_tokenizers", True)) and is_fixture_model(source)


@contextlib.contextmanager
def verifiers_config(path: Path | None) -> Iterator[None]:
    """Set ``VERIFIERS_CONFIG`` for the block (left as it is when ``path`` is None)."""
    if path is None:
        yield
        return
    previous = os.environ.get(CONFIG_ENV_VAR)
    os.environ[CONFIG_ENV_VAR] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CONFIG_ENV_VAR, None)
        else:
            os.environ[CONFIG_ENV_VAR] = previous
