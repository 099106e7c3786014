"""Lesson 09 graders (course_lib.grading.char_lm): every known mistake has a buggy answer whose message must name
it; the tests run through tests/grader_kit.py."""

from __future__ import annotations

from course_lib.grading import char_lm as grading
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "09_char_gpt"
VOCAB = "build_char_vocab"
BATCH = "get_batch"
BIGRAM = "BigramLanguageModel"
SAMPLE = "sample_next_token"
MODEL = "GPT"

# Right answers, written independently of course_lib.
BUILD_CHAR_VOCAB = """
def build_char_vocab(text):
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    itos = {i: c for c, i in stoi.items()}
    return stoi, itos
"""

GET_BATCH = """
import torch

def get_batch(data, block_size, batch_size, generator):
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    x = data[ix[:, None] + offsets]
    y = data[ix[:, None] + offsets + 1]
    return x, y
"""

BIGRAM_MODEL = """
import torch.nn.functional as F
from torch import nn

class BigramLanguageModel(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.token_embedding_table = nn.Embedding(vocab_size, vocab_size)

    def forward(self, idx, targets=None):
        logits = self.token_embedding_table(idx)
        if targets is None:
            return logits, None
        B, T, V = logits.shape
        loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T))
        return logits, loss
"""

SAMPLE_NEXT_TOKEN = """
import torch

def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    logits = logits / temperature
    if top_k is not None:
        kth = logits.topk(top_k, dim=-1).values[:, [-1]]
        logits = torch.where(logits < kth, torch.full_like(logits, float("-inf")), logits)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, 1, generator=generator)
"""

# Built from the course's block, as a graded answer is; tied the other way round, positions sliced from the table.
GPT_MODEL = """
import torch
import torch.nn.functional as F
from torch import nn

from course_lib.blocks import TransformerBlock


class GPT(nn.Module):
    def __init__(self, vocab_size, context_length, d_model, n_heads, n_layers, dropout=0.0):
        super().__init__()
        self.longest = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, dropout=dropout) for _ in range(n_layers))
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.tok_emb.weight = self.lm_head.weight

    def forward(self, idx, targets=None):
        T = idx.size(1)
        if T > self.longest:
            raise ValueError(f"{T} positions, context_length {self.longest}")
        h = self.drop(self.tok_emb(idx) + self.pos_emb.weight[:T])
        for blk in self.blocks:
            h = blk(h)
        logits = self.lm_head(self.ln_f(h))
        loss = None if targets is None else F.cross_entropy(logits.transpose(1, 2), targets)
        return logits, loss
"""

KIT = GraderKit(
    LESSON,
    grading,
    {VOCAB: BUILD_CHAR_VOCAB, BATCH: GET_BATCH, BIGRAM: BIGRAM_MODEL, SAMPLE: SAMPLE_NEXT_TOKEN, MODEL: GPT_MODEL},
)

_CHARS = "    chars = sorted(set(text))\n"
_STARTS = "len(data) - block_size,"
_LOSS = "        loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T))\n"
_SCALE = "    logits = logits / temperature\n"
_CHECK = '    if temperature <= 0:\n        raise ValueError("temperature must be > 0")\n'
_TIE = "        self.tok_emb.weight = self.lm_head.weight\n"
_EMBED = "        h = self.drop(self.tok_emb(idx) + self.pos_emb.weight[:T])\n"
_GPT_LOSS = "F.cross_entropy(logits.transpose(1, 2), targets)"
_BLOCKS = "TransformerBlock(d_model, n_heads, dropout=dropout)"

