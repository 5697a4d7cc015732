import random

import pytest

from miles_verifiers_testkit.protocol import (
    QUESTION_PATTERN,
    Question,
    find_questions,
    format_answer,
    fraction_correct,
    parse_answer,
    peer_agreement,
    random_question,
)


def test_question_text_has_the_literal_protocol_form():
    assert Question(12, "*", 3).text == "What is 12 * 3?"


@pytest.mark.parametrize(("op", "expected"), [("+", 9), ("-", 3), ("*", 18)])
def test_question_answer_applies_its_operator(op, expected):
    assert Question(6, op, 3).answer == expected


def test_question_rejects_negative_operands():
    with pytest.raises(ValueError, match="non-negative"):
        Question(-1, "+", 2)


def test_random_questions_are_reproducible_from_the_seed():
    first = [random_question(random.Random(7)) for _ in range(3)]
    again = [random_question(random.Random(7)) for _ in range(3)]
    assert first == again


def test_random_questions_match_the_protocol_and_never_go_negative():
    rng = random.Random(0)
    questions = [random_question(rng) for _ in range(500)]
    assert {q.op for q in questions} == {"+", "-", "*"}
    assert all(QUESTION_PATTERN.fullmatch(q.text) for q in questions)
    assert all(q.answer >= 0 for q in questions)


def test_random_question_honours_the_operator_choice():
    rng = random.Random(0)
    assert {random_question(rng, ops=("+",)).op for _ in range(50)} == {"+"}


def test_find_questions_returns_every_question_in_order():
    text = "Use the calculator tool to compute: What is 2 + 3? Then What is 4 * 5?"
    assert find_questions(text) == [Question(2, "+", 3), Question(4, "*", 5)]


def test_parse_answer_reads_the_last_answer_tag():
    assert parse_answer("<answer>1</answer> no wait <answer> 7 </answer>") == 7


def test_parse_answer_accepts_negative_integers():
    assert parse_answer(format_answer(-4)) == -4


@pytest.mark.parametrize("reply", [None, "", "The answer is 7.", "<answer>seven</answer>"])
def test_parse_answer_is_none_without_an_integer_tag(reply):
    assert parse_answer(reply) is None


def test_parse_answer_does_not_fall_back_to_an_earlier_tag():
    assert parse_answer("<answer>7</answer> ... <answer>7.5</answer>") is None


def test_peer_agreement_is_the_share_of_other_rollouts_with_the_same_answer():
    assert peer_agreement([4, 4, 5, None]) == [1 / 3, 1 / 3, 0.0, 0.0]


def test_peer_agreement_needs_a_group():
    with pytest.raises(ValueError, match="at least 2"):
        peer_agreement([4])


def test_fraction_correct_scores_replies_in_order_and_counts_missing_ones_as_misses():
    replies = [format_answer(3), format_answer(9), None]
    assert fraction_correct(replies, [3, 5, 7, 8]) == 1 / 4


def test_fraction_correct_ignores_replies_past_the_last_answer():
    assert fraction_correct([format_answer(3), format_answer(4)], [3]) == 1.0


def test_fraction_correct_needs_an_expected_answer():
    with pytest.raises(ValueError, match="at least one"):
        fraction_correct([format_answer(3)], [])
