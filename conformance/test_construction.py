"""Construction: Miles options and the Verifiers config are checked before anything runs."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.miles_side import miles_args, point_at_engine
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import (
    LegacyRolloutFn,
    MilesWorld,
    require_taskset,
    write_config,
)

# Each unsupported Miles option: the flag the error must name, the attribute and a value
# that turns it on. Prompt-data loading is on unless --disable-rollout-global-dataset is passed.
UNSUPPORTED: dict[str, tuple[str, Any]] = {
    "--disable-rollout-global-dataset": ("rollout_global_dataset", True),
    "--partial-rollout": ("partial_rollout", True),
    "--multimodal-keys": ("multimodal_keys", {"image": "images"}),
    "--chat-template-path": ("chat_template_path", "/models/custom_template.jinja"),
    "--use-opd": ("use_opd", True),
    "--use-rollout-routing-replay": ("use_rollout_routing_replay", True),
    "--use-rollout-indexer-replay": ("use_rollout_indexer_replay", True),
    "--multi-lora": ("multi_lora", True),
}


@st.composite
def supported_options(draw: st.DrawFn) -> dict[str, Any]:
    """Arbitrary values for options an adapter must accept."""
    batch = draw(st.integers(1, 4))
    context = draw(st.none() | st.integers(2048, 40960))
    return {
        "rollout_batch_size": batch,
        "over_sampling_batch_size": batch + draw(st.integers(0, 3)),
        "n_samples_per_prompt": draw(st.integers(1, 3)),
        "n_samples_per_eval_prompt": draw(st.integers(1, 3)),
        "rollout_shuffle": draw(st.booleans()),
        "rollout_seed": draw(st.integers(0, 2**31 - 1)),
        "rollout_temperature": draw(st.floats(0.0, 2.0)),
        "rollout_top_p": draw(st.floats(0.05, 1.0)),
        "rollout_top_k": draw(st.sampled_from([-1, 1, 20, 50])),
        "rollout_max_response_len": draw(st.integers(8, 1024)),
        "rollout_max_context_len": context,
        "rollout_stop": draw(st.none() | st.just(["\n\n\n"])),
        "rollout_stop_token_ids": draw(st.none() | st.lists(st.integers(0, 151_000), max_size=3)),
        "rollout_skip_special_tokens": draw(st.booleans()),
        "apply_chat_template_kwargs": draw(
            st.sampled_from([{}, {"enable_thinking": False}, {"enable_thinking": True}])
        ),
        "sglang_router_policy": draw(
            st.sampled_from([None, "consistent_hashing", "manual", "cache_aware"])
        ),
        "sglang_enable_deterministic_inference": draw(st.booleans()),
        "sglang_server_concurrency": draw(st.integers(1, 1024)),
        "eval_temperature": draw(st.none() | st.floats(0.0, 1.0)),
        "eval_max_response_len": draw(st.none() | st.integers(8, 256)),
        "eval_min_new_tokens": draw(st.none() | st.integers(0, 4)),
    }


def construction_error(world: MilesWorld, args: Any, config: Path | str | None) -> Exception:
    """The set-up error: at construction, or for a legacy function (which Miles does not
    construct) at its first call."""
    try:
        fn = world.construct(args, config)
        if isinstance(fn, LegacyRolloutFn):
            world.train(fn, 0)
    except Exception as error:
        return error
    raise AssertionError("construction succeeded where it must fail")


@pytest.mark.clause("OPT-1")
@pytest.mark.parametrize("flag", list(UNSUPPORTED))
def test_each_unsupported_option_is_rejected_by_name(
    world: MilesWorld, workdir: Path, flag: str
) -> None:
    attribute, value = UNSUPPORTED[flag]
    args = miles_args(**{attribute: value})

    error = construction_error(
        world, args, write_config(workdir, "mv_arith", taskset={"num_tasks": 4})
    )

    assert flag in str(error), f"the error does not name {flag}: {error}"


@pytest.mark.clause("OPT-2", "OPT-3")
@budget(ci=6)
@given(
    offending=st.sets(st.sampled_from(sorted(UNSUPPORTED)), min_size=1),
    supported=supported_options(),
    config_kind=st.sampled_from(["valid", "missing", "unset"]),
)
def test_rejection_names_every_offending_flag_before_touching_anything(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
    offending: set[str],
    supported: dict[str, Any],
    config_kind: str,
) -> None:
    world.engine.reset()
    args = miles_args(**supported, **dict(UNSUPPORTED[flag] for flag in offending))
    point_at_engine(args, world.host, world.port)  # so any request would be seen
    config = {
        "valid": write_config(workdir, "mv_arith", taskset={"num_tasks": 4}),
        "missing": workdir / "never-written.toml",
        "unset": None,
    }[config_kind]

    error = construction_error(world, args, config)  # precondition: OPT-1's rejection

    with verdicts.check("OPT-2"):
        missing = [flag for flag in sorted(offending) if flag not in str(error)]
        assert not missing, f"the error does not name {missing}: {error}"
    with verdicts.check("OPT-3"):
        assert world.engine.request_count() == 0, (
            "the engine was called before the options were rejected"
        )
        assert "never-written" not in str(error), (
            f"the config was looked at before the options were rejected: {error}"
        )


@pytest.mark.clause("OPT-4", "CALL-1")
@budget(ci=5)
@given(supported=supported_options())
def test_any_supported_combination_constructs_before_the_engine_exists(
    world: MilesWorld, workdir: Path, verdicts: ClauseBook, supported: dict[str, Any]
) -> None:
    world.engine.reset()
    args = miles_args(**supported)  # no engine address: Miles starts SGLang after construction
    config = write_config(workdir, "mv_arith", taskset={"num_tasks": 4})

    with verdicts.check("OPT-4", hard=True):
        world.construct(args, config)

    with verdicts.check("CALL-1"):
        assert world.engine.request_count() == 0, (
            "construction sent engine requests before Miles set the engine address"
        )


@pytest.mark.clause("OPT-5")
def test_missing_response_limit_is_a_construction_error(world: MilesWorld, workdir: Path) -> None:
    args = miles_args(rollout_max_response_len=None)

    error = construction_error(
        world, args, write_config(workdir, "mv_arith", taskset={"num_tasks": 4})
    )

    assert "--rollout-max-response-len" in str(error), str(error)


@pytest.mark.clause("CFG-1")
@pytest.mark.parametrize("value", [None, ""], ids=["unset", "empty"])
def test_missing_config_variable_is_named(world: MilesWorld, value: str | None) -> None:
    error = construction_error(world, miles_args(), value)

    assert "VERIFIERS_CONFIG" in str(error), str(error)


@pytest.mark.clause("CFG-2")
@pytest.mark.parametrize("kind", ["missing", "not_toml", "invalid_toml"])
def test_unreadable_config_names_the_path(world: MilesWorld, workdir: Path, kind: str) -> None:
    path = {
        "missing": workdir / "absent" / "env.toml",
        "not_toml": workdir / "env-config.json",
        "invalid_toml": workdir / "broken-config.toml",
    }[kind]
    if kind == "not_toml":
        path.write_text('{"taskset": {"id": "mv-arith"}}')
    if kind == "invalid_toml":
        path.write_text("[taskset\nid = mv-arith\n")

    error = construction_error(world, miles_args(), path)

    assert path.name in str(error), f"the error does not name {path}: {error}"


@pytest.mark.clause("CFG-3")
def test_group_reward_taskset_needs_two_samples_per_prompt(
    world: MilesWorld, workdir: Path
) -> None:
    args = miles_args(n_samples_per_prompt=1)
    config = write_config(workdir, "mv_group", taskset={"num_tasks": 4})
    if taskset_of(config) == "mv-group04":
        pytest.skip(
            "@group_reward is gone since Verifiers 0.3: a 0.4 episode is judged on its own by "
            "Env.finalize (FIN-1, FIN-2), so one sample per prompt is a valid 0.4 run"
        )

    error = construction_error(world, args, config)

    assert "--n-samples-per-prompt" in str(error), str(error)


def taskset_of(config: Path) -> str:
    return str(tomllib.loads(config.read_text(encoding="utf-8"))["taskset"]["id"])


# mv-dialogue04: a trainable "assistant" seat and an untrainable "quiz_master" (0.4 only).
SEATED_TASKSET = "mv-dialogue04"


@pytest.mark.clause("CFG-4")
@pytest.mark.parametrize(
    ("tables", "names"),
    [
        (
            {"assistant": {"sampling": {"temperature": 0.5}}},
            ["[assistant.sampling] temperature", "--rollout-temperature"],
        ),
        ({"quiz_master": {"model": "gpt-4.1-mini"}}, ["[quiz_master] model"]),
    ],
    ids=["trainable-seat-sampling", "model-without-client"],
)
def test_a_seat_pin_miles_cannot_train_faithfully_is_refused_by_its_key(
    world: MilesWorld, workdir: Path, tables: dict[str, Any], names: list[str]
) -> None:
    config = write_config(workdir, "mv_dialogue", taskset={"num_tasks": 2}, **tables)
    require_taskset(config, SEATED_TASKSET)
    args = miles_args(rollout_temperature=1.0)

    error = construction_error(world, args, config)

    missing = [name for name in names if name not in str(error)]
    assert not missing, f"the error does not name {missing}: {error}"
