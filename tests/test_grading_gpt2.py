"""Lesson 10 graders (course_lib.grading.gpt2): every known mistake has a buggy answer whose message must name it;
the tests run through tests/grader_kit.py. Also: the cases stay clear of rounding, the weight-loading cases can show
each wrong mapping they name, and lesson 09's sampler and lesson 10's cannot stand in for each other."""

from __future__ import annotations

import pytest
import torch

from course_lib import gpt2
from course_lib.grading import char_lm as char_grading
from course_lib.grading import gpt2 as grading
from course_lib.grading import gpt2_generation
from course_lib.grading import gpt2_weights as weights_grading
from tests.answers import define, failure_message
from tests.grader_kit import HIDDEN, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "10_gpt2"
COUNT = "gpt2_parameter_count"
LOAD = "load_gpt2_weights"
TOP_P = "top_p_filter"
CACHE = "attend_with_cache"
FORWARD = "forward_with_cache"
LR = "cosine_lr"

# Right answers, written independently of course_lib.
PARAMETER_COUNT = """
def gpt2_parameter_count(n_layers, n_heads, d_model, vocab_size, context_length, tied=True):
    C = d_model
    layer_norm = 2 * C
    attention = (C * 3 * C + 3 * C) + (C * C + C)
    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)
    block = layer_norm + attention + layer_norm + mlp
    total = vocab_size * C + context_length * C + n_layers * block + layer_norm
    if not tied:
        total += vocab_size * C
    return total
"""

# A loader as a learner writes one: its own name table, shapes checked, copies under no_grad.
LOAD_GPT2_WEIGHTS = """
import torch

def load_gpt2_weights(model, state_dict):
    table = [("tok_emb.weight", "wte.weight", False), ("pos_emb.weight", "wpe.weight", False)]
    for i in range(len(model.blocks)):
        table += [
            (f"blocks.{i}.ln1.weight", f"h.{i}.ln_1.weight", False),
            (f"blocks.{i}.ln1.bias", f"h.{i}.ln_1.bias", False),
            (f"blocks.{i}.attn.qkv.weight", f"h.{i}.attn.c_attn.weight", True),
            (f"blocks.{i}.attn.qkv.bias", f"h.{i}.attn.c_attn.bias", False),
            (f"blocks.{i}.attn.out_proj.weight", f"h.{i}.attn.c_proj.weight", True),
            (f"blocks.{i}.attn.out_proj.bias", f"h.{i}.attn.c_proj.bias", False),
            (f"blocks.{i}.ln2.weight", f"h.{i}.ln_2.weight", False),
            (f"blocks.{i}.ln2.bias", f"h.{i}.ln_2.bias", False),
            (f"blocks.{i}.mlp.fc1.weight", f"h.{i}.mlp.c_fc.weight", True),
            (f"blocks.{i}.mlp.fc1.bias", f"h.{i}.mlp.c_fc.bias", False),
            (f"blocks.{i}.mlp.fc2.weight", f"h.{i}.mlp.c_proj.weight", True),
            (f"blocks.{i}.mlp.fc2.bias", f"h.{i}.mlp.c_proj.bias", False),
        ]
    table += [("ln_f.weight", "ln_f.weight", False), ("ln_f.bias", "ln_f.bias", False)]
    params = dict(model.named_parameters())
    todo = []
    for ours, theirs, transpose in table:
        key = "transformer." + theirs
        source = state_dict[key]
        if transpose:
            source = source.t()
        if source.shape != params[ours].shape:
            raise ValueError(f"{key}: {tuple(state_dict[key].shape)} does not fit {ours}")
        todo.append((params[ours], source))
    with torch.no_grad():
        for param, source in todo:
            param.copy_(source)
    return model
"""

TOP_P_FILTER = """
import torch

def top_p_filter(logits, p):
    probs = torch.softmax(logits, dim=-1)
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    above = sorted_probs.cumsum(dim=-1) - sorted_probs
    drop_sorted = (above >= p) & (torch.arange(above.shape[-1]) > 0)  # the first, most probable, always stays
    drop = drop_sorted.scatter(-1, order, drop_sorted)
    return logits.masked_fill(drop, float("-inf"))
"""

ATTEND_WITH_CACHE = """
import math
import torch

def attend_with_cache(q, k, v, k_cache, v_cache):
    keys = torch.cat([k_cache, k], dim=2)
    values = torch.cat([v_cache, v], dim=2)
    P, T = k_cache.shape[2], q.shape[2]
    scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])
    allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
    scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ values, keys, values
"""

# The model's cached pass as a learner writes it without attend_with_cache: the attention written out.
FORWARD_WITH_CACHE = """
import math
import torch

def forward_with_cache(model, idx, cache):
    B, T = idx.shape
    P = cache.layers[0].keys.shape[2]
    pos = torch.arange(P, P + T)
    x = model.drop(model.tok_emb(idx) + model.pos_emb(pos))
    for i, block in enumerate(model.blocks):
        layer = cache.layers[i]
        H = block.attn.n_heads
        C = x.shape[-1]
        q, k, v = block.attn.qkv(block.ln1(x)).split(C, dim=-1)
        q = q.view(B, T, H, C // H).transpose(1, 2)
        k = k.view(B, T, H, C // H).transpose(1, 2)
        v = v.view(B, T, H, C // H).transpose(1, 2)
        keys = torch.cat([layer.keys, k], dim=2)
        values = torch.cat([layer.values, v], dim=2)
        layer.keys = keys
        layer.values = values
        scores = q @ keys.transpose(-2, -1) / math.sqrt(C // H)
        allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)
        scores = scores.masked_fill(~allowed, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ values
        out = out.transpose(1, 2).reshape(B, T, C)
        x = x + block.attn.out_proj(out)
        x = x + block.mlp(block.ln2(x))
    return model.lm_head(model.ln_f(x))
"""

