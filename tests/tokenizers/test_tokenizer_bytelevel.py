"""The GPT-2 byte-level alphabet used to spell byte tokens in tokenizer.json."""

from __future__ import annotations

from miles_verifiers_testkit.tokenizers.bytelevel import BYTE_ALPHABET, to_unicode


def test_every_byte_has_its_own_character() -> None:
    assert len(set(BYTE_ALPHABET)) == 256


def test_space_newline_and_printable_bytes_are_spelled_as_in_gpt2() -> None:
    assert to_unicode(b" Hello\n") == "ĠHelloĊ"


def test_non_ascii_utf8_bytes_map_one_character_per_byte() -> None:
    assert to_unicode("é".encode()) == "Ã©"
