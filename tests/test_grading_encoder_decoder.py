"""Lesson 07 graders (course_lib.grading.encoder_decoder): every known mistake has a buggy answer whose message must
name it; the tests run through tests/grader_kit.py. The model's right answer is built from the course's layers and
position table, as a graded answer is, and written otherwise independently of course_lib."""

from __future__ import annotations

from course_lib.grading import encoder_decoder as grading
from course_lib.grading.kit import core
from tests.grader_kit import HIDDEN, Edit, GraderKit, LessonGraderTests, mistake, wrong_answer

LESSON = "07_encoder_decoder"
MODEL = "EncoderDecoderTransformer"
SHIFT = "shift_right"
LOSS = "masked_cross_entropy"
STEP = "greedy_step"

# Right answers, written independently of course_lib (the model from the layers the lesson binds). The model ties
# its head before it initialises the table, draws that table with normal_, and names its helper otherwise.
ENCODER_DECODER = """
import math

import torch
from torch import nn

from course_lib.blocks import DecoderLayer, EncoderLayer
from course_lib.position import PositionEncoding


class EncoderDecoderTransformer(nn.Module):
    def __init__(self, config, encoder_layer=EncoderLayer, decoder_layer=DecoderLayer):
        super().__init__()
        self.config = config
        C = config.d_model
        self.tok_emb = nn.Embedding(config.vocab_size, C)
        self.pos = PositionEncoding(C, config.context_length)
        self.dropout = nn.Dropout(config.dropout)
        self.encoder = nn.ModuleList(
            [encoder_layer(C, config.n_heads, d_hidden=config.d_hidden, dropout=config.dropout)
             for _ in range(config.n_layers)]
        )
        self.decoder = nn.ModuleList(
            [decoder_layer(C, config.n_heads, d_hidden=config.d_hidden, dropout=config.dropout)
             for _ in range(config.n_layers)]
        )
        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        with torch.no_grad():
            self.tok_emb.weight.normal_(0.0, 1 / math.sqrt(C))

    def vectors(self, ids):
        return self.dropout(self.pos(math.sqrt(self.config.d_model) * self.tok_emb(ids)))

    def source_mask(self, src):
        return src.ne(self.config.pad_id)

    def encode(self, src, src_mask=None):
        if src_mask is None:
            src_mask = self.source_mask(src)
        h = self.vectors(src)
        for block in self.encoder:
            h = block(h, padding_mask=src_mask)
        return h

    def decode(self, tgt, memory, src_mask=None, need_weights=False):
        h = self.vectors(tgt)
        maps = []
        for block in self.decoder:
            h, _, cross = block(h, memory, memory_padding_mask=src_mask, need_weights=True)
            maps.append(cross)
        logits = self.lm_head(h)
        if need_weights:
            return logits, torch.stack(maps, dim=0)
        return logits

    def forward(self, src, tgt):
        keep = self.source_mask(src)
        return self.decode(tgt, self.encode(src, keep), keep)
"""

SHIFT_RIGHT = """
import torch

def shift_right(labels, bos_id):
    out = torch.empty_like(labels)
    out[:, 0] = bos_id
    out[:, 1:] = labels[:, :-1]
    return out
"""

MASKED_CROSS_ENTROPY = """
import torch
import torch.nn.functional as F

def masked_cross_entropy(logits, targets, pad_id):
    log_probs = F.log_softmax(logits, dim=-1)
    picked = log_probs.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    keep = targets != pad_id
    return -picked[keep].mean()
"""

GREEDY_STEP = """
import torch

def greedy_step(logits, finished, eos_id, pad_id):
    scores = logits[:, -1]
    next_ids = scores.argmax(-1)
    next_ids = next_ids.masked_fill(finished, pad_id)
    now_finished = finished.clone()
    now_finished[next_ids == eos_id] = True
    return next_ids, now_finished
"""

KIT = GraderKit(
    LESSON, grading, {MODEL: ENCODER_DECODER, SHIFT: SHIFT_RIGHT, LOSS: MASKED_CROSS_ENTROPY, STEP: GREEDY_STEP}
)

