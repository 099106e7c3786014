"""Tests of course_lib.reversal_task (Lesson 07): the vocabulary, padded batches, held-out strings that training
never samples, and exact match."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import reversal_task as rt

DIGIT_STRINGS = st.lists(st.text("0123456789", min_size=1, max_size=9), min_size=1, max_size=6)


def test_vocabulary_ids():
    assert (rt.PAD_ID, rt.BOS_ID, rt.EOS_ID) == (0, 1, 2)
    assert rt.VOCAB_SIZE == 13 and rt.TOKENS[rt.encode_digits("0")[0]] == "0"
    assert rt.encode_digits("4071") == [7, 3, 10, 4]


@pytest.mark.parametrize("bad", ["", "12a", "１２", "-1"])
def test_encode_digits_refuses_non_digits(bad):
    with pytest.raises(ValueError, match="string of digits"):
        rt.encode_digits(bad)


@settings(max_examples=40, deadline=None)
@given(DIGIT_STRINGS)
def test_a_batch_holds_each_string_and_its_reverse(strings):
    src, labels = rt.reversal_batch(strings)
    S = max(map(len, strings)) + 1
    assert src.shape == labels.shape == (len(strings), S) and src.dtype == torch.long
    for b, s in enumerate(strings):
        assert rt.decode_ids(src[b]) == s and rt.decode_ids(labels[b]) == s[::-1]
        assert src[b, len(s)] == labels[b, len(s)] == rt.EOS_ID
        assert (src[b, len(s) + 1 :] == rt.PAD_ID).all() and (labels[b, len(s) + 1 :] == rt.PAD_ID).all()


def test_decode_ids_stops_at_eos_and_skips_pad_and_bos():
    ids = [rt.BOS_ID, *rt.encode_digits("12"), rt.PAD_ID, *rt.encode_digits("3"), rt.EOS_ID, 5]
    assert rt.decode_ids(ids) == "123"
    assert rt.decode_ids(torch.tensor(ids)) == "123"


def test_held_out_strings_are_distinct_of_their_length_and_fixed_by_the_seed():
    task = rt.ReversalTask()
    held = task.held_out
    assert list(held) == list(task.test_lengths)
    for n, strings in held.items():
        assert len(strings) == min(task.test_per_length, 10**n // 5) == len(set(strings))
        assert all(len(s) == n and s.isdigit() for s in strings)
    assert rt.ReversalTask().held_out == held
    assert rt.ReversalTask(seed=1).held_out[8] != held[8]


def test_training_batches_never_contain_a_held_out_string():
    task = rt.ReversalTask(train_lengths=(3,), test_lengths=(3,), test_per_length=200)  # a fifth of all 1000
    held = set(task.held_out[3])
    generator = torch.Generator().manual_seed(0)
    seen = set()
    for _ in range(40):
        src, _ = task.sample(64, generator)
        seen |= {rt.decode_ids(row) for row in src}
    assert seen and not seen & held
    assert len(seen) > 600  # the other 800 strings are all sampled


def test_sampled_lengths_are_the_training_lengths():
    task = rt.ReversalTask()
    src, labels = task.sample(512, torch.Generator().manual_seed(1))
    lengths = {len(rt.decode_ids(row)) for row in src}
    assert lengths == set(task.train_lengths)
    assert 4 not in lengths and 7 not in lengths  # left out of training on purpose


def test_tiny_task_and_max_len():
    assert rt.ReversalTask.tiny().max_len == 5 and rt.ReversalTask().max_len == 12


@pytest.mark.parametrize("field, value", [("train_lengths", ()), ("test_lengths", (0,)), ("test_per_length", 0)])
def test_bad_task_settings_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        rt.ReversalTask(**{field: value})


def test_exact_match_counts_up_to_eos_only():
    _, labels = rt.reversal_batch(["123", "45"])  # labels: 3 2 1 <eos> | 5 4 <eos> <pad>
    right = labels.clone()
    assert rt.exact_match(right, labels).tolist() == [True, True]
    after_eos = right.clone()
    after_eos[1, 3] = 7  # whatever comes after <eos> does not count
    assert rt.exact_match(after_eos, labels).tolist() == [True, True]
    early = right.clone()
    early[0, 2] = rt.EOS_ID  # stopping one token early is wrong
    assert rt.exact_match(early, labels).tolist() == [False, True]
    short = right[:, :2]  # a prediction that ends before the labels do
    assert rt.exact_match(short, labels).tolist() == [False, False]
    longer = torch.cat([right, torch.full((2, 3), rt.PAD_ID)], dim=1)
    assert rt.exact_match(longer, labels).tolist() == [True, True]


def test_mirror_attention_scores_a_perfect_anti_diagonal_as_one():
    lengths = [3, 5]
    L, B, H, T, S = 2, 2, 3, 6, 6
    weights = torch.zeros(L, B, H, T, S)
    for b, n in enumerate(lengths):
        for t in range(n):
            weights[0, b, :, t, n - 1 - t] = 1.0  # layer 0: exactly the mirror
            weights[1, b, :, t, n] = 0.5  # layer 1: half on <eos>, half on the digit just read
            weights[1, b, :, t, n - t] += 0.5
        weights[:, b, :, n:, 0] = 1.0  # positions after the digits do not count
    found = rt.mirror_attention(weights, lengths)
    assert {k: v.shape for k, v in found.items()} == {k: (L, H) for k in ("mirror", "next", "eos")}
    assert torch.allclose(found["mirror"][0], torch.ones(H)) and (found["mirror"][1] == 0).all()
    assert torch.allclose(found["next"][1], torch.full((H,), 0.5)) and (found["next"][0] == 0).all()
    # at t = 0 the digit just read is <bos>: "next" would be the <eos> column, so t = 0 is left out of "next"
    assert torch.allclose(found["eos"][1], torch.tensor(0.5 + 0.5 * 2 / 8))


def test_mirror_attention_refuses_lengths_that_do_not_fit():
    with pytest.raises(ValueError, match="lengths"):
        rt.mirror_attention(torch.zeros(1, 2, 1, 4, 4), [2, 4])
