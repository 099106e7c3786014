"""Claims of lesson 07_encoder_decoder: what its text says its code cells show."""

from __future__ import annotations

import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, literal, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

BATCH = 'src, labels = rt.reversal_batch(["4071", "95", "123456"])'
SPLIT = "task = rt.ReversalTask.tiny() if SMALL"
MODEL = "config = ref.Seq2SeqConfig.tiny() if SMALL"
INIT = "def first_loss(model):"
BASE = "base = ref.EncoderDecoderTransformer(ref.Seq2SeqConfig.paper_base())"
SHIFTED = "decoder_input = ref.shift_right(labels, rt.BOS_ID)\nprint("
PADDING = "largest cross-attention weight on a padded source position"
LOSSES = "mean over every position, padding included"
TRAIN = "history = ref.train(model, task, train_config"
EXAMPLES = "examples = [strings[0] for strings in task.held_out.values()]"
SCORES = "scores = ref.evaluate(model, task"
HEADS = "profile = rt.mirror_attention("
BUG_TRAIN = "bug_history = ref.train(buggy"
BUG = "def token_accuracy(predictions, labels):"


def ed_batch(nb):
    text = output(nb, BATCH)
    src, labels = tensors(text)[:2]
    require(src[0] == [7, 3, 10, 4, 2, 0, 0], f"src of '4071' should be its digit ids, <eos>, padding: {src[0]}")
    require(labels[0] == [4, 10, 3, 7, 2, 0, 0], f"labels of '4071' should be '1704', <eos>, padding: {labels[0]}")
    decoded = literal(text, r"-> (\[.*\])$", "decoded labels")
    require(decoded == ["1704", "59", "654321"], f"the labels decode to the reversed strings, got {decoded}")


def ed_split(nb):
    text = output(nb, SPLIT)
    train = literal(text, r"training lengths: (\(.*\))", "training lengths")
    held = literal(text, r"held-out test strings per length: (\{.*\})", "held-out strings")
    require(4 not in train and 7 not in train and max(train) == 10, f"training lengths: {train}")
    require(sorted(held) == list(range(3, 13)), f"test lengths should be 3..12, got {sorted(held)}")
    require(all(count == 200 for count in held.values()), f"held-out strings per length: {held}")


def ed_model(nb):
    text = output(nb, MODEL)
    require("lm_head.weight is tok_emb.weight: True" in text, f"weight tying:\n{text}")
    require("-> memory (3, 7, 64) -> logits (3, 7, 13)" in text, f"shapes:\n{text}")


def ed_init(nb):
    text = output(nb, INIT)
    small = number(text, rf"std 1/sqrt\(d_model\): {FLOAT}", "loss with the small initialisation")
    default = number(text, rf"default\): {FLOAT}", "loss with nn.Embedding's initialisation")
    uniform = number(text, rf"= {FLOAT}$", "uniform guess")
    require(abs(uniform - math.log(13)) < 0.01, f"ln 13 = {uniform}")
    require(uniform < small, f"the small initialisation starts above a uniform guess: {small} vs {uniform}")
    require(default >= 5 * small, f"the default's first loss is an order of magnitude higher: {default} vs {small}")


def ed_base(nb):
    count = number(output(nb, BASE), rf"base model: {FLOAT} parameters", "parameters of the base model")
    require(60e6 < count < 66e6, f"close to the paper's 65 million: {count:,.0f}")


def ed_shift(nb):
    text = output(nb, SHIFTED)
    labels = literal(text, r"labels\s+= (\[.*\])", "labels")
    shifted = literal(text, r"decoder input = (\[.*\])", "decoder input")
    require(shifted == [1] + labels[:-1], f"<bos> first, last label dropped: {labels} -> {shifted}")


def ed_padding(nb):
    text = output(nb, PADDING)
    padded = number(text, rf"padded source positions in the batch: {FLOAT}", "padded positions")
    largest = number(text, rf"padded source position: {FLOAT}", "largest weight on padding")
    require(padded > 0 and largest == 0.0, f"{padded:.0f} padded positions, largest weight on them {largest}")


def ed_loss_padding(nb):
    text = output(nb, LOSSES)
    real = number(text, rf"real tokens: {FLOAT}", "loss over real tokens")
    everything = number(text, rf"padding included: {FLOAT}", "loss over every position")
    require(abs(real - everything) > 0.05, f"counting the padding changes the loss: {real} vs {everything}")


