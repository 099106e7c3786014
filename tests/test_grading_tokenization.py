"""Tests of course_lib.grading.tokenization (and .bpe, which it re-exports): the graders of lesson 01.

Learner answers are written here as notebook code: `exec` in a namespace whose `__name__` is "__main__",
which is what the from-scratch guard sees for a notebook's definitions. Each known mistake has a buggy answer
that must fail with a message naming it; right answers (and the reference itself, guard switched off) pass.
"""

from __future__ import annotations

import functools

import pytest

from course_lib import tokenization as ref
from course_lib.grading import core
from course_lib.grading import tokenization as grading
from course_lib.grading.core import GradingError, Passed
from tests.answers import assert_passes, edit, failure_message, hidden_cases, run_cell, run_graded_cells

EXERCISES = [
    "SimpleTokenizer",
    "get_pair_counts",
    "merge_pair",
    "train_bpe",
    "bpe_encode",
    "bpe_decode",
    "sliding_window_pairs",
]
LESSON = "01_tokenization"

# Right answers, written independently of course_lib (each stands alone, as in the lesson's solutions).
ANSWERS = {
    "SimpleTokenizer": """
import re

class SimpleTokenizer:
    def __init__(self, vocab):
        self.str_to_int = vocab
        self.int_to_str = {i: s for s, i in vocab.items()}

    def words(self, text):
        items = [item.strip() for item in re.split(r'([,.:;?_!"()\\']|--|\\s)', text)]
        return [item for item in items if item]

    def encode(self, text):
        unk = self.str_to_int["<|unk|>"]
        return [self.str_to_int.get(word, unk) for word in self.words(text)]

    def decode(self, ids):
        text = " ".join(self.int_to_str[i] for i in ids)
        return re.sub(r'\\s+([,.:;?!"()\\'])', r'\\1', text)
""",
    "get_pair_counts": """
def get_pair_counts(ids):
    counts = {}
    for pair in zip(ids, ids[1:]):
        counts[pair] = counts.get(pair, 0) + 1
    return counts
""",
    "merge_pair": """
def merge_pair(ids, pair, new_id):
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out
""",
    "train_bpe": """
def train_bpe(text, vocab_size):
    if vocab_size < 256:
        raise ValueError("vocab_size must be at least 256")
    ids = list(text.encode("utf-8"))
    merges = {}
    for new_id in range(256, vocab_size):
        if len(ids) < 2:
            break
        counts = {}
        for pair in zip(ids, ids[1:]):
            counts[pair] = counts.get(pair, 0) + 1
        best = max(counts, key=counts.get)
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                out.append(new_id)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
        merges[best] = new_id
    return merges
""",
    "bpe_encode": """
def bpe_encode(text, merges):
    ids = list(text.encode("utf-8"))
    while True:
        present = [pair for pair in zip(ids, ids[1:]) if pair in merges]
        if not present:
            return ids
        best = min(present, key=merges.get)
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == best:
                out.append(merges[best])
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
""",
    "bpe_decode": """
def bpe_decode(ids, merges):
    table = {i: bytes([i]) for i in range(256)}
    for (a, b), new_id in sorted(merges.items(), key=lambda item: item[1]):
        table[new_id] = table[a] + table[b]
    return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")
""",
    "sliding_window_pairs": """
import torch

def sliding_window_pairs(token_ids, context_length, stride):
    starts = range(0, len(token_ids) - context_length, stride)
    inputs = [token_ids[s : s + context_length] for s in starts]
    targets = [token_ids[s + 1 : s + context_length + 1] for s in starts]
    return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)
""",
}


def answer(name: str, code: str | None = None):
    return run_cell(ANSWERS[name] if code is None else code)[name]


def check(name: str):
    return getattr(grading, f"check_{name}")


def fails(name: str, code: str, *words: str, cases=None) -> str:
    """Assert that the answer defined by `code` fails `check_<name>` with a message containing `words`."""
    return failure_message(lambda: check(name)(answer(name, code), cases), *words)


def _variant(name: str, old: str, new: str) -> str:
    """A right answer with one line changed (the buggy answers below are edits of the right ones)."""
    return edit(ANSWERS[name], old, new)


# ----------------------------------------------------------------------------------------------
# Right answers pass


