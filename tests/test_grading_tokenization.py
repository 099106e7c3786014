"""Lesson 01 graders (course_lib.grading.tokenization, and .bpe which it re-exports): right answers and the
reference pass, each known mistake is named, borrowed answers earn nothing. See tests/grader_kit.py."""

from __future__ import annotations

import functools

import pytest

from course_lib import tokenization as ref
from course_lib.grading import tokenization as grading
from course_lib.grading.kit import core
from tests.grader_kit import GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "01_tokenization"
TOKENIZER = "SimpleTokenizer"
WINDOWS = "sliding_window_pairs"

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

KIT = GraderKit(LESSON, grading, ANSWERS)

_ENCODE_ALL = "return [self.str_to_int.get(word, unk) for word in self.words(text)]"
_WINDOW_STARTS = "range(0, len(token_ids) - context_length, stride)"
_WINDOW_TENSORS = "return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets, dtype=torch.long)"
_NON_OVERLAPPING_COUNTS = """
def get_pair_counts(ids):
    counts, i = {}, 0
    while i < len(ids) - 1:
        pair = (ids[i], ids[i + 1])
        counts[pair] = counts.get(pair, 0) + 1
        i += 2 if ids[i] == ids[i + 1] else 1
    return counts
"""
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
_MERGE_IN_PLACE = """
def merge_pair(ids, pair, new_id):
    i = 0
    while i < len(ids) - 1:
        if (ids[i], ids[i + 1]) == pair:
            ids[i : i + 2] = [new_id]
        i += 1
    return ids
"""
_MERGE_FIRST_ONLY = """
def merge_pair(ids, pair, new_id):
    for i in range(len(ids) - 1):
        if (ids[i], ids[i + 1]) == pair:
            return ids[:i] + [new_id] + ids[i + 2:]
    return list(ids)
"""
_ENCODE_ORIGINAL_PAIRS_ONCE = """
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

# Each known mistake: the right answer with one piece changed (or a whole wrong answer), and what its message names.
MISTAKES = [
    # SimpleTokenizer
    mistake(
        TOKENIZER,
        _ENCODE_ALL,
        "return [self.str_to_int[w] for w in self.words(text) if w in self.str_to_int]",
        ("dropped", "unknown words should map to <|unk|>"),
        id="tokenizer-unknown-words-dropped",
    ),
    mistake(
        TOKENIZER,
        _ENCODE_ALL,
        "return [self.str_to_int[w] for w in self.words(text)]",
        ("KeyError", "unknown words should map to <|unk|>", "'age'"),
        id="tokenizer-unknown-words-raise-key-error",
    ),
    mistake(
        TOKENIZER,
        """return re.sub(r'\\s+([,.:;?!"()\\'])', r'\\1', text)""",
        "return text",
        "spaces before punctuation",
        id="tokenizer-decode-keeps-spaces-before-punctuation",
    ),
    mistake(
        TOKENIZER,
        "items = [item.strip() for item in",
        "items = [item for item in",
        "Strip",
        id="tokenizer-items-not-stripped",
    ),
    mistake(
        TOKENIZER,
        "return [item for item in items if item]",
        "return text.split()",
        "punctuation stayed attached",
        id="tokenizer-split-on-whitespace-only",
    ),
    wrong_answer(
        TOKENIZER,
        "class SimpleTokenizer:\n    def __init__(self, vocab):\n        pass\n",
        "no method",
        id="tokenizer-without-methods",
    ),
    # get_pair_counts
    wrong_answer(
        "get_pair_counts",
        _NON_OVERLAPPING_COUNTS,
        ("non-overlapping", "[1, 1, 1]"),
        id="pair-counts-non-overlapping",
    ),
    # The same mistake on an input where the first case cannot show it: still named.
    wrong_answer(
        "get_pair_counts",
        _NON_OVERLAPPING_COUNTS,
        "non-overlapping",
        cases=[[1, 2, 2, 2, 2, 2, 3]],
        id="pair-counts-non-overlapping-on-a-case-of-its-own",
    ),
    mistake(
        "get_pair_counts",
        "    return counts",
        "    return dict(sorted(counts.items()))",
        ("order of first occurrence", "sorted", "[(2, 5), (5, 2), (5, 5)]"),
        id="pair-counts-keys-sorted",
    ),
    mistake(
        "get_pair_counts",
        "    return counts",
        "    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))",
        "order of first occurrence",
        id="pair-counts-keys-in-another-order",
    ),
    mistake(
        "get_pair_counts",
        "zip(ids, ids[1:])",
        "zip(ids[::2], ids[1::2])",
        "step of 2",
        id="pair-counts-step-of-2",
    ),
    mistake(
        "get_pair_counts", "zip(ids, ids[1:])", "zip(ids[:-1], ids[1:-1])", "last pair", id="pair-counts-last-pair"
    ),
    mistake("get_pair_counts", "counts[pair] = ", "counts[list(pair)[0]] = ", "keys", id="pair-counts-keys-not-pairs"),
    wrong_answer(
        "get_pair_counts",
        "def get_pair_counts(ids):\n    ids.append(0)\n    return {}\n",
        "Do not modify",
        id="pair-counts-modifies-its-input",
    ),
    wrong_answer(
        "get_pair_counts",
        "def get_pair_counts(ids):\n    return list(zip(ids, ids[1:]))\n",
        "should return a dict",
        id="pair-counts-returns-a-list",
    ),
    # merge_pair
    wrong_answer(
        "merge_pair",
        OVERLAPPING_MERGE,
        ("overlapping merges", "[9, 9]", "merge_pair([1, 1, 1], (1, 1), 9)"),
        id="merge-overlapping-occurrences",
    ),
    mistake(
        "merge_pair", "            i += 2", "            i += 1", "overlapping merges", id="merge-advancing-by-one"
    ),
    wrong_answer("merge_pair", _MERGE_IN_PLACE, "modified the input list", id="merge-modifies-its-input"),
    wrong_answer("merge_pair", _MERGE_FIRST_ONLY, "only the first occurrence", id="merge-first-occurrence-only"),
    mistake(
        "merge_pair", "while i < len(ids):", "while i < len(ids) - 1:", "last item", id="merge-drops-the-last-item"
    ),
    mistake("merge_pair", "    return out", "    return tuple(out)", "list of ints", id="merge-returns-a-tuple"),
    mistake("merge_pair", "    return out", "    pass", "forget the `return`", id="merge-without-return"),
    # train_bpe
    mistake(
        "train_bpe",
        "best = max(counts, key=counts.get)",
        "best = max(counts, key=lambda p: (counts[p], p))",
        ("ties were broken by the largest pair", "cadbecadbe"),
        id="train-ties-broken-by-largest-pair",
    ),
    mistake(
        "train_bpe",
        "best = max(counts, key=counts.get)",
        "best = min(counts, key=lambda p: (-counts[p], p))",
        "ties were broken by the smallest pair",
        id="train-ties-broken-by-smallest-pair",
    ),
    mistake(
        "train_bpe",
        "best = max(counts, key=counts.get)",
        "best = max(reversed(list(counts)), key=counts.get)",
        "occurs last",
        id="train-ties-to-the-last-pair",
    ),
    *(
        mistake(
            "train_bpe",
            "for new_id in range(256, vocab_size):",
            f"for new_id in range({first_id}, {first_id} + vocab_size - 256):",
            (f"start at {first_id}", "256 + i"),
            id=f"train-merge-ids-start-at-{first_id}",
        )
        for first_id in [255, 1000]
    ),
    mistake(
        "train_bpe",
        'raise ValueError("vocab_size must be at least 256")',
        "pass",
        ("ValueError missing", "train_bpe('any text', 255) returned normally"),
        id="train-missing-value-error",
    ),
    mistake(
        "train_bpe",
        'raise ValueError("vocab_size must be at least 256")',
        "raise TypeError('small')",
        ("raised TypeError", "raise a ValueError"),
        id="train-wrong-exception",
    ),
    mistake(
        "train_bpe",
        "for new_id in range(256, vocab_size):",
        "for new_id in range(256, vocab_size + 1):",
        ("one too many", "off-by-one"),
        id="train-one-merge-too-many",
    ),
    mistake(
        "train_bpe",
        "for new_id in range(256, vocab_size):",
        "for new_id in range(256, vocab_size - 1):",
        ("one too few", "off-by-one"),
        id="train-one-merge-too-few",
    ),
    mistake(
        "train_bpe",
        "        if len(ids) < 2:\n            break\n",
        "",
        "stop early when fewer than 2 tokens",
        id="train-no-early-stop",
    ),
    mistake(
        "train_bpe",
        'ids = list(text.encode("utf-8"))',
        "ids = [ord(c) for c in text]",
        "characters (ord(c)), not bytes",
        id="train-on-characters",
    ),
    mistake(
        "train_bpe",
        "    return merges",
        "    return list(merges.items())",
        "should return a dict",
        id="train-returns-a-list",
    ),
    # bpe_encode
    mistake(
        "bpe_encode",
        "best = min(present, key=merges.get)",
        "best = max(present, key=present.count)",
        ("merged by pair frequency", "lowest merge id", "bpe_encode('aacaa'"),
        id="encode-merging-by-frequency",
    ),
    wrong_answer(
        "bpe_encode",
        _ENCODE_ORIGINAL_PAIRS_ONCE,
        "stopped after one pass",
        id="encode-one-pass-over-the-original-pairs",
    ),
    mistake(
        "bpe_encode", "        ids = out\n", "        return out\n", "stopped after one pass", id="encode-single-merge"
    ),
    mistake(
        "bpe_encode",
        "best = min(present, key=merges.get)",
        "best = max(present, key=merges.get)",
        "highest merge id",
        id="encode-highest-merge-id-first",
    ),
    mistake(
        "bpe_encode",
        "            return ids",
        "            return tuple(ids)",
        "list of ints",
        id="encode-returns-a-tuple",
    ),
    # bpe_decode
    mistake(
        "bpe_decode",
        '.decode("utf-8", errors="replace")',
        '.decode("utf-8")',
        ("UnicodeDecodeError", 'errors="strict"', 'errors="replace"'),
        id="decode-strict-errors",
    ),
    mistake("bpe_decode", 'errors="replace"', 'errors="ignore"', 'errors="ignore"', id="decode-ignoring-errors"),
    mistake(
        "bpe_decode",
        'return b"".join(table[i] for i in ids).decode("utf-8", errors="replace")',
        'return "".join(table[i].decode("utf-8", errors="replace") for i in ids)',
        "decoded on its own",
        id="decode-each-token-on-its-own",
    ),
    mistake("bpe_decode", '.decode("utf-8", errors="replace")', "", "returned bytes", id="decode-returns-bytes"),
    # sliding_window_pairs
    mistake(
        WINDOWS,
        "token_ids[s + 1 : s + context_length + 1]",
        "token_ids[s : s + context_length]",
        "targets not shifted by one",
        id="windows-targets-not-shifted",
    ),
    mistake(
        WINDOWS,
        _WINDOW_STARTS,
        "range(0, len(token_ids) - context_length + 1, stride)",
        ("off-by-one window count", "range(0, len(token_ids) - context_length, stride)"),
        id="windows-one-too-many",
    ),
    mistake(
        WINDOWS,
        _WINDOW_STARTS,
        "range(0, len(token_ids) - context_length - 1, stride)",
        ("off-by-one window count", "got 5 input"),
        id="windows-one-too-few",
    ),
    mistake(
        WINDOWS,
        _WINDOW_STARTS,
        "range(0, len(token_ids) - context_length)",
        "stride was ignored",
        id="windows-stride-ignored",
    ),
    mistake(
        WINDOWS,
        _WINDOW_TENSORS,
        "return inputs, targets",
        ("not a tensor", "LongTensor"),
        id="windows-lists-instead-of-tensors",
    ),
    mistake(
        WINDOWS,
        "dtype=torch.long), torch",
        "dtype=torch.float), torch",
        ("inputs has dtype torch.float32", "torch.long"),
        id="windows-float-inputs",
    ),
    mistake(
        WINDOWS,
        "return torch.tensor(inputs, dtype=torch.long), torch.tensor(targets,",
        "return torch.tensor(targets, dtype=torch.long), torch.tensor(inputs,",
        "swapped",
        id="windows-inputs-and-targets-swapped",
    ),
    mistake(
        WINDOWS,
        _WINDOW_TENSORS,
        "return list(zip(inputs, targets))",
        "tuple (inputs, targets)",
        id="windows-list-of-pairs",
    ),
]

