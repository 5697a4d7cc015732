"""The embedded test kit, found at run time, never imported by name.

Runs without ``--engine-url`` need a loopback engine, offline tokenizers and fixture
tasksets. Those live in a separate distribution (the test kit), so that installing the
adapter into a Miles job installs the adapter only. The kit announces itself through the
``miles_verifiers.kit`` entry point; the command line asks for it here and, when it is not
installed, says how to get it or how to do without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping
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

    def serve_engine(self, model: str) -> contextlib.AbstractContextManager[str]:
        """A loopback engine serving ``model`` for the ``with`` block; yields its base URL."""
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


def require_kit(purpose: str) -> EmbeddedKit:
    """The installed kit, or an error saying that ``purpose`` needs it and what to do."""
    kit = find_kit()
    if kit is None:
        raise KitMissingError(f"{purpose} needs the embedded test kit. Fix: {INSTALL_HINT}.")
    return kit


@contextlib.contextmanager
def embedded_engine(model: str) -> Iterator[str]:
    """The kit's loopback engine for ``model``; yields its base URL."""
    kit = require_kit("running without --engine-url (the embedded loopback engine)")
    with kit.serve_engine(model) as base_url:
        yield base_url
