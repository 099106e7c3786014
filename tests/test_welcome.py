"""Lesson 00 references against direct computations."""

import collections

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib.welcome import count_characters, next_token_pairs, normalize_rows


@given(st.text())
def test_count_characters_matches_counter_in_first_appearance_order(text):
    counts = count_characters(text)
    assert counts == collections.Counter(text)
    assert list(counts) == list(dict.fromkeys(text))


@given(st.lists(st.integers(-5, 5)))
def test_next_token_pairs_pairs_each_id_with_its_successor(ids):
    pairs = next_token_pairs(ids)
    assert len(pairs) == max(len(ids) - 1, 0)
    assert all(pairs[i] == (ids[i], ids[i + 1]) for i in range(len(pairs)))


def test_normalize_rows_rows_sum_to_one_and_input_is_kept():
    x = torch.rand(5, 7, generator=torch.Generator().manual_seed(0)) + 0.01
    before = x.clone()
    out = normalize_rows(x)
    torch.testing.assert_close(out.sum(dim=1), torch.ones(5))
    torch.testing.assert_close(out * x.sum(dim=1, keepdim=True), x)
    assert torch.equal(x, before)


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: count_characters(3), TypeError),
        (lambda: next_token_pairs("abc"), TypeError),
        (lambda: next_token_pairs([1, 2.5]), TypeError),
        (lambda: normalize_rows(torch.ones(3)), ValueError),
        (lambda: normalize_rows(torch.zeros(2, 2)), ValueError),
    ],
)
def test_bad_input_is_rejected_clearly(call, error):
    with pytest.raises(error):
        call()
