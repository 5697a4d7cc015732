"""Construction refuses a Verifiers 0.4 environment whose seats or runtimes Miles cannot train
faithfully, from the description the episode side sends (no Verifiers needed here).

The descriptions are those of fixtures/configs/v04/mv_dialogue.toml (an ``assistant`` seat,
trainable, and a ``quiz_master`` seat its ``setup()`` marks untrainable) and mv_arith.toml (one
``agent`` seat of Verifiers' single-agent environment), with the changes each test names.
"""

from __future__ import annotations

from typing import Any

import pytest

from miles_verifiers.protocol.messages import (
    Description,
    RuntimeDescription,
    SeatDescription,
    ServiceRuntimeDescription,
)
from miles_verifiers.protocol.records import TaskRecord
from miles_verifiers.trainer.construction import STAGES, inputs, survey
from miles_verifiers.trainer.options import validate_options
from miles_verifiers.trainer.seats import SeatSetupError, seat_problems

LOCAL = RuntimeDescription(type="subprocess", local=True)


def seat(name: str, **changes: Any) -> SeatDescription:
    return SeatDescription(
        **{"name": name, "trainable": True, "runtime": LOCAL, **changes}  # type: ignore[arg-type]
    )


def described(
    env_id: str, task_type: str, env_type: str, seats: list[SeatDescription], /, **changes: Any
) -> Description:
    """A one-task environment as the describe step sees it, with changes (any field, its seats
    included)."""
    fields: dict[str, Any] = {
        "env_id": env_id,
        "tasks": [TaskRecord(type=task_type, idx=0)],
        "has_group_reward": False,
        "renderer_identity": None,
        "env_type": env_type,
        "seats": seats,
    }
    return Description(**{**fields, **changes})


def dialogue(
    assistant: dict[str, Any] | None = None,
    quiz_master: dict[str, Any] | None = None,
    **changes: Any,
) -> Description:
    """mv_dialogue.toml as the describe step sees it, with changes."""
    seats = [
        seat("assistant", **(assistant or {})),
        seat("quiz_master", **{"trainable": False, **(quiz_master or {})}),
    ]
    return described("mv-dialogue04", "DialogueTask", "mv_dialogue04.QuizEnv", seats, **changes)


def arith(**changes: Any) -> Description:
    """mv_arith.toml as the describe step sees it (the single-agent environment), with changes."""
    agent = seat("agent", **{"runs_per_episode": 1, **changes.pop("agent", {})})
    single_agent = "verifiers.v1.envs.single_agent.env.SingleAgentEnv"
    return described("mv-arith04", "Task", single_agent, [agent], **changes)


@pytest.fixture
def options(make_args):
    """Miles' defaults: --rollout-temperature 1.0, --rollout-top-p 1.0, --rollout-top-k -1,
    --rollout-max-response-len 128, no evaluation."""
    return validate_options(make_args())


def lines(description: Description, options) -> list[str]:
    return [p.describe() for p in seat_problems(description, options)]


# -- what passes ---------------------------------------------------------------------------------


def test_the_dialogue_fixture_as_configured_has_no_problems(options):
    assert seat_problems(dialogue(), options) == []


def test_a_description_without_seats_has_nothing_to_check(options):
    assert seat_problems(dialogue(seats=None), options) == []


def test_a_trainable_seat_override_equal_to_miles_value_is_accepted(options):
    same = {"sampling": {"temperature": 1, "top_p": 1.0, "top_k": -1, "max_tokens": 128}}

    assert seat_problems(dialogue(assistant=same), options) == []


def test_an_untrainable_seat_may_sample_as_it_likes(options):
    assert seat_problems(dialogue(quiz_master={"sampling": {"temperature": 0.2}}), options) == []


def test_keys_that_change_nothing_miles_trains_on_are_accepted(options):
    harmless = {"sampling": {"stop": ["</answer>"], "reasoning_effort": "low", "n": 1}}

    assert seat_problems(dialogue(assistant=harmless), options) == []


