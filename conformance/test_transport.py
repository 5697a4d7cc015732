"""The SGLang payloads an adapter sends, observed on the engine side.

For arbitrary sampling settings and limits, on single-turn and bridged multi-turn tool
conversations, every ``/generate`` call must carry only sampling keys SGLang accepts, respect
the token limits, carry the configured values, and the samples must hold exactly what the
engine returned.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from miles_verifiers_conformance.budget import budget
from miles_verifiers_conformance.checks import check_round_trip, check_train_output
from miles_verifiers_conformance.miles_side import miles_args
from miles_verifiers_conformance.verdicts import ClauseBook
from miles_verifiers_conformance.world import GenerateCall, MilesWorld, write_config
from miles_verifiers_testkit.engine.schema_gate import (
    SGLANG_INSTALL_HINT,
    installed_sglang_version,
    load_sglang_api_types,
)


def installed_sampling_keys() -> frozenset[str] | None:
    """The fields of the installed SGLang's ``SamplingParams`` (its msgspec request schema, read
    by file path), or None when sglang is not installed. Keys the older 0.5.16 fork lacks are
    caught separately: the engine imitating it answers 500 to them, failing the status check."""
    module = load_sglang_api_types()
    if module is None:
        return None
    return frozenset(module.SamplingParams.__struct_fields__)


SGLANG_SAMPLING_KEYS = installed_sampling_keys()
# Qwen3's generation prompt, and the empty thinking block enable_thinking=false adds to it.
QWEN3_ASSISTANT_OPEN = [151644, 77091, 198]
QWEN3_EMPTY_THINKING = [151667, 271, 151668, 271]
# top_k values SGLang reads as "no top-k".
NO_TOP_K = {None, -1, 1 << 30}


@st.composite
def sampling_settings(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "rollout_temperature": draw(st.sampled_from([0.0, 0.3, 0.7, 1.0, 1.3])),
        "rollout_top_p": draw(st.sampled_from([0.2, 0.9, 1.0])),
        "rollout_top_k": draw(st.sampled_from([-1, 1, 5, 40])),
        "rollout_max_response_len": draw(st.integers(4, 96)),
        "rollout_max_context_len": draw(st.none() | st.integers(700, 2000)),
        "rollout_stop_token_ids": draw(st.none() | st.just([151643]) | st.just([151643, 151646])),
        "rollout_skip_special_tokens": draw(st.booleans()),
        "apply_chat_template_kwargs": draw(
            st.sampled_from([{}, {"enable_thinking": False}, {"enable_thinking": True}])
        ),
        "sglang_enable_deterministic_inference": draw(st.booleans()),
    }


def check_payload(call: GenerateCall, args: Any) -> None:
    """TRP-1, TRP-2 and TRP-4 of one ``/generate`` call."""
    check_payload_keys(call)
    check_payload_limits(call, args)
    check_payload_values(call, args)


def check_payload_keys(call: GenerateCall) -> None:
    """TRP-1: the engine accepted the request, and every sampling key is one SGLang defines."""
    params = call.sampling_params
    assert call.status == 200, (
        f"the engine refused a request ({call.status}): {str(call.response)[:300]}"
    )
    unknown = set(params) - (SGLANG_SAMPLING_KEYS or set(params))
    assert not unknown, (
        f"sampling_params carries keys SGLang {installed_sglang_version()}'s SamplingParams "
        f"does not define: {sorted(unknown)}"
    )


def check_payload_limits(call: GenerateCall, args: Any) -> None:
    """TRP-2: max_new_tokens bounded by the response limit and, with the prompt, the context."""
    new_tokens = call.sampling_params.get("max_new_tokens")
    assert isinstance(new_tokens, int), "every request must bound max_new_tokens"
    assert new_tokens <= args.rollout_max_response_len, (
        f"max_new_tokens {new_tokens} exceeds --rollout-max-response-len {args.rollout_max_response_len}"
    )
    if args.rollout_max_context_len is not None:
        total = len(call.input_ids) + new_tokens
        assert total <= args.rollout_max_context_len, (
            f"prompt {len(call.input_ids)} + max_new_tokens {new_tokens} exceeds --rollout-max-context-len "
            f"{args.rollout_max_context_len}"
        )


def check_payload_values(call: GenerateCall, args: Any) -> None:
    """TRP-4: configured values reach the engine (SGLang's defaults stand in for absent keys)."""
    params = call.sampling_params
    assert params.get("temperature", 1.0) == pytest.approx(args.rollout_temperature)
    assert params.get("top_p", 1.0) == pytest.approx(args.rollout_top_p)
    top_k = params.get("top_k")
    assert top_k == args.rollout_top_k or (args.rollout_top_k in NO_TOP_K and top_k in NO_TOP_K), (
        f"top_k {top_k} is not the configured {args.rollout_top_k}"
    )
    missing_stops = set(args.rollout_stop_token_ids or ()) - set(params.get("stop_token_ids") or ())
    assert not missing_stops, f"configured stop token ids {sorted(missing_stops)} were not sent"
    assert params.get("skip_special_tokens", True) == args.rollout_skip_special_tokens
    thinking_off = args.apply_chat_template_kwargs.get("enable_thinking") is False
    expected_tail = QWEN3_ASSISTANT_OPEN + (QWEN3_EMPTY_THINKING if thinking_off else [])
    assert call.input_ids[-len(expected_tail) :] == expected_tail, (
        "the prompt does not end with the generation prompt --apply-chat-template-kwargs asks for"
    )


def judge_payloads(verdicts: ClauseBook, calls: list[GenerateCall], args: Any) -> None:
    """Each payload clause in its own block, over every call (one failure per clause)."""
    checks = (
        ("TRP-1", lambda call: check_payload_keys(call)),
        ("TRP-2", lambda call: check_payload_limits(call, args)),
        ("TRP-4", lambda call: check_payload_values(call, args)),
    )
    for clause, check in checks:
        with verdicts.check(clause):
            for call in calls:
                check(call)


@pytest.mark.clause("TRP-1")
def test_payload_keys_are_checked_against_the_installed_sglangs_sampling_params() -> None:
    module = load_sglang_api_types()
    if module is None:
        pytest.skip(
            "sglang is not installed, so payload keys are not checked against its "
            f"SamplingParams; install it without dependencies: {SGLANG_INSTALL_HINT}"
        )
    assert SGLANG_SAMPLING_KEYS == frozenset(module.SamplingParams.__struct_fields__)


@pytest.mark.clause("TRP-1", "TRP-2", "TRP-3", "TRP-4")
@budget(ci=4)
@given(
    settings=sampling_settings(), taskset=st.sampled_from(["mv_arith", "mv_tools"]), data=st.data()
)
def test_engine_payloads_follow_the_settings_and_round_trip(
    world: MilesWorld,
    workdir: Path,
    verdicts: ClauseBook,
    settings: dict[str, Any],
    taskset: str,
    data: st.DataObject,
) -> None:
    # Tool rollouts start an MCP server each, so they run one at a time; arithmetic varies the shape.
    batch, n = (
        (1, 1)
        if taskset == "mv_tools"
        else data.draw(st.tuples(st.integers(1, 2), st.integers(1, 2)), label="batch, n")
    )
    world.engine.reset()
    config = write_config(workdir, taskset, taskset={"num_tasks": 3})
    args = miles_args(rollout_batch_size=batch, n_samples_per_prompt=n, **settings)
    fn = world.start(args, config)

    groups = check_train_output(world.train(fn, 0), args, world.contract)  # precondition

    calls = world.engine.calls()
    assert calls, "the engine saw no request"
    judge_payloads(verdicts, calls, args)
    with verdicts.check("TRP-3"):
        for position, group in enumerate(groups):
            for sample in group:
                check_round_trip(sample, calls, where=f"group {position}")
