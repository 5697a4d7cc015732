import random

import pytest
from mv_longprompt import (
    LongPromptConfig,
    LongPromptData,
    LongPromptTask,
    LongPromptTaskset,
)

from miles_verifiers_testkit.harness.protocol import find_questions
from miles_verifiers_testkit.tasks import filler_text
from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio


def test_filler_has_the_requested_word_count_and_no_digits():
    text = filler_text(1000, random.Random(0))
    assert len(text.split()) == 1000
    assert not any(ch.isdigit() for ch in text)
    assert "What is" not in text


def test_prompt_ends_with_its_only_question():
    [task] = LongPromptTaskset(
        LongPromptConfig(id="mv-longprompt", num_tasks=1, filler_words=500)
    ).load()
    [question] = find_questions(task.data.prompt)
    assert task.data.prompt.endswith(question.text)
    assert task.data.answer == str(question.answer)


def test_default_prompt_is_thousands_of_words_long():
    [task] = LongPromptTaskset(LongPromptConfig(id="mv-longprompt", num_tasks=1)).load()
    assert len(task.data.prompt.split()) > 7000


async def test_correct_and_prompt_chars_score_the_rollout():
    data = LongPromptData(idx=0, prompt="filler\n\nWhat is 3 + 4?", answer="7")
    trace = conversation(data, ([user(data.prompt)], reply("<answer>7</answer>")))
    task = LongPromptTask(data)
    assert await task.correct(trace) == 1.0
    assert await task.prompt_chars(trace) == float(len(data.prompt))


def test_default_prompt_is_over_six_thousand_qwen3_tokens():
    from tokenizers import Tokenizer

    from miles_verifiers_testkit.tokenizers import build_all, snapshot_path

    build_all()
    qwen3 = Tokenizer.from_file(str(snapshot_path("Qwen/Qwen3-0.6B") / "tokenizer.json"))
    [task] = LongPromptTaskset(LongPromptConfig(id="mv-longprompt", num_tasks=1)).load()
    assert len(qwen3.encode(task.data.prompt).ids) > 6000
