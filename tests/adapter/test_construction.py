"""The construction table: the constructor stops at the first failing stage, check surveys all."""

from __future__ import annotations

from typing import Any

import pytest

from miles_verifiers.trainer.construction import (
    STAGES,
    Stage,
    StageResult,
    build,
    inputs,
    survey,
)


class Boom(ValueError):
    pass


def produce(name: str, value: Any) -> Any:
    return lambda given: StageResult({name: value})


def fail(text: str) -> Any:
    return lambda given: StageResult(problems=(text,), error=Boom(text))


def test_build_raises_the_first_failing_stage_and_runs_nothing_after_it():
    ran: list[str] = []

    def later(given: Any) -> StageResult:
        ran.append("later")
        return StageResult()

    stages = [Stage("a", (), fail("a is wrong")), Stage("b", (), fail("b")), Stage("c", (), later)]

    with pytest.raises(Boom, match="a is wrong"):
        build({}, stages)
    assert ran == []


def test_build_hands_each_stage_what_earlier_stages_produced():
    stages = [
        Stage("a", ("x",), lambda given: StageResult({"y": given["x"] + 1})),
        Stage("b", ("y",), lambda given: StageResult({"z": given["y"] * 10})),
    ]

    assert build({"x": 1}, stages)["z"] == 20


def test_survey_reports_every_stage_whose_inputs_exist_and_skips_the_rest():
    stages = [
        Stage("a", (), fail("a is wrong")),  # produces nothing
        Stage("b", (), fail("b is wrong")),
        Stage("needs a", ("from_a",), fail("never reached")),
        Stage("c", (), produce("from_c", 1)),
    ]

    found = survey({}, stages)

    assert [(p.stage, p.problem) for p in found.problems] == [
        ("a", "a is wrong"),
        ("b", "b is wrong"),
    ]
    assert found.products["from_c"] == 1


def test_survey_reports_an_unexpected_exception_as_the_stage_problem():
    def broken(given: Any) -> StageResult:
        raise KeyError("surprise")

    found = survey({}, [Stage("a", (), broken)])

    assert found.problems[0].stage == "a" and "KeyError" in found.problems[0].problem


# What each stage of the real table produces when it passes.
PRODUCTS = {
    "options": {"options", "options_view", "model"},
    "hooks": {"hooks"},
    "transport": {"transport", "warnings"},
    "config": {"config_path"},
    "taskset": {"description", "renderer"},
    "group reward": set(),
    "seats": set(),
    "seeds": set(),
}


def test_every_stage_reads_only_inputs_or_products_of_earlier_stages():
    available = set(inputs(None, use_miles=False, dispatch_budget_factor=1, episodes=None))
    for stage in STAGES:
        assert set(stage.needs) <= available, stage.name
        available |= PRODUCTS[stage.name]