def ed_training(nb):
    text = output(nb, TRAIN)
    first = number(text, rf"first \d+ steps: {FLOAT}", "first loss")
    last = number(text, rf"last \d+ steps: {FLOAT}", "last loss")
    require(first / last > 300, f"about three orders of magnitude: {first} -> {last}")


def ed_examples(nb):
    found = rows(output(nb, EXAMPLES), r"^\s*(\d+) -> (\d*)\s+(right|WRONG)\s*$", "decoded examples", 10)
    for text, got, verdict in found:
        require((got == text[::-1]) == (verdict == "right"), f"{text} -> {got} marked {verdict}")
        require(len(text) > 10 or verdict == "right", f"{text} (inside the training range) -> {got}")


def ed_scores(nb):
    table = rows(output(nb, SCORES), r"^(\d+)\s+(True|False)\s+(\d+)\s+" + FLOAT + r"\s*$", "exact match table", 10)
    scores = {int(n): (trained == "True", float(em)) for n, trained, _, em in table}
    require(sorted(scores) == list(range(3, 13)), f"lengths 3..12: {sorted(scores)}")
    require(not scores[4][0] and not scores[7][0], "lengths 4 and 7 are marked as not trained on")
    for n in range(3, 11):
        require(scores[n][1] >= 0.99, f"length {n}: exact match {scores[n][1]} < 0.99")
    for n in (11, 12):
        require(scores[n][1] < 0.5, f"length {n} (longer than any trained on): exact match {scores[n][1]}")


def ed_heads(nb):
    text = output(nb, HEADS)
    table = rows(text, rf"^\s*(?:(\d+)\s+)?(\d+)\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s*$", "head table", 8)
    layers: dict[int, list[tuple[float, float, float]]] = {}
    layer = None
    for first, _head, mirror, nxt, eos in table:
        layer = int(first) if first else layer
        layers.setdefault(layer, []).append((float(mirror), float(nxt), float(eos)))
    require(sorted(layers) == [0, 1] and all(len(h) == 4 for h in layers.values()), f"2 layers x 4 heads: {layers}")
    last, first_layer = layers[1], layers[0]
    for mirror, nxt, _ in last:
        require(mirror > 0.5, f"a last-layer head puts only {mirror} on the mirror")
        require(nxt > (1 - mirror) / 2, f"most of the rest ({1 - mirror:.3f}) should be on the next position: {nxt}")
    require(
        max(m for m, _, _ in first_layer) < 0.5 * min(m for m, _, _ in last),
        f"first-layer heads give the mirror much less weight: {first_layer} vs {last}",
    )
    means = {
        int(layer): (float(mirror), float(eos))
        for layer, mirror, eos in rows(
            text, rf"^layer (\d+), mean of its heads: mirror {FLOAT}, eos {FLOAT}$", "layer means", 2
        )
    }
    require(means[0][1] >= 0.1 and means[1][1] < 0.05, f"<eos>: a good share in layer 0, almost none in 1: {means}")


def _first_layer_on_the_mirror(match: re.Match[str]) -> str:
    """Every first-layer head's mirror weight set to 0.600, as much as the last layer's."""
    return re.sub(r"(?m)^(\s*(?:0\s+)?\d+\s+)\S+", r"\g<1>0.600", match.group(0))


def ed_bug(nb):
    text = output(nb, BUG)
    found = {
        name: (float(forced), float(past), float(em))
        for name, forced, past, em in rows(
            text,
            rf"^(correct|swapped) decoder: token accuracy with teacher forcing {FLOAT}, from the past only "
            rf"{FLOAT}; exact match from the past only {FLOAT}$",
            "accuracies",
            2,
        )
    }
    forced, past, em = found["swapped"]
    require(forced > 0.9, f"with teacher forcing the swapped decoder looks almost perfect: {forced}")
    require(past < 0.5 and em < 0.01, f"from the past only it gets few tokens and no string right: {past}, {em}")
    require(found["correct"] == (1.0, 1.0, 1.0) or min(found["correct"]) >= 0.99, f"correct: {found['correct']}")
    require(abs(found["correct"][0] - found["correct"][1]) < 1e-9, "causal: teacher forcing = past only")
    require("greedy decoding with the swapped decoder fails:" in text, f"greedy decoding should fail:\n{text}")
    loss = number(output(nb, BUG_TRAIN), rf"last \d+ steps: {FLOAT}", "swapped loss")
    require(loss < 0.3, f"the swapped decoder's loss falls nicely: {loss}")


