"""The ``miles-verifiers`` command line.

Each subcommand lives next to the code it drives and registers itself here, so this file
only wires them together.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that expose ``register(subparsers)``; imported lazily so that ``--help`` stays fast
# and a subcommand's heavy imports (transformers, verifiers) load only when it runs.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "miles_verifiers.runner.rollout_command",
    "miles_verifiers.runner.check_command",
    "miles_verifiers.runner.demo_command",
    "miles_verifiers.fixtures.tokenizers.cli",
    "miles_verifiers.fixtures.engine.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="miles-verifiers",
        description="Train Miles on Verifiers V1 environments, and check that it works.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
