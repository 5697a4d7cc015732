"""Construction: every option and config problem is reported before any episode or request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from miles_verifiers import AdapterSettings, VerifiersRolloutFn
from miles_verifiers.clients import EngineAddressUnsetError
from miles_verifiers.contract.compat import contract

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
    "--group-rm": {
        "group_rm": True,
        "custom_rm_path": f"{HOOKS}.group_size_reward",
        "eval_interval": 5,
    },
}


def construct(
    args: Any, config: Path | None, use_config: Any, monkeypatch: pytest.MonkeyPatch
) -> Any:
    if config is None:
        monkeypatch.delenv("VERIFIERS_CONFIG", raising=False)
    else:
        use_config(config)
    return VerifiersRolloutFn(contract().RolloutFnConstructorInput(args=args, data_source=None))


def construction_error(
    args: Any, config: Path | None, use_config: Any, monkeypatch: pytest.MonkeyPatch
) -> Exception:
    with pytest.raises(Exception) as caught:
        construct(args, config, use_config, monkeypatch)
    return caught.value


@pytest.mark.parametrize("flag", sorted(UNSUPPORTED))
def test_each_unsupported_option_is_refused_by_name_before_anything_runs(
    flag: str,
    engine: RecordingEngine,
    engine_port: int,
    use_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    attribute, value = UNSUPPORTED[flag]
    args = miles_args(**{attribute: value})
    point_at(args, engine_port)  # so any request would reach the engine and be counted

    error = construction_error(args, None, use_config, monkeypatch)  # no config: options come first

    assert flag in str(error)
    assert "VERIFIERS_CONFIG" not in str(error)
    assert engine.requests_seen() == 0


@pytest.mark.parametrize("flag", sorted(INVALID))
def test_each_invalid_option_is_refused_by_name_before_anything_runs(
    flag: str,
    engine: RecordingEngine,
    engine_port: int,
    use_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    args = miles_args(**INVALID[flag])
    point_at(args, engine_port)

    error = construction_error(
        args, write_config(tmp_path, "mv_arith", taskset={"num_tasks": 2}), use_config, monkeypatch
    )

    assert flag in str(error)
    assert engine.requests_seen() == 0


def test_a_missing_config_variable_is_named(
    engine: RecordingEngine, use_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    error = construction_error(miles_args(), None, use_config, monkeypatch)

    assert "VERIFIERS_CONFIG" in str(error)


def test_a_group_reward_taskset_with_one_sample_per_prompt_is_refused_by_flag(
    engine: RecordingEngine,
    engine_port: int,
    use_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    args = miles_args(n_samples_per_prompt=1)
    point_at(args, engine_port)

    error = construction_error(
        args, write_config(tmp_path, "mv_group", taskset={"num_tasks": 2}), use_config, monkeypatch
    )

    assert "--n-samples-per-prompt" in str(error)
    assert engine.requests_seen() == 0


def test_template_switches_the_renderer_does_not_have_are_refused_by_flag(
    use_config: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = miles_args(apply_chat_template_kwargs={"no_such_switch": True})

    error = construction_error(
        args, write_config(tmp_path, "mv_arith", taskset={"num_tasks": 2}), use_config, monkeypatch
    )

    assert "--apply-chat-template-kwargs" in str(error)


def test_construction_needs_no_engine_address_and_sends_nothing(
    engine: RecordingEngine, use_config: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    args = miles_args()  # Miles sets the router address only after construction

    construct(
        args, write_config(tmp_path, "mv_arith", taskset={"num_tasks": 2}), use_config, monkeypatch
    )

    assert engine.requests_seen() == 0


def test_a_call_before_the_router_address_is_set_fails_at_once_saying_so(
    engine: RecordingEngine,
    miles_loop: MilesLoop,
    use_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    fn = construct(
        miles_args(),
        write_config(tmp_path, "mv_arith", taskset={"num_tasks": 2}),
        use_config,
        monkeypatch,
    )

    with pytest.raises(EngineAddressUnsetError, match="sglang_router_ip"):
        call(fn, contract().RolloutFnTrainInput(rollout_id=0), miles_loop)
    assert engine.requests_seen() == 0


def test_adapter_settings_are_read_from_the_environment() -> None:
    settings = AdapterSettings.from_environ(
        {"MILES_VERIFIERS_RENDERER_POOL_SIZE": "1", "MILES_VERIFIERS_EPISODE_TIMEOUT_S": "90"}
    )

    assert settings.renderer_pool_size == 1 and settings.episode_timeout_s == 90.0


def test_a_bad_adapter_setting_is_refused_naming_its_variable() -> None:
    with pytest.raises(ValueError, match="MILES_VERIFIERS_EPISODE_TIMEOUT_S"):
        AdapterSettings.from_environ({"MILES_VERIFIERS_EPISODE_TIMEOUT_S": "-3"})


@pytest.mark.parametrize(("use_miles_router", "warned"), [(False, True), (True, False)])
def test_a_sampling_key_the_rust_router_drops_is_warned_about_at_construction(
    use_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    use_miles_router: bool,
    warned: bool,
) -> None:
    import miles_verifiers.clients as clients

    configured = clients.sampling_config_values
    monkeypatch.setattr(
        clients,
        "sampling_config_values",
        lambda sampling, seed=None: {**configured(sampling, seed), "logit_bias": {"7": 1.0}},
    )
    args = miles_args(use_miles_router=use_miles_router)
    with caplog.at_level("WARNING", logger="miles_verifiers.clients"):
        construct(
            args,
            write_config(tmp_path, "mv_arith", taskset={"num_tasks": 2}),
            use_config,
            monkeypatch,
        )
    messages = [r.getMessage() for r in caplog.records]
    warnings = [m for m in messages if "drops without an error" in m]
    assert bool(warnings) is warned
    assert all("logit_bias" in w for w in warnings)
