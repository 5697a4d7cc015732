"""What a Verifiers 0.4 environment's seats must be for Miles to train it faithfully.

:func:`seat_problems` reads the :class:`Description` of each seat and runtime and lists what
Miles cannot train as it assumes, each problem naming the TOML key and the fix. A description
without seats (0.2) has nothing to check.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from miles_verifiers.engine.sampling import RENAMED_KEYS
from miles_verifiers.errors import SetupError
from miles_verifiers.protocol.messages import Description, SeatDescription
from miles_verifiers.trainer.options import FLAGS, MilesOptions, SamplingOptions

# SGLang name -> the SamplingOptions field Miles sets it from (flags rollout_<field>, eval_<field>).
_MILES_KEYS: Mapping[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_new_tokens": "max_response_len",
    "min_new_tokens": "min_new_tokens",
}

# What Miles leaving a key unset means to SGLang: a seat value equal to it changes nothing.
_UNSET_MEANS: Mapping[str, Any] = {"top_k": -1, "min_new_tokens": 0}

# Keys that reshape the sampled distribution, which Miles never sets, with their neutral value.
# Any other key (stop, n, skip_special_tokens, reasoning_effort) changes nothing trained on.
_SHAPING_KEYS: Mapping[str, Any] = {
    "min_p": 0.0,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "logit_bias": None,
    "json_schema": None,
    "regex": None,
    "ebnf": None,
    "structural_tag": None,
    "ignore_eos": False,
    "custom_params": None,
}

# Verifiers' environment types whose episodes give one seat several trainable traces.
_SEVERAL_TRACES_TYPES = {"BestOfNEnv": "best-of-n"}


@dataclass(frozen=True)
class SeatProblem:
    """One thing about a seat (or a runtime) Miles cannot train faithfully."""

    key: str  # the TOML key (or table) to change
    problem: str
    fix: str

    def describe(self) -> str:
        return f"{self.key}: {self.problem} Fix: {self.fix}"


class SeatSetupError(SetupError, ValueError):
    """The environment's seats or runtimes cannot be trained as Miles assumes (every problem)."""

    def __init__(self, problems: Sequence[SeatProblem]) -> None:
        self.problems = tuple(problems)
        count = len(self.problems)
        lines = "\n".join(f"  - {p.describe()}" for p in self.problems)
        noun = "problem" if count == 1 else "problems"
        super().__init__(
            f"{count} {noun} with the Verifiers environment's seats (VERIFIERS_CONFIG) "
            f"before Miles can train it:\n{lines}"
        )


def _same(seat_value: Any, miles_value: Any, key: str) -> bool:
    unset = _UNSET_MEANS.get(key)
    seat_value = unset if seat_value is None and key in _UNSET_MEANS else seat_value
    miles_value = unset if miles_value is None else miles_value
    if isinstance(seat_value, bool) or isinstance(miles_value, bool):
        return seat_value is miles_value
    if isinstance(seat_value, (int, float)) and isinstance(miles_value, (int, float)):
        return math.isclose(seat_value, miles_value, rel_tol=0.0, abs_tol=1e-12)
    return bool(seat_value == miles_value)


