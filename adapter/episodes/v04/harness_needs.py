"""What a Verifiers 0.4 seat's harness needs on the worker's machine, checked before any episode.

Stock harnesses run their agent as a PEP 723 script the seat's ``setup`` prepares with ``uv``
(``UV_OFFLINE=false``), which in the host ``subprocess`` runtime needs ``uv`` on the workers'
``PATH`` and a reachable index: both are probed, bounded, for :data:`UV_SCRIPT_CALLS` harnesses.
"""

from __future__ import annotations

import inspect
import os
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR, ConfigError
from miles_verifiers.episodes.v04.config_shape import table

# Names whose use in a harness class's source means its setup prepares a script with uv.
UV_SCRIPT_CALLS = ("prepare_uv_script", "run_uv_script", "launch_chat_program")
# Runtimes in which a harness's program runs on the worker's own machine, with its PATH.
HOST_RUNTIMES = frozenset({"subprocess"})
# Bounds on the probes: a check never waits on a hung network longer than this.
HELP_TIMEOUT_S = 15.0
INDEX_TIMEOUT_S = 45.0
# uv's own per-request timeout for the index probe, unless the workers' environment sets one.
INDEX_HTTP_TIMEOUT_S = "10"


@dataclass(frozen=True)
class UvSeat:
    """A seat whose harness prepares a uv script in a host runtime."""

    where: str  # the file, the seat and its harness, for a refusal
    harness_key: str  # where the harness is chosen: the seat's table, or the taskset's default
    harness_table: str  # the seat's harness table as the file spells it ([agent.harness])
    env: Mapping[str, str]  # the harness's own environment, which Verifiers hands to uv


def prepares_uv_script(harness_type: type) -> bool:
    """Whether the harness class (or a base short of ``Harness``) calls a UV_SCRIPT_CALLS name."""
    from verifiers.v1.harness import Harness

    for klass in harness_type.__mro__:
        if klass is Harness or klass is object:
            break
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):  # no source to read (a compiled or dynamic class)
            continue
        if any(name in source for name in UV_SCRIPT_CALLS):
            return True
    return False


def uv_seats(config: Any, path: Path, prefix: Sequence[str] = ()) -> list[UvSeat]:
    """The seats of ``config`` whose harness prepares a uv script on the worker's machine."""
    from verifiers.v1.env import agent_config_fields
    from verifiers.v1.utils.loaders import harness_class

    harnesses = config.agent_harnesses()
    found = []
    for seat, spec in agent_config_fields(config).items():
        kind = getattr(spec.runtime, "type", None)
        harness = harnesses.get(seat)
        if kind not in HOST_RUNTIMES or harness is None or not harness.id:
            continue
        try:
            harness_type = harness_class(harness.id)
        except Exception:  # a harness Verifiers cannot load is its own refusal, elsewhere
            continue
        if not prepares_uv_script(harness_type):
            continue
        harness_table = table(prefix, seat, "harness")
        key = (
            f"{harness_table} id"
            if spec.harness is not None
            else f"the taskset's default harness (pin one in {harness_table})"
        )
        named = f"the {seat!r} seat's harness {str(harness.id)!r} ({key})"
        where = f"{CONFIG_ENV_VAR} file {path}: {named}"
        env = getattr(harness, "resolved_env", None) or {}
        found.append(UvSeat(where, key, harness_table, dict(env)))
    return found


def chat_program_dependencies() -> list[str]:
    """The dependencies Verifiers' chat program declares (its PEP 723 ``script`` block)."""
    from verifiers.v1.harnesses.utils.launch import CHAT_PROGRAM

    lines = []
    inside = False
    for line in CHAT_PROGRAM.splitlines():
        if line.strip() == "# /// script":
            inside = True
        elif line.strip() == "# ///":
            break
        elif inside:
            lines.append(line[2:] if line.startswith("# ") else line.lstrip("#"))
    return [str(dep) for dep in tomllib.loads("\n".join(lines)).get("dependencies", [])]


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return " / ".join(lines[-3:])[-400:] if lines else "no output"


