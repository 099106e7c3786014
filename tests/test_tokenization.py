"""Tests of course_lib.tokenization (lesson 01 references)."""

from __future__ import annotations

import functools
import re

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.data import gpt2_encoding, load_text
from course_lib.tokenization import (
    END_OF_TEXT_TOKEN,
    UNK_TOKEN,
    BPEStep,
    SimpleTokenizer,
    TokenWindowDataset,
    apply_merge,
    bpe_decode,
    bpe_encode,
    bpe_encode_steps,
    bpe_vocab,
    build_vocab,
    create_dataloader,
    get_pair_counts,
    merge_pair,
    sliding_window_pairs,
    split_words,
    train_bpe,
)

VERDICT_SAMPLE = (
    "I HAD always thought Jack Gisburn rather a cheap genius--though a good fellow enough--so it was no "
    "great surprise to me to hear that, in the height of his glory, he had dropped his painting, married "
    "a rich widow, and established himself in a villa on the Riviera."
)


@functools.cache
def verdict_text() -> str:
    return load_text("the-verdict.txt")  # committed in data/


@functools.cache
def verdict_merges() -> dict[tuple[int, int], int]:
    return train_bpe(verdict_text(), 256 + 200)


# ----------------------------------------------------------------------------------------------
# Independent brute-force references, written differently from the library on purpose


def reference_pair_counts(ids):
    """Counts as a list of [pair, count] in order of first occurrence (no dict ordering relied upon)."""
    table = []
    for i in range(len(ids) - 1):
        pair = (ids[i], ids[i + 1])
        for row in table:
            if row[0] == pair:
                row[1] += 1
                break
        else:
            table.append([pair, 1])
    return table


def reference_merge(ids, pair, new_id):
    """Merge with a for loop and a skip flag (the library uses an index-based while loop)."""
    out, skip = [], False
    for i, token in enumerate(ids):
        if skip:
            skip = False
        elif tuple(ids[i : i + 2]) == tuple(pair):
            out.append(new_id)
            skip = True  # the second half of this pair is consumed: no overlapping matches
        else:
            out.append(token)
    return out


def reference_train_bpe(text, vocab_size):
    ids = list(text.encode("utf-8"))
    merges = {}
    for step in range(vocab_size - 256):
        if len(ids) < 2:
            break
        table = reference_pair_counts(ids)
        best_pair, best_count = table[0]
        for pair, count in table[1:]:
            if count > best_count:  # strictly greater: an earlier first occurrence wins a tie
                best_pair, best_count = pair, count
        ids = reference_merge(ids, best_pair, 256 + step)
        merges[best_pair] = 256 + step
    return merges


def reference_encode(text, merges):
    ids = list(text.encode("utf-8"))
    while True:
        present = {(a, b) for a, b in zip(ids, ids[1:], strict=False)}
        usable = sorted((merges[p], p) for p in present if p in merges)
        if not usable:
            return ids
        new_id, pair = usable[0]
        ids = reference_merge(ids, pair, new_id)


# ----------------------------------------------------------------------------------------------
# Word-level tokenizer


def test_split_words_follows_contract_regex():
    text = 'Hello, world. Is this-- a test? "Yes" (it is); _really_!'
    expected = [item.strip() for item in re.split(r'([,.:;?_!"()\']|--|\s)', text) if item.strip()]
    assert split_words(text) == expected
    assert split_words("Hello, world.") == ["Hello", ",", "world", "."]
    assert split_words("  \n\t ") == []


def test_build_vocab_sorted_then_specials():
    vocab = build_vocab("b a, c a")
    assert list(vocab) == [",", "a", "b", "c", END_OF_TEXT_TOKEN, UNK_TOKEN]
    assert list(vocab.values()) == list(range(6))
    assert build_vocab(["z", "y", "z"]) == {"y": 0, "z": 1, END_OF_TEXT_TOKEN: 2, UNK_TOKEN: 3}