def _toml(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _modes(options: MilesOptions) -> list[tuple[str, SamplingOptions, int]]:
    """The modes the run samples in: (name, its sampling, 0 training flags / 1 evaluation)."""
    modes = []
    if options.train_enabled or not options.eval_enabled:
        modes.append(("training", options.train, 0))
    if options.eval_enabled:
        modes.append(("evaluation", options.eval, 1))
    return modes


def _table(prefix: Sequence[str], *path: str) -> str:
    """A table as the config file spells it (under ``[env]`` in a vf-eval file)."""
    return "[" + ".".join((*prefix, *path)) + "]"


def _sampling_problems(
    seat: SeatDescription, options: MilesOptions, prefix: Sequence[str]
) -> list[SeatProblem]:
    problems = []
    table = _table(prefix, seat.name, "sampling")
    for written, value in seat.sampling.items():
        key = RENAMED_KEYS.get(written, written)
        toml_key = f"{table} {written}"
        if key == "sampling_seed":
            problems.append(
                SeatProblem(
                    toml_key,
                    f"= {_toml(value)} on the trainable {seat.name!r} seat pins one seed for "
                    f"every rollout, but Miles gives each rollout its own (from "
                    f"{FLAGS['rollout_seed']} under {FLAGS['deterministic_inference']}).",
                    f"remove {written} from {table}.",
                )
            )
        elif key in _MILES_KEYS:
            name = _MILES_KEYS[key]
            train_field, eval_field = f"rollout_{name}", f"eval_{name}"
            differing = []
            for mode, sampling, index in _modes(options):
                miles_value = getattr(sampling, name)
                if not _same(value, miles_value, key):
                    # Evaluation's own flag, or the training one it falls back on.
                    own = index and getattr(options, eval_field) is not None
                    differing.append((mode, FLAGS[eval_field if own else train_field], miles_value))
            if differing:
                samples_with = " and ".join(
                    f"{flag} {'unset' if miles_value is None else miles_value} in {mode}"
                    for mode, flag, miles_value in differing
                )
                flags = " and ".join(
                    f"{flag} {_toml(value)}" for flag in dict.fromkeys(f for _, f, _ in differing)
                )
                problems.append(
                    SeatProblem(
                        toml_key,
                        f"= {_toml(value)} replaces Miles' sampling for the trainable "
                        f"{seat.name!r} seat, but Miles samples with {samples_with} and "
                        "trains as if every token were sampled so.",
                        f"remove {written} from {table} (Miles' value applies), or pass "
                        f"{flags} so both agree.",
                    )
                )
        elif key in _SHAPING_KEYS and not _same(value, _SHAPING_KEYS[key], key):
            problems.append(
                SeatProblem(
                    toml_key,
                    f"= {_toml(value)} reshapes what the trainable {seat.name!r} seat samples, "
                    "but Miles samples without it (it has no flag for it) and trains as if "
                    "the policy's own distribution were sampled.",
                    f"remove {written} from {table}.",
                )
            )
    return problems


def _pin_problems(seat: SeatDescription, prefix: Sequence[str]) -> list[SeatProblem]:
    problems = []
    home, client = _table(prefix, seat.name), _table(prefix, seat.name, "client")
    if seat.model is not None and not seat.has_client:
        elsewhere = (
            f", or set {client} to the endpoint that serves {seat.model!r}"
            if not seat.trainable
            else ""
        )
        problems.append(
            SeatProblem(
                f"{home} model",
                f'= "{seat.model}" pins a model for the {seat.name!r} seat but no '
                f"{client} to reach it, so the run's client (Miles' SGLang engines, serving "
                "the policy being trained) plays the seat, whatever the pin says.",
                f"remove model from {home} to let the policy play the seat{elsewhere}.",
            )
        )
    if seat.trainable and seat.has_client:
        problems.append(
            SeatProblem(
                client,
                f"is set on the trainable {seat.name!r} seat, so its turns come from that "
                "endpoint, not from Miles' SGLang engines, and Miles would train the policy "
                "on another model's tokens.",
                f"remove {client} (and any model pin) so the policy plays the seat, or mark "
                "the seat untrainable in the environment's setup().",
            )
        )
    return problems


def _runtime_problems(
    description: Description, seats: Sequence[SeatDescription], prefix: Sequence[str]
) -> list[SeatProblem]:
    problems = []
    for seat in seats:
        if not seat.runtime.local:
            runtime = _table(prefix, seat.name, "runtime")
            problems.append(
                SeatProblem(
                    f"{runtime} type",
                    f'= "{seat.runtime.type}": the {seat.name!r} seat runs in a remote sandbox '
                    "(Verifiers 0.4's default when the seat's runtime is not set); the Miles "
                    "episode worker runs local runtimes only.",
                    f'set {runtime} type = "subprocess" (or a local container runtime such '
                    "as docker).",
                )
            )
    for service in description.service_runtimes:
        if service.runtime.local:
            continue
        what = f"the tool server {service.name}" if service.role == "toolset" else "this runtime"
        if service.key is not None:
            # The describe step names the table within the environment config.
            key = _table(prefix, *service.key.strip("[]").split("."))
            problems.append(
                SeatProblem(
                    f"{key} type",
                    f'= "{service.runtime.type}": {what} runs in a remote sandbox; the Miles '
                    "episode worker runs local runtimes only.",
                    f'set {key} type = "subprocess" (or a local container runtime).',
                )
            )
        else:
            problems.append(
                SeatProblem(
                    f"{service.name} (Task.toolsets)",
                    f"{what} runs in the remote {service.runtime.type!r} runtime, set by the "
                    "taskset's code rather than its config; the Miles episode worker runs "
                    "local runtimes only.",
                    "give the toolset a local runtime (subprocess or docker) in the taskset's "
                    "toolsets(), or make it colocated with the seat's runtime.",
                )
            )
    return problems


def _count_problems(
    description: Description, seats: Sequence[SeatDescription], prefix: Sequence[str]
) -> list[SeatProblem]:
    if any(seat.trainable is None for seat in seats):
        return []  # standing unknown: the first rollout's count decides (the run-time guard)
    trainable = [seat for seat in seats if seat.trainable]
    names = ", ".join(_table(prefix, seat.name) for seat in seats)
    if not trainable:
        return [
            SeatProblem(
                names,
                "no seat of the environment is trainable after its setup(), so no rollout "
                "would give Miles a trace to train.",
                "leave exactly one seat trainable (setup() marks judges and simulators "
                "untrainable; the seat the policy learns stays trainable).",
            )
        ]
    if len(trainable) > 1:
        listed = ", ".join(repr(seat.name) for seat in trainable)
        return [
            SeatProblem(
                ", ".join(_table(prefix, seat.name) for seat in trainable),
                f"{len(trainable)} seats are trainable ({listed}), so every rollout yields "
                f"{len(trainable)} traces to train, but Miles trains exactly one trace per "
                "rollout (its group normalisation compares one reward per rollout).",
                "leave one seat trainable: mark the others untrainable in the environment's "
                "setup() (agents.<seat>.trainable = False), as 0.4's user simulators and "
                "judges are.",
            )
        ]
    seat = trainable[0]
    if seat.runs_per_episode is not None and seat.runs_per_episode > 1:
        kind = _SEVERAL_TRACES_TYPES.get(
            (description.env_type or "").rsplit(".", 1)[-1], description.env_type
        )
        return [
            SeatProblem(
                f"{_table(prefix)} id" if prefix else "id",
                f"the {kind} environment plays the trainable {seat.name!r} seat "
                f"{seat.runs_per_episode} times per episode, so every rollout yields "
                f"{seat.runs_per_episode} traces to train, but Miles trains exactly one trace "
                "per rollout.",
                "remove id from the config to train the taskset's own environment, and use "
                "--n-samples-per-prompt for several attempts per task (each one a rollout of "
                "the group).",
            )
        ]
    return []


def seat_problems(description: Description, options: MilesOptions) -> list[SeatProblem]:
    """Every problem with the described seats and runtimes (runtimes, pins and sampling, count)."""
    seats = description.seats
    if seats is None:
        return []
    prefix = tuple(description.config_prefix)
    problems = _runtime_problems(description, seats, prefix)
    for seat in seats:
        problems += _pin_problems(seat, prefix)
        if seat.trainable:
            problems += _sampling_problems(seat, options, prefix)
    return problems + _count_problems(description, seats, prefix)