@pytest.mark.parametrize("name", EXERCISES)
def test_right_answers_pass_visible_checks(name):
    result = check(name)(answer(name))
    assert isinstance(result, Passed) and not result.hidden and result.checks >= 4


@pytest.mark.parametrize("name", EXERCISES)
def test_reference_passes_visible_and_hidden_checks(name, no_guard):
    hidden = hidden_cases(LESSON)
    assert set(hidden) == set(EXERCISES)
    assert_passes(check(name), getattr(ref, name), hidden[name], at_least=4)


@pytest.mark.parametrize("name", EXERCISES)
def test_right_answers_pass_the_lessons_hidden_checks(name):
    cases = hidden_cases(LESSON)[name]
    assert check(name)(answer(name), cases).hidden


def test_lesson_solutions_pass_their_own_test_cells():
    """The instructor source's answer cells, run together, pass every visible and hidden test cell."""
    namespace = run_cell("from course_lib import tokenization as ref")  # the lesson's first code cell has it
    graded = run_graded_cells(LESSON, namespace)
    assert len(graded) == 2 * len(EXERCISES)


# ----------------------------------------------------------------------------------------------
# SimpleTokenizer


def test_tokenizer_unknown_words_dropped():
    code = _variant(
        "SimpleTokenizer",
        "return [self.str_to_int.get(word, unk) for word in self.words(text)]",
        "return [self.str_to_int[w] for w in self.words(text) if w in self.str_to_int]",
    )
    fails("SimpleTokenizer", code, "dropped", "unknown words should map to <|unk|>")


def test_tokenizer_unknown_words_raise_key_error():
    code = _variant(
        "SimpleTokenizer",
        "return [self.str_to_int.get(word, unk) for word in self.words(text)]",
        "return [self.str_to_int[w] for w in self.words(text)]",
    )
    fails("SimpleTokenizer", code, "KeyError", "unknown words should map to <|unk|>", "'age'")


def test_tokenizer_decode_keeps_spaces_before_punctuation():
    code = _variant(
        "SimpleTokenizer",
        """return re.sub(r'\\s+([,.:;?!"()\\'])', r'\\1', text)""",
        "return text",
    )
    fails("SimpleTokenizer", code, "spaces before punctuation")


def test_tokenizer_items_not_stripped():
    code = _variant(
        "SimpleTokenizer",
        "items = [item.strip() for item in",
        "items = [item for item in",
    )
    fails("SimpleTokenizer", code, "strip")


def test_tokenizer_split_on_whitespace_only():
    code = _variant("SimpleTokenizer", "return [item for item in items if item]", "return text.split()")
    fails("SimpleTokenizer", code, "punctuation stayed attached")


def test_tokenizer_without_methods_is_reported():
    fails(
        "SimpleTokenizer",
        "class SimpleTokenizer:\n    def __init__(self, vocab):\n        pass\n",
        "no method",
    )


# ----------------------------------------------------------------------------------------------
# get_pair_counts


def test_pair_counts_non_overlapping():
    code = """
def get_pair_counts(ids):
    counts, i = {}, 0
    while i < len(ids) - 1:
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
        i += 2 if ids[i] == ids[i + 1] else 1
    return counts
"""
    fails("get_pair_counts", code, "non-overlapping", "[1, 1, 1]")
    # The same mistake on an input where the first case cannot show it: still named.
    fails("get_pair_counts", code, "non-overlapping", cases=[[1, 2, 2, 2, 2, 2, 3]])


def test_pair_counts_keys_sorted():
    code = _variant("get_pair_counts", "    return counts", "    return dict(sorted(counts.items()))")
    message = fails("get_pair_counts", code, "order of first occurrence", "sorted")
    assert "[(2, 5), (5, 2), (5, 5)]" in message


def test_pair_counts_keys_in_another_order():
    code = _variant(
        "get_pair_counts",
        "    return counts",
        "    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))",
    )
    fails("get_pair_counts", code, "order of first occurrence")