def test_build_vocab_of_the_verdict_has_1132_entries():
    assert len(build_vocab(verdict_text())) == 1130 + 2


def test_simple_tokenizer_round_trip_and_unknown_words():
    vocab = build_vocab(VERDICT_SAMPLE)
    tokenizer = SimpleTokenizer(vocab)
    text = "I HAD always thought Jack Gisburn rather a cheap genius -- though a good fellow enough."
    ids = tokenizer.encode(text)
    assert ids == [vocab[word] for word in split_words(text)]
    assert tokenizer.decode(ids) == text
    ids = tokenizer.encode("Hello, Jack.")
    assert ids == [vocab[UNK_TOKEN], vocab[","], vocab["Jack"], vocab["."]]
    assert tokenizer.decode(ids) == "<|unk|>, Jack."


def test_simple_tokenizer_decode_removes_space_before_punctuation_only():
    vocab = {"a": 0, ",": 1, "(": 2, ")": 3, "--": 4, UNK_TOKEN: 5}
    tokenizer = SimpleTokenizer(vocab)
    # the contract's re.sub removes the space before ( as well, but not before "--"
    assert tokenizer.decode([0, 1, 0, 2, 0, 3, 4, 0]) == "a, a( a) -- a"


def test_simple_tokenizer_errors():
    with pytest.raises(TypeError, match="vocab"):
        SimpleTokenizer(["a"])
    with pytest.raises(TypeError, match="vocab"):
        SimpleTokenizer({"a": "0"})
    with pytest.raises(ValueError, match="same id"):
        SimpleTokenizer({"a": 0, "b": 0})
    tokenizer = SimpleTokenizer({"a": 0, "b": 1})
    with pytest.raises(ValueError, match=r"'c'.*<\|unk\|>"):
        tokenizer.encode("a c")
    assert tokenizer.encode("a b") == [0, 1]  # known words still work without <|unk|>
    with pytest.raises(TypeError, match="text"):
        tokenizer.encode(b"a b")
    with pytest.raises(ValueError, match="id 7"):
        tokenizer.decode([0, 7])
    with pytest.raises(TypeError, match="item 1"):
        tokenizer.decode([0, 1.0])
    with pytest.raises(TypeError, match="text_or_tokens"):
        build_vocab(["a", 3])
    with pytest.raises(TypeError, match="text_or_tokens"):
        build_vocab(5)


# ----------------------------------------------------------------------------------------------
# Pair counts and merges


def test_get_pair_counts_contract_examples():
    assert get_pair_counts([1, 1, 1]) == {(1, 1): 2}
    assert get_pair_counts([]) == {}
    assert get_pair_counts([5]) == {}
    counts = get_pair_counts([3, 1, 2, 3, 1, 1, 1])
    assert counts == {(3, 1): 2, (1, 2): 1, (2, 3): 1, (1, 1): 2}
    assert list(counts) == [(3, 1), (1, 2), (2, 3), (1, 1)]  # order of first occurrence


@given(st.lists(st.integers(0, 4), max_size=40))
def test_get_pair_counts_matches_brute_force(ids):
    assert list(get_pair_counts(ids).items()) == [tuple(row) for row in reference_pair_counts(ids)]


def test_merge_pair_contract_examples():
    ids = [1, 1, 1]
    assert merge_pair(ids, (1, 1), 9) == [9, 1]
    assert ids == [1, 1, 1]  # input untouched
    assert merge_pair([1, 1, 1, 1], (1, 1), 9) == [9, 9]
    assert merge_pair([1, 2, 3, 1, 2], (1, 2), 7) == [7, 3, 7]
    assert merge_pair([1, 2, 3], (3, 4), 7) == [1, 2, 3]
    assert merge_pair([], (1, 2), 7) == []


@given(st.lists(st.integers(0, 3), max_size=40), st.integers(0, 3), st.integers(0, 3))
def test_merge_pair_matches_brute_force(ids, a, b):
    original = list(ids)
    assert merge_pair(ids, (a, b), 99) == reference_merge(ids, (a, b), 99)
    assert ids == original


