"""Converting SGLang /generate answers into Renderers' generate-response JSON."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from renderers.client import _parse_completion_logprobs, parse_generate_response

from miles_verifiers.engine.errors import EngineAborted, MalformedOutput
from miles_verifiers.episodes.transport.response import convert_generate_output

Answer = Callable[..., dict[str, Any]]


def test_ids_logprobs_and_finish_reason_are_carried_over(sglang_answer: Answer) -> None:
    answer = sglang_answer([11, 12, 151645], [-0.1, -2.5, -0.01], rid="mv_x-3")
    assert convert_generate_output(answer, rid="mv_x-3") == {
        "request_id": "mv_x-3",
        "choices": [
            {
                "index": 0,
                "token_ids": [11, 12, 151645],
                "logprobs": {
                    "content": [
                        {"token": "token_id:11", "logprob": -0.1},
                        {"token": "token_id:12", "logprob": -2.5},
                        {"token": "token_id:151645", "logprob": -0.01},
                    ]
                },
                "finish_reason": "stop",
            }
        ],
    }


def test_length_finish_is_reported_as_length(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2], finish={"type": "length", "length": 2})
    assert convert_generate_output(answer, rid="r")["choices"][0]["finish_reason"] == "length"


def test_stop_string_match_is_a_stop(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2], finish={"type": "stop", "matched": "</answer>"})
    assert convert_generate_output(answer, rid="r")["choices"][0]["finish_reason"] == "stop"


def test_missing_engine_id_falls_back_to_our_rid(sglang_answer: Answer) -> None:
    answer = sglang_answer([1])
    del answer["meta_info"]["id"]
    assert convert_generate_output(answer, rid="mv_x-9")["request_id"] == "mv_x-9"


def test_abort_is_raised_not_returned(sglang_answer: Answer) -> None:
    answer = sglang_answer(
        [1, 2],
        finish={"type": "abort", "message": "Aborted", "status_code": None, "err_type": None},
    )
    with pytest.raises(EngineAborted, match="Aborted") as caught:
        convert_generate_output(answer, rid="r")
    assert caught.value.partial_tokens == 2
    assert caught.value.status_code is None


def test_abort_in_waiting_queue_without_counts_is_raised(sglang_answer: Answer) -> None:
    # A queued request's abort has no prompt_tokens/cached_tokens (sglang.md §2.3).
    answer = sglang_answer([], finish={"type": "abort", "message": "Abort in waiting queue"})
    del answer["meta_info"]["prompt_tokens"], answer["meta_info"]["cached_tokens"]
    with pytest.raises(EngineAborted, match="waiting queue"):
        convert_generate_output(answer, rid="r")


def test_abort_keeps_its_status_code(sglang_answer: Answer) -> None:
    answer = sglang_answer([1], finish={"type": "abort", "message": "timeout", "status_code": 503})
    with pytest.raises(EngineAborted) as caught:
        convert_generate_output(answer, rid="r")
    assert caught.value.status_code == 503


def test_abort_given_as_a_plain_string_is_raised(sglang_answer: Answer) -> None:
    answer = sglang_answer([1])
    answer["meta_info"]["finish_reason"] = "abort"
    with pytest.raises(EngineAborted):
        convert_generate_output(answer, rid="r")


@pytest.mark.parametrize("finish", [None, {"matched": 3}, {"type": "content_filter"}, 7])
def test_unknown_or_missing_finish_reason_is_malformed(finish: Any, sglang_answer: Answer) -> None:
    answer = sglang_answer([1])
    answer["meta_info"]["finish_reason"] = finish
    with pytest.raises(MalformedOutput, match="finish_reason"):
        convert_generate_output(answer, rid="r")


def test_output_ids_longer_than_logprobs_is_malformed(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2])
    answer["output_ids"].append(3)
    with pytest.raises(
        MalformedOutput, match="output_ids has 3 tokens but output_token_logprobs has 2"
    ):
        convert_generate_output(answer, rid="r")


def test_output_ids_differing_from_logprob_ids_is_malformed(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2])
    answer["output_ids"][1] = 5
    with pytest.raises(MalformedOutput, match=r"output_ids\[1\]=5 differs"):
        convert_generate_output(answer, rid="r")


def test_completion_token_count_must_match(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2])
    answer["meta_info"]["completion_tokens"] = 3
    with pytest.raises(MalformedOutput, match="completion_tokens is 3 but 2 tokens"):
        convert_generate_output(answer, rid="r")


@pytest.mark.parametrize("logprob", [None, math.nan, math.inf, -math.inf, "0.1", True, 10**400])
def test_non_finite_or_non_numeric_logprob_is_malformed(
    logprob: Any, sglang_answer: Answer
) -> None:
    answer = sglang_answer([1, 2])
    answer["meta_info"]["output_token_logprobs"][1][0] = logprob
    with pytest.raises(MalformedOutput, match=r"output_token_logprobs\[1\]"):
        convert_generate_output(answer, rid="r")


def test_positive_logprob_is_refused(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2], [-0.1, 0.5])
    with pytest.raises(MalformedOutput, match=r"output_token_logprobs\[1\] has logprob 0.5"):
        convert_generate_output(answer, rid="r")


def test_zero_logprob_of_a_certain_token_is_accepted(sglang_answer: Answer) -> None:
    answer = sglang_answer([1], [0.0])
    content = convert_generate_output(answer, rid="r")["choices"][0]["logprobs"]["content"]
    assert content == [{"token": "token_id:1", "logprob": 0.0}]


def test_more_tokens_than_max_new_tokens_is_refused(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2, 3])
    with pytest.raises(MalformedOutput, match="3 tokens, more than the request's max_new_tokens=2"):
        convert_generate_output(answer, rid="r", max_new_tokens=2)


def test_exactly_max_new_tokens_is_accepted(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 2], finish={"type": "length", "length": 2})
    assert convert_generate_output(answer, rid="r", max_new_tokens=2)["choices"][0][
        "token_ids"
    ] == [
        1,
        2,
    ]


def test_token_id_outside_the_vocabulary_is_refused(sglang_answer: Answer) -> None:
    answer = sglang_answer([1, 100])
    with pytest.raises(MalformedOutput, match=r"output_ids\[1\]=100 is outside the tokenizer's"):
        convert_generate_output(answer, rid="r", vocab_size=100)


def test_last_vocabulary_id_is_accepted(sglang_answer: Answer) -> None:
    answer = sglang_answer([99])
    assert convert_generate_output(answer, rid="r", vocab_size=100)["choices"][0]["token_ids"] == [
        99
    ]


def test_renderers_no_evidence_sentinel_is_malformed(sglang_answer: Answer) -> None:
    answer = sglang_answer([1], [-9999.0])
    with pytest.raises(MalformedOutput, match="missing sampling evidence"):
        convert_generate_output(answer, rid="r")


@pytest.mark.parametrize("entry", [[-0.1], "x", [-0.1, "7", None], [-0.1, -7, None], [-0.1, 1.0]])
def test_malformed_logprob_entries_are_rejected(entry: Any, sglang_answer: Answer) -> None:
    answer = sglang_answer([1])
    answer["meta_info"]["output_token_logprobs"][0] = entry
    with pytest.raises(MalformedOutput, match=r"output_token_logprobs\[0\]"):
        convert_generate_output(answer, rid="r")


def test_missing_logprobs_is_malformed(sglang_answer: Answer) -> None:
    answer = sglang_answer([1])
    del answer["meta_info"]["output_token_logprobs"]
    with pytest.raises(MalformedOutput, match="return_logprob"):
        convert_generate_output(answer, rid="r")


def test_a_batch_answer_is_malformed(sglang_answer: Answer) -> None:
    with pytest.raises(MalformedOutput, match="one JSON object"):
        convert_generate_output([sglang_answer([1])], rid="r")


def test_an_answer_without_meta_info_is_malformed() -> None:
    with pytest.raises(MalformedOutput, match="meta_info"):
        convert_generate_output({"text": "hi", "output_ids": [1]}, rid="r")


def test_answer_without_output_ids_uses_the_logprob_ids(sglang_answer: Answer) -> None:
    answer = sglang_answer([4, 5])
    del answer["output_ids"]
    assert convert_generate_output(answer, rid="r")["choices"][0]["token_ids"] == [4, 5]


def test_empty_completion_is_accepted(sglang_answer: Answer) -> None:
    answer = sglang_answer([], finish={"type": "stop", "matched": 2})
    assert convert_generate_output(answer, rid="r")["choices"][0]["token_ids"] == []


def test_two_element_logprob_entries_are_accepted(sglang_answer: Answer) -> None:
    answer = sglang_answer([4])
    answer["meta_info"]["output_token_logprobs"] = [[-0.3, 4]]
    assert convert_generate_output(answer, rid="r")["choices"][0]["token_ids"] == [4]


@hypothesis_settings(deadline=None)
@given(
    tokens=st.lists(
        st.tuples(
            st.integers(0, 2**31 - 1),
            st.floats(max_value=0.0, allow_nan=False, allow_infinity=False).filter(
                lambda v: v != -9999.0
            ),
        ),
        max_size=40,
    )
)
def test_ids_and_logprobs_round_trip_exactly_through_renderers(
    tokens: list[tuple[int, float]],
) -> None:
    ids = [token_id for token_id, _ in tokens]
    logprobs = [logprob for _, logprob in tokens]
    answer = {
        "output_ids": ids,
        "meta_info": {
            "id": "r",
            "finish_reason": {"type": "length", "length": len(ids)},
            "output_token_logprobs": [[lp, t, None] for t, lp in tokens],
            "completion_tokens": len(ids),
        },
    }
    converted = convert_generate_output(json.loads(json.dumps(answer)), rid="r")
    # Through JSON bytes and renderers' own strict parser, as TrainClient will see it.
    data = parse_generate_response(json.dumps(converted).encode())
    choice = data["choices"][0]
    assert choice["token_ids"] == ids
    assert _parse_completion_logprobs(choice, choice["token_ids"]) == logprobs
