"""The episode worker protocol: messages survive JSON, other major versions are refused, frames
are bounded, and a lost worker's group is dropped under its own reason."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from miles_verifiers.episodes.v02.episodes import Generation02
from miles_verifiers.episodes.worker import WorkerHandler
from miles_verifiers.protocol.framing import FrameError, encode_frame, read_frame, tag, untag
from miles_verifiers.protocol.messages import (
    PROTOCOL_VERSION,
    CallStart,
    CleanupSpec,
    Done,
    GroupRequest,
    GroupResult,
    ProtocolVersionError,
    Ready,
    Refused,
    RendererSpecModel,
    Reply,
    Request,
    WorkerSetup,
    read_reply,
    read_request,
)
from miles_verifiers.protocol.records import (
    BranchRecord,
    ErrorRecord,
    NodeRecord,
    PrefixCacheRecord,
    TaskRecord,
    TraceRecord,
)


def a_trace_record() -> TraceRecord:
    return TraceRecord(
        id="t1",
        task=TaskRecord(
            type="ArithTask", idx=3, prompt=[{"role": "user", "content": "1+1"}], label="2"
        ),
        branches=[
            BranchRecord(
                index=0,
                token_ids=[1, 2, 3, 4],
                logprobs=[0.0, 0.0, -0.1234567890123456789, -1e-300],
                num_turns=1,
                nodes=[
                    NodeRecord(mask=[False, False], logprobs=[]),
                    NodeRecord(mask=[True, True], logprobs=[-0.1234567890123456789, -1e-300]),
                ],
            )
        ],
        rewards={"correct": 1.0},
        metrics={"len": 2.0},
        reward=1.0,
        num_turns=1,
        num_output_tokens=2,
        num_total_tokens=4,
        stop_condition="done",
        is_truncated=False,
        last_reply="2",
        error=ErrorRecord(type="EngineAbortedError", message="aborted [miles-verifiers:x]"),
        prefix_cache=PrefixCacheRecord(cached_tokens=1, prompt_tokens=2),
    )


def a_group_request_as_json() -> dict[str, Any]:
    request = Request(
        id=1, body=GroupRequest(call_id="c", slot=0, task_index=0, sampling=[{}], deadline_s=1.0)
    )
    return json.loads(request.model_dump_json())  # type: ignore[no-any-return]


def a_setup() -> WorkerSetup:
    return WorkerSetup(
        config_path="/x.toml",
        config_text="",
        expected_tasks=1,
        renderer=RendererSpecModel(tokenizer_source="t", identity=None),
        transport={},
        cleanup=CleanupSpec(abort_s=1, grace_s=1, shutdown_s=1, handler_s=1),
    )


def test_a_group_request_survives_a_json_round_trip() -> None:
    request = Request(
        id=7,
        body=GroupRequest(
            call_id="mvt_abc",
            slot=12,
            task_index=4,
            sampling=[
                {"temperature": 1.0, "sampling_seed": 5},
                {"temperature": 1.0, "sampling_seed": 6},
            ],
            deadline_s=30.0,
        ),
    )
    assert read_request(request.model_dump_json()) == request


def test_a_setup_and_a_call_start_survive_a_json_round_trip() -> None:
    for body in (
        WorkerSetup(
            config_path="/x/env.toml",
            config_text='[taskset]\nid = "mv-arith"\n',
            expected_tasks=3,
            renderer=RendererSpecModel(tokenizer_source="Qwen/Qwen3-0.6B", identity=None),
            transport={"train": {"max_response_len": 64}},
            cleanup=CleanupSpec(abort_s=1, grace_s=1, shutdown_s=1, handler_s=0.5),
        ),
        CallStart(
            call_id="mvt_abc",
            mode="eval",
            rid_prefix="mvt_abc_w0g1",
            engine_url="http://127.0.0.1:1",
            model="m",
            max_concurrency=4,
        ),
    ):
        request = Request(id=1, body=body)
        assert read_request(request.model_dump_json()) == request


def test_a_group_result_keeps_every_log_prob_bit_for_bit() -> None:
    reply = Reply(id=3, body=GroupResult(traces=[a_trace_record()]))
    back = read_reply(reply.model_dump_json())
    assert back == reply
    assert back.body.traces[0].branches[0].logprobs == a_trace_record().branches[0].logprobs


def test_a_request_of_another_major_version_is_refused_naming_both_versions() -> None:
    raw = a_group_request_as_json()
    raw["version"] = "3.0"
    with pytest.raises(ProtocolVersionError) as caught:
        read_request(json.dumps(raw))
    assert "3.0" in str(caught.value) and PROTOCOL_VERSION in str(caught.value)


def test_a_reply_of_another_major_version_is_refused_by_the_trainer_naming_both_versions() -> None:
    raw = json.loads(Reply(id=1, body=Done()).model_dump_json())
    raw["version"] = "1.0"
    with pytest.raises(ProtocolVersionError) as caught:
        read_reply(json.dumps(raw))
    message = str(caught.value)
    assert "protocol 1.0" in message and f"protocol {PROTOCOL_VERSION}" in message
    assert "the trainer speaks" in message


def test_an_older_minor_version_of_the_same_major_is_read() -> None:
    raw = json.loads(Reply(id=4, body=Done()).model_dump_json())
    raw["version"] = f"{PROTOCOL_VERSION.split('.')[0]}.0"
    assert read_reply(json.dumps(raw)).id == 4


def test_fields_a_newer_minor_version_adds_are_ignored_in_a_request() -> None:
    raw = a_group_request_as_json()
    raw["version"] = f"{PROTOCOL_VERSION.split('.')[0]}.7"
    raw["priority"] = "high"
    raw["body"]["cache_salt"] = "s"
    request = read_request(json.dumps(raw))
    assert isinstance(request.body, GroupRequest) and request.body.task_index == 0


def test_fields_a_newer_minor_version_adds_are_ignored_in_a_reply_down_to_its_records() -> None:
    raw = json.loads(Reply(id=3, body=GroupResult(traces=[a_trace_record()])).model_dump_json())
    raw["version"] = f"{PROTOCOL_VERSION.split('.')[0]}.7"
    raw["body"]["episode_status"] = "ok"
    raw["body"]["traces"][0]["agent"] = {"name": "user", "trainable": False}
    raw["body"]["traces"][0]["branches"][0]["advantages"] = [0.5]
    reply = read_reply(json.dumps(raw))
    assert isinstance(reply.body, GroupResult)
    assert reply.body.traces[0] == a_trace_record()


def test_the_answer_to_a_setup_is_the_workers_hello_with_its_versions() -> None:
    handler = WorkerHandler(Generation02(builder=lambda setup: object()))
    request = Request(
        id=5,
        body=a_setup(),
    )
    reply = read_reply(asyncio.run(handler.handle_frame(request.model_dump_json().encode())))
    assert isinstance(reply.body, Ready) and reply.body.protocol == PROTOCOL_VERSION
    assert {"python", "miles-verifiers", "verifiers", "renderers"} <= set(reply.body.versions)


def test_a_newer_minor_version_of_the_same_major_is_read() -> None:
    raw = a_group_request_as_json()
    raw["version"] = f"{PROTOCOL_VERSION.split('.')[0]}.99"
    assert read_request(json.dumps(raw)).id == 1


def test_a_worker_answers_another_major_version_with_a_refusal_and_builds_nothing() -> None:
    built: list[object] = []
    handler = WorkerHandler(Generation02(builder=built.append))
    raw = json.loads(
        Request(
            id=9,
            body=a_setup(),
        ).model_dump_json()
    )
    raw["version"] = "0.1"

    reply = read_reply(asyncio.run(handler.handle_frame(json.dumps(raw).encode())))

    assert reply.id == 9 and isinstance(reply.body, Refused)
    assert reply.body.error_type == "ProtocolVersionError" and "0.1" in reply.body.message
    assert built == []


def test_a_group_for_a_call_the_worker_never_started_is_refused() -> None:
    handler = WorkerHandler()
    request = Request(
        id=2, body=GroupRequest(call_id="c", slot=0, task_index=0, sampling=[{}], deadline_s=1.0)
    )
    reply = read_reply(asyncio.run(handler.handle_frame(request.model_dump_json().encode())))
    assert isinstance(reply.body, Refused) and "setup" in reply.body.message


def _read_all(data: bytes) -> list[bytes | None]:
    async def run() -> list[bytes | None]:
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        frames: list[bytes | None] = []
        while True:
            frame = await read_frame(reader)
            frames.append(frame)
            if frame is None:
                return frames

    return asyncio.run(run())


def test_tagged_frames_round_trip_and_the_stream_ends_cleanly_between_frames() -> None:
    data = encode_frame(tag(5, b'{"a":1}')) + encode_frame(tag(-1, b""))
    frames = _read_all(data)
    assert [untag(f) for f in frames[:-1] if f is not None] == [(5, b'{"a":1}'), (-1, b"")]
    assert frames[-1] is None


def test_a_stream_cut_inside_a_frame_is_refused() -> None:
    data = encode_frame(b"0123456789")[:-3]
    with pytest.raises(FrameError, match="short"):
        _read_all(data)


def test_a_frame_announcing_more_than_the_limit_is_refused_unread() -> None:
    with pytest.raises(FrameError, match="limit"):
        _read_all(b"\xff\xff\xff\xff")


def test_a_refusal_of_a_class_unknown_here_keeps_its_nearest_known_base() -> None:
    from miles_verifiers.protocol.config_file import ConfigError
    from miles_verifiers.trainer.backends.setup import _as_setup_error

    refused = Refused(
        error_type="SchemaOnlyTheWorkerKnows",
        message="taskset.num_tasks: not a number",
        error_bases=("SchemaBaseOnlyTheWorkerKnows", "ConfigError", "SetupError", "Exception"),
    )

    error = _as_setup_error(refused)

    assert isinstance(error, ConfigError)
    assert "SchemaOnlyTheWorkerKnows: taskset.num_tasks" in str(error)


def test_the_worker_sends_the_bases_of_the_error_it_refuses_with() -> None:
    from miles_verifiers.episodes.worker import _refused
    from miles_verifiers.protocol.config_file import ConfigSyntaxError

    refused = _refused(ConfigSyntaxError("line 1: no value", field="taskset", fix="add one"))

    assert refused.error_bases[:2] == ("ConfigError", "SetupError")