@given(st.lists(st.integers(0, 3), max_size=40), st.integers(0, 3), st.integers(0, 3))
def test_apply_merge_is_merge_pair_without_the_checks(ids, a, b):
    original = list(ids)
    assert apply_merge(ids, (a, b), 99) == merge_pair(ids, (a, b), 99)
    assert ids == original


def test_merge_pair_errors():
    with pytest.raises(TypeError, match="pair"):
        merge_pair([1, 2], [1, 2], 3)
    with pytest.raises(TypeError, match="new_id"):
        merge_pair([1, 2], (1, 2), "3")
    with pytest.raises(TypeError, match="ids"):
        merge_pair("12", (1, 2), 3)
    with pytest.raises(TypeError, match="item 0"):
        get_pair_counts([None, 1])


# ----------------------------------------------------------------------------------------------
# Training


def test_train_bpe_tie_goes_to_first_occurrence_not_smallest_or_largest_pair():
    # "bca": pairs (98, 99) and (99, 97) tie at 1; the first occurrence is (98, 99), which is neither the
    # smallest pair (97 would win) nor the largest ((99, 97)).
    assert train_bpe("bca", 257) == {(98, 99): 256}
    # after the first merge, (256, 99) ties with (99, 120) and (120, 121): first occurrence in the
    # *current* sequence wins, even though 256 is the largest id.
    merges = train_bpe("abcxyabcxy", 258)
    assert list(merges.items()) == [((97, 98), 256), ((256, 99), 257)]


def test_train_bpe_most_frequent_pair_wins_over_earlier_pair():
    assert list(train_bpe("xyabab", 257)) == [(97, 98)]


def test_train_bpe_number_of_merges_and_early_stop():
    assert train_bpe("hello", 256) == {}
    assert len(train_bpe(VERDICT_SAMPLE, 256 + 30)) == 30
    # "aaaa" -> [256, 256] -> [257]: one token left, so training stops after 2 merges
    assert train_bpe("aaaa", 300) == {(97, 97): 256, (256, 256): 257}
    assert train_bpe("", 300) == {}
    assert train_bpe("a", 300) == {}
    merges = train_bpe(VERDICT_SAMPLE, 256 + 30)
    assert list(merges.values()) == list(range(256, 286))


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ab c\u00e9", max_size=50), st.integers(256, 290))
def test_train_bpe_matches_brute_force(text, vocab_size):
    assert list(train_bpe(text, vocab_size).items()) == list(reference_train_bpe(text, vocab_size).items())


def test_train_bpe_matches_brute_force_on_real_text():
    text = verdict_text()[:3000]
    assert list(train_bpe(text, 256 + 40).items()) == list(reference_train_bpe(text, 256 + 40).items())


def test_train_bpe_errors():
    with pytest.raises(ValueError, match="vocab_size must be >= 256"):
        train_bpe("abc", 255)
    with pytest.raises(TypeError, match="vocab_size"):
        train_bpe("abc", 300.0)
    with pytest.raises(TypeError, match="vocab_size"):
        train_bpe("abc", True)
    with pytest.raises(TypeError, match="text"):
        train_bpe(["abc"], 300)


# ----------------------------------------------------------------------------------------------
# Encoding and decoding


def test_bpe_encode_uses_lowest_merge_id_first():
    # Both (1, 2) and (2, 3) are present in [1, 2, 3]; the merge learned first (lowest id) wins even
    # though it appears later in the dict.
    merges = {(2, 3): 300, (1, 2): 256}
    text = bytes([1, 2, 3]).decode("utf-8")
    assert bpe_encode(text, merges) == [256, 3]
    assert bpe_encode(text, {(2, 3): 256, (1, 2): 300}) == [1, 256]


