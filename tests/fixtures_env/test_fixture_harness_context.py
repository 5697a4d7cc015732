import pytest
import verifiers.v1 as vf

from miles_verifiers_testkit.harness import task_followups
from miles_verifiers_testkit.harness.context import (
    NOTES_HEADER,
    Conversation,
    compacted_context,
    head_messages,
    prompt_messages,
    prompt_text,
)


def test_head_is_the_system_prompt_alone():
    assert head_messages("Be exact.") == [{"role": "system", "content": "Be exact."}]
    assert head_messages(None) == []


def test_string_prompt_opens_with_one_user_turn():
    assert prompt_messages("What is 1 + 2?") == [{"role": "user", "content": "What is 1 + 2?"}]


def test_message_prompt_is_sent_as_wire_messages():
    prompt = [
        vf.UserMessage(content="Hi"),
        vf.AssistantMessage(content="Hello"),
        vf.UserMessage(content="What is 1 + 2?"),
    ]
    assert prompt_messages(prompt) == [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {"role": "user", "content": "What is 1 + 2?"},
    ]


def test_missing_prompt_leaves_the_opening_to_the_user_simulator():
    assert prompt_messages(None) == []


def test_prompt_text_of_a_message_prompt_keeps_only_user_turns():
    prompt = [
        vf.UserMessage(content="Task A"),
        vf.AssistantMessage(content="ok"),
        vf.UserMessage(content="Task B"),
    ]
    assert prompt_text(prompt) == "Task A\n\nTask B"


def test_compacted_context_is_head_plus_one_user_turn_with_notes_then_the_next_turn():
    head = [{"role": "system", "content": "S"}]
    context = compacted_context(
        head, ["<answer>3</answer>", "<answer>8</answer>"], "What is 2 * 2?"
    )
    assert context[0] == head[0]
    assert len(context) == 2 and context[1]["role"] == "user"
    assert context[1]["content"] == (
        f"{NOTES_HEADER}\n- <answer>3</answer>\n- <answer>8</answer>\n\nWhat is 2 * 2?"
    )


def test_compacted_context_without_notes_is_just_the_next_turn():
    assert compacted_context([], [], "What is 2 * 2?") == [
        {"role": "user", "content": "What is 2 * 2?"}
    ]


def test_followups_default_to_none():
    assert task_followups(vf.TaskData(idx=0, prompt="What is 1 + 1?")) == []


def test_followups_must_be_strings():
    data = vf.WireTaskData(idx=0, prompt="p", followups=[1, 2])
    with pytest.raises(TypeError, match="followups"):
        task_followups(data)


def _conversation(followups=(), compact_every=None) -> Conversation:
    return Conversation(
        head=[{"role": "system", "content": "S"}],
        opening=[{"role": "user", "content": "What is 1 + 1?"}],
        task_text="What is 1 + 1?",
        followups=followups,
        compact_every=compact_every,
    )


def _answer(conversation: Conversation, text: str) -> None:
    conversation.record_reply({"role": "assistant", "content": text}, text)


def test_followup_is_appended_as_a_user_turn_without_compaction():
    conversation = _conversation(followups=["What is 2 + 2?"])
    _answer(conversation, "<answer>2</answer>")
    assert conversation.ask_next_followup() is True
    assert [m["role"] for m in conversation.messages] == ["system", "user", "assistant", "user"]
    assert conversation.messages[-1]["content"] == "What is 2 + 2?"


def test_no_followups_left_ends_the_conversation():
    conversation = _conversation()
    _answer(conversation, "<answer>2</answer>")
    assert conversation.ask_next_followup() is False


def test_followup_after_n_replies_starts_a_compacted_context():
    conversation = _conversation(followups=["What is 2 + 2?", "What is 3 + 3?"], compact_every=2)
    _answer(conversation, "<answer>2</answer>")
    conversation.ask_next_followup()
    _answer(conversation, "<answer>4</answer>")
    conversation.ask_next_followup()
    assert conversation.messages == compacted_context(
        [{"role": "system", "content": "S"}],
        ["<answer>2</answer>", "<answer>4</answer>"],
        "What is 3 + 3?",
    )


def test_compaction_counts_replies_afresh_in_each_context():
    conversation = _conversation(followups=["q2", "q3", "q4"], compact_every=2)
    lengths = []
    for text in ["a1", "a2", "a3"]:
        _answer(conversation, text)
        conversation.ask_next_followup()
        lengths.append(len(conversation.messages))
    assert lengths == [4, 2, 4]


def test_compaction_after_tool_calls_restates_the_task_and_keeps_the_results_as_notes():
    conversation = _conversation(compact_every=1)
    conversation.record_reply({"role": "assistant", "content": None, "tool_calls": []}, None)
    conversation.record_tool_result("call_0", "calculator_add", '{"a": 1, "b": 1}', "2")
    conversation.continue_after_tools()
    [system, note] = conversation.messages
    assert system == {"role": "system", "content": "S"}
    assert 'calculator_add({"a": 1, "b": 1}) returned 2' in note["content"]
    assert note["content"].endswith("What is 1 + 1?")


def test_tool_results_stay_in_context_when_no_compaction_is_due():
    conversation = _conversation(compact_every=3)
    conversation.record_reply({"role": "assistant", "content": None, "tool_calls": []}, None)
    conversation.record_tool_result("call_0", "calculator_add", "{}", "2")
    conversation.continue_after_tools()
    assert conversation.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "2"}
