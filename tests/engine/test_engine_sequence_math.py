"""Scripted logprobs and prefix identities (the radix-cache stand-in)."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from miles_verifiers_testkit.engine.prefix_cache import PrefixCache
from miles_verifiers_testkit.engine.sequence_math import PrefixKeys, as_u64, scripted_logprobs

token_lists = st.lists(st.integers(min_value=0, max_value=200_000), min_size=1, max_size=300)


@given(token_lists)
def test_scripted_logprobs_are_finite_negative_and_never_zero(tokens: list[int]) -> None:
    values = scripted_logprobs(as_u64(tokens), 0, len(tokens))
    assert len(values) == len(tokens)
    assert all(
        isinstance(v, float) and math.isfinite(v) and v < 0.0 and v > -9999.0 for v in values
    )


@given(token_lists, st.data())
def test_scoring_a_sequence_again_reproduces_its_logprobs(
    tokens: list[int], data: st.DataObject
) -> None:
    whole = scripted_logprobs(as_u64(tokens), 0, len(tokens))
    start = data.draw(st.integers(min_value=0, max_value=len(tokens) - 1))
    assert scripted_logprobs(as_u64(tokens), start, len(tokens)) == whole[start:]


def test_a_logprob_depends_on_the_token_its_predecessor_and_position() -> None:
    base = scripted_logprobs(as_u64([5, 6, 7]), 2, 3)
    assert scripted_logprobs(as_u64([5, 6, 8]), 2, 3) != base
    assert scripted_logprobs(as_u64([5, 9, 7]), 2, 3) != base
    assert scripted_logprobs(as_u64([1, 5, 6, 7]), 3, 4) != base
    assert scripted_logprobs(as_u64([4, 6, 7]), 2, 3) == base


def test_prefix_keys_agree_exactly_where_sequences_share_a_prefix() -> None:
    keys = PrefixKeys(16)
    first = keys.keys(as_u64([1, 2, 3, 4, 5]))
    second = keys.keys(as_u64([1, 2, 3, 9, 5, 6]))
    assert list(first[:3]) == list(second[:3])
    assert all(a != b for a, b in zip(first[3:], second[3:]))


def test_prefix_keys_grow_past_their_initial_length() -> None:
    keys = PrefixKeys(2)
    long = keys.keys(as_u64(list(range(50))))
    assert len(long) == 50 and len(set(long.tolist())) == 50


def test_the_prefix_cache_finds_the_longest_cached_prefix() -> None:
    keys = PrefixKeys(64)
    cache = PrefixCache(max_tokens=1000)
    cache.insert(keys.keys(as_u64([1, 2, 3, 4, 5, 6])))
    assert cache.longest_prefix(keys.keys(as_u64([1, 2, 3, 4, 9, 9, 9]))) == 4
    assert cache.longest_prefix(keys.keys(as_u64([1, 2, 3, 4, 5, 6, 7]))) == 6
    assert cache.longest_prefix(keys.keys(as_u64([7, 2, 3]))) == 0


def test_prefix_cache_namespaces_do_not_share_entries() -> None:
    keys = PrefixKeys(64)
    cache = PrefixCache(max_tokens=1000)
    sequence = keys.keys(as_u64([1, 2, 3]))
    cache.insert(sequence ^ np.uint64(12345))
    assert cache.longest_prefix(sequence) == 0
    assert cache.longest_prefix(sequence ^ np.uint64(12345)) == 3


def test_the_prefix_cache_empties_when_an_insert_would_pass_its_bound() -> None:
    keys = PrefixKeys(64)
    cache = PrefixCache(max_tokens=10)
    cache.insert(keys.keys(as_u64([1, 2, 3, 4, 5, 6])))
    cache.insert(keys.keys(as_u64([7, 8, 9, 10, 11])))
    assert len(cache) == 5
    assert cache.longest_prefix(keys.keys(as_u64([1, 2]))) == 0


def test_a_disabled_prefix_cache_reports_nothing_cached() -> None:
    keys = PrefixKeys(8)
    cache = PrefixCache(max_tokens=1000, enabled=False)
    cache.insert(keys.keys(as_u64([1, 2, 3])))
    assert cache.longest_prefix(keys.keys(as_u64([1, 2, 3]))) == 0