def test_pair_counts_other_mistakes():
    fails(
        "get_pair_counts",
        _variant("get_pair_counts", "zip(ids, ids[1:])", "zip(ids[::2], ids[1::2])"),
        "step of 2",
    )
    fails(
        "get_pair_counts",
        _variant("get_pair_counts", "zip(ids, ids[1:])", "zip(ids[:-1], ids[1:-1])"),
        "last pair",
    )
    fails("get_pair_counts", _variant("get_pair_counts", "counts[pair] = ", "counts[list(pair)[0]] = "), "keys")
    fails("get_pair_counts", "def get_pair_counts(ids):\n    ids.append(0)\n    return {}\n", "do not modify")
    fails(
        "get_pair_counts",
        "def get_pair_counts(ids):\n    return list(zip(ids, ids[1:]))\n",
        "should return a dict",
    )


# ----------------------------------------------------------------------------------------------
# merge_pair

OVERLAPPING_MERGE = """
def merge_pair(ids, pair, new_id):
    out = []
    for i, token in enumerate(ids):
        if i + 1 < len(ids) and (token, ids[i + 1]) == pair:
            out.append(new_id)
        elif i > 0 and (ids[i - 1], token) == pair:
            continue
        else:
            out.append(token)
    return out
"""


def test_merge_overlapping_occurrences():
    message = fails("merge_pair", OVERLAPPING_MERGE, "overlapping merges", "[9, 9]")
    assert "merge_pair([1, 1, 1], (1, 1), 9)" in message


def test_merge_advancing_by_one():
    fails("merge_pair", _variant("merge_pair", "            i += 2", "            i += 1"), "overlapping merges")


def test_merge_modifies_its_input():
    code = """
def merge_pair(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids
"""
    fails("merge_pair", code, "modified the input list")


def test_merge_other_mistakes():
    first_only = """
def merge_pair(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)
"""
    fails("merge_pair", first_only, "only the first occurrence")
    fails("merge_pair", _variant("merge_pair", "while i < len(ids):", "while i < len(ids) - 1:"), "last item")
    fails("merge_pair", _variant("merge_pair", "    return out", "    return tuple(out)"), "list of ints")
    fails("merge_pair", _variant("merge_pair", "    return out", "    pass"), "forget the `return`")


# ----------------------------------------------------------------------------------------------
# train_bpe


def test_train_ties_broken_by_largest_pair():
    code = _variant(
        "train_bpe", "best = max(counts, key=counts.get)", "best = max(counts, key=lambda p: (counts[p], p))"
    )
    message = fails("train_bpe", code, "ties were broken by the largest pair")
    assert "cadbecadbe" in message


def test_train_ties_broken_by_smallest_pair():
    code = _variant(
        "train_bpe", "best = max(counts, key=counts.get)", "best = min(counts, key=lambda p: (-counts[p], p))"
    )
    fails("train_bpe", code, "ties were broken by the smallest pair")


def test_train_ties_to_the_last_pair():
    code = _variant(
        "train_bpe",
        "best = max(counts, key=counts.get)",
        "best = max(reversed(list(counts)), key=counts.get)",
    )
    fails("train_bpe", code, "occurs last")


@pytest.mark.parametrize(("first_id", "shown"), [(255, "start at 255"), (1000, "start at 1000")])
def test_train_merge_ids_offset(first_id, shown):
    code = _variant(
        "train_bpe",
        "for new_id in range(256, vocab_size):",
        f"for new_id in range({first_id}, {first_id} + vocab_size - 256):",
    )
    fails("train_bpe", code, shown, "256 + i")


def test_train_missing_value_error():
    code = _variant("train_bpe", 'raise ValueError("vocab_size must be at least 256")', "pass")
    fails("train_bpe", code, "ValueError missing", "train_bpe('any text', 255) returned normally")
    code = _variant("train_bpe", 'raise ValueError("vocab_size must be at least 256")', "raise TypeError('small')")
    fails("train_bpe", code, "raised TypeError", "raise a ValueError")


@pytest.mark.parametrize(("stop", "words"), [("vocab_size + 1", "one too many"), ("vocab_size - 1", "one too few")])
def test_train_off_by_one_number_of_merges(stop, words):
    code = _variant("train_bpe", "for new_id in range(256, vocab_size):", f"for new_id in range(256, {stop}):")
    fails("train_bpe", code, words, "off-by-one")


def test_train_other_mistakes():
    no_stop = _variant("train_bpe", "        if len(ids) < 2:\n            break\n", "")
    fails("train_bpe", no_stop, "stop early when fewer than 2 tokens")
    chars = _variant("train_bpe", 'ids = list(text.encode("utf-8"))', "ids = [ord(c) for c in text]")
    fails("train_bpe", chars, "characters (ord(c)), not bytes")
    as_list = _variant("train_bpe", "    return merges", "    return list(merges.items())")
    fails("train_bpe", as_list, "should return a dict")