_SCALED = "math.sqrt(self.config.d_model) * self.tok_emb(ids)"
_EMBED = f"        return self.dropout(self.pos({_SCALED}))\n"
_ENCODE_LAYER = "            h = block(h, padding_mask=src_mask)\n"
_DECODE_LAYER = "            h, _, cross = block(h, memory, memory_padding_mask=src_mask, need_weights=True)\n"
_FORWARD = "        return self.decode(tgt, self.encode(src, keep), keep)\n"
_TIE = "        if config.tie_embeddings:\n            self.lm_head.weight = self.tok_emb.weight\n"
_INIT = "        with torch.no_grad():\n            self.tok_emb.weight.normal_(0.0, 1 / math.sqrt(C))\n"
_LAYERS = "d_hidden=config.d_hidden, dropout=config.dropout"

_SHIFT_BODY = "    out[:, 0] = bos_id\n    out[:, 1:] = labels[:, :-1]\n    return out\n"
_LOSS_BODY = "    return -picked[keep].mean()\n"
_ARGMAX = "    next_ids = scores.argmax(-1)\n"
_PAD = "    next_ids = next_ids.masked_fill(finished, pad_id)\n"
_FINISH = "    now_finished[next_ids == eos_id] = True\n"

MISTAKES = [
    # EncoderDecoderTransformer: the embeddings
    mistake(MODEL, _SCALED, "self.tok_emb(ids)", "not multiplied by sqrt(d_model)", id="model-embeddings-unscaled"),
    mistake(
        MODEL,
        _EMBED,
        "        return self.dropout(math.sqrt(self.config.d_model) * self.pos(self.tok_emb(ids)))\n",
        "positions were scaled by sqrt(d_model) too",
        id="model-positions-scaled-too",
    ),
    mistake(
        MODEL, _EMBED, f"        return self.dropout({_SCALED})\n", "no positions were added", id="model-no-positions"
    ),
    mistake(MODEL, _INIT, "", ("nn.Embedding's default, std 1", "std=d_model**-0.5"), id="model-embeddings-std-1"),
    mistake(
        MODEL,
        _EMBED,
        f"        return self.pos.pe[: ids.shape[1]] + self.dropout({_SCALED})\n",
        ("must raise ValueError", "PositionEncoding"),
        id="model-positions-sliced-without-a-length-check",
    ),
    # the masks
    mistake(
        MODEL,
        _ENCODE_LAYER,
        "            h = block(h)\n",
        "encoder layers got no padding mask",
        id="model-encoder-unmasked",
    ),
    mistake(
        MODEL,
        _DECODE_LAYER,
        "            h, _, cross = block(h, memory, need_weights=True)\n",
        ("cross-attention reads the memory's padding", "memory_padding_mask"),
        id="model-cross-attention-unmasked",
    ),
    mistake(
        MODEL,
        _DECODE_LAYER,
        "            h, _, cross = block(h, memory, src_mask, need_weights=True)\n",
        ("third argument", "memory_padding_mask"),
        id="model-source-mask-as-the-targets-padding",
    ),
    mistake(
        MODEL,
        _DECODE_LAYER,
        "            h, _, cross = block(h, memory, src_mask, need_weights=True)\n",
        ("src_mask went to the decoder layers' third argument", "memory_padding_mask"),
        cases=[(9, 12, 3, 1, 20, 8, 4, True, 3, 6, 6, 1)],  # S == T: the call runs, and the mistake is recognised
        id="model-source-mask-as-the-targets-padding-same-lengths",
    ),
    mistake(
        MODEL,
        "        return src.ne(self.config.pad_id)\n",
        "        return src.ne(0)\n",
        "took padding to be id 0",
        id="model-padding-assumed-zero",
    ),
    mistake(
        MODEL,
        "        return src.ne(self.config.pad_id)\n",
        "        return src.eq(self.config.pad_id)\n",
        "is True at padding",
        id="model-source-mask-inverted",
    ),
    mistake(
        MODEL,
        "        if src_mask is None:\n            src_mask = self.source_mask(src)\n",
        "        src_mask = self.source_mask(src)\n",
        "src_mask it was given was ignored",
        id="model-encode-ignores-the-mask-given",
    ),
    # the stacks
    mistake(
        MODEL,
        _ENCODE_LAYER,
        "            block(h, padding_mask=src_mask)\n",
        "encoder layers' outputs were dropped",
        id="model-encoder-outputs-dropped",
    ),  # fmt: skip
    mistake(
        MODEL,
        _DECODE_LAYER,
        "            _, _, cross = block(h, memory, memory_padding_mask=src_mask, need_weights=True)\n",
        "decoder layers' outputs were dropped",
        id="model-decoder-outputs-dropped",
    ),
    mistake(
        MODEL,
        "        h = self.vectors(tgt)\n",
        "        h = start = self.vectors(tgt)\n",
        "only the last one's output was kept",
        also=((_DECODE_LAYER, _DECODE_LAYER.replace("block(h, memory", "block(start, memory")),),
        id="model-decoder-layers-not-chained",
    ),
    mistake(
        MODEL,
        "        logits = self.lm_head(h)\n",
        "        logits = self.lm_head(h).softmax(-1)\n",
        "went through a softmax",
        id="model-logits-softmaxed",
    ),
    # forward: where the memory comes from
    mistake(
        MODEL,
        _FORWARD,
        "        return self.decode(tgt, self.vectors(src), keep)\n",
        "skipped the encoder",
        id="model-memory-from-the-embeddings",
    ),
    mistake(
        MODEL,
        _FORWARD,
        "        return self.decode(tgt, self.encode(tgt))\n",
        "memory was made from the target",
        id="model-memory-from-the-target",
    ),
    mistake(
        MODEL,
        _FORWARD,
        "        return self.decode(tgt, self.encode(src, keep))\n",
        "forward gave decode no source mask",
        id="model-forward-without-the-mask-for-decode",
    ),
    mistake(
        MODEL,
        _FORWARD,
        "        return self.decode(src, self.encode(tgt))\n",
        "one row per source position",
        id="model-source-and-target-swapped",
    ),
    # the head
    mistake(MODEL, _TIE, "", "matrix of its own", id="model-head-untied"),
    mistake(
        MODEL,
        _TIE,
        "        self.lm_head.weight = nn.Parameter(self.tok_emb.weight.data)\n",
        ("another Parameter", "counts the matrix twice"),
        id="model-head-tied-by-sharing-values",
    ),
    mistake(
        MODEL,
        _TIE,
        "        self.lm_head.weight = self.tok_emb.weight\n",
        "tie them only when the configuration says so",
        id="model-head-always-tied",
    ),
    mistake(MODEL, "bias=False)", "bias=True)", "lm_head has a bias", id="model-head-with-a-bias"),
    # the modules
    mistake(
        MODEL,
        "self.config = config\n",
        "self.settings = config\n",
        "self.config = config",
        also=(("self.config.", "self.settings."),),
        id="model-configuration-not-kept",
    ),
    mistake(
        MODEL,
        "            [encoder_layer(C,",
        "            [EncoderLayer(C,",
        ("encoder holds EncoderLayer", "encoder_layer class it was given"),
        also=(("            [decoder_layer(C,", "            [DecoderLayer(C,"),),
        id="model-layer-classes-of-its-own",
    ),
    mistake(
        MODEL,
        _LAYERS,
        "dropout=config.dropout",
        "feed-forward width is config.d_hidden",
        id="model-layers-without-d_hidden",
    ),
    mistake(
        MODEL,
        "        self.tok_emb = nn.Embedding(config.vocab_size, C)\n",
        "        self.tok_emb = nn.Embedding(config.vocab_size, C)\n"
        "        self.tgt_emb = nn.Embedding(config.vocab_size, C)\n",
        "one table, self.tok_emb",
        also=(("self.tok_emb", "self.src_emb"),),
        id="model-two-embedding-tables",
    ),
    mistake(
        MODEL,
        "        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)\n",
        "        self.final_norm = nn.LayerNorm(C)\n"
        "        self.lm_head = nn.Linear(C, config.vocab_size, bias=False)\n",
        ("final_norm.weight", "has none of its own"),
        also=(("        logits = self.lm_head(h)\n", "        logits = self.lm_head(self.final_norm(h))\n"),),
        id="model-final-layer-norm",
    ),
    wrong_answer(
        MODEL,
        Edit(
            "        self.encoder = nn.ModuleList(\n",
            "        self.encoder = nn.Module()\n        self.encoder.layers = nn.ModuleList(\n",
            (
                (
                    "        self.decoder = nn.ModuleList(\n",
                    "        self.decoder = nn.Module()\n        self.decoder.layers = nn.ModuleList(\n",
                ),
                ("in self.encoder:", "in self.encoder.layers:"),
                ("in self.decoder:", "in self.decoder.layers:"),
            ),
        ),
        ("two nn.ModuleLists", "encoder.0"),
        id="model-layers-inside-a-module-of-their-own",
    ),
    # the attention weights for the plots
    mistake(
        MODEL,
        _DECODE_LAYER,
        "            h, cross, _ = block(h, memory, memory_padding_mask=src_mask, need_weights=True)\n",
        "self-attention weights",
        id="model-self-attention-weights-returned",
    ),
    mistake(MODEL, "torch.stack(maps, dim=0)", "maps", "torch.stack", id="model-weights-not-stacked"),
    mistake(
        MODEL, "torch.stack(maps, dim=0)", "maps[-1]", "every layer's, stacked", id="model-last-layers-weights-only"
    ),
    # dropout
    mistake(
        MODEL,
        _EMBED,
        f"        return self.pos({_SCALED})\n",
        "never applied to the embeddings",
        id="model-no-embedding-dropout",
    ),
    mistake(
        MODEL,
        _EMBED,
        f"        return self.pos(self.dropout({_SCALED}))\n",
        "before the positions are added",
        id="model-dropout-before-the-positions",
    ),
    mistake(
        MODEL,
        _LAYERS,
        "d_hidden=config.d_hidden",
        "the layers got no dropout",
        id="model-layers-without-dropout",
    ),
    wrong_answer(
        MODEL,
        "from torch import nn\n\nclass EncoderDecoderTransformer(nn.Module):\n"
        "    def __init__(self, config, encoder_layer=None, decoder_layer=None):\n"
        "        super().__init__()\n        raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="model-unwritten-on-the-hidden-cases",
    ),
    # shift_right
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([labels[:, 1:], torch.full_like(labels[:, :1], bos_id)], dim=1)\n",
        ("appended at the end", "labels moved left"),
        id="shift-bos-at-the-end",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([torch.full_like(labels[:, :1], bos_id), labels], dim=1)\n",
        ("last label was not dropped", "T + 1"),
        id="shift-last-label-kept",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    out = labels.clone()\n    out[:, 0] = bos_id\n    return out\n",
        "overwrote the first label",
        id="shift-bos-overwrites",
    ),
    mistake(SHIFT, _SHIFT_BODY, "    return torch.roll(labels, 1, dims=1)\n", "torch.roll", id="shift-roll"),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    out = torch.roll(labels, 1, dims=0)\n    out[0, :] = bos_id\n    return out\n",
        "batch dimension",
        id="shift-along-the-batch",
    ),
    mistake(
        SHIFT,
        "    out[:, 0] = bos_id\n",
        "    out[:, 0] = 1\n",
        "use the `bos_id` argument",
        id="shift-hard-coded-bos",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    labels[:, 1:] = labels[:, :-1].clone()\n    labels[:, 0] = bos_id\n    return labels\n",
        ("changed its argument `labels` in place",),
        id="shift-in-place",
    ),
    mistake(
        SHIFT,
        _SHIFT_BODY,
        "    return torch.cat([torch.full_like(labels[:, :1], bos_id), labels[:, :-1]], dim=1).float()\n",
        "integers",
        id="shift-float-ids",
    ),
    # masked_cross_entropy
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -picked.mean()\n",
        ("padding was counted", "ignore_index"),
        id="loss-padding-counted",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -(picked * keep).sum() / picked.numel()\n",
        "still counted in the denominator",
        id="loss-padding-in-the-denominator",
    ),
    mistake(LOSS, _LOSS_BODY, "    return -picked[keep].sum()\n", "summed, not averaged", id="loss-sum"),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return (-(picked * keep).sum(1) / keep.sum(1)).mean()\n",
        "each sequence was averaged first",
        id="loss-mean-of-sequence-means",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return F.cross_entropy(logits.softmax(-1).flatten(0, 1), targets.flatten(), ignore_index=pad_id)\n",
        "softmax was applied before F.cross_entropy",
        id="loss-double-softmax",
    ),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return F.nll_loss(logits.flatten(0, 1), targets.flatten(), ignore_index=pad_id)\n",
        "nll_loss expects log-probabilities",
        id="loss-nll-on-logits",
    ),
    mistake(
        LOSS,
        "    keep = targets != pad_id\n",
        "    keep = targets != 0\n",
        "Use the `pad_id` argument",
        id="loss-padding-assumed-zero",
    ),
    mistake(
        LOSS,
        "    log_probs = F.log_softmax(logits, dim=-1)\n",
        "    log_probs = F.log_softmax(logits, dim=1)\n",
        "wrong dimension (dim=1, time)",
        id="loss-log-softmax-over-time",
    ),
    mistake(LOSS, _LOSS_BODY, "    return (-picked[keep].mean()).item()\n", ".item()", id="loss-as-a-python-float"),
    mistake(
        LOSS,
        _LOSS_BODY,
        "    return -picked * keep\n",
        ("returned a tensor of shape", "one number"),
        id="loss-not-reduced",
    ),
    # greedy_step
    mistake(
        STEP,
        "    scores = logits[:, -1]\n",
        "    scores = logits[:, 0]\n",
        "first position's logits",
        id="step-first-position",
    ),
    mistake(
        STEP,
        _ARGMAX,
        "    next_ids = logits.argmax(dim=1)[:, -1]\n",
        "argmax ran over the time dimension",
        id="step-argmax-over-time",
    ),
    mistake(STEP, _PAD, "", ("<eos> does not stop a sequence", "pad_id"), id="step-eos-does-not-stop"),
    mistake(
        STEP,
        _PAD,
        "    next_ids = next_ids.masked_fill(finished, eos_id)\n",
        "gets eos_id again",
        id="step-eos-again-after-eos",
    ),
    mistake(STEP, _FINISH, "", "`finished` was not updated", id="step-finished-not-updated"),
    mistake(
        STEP,
        "    now_finished = finished.clone()\n" + _FINISH,
        "    now_finished = next_ids == eos_id\n",
        "recomputed from the new tokens alone",
        id="step-finished-recomputed",
    ),
    mistake(
        STEP,
        "    now_finished = finished.clone()\n",
        "    now_finished = finished\n",
        "changed `finished` in place",
        id="step-finished-in-place",
    ),
    mistake(
        STEP,
        "    return next_ids, now_finished\n",
        "    return next_ids[:, None], now_finished\n",
        "no keepdim",
        id="step-keepdim",
    ),
    mistake(
        STEP,
        "    return next_ids, now_finished\n",
        "    return next_ids\n",
        "should return a pair (next_ids, finished)",
        id="step-returns-only-the-ids",
    ),
    wrong_answer(
        STEP,
        "def greedy_step(logits, finished, eos_id, pad_id):\n    raise NotImplementedError()\n",
        "not written yet",
        cases=HIDDEN,
        id="step-unwritten-on-the-hidden-cases",
    ),
]