COSINE_LR = """
import math

def cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps):
    if warmup_steps >= max_steps:
        raise ValueError(f"warmup_steps={warmup_steps} must be < max_steps={max_steps}")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > max_steps:
        return min_lr
    ratio = (step - warmup_steps) / (max_steps - warmup_steps)
    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (max_lr - min_lr)
"""

KIT = GraderKit(
    LESSON,
    grading,
    {
        COUNT: PARAMETER_COUNT,
        LOAD: LOAD_GPT2_WEIGHTS,
        TOP_P: TOP_P_FILTER,
        CACHE: ATTEND_WITH_CACHE,
        FORWARD: FORWARD_WITH_CACHE,
        LR: COSINE_LR,
    },
)

_TRANSPOSE = "        if transpose:\n            source = source.t()\n"
_COPY = "    with torch.no_grad():\n        for param, source in todo:\n            param.copy_(source)\n"
_RAISE = '            raise ValueError(f"{key}: {tuple(state_dict[key].shape)} does not fit {ours}")\n'
_TOTAL = "    total = vocab_size * C + context_length * C + n_layers * block + layer_norm\n"
_MASK = "    allowed = torch.ones(T, P + T, dtype=torch.bool).tril(diagonal=P)\n"
_WARM = "        return max_lr * (step + 1) / warmup_steps\n"
_DECAY = "    return min_lr + 0.5 * (1 + math.cos(math.pi * ratio)) * (max_lr - min_lr)\n"
_STORE = "        layer.keys = keys\n        layer.values = values\n"
_SPLIT = "        q = q.view(B, T, H, C // H).transpose(1, 2)\n"

