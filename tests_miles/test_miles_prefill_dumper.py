"""``--recompute-logprobs-via-prefill``, the SGLang dumper and the debug rollout dump: Miles'
own helpers, executed against the loopback engine over HTTP."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.rollout.rollout_support import RecordingEngine, write_config
from tests_miles.support import build, evaluate, run_args, train

CLASS_PATH = "miles_verifiers.VerifiersRolloutFn"


@pytest.fixture
def arith(tmp_path: Path, use_config: Any) -> Path:
    config = write_config(tmp_path, "mv_arith", taskset={"num_tasks": 4})
    use_config(config)
    return config


@pytest.fixture
def miles_http_client() -> None:
    """The process-wide client Miles' ``post`` uses; the manager creates it after building the
    rollout function, before the first call."""
    from miles.utils.http_utils import init_http_client

    init_http_client(run_args())


def test_prefill_recompute_replaces_every_logprob_with_the_engine_prefill_score(
    engine: RecordingEngine, engine_port: int, arith: Path, miles_http_client: None
) -> None:
    args = run_args(recompute_logprobs_via_prefill=True)
    output = train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    samples = [s for group in output.samples for s in group]
    assert all(
        s.metadata.get("rollout_log_probs_source") == "sglang_prefill_recompute" for s in samples
    )
    assert all(len(s.rollout_log_probs) == s.response_length for s in samples)
    scoring = [
        b
        for b in engine.bodies
        if isinstance(b, dict) and b["sampling_params"].get("max_new_tokens") == 0
    ]
    assert scoring, "no prefill scoring request reached the engine"


def test_the_dumper_is_configured_on_every_engine_before_a_call_generates(
    engine: RecordingEngine, engine_port: int, arith: Path, miles_http_client: None, tmp_path: Path
) -> None:
    engine.dumper_requests.clear()
    args = run_args(dumper_enable=True, dumper_dir=str(tmp_path / "dump"))
    train(build(CLASS_PATH, args, engine_port), rollout_id=0)

    assert list(engine.dumper_requests) == [
        (
            "configure",
            {"enable": True, "dir": str(tmp_path / "dump"), "exp_name": "engines/engine_0"},
        )
    ]


def test_no_dumper_request_is_sent_when_the_dumper_is_off(
    engine: RecordingEngine, engine_port: int, arith: Path, miles_http_client: None
) -> None:
    engine.dumper_requests.clear()
    train(build(CLASS_PATH, run_args(), engine_port), rollout_id=0)

    assert list(engine.dumper_requests) == []


def test_miles_saves_and_reloads_the_adapter_rollout_data_sample_for_sample(
    engine: RecordingEngine, engine_port: int, arith: Path, tmp_path: Path
) -> None:
    from miles.ray.rollout.debug_data import load_debug_rollout_data, save_debug_rollout_data
    from miles.ray.rollout.rollout_data_conversion import postprocess_rollout_data

    template = str(tmp_path / "debug" / "rollout_{rollout_id}.pt")
    args = run_args(
        eval_interval=1, save_debug_rollout_data=template, load_debug_rollout_data=template
    )
    fn = build(CLASS_PATH, args, engine_port)
    flat, metadata = postprocess_rollout_data(args, train(fn, rollout_id=0).samples, None)
    save_debug_rollout_data(args, flat, rollout_id=0, evaluation=False, metadata=metadata)
    save_debug_rollout_data(args, evaluate(fn, rollout_id=0).data, rollout_id=0, evaluation=True)

    reloaded, _ = load_debug_rollout_data(args, rollout_id=0)
    assert [s.to_dict() for s in reloaded] == [s.to_dict() for s in flat]
    assert (tmp_path / "debug" / "rollout_eval_0.pt").is_file()
