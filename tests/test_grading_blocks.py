"""Lesson 06 graders (course_lib.grading.blocks): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py, like those of lessons 04 and 05."""

from __future__ import annotations

from course_lib.grading import blocks as grading
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "06_transformer_blocks"
LN, FF, BLOCK, ENC = "layer_norm", "FeedForward", "TransformerBlock", "EncoderLayer"

# Right answers, written independently of course_lib (the layers build on course_lib's attention and feed-forward,
# as the lesson's answers do).
LAYER_NORM = """
import torch

def layer_norm(x, weight, bias, eps=1e-5):
    mu = x.mean(-1, keepdim=True)
    var = (x - mu).pow(2).mean(-1, keepdim=True)
    return weight * (x - mu) * torch.rsqrt(var + eps) + bias
"""

FEED_FORWARD = """
import torch
import torch.nn.functional as F
from torch import nn

class FeedForward(nn.Module):
    def __init__(self, d_model, d_hidden, dropout=0.0):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_model)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        h = F.gelu(self.fc1(x), approximate="tanh")
        return self.drop(self.fc2(h))
"""

BLOCK_ANSWER = """
from torch import nn
from course_lib.blocks import FeedForward
from course_lib.multihead import MultiHeadAttention

class TransformerBlock(nn.Module):
    def __init__(self, d_model, n_heads, d_hidden=None, dropout=0.0, causal=True):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = MultiHeadAttention(d_model, n_heads, dropout=dropout, causal=causal)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_hidden or 4 * d_model, dropout)

    def forward(self, x, mask=None):
        a = self.attn(self.ln1(x), mask)
        x = x + a
        m = self.mlp(self.ln2(x))
        x = x + m
        return x
"""

ENCODER = """
from torch import nn
from course_lib.blocks import FeedForward
from course_lib.multihead import MultiHeadAttention

class EncoderLayer(nn.Module):
    def __init__(self, d_model, n_heads, d_hidden=None, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.norm_first = norm_first
        self.self_attn = MultiHeadAttention(d_model, n_heads, dropout=dropout)
        self.norm1 = nn.LayerNorm(d_model)
        self.mlp = FeedForward(d_model, d_hidden or 4 * d_model, dropout, activation=activation)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, padding_mask=None):
        keys = None if padding_mask is None else padding_mask[:, None, None, :]
        if self.norm_first:
            x = x + self.dropout(self.self_attn(self.norm1(x), keys))
            x = x + self.mlp(self.norm2(x))
        else:
            x = self.norm1(x + self.dropout(self.self_attn(x, keys)))
            x = self.norm2(x + self.mlp(x))
        return x
"""

KIT = GraderKit(LESSON, grading, {LN: LAYER_NORM, FF: FEED_FORWARD, BLOCK: BLOCK_ANSWER, ENC: ENCODER})

_VAR = "var = (x - mu).pow(2).mean(-1, keepdim=True)"
_SCALE = "torch.rsqrt(var + eps)"
_GELU = 'F.gelu(self.fc1(x), approximate="tanh")'
_ATTN = "a = self.attn(self.ln1(x), mask)"
_POST = "x = self.norm1(x + self.dropout(self.self_attn(x, keys)))"

