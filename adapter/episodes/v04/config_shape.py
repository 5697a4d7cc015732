"""A Verifiers 0.4 config file as users write it, and what to tell them when it is refused.

Accepted: the environment config itself, or a ``vf-eval`` file holding it under ``[env]`` (its
run settings are Miles' flags to decide: set aside with a note naming the flag). A refusal names
each of Verifiers' complaints in the file's terms (``[env.agent]``), with its fix.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR, ConfigError

# What decides each vf-eval run setting in a Miles run, by its EvalConfig names and aliases.
_RUN_KEYS = {
    "model m": "Miles trains the model --hf-checkpoint names",
    "client": "the episodes reach the engines Miles runs (miles-verifiers rollout: --engine-url)",
    "sampling": "sampling comes from Miles' --rollout-temperature, --rollout-top-p, "
    "--rollout-top-k and --rollout-max-response-len (--eval-* in evaluation)",
    "num_rollouts group_size rollouts_per_example r": "rollouts per task are "
    "--n-samples-per-prompt (--n-samples-per-eval-prompt in evaluation)",
    "max_concurrent c": "episodes in flight follow --sglang-server-concurrency and "
    "MILES_VERIFIERS_EPISODE_WORKERS",
    "select": "Miles trains and evaluates every task of the taskset, in its own order "
    "(--rollout-shuffle, --rollout-seed); size the taskset in [env.taskset] instead",
    "run output_dir o push rich verbose v dry_run clean resume": "vf-eval's own run "
    "bookkeeping; a Miles run keeps its own outputs and logs",
}
VF_EVAL_RUN_KEYS = {key: why for keys, why in _RUN_KEYS.items() for key in keys.split()}
ENV_TABLE = "env"


@dataclass(frozen=True)
class Shaped:
    """The environment config's data, its tables' ``prefix`` (vf-eval's ``env``), the notes."""

    data: dict[str, Any]
    prefix: tuple[str, ...]
    notes: tuple[str, ...]


def table(prefix: Sequence[str], *path: str) -> str:
    """``[env.agent.runtime]``: a table as the user wrote it."""
    return "[" + ".".join((*prefix, *path)) + "]"


def shape04(data: dict[str, Any], path: Path) -> Shaped:
    """``data``, or a vf-eval file's ``[env]`` with its run settings set aside (a note each)."""
    if ENV_TABLE not in data:
        return Shaped(data, (), ())
    env = data[ENV_TABLE]
    if not isinstance(env, dict):
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: `env` is a {type(env).__name__}, but in a vf-eval "
            "config it is the table holding the environment.",
            field="[env]",
            fix="write the environment's tables under [env] ([env.taskset], [env.agent], ...).",
        )
    strays = [key for key in data if key != ENV_TABLE and key not in VF_EVAL_RUN_KEYS]
    if strays:
        named = ", ".join(f"[{key}]" if isinstance(data[key], dict) else key for key in strays)
        moved = ", ".join(table((ENV_TABLE,), key) for key in strays)
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path} holds its environment under [env], as vf-eval "
            f"reads it, and also {named} outside it, which is neither part of [env] nor a "
            "vf-eval run setting.",
            field=named.split(", ")[0],
            fix=f"move it under [env] ({moved}), or write the whole file without [env], in "
            "the environment config's own shape (fixtures/configs/v04/mv_arith.toml).",
        )
    notes = tuple(
        f"{CONFIG_ENV_VAR} file {path}: vf-eval's `{key}` is set aside: {VF_EVAL_RUN_KEYS[key]}."
        for key in data
        if key != ENV_TABLE
    )
    return Shaped(env, (ENV_TABLE,), notes)


def _fields(cls: Any, *loc: str) -> dict[str, Any]:
    """The fields of the model ``loc`` leads to from ``cls`` (empty where there is none); a
    field's model is its default's class (the most specific), else its annotation."""
    for name in loc:
        field = _fields(cls).get(name)
        default = getattr(field, "default", None)
        cls = type(default) if _fields(type(default)) else getattr(field, "annotation", None)
    fields = getattr(cls, "model_fields", None)
    return dict(fields) if isinstance(fields, dict) else {}


def seat_names(cls: Any) -> list[str]:
    """The seats (agent tables) of an environment's config class, in declaration order."""
    from verifiers.v1.configs.agent import AgentConfig

    return [
        name
        for name, field in _fields(cls).items()
        if isinstance(getattr(field, "default", None), AgentConfig)
    ]


def _taskset_id(data: dict[str, Any]) -> str:
    taskset = data.get("taskset")
    return str(taskset.get("id") or "") if isinstance(taskset, dict) else ""


def _closest(word: str, choices: Sequence[str]) -> str | None:
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def _tables(prefix: Sequence[str], names: Sequence[str]) -> str:
    return ", ".join(table(prefix, name) for name in names)


@dataclass(frozen=True)
class Complaint:
    """One of Verifiers' complaints, in the file's terms: where, what, and its fix."""

    where: str
    what: str
    fix: str


