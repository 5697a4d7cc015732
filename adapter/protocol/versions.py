"""What each side runs (Python, miles-verifiers, Verifiers, Renderers, the protocol), as the
description and each worker's hello report it."""

from __future__ import annotations

import platform
from collections.abc import Mapping

from miles_verifiers.errors import RolloutCallError
from miles_verifiers.protocol.messages import PROTOCOL_VERSION, Ready
from miles_verifiers.versions import installed_versions as versions_of

# What each side reports it runs, besides its Python and the protocol it speaks.
REPORTED_DISTRIBUTIONS = ("miles-verifiers", "verifiers", "renderers")
# The order versions are shown in; anything else a side reports follows, sorted.
SHOWN = ("python", *REPORTED_DISTRIBUTIONS, "protocol")


class WorkerVersionsError(RolloutCallError):
    """An episode worker runs other versions than the interpreter construction described."""


def process_versions() -> dict[str, str]:
    """This process's versions (a distribution that is not installed is left out)."""
    found = versions_of(REPORTED_DISTRIBUTIONS)
    return (
        {"python": platform.python_version()}
        | {name: version for name, version in found.items() if version is not None}
        | {"protocol": PROTOCOL_VERSION}
    )


def version_line(versions: Mapping[str, str]) -> str:
    """``python 3.11.7, verifiers 0.4.0, renderers not installed, protocol 2.1``."""
    names = [n for n in SHOWN if n in versions or n in ("verifiers", "renderers")]
    names += sorted(n for n in versions if n not in SHOWN)
    return ", ".join(f"{name} {versions.get(name, 'not installed')}" for name in names)


def check_worker_versions(expected: Mapping[str, str], hello: Ready, worker: str) -> None:
    """Raise :class:`WorkerVersionsError` naming both sides when the hello differs (only the
    names ``expected`` holds are compared: an older worker reports fewer)."""
    reported = {**hello.versions, "protocol": hello.protocol}
    differing = [name for name in expected if reported.get(name) != expected[name]]
    if not differing:
        return
    what = ", ".join(
        f"{name} {reported.get(name, 'not installed')} (described: {expected[name]})"
        for name in differing
    )
    raise WorkerVersionsError(
        f"{worker} runs {what}; construction described the taskset with "
        f"{version_line(expected)}, and the worker runs {version_line(reported)}. Its episodes "
        "would not be the ones construction checked. Fix: give every worker the same "
        "environment (MILES_VERIFIERS_EPISODE_WORKER_PYTHON naming one virtualenv, present on "
        "every node the workers run on) and leave it unchanged while the run lasts."
    )