def test_bpe_encode_reproduces_the_training_sequence():
    text = verdict_text()[:4000]
    merges = train_bpe(text, 256 + 50)
    ids = bpe_encode(text, merges)
    # replaying the merges in order on the training text is what training did
    replay = list(text.encode("utf-8"))
    for pair, new_id in merges.items():
        replay = reference_merge(replay, pair, new_id)
    assert ids == replay
    assert ids == reference_encode(text, merges)


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=80))
def test_bpe_round_trip_on_any_unicode_text(text):
    merges = verdict_merges()
    ids = bpe_encode(text, merges)
    assert bpe_decode(ids, merges) == text
    assert ids == reference_encode(text, merges)


def test_bpe_encode_steps_shows_every_merge():
    merges = verdict_merges()
    text = "the painter's portrait"
    steps = bpe_encode_steps(text, merges)
    assert steps and all(isinstance(step, BPEStep) for step in steps)
    assert steps[-1].ids == bpe_encode(text, merges)
    ids = list(text.encode("utf-8"))
    for step in steps:
        assert step.new_id == merges[step.pair]
        ids = reference_merge(ids, step.pair, step.new_id)
        assert step.ids == ids
    assert [step.new_id for step in steps] == sorted(step.new_id for step in steps)
    assert bpe_encode_steps("\x00", merges) == []


def test_bpe_decode_invalid_utf8_is_replaced_and_bytes_expand():
    merges = {(104, 105): 256, (256, 33): 257}  # "hi", then "hi!"
    assert bpe_decode([257, 32, 256], merges) == "hi! hi"
    assert bpe_vocab(merges)[257] == b"hi!"
    assert bpe_decode([0xE2, 0x82], merges) == "\ufffd"  # a truncated euro sign
    assert bpe_decode([], merges) == ""


def test_bpe_encode_decode_errors():
    merges = {(104, 105): 256}
    with pytest.raises(ValueError, match="id 300"):
        bpe_decode([104, 300], merges)
    with pytest.raises(ValueError, match="id -1"):
        bpe_decode([-1], merges)
    with pytest.raises(TypeError, match="item 0"):
        bpe_decode(["h"], merges)
    with pytest.raises(TypeError, match="merges"):
        bpe_decode([104], [((104, 105), 256)])
    with pytest.raises(ValueError, match="inconsistent"):
        bpe_decode([104], {(104, 999): 256})
    with pytest.raises(TypeError, match="text"):
        bpe_encode(b"hi", merges)
    with pytest.raises(TypeError, match="merges"):
        bpe_encode("hi", None)


# ----------------------------------------------------------------------------------------------
# Sliding windows and the DataLoader


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 60), st.integers(1, 12), st.integers(1, 12))
def test_sliding_window_pairs_counts_shapes_and_shift(n, context_length, stride):
    ids = [(7 * i) % 31 for i in range(n)]
    inputs, targets = sliding_window_pairs(ids, context_length, stride)
    starts = list(range(0, n - context_length, stride))
    assert inputs.dtype == torch.long and targets.dtype == torch.long
    assert inputs.shape == targets.shape == (len(starts), context_length)
    for row, s in enumerate(starts):
        assert inputs[row].tolist() == ids[s : s + context_length]
        assert targets[row].tolist() == ids[s + 1 : s + context_length + 1]


def test_sliding_window_pairs_small_example_and_tensor_input():
    inputs, targets = sliding_window_pairs(list(range(10)), 4, 2)
    assert inputs.tolist() == [[0, 1, 2, 3], [2, 3, 4, 5], [4, 5, 6, 7]]
    assert targets.tolist() == [[1, 2, 3, 4], [3, 4, 5, 6], [5, 6, 7, 8]]
    inputs_t, targets_t = sliding_window_pairs(torch.arange(10, dtype=torch.int32), 4, 2)
    assert torch.equal(inputs_t, inputs) and torch.equal(targets_t, targets)
    inputs[0, 0] = 99  # windows are copies, not views into one another
    assert inputs[1, 0] == 2