# ----------------------------------------------------------------------------------------------
# bpe_encode


def test_encode_merging_by_frequency():
    code = _variant(
        "bpe_encode",
        "best = min(present, key=merges.get)",
        "best = max(present, key=present.count)",
    )
    message = fails("bpe_encode", code, "merged by pair frequency", "lowest merge id")
    assert "bpe_encode('aacaa'" in message


def test_encode_stopping_after_one_pass():
    original_pairs = """
def bpe_encode(text, merges):
    ids = list(text.encode("utf-8"))
    for pair in sorted({p for p in zip(ids, ids[1:]) if p in merges}, key=merges.get):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(merges[pair])
                i += 2
            else:
                out.append(ids[i])
                i += 1
        ids = out
    return ids
"""
    fails("bpe_encode", original_pairs, "stopped after one pass")
    single = _variant("bpe_encode", "        ids = out\n", "        return out\n")
    fails("bpe_encode", single, "stopped after one pass")


def test_encode_other_mistakes():
    highest = _variant("bpe_encode", "best = min(present, key=merges.get)", "best = max(present, key=merges.get)")
    fails("bpe_encode", highest, "highest merge id")
    as_bytes = _variant("bpe_encode", "            return ids", "            return tuple(ids)")
    fails("bpe_encode", as_bytes, "list of ints")


# ----------------------------------------------------------------------------------------------
# bpe_decode


def test_decode_strict_errors():
    code = _variant("bpe_decode", '.decode("utf-8", errors="replace")', '.decode("utf-8")')
    fails("bpe_decode", code, "UnicodeDecodeError", 'errors="strict"', 'errors="replace"')


def test_decode_other_mistakes():
    ignore = _variant("bpe_decode", 'errors="replace"', 'errors="ignore"')
    fails("bpe_decode", ignore, 'errors="ignore"')
    per_token = _variant(
        "bpe_decode",
        'return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")',
        'return "".join(table[i].decode("utf-8", errors="replace") for i in ids)',
    )
    fails("bpe_decode", per_token, "decoded on its own")
    no_decode = _variant("bpe_decode", '.decode("utf-8", errors="replace")', "")
    fails("bpe_decode", no_decode, "returned bytes")


# ----------------------------------------------------------------------------------------------
# sliding_window_pairs


def test_windows_targets_not_shifted():
    code = _variant(
        "sliding_window_pairs",
        "token_ids[s + 1 : s + context_length + 1]",
        "token_ids[s : s + context_length]",
    )
    fails("sliding_window_pairs", code, "targets not shifted by one")


def test_windows_one_too_many():
    code = _variant(
        "sliding_window_pairs",
        "range(0, len(token_ids) - context_length, stride)",
        "range(0, len(token_ids) - context_length + 1, stride)",
    )
    fails(
        "sliding_window_pairs",
        code,
        "off-by-one window count",
        "range(0, len(token_ids) - context_length, stride)",
    )


def test_windows_one_too_few():
    code = _variant(
        "sliding_window_pairs",
        "range(0, len(token_ids) - context_length, stride)",
        "range(0, len(token_ids) - context_length - 1, stride)",
    )
    fails("sliding_window_pairs", code, "off-by-one window count", "got 5 input")


def test_windows_stride_ignored():
    code = _variant(
        "sliding_window_pairs",
        "range(0, len(token_ids) - context_length, stride)",
        "range(0, len(token_ids) - context_length)",
    )
    fails("sliding_window_pairs", code, "stride was ignored")


def test_windows_lists_instead_of_tensors():
    code = _variant(
        "sliding_window_pairs",
        "return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)",
        "return inputs, targets",
    )
    fails("sliding_window_pairs", code, "not a tensor", "LongTensor")