MISTAKES = [
    # load_gpt2_weights
    mistake(
        LOAD, "            param.copy_(source)", "            pass", "nothing was loaded", id="load-nothing-copied"
    ),
    mistake(
        LOAD,
        "            param.copy_(source)",
        "            param.copy_(source * 1.5 if param.dim() == 1 else source)",
        ("logits are not the Hugging Face model's", "does not hold", "Conv1D"),
        id="load-a-wrong-weight-no-known-mistake-explains",
    ),
    mistake(
        LOAD,
        '(f"blocks.{i}.attn.out_proj.weight", f"h.{i}.attn.c_proj.weight", True)',
        '(f"blocks.{i}.attn.out_proj.weight", f"h.{i}.attn.c_proj.weight", False)',
        ("`attn.c_proj.weight` was copied without its transpose", "square", "only the logits show it"),
        id="load-square-c-proj-not-transposed",
    ),
    mistake(
        LOAD,
        _TRANSPOSE,
        "        if source.shape != params[ours].shape:\n            source = source.t()\n",
        "`attn.c_proj.weight` was copied without its transpose",
        id="load-transposed-only-where-the-shape-demands",
    ),
    mistake(
        LOAD,
        _TRANSPOSE,
        "        if transpose:\n            source = source.reshape(source.shape[1], source.shape[0])\n",
        "reshaped (.view / .reshape) into nn.Linear's shape instead of transposed",
        id="load-reshaped-instead-of-transposed",
    ),
    mistake(
        LOAD,
        _TRANSPOSE,
        "        if transpose:\n            source = source.t()\n"
        "        if theirs.endswith('c_attn.weight') or theirs.endswith('c_attn.bias'):\n"
        "            q, k, v = source.chunk(3, dim=0)\n            source = torch.cat([k, q, v])\n",
        ("q and k came out swapped", "[q | k | v]"),
        id="load-q-and-k-swapped",
    ),
    mistake(
        LOAD,
        _TRANSPOSE,
        "        if transpose:\n            source = source.t()\n"
        "        if 'c_attn' in theirs:\n            q, k, v = source.chunk(3, dim=0)\n"
        "            source = torch.cat([q, v, k])\n",
        "k and v came out swapped",
        id="load-k-and-v-swapped",
    ),
    mistake(
        LOAD,
        '[("tok_emb.weight", "wte.weight", False), ("pos_emb.weight", "wpe.weight", False)]',
        '[("tok_emb.weight", "wpe.weight", False), ("pos_emb.weight", "wte.weight", False)]',
        ("token and position tables were swapped", "vocab_size equals context_length"),
        id="load-token-and-position-tables-swapped",
    ),
    mistake(
        LOAD,
        '(f"blocks.{i}.ln1.weight", f"h.{i}.ln_1.weight", False),\n'
        '            (f"blocks.{i}.ln1.bias", f"h.{i}.ln_1.bias", False),',
        '(f"blocks.{i}.ln1.weight", f"h.{i}.ln_2.weight", False),\n'
        '            (f"blocks.{i}.ln1.bias", f"h.{i}.ln_2.bias", False),',
        "ln_1 and ln_2 were swapped",
        id="load-layer-norms-swapped",
        also=(
            (
                '(f"blocks.{i}.ln2.weight", f"h.{i}.ln_2.weight", False),\n'
                '            (f"blocks.{i}.ln2.bias", f"h.{i}.ln_2.bias", False),',
                '(f"blocks.{i}.ln2.weight", f"h.{i}.ln_1.weight", False),\n'
                '            (f"blocks.{i}.ln2.bias", f"h.{i}.ln_1.bias", False),',
            ),
        ),
    ),
    mistake(
        LOAD,
        '    table += [("ln_f.weight", "ln_f.weight", False), ("ln_f.bias", "ln_f.bias", False)]\n',
        "",
        "the final LayerNorm was not loaded",
        id="load-final-layernorm-missing",
    ),
    mistake(
        LOAD,
        "    for ours, theirs, transpose in table:\n",
        "    for ours, theirs, transpose in [r for r in table if not (r[0].endswith('bias') and 'ln' not in r[0])]:\n",
        "the biases of the linear layers were not loaded",
        id="load-linear-biases-missing",
    ),
    mistake(
        LOAD,
        ', ("pos_emb.weight", "wpe.weight", False)]',
        "]",
        "the position table was not loaded",
        id="load-position-table-missing",
    ),
    mistake(
        LOAD,
        "    return model\n",
        "    model.lm_head.weight = torch.nn.Parameter(model.tok_emb.weight.detach().clone())\n    return model\n",
        ("no longer model.tok_emb.weight", "stay tied", "param.copy_(tensor)"),
        id="load-head-replaced-by-a-copy",
    ),
    mistake(
        LOAD,
        _COPY,
        "    for param, source in todo:\n        param.copy_(source)\n",
        ("leaf Variable", "torch.no_grad()"),
        id="load-copies-recorded-by-autograd",
    ),
    mistake(
        LOAD,
        "    params = dict(model.named_parameters())\n",
        "    params = dict(model.named_parameters())\n    state_dict.pop('lm_head.weight', None)\n",
        ("changed the state dict it was given", "lm_head.weight"),
        id="load-pops-from-the-state-dict",
    ),
    mistake(
        LOAD,
        "    params = dict(model.named_parameters())\n",
        "    params = dict(model.named_parameters())\n    head = state_dict['lm_head.weight']\n",
        ("KeyError", "lm_head.weight is optional"),
        id="load-needs-the-head",
    ),
    mistake(
        LOAD,
        "    params = dict(model.named_parameters())\n",
        "    params = dict(model.named_parameters())\n"
        "    for key in state_dict:  # every key must have a place in the table\n"
        "        if key.endswith(('.attn.bias', '.attn.masked_bias')):\n"
        "            raise KeyError(key)\n",
        ("KeyError", "buffers of the causal mask, not weights"),
        id="load-trips-over-old-mask-buffers",
    ),
    mistake(
        LOAD,
        "    return model\n",
        "    return None\n",
        "returned None: return the model",
        id="load-returns-none",
    ),
    mistake(
        LOAD,
        "import torch\n",
        "import copy\n\nimport torch\n",
        "returned another model",
        id="load-into-a-copy",
        also=(
            (
                "    params = dict(model.named_parameters())\n",
                "    model = copy.deepcopy(model)\n    params = dict(model.named_parameters())\n",
            ),
        ),
    ),
    mistake(
        LOAD,
        _RAISE,
        "            continue\n",
        ("did not raise", "transformer.h.1.mlp.c_fc.weight"),
        id="load-skips-what-does-not-fit",
    ),
    mistake(
        LOAD,
        _RAISE,
        '            raise RuntimeError(f"{key} does not fit")\n',
        ("raised RuntimeError", "raise a ValueError naming the first key"),
        id="load-raises-another-error",
    ),
    mistake(
        LOAD,
        _RAISE,
        '            raise ValueError(f"{ours} does not fit")\n',
        ("does not name the key `transformer.h.1.mlp.c_fc.weight`",),
        id="load-names-its-own-parameter",
    ),
    mistake(
        LOAD,
        '(f"blocks.{i}.mlp.fc2.bias", f"h.{i}.mlp.c_proj.bias", False),',
        '(f"blocks.{i}.mlp.fc2.bias", f"h.{i}.attn.c_proj.bias", False),',
        (
            "logits are not the Hugging Face model's",
            "`blocks.0.mlp.fc2.bias` does not hold transformer.h.0.mlp.c_proj.bias",
        ),
        id="load-a-bias-from-the-wrong-layer-is-named",
    ),
    mistake(
        LOAD,
        "import torch\n",
        "import torch\n",
        "not written yet",
        id="load-unwritten",
        also=(("    table = [", "    raise NotImplementedError()\n    table = ["),),
    ),
    # gpt2_parameter_count
    mistake(
        COUNT,
        "    if not tied:\n",
        "    if True:\n",
        ("tied to the token embedding", "counts once"),
        id="count-head-twice",
    ),
    mistake(
        COUNT,
        "    if not tied:\n",
        "    if False:\n",
        "vocab_size × d_model matrix of its own",
        id="count-untied-ignored",
    ),
    mistake(
        COUNT,
        "    return total\n",
        "    return total + vocab_size\n",
        "no bias",
        id="count-head-with-bias",
    ),
    mistake(
        COUNT,
        "    attention = (C * 3 * C + 3 * C) + (C * C + C)\n    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)\n",
        "    attention = (C * 3 * C) + (C * C)\n    mlp = (C * 4 * C) + (4 * C * C)\n",
        "biases of the four linear layers are missing",
        id="count-no-biases",
    ),
    mistake(
        COUNT,
        "    block = layer_norm + attention + layer_norm + mlp\n",
        "    block = attention + mlp\n",
        "two LayerNorms of each block",
        id="count-no-block-layernorms",
    ),
    mistake(
        COUNT,
        "    layer_norm = 2 * C\n",
        "    layer_norm = C\n",
        "a weight *and* a bias",
        id="count-layernorm-weight-only",
    ),
    mistake(
        COUNT,
        _TOTAL,
        "    total = vocab_size * C + context_length * C + n_layers * block\n",
        "final LayerNorm",
        id="count-no-final-layernorm",
    ),
    mistake(
        COUNT,
        _TOTAL,
        "    total = vocab_size * C + n_layers * block + layer_norm\n",
        "position table",
        id="count-no-positions",
    ),
    mistake(
        COUNT,
        "    mlp = (C * 4 * C + 4 * C) + (4 * C * C + C)\n",
        "    mlp = (C * C + C) + (C * C + C)\n",
        "4·d_model",
        id="count-narrow-mlp",
    ),
    mistake(
        COUNT,
        "    attention = (C * 3 * C + 3 * C) + (C * C + C)\n",
        "    attention = (C * 3 * (C // n_heads) + 3 * (C // n_heads)) + (C * C + C)\n",
        "for one head",
        id="count-qkv-per-head",
    ),
    mistake(
        COUNT,
        "    attention = (C * 3 * C + 3 * C) + (C * C + C)\n",
        "    attention = n_heads * ((C * 3 * C + 3 * C) + (C * C + C))\n",
        "n_heads does not change the count",
        id="count-times-heads",
    ),
    mistake(
        COUNT,
        "    attention = (C * 3 * C + 3 * C) + (C * C + C)\n",
        "    attention = C * 3 * C + 3 * C\n",
        "out_proj",
        id="count-no-out-proj",
    ),
    mistake(COUNT, "    return total\n", "    return float(total)\n", "return an int", id="count-float"),
    # top_p_filter
    mistake(
        TOP_P,
        "    above = sorted_probs.cumsum(dim=-1) - sorted_probs\n"
        "    drop_sorted = (above >= p) & (torch.arange(above.shape[-1]) > 0)",
        "    drop_sorted = sorted_probs.cumsum(dim=-1) > p",
        ("across p was dropped", "(cumsum - probs) >= p"),
        id="top-p-drops-the-crossing-token",
    ),
    mistake(
        TOP_P,
        "    above = sorted_probs.cumsum(dim=-1) - sorted_probs\n"
        "    drop_sorted = (above >= p) & (torch.arange(above.shape[-1]) > 0)",
        "    drop_sorted = sorted_probs.cumsum(dim=-1) > p\n    drop_sorted[..., 1:] = drop_sorted[..., :-1].clone()",
        "top token is always kept",
        id="top-p-top-token-not-kept",
    ),
    mistake(
        TOP_P,
        "(above >= p) & (torch.arange(above.shape[-1]) > 0)",
        "above >= p",
        ("with p = 0 every token became -inf", "top token is always kept"),
        id="top-p-top-token-dropped-at-p-0",
    ),
    mistake(TOP_P, "descending=True", "descending=False", "ascending", id="top-p-sorted-ascending"),
    mistake(
        TOP_P,
        "    probs = torch.softmax(logits, dim=-1)\n    sorted_probs, order = probs.sort(dim=-1, descending=True)\n"
        "    above = sorted_probs.cumsum(dim=-1) - sorted_probs\n"
        "    drop_sorted = (above >= p) & (torch.arange(above.shape[-1]) > 0)"
        "  # the first, most probable, always stays\n"
        "    drop = drop_sorted.scatter(-1, order, drop_sorted)\n",
        "    probs = torch.softmax(logits, dim=0)\n    sorted_probs, order = probs.sort(dim=0, descending=True)\n"
        "    above = sorted_probs.cumsum(dim=0) - sorted_probs\n    drop_sorted = above >= p\n"
        "    drop = drop_sorted.scatter(0, order, drop_sorted)\n",
        "wrong axis",
        id="top-p-wrong-axis",
    ),
    mistake(
        TOP_P,
        "    probs = torch.softmax(logits, dim=-1)\n",
        "    probs = logits\n",
        "over the logits themselves",
        id="top-p-no-softmax",
    ),
    mistake(
        TOP_P,
        "    sorted_probs, order = probs.sort(dim=-1, descending=True)\n",
        "    sorted_probs, order = probs, torch.arange(probs.shape[-1]).expand(probs.shape)\n",
        "not sorted",
        id="top-p-unsorted",
    ),
    mistake(
        TOP_P,
        '    return logits.masked_fill(drop, float("-inf"))\n',
        "    return logits.masked_fill(drop, 0.0)\n",
        "-inf",
        id="top-p-zero-not-minus-infinity",
    ),
    mistake(
        TOP_P,
        '    return logits.masked_fill(drop, float("-inf"))\n',
        '    return torch.softmax(logits.masked_fill(drop, float("-inf")), dim=-1)\n',
        "probabilities",
        id="top-p-returns-probabilities",
    ),
    mistake(
        TOP_P,
        '    return logits.masked_fill(drop, float("-inf"))\n',
        '    return logits.sort(dim=-1, descending=True).values.masked_fill(drop_sorted, float("-inf"))\n',
        "sorted order",
        id="top-p-sorted-order-returned",
    ),
    mistake(
        TOP_P,
        '    return logits.masked_fill(drop, float("-inf"))\n',
        '    return logits.masked_fill_(drop, float("-inf"))\n',
        "in place",
        id="top-p-changes-its-input",
    ),
    wrong_answer(
        TOP_P,
        "import math\nimport torch\n\ndef top_p_filter(logits, p):\n"
        "    k = max(1, math.ceil(p * logits.shape[-1]))\n"
        "    kth = logits.topk(k, dim=-1).values[..., -1:]\n"
        "    return logits.masked_fill(logits < kth, float('-inf'))\n",
        "fraction of the vocabulary",
        id="top-p-as-a-fraction-of-tokens",
    ),
    # attend_with_cache
    mistake(
        CACHE,
        "    return weights @ values, keys, values\n",
        "    return weights @ values, k_cache, v_cache\n",
        "new keys were not appended",
        id="cache-not-appended",
    ),
    mistake(
        CACHE,
        "    return weights @ values, keys, values\n",
        "    return weights @ values, keys, v\n",
        "only the new values",
        id="cache-only-new-values",
    ),
    mistake(
        CACHE,
        "torch.cat([k_cache, k], dim=2)",
        "torch.cat([k, k_cache], dim=2)",
        "cached first",
        id="cache-new-before-old",
    ),
    mistake(
        CACHE,
        "torch.cat([k_cache, k], dim=2)",
        "torch.cat([k_cache, k], dim=-1)",
        ("dim=2", "(B, H, P + T, D)"),
        id="cache-wrong-concat-dim",
    ),
    mistake(
        CACHE,
        "torch.cat([k_cache, k], dim=2)",
        "torch.cat([k_cache, k], dim=1)",
        ("along the positions, dim=2", "(B, H, P + T, D)"),
        id="cache-concat-along-heads",
    ),
    mistake(
        CACHE,
        "    scores = q @ keys.transpose(-2, -1) / math.sqrt(q.shape[-1])\n",
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n",
        "not used",
        also=(
            (_MASK, "    allowed = torch.ones(T, T, dtype=torch.bool).tril()\n"),
            ("    return weights @ values, keys, values\n", "    return weights @ v, keys, values\n"),
        ),
        id="cache-not-used",
    ),
    mistake(CACHE, ".tril(diagonal=P)", ".tril()", ("top-left corner", "tril(diagonal=P)"), id="cache-mask-top-left"),
    mistake(
        CACHE,
        '    scores = scores.masked_fill(~allowed, float("-inf"))\n',
        "",
        "no causal mask",
        id="cache-no-mask",
    ),
    mistake(CACHE, ".tril(diagonal=P)", ".tril(diagonal=P - 1)", "own position", id="cache-own-key-masked"),
    mistake(CACHE, "masked_fill(~allowed,", "masked_fill(allowed,", "inverted", id="cache-mask-inverted"),
    mistake(CACHE, " / math.sqrt(q.shape[-1])", "", "not scaled", id="cache-not-scaled"),
    mistake(
        CACHE,
        "torch.softmax(scores, dim=-1)",
        "torch.softmax(scores, dim=-2)",
        "over the queries",
        id="cache-softmax-queries",
    ),
    mistake(
        CACHE,
        "    keys = torch.cat([k_cache, k], dim=2)\n",
        "    k_cache[:] = 0\n    keys = torch.cat([k_cache, k], dim=2)\n",
        "in place",
        id="cache-changes-its-input",
    ),
    # forward_with_cache
    mistake(
        FORWARD,
        "pos = torch.arange(P, P + T)",
        "pos = torch.arange(T)",
        ("rows 0 .. T - 1", "pos_emb(torch.arange(P, P + T))"),
        id="forward-positions-not-offset",
    ),
    mistake(FORWARD, _STORE, "", ("not grown", "store attend_with_cache's returned"), id="forward-cache-not-grown"),
    mistake(
        FORWARD,
        _STORE,
        "        layer.keys = keys\n",
        ("cache.layers[0].values were not grown", "store"),
        id="forward-values-not-appended",
    ),
    mistake(
        FORWARD,
        _STORE,
        "        layer.keys = k\n        layer.values = v\n",
        "hold only this call's T positions",
        id="forward-only-the-new-positions-stored",
    ),
    mistake(
        FORWARD,
        "        keys = torch.cat([layer.keys, k], dim=2)\n        values = torch.cat([layer.values, v], dim=2)\n",
        "        keys = torch.cat([k, layer.keys], dim=2)\n        values = torch.cat([v, layer.values], dim=2)\n",
        "before the cached ones",
        id="forward-new-before-cached",
    ),
    mistake(
        FORWARD,
        _STORE,
        "        layer.keys = torch.cat([keys, k], dim=2)\n        layer.values = torch.cat([values, v], dim=2)\n",
        "twice",
        id="forward-appended-twice",
    ),
    mistake(
        FORWARD,
        _STORE,
        "        layer.keys = values\n        layer.values = keys\n",
        "swapped",
        id="forward-keys-and-values-swapped",
    ),
    mistake(
        FORWARD,
        "        layer = cache.layers[i]\n",
        "        layer = cache.layers[0]\n        P = layer.keys.shape[2]\n",
        "first layer's cache",
        id="forward-every-block-in-the-first-layer",
    ),
    mistake(
        FORWARD, ".tril(diagonal=P)", ".tril()", ("top-left corner", "tril(diagonal=P)"), id="forward-mask-not-shifted"
    ),
    mistake(
        FORWARD,
        '        scores = scores.masked_fill(~allowed, float("-inf"))\n',
        "",
        "no causal mask",
        id="forward-no-mask",
    ),
    mistake(FORWARD, " / math.sqrt(C // H)", "", "not divided by sqrt(D)", id="forward-not-scaled"),
    mistake(
        FORWARD,
        "        H = block.attn.n_heads\n",
        "        H = 1\n",
        ("Sizes of tensors must match", "split q, k, v into attn.n_heads heads"),
        id="forward-one-head",
    ),
    mistake(
        FORWARD,
        _SPLIT,
        "        q = q.reshape(B, H, T, C // H)\n",
        "reshaped straight to (B, H, T, D)",
        also=(
            ("        k = k.view(B, T, H, C // H).transpose(1, 2)\n", "        k = k.reshape(B, H, T, C // H)\n"),
            ("        v = v.view(B, T, H, C // H).transpose(1, 2)\n", "        v = v.reshape(B, H, T, C // H)\n"),
            ("        out = out.transpose(1, 2).reshape(B, T, C)\n", "        out = out.reshape(B, T, C)\n"),
        ),
        id="forward-heads-without-transpose",
    ),
    mistake(
        FORWARD,
        _SPLIT,
        "        q = q.reshape(B, H, T, C // H)\n",
        "reshaped straight to (B, H, T, D)",
        also=(
            ("        k = k.view(B, T, H, C // H).transpose(1, 2)\n", "        k = k.reshape(B, H, T, C // H)\n"),
            ("        v = v.view(B, T, H, C // H).transpose(1, 2)\n", "        v = v.reshape(B, H, T, C // H)\n"),
        ),
        id="forward-heads-split-without-transpose",
    ),
    mistake(
        FORWARD,
        "        layer = cache.layers[i]\n",
        "        layer = cache.layers[0]\n",
        ("disagree on P", "is one layer used by two blocks"),
        id="forward-every-block-in-the-first-layer-mask-error",
    ),
    mistake(FORWARD, "block.attn.qkv(block.ln1(x))", "block.attn.qkv(x)", "block.ln1(x)", id="forward-no-ln1"),
    mistake(FORWARD, "block.mlp(block.ln2(x))", "block.mlp(x)", "block.ln2(x)", id="forward-no-ln2"),
    mistake(FORWARD, "model.lm_head(model.ln_f(x))", "model.lm_head(x)", "final LayerNorm", id="forward-no-ln-f"),
    mistake(FORWARD, "x = x + block.attn.out_proj(out)", "x = x + out", "output projection", id="forward-no-out-proj"),
    mistake(
        FORWARD,
        "x = x + block.attn.out_proj(out)",
        "x = block.attn.out_proj(out)",
        "instead of being added",
        id="forward-attention-replaces-the-stream",
    ),
    mistake(
        FORWARD,
        "    return model.lm_head(model.ln_f(x))\n",
        "    return model.lm_head(model.ln_f(x)), None\n",
        "returned a tuple",
        id="forward-returns-a-tuple",
    ),
    wrong_answer(
        FORWARD,
        "def forward_with_cache(model, idx, cache):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="forward-unwritten-on-the-hidden-cases",
    ),
    # cosine_lr
    mistake(
        LR,
        _WARM,
        "        return max_lr * step / warmup_steps\n",
        ("off by one", "(step + 1)"),
        id="lr-warmup-off-by-one",
    ),
    mistake(
        LR,
        _WARM,
        "        return max_lr * (step + 1) / (warmup_steps + 1)\n",
        "warmup_steps + 1",
        id="lr-warmup-plus-one",
    ),
    mistake(
        LR,
        "    if step < warmup_steps:\n",
        "    if step <= warmup_steps:\n",
        "one step too long",
        id="lr-warmup-too-long",
    ),
    mistake(
        LR, "    if step > max_steps:\n        return min_lr\n", "", ("stay at min_lr", "rises again"), id="lr-no-floor"
    ),
    mistake(
        LR,
        "    if step > max_steps:\n        return min_lr\n",
        "    if step > max_steps:\n        return 0.0\n",
        "not 0",
        id="lr-zero-after",
    ),
    mistake(
        LR,
        "    ratio = (step - warmup_steps) / (max_steps - warmup_steps)\n",
        "    ratio = step / max_steps\n",
        "(step - warmup_steps) / (max_steps - warmup_steps)",
        id="lr-ratio-over-max-steps",
    ),
    mistake(
        LR,
        "    ratio = (step - warmup_steps) / (max_steps - warmup_steps)\n",
        "    ratio = (step - warmup_steps) / max_steps\n",
        "decay's length",
        id="lr-ratio-wrong-length",
    ),
    mistake(
        LR, _DECAY, "    return 0.5 * (1 + math.cos(math.pi * ratio)) * max_lr\n", "ends at 0", id="lr-decay-to-zero"
    ),
    mistake(
        LR,
        _DECAY,
        "    return min_lr + math.cos(math.pi * ratio) * (max_lr - min_lr)\n",
        "0.5 * (1 + cos(pi * r))",
        id="lr-no-half",
    ),
    mistake(LR, "math.cos(math.pi * ratio)", "math.cos(ratio)", "needs pi", id="lr-no-pi"),
    mistake(
        LR,
        "    if warmup_steps >= max_steps:\n"
        '        raise ValueError(f"warmup_steps={warmup_steps} must be < max_steps={max_steps}")\n',
        "",
        ("warmup_steps < max_steps", "ValueError"),
        id="lr-no-value-error",
    ),
    mistake(
        LR,
        _DECAY,
        "    return torch.tensor(min_lr)\n",
        "should return a float",
        id="lr-returns-a-tensor",
        also=(("import math\n", "import math\nimport torch\n"),),
    ),
    wrong_answer(
        LR,
        "def cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="lr-unwritten-on-the-hidden-cases",
    ),
]