MISTAKES = [
    # build_char_vocab
    mistake(VOCAB, _CHARS, "    chars = list(dict.fromkeys(text))\n", "order of first appearance", id="vocab-unsorted"),
    mistake(VOCAB, _CHARS, "    chars = sorted(set(text), reverse=True)\n", "in reverse", id="vocab-reversed"),
    mistake(
        VOCAB,
        "enumerate(chars)}",
        "enumerate(chars, 1)}",
        "start at 1",
        id="vocab-ids-from-one",
    ),
    mistake(VOCAB, _CHARS, "    chars = sorted(set(text.split()))\n", "holds words", id="vocab-of-words"),
    mistake(VOCAB, _CHARS, "    chars = sorted(set(text) - {' '})\n", "spaces or newlines", id="vocab-no-spaces"),
    mistake(VOCAB, _CHARS, "    chars = sorted(set(text.lower()))\n", "lower-cased", id="vocab-lower-case"),
    mistake(VOCAB, "    return stoi, itos\n", "    return itos, stoi\n", "returned (itos, stoi)", id="vocab-swapped"),
    # get_batch
    mistake(BATCH, _STARTS, "len(data) - block_size - 1,", ("off by one", "never picked"), id="batch-never-last"),
    mistake(BATCH, _STARTS, "len(data) - block_size + 1,", "off by one", id="batch-runs-off-the-end"),
    mistake(BATCH, "offsets + 1]\n", "offsets]\n", "y equals x", id="batch-not-shifted"),
    mistake(BATCH, "offsets + 1]\n", "offsets + 2]\n", "shifted by two", id="batch-shifted-by-two"),
    mistake(BATCH, "    return x, y\n", "    return y, x\n", "swapped", id="batch-swapped"),
    mistake(
        BATCH,
        "    y = data[ix[:, None] + offsets + 1]\n",
        "    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)\n"
        "    y = data[ix[:, None] + offsets + 1]\n",
        "different windows",
        id="batch-two-draws",
    ),
    mistake(BATCH, ", generator=generator)", ")", "without the `generator` argument", id="batch-global-rng"),
    mistake(BATCH, "    return x, y\n", "    return x.T, y.T\n", "(block_size, batch_size)", id="batch-columns"),
    mistake(BATCH, "    return x, y\n", "    return x.float(), y.float()\n", "dtype", id="batch-float"),
    # BigramLanguageModel
    mistake(
        BIGRAM,
        _LOSS,
        "        loss = -F.log_softmax(logits, dim=1).gather(-1, targets[..., None]).mean()\n",
        "wrong axis",
        id="bigram-loss-over-time",
    ),
    mistake(
        BIGRAM,
        _LOSS,
        "        loss = F.cross_entropy(logits.view(B * T, V), targets.T.reshape(B * T))\n",
        "another order",
        id="bigram-targets-transposed",
    ),
    mistake(
        BIGRAM,
        _LOSS,
        "        loss = F.cross_entropy(logits.view(B * T, V), targets.view(B * T), reduction='sum')\n",
        "sum",
        id="bigram-loss-summed",
    ),
    mistake(
        BIGRAM,
        _LOSS,
        "        loss = F.cross_entropy(logits[:, -1], targets[:, -1])\n",
        "only the last position",
        id="bigram-last-position-only",
    ),
    mistake(
        BIGRAM,
        _LOSS,
        "        loss = F.cross_entropy(logits.view(B * T, V).softmax(-1), targets.view(B * T))\n",
        "softmax was applied before",
        id="bigram-double-softmax",
    ),
    mistake(
        BIGRAM,
        "        return logits, loss\n",
        "        return logits.view(B * T, V), loss\n",
        "flattened",
        id="bigram-flat-logits",
    ),
    mistake(
        BIGRAM,
        "        if targets is None:\n            return logits, None\n",
        "        if targets is None:\n            return logits, logits.sum() * 0\n",
        "must be None",
        id="bigram-loss-without-targets",
    ),
    mistake(
        BIGRAM,
        "nn.Embedding(vocab_size, vocab_size)",
        "nn.Embedding(vocab_size, 32)",
        "token_embedding_table.weight has shape",
        id="bigram-narrow-table",
    ),
    # sample_next_token
    mistake(SAMPLE, _SCALE, "", ("temperature was not applied",), id="sample-no-temperature"),
    mistake(SAMPLE, _SCALE, "    logits = logits * temperature\n", "multiplied", id="sample-times-temperature"),
    mistake(SAMPLE, "logits < kth", "logits <= kth", "k - 1", id="sample-top-k-keeps-k-minus-1"),
    mistake(SAMPLE, "topk(top_k,", "topk(top_k + 1,", "k + 1", id="sample-top-k-keeps-k-plus-1"),
    mistake(SAMPLE, "    if top_k is not None:\n", "    if False:\n", "top_k was ignored", id="sample-top-k-ignored"),
    mistake(
        SAMPLE,
        "    return torch.multinomial(probs, 1, generator=generator)\n",
        "    return probs.argmax(-1, keepdim=True)\n",
        "argmax",
        id="sample-argmax",
    ),
    mistake(SAMPLE, ", generator=generator)", ")", "`generator` argument", id="sample-global-rng"),
    mistake(
        SAMPLE,
        "    return torch.multinomial(probs, 1, generator=generator)\n",
        "    return torch.multinomial(probs, 1, generator=generator)[:, 0]\n",
        "keep one column",
        id="sample-squeezed",
    ),
    mistake(SAMPLE, _CHECK, "", ("temperature=0.0", "ValueError"), id="sample-zero-temperature-accepted"),
    mistake(SAMPLE, _SCALE, "    logits /= temperature\n", "in place", id="sample-logits-changed-in-place"),
    wrong_answer(
        SAMPLE,
        "def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):\n"
        "    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="sample-unwritten-on-the-hidden-cases",
    ),
    # GPT
    mistake(MODEL, _TIE, "", ("matrix of its own", "self.lm_head.weight = self.tok_emb.weight"), id="gpt-untied"),
    mistake(
        MODEL,
        _TIE,
        "        self.lm_head.weight.data = self.tok_emb.weight.data\n",
        ("another Parameter", "counts the matrix twice"),
        id="gpt-tied-by-data",
    ),
    mistake(
        MODEL,
        _TIE,
        "        self.lm_head.weight = nn.Parameter(self.tok_emb.weight)\n",
        "another Parameter",
        id="gpt-tied-through-a-new-parameter",
    ),
    mistake(
        MODEL, _EMBED, "        h = self.drop(self.tok_emb(idx))\n", "no position embedding", id="gpt-no-positions"
    ),
    mistake(
        MODEL,
        "self.pos_emb.weight[:T]",
        "self.pos_emb.weight",
        ("must match the size", "self.pos_emb(torch.arange(T))"),
        id="gpt-whole-position-table",
    ),
    mistake(MODEL, "self.pos_emb.weight[:T]", "self.pos_emb(idx)", "looked up with the token ids", id="gpt-pos-by-id"),
    mistake(MODEL, "            h = blk(h)\n", "            blk(h)\n", "x = block(x)", id="gpt-blocks-dropped"),
    mistake(MODEL, "self.lm_head(self.ln_f(h))", "self.lm_head(h)", "final LayerNorm is missing", id="gpt-no-ln-f"),
    mistake(
        MODEL,
        "        self.ln_f = nn.LayerNorm(d_model)\n",
        "",
        "there is no final LayerNorm",
        also=(("self.lm_head(self.ln_f(h))", "self.lm_head(h)"),),
        id="gpt-no-ln-f-module",
    ),
    mistake(MODEL, "self.lm_head(self.ln_f(h))", "self.ln_f(h)", "d_model", id="gpt-logits-of-the-stream"),
    mistake(
        MODEL,
        "nn.Linear(d_model, vocab_size, bias=False)",
        "nn.Linear(vocab_size, d_model, bias=False)",
        "nn.Linear(d_model, vocab_size, bias=False)",
        id="gpt-head-the-wrong-way",
    ),
    mistake(MODEL, "vocab_size, bias=False)", "vocab_size)", "lm_head has a bias", id="gpt-head-bias"),
    mistake(
        MODEL,
        _BLOCKS,
        "TransformerBlock(d_model, n_heads, dropout=dropout, causal=False)",
        "attend to later positions",
        id="gpt-blocks-not-causal",
    ),
    mistake(MODEL, _BLOCKS, "TransformerBlock(d_model, n_heads)", "blocks got no dropout", id="gpt-blocks-no-dropout"),
    mistake(
        MODEL,
        _EMBED,
        "        h = self.tok_emb(idx) + self.pos_emb.weight[:T]\n",
        "self.drop is never applied",
        id="gpt-embedding-dropout-unused",
    ),
    mistake(
        MODEL,
        "        self.drop = nn.Dropout(dropout)\n",
        "        self.drop = nn.Dropout(0.1)\n",
        "nn.Dropout(dropout)",
        id="gpt-dropout-fixed",
    ),
    mistake(MODEL, "return logits, loss", "return logits.softmax(-1), loss", "softmax", id="gpt-softmaxed-logits"),
    mistake(MODEL, _GPT_LOSS, f"{_GPT_LOSS[:-1]}, reduction='sum')", "sum over the positions", id="gpt-loss-summed"),
    mistake(
        MODEL,
        _GPT_LOSS,
        f"{_GPT_LOSS[:-1]}, reduction='sum') / idx.size(0)",
        "summed over each window",
        id="gpt-loss-per-window",
    ),
    mistake(
        MODEL,
        _GPT_LOSS,
        "F.cross_entropy(logits[:, -1], targets[:, -1])",
        "last position only",
        id="gpt-loss-last-position",
    ),
    mistake(MODEL, _GPT_LOSS, "F.cross_entropy(logits, targets)", "flatten B and T", id="gpt-loss-unflattened"),
    mistake(
        MODEL,
        "        if T > self.longest:\n",
        "        if False:\n",
        ("T = 13 > context_length = 12", "Raise ValueError"),
        id="gpt-too-long-accepted",
    ),
    mistake(
        MODEL,
        "        if T > self.longest:\n",
        "        if False:\n",
        "<hidden case 1>",
        cases=HIDDEN,
        id="gpt-too-long-accepted-on-the-hidden-cases",
    ),
]

