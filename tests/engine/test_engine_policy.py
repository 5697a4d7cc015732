"""The scripted policy: reading prompts back into turns and answering the fixture protocol."""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from typing import Any

import pytest

from miles_verifiers_testkit.engine import (
    ModelProfile,
    PolicyConfig,
    ScriptedPolicy,
    load_model_profile,
)
from miles_verifiers_testkit.engine.chat_formats import parse_conversation
from miles_verifiers_testkit.engine.policy import (
    Question,
    decide_reply,
    find_questions,
    sample_key,
    scan_prompt,
)
from miles_verifiers_testkit.protocol import random_question
from tests.engine.engine_support import (
    CALCULATOR_TOOL,
    GPT_OSS,
    LLAMA,
    QWEN,
    QWEN_ENDOFTEXT,
    QWEN_IM_END,
)

QWEN_TOOL_TURN = (
    "<|im_start|>system\nYou may call calculator_add.<|im_end|>\n"
    "<|im_start|>user\nUse the calculator tool to compute: What is 3 + 4?<|im_end|>\n"
    "<|im_start|>assistant\n"
)


# ---- reading prompts ------------------------------------------------------------------


def chatml(*turns: tuple[str, str]) -> str:
    """Qwen's ChatML text of ``turns`` (role, content), ending in an open assistant turn."""
    closed = "".join(f"<|im_start|>{role}\n{content}<|im_end|>\n" for role, content in turns)
    return closed + "<|im_start|>assistant\n"


def test_questions_are_read_in_the_protocol_form() -> None:
    text = "First What is 12 + 30? then What is 7 * 6? and What is 9 - 14?"
    assert find_questions(text) == [
        Question(12, "+", 30),
        Question(7, "*", 6),
        Question(9, "-", 14),
    ]


def test_questions_are_read_like_the_fixture_tasksets_write_them() -> None:
    rng = random.Random(7)
    for _ in range(200):
        question = random_question(rng)
        (found,) = find_questions(f"Please: {question.text}")
        assert (found.a, found.op, found.b, found.answer) == (
            question.a,
            question.op,
            question.b,
            question.answer,
        )


def test_the_engine_reads_the_protocol_without_importing_verifiers() -> None:
    # The protocol lives outside the fixture harness package so the engine stays light.
    code = "import sys, miles_verifiers_testkit.engine.policy; sys.exit('verifiers' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False, timeout=60).returncode == 0