def _top_level_key(key: str, cls: Any, prefix: Sequence[str]) -> Complaint:
    seats = seat_names(cls)
    where = table(prefix, key)
    seat_fields = _fields(cls, seats[0]) if seats else {}
    seat_tables = _tables(prefix, seats) or table(prefix, "agent")
    if key in seat_fields and key not in _fields(cls):
        return Complaint(
            f"`{key}`" + (f" in {table(prefix)}" if prefix else " at the top level"),
            f"`{key}` is a setting of a seat (an agent), not of the environment",
            f"move it under the seat's table: {seat_tables}"
            + (" (each seat has its own)" if len(seats) > 1 else "")
            + ".",
        )
    if key == "agent" and seats:
        return Complaint(
            where,
            f"this environment has no [agent] seat; its seats are {_tables(prefix, seats)}",
            f"write those settings under each seat's own table ({_tables(prefix, seats)}).",
        )
    seat = _closest(key, seats)
    if seat is not None:
        return Complaint(
            where,
            f"{where} is not a seat of this environment (its seats: {_tables(prefix, seats)})",
            f"rename {where} to {table(prefix, seat)}.",
        )
    known = [name for name in _fields(cls) if name not in seats]
    near = _closest(key, known)
    return Complaint(
        where,
        f"{where} is not part of this environment's config (its seats: "
        f"{_tables(prefix, seats) or 'none'}; its other tables and keys: {', '.join(known)})",
        f"rename it to {table(prefix, near)}." if near else "remove it.",
    )


def _nested_key(loc: Sequence[str], cls: Any, prefix: Sequence[str]) -> Complaint:
    *parents, key = loc
    where = table(prefix, *parents)
    seats = seat_names(cls)
    known = list(_fields(cls, *parents))
    if list(parents) == ["timeout"] and seats:
        seat_timeouts = _fields(cls, seats[0], "timeout")
        if key in seat_timeouts:
            targets = _tables(prefix, [f"{seat}.timeout" for seat in seats])
            return Complaint(
                f"`{key}` in {where}",
                f"the environment's {where} takes {', '.join(known)}; a seat's `{key}` "
                "timeout belongs to the seat",
                f"move `{key}` to {targets}.",
            )
    near = _closest(key, known)
    takes = f" ({where} takes: {', '.join(known)})" if known else ""
    return Complaint(
        f"`{key}` in {where}",
        f"{where} has no key `{key}`{takes}",
        f"rename `{key}` to `{near}`." if near else f"remove `{key}` from {where}.",
    )


def complaints(error: Exception, data: dict[str, Any], prefix: Sequence[str]) -> list[Complaint]:
    """Verifiers' refusal of ``data``, one complaint per problem it found."""
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return []
    try:  # the config class Verifiers validates ``data`` with
        from verifiers.v1.utils.loaders import env_config_type

        cls = env_config_type(_taskset_id(data), str(data.get("id") or ""))
    except Exception:
        cls = None
    found = []
    for item in errors():
        loc = [str(part) for part in item.get("loc", ())]
        kind = item.get("type", "")
        if kind == "extra_forbidden" and len(loc) == 1:
            found.append(_top_level_key(loc[0], cls, prefix))
        elif kind == "extra_forbidden" and loc:
            found.append(_nested_key(loc, cls, prefix))
        else:
            where = table(prefix, *loc[:-1]) if len(loc) > 1 else table(prefix, *loc)
            key = f"`{loc[-1]}` in {where}" if len(loc) > 1 else where
            found.append(
                Complaint(
                    key,
                    f"{key}: {item.get('msg', '')}",
                    f"correct {key} as Verifiers' message says.",
                )
            )
    return found


def refusal04(
    error: Exception, data: dict[str, Any], path: Path, prefix: Sequence[str]
) -> ConfigError:
    """The construction error for Verifiers' refusal of the config at ``path``."""
    found = complaints(error, data, prefix)
    if found:
        return ConfigError(
            f"{CONFIG_ENV_VAR} file {path} is not a valid Verifiers 0.4 environment config: "
            + "; ".join(complaint.what for complaint in found)
            + ".",
            field=found[0].where,
            fix=" ".join(complaint.fix for complaint in found),
        )
    taskset_id = _taskset_id(data)
    if isinstance(error, ImportError) and taskset_id:
        return ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: the taskset {taskset_id!r} of "
            f"{table(prefix, 'taskset')} does not load where the episodes run "
            f"({type(error).__name__}: {error}).",
            field=f"{table(prefix, 'taskset')} id",
            fix="install the taskset's package in the episode workers' interpreter "
            "(MILES_VERIFIERS_EPISODE_WORKER_PYTHON), or correct the id.",
        )
    return ConfigError(
        f"{CONFIG_ENV_VAR} file {path} is not a valid Verifiers 0.4 environment config "
        f"({type(error).__name__}: {error}).",
        field=CONFIG_ENV_VAR,
        fix="correct what Verifiers' message names, and install the taskset package where "
        "the episodes run.",
    )