# Answers that use the course's reference (called, wrapped or imported) earn nothing.
BORROWED = [
    wrong_answer(
        VOCAB,
        "from course_lib.char_lm import build_char_vocab\n",
        ("course_lib.char_lm.build_char_vocab", "earns no points"),
        id="vocab-the-reference-imported",
    ),
    wrong_answer(
        BATCH,
        "from course_lib import char_lm as c\n\ndef get_batch(data, block_size, batch_size, generator):\n"
        "    return c.get_batch(data, block_size, batch_size, generator)\n",
        ("course_lib.char_lm.get_batch", "earns no points"),
        id="batch-calling-the-reference",
    ),
    wrong_answer(
        BIGRAM,
        "from course_lib import char_lm as c\n\nclass BigramLanguageModel(c.BigramLanguageModel):\n    pass\n",
        ("course_lib.char_lm.BigramLanguageModel", "earns no points"),
        id="bigram-subclassing-the-reference",
    ),
    wrong_answer(
        SAMPLE,
        "import course_lib.char_lm as c\n\ndef sample_next_token(logits, temperature=1.0, top_k=None, "
        "generator=None):\n    return c.sample_next_token(logits, temperature, top_k, generator)\n",
        ("course_lib.char_lm.sample_next_token", "earns no points"),
        id="sample-calling-the-reference",
    ),
    wrong_answer(
        MODEL,
        "from course_lib import gpt\n\nclass GPT(gpt.GPT):\n    pass\n",
        ("course_lib.gpt.GPT", "earns no points"),
        id="gpt-subclassing-the-reference",
    ),
    wrong_answer(
        MODEL,
        "from course_lib.gpt2 import GPT2, GPT2Config\n\n"
        "def GPT(vocab_size, context_length, d_model, n_heads, n_layers, dropout=0.0):\n"
        "    config = GPT2Config(vocab_size, context_length, n_layers, n_heads, d_model, dropout)\n"
        "    return GPT2(config)\n",
        ("course_lib.gpt2.GPT2", "earns no points"),
        id="gpt-wrapping-gpt2",
    ),
    wrong_answer(
        MODEL,
        # Every course decoder is a subclass of the reference, whose forward pass it runs.
        "from course_lib.char_ladder import LADDER, LadderGPT\n\nclass GPT(LadderGPT):\n"
        "    def __init__(self, vocab_size, context_length, d_model, n_heads, n_layers, dropout=0.0):\n"
        "        super().__init__(vocab_size, context_length, LADDER[-2])\n",
        ("course_lib.gpt.GPT", "earns no points"),
        id="gpt-subclassing-the-ladders-gpt",
    ),
]


def test_an_itos_list_is_accepted():
    code = KIT.variant(VOCAB, "    itos = {i: c for c, i in stoi.items()}\n", "    itos = chars\n")
    assert KIT.grade(VOCAB, code).checks == 3


def test_a_stacked_get_batch_is_a_right_answer():
    code = (
        "import torch\n\ndef get_batch(data, block_size, batch_size, generator):\n"
        "    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator)\n"
        "    x = torch.stack([data[i:i + block_size] for i in ix])\n"
        "    y = torch.stack([data[i + 1:i + block_size + 1] for i in ix])\n    return x, y\n"
    )
    assert KIT.grade(BATCH, code).checks == 3


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(SAMPLE, _SCALE, "")
    message = KIT.fails(SAMPLE, code, "<hidden case 1>", cases=KIT.hidden(SAMPLE))
    assert "temperature=0.7" not in message and "(64, 20)" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    setup = "from course_lib.blocks import TransformerBlock\n"  # the lesson binds it before exercise 5
    mistakes = MISTAKES
    borrowed = BORROWED