# Answers that use the course's reference, or a listed shortcut, earn nothing.
BORROWED = [
    # On the grader's course GPT these would run the course's cached pass; on the learner's own GPT they fail.
    wrong_answer(
        FORWARD,
        "def forward_with_cache(model, idx, cache):\n    return model(idx, cache=cache)[0]\n",
        ("course_lib.gpt.GPT.forward", "earns no points"),
        id="forward-calling-the-model",
    ),
    wrong_answer(
        FORWARD,
        "import torch\n\ndef forward_with_cache(model, idx, cache):\n"
        "    P, T = cache.length, idx.shape[1]\n"
        "    x = model.drop(model.tok_emb(idx) + model.pos_emb(torch.arange(P, P + T)))\n"
        "    for block, layer in zip(model.blocks, cache.layers):\n"
        "        x = block(x, cache=layer)\n"
        "    return model.lm_head(model.ln_f(x))\n",
        ("course_lib.blocks.TransformerBlock.forward", "earns no points"),
        id="forward-calling-the-blocks",
    ),
    wrong_answer(
        FORWARD,
        "import torch\n\ndef forward_with_cache(model, idx, cache):\n"
        "    P, T = cache.length, idx.shape[1]\n"
        "    x = model.drop(model.tok_emb(idx) + model.pos_emb(torch.arange(P, P + T)))\n"
        "    for block, layer in zip(model.blocks, cache.layers):\n"
        "        x = x + block.attn(block.ln1(x), cache=layer)\n"
        "        x = x + block.mlp(block.ln2(x))\n"
        "    return model.lm_head(model.ln_f(x))\n",
        ("course_lib.multihead.MultiHeadAttention.forward", "earns no points"),
        id="forward-calling-the-attention",
    ),
    wrong_answer(
        LOAD,
        "from course_lib import gpt2_weights\n\ndef load_gpt2_weights(model, state_dict):\n"
        "    return gpt2_weights.load_gpt2_weights(model, state_dict)\n",
        ("course_lib.gpt2_weights.load_gpt2_weights", "earns no points"),
        id="load-calling-the-reference",
    ),
    wrong_answer(
        LOAD,
        "import torch\nfrom course_lib.gpt2_weights import weight_names\n\n"
        "def load_gpt2_weights(model, state_dict):\n"
        "    params = dict(model.named_parameters())\n"
        "    with torch.no_grad():\n"
        "        for ours, theirs, transposed in weight_names(len(model.blocks))[:-1]:\n"
        "            params[ours].copy_(state_dict[theirs].t() if transposed else state_dict[theirs])\n"
        "    return model\n",
        ("course_lib.gpt2_weights.weight_names", "earns no points"),
        id="load-with-the-course-name-table",
    ),
    wrong_answer(
        LOAD,
        "import torch\nfrom transformers import GPT2Config, GPT2LMHeadModel\n\n"
        "def load_gpt2_weights(model, state_dict):\n"
        "    V, C = state_dict['transformer.wte.weight'].shape\n"
        "    hf = GPT2LMHeadModel(GPT2Config(vocab_size=V, n_embd=C, n_layer=len(model.blocks)))\n"
        "    return model\n",
        ("`transformers` library", "earns no points"),
        id="load-through-transformers",
    ),
    wrong_answer(
        COUNT,
        "from course_lib.gpt2 import GPT2, GPT2Config\n\n"
        "def gpt2_parameter_count(n_layers, n_heads, d_model, vocab_size, context_length, tied=True):\n"
        "    config = GPT2Config(vocab_size=vocab_size, context_length=context_length, n_layers=n_layers,\n"
        "                        n_heads=n_heads, d_model=d_model)\n"
        "    return GPT2(config).num_parameters() + (0 if tied else vocab_size * d_model)\n",
        ("course_lib.gpt2.GPT2", "earns no points"),
        id="count-building-the-course-model",
    ),
    wrong_answer(
        TOP_P,
        "from course_lib import generate\n\ndef top_p_filter(logits, p):\n"
        "    return generate.top_p_filter(logits, p)\n",
        ("course_lib.generate.top_p_filter", "earns no points"),
        id="top-p-calling-the-reference",
    ),
    wrong_answer(
        TOP_P,
        "import torch\nfrom transformers import TopPLogitsWarper\n\ndef top_p_filter(logits, p):\n"
        "    flat = logits.reshape(-1, logits.shape[-1])\n"
        "    return TopPLogitsWarper(p)(None, flat.clone()).reshape(logits.shape)\n",
        ("`transformers` library", "earns no points"),
        id="top-p-transformers-warper",
    ),
    wrong_answer(
        CACHE,
        "import torch\nimport torch.nn.functional as F\n\ndef attend_with_cache(q, k, v, k_cache, v_cache):\n"
        "    keys, values = torch.cat([k_cache, k], 2), torch.cat([v_cache, v], 2)\n"
        "    P, T = k_cache.shape[2], q.shape[2]\n"
        "    mask = torch.ones(T, P + T, dtype=torch.bool).tril(P)\n"
        "    return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask), keys, values\n",
        ("scaled_dot_product_attention", "earns no points"),
        id="cache-with-sdpa",
    ),
    wrong_answer(
        LR,
        "import torch\n\ndef cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps):\n"
        "    if step < warmup_steps:\n        return max_lr * (step + 1) / warmup_steps\n"
        "    if step > max_steps:\n        return min_lr\n"
        "    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)\n"
        "    s = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max_steps - warmup_steps, eta_min=min_lr)\n"
        "    for _ in range(step - warmup_steps):\n        opt.step()\n        s.step()\n"
        "    return s.get_last_lr()[0]\n",
        ("CosineAnnealingLR", "earns no points"),
        id="lr-torch-scheduler",
    ),
    wrong_answer(
        LR,
        "from course_lib import train\n\ndef cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps):\n"
        "    return train.cosine_lr(step, max_lr, min_lr, warmup_steps, max_steps)\n",
        ("course_lib.train.cosine_lr", "earns no points"),
        id="lr-calling-the-reference",
    ),
]