CLAIMS = [
    Claim(
        "src is the digits then <eos>, labels the reversed digits then <eos>, padded",
        ed_batch,
        [
            Break(TENSOR, BATCH, r"\[ 4, 10,  3,  7,  2", "[ 4,  3, 10,  7,  2"),
            Break(EXACT, BATCH, r"'1704'", "'4071'"),
        ],
    ),
    Claim(
        "lengths 4 and 7 are left out of training; held-out strings of every length from 3 to 12",
        ed_split,
        [
            Break(MEMBERS, SPLIT, r"\(1, 2, 3, 5,", "(1, 2, 3, 4, 5,"),
            Break(EXACT, SPLIT, r"12: 200", "12: 0"),
        ],
    ),
    Claim(
        "lm_head.weight is tok_emb.weight; memory (B, S, d_model), logits (B, T, V)",
        ed_model,
        [
            Break(SHOWN, MODEL, r"tok_emb.weight: True", "tok_emb.weight: False"),
            Break(SHOWN, MODEL, r"memory \(3, 7, 64\)", "memory (3, 64)"),
        ],
    ),
    Claim(
        "nn.Embedding's default init makes the first loss an order of magnitude higher; the small one starts above "
        "a uniform guess",
        ed_init,
        [
            Break(MARGIN, INIT, r"(?<=default\): )\S+", "9.80"),
            Break(ORDER, INIT, r"(?<=std 1/sqrt\(d_model\): )\S+", "2.40"),
        ],
    ),
    Claim(
        "the paper's base model: close to the 65 million parameters the paper reports",
        ed_base,
        [Break(MARGIN, BASE, r"[\d,]+(?= parameters)", "44,082,496")],
    ),
    Claim(
        "shift_right: <bos> first, the last label dropped",
        ed_shift,
        [Break(EXACT, SHIFTED, r"(?<=decoder input = )\[1, ", "[2, ")],
    ),
    Claim(
        "the weights on padded source positions are exactly zero",
        ed_padding,
        [Break(MARGIN, PADDING, r"(?<=padded source position: )\S+", "0.013")],
    ),
    Claim(
        "counting the padding changes the loss",
        ed_loss_padding,
        [Break(MARGIN, LOSSES, r"(real tokens: )(\S+)(\n.*padding included: )\S+", r"\g<1>\g<2>\g<3>\g<2>")],
    ),
    Claim(
        "the loss falls by about three orders of magnitude",
        ed_training,
        [Break(MARGIN, TRAIN, r"(?<=last )(\d+ steps: )\S+", r"\g<1>0.25000")],
    ),
    Claim(
        "the trained model reverses held-out strings; the examples it gets wrong are the longer ones",
        ed_examples,
        [Break(SHOWN, EXAMPLES, r"(?m)^(\s*\d{4} -> )(\d)(\d*)(\s+)right", r"\g<1>0\g<3>\g<4>right")],
    ),
    Claim(
        "99 % or more exact match at every length of the training range, 4 and 7 included; longer strings mostly wrong",
        ed_scores,
        [
            Break(TABLE, SCORES, r"(?m)^(7\s+False\s+200\s+)\S+", r"\g<1>0.62"),
            Break(TABLE, SCORES, r"(?m)^(12\s+False\s+200\s+)\S+", r"\g<1>0.97"),
            Break(TABLE, SCORES, r"(?m)^4 .*\n", ""),
        ],
    ),
    Claim(
        "the last layer's heads read the mirror (most of the rest on the next position); the first layer gives the "
        "mirror much less weight and <eos> a good share, unlike the last",
        ed_heads,
        [
            Break(MARGIN, HEADS, r"(?m)^(1\s+0\s+)\S+", r"\g<1>0.310"),
            Break(MARGIN, HEADS, r"(?m)^(layer 0, mean of its heads: mirror \S+ eos )\S+", r"\g<1>0.020"),
            Break(ORDER, HEADS, r"(?s)^0 .*?(?=^1 )", _first_layer_on_the_mirror),
        ],
    ),
    Claim(
        "the swapped decoder: almost perfect with teacher forcing, few tokens and no string from the past only; "
        "the correct decoder the same both ways; greedy decoding fails",
        ed_bug,
        [
            Break(MARGIN, BUG, r"(?<=swapped decoder: token accuracy with teacher forcing )\S+", "0.412,"),
            Break(MARGIN, BUG, r"(swapped decoder: .*? from the past only )\S+(; exact)", r"\g<1>0.950\g<2>"),
            Break(SHOWN, BUG, r"with the swapped decoder fails: .*", "with the swapped decoder ran"),
        ],
    ),
]