def test_sliding_window_pairs_errors():
    with pytest.raises(ValueError, match="context_length must be >= 1"):
        sliding_window_pairs([1, 2, 3], 0, 1)
    with pytest.raises(ValueError, match="stride must be >= 1"):
        sliding_window_pairs([1, 2, 3], 1, 0)
    with pytest.raises(TypeError, match="stride"):
        sliding_window_pairs([1, 2, 3], 1, 1.5)
    # Too short for one window: the contract's range is empty, so zero windows (shape (0, T)), no error...
    inputs, targets = sliding_window_pairs([1, 2, 3], 3, 1)
    assert inputs.shape == targets.shape == (0, 3) and inputs.dtype == torch.long
    # ...but a dataset of zero windows is a mistake worth naming.
    with pytest.raises(ValueError, match="at least context_length"):
        TokenWindowDataset([1, 2, 3], 3, 1)
    with pytest.raises(TypeError, match="item 1"):
        sliding_window_pairs([1, 2.0, 3], 1, 1)
    with pytest.raises(TypeError, match="1-D integer tensor"):
        sliding_window_pairs(torch.zeros(5), 1, 1)


def test_token_window_dataset_items():
    dataset = TokenWindowDataset(list(range(20)), context_length=5, stride=3)
    assert len(dataset) == len(range(0, 20 - 5, 3))
    x, y = dataset[2]
    assert x.tolist() == [6, 7, 8, 9, 10] and y.tolist() == [7, 8, 9, 10, 11]


def test_create_dataloader_with_simple_tokenizer_is_seeded():
    text = VERDICT_SAMPLE * 3
    tokenizer = SimpleTokenizer(build_vocab(text))
    ids = tokenizer.encode(text)

    def batches(seed):
        loader = create_dataloader(text, tokenizer, batch_size=2, context_length=8, stride=4, seed=seed)
        return list(loader)

    first, again, other = batches(1), batches(1), batches(2)
    n_windows = len(range(0, len(ids) - 8, 4))
    assert len(first) == n_windows // 2  # drop_last
    for (x, y), (x2, y2) in zip(first, again, strict=True):
        assert x.shape == y.shape == (2, 8)
        assert torch.equal(x, x2) and torch.equal(y, y2)
    assert any(not torch.equal(a[0], b[0]) for a, b in zip(first, other, strict=True))
    # every batch row is a real window of the text, shifted by one for the targets
    windows = {tuple(ids[s : s + 9]) for s in range(0, len(ids) - 8, 4)}
    for x, y in first:
        for row in range(2):
            assert tuple(x[row].tolist()) + (y[row, -1].item(),) in windows
            assert x[row, 1:].tolist() == y[row, :-1].tolist()


def test_create_dataloader_default_is_gpt2_without_shuffle(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_DATA_CACHE", str(tmp_path))  # keep the real data cache untouched
    text = VERDICT_SAMPLE + " " + END_OF_TEXT_TOKEN + " " + VERDICT_SAMPLE
    loader = create_dataloader(text, batch_size=3, context_length=4, stride=4, shuffle=False)
    x, y = next(iter(loader))
    expected = gpt2_encoding().encode(text, allowed_special={END_OF_TEXT_TOKEN})
    assert 50256 in expected
    assert x.tolist() == [expected[0:4], expected[4:8], expected[8:12]]
    assert y.tolist() == [expected[1:5], expected[5:9], expected[9:13]]


def test_create_dataloader_errors():
    with pytest.raises(TypeError, match="tokenizer"):
        create_dataloader("some text", tokenizer=object())
    with pytest.raises(ValueError, match="batch_size"):
        create_dataloader("a b c d e", SimpleTokenizer(build_vocab("a b c d e")), batch_size=0)
    with pytest.raises(ValueError, match="context_length"):
        create_dataloader("a b c", SimpleTokenizer(build_vocab("a b c")), context_length=8)
