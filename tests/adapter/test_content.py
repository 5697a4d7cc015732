"""Content-part messages made plain text before rendering; media parts refused."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from verifiers.v1 import ImageUrlContentPart, TextContentPart, UserMessage

from miles_verifiers.episodes.content import (
    NonTextContentError,
    check_task_prompts,
    plain_text_messages,
)

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.invalid/a.png"}}


def test_text_parts_are_joined_with_nothing_between_them() -> None:
    parts = [{"type": "text", "text": "a "}, {"type": "text", "text": "b"}]
    messages = [{"role": "user", "content": parts}]

    assert plain_text_messages(messages) == [{"role": "user", "content": "a b"}]


def test_the_callers_messages_are_left_as_they_were() -> None:
    parts = [{"type": "text", "text": "a"}]
    messages = [{"role": "user", "content": parts}]

    plain_text_messages(messages)

    assert messages == [{"role": "user", "content": [{"type": "text", "text": "a"}]}]


def test_messages_without_part_lists_are_returned_as_they_are() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "assistant", "content": None}]

    assert plain_text_messages(messages) is messages


def test_a_media_part_in_a_request_is_refused_naming_the_message_and_the_part_type() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": [IMAGE]}]

    with pytest.raises(NonTextContentError, match=r"message 1 \(role 'user'\).*'image_url'"):
        plain_text_messages(messages)


def test_a_task_prompt_with_a_media_part_is_refused_naming_the_task() -> None:
    image = ImageUrlContentPart(image_url={"url": "https://example.invalid/a.png"})
    tasks = [
        SimpleNamespace(data=SimpleNamespace(idx=0, name=None, prompt="plain")),
        SimpleNamespace(
            data=SimpleNamespace(
                idx=7, name="pic", prompt=[UserMessage(content=[TextContentPart(text="x"), image])]
            )
        ),
    ]

    with pytest.raises(NonTextContentError, match=r"task 7 \('pic'\).*'image_url'"):
        check_task_prompts(tasks)


def test_task_prompts_of_text_parts_pass() -> None:
    prompt = [UserMessage(content=[TextContentPart(text="x")])]

    check_task_prompts([SimpleNamespace(data=SimpleNamespace(idx=0, name=None, prompt=prompt))])