def test_top_p_cases_stay_clear_of_rounding():
    """In every row of every case, p is at least 1e-4 away from each running total, so summing in another order
    (an ascending sort, 1 - cumsum) cannot flip a token; and each case keeps a crossing token that is not the top."""
    cases = [c for c in gpt2_generation._TOP_P_CASES] + KIT.hidden(TOP_P)
    for shape, p, scale, seed in cases:
        logits = gpt2_generation.top_p_logits(tuple(shape), scale, seed).double()
        probs = logits.softmax(-1).sort(-1, descending=True).values
        totals = probs.cumsum(-1)
        assert (totals - p).abs().min() > 1e-4, (shape, p)
        if p == 0:  # only the top token stays: nothing crosses
            continue
        crossing = (totals - probs < p) & (totals >= p)
        assert crossing[..., 1:].any(), (shape, p)  # some row's crossing token is not its top token
    assert [c for c in gpt2_generation._TOP_P_CASES if c[1] == 0], "a visible case with p = 0"


def test_some_visible_top_p_case_has_a_top_token_above_p():
    found = False
    for shape, p, scale, seed in gpt2_generation._TOP_P_CASES:
        top = gpt2_generation.top_p_logits(tuple(shape), scale, seed).softmax(-1).max(-1).values
        found |= bool((top > p).any())
    assert found


