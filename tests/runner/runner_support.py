"""Shared helpers for the runner tests."""

from __future__ import annotations

import argparse
import contextlib
import io
from collections.abc import Sequence

from miles_verifiers.cli import check_command
from miles_verifiers_testkit import demo_command
from miles_verifiers_testkit.runner import rollout_command


def build_parser() -> argparse.ArgumentParser:
    """A fresh ``miles-verifiers`` parser with the runner's sub-commands registered."""
    parser = argparse.ArgumentParser(prog="miles-verifiers")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for module in (rollout_command, check_command, demo_command):
        module.register(subparsers)
    return parser


def run_command(argv: Sequence[str]) -> tuple[int, str, str]:
    """Parse and run one command in-process; returns (exit code, stdout, stderr)."""
    namespace = build_parser().parse_args(list(argv))
    namespace.command_line = list(argv)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = namespace.handler(namespace)
    return int(code), out.getvalue(), err.getvalue()


# -- stand-ins for a user's rollout function, to observe how the runner calls one -----------


class CallOrderProbe:
    """A class-style rollout function that records when and where it is called.

    Instances register themselves in :data:`PROBES` so a test can inspect the one the runner
    built. Returns empty outputs of the run's contract types.
    """

    def __init__(self, constructor_input: object) -> None:
        from miles_verifiers.trainer.contract.compat import contract

        self.types = contract()
        self.args = constructor_input.args  # type: ignore[attr-defined]
        self.data_source = constructor_input.data_source  # type: ignore[attr-defined]
        self.router_at_construction = (self.args.sglang_router_ip, self.args.sglang_router_port)
        self.calls: list[tuple[str, int, tuple[object, object], int, int]] = []
        PROBES.append(self)

    async def __call__(self, call_input: object) -> object:
        import asyncio
        import threading

        kind = "eval" if call_input.evaluation else "train"  # type: ignore[attr-defined]
        router = (self.args.sglang_router_ip, self.args.sglang_router_port)
        loop_id = id(asyncio.get_running_loop())
        self.calls.append((kind, call_input.rollout_id, router, loop_id, threading.get_ident()))  # type: ignore[attr-defined]
        if kind == "eval":
            return self.types.RolloutFnEvalOutput(data={}, metrics={})
        return self.types.RolloutFnTrainOutput(samples=[], metrics={})


PROBES: list[CallOrderProbe] = []


def legacy_rollout(args: object, rollout_id: int, data_source: object, evaluation: bool = False):
    """A legacy (plain function) rollout returning untyped results."""
    return {"env": {"rewards": [], "truncated": [], "samples": []}} if evaluation else [[]]


class WrongOutput:
    """A class-style rollout function that returns something Miles cannot use."""

    def __init__(self, constructor_input: object) -> None:
        pass

    def __call__(self, call_input: object) -> dict[str, object]:
        return {"samples": []}


NOT_CALLABLE = 42


class InterruptingProbe(CallOrderProbe):
    """Presses Ctrl-C (SIGINT to this process) during its call at :attr:`INTERRUPT_AT`, then
    waits to be cancelled."""

    INTERRUPT_AT = ("train", 1)

    async def __call__(self, call_input: object) -> object:
        import asyncio
        import os
        import signal

        kind = "eval" if call_input.evaluation else "train"  # type: ignore[attr-defined]
        if (kind, call_input.rollout_id) == self.INTERRUPT_AT:  # type: ignore[attr-defined]
            os.kill(os.getpid(), signal.SIGINT)
            await asyncio.sleep(60)  # cancelled by the interrupt long before
        return await super().__call__(call_input)


class InterruptingFirstCall(InterruptingProbe):
    INTERRUPT_AT = ("eval", 0)
