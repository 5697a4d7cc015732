"""Facts only the real tokenizers satisfy, checked on the rebuilt ones loaded by hub id."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import pytest

from miles_verifiers_testkit.tokenizers import BuildReport
from miles_verifiers_testkit.tokenizers.sources import QWEN, parse_source, read_verified
from miles_verifiers_testkit.tokenizers.specs import (
    GPT_OSS_FIRST_ADDED_ID,
    GPT_OSS_LAST_ADDED_ID,
    QWEN3_PLAIN_ADDED_TOKENS,
    QWEN3_SPECIAL_TOKENS,
)
from miles_verifiers_testkit.tokenizers.vocab import parse_quicktok_special, parse_quicktok_vocab

# Qwen3's added tokens at their published ids (Qwen/Qwen3-0.6B tokenizer_config.json).
QWEN3_ADDED_IDS = {
    "<|endoftext|>": 151643,
    "<|im_start|>": 151644,
    "<|im_end|>": 151645,
    "<|object_ref_start|>": 151646,
    "<|object_ref_end|>": 151647,
    "<|box_start|>": 151648,
    "<|box_end|>": 151649,
    "<|quad_start|>": 151650,
    "<|quad_end|>": 151651,
    "<|vision_start|>": 151652,
    "<|vision_end|>": 151653,
    "<|vision_pad|>": 151654,
    "<|image_pad|>": 151655,
    "<|video_pad|>": 151656,
    "<tool_call>": 151657,
    "</tool_call>": 151658,
    "<|fim_prefix|>": 151659,
    "<|fim_middle|>": 151660,
    "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662,
    "<|repo_name|>": 151663,
    "<|file_sep|>": 151664,
    "<tool_response>": 151665,
    "</tool_response>": 151666,
    "<think>": 151667,
    "</think>": 151668,
}
QWEN3_NON_SPECIAL = set(QWEN3_PLAIN_ADDED_TOKENS)

# SHA-256 of files OpenAI publishes and Qwen's published vocab.json.
O200K_BASE_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"
CL100K_BASE_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
QWEN_VOCAB_JSON_SHA256 = "ca10d7e9fb3ed18575dd1e277a2579c16d108e32f27439684afa0e10b1440910"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def qwen3(hub_tokenizer: Callable[[str], Any]) -> Any:
    return hub_tokenizer("Qwen/Qwen3-0.6B")


def test_qwen3_has_the_published_length(qwen3) -> None:
    assert len(qwen3) == 151669


def test_qwen3_encodes_hello_world_as_published(qwen3) -> None:
    assert qwen3.encode("Hello world", add_special_tokens=False) == [9707, 1879]


def test_qwen3_encodes_punctuated_greeting_as_published(qwen3) -> None:
    assert qwen3.encode("Hello, world!", add_special_tokens=False) == [9707, 11, 1879, 0]


@pytest.mark.parametrize(("token", "token_id"), sorted(QWEN3_ADDED_IDS.items()))
def test_qwen3_added_token_is_one_id_at_its_published_position(qwen3, token, token_id) -> None:
    assert qwen3.encode(f"a{token}b", add_special_tokens=False) == [
        *qwen3.encode("a", add_special_tokens=False),
        token_id,
        *qwen3.encode("b", add_special_tokens=False),
    ]


def test_qwen3_special_flags_match_the_published_config(qwen3) -> None:
    special = {entry.content: entry.special for entry in qwen3.added_tokens_decoder.values()}
    assert special == {token: token not in QWEN3_NON_SPECIAL for token in QWEN3_ADDED_IDS}


def test_qwen3_vocab_json_is_the_published_file(offline_cache: BuildReport) -> None:
    vocab = offline_cache.model("Qwen/Qwen3-0.6B").snapshot_path / "vocab.json"
    assert sha256(vocab.read_bytes()) == QWEN_VOCAB_JSON_SHA256


def test_rebuilt_o200k_base_is_openais_file(offline_cache: BuildReport) -> None:
    data = (offline_cache.cache_dir / "tiktoken" / "o200k_base.tiktoken").read_bytes()
    assert sha256(data) == O200K_BASE_SHA256


def test_rebuilt_cl100k_base_is_openais_file(offline_cache: BuildReport) -> None:
    data = (offline_cache.cache_dir / "tiktoken" / "cl100k_base.tiktoken").read_bytes()
    assert sha256(data) == CL100K_BASE_SHA256


def test_encodings_are_also_stored_under_their_url_cache_names(
    offline_cache: BuildReport,
) -> None:
    folder = offline_cache.cache_dir / "tiktoken"
    o200k_url = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
    cached = folder / hashlib.sha1(o200k_url.encode()).hexdigest()
    assert cached.read_bytes() == (folder / "o200k_base.tiktoken").read_bytes()


def _quicktok_file(name: str) -> bytes:
    from miles_verifiers_testkit.tokenizers.sources import O200K, installed_path

    return (installed_path(O200K).parent / name).read_bytes()


def test_qwen_vocabulary_agrees_with_the_second_registry_source() -> None:
    # quicktok-v1 ships its own copy of the Qwen3 ranks; both packages must agree.
    qwen = parse_source(QWEN, read_verified(QWEN))
    assert parse_quicktok_vocab(_quicktok_file("qwen3.vocab")) == qwen


def test_qwen3_added_tokens_agree_with_the_second_registry_source() -> None:
    listed = parse_quicktok_special(_quicktok_file("qwen3.special"))
    expected = dict(enumerate((*QWEN3_SPECIAL_TOKENS, *QWEN3_PLAIN_ADDED_TOKENS), start=151643))
    assert listed == expected


def test_gpt_oss_added_tokens_agree_with_the_registry_token_lists(
    hub_tokenizer: Callable[[str], Any],
) -> None:
    tokenizer = hub_tokenizer("openai/gpt-oss-20b")
    # Harmony names 199998..200017; id 200018 keeps o200k_base's own <|endofprompt|>.
    harmony = parse_quicktok_special(_quicktok_file("o200k_harmony.special"))
    o200k = parse_quicktok_special(_quicktok_file("o200k.special"))
    ids = range(GPT_OSS_FIRST_ADDED_ID, GPT_OSS_LAST_ADDED_ID + 1)
    expected = {i: harmony[i] for i in ids} | {GPT_OSS_LAST_ADDED_ID: o200k[GPT_OSS_LAST_ADDED_ID]}
    assert {i: tokenizer.convert_ids_to_tokens(i) for i in ids} == expected
