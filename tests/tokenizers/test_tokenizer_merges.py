"""Recovering merge lists from rank tables."""

from __future__ import annotations

import pytest

from miles_verifiers_testkit.tokenizers.merges import (
    MergeDerivationError,
    bpe_merges,
    split_merges,
)

BYTES = {bytes([b]): b for b in range(256)}


def with_bytes(*tokens: bytes) -> dict[bytes, int]:
    ranks = dict(BYTES)
    for token in tokens:
        ranks[token] = len(ranks)
    return ranks


def test_bpe_merge_is_the_pair_byte_pair_encoding_reaches() -> None:
    # "abc" can split as ab+c or a+bc; BPE merges "bc" first (lower rank), so a+bc is the merge.
    ranks = with_bytes(b"bc", b"ab", b"abc")
    assert bpe_merges(ranks)[-1] == (b"a", b"bc")


def test_bpe_merges_list_one_merge_per_multibyte_token_in_rank_order() -> None:
    ranks = with_bytes(b"ab", b"cd", b"abcd")
    assert bpe_merges(ranks) == [(b"a", b"b"), (b"c", b"d"), (b"ab", b"cd")]


def test_token_unreachable_by_lower_ranked_merges_is_reported() -> None:
    ranks = with_bytes(b"abc")  # no two-byte token, so "abc" never reduces to two parts
    with pytest.raises(MergeDerivationError, match="abc"):
        bpe_merges(ranks)


def test_split_merges_list_every_split_ordered_by_part_ranks() -> None:
    ranks = with_bytes(b"bc", b"ab", b"abc")
    assert split_merges(ranks)[-2:] == [(b"a", b"bc"), (b"ab", b"c")]