@pytest.mark.parametrize(
    "code",
    [
        "from course_lib import generate\n\n"
        "def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):\n"
        "    return generate.sample_next_token(logits, temperature, top_k, generator=generator)\n",
        "import torch\nfrom course_lib import generate\n\n"
        "def sample_next_token(logits, temperature=1.0, top_k=None, generator=None):\n"
        "    if temperature <= 0:\n        raise ValueError('temperature')\n"
        "    logits = logits / temperature\n"
        "    if top_k is not None:\n        logits = generate.top_k_filter(logits, top_k)\n"
        "    return torch.multinomial(torch.softmax(logits, -1), 1, generator=generator)\n",
    ],
    ids=["generate-sampler", "generate-top-k"],
)
def test_lesson_09s_sampler_cannot_be_lesson_10s(code):
    # Both modules define a sample_next_token; lesson 10's (with top_p) and its top-k step would do lesson 09's
    # exercise, so the manifest lists them as shortcuts of lesson 09's, and its check refuses them.
    answer = define(code, "sample_next_token")
    failure_message(lambda: char_grading.check_sample_next_token(answer), "course_lib.generate.", "earns no points")


def test_lesson_10_has_no_exercise_lesson_09_s_sampler_could_answer():
    from course_lib import manifest

    assert {e.name for e in manifest.lesson(LESSON).exercises}.isdisjoint(
        e.name for e in manifest.lesson("09_char_gpt").exercises
    )


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(COUNT, "    if not tied:\n", "    if True:\n")
    message = KIT.fails(COUNT, code, "<hidden case 1>", cases=KIT.hidden(COUNT))
    assert "1024" not in message and "expected" not in message