# Answers that are not written from scratch: the reference (subclassed, wrapped or called) or tiktoken.
BORROWED = [
    wrong_answer(
        TOKENIZER,
        "from course_lib.tokenization import SimpleTokenizer as Base\n\nclass SimpleTokenizer(Base):\n    pass",
        ("subclasses", "earns no points"),
        id="subclass-of-the-reference-SimpleTokenizer",
    ),
    *(
        wrong_answer(
            name,
            functools.partial(getattr(ref, name)),
            "wraps the course's reference",
            id=f"partial-of-the-reference-{name}",
        )
        for name in ["get_pair_counts", "merge_pair", "train_bpe", WINDOWS]
    ),
    # found in the answer's globals before any call
    wrong_answer(
        "train_bpe",
        "from course_lib.tokenization import train_bpe as reference\n\n"
        "def train_bpe(text, vocab_size):\n    return reference(text, vocab_size)\n",
        ("course_lib.tokenization.train_bpe", "earns no points"),
        id="train-calling-the-reference-imported-by-name",
    ),
    # reached through a module attribute: caught while the answer runs
    wrong_answer(
        "train_bpe",
        "import course_lib.tokenization as t\n\n"
        "def train_bpe(text, vocab_size):\n    return t.train_bpe(text, vocab_size)\n",
        ("course_lib.tokenization.train_bpe", "earns no points"),
        id="train-calling-the-reference-through-its-module",
    ),
    wrong_answer(
        "bpe_encode",
        "import tiktoken\n\ndef bpe_encode(text, merges):\n    return tiktoken.get_encoding('gpt2').encode(text)\n",
        ("the `tiktoken` library", "earns no points"),
        id="encode-calling-tiktoken",
    ),
    wrong_answer(
        "bpe_encode",
        "from course_lib.data import gpt2_encoding\n\ndef bpe_encode(text, merges):\n"
        "    return gpt2_encoding().encode(text)\n",
        ("the `tiktoken` library", "earns no points"),
        id="encode-calling-the-courses-gpt2-encoding",
    ),
    wrong_answer(
        "bpe_decode",
        "from course_lib.data import gpt2_encoding\n\ndef bpe_decode(ids, merges):\n"
        "    return gpt2_encoding().decode(ids)\n",
        ("the `tiktoken` library", "earns no points"),
        id="decode-calling-the-courses-gpt2-encoding",
    ),
]


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    KIT.fails("merge_pair", "def merge_pair(ids, pair, new_id):\n    while True:\n        pass\n", "did not finish")
    KIT.fails(
        "train_bpe",
        "def train_bpe(text, vocab_size):\n    i = 0\n    while i < 1:\n        pass\n",
        "did not finish",
    )


