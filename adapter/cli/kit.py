"""The test kit (dry-run trainer, loopback engine, offline tokenizers, fixture tasksets), found
through its ``miles_verifiers.kit`` entry point and never imported by name: installing the
adapter into a Miles job installs the adapter only. :func:`use_fixture_tokenizers` must run
before anything imports Hugging Face libraries, which read where tokenizers live on import.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import MutableMapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Protocol, runtime_checkable

from miles_verifiers.errors import CommandLineError

ENTRY_POINT_GROUP = "miles_verifiers.kit"
INSTALL_HINT = (
    "install the test kit (pip install miles-verifiers-testkit, or pip install ./fixtures "
    "from a checkout)"
)


@runtime_checkable
class EmbeddedKit(Protocol):
    """What the command line uses from the test kit."""

    model_ids: tuple[str, ...]  # models whose tokenizers the kit builds offline
    config_dir: Path  # the fixture configs' folder
    subcommand_modules: tuple[str, ...]  # modules exposing register(subparsers)

    def prepare_tokenizers(self, environ: MutableMapping[str, str]) -> None: ...


def find_kit() -> EmbeddedKit | None:
    """The installed kit, or None. A broken kit raises: it should not pass silently."""
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda point: point.name)
    if not found:
        return None
    kit = found[0].load()
    if not isinstance(kit, EmbeddedKit):
        raise CommandLineError(
            f"the {ENTRY_POINT_GROUP} entry point {found[0].value!r} is not a usable kit. "
            f"Fix: reinstall it ({INSTALL_HINT})."
        )
    return kit


def add_kit_only(subparsers: argparse._SubParsersAction, name: str, *, help: str) -> None:
    """``name`` as a subcommand that, whatever follows it, fails with the install hint (exit 2)."""
    parser = subparsers.add_parser(name, help=f"{help} (with the test kit)", add_help=False)
    parser.set_defaults(handler=functools.partial(_needs_kit, name))
    parse_known_args = parser.parse_known_args

    def parse_nothing(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return parse_known_args([], namespace)  # the real command reads these words

    parser.parse_known_args = parse_nothing


def _needs_kit(name: str, cli: argparse.Namespace) -> int:
    message = f"{name} comes with the embedded test kit. Fix: {INSTALL_HINT}."
    sys.stderr.write(f"miles-verifiers {name}: error: {message}\n")
    return 2


def fixture_config_names() -> list[str]:
    """The kit's fixture configs by command-line name: ``configs/mv_arith.toml`` is ``mv-arith``."""
    kit = find_kit()
    if kit is None or not kit.config_dir.is_dir():
        return []
    return sorted(path.stem.replace("_", "-") for path in kit.config_dir.glob("*.toml"))


def is_fixture_model(model: str | None) -> bool:
    """Whether the test kit builds ``model``'s tokenizer offline (never without the kit)."""
    kit = find_kit()
    return kit is not None and model in kit.model_ids


def use_fixture_tokenizers(environ: MutableMapping[str, str] | None = None) -> None:
    """Build the kit's offline tokenizers (cached) and point Hugging Face at them."""
    kit = find_kit()
    if kit is not None:
        kit.prepare_tokenizers(os.environ if environ is None else environ)