MISTAKES = [
    # layer_norm
    mistake(LN, _VAR, "var = x.var(-1, keepdim=True)", "unbiased", id="ln-unbiased-variance"),
    mistake(LN, _SCALE, "1 / (var.sqrt() + eps)", "outside the square root", id="ln-eps-outside-the-root"),
    mistake(LN, _SCALE, "1 / var.sqrt()", ("ε was left out", "constant"), id="ln-without-eps"),
    mistake(
        LN,
        "mu = x.mean(-1, keepdim=True)\n    var = (x - mu).pow(2).mean(-1, keepdim=True)",
        "mu = x.mean(0, keepdim=True)\n    var = (x - mu).pow(2).mean(0, keepdim=True)",
        ("dim=0", "like BatchNorm", "last dimension"),
        id="ln-over-the-batch-dimension",
    ),
    mistake(
        LN,
        "mu = x.mean(-1, keepdim=True)\n    var = (x - mu).pow(2).mean(-1, keepdim=True)",
        "mu = x.mean()\n    var = (x - mu).pow(2).mean()",
        "whole tensor",
        id="ln-over-the-whole-tensor",
    ),
    mistake(LN, "weight * (x - mu)", "weight * x", "mean was not subtracted", id="ln-not-centred"),
    mistake(
        LN,
        "return weight * (x - mu) * torch.rsqrt(var + eps) + bias",
        "return bias * (x - mu) * torch.rsqrt(var + eps) + weight",
        "swapped",
        id="ln-weight-and-bias-swapped",
    ),
    mistake(LN, " + bias\n", "\n", "bias was not added", id="ln-without-bias"),
    mistake(
        LN,
        "return weight * (x - mu)",
        "x -= mu\n    return weight * x",
        "changed its argument `x` in place",
        id="ln-changing-its-input",
    ),
    # FeedForward
    mistake(FF, _GELU, "F.relu(self.fc1(x))", ("ReLU", "approximate='tanh'"), id="ff-relu"),
    mistake(FF, _GELU, "F.gelu(self.fc1(x))", ("exact (erf) GELU", "approximate='tanh'"), id="ff-exact-gelu"),
    mistake(FF, _GELU, "torch.tanh(self.fc1(x))", "not the tanh function", id="ff-tanh"),
    mistake(FF, _GELU, "self.fc1(x)", "no activation", id="ff-no-activation"),
    mistake(FF, "return self.drop(self.fc2(h))", "return h", "fc2", id="ff-no-fc2"),
    mistake(FF, "return self.drop(self.fc2(h))", "return self.fc2(h)", "nothing was dropped", id="ff-no-dropout"),
    mistake(
        FF,
        'h = F.gelu(self.fc1(x), approximate="tanh")\n        return self.drop(self.fc2(h))',
        'h = self.drop(F.gelu(self.fc1(x), approximate="tanh"))\n        return self.fc2(h)',
        ("inside the network", "to fc2's output"),
        id="ff-dropout-on-the-hidden-layer",
    ),
    mistake(
        FF,
        "self.fc1 = nn.Linear(d_model, d_hidden)\n        self.fc2 = nn.Linear(d_hidden, d_model)",
        "self.linear1 = nn.Linear(d_model, d_hidden)\n        self.linear2 = nn.Linear(d_hidden, d_model)",
        ("wrong parameter names", "self.fc1 = nn.Linear(d_model, d_hidden)"),
        also=[("self.fc1(x)", "self.linear1(x)"), ("self.fc2(h)", "self.linear2(h)")],
        id="ff-wrong-attribute-names",
    ),
    mistake(
        FF,
        "nn.Linear(d_model, d_hidden)",
        "nn.Linear(d_model, 4 * d_model)",
        "fc1.weight has shape",
        id="ff-ignoring-d_hidden",
    ),
    # TransformerBlock
    mistake(
        BLOCK,
        "a = self.attn(self.ln1(x), mask)\n        x = x + a\n        m = self.mlp(self.ln2(x))\n        x = x + m",
        "x = self.ln1(x + self.attn(x, mask))\n        x = self.ln2(x + self.mlp(x))",
        ("post-LN order", "x = x + attn(ln1(x))"),
        id="block-post-ln-order",
    ),
    mistake(
        BLOCK,
        "x = x + a",
        "x = a",
        "residual connection around the attention is missing",
        id="block-no-attention-residual",
    ),
    mistake(BLOCK, "x = x + m", "x = m", "around the feed-forward is missing", id="block-no-mlp-residual"),
    mistake(
        BLOCK,
        "a = self.attn(self.ln1(x), mask)\n        x = x + a\n        m = self.mlp(self.ln2(x))\n        x = x + m",
        "h = self.ln1(x)\n        x = h + self.attn(h, mask)\n        h = self.ln2(x)\n        x = h + self.mlp(h)",
        "adds the normalised x",
        id="block-residual-from-the-normalised-input",
    ),
    mistake(
        BLOCK,
        _ATTN,
        "a = self.attn(self.ln2(x), mask)",
        "ln1 and ln2 are swapped",
        id="block-norms-swapped",
        also=[("m = self.mlp(self.ln2(x))", "m = self.mlp(self.ln1(x))")],
    ),
    mistake(BLOCK, _ATTN, "a = self.attn(self.ln2(x), mask)", "ln2 is used before both", id="block-ln2-twice"),
    mistake(
        BLOCK, "m = self.mlp(self.ln2(x))", "m = self.mlp(self.ln1(x))", "ln1 is used before both", id="block-ln1-twice"
    ),
    mistake(BLOCK, "causal=causal)", "causal=True)", "ignores causal=False", id="block-always-causal"),
    mistake(BLOCK, _ATTN, "a = self.attn(self.ln1(x))", "mask was not passed on", id="block-mask-dropped"),
    mistake(BLOCK, "d_hidden or 4 * d_model", "d_hidden or d_model", "4 * d_model = ", id="block-hidden-default"),
    mistake(
        BLOCK,
        "self.ln1 = nn.LayerNorm(d_model)",
        "self.norm1 = nn.LayerNorm(d_model)",
        ("no attribute `ln1`", "'ln1', 'ln2'"),
        also=[("self.ln1(x)", "self.norm1(x)")],
        id="block-wrong-norm-name",
    ),
    mistake(
        BLOCK,
        "self.mlp = FeedForward(",
        "self.ff = FeedForward(",
        ("wrong parameter names", "missing ['mlp.fc1.bias'", "self.mlp = FeedForward"),
        also=[("self.mlp(", "self.ff(")],
        id="block-wrong-mlp-name",
    ),
    mistake(
        BLOCK,
        "self.ln2 = nn.LayerNorm(d_model)",
        "self.ln2 = nn.BatchNorm1d(d_model)",
        "not an nn.LayerNorm",
        id="block-batch-norm",
    ),
    mistake(
        BLOCK,
        "dropout=dropout, causal",
        "causal",
        "differs from the reference's with the same seed",
        id="block-dropout-not-passed-to-attention",
    ),
    mistake(
        BLOCK,
        "d_hidden or 4 * d_model, dropout)",
        "d_hidden or 4 * d_model)",
        "nothing was dropped",
        also=[("dropout=dropout, causal", "causal")],
        id="block-no-dropout-anywhere",
    ),
    # EncoderLayer
    mistake(
        ENC, "if self.norm_first:", "if not self.norm_first:", ("pre-LN order", "norm_first"), id="enc-orders-swapped"
    ),
    mistake(
        ENC,
        _POST,
        "x = x + self.norm1(self.dropout(self.self_attn(x, keys)))",
        "x + norm(sublayer(x))",
        id="enc-add-and-norm-misread",
        also=[("x = self.norm2(x + self.mlp(x))", "x = x + self.norm2(self.mlp(x))")],
    ),
    mistake(
        ENC,
        _POST,
        "x = self.norm1(self.dropout(self.self_attn(x, keys)))",
        "around the self-attention is missing",
        id="enc-no-attention-residual",
    ),
    mistake(
        ENC,
        "x = self.norm2(x + self.mlp(x))",
        "x = self.norm2(self.mlp(x))",
        "around the feed-forward",
        id="enc-no-mlp-residual",
    ),
    mistake(
        ENC,
        "MultiHeadAttention(d_model, n_heads, dropout=dropout)",
        "MultiHeadAttention(d_model, n_heads, dropout=dropout, causal=True)",
        "self-attention is causal",
        id="enc-causal",
    ),
    mistake(ENC, "padding_mask[:, None, None, :]", "padding_mask", "(B, 1, 1, S)", id="enc-mask-not-reshaped"),
    mistake(ENC, "padding_mask[:, None, None, :]", "None", "padding mask was ignored", id="enc-mask-ignored"),
    mistake(
        ENC, "padding_mask[:, None, None, :]", "~padding_mask[:, None, None, :]", "inverted", id="enc-mask-inverted"
    ),
    mistake(
        ENC,
        "dropout, activation=activation)",
        "dropout)",
        "used 'gelu_tanh' although activation='relu'",
        id="enc-activation-ignored",
    ),
    mistake(
        ENC,
        "x + self.dropout(self.self_attn(x, keys))",
        "x + self.self_attn(x, keys)",
        "attention's output is not dropped out",
        id="enc-no-attention-output-dropout",
    ),
    mistake(
        ENC,
        "self.norm1 = nn.LayerNorm(d_model)",
        "self.ln1 = nn.LayerNorm(d_model)",
        "no attribute `norm1`",
        also=[("self.norm1(", "self.ln1(")],
        id="enc-wrong-norm-name",
    ),
    wrong_answer(
        ENC,
        "from torch import nn\n\nclass EncoderLayer(nn.Module):\n    def __init__(self, *args, **kwargs):\n"
        "        super().__init__()\n        raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="enc-unwritten-on-the-hidden-cases",
    ),
]