def test_windows_other_mistakes():
    floats = _variant("sliding_window_pairs", "dtype=torch.long), torch", "dtype=torch.float), torch")
    fails("sliding_window_pairs", floats, "inputs has dtype torch.float32", "torch.long")
    swapped = _variant(
        "sliding_window_pairs",
        "return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets,",
        "return torch.tensor(targets, dtype=torch.long), torch.tensor(inputs,",
    )
    fails("sliding_window_pairs", swapped, "swapped")
    pairs = _variant(
        "sliding_window_pairs",
        "return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)",
        "return list(zip(inputs, targets))",
    )
    fails("sliding_window_pairs", pairs, "tuple (inputs, targets)")


# ----------------------------------------------------------------------------------------------
# From-scratch guard, time limit, unwritten answers


@pytest.mark.parametrize("name", EXERCISES)
def test_the_reference_object_itself_earns_nothing(name):
    with pytest.raises(GradingError, match="earns no points"):
        check(name)(getattr(ref, name))


def test_subclass_of_the_reference_class_earns_nothing():
    code = "from course_lib.tokenization import SimpleTokenizer as Base\n\nclass SimpleTokenizer(Base):\n    pass"
    fails("SimpleTokenizer", code, "subclasses", "earns no points")


@pytest.mark.parametrize("name", ["get_pair_counts", "merge_pair", "train_bpe", "sliding_window_pairs"])
def test_partial_of_the_reference_earns_nothing(name):
    with pytest.raises(GradingError, match="wraps the course's reference"):
        check(name)(functools.partial(getattr(ref, name)))


@pytest.mark.parametrize(
    "code",
    [
        # found in the answer's globals before any call
        "from course_lib.tokenization import train_bpe as reference\n\n"
        "def train_bpe(text, vocab_size):\n    return reference(text, vocab_size)\n",
        # reached through a module attribute: caught while the answer runs
        "import course_lib.tokenization as t\n\n"
        "def train_bpe(text, vocab_size):\n    return t.train_bpe(text, vocab_size)\n",
    ],
)
def test_a_function_calling_the_reference_earns_nothing(code):
    fails("train_bpe", code, "course_lib.tokenization.train_bpe", "earns no points")


@pytest.mark.parametrize(
    ("name", "code"),
    [
        (
            "bpe_encode",
            "import tiktoken\n\ndef bpe_encode(text, merges):\n    return tiktoken.get_encoding('gpt2').encode(text)\n",
        ),
        (
            "bpe_encode",
            "from course_lib.data import gpt2_encoding\n\ndef bpe_encode(text, merges):\n"
            "    return gpt2_encoding().encode(text)\n",
        ),
        (
            "bpe_decode",
            "from course_lib.data import gpt2_encoding\n\ndef bpe_decode(ids, merges):\n"
            "    return gpt2_encoding().decode(ids)\n",
        ),
    ],
)
def test_a_function_calling_tiktoken_earns_nothing(name, code):
    fails(name, code, "the `tiktoken` library", "earns no points")


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    fails("merge_pair", "def merge_pair(ids, pair, new_id):\n    while True:\n        pass\n", "did not finish")
    fails(
        "train_bpe",
        "def train_bpe(text, vocab_size):\n    i = 0\n    while i < 1:\n        pass\n",
        "did not finish",
    )


@pytest.mark.parametrize("name", EXERCISES)
def test_an_unwritten_answer_says_so(name):
    if name == "SimpleTokenizer":
        code = "class SimpleTokenizer:\n    def __init__(self, vocab):\n        raise NotImplementedError()\n"
    else:
        code = f"def {name}(*args):\n    raise NotImplementedError()\n"
    fails(name, code, "not written yet")
    fails(name, code, "not written yet", cases=hidden_cases(LESSON)[name])


def test_messages_about_hidden_cases_do_not_show_their_inputs():
    message = fails(
        "merge_pair",
        OVERLAPPING_MERGE,
        "hidden case 2",
        "overlapping merges",
        cases=[
            ([1, 2, 3], (1, 2), 256),
            ([4, 4, 4, 4, 4], (4, 4), 256),
        ],
    )
    assert "[4, 4, 4, 4, 4]" not in message and "merge_pair(<hidden case 2>)" in message
    code = _variant(
        "SimpleTokenizer",
        "return [self.str_to_int.get(word, unk) for word in self.words(text)]",
        "return [self.str_to_int[w] for w in self.words(text)]",
    )
    message = fails("SimpleTokenizer", code, "unknown words should map to <|unk|>", cases=[("a b", "a zebra b")])
    assert "a zebra b" not in message
