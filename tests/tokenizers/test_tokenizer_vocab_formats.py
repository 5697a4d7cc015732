"""Reading and writing the vocabulary formats the source packages ship."""

from __future__ import annotations

import struct

import pytest

from miles_verifiers_testkit.tokenizers.vocab import (
    VocabularyFormatError,
    check_dense,
    parse_quicktok_special,
    parse_quicktok_vocab,
    parse_tiktoken,
    render_tiktoken,
)


def quicktok_vocab(entries: list[tuple[bytes, int]]) -> bytes:
    body = b"".join(struct.pack("<H", len(t)) + t + struct.pack("<I", r) for t, r in entries)
    return struct.pack("<I", len(entries)) + body


def test_tiktoken_text_round_trips_in_rank_order() -> None:
    ranks = {b"b": 1, b"a": 0, b" the": 2}
    rendered = render_tiktoken(ranks)
    assert rendered == b"YQ== 0\nYg== 1\nIHRoZQ== 2\n"
    assert parse_tiktoken(rendered) == ranks


def test_tiktoken_line_without_rank_is_rejected() -> None:
    with pytest.raises(VocabularyFormatError, match="line 2"):
        parse_tiktoken(b"YQ== 0\nYg==\n")


def test_quicktok_vocab_is_decoded_whatever_the_entry_order() -> None:
    data = quicktok_vocab([(b"ab", 2), (b"a", 0), (b"b", 1)])
    assert parse_quicktok_vocab(data) == {b"a": 0, b"b": 1, b"ab": 2}


def test_truncated_quicktok_vocab_is_rejected() -> None:
    data = quicktok_vocab([(b"a", 0), (b"b", 1)])
    with pytest.raises(VocabularyFormatError, match="truncated"):
        parse_quicktok_vocab(data[:-2])


def test_quicktok_vocab_with_trailing_bytes_is_rejected() -> None:
    with pytest.raises(VocabularyFormatError, match="trailing"):
        parse_quicktok_vocab(quicktok_vocab([(b"a", 0)]) + b"\x00")


def test_quicktok_special_file_maps_ids_to_text() -> None:
    entry = struct.pack("<I", 7) + struct.pack("<H", 5) + b"<|x|>"
    assert parse_quicktok_special(struct.pack("<I", 1) + entry) == {7: "<|x|>"}


def test_ranks_with_a_gap_are_not_dense() -> None:
    with pytest.raises(VocabularyFormatError, match="dense"):
        check_dense({b"a": 0, b"b": 2}, name="toy")