def check_uv_program(seat: UvSeat, environ: Mapping[str, str]) -> str:
    """The ``uv`` the seat's harness would run; refuses a missing one or one too old."""
    uv = shutil.which("uv", path=environ.get("PATH", os.defpath))
    if uv is None:
        first = environ.get("PATH", "").split(os.pathsep)[0]
        raise ConfigError(
            f"{seat.where} runs its program as a uv script, and there is no `uv` on "
            f"the episode workers' PATH (its first entry: {first}); Verifiers would try to "
            "download uv in every episode and the episodes would fail.",
            field=seat.harness_key,
            fix=f"install uv into the worker venv: {sys.executable} -m pip install uv",
        )
    try:
        done = subprocess.run(
            [uv, "sync", "--help"],
            env=dict(environ),
            capture_output=True,
            text=True,
            timeout=HELP_TIMEOUT_S,
        )
        usable = done.returncode == 0 and "--script" in done.stdout
    except (OSError, subprocess.TimeoutExpired):
        usable = False
    if not usable:
        raise ConfigError(
            f"{seat.where} runs its program as a uv script, and the `uv` the episode "
            f"workers find ({uv}) cannot sync scripts (too old, or it does not run).",
            field=seat.harness_key,
            fix="install a current uv into the worker venv: "
            f"{sys.executable} -m pip install uv --upgrade",
        )
    return uv


def check_index(seat: UvSeat, uv: str, environ: Mapping[str, str]) -> None:
    """Resolve the chat program's dependencies as the seat's setup would (bounded), or refuse."""
    env = {**environ, **seat.env, "UV_OFFLINE": "false"}
    env.setdefault("UV_HTTP_TIMEOUT", INDEX_HTTP_TIMEOUT_S)
    command = [
        uv, "pip", "compile", "-", "--no-config", "--quiet", "--no-header", "--no-annotate",
        "--python", sys.executable,
    ]  # fmt: skip
    requirements = "\n".join(chat_program_dependencies()) + "\n"
    try:
        done = subprocess.run(
            command,
            input=requirements,
            env=env,
            capture_output=True,
            text=True,
            timeout=INDEX_TIMEOUT_S,
        )
        problem = None if done.returncode == 0 else _last_line(done.stderr)
    except subprocess.TimeoutExpired:
        problem = f"no answer within {INDEX_TIMEOUT_S:g} s"
    except OSError as error:
        problem = f"{type(error).__name__}: {error}"
    if problem is None:
        return
    index = env.get("UV_DEFAULT_INDEX") or env.get("UV_INDEX_URL") or "PyPI (uv's default)"
    raise ConfigError(
        f"{seat.where} prepares its program with uv in each episode worker, which "
        f"resolves the program's dependencies against a package index, and uv could not reach "
        f"it from the workers (index: {index}; uv said: {problem}). A warm uv cache does not "
        "stand in for the index: Verifiers prepares the script with UV_OFFLINE=false.",
        field=seat.harness_key,
        fix="let the workers reach the index (check HTTPS_PROXY / NO_PROXY in their "
        "environment), or point uv at one they reach: set UV_INDEX_URL (or UV_DEFAULT_INDEX) "
        "in the environment the trainer starts the workers with, or under the seat's "
        f"{seat.harness_table} env.",
    )


def check_harness_needs04(
    config: Any,
    path: Path,
    prefix: Sequence[str] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> None:
    """Refuse a seat whose harness cannot prepare its program (no ``uv``, or no index);
    ``environ``: the workers' (by default this process's: describing runs with their ``PATH``)."""
    seats = uv_seats(config, path, prefix)
    if not seats:
        return
    environ = dict(os.environ if environ is None else environ)
    uv = check_uv_program(seats[0], environ)
    probed: set[tuple[tuple[str, str], ...]] = set()
    for seat in seats:
        key = tuple(sorted(seat.env.items()))
        if key not in probed:
            probed.add(key)
            check_index(seat, uv, environ)