def test_a_neutral_value_of_a_key_miles_never_sets_is_accepted(options):
    neutral = {"sampling": {"repetition_penalty": 1.0, "min_p": 0.0}}

    assert seat_problems(dialogue(assistant=neutral), options) == []


def test_an_untrainable_seat_pinning_a_model_with_its_client_is_accepted(options):
    pinned = {"model": "gpt-4.1-mini", "has_client": True}

    assert seat_problems(dialogue(quiz_master=pinned), options) == []


# -- sampling overrides of the trainable seat ------------------------------------------------------


def test_a_trainable_seat_temperature_other_than_miles_is_refused_naming_both_values(options):
    (line,) = lines(dialogue(assistant={"sampling": {"temperature": 0.7}}), options)

    assert line.startswith("[assistant.sampling] temperature: = 0.7")
    assert "--rollout-temperature 1.0 in training" in line
    assert "remove temperature from [assistant.sampling]" in line
    assert "--rollout-temperature 0.7" in line


def test_a_trainable_seat_max_tokens_is_compared_with_the_response_length_flag(options):
    (line,) = lines(dialogue(assistant={"sampling": {"max_tokens": 64}}), options)

    assert "[assistant.sampling] max_tokens" in line and "--rollout-max-response-len 128" in line


def test_a_trainable_seat_top_k_is_refused_against_miles_whole_vocabulary(options):
    (line,) = lines(dialogue(assistant={"sampling": {"top_k": 20}}), options)

    assert "[assistant.sampling] top_k: = 20" in line and "--rollout-top-k -1" in line


def test_every_differing_key_is_reported_at_once(options):
    overrides = {"sampling": {"temperature": 0.7, "top_p": 0.9}}

    keys = [p.key for p in seat_problems(dialogue(assistant=overrides), options)]

    assert keys == ["[assistant.sampling] temperature", "[assistant.sampling] top_p"]


def test_a_trainable_seat_seed_is_refused_since_miles_seeds_each_rollout(options):
    (line,) = lines(dialogue(assistant={"sampling": {"seed": 7}}), options)

    assert line.startswith("[assistant.sampling] seed:") and "--rollout-seed" in line


def test_a_key_that_reshapes_sampling_miles_never_sets_is_refused(options):
    (line,) = lines(dialogue(assistant={"sampling": {"repetition_penalty": 1.2}}), options)

    assert line.startswith("[assistant.sampling] repetition_penalty: = 1.2")
    assert "remove repetition_penalty" in line


def test_under_evaluation_the_override_is_compared_with_the_eval_flag(make_args):
    options = validate_options(make_args(eval_interval=5, eval_temperature=0.0))

    (line,) = lines(dialogue(assistant={"sampling": {"temperature": 1.0}}), options)

    assert "--eval-temperature 0.0 in evaluation" in line and "in training" not in line


def test_an_eval_flag_left_unset_falls_back_on_the_rollout_flag(make_args):
    options = validate_options(make_args(eval_interval=5, num_rollout=0))

    (line,) = lines(dialogue(assistant={"sampling": {"temperature": 0.7}}), options)

    assert "--rollout-temperature 1.0 in evaluation" in line


def test_in_a_vf_eval_file_the_key_is_named_under_env(options):
    vf_eval = dialogue(assistant={"sampling": {"temperature": 0.7}}, config_prefix=["env"])

    (line,) = lines(vf_eval, options)

    assert line.startswith("[env.assistant.sampling] temperature:")
    assert "remove temperature from [env.assistant.sampling]" in line


# -- model pins --------------------------------------------------------------------------------------


def test_an_untrainable_seat_pinning_a_model_without_a_client_is_refused(options):
    (line,) = lines(dialogue(quiz_master={"model": "gpt-4.1-mini"}), options)

    assert line.startswith('[quiz_master] model: = "gpt-4.1-mini"')
    assert "[quiz_master.client]" in line and "remove model from [quiz_master]" in line


