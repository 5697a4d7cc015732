"""Construction: every option and config problem is reported before any episode or request."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers.errors import SetupError
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.engine_settings import EngineAddressUnsetError
from tests.adapter.state_dir_support import other_process
from tests.rollout.rollout_support import (
    MilesLoop,
    RecordingEngine,
    call,
    miles_args,
    point_at,
    write_config,
)

HOOKS = "tests.rollout.hooks_for_tests"

# flag -> (attribute, value turning it on)
UNSUPPORTED: dict[str, tuple[str, Any]] = {
    "--disable-rollout-global-dataset": ("rollout_global_dataset", True),
    "--partial-rollout": ("partial_rollout", True),
    "--multimodal-keys": ("multimodal_keys", {"image": "images"}),
    "--chat-template-path": ("chat_template_path", "/models/template.jinja"),
    "--use-opd": ("use_opd", True),
    "--use-rollout-routing-replay": ("use_rollout_routing_replay", True),
    "--use-rollout-indexer-replay": ("use_rollout_indexer_replay", True),
    "--multi-lora": ("multi_lora", True),
}

# flag the error must name -> the Miles options that are wrong
INVALID: dict[str, dict[str, Any]] = {
    "--rollout-max-response-len": {"rollout_max_response_len": None},
    "--hf-checkpoint": {"hf_checkpoint": None},
    "--rollout-max-prompt-len": {"rollout_max_context_len": 100, "rollout_max_prompt_len": 100},
    "--dynamic-sampling-filter-path": {
        "dynamic_sampling_filter_path": "tests.rollout.no_such_module.fn"
    },
    "--rollout-sample-filter-path": {"rollout_sample_filter_path": f"{HOOKS}.NOT_A_FUNCTION"},
    "--rollout-all-samples-process-path": {"rollout_all_samples_process_path": f"{HOOKS}:missing"},
    "--recompute-logprobs-via-prefill": {"recompute_logprobs_via_prefill": True},
    "--rm-type": {"rm_type": "math"},
    "--save-interval": {"save_interval": 0},
    "--group-rm": {
        "group_rm": True,
        "custom_rm_path": f"{HOOKS}.group_size_reward",
        "eval_interval": 5,
    },
}


class Constructions:
    """Constructs the rollout function as Miles does, with ``VERIFIERS_CONFIG`` naming a config:
    the given one, else the two-task arithmetic config."""

    def __init__(self, use_config: Any, monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
        self._use_config = use_config
        self._monkeypatch = monkeypatch
        self._folder = folder

    def __call__(self, args: Any, config: Path | None = None) -> Any:
        if config is None:
            config = write_config(self._folder, "mv_arith", taskset={"num_tasks": 2})
        self._use_config(config)
        return self._construct(args)

    def error(self, args: Any, config: Path | None = None) -> Exception:
        """The error constructing with ``args`` and ``config`` raises."""
        with pytest.raises(Exception) as caught:
            self(args, config)
        return caught.value

    def error_without_config(self, args: Any) -> Exception:
        """The error constructing with ``args`` and ``VERIFIERS_CONFIG`` unset raises."""
        self._monkeypatch.delenv("VERIFIERS_CONFIG", raising=False)
        with pytest.raises(Exception) as caught:
            self._construct(args)
        return caught.value

    @staticmethod
    def _construct(args: Any) -> Any:
        return VerifiersRolloutFn(contract().RolloutFnConstructorInput(args=args, data_source=None))


@pytest.fixture
def construct(use_config: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Constructions:
    return Constructions(use_config, monkeypatch, tmp_path)


@pytest.mark.parametrize("flag", sorted(UNSUPPORTED))
def test_each_unsupported_option_is_refused_by_name_before_anything_runs(
    flag: str,
    engine: RecordingEngine,
    engine_port: int,
    construct: Constructions,
) -> None:
    attribute, value = UNSUPPORTED[flag]
    args = miles_args(**{attribute: value})
    point_at(args, engine_port)  # so any request would reach the engine and be counted

    error = construct.error_without_config(args)  # no config: options come first

    assert flag in str(error)
    assert "VERIFIERS_CONFIG" not in str(error)
    assert engine.requests_seen() == 0


@pytest.mark.parametrize("flag", sorted(INVALID))
def test_each_invalid_option_is_refused_by_name_before_anything_runs(
    flag: str,
    engine: RecordingEngine,
    engine_port: int,
    construct: Constructions,
) -> None:
    args = miles_args(**INVALID[flag])
    point_at(args, engine_port)

    error = construct.error(args)

    assert flag in str(error)
    assert engine.requests_seen() == 0


# transport limits SGLang would refuse -> (the flag the problem names, words of its own fix)
TRANSPORT_LIMITS: dict[str, tuple[dict[str, Any], str, str]] = {
    "prompt cap at the context length": (
        {"rollout_max_context_len": 100, "rollout_max_prompt_len": 100},
        "--rollout-max-prompt-len",
        "pass --rollout-max-prompt-len at most 99",
    ),
    "eval prompt cap above the eval context": (
        {"eval_max_context_len": 50, "eval_max_prompt_len": 60},
        "--eval-max-prompt-len",
        "pass --eval-max-prompt-len at most 49",
    ),
    # (eval, because Miles' post-parse fix-ups turn a rollout context of 1 into a prompt cap of 0)
    "context of one token": (
        {"eval_max_context_len": 1},
        "--eval-max-context-len",
        "pass --eval-max-context-len N with N >= 2",
    ),
    "33 stop strings": (
        {"rollout_stop": [f"<stop{i}>" for i in range(33)]},
        "--rollout-stop",
        "at most 32 strings to --rollout-stop",
    ),
    "an empty stop string": ({"rollout_stop": [""]}, "--rollout-stop", "drop the empty string"),
    "a negative stop token id": (
        {"rollout_stop_token_ids": [-1]},
        "--rollout-stop-token-ids",
        "token ids of 0 or more",
    ),
}


@pytest.mark.parametrize("case", sorted(TRANSPORT_LIMITS))
def test_each_transport_limit_problem_carries_its_own_fix(
    case: str, construct: Constructions
) -> None:
    values, flag, fix = TRANSPORT_LIMITS[case]

    error = construct.error(miles_args(**values))

    problems = [p for p in getattr(error, "problems", ()) if p.flag == flag]
    assert problems, f"no problem names {flag}: {error}"
    assert all(fix in p.fix for p in problems), [p.fix for p in problems]


def test_a_limit_problem_of_a_flag_both_modes_share_is_reported_once(
    construct: Constructions,
) -> None:
    error = construct.error(miles_args(rollout_stop=[""]))

    assert [p.flag for p in getattr(error, "problems", ())] == ["--rollout-stop"]


@pytest.mark.parametrize(
    "mode",
    [
        {"num_rollout": 0, "eval_interval": 5, "n_samples_per_eval_prompt": 2},  # seed + 3
        {"num_rollout": 1},  # the training stream's offsets over one call
    ],
    ids=["eval", "train"],
)
def test_a_seed_whose_derived_sampling_seeds_overflow_the_router_is_refused_by_flag(
    mode: dict[str, Any], construct: Constructions
) -> None:
    args = miles_args(rollout_seed=2**63 - 2, sglang_enable_deterministic_inference=True, **mode)

    error = construct.error(args)

    assert "--rollout-seed" in str(error)


def test_a_missing_config_variable_is_named(
    engine: RecordingEngine, construct: Constructions
) -> None:
    error = construct.error_without_config(miles_args())

    assert "VERIFIERS_CONFIG" in str(error)


def test_a_group_reward_taskset_with_one_sample_per_prompt_is_refused_by_flag(
    engine: RecordingEngine, engine_port: int, construct: Constructions, tmp_path: Path
) -> None:
    args = miles_args(n_samples_per_prompt=1)
    point_at(args, engine_port)

    error = construct.error(args, write_config(tmp_path, "mv_group", taskset={"num_tasks": 2}))

    assert "--n-samples-per-prompt" in str(error)
    assert engine.requests_seen() == 0


def test_template_switches_the_renderer_does_not_have_are_refused_by_flag(
    construct: Constructions,
) -> None:
    args = miles_args(apply_chat_template_kwargs={"no_such_switch": True})

    error = construct.error(args)

    assert "--apply-chat-template-kwargs" in str(error)


def test_construction_needs_no_engine_address_and_sends_nothing(
    engine: RecordingEngine, construct: Constructions
) -> None:
    args = miles_args()  # Miles sets the router address only after construction

    construct(args)

    assert engine.requests_seen() == 0


def test_a_task_prompt_with_an_image_part_is_refused_naming_the_task_and_the_part_type(
    engine: RecordingEngine, construct: Constructions, tmp_path: Path
) -> None:
    config = write_config(
        tmp_path, "mv_arith", taskset={"num_tasks": 2, "prompt_form": "parts_with_image"}
    )

    error = construct.error(miles_args(), config)

    assert isinstance(error, ValueError)
    assert "task 0" in str(error) and "'image_url'" in str(error)
    assert engine.requests_seen() == 0


def test_a_call_before_the_router_address_is_set_fails_at_once_saying_so(
    engine: RecordingEngine,
    miles_loop: MilesLoop,
    construct: Constructions,
) -> None:
    fn = construct(miles_args())

    with pytest.raises(EngineAddressUnsetError, match="sglang_router_ip"):
        call(fn, contract().RolloutFnTrainInput(rollout_id=0), miles_loop)
    assert engine.requests_seen() == 0


def test_adapter_settings_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_RENDERER_POOL_SIZE", "1")
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_TIMEOUT_S", "90")

    settings = AdapterSettings.from_environ()

    assert settings.renderer_pool_size == 1 and settings.episode_timeout_s == 90.0


def test_an_empty_adapter_setting_counts_as_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_TIMEOUT_S", "")

    assert AdapterSettings.from_environ().episode_timeout_s == 3600.0


@pytest.mark.parametrize("value", ["-3", "nan", "inf"])
def test_a_bad_adapter_setting_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_TIMEOUT_S", value)

    with pytest.raises(SetupError, match="MILES_VERIFIERS_EPISODE_TIMEOUT_S"):
        AdapterSettings.from_environ()


@pytest.mark.parametrize("value", ["nan", "inf", "1e400"])
@pytest.mark.parametrize(
    "variable",
    [
        "MILES_VERIFIERS_EPISODE_TIMEOUT_S",
        "MILES_VERIFIERS_ABORT_TIMEOUT_S",
        "MILES_VERIFIERS_CLEANUP_GRACE_S",
        "MILES_VERIFIERS_SHUTDOWN_TIMEOUT_S",
        "MILES_VERIFIERS_HANDLER_GRACE_S",
    ],
)
def test_an_adapter_duration_that_is_not_finite_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)

    with pytest.raises(SetupError, match=variable):
        AdapterSettings.from_environ()


# -- the --save directory ------------------------------------------------------------------------


@pytest.fixture
def save(tmp_path: Path) -> Path:
    """A ``--save`` directory of the test's own (not yet made)."""
    return tmp_path / "ckpt"