# Answers that use the course's reference (called, wrapped or imported) earn nothing.
BORROWED = [
    wrong_answer(
        MODEL,
        "from course_lib import encoder_decoder as e\n\nclass EncoderDecoderTransformer(e.EncoderDecoderTransformer):\n"
        "    pass\n",
        ("course_lib.encoder_decoder.EncoderDecoderTransformer", "earns no points"),
        id="model-subclassing-the-reference",
    ),
    wrong_answer(
        MODEL,
        ENCODER_DECODER.replace(
            "    def encode(self, src, src_mask=None):",
            "    encode = e.EncoderDecoderTransformer.encode\n    embed = e.EncoderDecoderTransformer.embed\n\n"
            "    def _unused(self, src, src_mask=None):",
        ).replace(
            "from course_lib.position import PositionEncoding\n",
            "from course_lib.position import PositionEncoding\nfrom course_lib import encoder_decoder as e\n",
        ),
        ("course_lib.encoder_decoder.EncoderDecoderTransformer", "earns no points"),
        id="model-borrowing-the-references-encode",
    ),
    wrong_answer(
        MODEL,
        ENCODER_DECODER.replace(
            "from course_lib.position import PositionEncoding\n",
            "from course_lib.position import PositionEncoding\nfrom course_lib.blocks import Encoder\n",
        ).replace(
            "        for block in self.encoder:\n            h = block(h, padding_mask=src_mask)\n",
            "        stack = Encoder(1, self.config.d_model, self.config.n_heads)\n"
            "        stack.layers = self.encoder\n        h = stack(h, src_mask)\n",
        ),
        ("course_lib.blocks.Encoder", "earns no points"),
        id="model-running-the-courses-encoder-stack",
    ),
    wrong_answer(
        SHIFT,
        "from course_lib import encoder_decoder as e\n\ndef shift_right(labels, bos_id):\n"
        "    return e.shift_right(labels, bos_id)\n",
        ("course_lib.encoder_decoder.shift_right", "earns no points"),
        id="shift-calling-the-reference",
    ),
    wrong_answer(
        LOSS,
        "from course_lib.encoder_decoder import masked_cross_entropy\n",
        ("course_lib.encoder_decoder.masked_cross_entropy", "earns no points"),
        id="loss-the-reference-imported",
    ),
    wrong_answer(
        STEP,
        "import course_lib.encoder_decoder as e\n\ndef greedy_step(logits, finished, eos_id, pad_id):\n"
        "    return e.greedy_step(logits, finished, eos_id, pad_id)\n",
        ("course_lib.encoder_decoder.greedy_step", "earns no points"),
        id="step-calling-the-reference",
    ),
]


