"""The embedded test kit, found at run time, never imported by name.

The dry-run trainer (``rollout``, ``demo``), the loopback engine, offline tokenizers and
fixture tasksets live in a separate distribution (the test kit), so that installing the
adapter into a Miles job installs the adapter only. The kit announces itself through the
``miles_verifiers.kit`` entry point; the command line asks for it here and, when it is not
installed, says how to get it or how to do without it.
"""

from __future__ import annotations

import argparse
import functools
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


class KitMissingError(CommandLineError, LookupError):
    """Something needs the embedded test kit, and it is not installed."""


@runtime_checkable
class EmbeddedKit(Protocol):
    """What the command line uses from the test kit."""

    @property
    def model_ids(self) -> tuple[str, ...]:
        """Models whose tokenizers the kit builds offline and whose engine it can embed."""
        ...

    @property
    def config_dir(self) -> Path:
        """Folder of the fixture taskset configs (``<name>.toml``)."""
        ...

    @property
    def subcommand_modules(self) -> tuple[str, ...]:
        """Modules exposing ``register(subparsers)`` for the kit's own subcommands."""
        ...

    def prepare_tokenizers(self, environ: MutableMapping[str, str]) -> None:
        """Build the offline tokenizers (cached) and point Hugging Face at them in ``environ``."""
        ...


def find_kit() -> EmbeddedKit | None:
    """The installed kit, or None. A broken kit raises: it should not pass silently."""
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda point: point.name)
    if not found:
        return None
    kit = found[0].load()
    if not isinstance(kit, EmbeddedKit):
        raise KitMissingError(
            f"the {ENTRY_POINT_GROUP} entry point {found[0].value!r} is not a usable kit. "
            f"Fix: reinstall it ({INSTALL_HINT})."
        )
    return kit


def add_kit_only(subparsers: argparse._SubParsersAction, name: str, *, help: str) -> None:
    """``name`` as a subcommand that only says the kit provides it: whatever follows it on
    the command line, running it fails with the install hint (exit 2)."""
    parser = subparsers.add_parser(name, help=f"{help} (with the test kit)", add_help=False)
    parser.set_defaults(handler=functools.partial(_needs_kit, name))
    parse_known_args = parser.parse_known_args

    def parse_nothing(
        args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        return parse_known_args([], namespace)  # the real command reads these words

    parser.parse_known_args = parse_nothing


def _needs_kit(name: str, cli: argparse.Namespace) -> int:
    error = KitMissingError(f"{name} comes with the embedded test kit. Fix: {INSTALL_HINT}.")
    sys.stderr.write(f"miles-verifiers {name}: error: {error}\n")
    return 2