def test_a_cache_answer_working_on_any_leading_dims_is_right():
    code = KIT.variant(CACHE, "dim=2)", "dim=-2)")  # both cats
    assert KIT.grade(CACHE, code).checks == 2 * len(gpt2_generation._CACHE_CASES)


def test_a_tensor_of_ids_leaves_the_reference_untouched():
    # The checks hand the learner clones: the reference's inputs are what the expected values were computed from.
    x = gpt2_generation.cache_inputs(1, 2, 3, 2, 4, 0)
    before = {n: t.clone() for n, t in x.items()}
    gpt2.attend_with_cache(**x)
    assert all(torch.equal(before[n], x[n]) for n in x)


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 4
    mistakes = MISTAKES
    borrowed = BORROWED


def test_the_first_weight_loading_case_lets_swapped_tables_fit():
    # vocab_size == context_length: a loader that swaps wte and wpe runs, and only the logits can name it.
    first = weights_grading._CASES[0]
    assert first[3] == first[4] and first[5] == "head"  # vocab_size, context_length, extras
    assert {c[5] for c in weights_grading._CASES} == {"head", "no head", "old buffers"}


@pytest.mark.parametrize("case", weights_grading._CASES + KIT.hidden(LOAD), ids=str)
def test_every_wrong_mapping_the_grader_names_moves_the_logits_far_past_the_tolerance(case):
    # A named mistake must be told apart from the right load (and from the others) by much more than rounding.
    case = tuple(case)
    state, idx, expected = weights_grading._hf_case(case)
    right = weights_grading.logits_of(weights_grading._loaded(case, state), idx)
    assert (right - expected).abs().max().item() < 1e-4
    outputs = {}
    for key, _ in weights_grading._MISTAKES:
        if key == "tables_swapped" and case[3] != case[4]:
            continue  # the swapped tables do not fit this case
        outputs[key] = weights_grading.logits_of(weights_grading._wrong_load(case, state, key), idx)
        assert (outputs[key] - expected).abs().max().item() > 0.1, key
    keys = list(outputs)
    for i, a in enumerate(keys):
        for b in keys[i + 1 :]:
            assert (outputs[a] - outputs[b]).abs().max().item() > 0.01, (a, b)