@pytest.mark.parametrize("name", KIT.exercises)
def test_an_unwritten_answer_says_so(name):
    if name == TOKENIZER:
        code = "class SimpleTokenizer:\n    def __init__(self, vocab):\n        raise NotImplementedError()\n"
    else:
        code = f"def {name}(*args):\n    raise NotImplementedError()\n"
    KIT.fails(name, code, "not written yet")
    KIT.fails(name, code, "not written yet", cases=KIT.hidden(name))


def test_messages_about_hidden_cases_do_not_show_their_inputs():
    message = KIT.fails(
        "merge_pair",
        OVERLAPPING_MERGE,
        "hidden case 2",
        "overlapping merges",
        "merge_pair(<hidden case 2>)",
        cases=[
            ([1, 2, 3], (1, 2), 256),
            ([4, 4, 4, 4, 4], (4, 4), 256),
        ],
    )
    assert "[4, 4, 4, 4, 4]" not in message
    code = KIT.variant(TOKENIZER, _ENCODE_ALL, "return [self.str_to_int[w] for w in self.words(text)]")
    message = KIT.fails(TOKENIZER, code, "unknown words should map to <|unk|>", cases=[("a b", "a zebra b")])
    assert "a zebra b" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 4
    setup = "from course_lib import tokenization as ref"  # the lesson's first code cell has it
    mistakes = MISTAKES
    borrowed = BORROWED