def test_ignore_index_is_a_right_answer():
    code = (
        "import torch.nn.functional as F\n\ndef masked_cross_entropy(logits, targets, pad_id):\n"
        "    return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=pad_id)\n"
    )
    assert KIT.grade(LOSS, code).checks == 3
    assert KIT.grade(LOSS, code, HIDDEN).hidden


def test_an_endless_loop_is_stopped(monkeypatch):
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", 0.3)
    code = KIT.variant(STEP, "    scores = logits[:, -1]\n", "    while True:\n        pass\n")
    KIT.fails(STEP, code, "did not finish")


def test_hidden_case_messages_name_the_case_not_its_input():
    code = KIT.variant(SHIFT, _SHIFT_BODY, "    return torch.roll(labels, 1, dims=1)\n")
    message = KIT.fails(SHIFT, code, "<hidden case 1>", "torch.roll", cases=[(3, 7, 12, 12)])
    assert "bos_id=12" not in message and "(3, 7)" not in message
    code = KIT.variant(STEP, _PAD, "")
    message = KIT.fails(STEP, code, "<hidden case 1>", cases=KIT.hidden(STEP))
    assert "finished=[" not in message


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    # What the lesson binds before exercise 1: the layers and positions the model is built from.
    setup = (
        "from course_lib.blocks import DecoderLayer, EncoderLayer\nfrom course_lib.position import PositionEncoding\n"
    )
    mistakes = MISTAKES
    borrowed = BORROWED
