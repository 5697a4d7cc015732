import pytest
import verifiers.v1 as vf

from miles_verifiers_testkit.harness.protocol import find_questions
from mv_dialogue import DialogueConfig, DialogueData, DialogueTask, DialogueTaskset
from mv_dialogue.user import DialogueState, QuizUser
from tests.fixtures_env.fixture_env_support import conversation, reply, user

pytestmark = pytest.mark.anyio

DATA = DialogueData(
    idx=0,
    prompt="What is 1 + 1?",
    questions=("What is 1 + 1?", "What is 2 * 3?", "What is 9 - 4?"),
    answers=(2, 6, 5),
    answer="5",
)


def _dialogue(*answers: str, state: DialogueState | None = None) -> vf.Trace:
    turns = [
        ([user(q)] if i else [user(DATA.prompt)], reply(a))
        for i, (q, a) in enumerate(zip(DATA.questions, answers, strict=False))
    ]
    return conversation(DATA, *turns, state=state)


async def test_correct_rounds_is_the_share_of_rounds_answered_right():
    task = DialogueTask(DATA)
    assert (
        await task.correct_rounds(
            _dialogue("<answer>2</answer>", "<answer>6</answer>", "<answer>5</answer>")
        )
        == 1.0
    )
    assert await task.correct_rounds(
        _dialogue("<answer>2</answer>", "<answer>7</answer>", "<answer>5</answer>")
    ) == pytest.approx(2 / 3)


async def test_correct_rounds_counts_unplayed_rounds_as_misses():
    assert await DialogueTask(DATA).correct_rounds(
        _dialogue("<answer>2</answer>")
    ) == pytest.approx(1 / 3)


async def test_rounds_metric_reads_the_simulator_state():
    trace = _dialogue("a", "b", state=DialogueState(replies=2))
    assert await DialogueTask(DATA).rounds(trace) == 2.0


async def test_user_done_stop_follows_the_state_flag():
    task = DialogueTask(DATA)
    assert await task.user_done(_dialogue("a", state=DialogueState(done=False))) is False
    assert await task.user_done(_dialogue("a", state=DialogueState(done=True))) is True


async def test_quiz_user_asks_the_next_question_after_each_reply_then_finishes():
    quiz = QuizUser(vf.UserConfig())
    await quiz.setup_task(DATA)
    assert await quiz.respond("<answer>2</answer>") == [vf.UserMessage(content="What is 2 * 3?")]
    assert await quiz.respond("<answer>6</answer>") == [vf.UserMessage(content="What is 9 - 4?")]
    assert quiz.state.done is False
    assert await quiz.respond("<answer>5</answer>") == []
    assert quiz.state.done is True and quiz.state.replies == 3


async def test_quiz_user_opens_a_promptless_task_with_the_first_question():
    quiz = QuizUser(vf.UserConfig())
    await quiz.setup_task(DATA.model_copy(update={"prompt": None}))
    assert await quiz.respond("") == [vf.UserMessage(content="What is 1 + 1?")]
    assert quiz.state.replies == 0
    assert await quiz.respond("<answer>2</answer>") == [vf.UserMessage(content="What is 2 * 3?")]


def test_user_opens_knob_leaves_the_prompt_to_the_simulator():
    [task] = DialogueTaskset(DialogueConfig(id="mv-dialogue", num_tasks=1, user_opens=True)).load()
    assert task.data.prompt is None
    assert len(task.data.questions) == 3


def test_taskset_builds_rounds_questions_per_task_starting_with_the_prompt():
    tasks = DialogueTaskset(DialogueConfig(id="mv-dialogue", num_tasks=4, rounds=5)).load()
    assert len(tasks) == 4
    for task in tasks:
        assert len(task.data.questions) == len(task.data.answers) == 5
        assert task.data.prompt == task.data.questions[0]
        assert [find_questions(q)[0].answer for q in task.data.questions] == list(task.data.answers)
        assert task.data.answer == str(task.data.answers[-1])


def test_task_data_rejects_mismatched_rounds():
    with pytest.raises(ValueError, match="equal length"):
        DialogueData(idx=0, prompt="p", questions=("What is 1 + 1?",), answers=(2, 3), answer="3")