BORROWED = [
    wrong_answer(
        LN,
        "import torch.nn.functional as F\n\ndef layer_norm(x, weight, bias, eps=1e-5):\n"
        "    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)\n",
        ("torch.nn.functional.layer_norm", "earns no points"),
        id="ln-calling-F-layer-norm",
    ),
    wrong_answer(
        LN,
        "from torch import nn\n\ndef layer_norm(x, weight, bias, eps=1e-5):\n"
        "    norm = nn.LayerNorm(x.shape[-1], eps=eps)\n    norm.weight.data, norm.bias.data = weight, bias\n"
        "    return norm(x)\n",
        ("torch.nn.LayerNorm", "earns no points"),
        id="ln-using-nn-LayerNorm",
    ),
    wrong_answer(
        LN,
        "from course_lib import blocks\n\ndef layer_norm(x, weight, bias, eps=1e-5):\n"
        "    return blocks.layer_norm(x, weight, bias, eps)\n",
        ("course_lib.blocks.layer_norm", "earns no points"),
        id="ln-calling-the-reference",
    ),
    wrong_answer(
        FF,
        "from course_lib.blocks import FeedForward as Base\n\nclass FeedForward(Base):\n    pass\n",
        ("subclasses", "earns no points"),
        id="ff-subclass-of-the-reference",
    ),
    wrong_answer(
        BLOCK,
        "from course_lib import blocks\n\nclass TransformerBlock(blocks.TransformerBlock):\n    pass\n",
        ("subclasses", "earns no points"),
        id="block-subclass-of-the-reference",
    ),
    wrong_answer(
        ENC,
        "from torch import nn\n\nclass EncoderLayer(nn.TransformerEncoderLayer):\n    pass\n",
        ("torch.nn.TransformerEncoderLayer", "earns no points"),
        id="enc-subclass-of-pytorchs-layer",
    ),
]


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(LN, _VAR, "var = x.var(-1, keepdim=True)")
    message = KIT.fails(LN, code, "<hidden case 1>", "unbiased", cases=KIT.hidden(LN))
    assert "shape" not in message


REF = "from course_lib import blocks as ref"  # as the lesson's first code cell binds it
# The lesson's import cell binds MultiHeadAttention (the learner's from lesson 05, or the course's); graded
# answers get the course's, from the lesson's preamble.
MHA = "from course_lib.multihead import MultiHeadAttention"


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    setup = "import math\nimport torch\nfrom torch import nn\nimport torch.nn.functional as F\n" + REF + "\n" + MHA
    mistakes = MISTAKES
    borrowed = BORROWED