def test_a_save_directory_that_cannot_be_written_is_refused_at_construction_naming_save(
    construct: Constructions, tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("")
    args = miles_args(save=str(tmp_path / "a-file" / "ckpt"))

    error = construct.error(args)

    assert "--save" in str(error) and str(tmp_path / "a-file" / "ckpt") in str(error)


def test_a_save_directory_another_run_holds_is_refused_at_construction_naming_it(
    construct: Constructions, save: Path
) -> None:
    with other_process(save) as (holder, said):
        assert said == "claimed"
        error = construct.error(miles_args(save=str(save)))

    assert "--save" in str(error) and str(save) in str(error)
    assert str(holder.pid) in str(error)


def another_process_claiming(save: Path) -> str:
    """What another process says when it tries to claim ``save``."""
    with other_process(save) as (_, said):
        return said


def test_a_rollout_function_holds_its_save_directory_until_closed(
    construct: Constructions, save: Path
) -> None:
    fn = construct(miles_args(save=str(save)))
    assert another_process_claiming(save) == "refused StateDirLockedError"
    fn.close()
    assert another_process_claiming(save) == "claimed"


def test_a_garbage_collected_rollout_function_releases_its_save_directory(
    construct: Constructions, save: Path
) -> None:
    fn = construct(miles_args(save=str(save)))
    del fn
    gc.collect()
    assert another_process_claiming(save) == "claimed"


def test_two_rollout_functions_of_one_process_may_share_a_save_directory(
    construct: Constructions, save: Path
) -> None:
    # Miles may build a train and an eval instance from the same arguments in one process.
    first = construct(miles_args(save=str(save)))
    second = construct(miles_args(save=str(save)))
    first.close()
    second.close()


@pytest.mark.parametrize(("use_miles_router", "warned"), [(False, True), (True, False)])
def test_a_sampling_key_the_rust_router_drops_is_warned_about_at_construction(
    construct: Constructions,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    use_miles_router: bool,
    warned: bool,
) -> None:
    import miles_verifiers.trainer.construction as construction

    configured = construction.sampling_config_values
    monkeypatch.setattr(
        construction,
        "sampling_config_values",
        lambda sampling, seed=None: {**configured(sampling, seed), "logit_bias": {"7": 1.0}},
    )
    args = miles_args(use_miles_router=use_miles_router)
    with caplog.at_level("WARNING", logger="miles_verifiers.trainer.rollout"):
        construct(args)
    messages = [r.getMessage() for r in caplog.records]
    warnings = [m for m in messages if "drops without an error" in m]
    assert bool(warnings) is warned
    assert all("logit_bias" in w for w in warnings)
