"""The ``miles-verifiers`` entry point: each subcommand module registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from miles_verifiers.cli.kit import add_kit_only, find_kit

# Modules that expose ``register(subparsers)``; the test kit, when installed, adds its own.
SUBCOMMAND_MODULES: tuple[str, ...] = ("miles_verifiers.cli.check_command",)
# Kit commands the README teaches: without the kit they stay listed and say what to install.
KIT_COMMANDS: dict[str, str] = {
    "rollout": "run Miles training rollouts (and evals) through the Verifiers rollout function",
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="miles-verifiers",
        description="Train Miles on Verifiers V1 environments, and check that it works.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    kit = find_kit()
    kit_modules = kit.subcommand_modules if kit is not None else ()
    for module_name in (*SUBCOMMAND_MODULES, *kit_modules):
        importlib.import_module(module_name).register(subparsers)
    if kit is None:
        for name, help in KIT_COMMANDS.items():
            add_kit_only(subparsers, name, help=help)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(words)
    args.command_line = words  # as typed, for the resume command an interrupted run prints
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