def test_chatml_prompt_splits_into_turns_with_tool_results_as_tool_turns() -> None:
    text = (
        "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nQ<|im_end|>\n"
        "<|im_start|>assistant\nA<|im_end|>\n"
        "<|im_start|>user\n<tool_response>\n7\n</tool_response><|im_end|>\n"
        "<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    conversation = parse_conversation(text)
    assert conversation.format == "qwen3"
    assert [t.role for t in conversation.turns] == ["system", "user", "assistant", "tool"]
    assert conversation.open_turn == "<think>\n\n</think>\n\n"


def test_llama3_prompt_splits_into_turns_with_ipython_as_tool() -> None:
    text = (
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nQ<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n{}<|eot_id|>"
        '<|start_header_id|>ipython<|end_header_id|>\n\n"7"<|eot_id|>'
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    conversation = parse_conversation(text)
    assert conversation.format == "llama3"
    assert [(t.role, t.content) for t in conversation.turns] == [
        ("user", "Q"),
        ("assistant", "{}"),
        ("tool", '"7"'),
    ]
    assert conversation.open_turn == ""


def test_harmony_prompt_splits_into_turns_with_function_results_as_tool() -> None:
    text = (
        "<|start|>developer<|message|>D<|end|><|start|>user<|message|>Q<|end|>"
        "<|start|>assistant to=functions.calculator_add<|channel|>commentary<|message|>{}<|call|>"
        "<|start|>functions.calculator_add to=assistant<|channel|>commentary<|message|>7<|end|>"
        "<|start|>assistant<|channel|>analysis<|message|>"
    )
    conversation = parse_conversation(text)
    assert conversation.format == "harmony"
    assert [t.role for t in conversation.turns] == ["system", "user", "assistant", "tool"]
    assert conversation.open_turn == ""
    assert conversation.open_header == "assistant<|channel|>analysis"


def test_text_without_chat_markers_is_one_user_turn() -> None:
    conversation = parse_conversation("What is 1 + 1?")
    assert conversation.format == "plain"
    assert [t.role for t in conversation.turns] == ["user"]


def test_the_last_unanswered_question_is_pending() -> None:
    text = chatml(
        ("user", "What is 1 + 2?"),
        ("assistant", "<answer>3</answer>"),
        ("user", "Good. Next: What is 4 * 5?"),
    )
    assert scan_prompt(text).pending == Question(4, "*", 5)


def test_a_question_answered_by_a_later_assistant_turn_is_not_pending() -> None:
    text = chatml(
        ("user", "What is 1 + 2?"), ("assistant", "<answer>3</answer>"), ("user", "Thanks!")
    )
    scan = scan_prompt(text)
    assert scan.pending is None
    assert decide_reply(scan, random.Random(0), accuracy=1.0).kind == "idle"


def test_questions_in_assistant_turns_are_not_taken_as_asked() -> None:
    text = chatml(("user", "What is 2 + 2?"), ("assistant", "You asked What is 9 * 9?"))
    assert scan_prompt(text).pending == Question(2, "+", 2)


def test_the_calculator_schema_is_noticed_only_outside_assistant_turns() -> None:
    assert scan_prompt(QWEN_TOOL_TURN).has_calculator
    text = "<|im_start|>user\nWhat is 1 + 1?<|im_end|>\n<|im_start|>assistant\ncalculator_add<|im_end|>\n"
    assert not scan_prompt(text).has_calculator


# ---- choosing replies -----------------------------------------------------------------


def test_a_calculator_prompt_gets_a_tool_call_for_addition() -> None:
    reply = decide_reply(scan_prompt(QWEN_TOOL_TURN), random.Random(0), accuracy=1.0)
    assert reply.kind == "tool_call"
    assert reply.tool_arguments == {"a": 3, "b": 4}


def test_subtraction_goes_to_the_calculator_as_a_negative_addend() -> None:
    text = QWEN_TOOL_TURN.replace("3 + 4", "10 - 4")
    reply = decide_reply(scan_prompt(text), random.Random(0), accuracy=1.0)
    assert reply.tool_arguments == {"a": 10, "b": -4}


def test_multiplication_is_answered_without_the_calculator() -> None:
    text = QWEN_TOOL_TURN.replace("3 + 4", "6 * 7")
    reply = decide_reply(scan_prompt(text), random.Random(0), accuracy=1.0)
    assert (reply.kind, reply.text) == ("answer", "<answer>42</answer>")


def test_a_tool_result_is_answered_with_the_tools_number() -> None:
    text = QWEN_TOOL_TURN + (
        '<tool_call>\n{"name": "calculator_add", "arguments": {"a": 3, "b": 4}}\n</tool_call><|im_end|>\n'
        "<|im_start|>user\n<tool_response>\n8\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    )
    reply = decide_reply(scan_prompt(text), random.Random(0), accuracy=0.0)
    assert (reply.kind, reply.text) == ("answer", "<answer>8</answer>")


def test_a_wrong_answer_misses_by_a_small_nonzero_amount() -> None:
    scan = scan_prompt(chatml(("user", "What is 20 + 22?")))
    for seed in range(50):
        reply = decide_reply(scan, random.Random(seed), accuracy=0.0)
        value = int(reply.text.removeprefix("<answer>").removesuffix("</answer>"))
        assert 1 <= abs(value - 42) <= 3


def test_a_wrong_tool_call_carries_a_wrong_addend() -> None:
    reply = decide_reply(scan_prompt(QWEN_TOOL_TURN), random.Random(3), accuracy=0.0)
    assert reply.tool_arguments is not None
    assert reply.tool_arguments["a"] == 3 and reply.tool_arguments["b"] != 4


def test_accuracy_sets_the_share_of_right_answers() -> None:
    scan = scan_prompt(chatml(("user", "What is 5 * 5?")))
    replies = Counter(
        decide_reply(scan, random.Random(seed), accuracy=0.7).text for seed in range(1000)
    )
    share = replies["<answer>25</answer>"] / 1000
    assert 0.63 <= share <= 0.77


def test_a_greedy_sample_depends_on_the_prompt_only() -> None:
    first = sample_key(0, 11, sampling_seed=None, rid="a", greedy=True)
    assert first == sample_key(0, 11, sampling_seed=5, rid="b", greedy=True)
    assert first != sample_key(0, 12, sampling_seed=None, rid="a", greedy=True)


def test_a_seeded_sample_depends_on_the_seed_and_prompt_not_the_rid() -> None:
    key = sample_key(0, 11, sampling_seed=5, rid="a", greedy=False)
    assert key == sample_key(0, 11, sampling_seed=5, rid="b", greedy=False)
    assert key != sample_key(0, 11, sampling_seed=6, rid="a", greedy=False)


def test_an_unseeded_sample_depends_on_its_rid() -> None:
    key = sample_key(0, 11, sampling_seed=None, rid="a", greedy=False)
    assert key == sample_key(0, 11, sampling_seed=None, rid="a", greedy=False)
    assert key != sample_key(0, 11, sampling_seed=None, rid="b", greedy=False)
    assert key != sample_key(1, 11, sampling_seed=None, rid="a", greedy=False)


# ---- writing replies with the real tokenizers -----------------------------------------


@pytest.fixture(scope="module")
def qwen_policy(qwen: ModelProfile) -> ScriptedPolicy:
    return ScriptedPolicy(qwen, PolicyConfig(accuracy=1.0))


def _complete(
    policy: ScriptedPolicy, model: ModelProfile, text: str, **kwargs: Any
) -> tuple[list[int], str]:
    ids = model.tokenizer.encode(text, add_special_tokens=False)
    completion = policy.complete(ids, hash(tuple(ids)), key=1, **kwargs)
    tokens = list(completion.token_ids)
    return tokens, model.tokenizer.decode(tokens[:-1], skip_special_tokens=False)


def test_a_reply_ends_with_the_formats_own_stop_token(
    qwen_policy: ScriptedPolicy, qwen: ModelProfile
) -> None:
    tokens, _ = _complete(
        qwen_policy, qwen, QWEN_TOOL_TURN, stop_token_ids=(QWEN_ENDOFTEXT, QWEN_IM_END)
    )
    assert tokens[-1] == QWEN_IM_END


def test_a_reply_ends_with_the_first_request_stop_token_when_the_format_token_is_not_a_stop(
    qwen_policy: ScriptedPolicy, qwen: ModelProfile
) -> None:
    plain = "What is 1 + 1?"
    tokens, text = _complete(qwen_policy, qwen, plain, stop_token_ids=(13, 11))
    assert tokens[-1] == 13
    assert text == "<answer>2</answer>"


def test_a_reply_without_request_stop_tokens_ends_with_the_models_eos(
    qwen_policy: ScriptedPolicy, qwen: ModelProfile
) -> None:
    tokens, _ = _complete(qwen_policy, qwen, "What is 1 + 1?", stop_token_ids=())
    assert tokens[-1] == qwen.tokenizer.eos_token_id


def test_min_new_tokens_pads_the_reply_before_its_stop_token(
    qwen_policy: ScriptedPolicy, qwen: ModelProfile
) -> None:
    tokens, text = _complete(
        qwen_policy,
        qwen,
        QWEN_TOOL_TURN.replace("3 + 4", "2 * 2"),
        stop_token_ids=(),
        min_new_tokens=30,
    )
    assert len(tokens) == 31
    assert text.startswith("<answer>4</answer>")


def test_thinking_mode_writes_a_think_block_before_the_reply(qwen: ModelProfile) -> None:
    policy = ScriptedPolicy(qwen, PolicyConfig(accuracy=1.0, thinking=True))
    _, text = _complete(
        policy,
        qwen,
        chatml(("user", "What is 2 * 3?")),
        stop_token_ids=(),
    )
    assert text.startswith("<think>\n") and text.endswith("\n</think>\n\n<answer>6</answer>")


def test_a_think_block_opened_by_the_prompt_is_closed_first(qwen: ModelProfile) -> None:
    policy = ScriptedPolicy(qwen, PolicyConfig(accuracy=1.0, thinking=True))
    prompt = chatml(("user", "What is 2 * 3?")) + "<think>\n"
    _, text = _complete(policy, qwen, prompt, stop_token_ids=())
    assert not text.startswith("<think>")
    assert text.endswith("\n</think>\n\n<answer>6</answer>")


def test_thinking_is_off_by_default(qwen_policy: ScriptedPolicy, qwen: ModelProfile) -> None:
    _, text = _complete(
        qwen_policy,
        qwen,
        chatml(("user", "What is 2 * 3?")),
        stop_token_ids=(),
    )
    assert text == "<answer>6</answer>"


def test_filler_is_ordinary_tokens_of_the_requested_length(
    qwen_policy: ScriptedPolicy, qwen: ModelProfile
) -> None:
    filler = qwen_policy.filler(50)
    assert len(filler) == 50
    assert not set(filler) & qwen.eos_token_ids


@pytest.mark.parametrize("model_id", [QWEN, LLAMA, GPT_OSS])
@pytest.mark.parametrize("thinking", [False, True])
def test_each_renderer_parses_the_policys_tool_call_and_answer(
    offline_tokenizers: None, model_id: str, thinking: bool
) -> None:
    import renderers

    model = load_model_profile(model_id)
    renderer = renderers.create_renderer(model.tokenizer)
    policy = ScriptedPolicy(model, PolicyConfig(accuracy=1.0, thinking=thinking))
    stops = tuple(renderer.get_stop_token_ids())
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a calculator."},
        {"role": "user", "content": "Use the calculator tool to compute: What is 3 + 4?"},
    ]

    def reply(msgs: list[dict[str, Any]]) -> Any:
        ids = list(renderer.render_ids(msgs, tools=[CALCULATOR_TOOL], add_generation_prompt=True))
        completion = policy.complete(ids, hash(tuple(ids)), key=0, stop_token_ids=stops)
        assert completion.token_ids[-1] in stops
        return renderer.parse_response(list(completion.token_ids))

    first = reply(messages)
    (call,) = first.tool_calls
    assert (call.name, call.arguments, call.status.value) == (
        "calculator_add",
        {"a": 3, "b": 4},
        "ok",
    )
    messages += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "type": "function",
                    "id": "c0",
                    "function": {"name": "calculator_add", "arguments": {"a": 3, "b": 4}},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c0", "name": "calculator_add", "content": "7"},
    ]
    second = reply(messages)
    assert second.tool_calls == [] and second.content == "<answer>7</answer>"


HARMONY_HISTORY = "<|start|>user<|message|>What is 2 * 3?<|end|>"


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (
            "<|start|>assistant<|channel|>analysis<|message|>",
            "Working it out.<|end|><|start|>assistant<|channel|>final<|message|><answer>6</answer>",
        ),
        (
            "<|start|>assistant<|channel|>analysis",
            "<|message|>Working it out.<|end|><|start|>assistant<|channel|>final<|message|><answer>6</answer>",
        ),
        ("<|start|>assistant", "<|channel|>final<|message|><answer>6</answer>"),
        ("", "<|start|>assistant<|channel|>final<|message|><answer>6</answer>"),
    ],
)
def test_a_harmony_reply_continues_whatever_the_prompt_opened(tail: str, expected: str) -> None:
    from miles_verifiers_testkit.engine.chat_formats import write_reply

    conversation = parse_conversation(HARMONY_HISTORY + tail)
    assert (
        write_reply(conversation, body="<answer>6</answer>", reasoning=None, tool_call=None)
        == expected
    )
