"""``/generate`` over real HTTP: the response contract, finish rules, batches, determinism."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from miles_verifiers_testkit.engine import ModelProfile, PolicyConfig, RunningEngine
from tests.engine.engine_support import (
    CALCULATOR_TOOL,
    QWEN_ENDOFTEXT,
    QWEN_IM_END,
    ServeFactory,
    assert_generate_response,
    assert_logprob_entries,
    chat_prompt,
)

STOPS = [QWEN_IM_END, QWEN_ENDOFTEXT]


@pytest.fixture(scope="module")
def prompt(qwen_renderer: Any) -> list[int]:
    return chat_prompt(qwen_renderer, "What is 6 * 7?")


def generate(client: httpx.Client, **body: Any) -> Any:
    response = client.post("/generate", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_generate_response_has_sglangs_shape(client: httpx.Client, prompt: list[int]) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"stop_token_ids": STOPS}, return_logprob=True
    )
    assert_generate_response(out)
    meta = out["meta_info"]
    assert list(out) == ["text", "output_ids", "meta_info"]
    assert meta["prompt_tokens"] == len(prompt)
    assert meta["num_retractions"] == 0 and meta["reasoning_tokens"] == 0
    assert meta["weight_version"] == "default"
    assert meta["weight_versions"] == [
        {"version": "default", "start": 0, "end": len(out["output_ids"])}
    ]
    assert isinstance(meta["response_sent_to_client_ts"], float)


def test_a_reply_stops_on_its_stop_token_which_stays_in_output_ids_only(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(
        client,
        input_ids=prompt,
        sampling_params={"stop_token_ids": STOPS, "skip_special_tokens": False},
    )
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": QWEN_IM_END}
    assert out["output_ids"][-1] == QWEN_IM_END
    assert "<|im_end|>" not in out["text"]


def test_no_stop_trim_keeps_the_stop_token_in_the_text(
    client: httpx.Client, prompt: list[int]
) -> None:
    params = {"stop_token_ids": STOPS, "skip_special_tokens": False, "no_stop_trim": True}
    out = generate(client, input_ids=prompt, sampling_params=params)
    assert out["text"].endswith("<|im_end|>")


def test_output_logprobs_are_triples_aligned_with_output_ids(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(client, input_ids=prompt, return_logprob=True)
    meta = out["meta_info"]
    assert_logprob_entries(meta["output_token_logprobs"])
    assert [t for _, t, _ in meta["output_token_logprobs"]] == out["output_ids"]
    assert meta["input_token_logprobs"] == []


def test_input_logprobs_start_at_logprob_start_len_with_a_null_first_entry(
    client: httpx.Client, prompt: list[int]
) -> None:
    start = len(prompt) - 5
    out = generate(client, input_ids=prompt, return_logprob=True, logprob_start_len=start)
    entries = out["meta_info"]["input_token_logprobs"]
    assert [t for _, t, _ in entries] == prompt[start:]
    assert_logprob_entries(entries, first_null=True)


def test_prefill_only_scoring_returns_the_generation_logprobs(
    client: httpx.Client, prompt: list[int]
) -> None:
    generated = generate(
        client, input_ids=prompt, return_logprob=True, sampling_params={"stop_token_ids": STOPS}
    )
    response_ids = generated["output_ids"]
    scored = generate(
        client,
        input_ids=prompt + response_ids,
        sampling_params={"max_new_tokens": 0, "temperature": 0, "skip_special_tokens": False},
        return_logprob=True,
        logprob_start_len=len(prompt) - 1,
    )
    meta = scored["meta_info"]
    assert scored["output_ids"] == [] and meta["finish_reason"] == {"type": "length", "length": 0}
    entries = meta["input_token_logprobs"]
    assert entries[0] == [None, prompt[-1], None]
    assert entries[1:] == generated["meta_info"]["output_token_logprobs"]


def test_max_new_tokens_cuts_the_reply_with_finish_reason_length(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"max_new_tokens": 3}, return_logprob=True
    )
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    assert len(out["output_ids"]) == 3 == len(out["meta_info"]["output_token_logprobs"])


def test_a_stop_token_id_ends_generation_at_its_first_occurrence(
    client: httpx.Client, prompt: list[int]
) -> None:
    full = generate(client, input_ids=prompt, rid="first-occurrence")["output_ids"]
    closing_angle = full[2]  # "<answer>" is "<", "answer", ">"
    out = generate(
        client,
        input_ids=prompt,
        rid="first-occurrence-2",
        sampling_params={"stop_token_ids": [closing_angle]},
    )
    assert out["output_ids"] == full[: full.index(closing_angle) + 1]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": closing_angle}


def test_min_new_tokens_holds_back_the_stop_token(client: httpx.Client, prompt: list[int]) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"min_new_tokens": 20, "stop_token_ids": STOPS}
    )
    assert len(out["output_ids"]) >= 21
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": QWEN_IM_END}
    assert out["text"].startswith("<answer>42</answer>")


def test_ignore_eos_generates_exactly_max_new_tokens(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"ignore_eos": True, "max_new_tokens": 300}
    )
    assert len(out["output_ids"]) == 300
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 300}


def test_max_new_tokens_defaults_to_128(client: httpx.Client, prompt: list[int]) -> None:
    out = generate(client, input_ids=prompt, sampling_params={"ignore_eos": True})
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 128}


def test_a_stop_string_ends_generation_and_is_cut_from_the_text(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"stop": ["</answer>"], "stop_token_ids": STOPS}
    )
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": "</answer>"}
    assert out["text"] == "<answer>42"
    assert out["output_ids"][-1] != QWEN_IM_END


def test_special_tokens_are_left_out_of_the_text_by_default(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(
        client, input_ids=prompt, sampling_params={"stop_token_ids": STOPS, "no_stop_trim": True}
    )
    assert out["text"] == "<answer>42</answer>"


def test_text_prompts_are_tokenized(client: httpx.Client, qwen: ModelProfile) -> None:
    out = generate(client, text="What is 2 + 2?", return_prompt_token_ids=True)
    assert out["text"] == "<answer>4</answer>"
    assert out["prompt_token_ids"] == qwen.tokenizer.encode("What is 2 + 2?")
    assert out["meta_info"]["prompt_tokens"] == len(out["prompt_token_ids"])


def test_put_is_served_like_post(client: httpx.Client, prompt: list[int]) -> None:
    response = client.put("/generate", json={"input_ids": prompt})
    assert response.status_code == 200
    assert_generate_response(response.json())


def test_a_batch_answers_a_list_in_input_order_with_indexed_rids(
    client: httpx.Client, qwen_renderer: Any
) -> None:
    prompts = [chat_prompt(qwen_renderer, f"What is {i} * 10?") for i in range(3)]
    out = generate(
        client,
        input_ids=prompts,
        rid="grp",
        return_logprob=True,
        sampling_params={"stop_token_ids": STOPS},
    )
    assert isinstance(out, list) and len(out) == 3
    assert [item["meta_info"]["id"] for item in out] == ["grp_0", "grp_1", "grp_2"]
    assert [item["meta_info"]["prompt_tokens"] for item in out] == [len(p) for p in prompts]
    for item in out:
        assert_generate_response(item)


def test_a_batch_takes_per_prompt_rids_and_parameters(
    client: httpx.Client, qwen_renderer: Any
) -> None:
    prompts = [
        chat_prompt(qwen_renderer, "What is 1 + 1?"),
        chat_prompt(qwen_renderer, "What is 2 + 2?"),
    ]
    out = generate(
        client,
        input_ids=prompts,
        rid=["x", "y"],
        sampling_params=[{"max_new_tokens": 2}, {"max_new_tokens": 4}],
        return_logprob=[True, False],
    )
    assert [item["meta_info"]["id"] for item in out] == ["x", "y"]
    assert [len(item["output_ids"]) for item in out] == [2, 4]
    assert "output_token_logprobs" in out[0]["meta_info"]
    assert "output_token_logprobs" not in out[1]["meta_info"]


def test_n_samples_come_back_grouped_by_prompt_with_fresh_rids(
    client: httpx.Client, qwen_renderer: Any
) -> None:
    prompts = [
        chat_prompt(qwen_renderer, "What is 1 + 1?"),
        chat_prompt(qwen_renderer, "What is 9 * 9?"),
    ]
    out = generate(client, input_ids=prompts, rid="mine", sampling_params={"n": 3})
    assert [item["meta_info"]["prompt_tokens"] for item in out] == [len(prompts[0])] * 3 + [
        len(prompts[1])
    ] * 3
    rids = [item["meta_info"]["id"] for item in out]
    assert len(set(rids)) == 6 and not any(rid.startswith("mine") for rid in rids)


def test_a_single_prompt_with_n_above_one_answers_a_list(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(client, input_ids=prompt, sampling_params={"n": 2})
    assert isinstance(out, list) and len(out) == 2


def test_the_same_seed_and_prompt_give_the_same_output(
    client: httpx.Client, prompt: list[int]
) -> None:
    runs = [
        generate(
            client,
            input_ids=prompt,
            rid=f"seeded-{i}",
            sampling_params={"sampling_seed": 1234},
            return_logprob=True,
        )
        for i in range(2)
    ]
    assert runs[0]["output_ids"] == runs[1]["output_ids"]
    assert (
        runs[0]["meta_info"]["output_token_logprobs"]
        == runs[1]["meta_info"]["output_token_logprobs"]
    )


def test_unseeded_samples_differ_by_rid_and_repeat_for_the_same_rid(
    serve: ServeFactory, prompt: list[int]
) -> None:
    with (
        serve(policy=PolicyConfig(accuracy=0.5)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        texts = [generate(http, input_ids=prompt, rid=f"sample-{i}")["text"] for i in range(20)]
        again = generate(http, input_ids=prompt, rid="sample-3")["text"]
    assert len(set(texts)) > 1
    assert again == texts[3]


def test_greedy_sampling_ignores_the_rid(serve: ServeFactory, prompt: list[int]) -> None:
    with (
        serve(policy=PolicyConfig(accuracy=0.5)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        texts = {
            generate(http, input_ids=prompt, sampling_params={"temperature": 0})["text"]
            for _ in range(10)
        }
    assert len(texts) == 1


def test_a_server_without_deterministic_inference_ignores_the_seed(
    serve: ServeFactory, prompt: list[int]
) -> None:
    seeded = {"sampling_seed": 7}
    with (
        serve(policy=PolicyConfig(accuracy=0.5), honour_sampling_seed=False) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        texts = {
            generate(http, input_ids=prompt, rid=f"r{i}", sampling_params=seeded)["text"]
            for i in range(20)
        }
    assert len(texts) > 1


def test_group_samples_vary_so_group_rewards_vary(serve: ServeFactory, prompt: list[int]) -> None:
    with (
        serve(policy=PolicyConfig(accuracy=0.5)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        texts = [
            generate(http, input_ids=prompt, sampling_params={"sampling_seed": 42 + i})["text"]
            for i in range(16)
        ]
    right = sum(text == "<answer>42</answer>" for text in texts)
    assert 0 < right < 16


def test_a_tool_prompt_gets_a_qwen3_tool_call(client: httpx.Client, qwen_renderer: Any) -> None:
    ids = chat_prompt(
        qwen_renderer, "Use the calculator tool to compute: What is 3 + 4?", tools=[CALCULATOR_TOOL]
    )
    out = generate(
        client, input_ids=ids, sampling_params={"temperature": 0, "stop_token_ids": STOPS}
    )
    assert out["text"].startswith(
        '<tool_call>\n{"name": "calculator_add", "arguments": {"a": 3, "b": '
    )
    assert qwen_renderer.parse_response(out["output_ids"]).tool_calls[0].name == "calculator_add"


def test_cached_tokens_count_the_prefix_an_earlier_request_computed(
    serve: ServeFactory, prompt: list[int]
) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        first = generate(http, input_ids=prompt)
        follow_up = prompt + first["output_ids"] + [198, 9707]
        second = generate(http, input_ids=follow_up)
        other_namespace = generate(http, input_ids=follow_up, extra_key="adapter:v2")
        assert http.post("/flush_cache").status_code == 200
        after_flush = generate(http, input_ids=follow_up)
    assert first["meta_info"]["cached_tokens"] == 0
    assert second["meta_info"]["cached_tokens"] == len(prompt) + len(first["output_ids"]) - 1
    assert other_namespace["meta_info"]["cached_tokens"] == 0
    assert after_flush["meta_info"]["cached_tokens"] == 0


def test_cached_tokens_stop_at_logprob_start_len(serve: ServeFactory, prompt: list[int]) -> None:
    with serve() as running, httpx.Client(base_url=running.base_url) as http:
        generate(http, input_ids=prompt)
        again = generate(http, input_ids=prompt, return_logprob=True, logprob_start_len=10)
    assert again["meta_info"]["cached_tokens"] == 10


def test_a_disabled_radix_cache_reports_no_cached_tokens(
    serve: ServeFactory, prompt: list[int]
) -> None:
    with serve(radix_cache=False) as running, httpx.Client(base_url=running.base_url) as http:
        generate(http, input_ids=prompt)
        again = generate(http, input_ids=prompt)
    assert again["meta_info"]["cached_tokens"] == 0


def test_prompt_token_ids_come_back_when_asked(client: httpx.Client, prompt: list[int]) -> None:
    out = generate(client, input_ids=prompt, return_prompt_token_ids=True)
    assert out["prompt_token_ids"] == prompt


def test_top_logprobs_list_the_chosen_token_first(client: httpx.Client, prompt: list[int]) -> None:
    out = generate(
        client,
        input_ids=prompt,
        return_logprob=True,
        top_logprobs_num=3,
        logprob_start_len=len(prompt) - 2,
    )
    meta = out["meta_info"]
    assert len(meta["output_top_logprobs"]) == len(out["output_ids"])
    for row, (logprob, token, _) in zip(
        meta["output_top_logprobs"], meta["output_token_logprobs"], strict=False
    ):
        assert len(row) == 3 and row[0][:2] == [logprob, token]
        assert row[0][0] > row[1][0] > row[2][0]
    assert meta["input_top_logprobs"][0] is None and len(meta["input_top_logprobs"][1]) == 3


def test_return_text_in_logprobs_fills_the_token_text(
    client: httpx.Client, prompt: list[int]
) -> None:
    out = generate(client, input_ids=prompt, return_logprob=True, return_text_in_logprobs=True)
    texts = [text for _, _, text in out["meta_info"]["output_token_logprobs"]]
    assert "".join(texts[:-1]) == "<answer>42</answer>"


def test_a_loaded_lora_adapter_is_served(serve: ServeFactory, prompt: list[int]) -> None:
    with (
        serve(lora_adapters=("math-lora",)) as running,
        httpx.Client(base_url=running.base_url) as http,
    ):
        out = generate(http, input_ids=prompt, lora_path="math-lora")
    assert_generate_response(out)


def test_the_0_5_15_contract_has_no_weight_version_spans(
    serve: ServeFactory, prompt: list[int]
) -> None:
    with serve(sglang_version="0.5.15") as running, httpx.Client(base_url=running.base_url) as http:
        out = generate(http, input_ids=prompt)
    assert "weight_versions" not in out["meta_info"]
    assert out["meta_info"]["weight_version"] == "default"


def test_new_tokens_are_capped_at_the_schedulers_request_limit(
    serve: ServeFactory, qwen: ModelProfile
) -> None:
    # SGLang's scheduler allows max_req_len = context - 1 tokens and keeps one more back:
    # 50 prompt tokens in a 64-token context leave 64 - 1 - 50 - 1 = 12 new tokens.
    with serve(context_length=64) as running, httpx.Client(base_url=running.base_url) as http:
        out = generate(
            http,
            input_ids=[9707] * 50,
            sampling_params={"ignore_eos": True, "max_new_tokens": None},
        )
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert len(out["output_ids"]) == 12


def test_a_prompt_within_six_tokens_of_the_context_is_refused_by_the_scheduler(
    serve: ServeFactory,
) -> None:
    # max_req_input_len = (64 - 1) - 5 = 58: a 58-token prompt fits the context but not the
    # scheduler's prompt limit.
    with serve(context_length=64) as running:
        response = httpx.post(
            f"{running.base_url}/generate",
            json={"input_ids": [9707] * 58, "sampling_params": {"max_new_tokens": 2}},
            timeout=30,
        )
    assert response.status_code == 400
    message = response.json()["error"]["message"]
    assert "Input length (58 tokens) exceeds the maximum allowed length (58 tokens)" in message


def test_a_small_kv_pool_lowers_the_prompt_limit_reported_in_server_info(
    serve: ServeFactory,
) -> None:
    with serve(context_length=64, kv_capacity=32) as running:
        info = httpx.get(f"{running.base_url}/server_info", timeout=30).json()
        refused = httpx.post(
            f"{running.base_url}/generate",
            json={"input_ids": [9707] * 26, "sampling_params": {"max_new_tokens": 2}},
            timeout=30,
        )
    assert (info["max_req_input_len"], info["max_total_num_tokens"]) == (26, 32)
    assert refused.status_code == 400


def test_responses_do_not_depend_on_the_connection(
    shared_engine: RunningEngine, prompt: list[int]
) -> None:
    body = {"input_ids": prompt, "sampling_params": {"sampling_seed": 5}, "return_logprob": True}
    with (
        httpx.Client(base_url=shared_engine.base_url) as a,
        httpx.Client(base_url=shared_engine.base_url) as b,
    ):
        first, second = generate(a, **body), generate(b, **body)
    assert first["output_ids"] == second["output_ids"]