def test_a_trainable_seat_with_a_client_is_refused(options):
    (line,) = lines(dialogue(assistant={"has_client": True}), options)

    assert line.startswith("[assistant.client]:") and "another model's tokens" in line


# -- runtimes ----------------------------------------------------------------------------------------


def test_a_seat_in_a_remote_runtime_is_refused(options):
    remote = {"runtime": RuntimeDescription(type="prime", local=False)}

    (line,) = lines(dialogue(quiz_master=remote), options)

    assert line.startswith('[quiz_master.runtime] type: = "prime"')
    assert '[quiz_master.runtime] type = "subprocess"' in line


def test_a_config_runtime_outside_the_seats_that_is_remote_is_refused(options):
    verifier = ServiceRuntimeDescription(
        role="config",
        name="verifier.runtime",
        key="[verifier.runtime]",
        runtime=RuntimeDescription(type="modal", local=False),
    )

    (line,) = lines(arith(service_runtimes=[verifier]), options)

    assert line.startswith('[verifier.runtime] type: = "modal"')


def test_a_tool_server_the_taskset_code_places_remotely_is_refused_naming_its_toolsets(options):
    toolset = ServiceRuntimeDescription(
        role="toolset",
        name="Calculator",
        key=None,
        runtime=RuntimeDescription(type="e2b", local=False),
    )

    (line,) = lines(arith(service_runtimes=[toolset]), options)

    assert line.startswith("Calculator (Task.toolsets):") and "'e2b'" in line


def test_a_local_tool_server_is_accepted(options):
    toolset = ServiceRuntimeDescription(role="toolset", name="Calculator", key=None, runtime=LOCAL)

    assert seat_problems(arith(service_runtimes=[toolset]), options) == []


# -- how many traces train --------------------------------------------------------------------------


def test_several_trainable_seats_are_refused_naming_them(options):
    (line,) = lines(dialogue(quiz_master={"trainable": True}), options)

    assert line.startswith("[assistant], [quiz_master]:") and "2 seats are trainable" in line
    assert "setup()" in line


def test_no_trainable_seat_is_refused(options):
    (line,) = lines(dialogue(assistant={"trainable": False}), options)

    assert "no seat of the environment is trainable" in line


def test_a_seat_of_unknown_standing_leaves_the_count_to_the_first_rollout(options):
    unknown = dialogue(assistant={"trainable": None}, quiz_master={"trainable": None})

    assert seat_problems(unknown, options) == []


def test_best_of_n_is_refused_naming_the_env_id(options):
    best_of_n = arith(
        env_type="verifiers.v1.envs.best_of_n.env.BestOfNEnv", agent={"runs_per_episode": 4}
    )

    (line,) = lines(best_of_n, options)

    assert line.startswith("id:") and "best-of-n" in line and "--n-samples-per-prompt" in line


# -- where the checks run ------------------------------------------------------------------------------


def test_the_seat_setup_error_lists_every_problem(options):
    broken = dialogue(
        assistant={"sampling": {"temperature": 0.7}}, quiz_master={"model": "gpt-4.1-mini"}
    )

    error = SeatSetupError(seat_problems(broken, options))

    assert [p.key for p in error.problems] == [
        "[assistant.sampling] temperature",
        "[quiz_master] model",
    ]
    assert str(error).startswith("2 problems with the Verifiers environment's seats")


def test_the_construction_survey_reports_seat_problems_under_their_stage(make_args, options):
    given = inputs(make_args(), use_miles=False, dispatch_budget_factor=1, episodes=None)
    given |= {"options": options, "description": dialogue(quiz_master={"trainable": True})}

    found = survey(given, [stage for stage in STAGES if stage.name == "seats"])

    assert [p.stage for p in found.problems] == ["seats"]
    assert isinstance(found.problems[0].error, SeatSetupError)
