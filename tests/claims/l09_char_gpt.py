"""Claims of lesson 09_char_gpt: what its text says its code cells show."""

from __future__ import annotations

import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, literal, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

VOCAB = 'print(f"vocabulary: {V} characters")'
SPLIT = "train_data, val_data = ref.train_val_split(data, 0.9)"
BATCH = "xb, yb = ref.get_batch(train_data, 8, 4"
UNTRAINED = "loss of the untrained bigram model"
BIGRAM = "bigram_result = train_for(bigram"
GPT = "gpt_result = train_for(gpt"
SAMPLES = "settings = [(0.5, None)"
RACE = "lstm_result = train_for(lstm"
SCALING = "scaling = pd.DataFrame("
HEADS = "xs, _ = ref.get_batch(val_data"


def cg_vocab(nb):
    text = output(nb, VOCAB)
    size = number(text, rf"vocabulary: {FLOAT} characters", "vocabulary size")
    chars = literal(text, r"^(\".*\"|'.*')$", "the vocabulary")
    require(size == 65 == len(chars), f"65 characters: {size}, {len(chars)}")
    require(list(chars) == sorted(chars), f"numbered in sorted order: {chars!r}")


def cg_split(nb):
    text = output(nb, SPLIT)
    train = number(text, rf"train: {FLOAT} ids", "training ids")
    val = number(text, rf"validation: {FLOAT} ids", "validation ids")
    require(abs(train / (train + val) - 0.9) < 1e-3, f"the first 90 % for training: {train} and {val}")


def cg_batch(nb):
    x, y = tensors(output(nb, BATCH))[:2]
    require(len(x) == len(y) == 4 and all(len(r) == 8 for r in x + y), f"4 windows of 8: {x}, {y}")
    require(all(xr[1:] == yr[:-1] for xr, yr in zip(x, y, strict=True)), f"y is x moved one place: {x} / {y}")


def cg_untrained(nb):
    text = output(nb, UNTRAINED)
    start = number(text, rf"untrained bigram model: {FLOAT};", "untrained loss")
    uniform = number(text, rf"= {FLOAT}$", "uniform guess")
    require(abs(uniform - math.log(65)) < 1e-3, f"ln 65 = {uniform}")
    require(start > uniform + 0.1, f"the untrained model starts above the uniform guess: {start} vs {uniform}")


def _bigram(nb) -> tuple[float, float]:
    text = output(nb, BIGRAM)
    val = number(text, rf"trained bigram model .* val loss {FLOAT}$", "bigram val loss")
    counted = number(text, rf"counted from the training text: val loss {FLOAT}", "counted floor")
    return val, counted


def cg_bigram(nb):
    val, counted = _bigram(nb)
    require(2.4 < val < 2.6, f"about 2.5: {val}")
    require(2.4 < counted < 2.6 and abs(val - counted) < 0.1, f"close to the counted floor: {val} vs {counted}")


def _losses(text: str, who: str) -> tuple[float, float]:
    return (
        number(text, rf"{who} after .* train loss {FLOAT}", f"{who} train loss"),
        number(text, rf"{who} after .* val loss {FLOAT}$", f"{who} val loss"),
    )


def cg_gpt(nb):
    train, val = _losses(output(nb, GPT), "CharGPT")
    bigram_val, _ = _bigram(nb)
    require(val < bigram_val - 0.2, f"well below the bigram model: {val} vs {bigram_val}")
    # "Close": no sign of memorising. The two are estimates from a few batches; with two lessons executing side by
    # side the gap was 0.129 (val 1.950, train 1.821), so 0.1 was too tight for the noise; the break (train 1.700)
    # still fails.
    require(abs(val - train) < 0.2, f"the validation loss is close to the training loss: {val} vs {train}")


def _shares(nb) -> dict[str, float]:
    found = rows(
        output(nb, SAMPLES),
        r"^temperature (\S+), top_k (\S+): (\d+)% of the words occur in the training text$",
        "real-word shares",
        4,
    )
    return {f"{t}/{k}": int(share) / 100 for t, k, share in found}


def cg_samples(nb):
    s = _shares(nb)
    require(s["0.5/None"] > 0.5, f"at 0.5 most words are real: {s}")
    require(s["1.5/None"] < 0.5, f"at 1.5 fewer than half are: {s}")
    require(s["1.0/5"] > s["1.0/None"], f"top-5 spells better than the plain draw at temperature 1: {s}")
    require(s["0.5/None"] > s["1.0/None"] > s["1.5/None"], f"the share falls as the temperature rises: {s}")


def cg_race(nb):
    table = {
        name: [float(v) for v in values]
        for name, *values in rows(
            output(nb, RACE),
            rf"^(CharGPT|CharLSTM|bigram)\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s*$",
            "race table",
            3,
        )
    }
    require(set(table) == {"CharGPT", "CharLSTM", "bigram"}, f"one row per model: {sorted(table)}")
    gpt, lstm, bigram = table["CharGPT"][-1], table["CharLSTM"][-1], table["bigram"][-1]
    require(max(gpt, lstm) < bigram - 0.2, f"both far below the bigram model: {gpt}, {lstm} vs {bigram}")
    # The same CPU time: each run stops at the first step past the budget, and a step takes milliseconds. Which
    # model wins is a speed result, so it is not asserted: the text says it was the LSTM on the course's 2-core
    # machine and that yours will differ.
    seconds = (table["CharGPT"][1], table["CharLSTM"][1])
    require(abs(seconds[0] - seconds[1]) <= 1.0, f"the same training time: {seconds}")


def cg_scaling(nb):
    found = rows(output(nb, SCALING), rf"^(\d+)\s+{FLOAT}\s+{FLOAT}\s*$", "scaling table", 3)
    require([int(t) for t, _, _ in found] == [32, 128, 512], f"a row for T = 32, 128, 512: {found}")


def cg_heads(nb):
    table = rows(output(nb, HEADS), rf"^\s*(?:(\d+)\s+)?(\d+)\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s*$", "head table", 8)
    layers: dict[int, list[tuple[float, float]]] = {}
    layer = None
    for first, _head, _itself, previous, distance in table:
        layer = int(first) if first else layer
        layers.setdefault(layer, []).append((float(previous), float(distance)))
    require(sorted(layers) == [0, 1] and all(len(h) == 4 for h in layers.values()), f"2 layers x 4 heads: {layers}")
    require(
        max(p for p, _ in layers[0]) > 0.5,
        f"a first-layer head puts most weight on the previous character: {layers[0]}",
    )
    mean = {k: sum(d for _, d in v) / len(v) for k, v in layers.items()}
    require(mean[1] > mean[0], f"the second layer looks further back on average: {mean}")


def _second_layer_close(match: re.Match[str]) -> str:
    """Every second-layer head's mean distance set to 1.000, closer than any first-layer head's."""
    return re.sub(r"(?m)\S+$", "1.000", match.group(0))


def _memorised(match: re.Match[str]) -> str:
    """The training loss set 0.5 below the validation loss on the same line: a model that memorised its text.
    (Relative, not a fixed value: with a fixed 1.700 the gap stayed under the check's 0.2 when val was near 1.85.)"""
    return f"{match.group(1)}{float(match.group(3)) - 0.5:.3f}{match.group(2)}{match.group(3)}"


def _longer(match: re.Match[str]) -> str:
    """The LSTM's seconds set 5 s past what it printed. (Relative, not a fixed value: a fixed 20.0 changed nothing
    on a run whose LSTM happened to print 20.0.)"""
    return f"{match.group(1)}{float(match.group(2)) + 5.0:.1f}"


def _share(setting: str, value: str):
    t, k = setting.split("/")
    return Break(ORDER, SAMPLES, rf"(?m)^(temperature {re.escape(t)}, top_k {k}: )\d+%", rf"\g<1>{value}%")


CLAIMS = [
    Claim(
        "65 characters, numbered in sorted order",
        cg_vocab,
        [Break(EXACT, VOCAB, r"vocabulary: 65", "vocabulary: 64"), Break(ORDER, VOCAB, r"ABC", "BAC")],
    ),
    Claim(
        "the first 90 % of the ids for training, the last 10 % for validation",
        cg_split,
        [Break(MARGIN, SPLIT, r"(?<=validation: )[\d,]+", "250,000")],
    ),
    Claim(
        "each row of y is its row of x moved one place left",
        cg_batch,
        [Break(TENSOR, BATCH, r"y = tensor\(\[\[\s*\d+", "y = tensor([[99")],
    ),
    Claim(
        "the untrained bigram model starts above the uniform guess ln V",
        cg_untrained,
        [Break(ORDER, UNTRAINED, r"(?<=untrained bigram model: )\S+;", "4.100;")],
    ),
    Claim(
        "the trained bigram model: about 2.5, close to the counted floor",
        cg_bigram,
        [
            Break(MARGIN, BIGRAM, r"(?m)(trained bigram model .* val loss )\S+$", r"\g<1>2.900"),
            Break(MARGIN, BIGRAM, r"(?<=counted from the training text: val loss )\S+", "2.300"),
        ],
    ),
    Claim(
        "the GPT's validation loss ends well below the bigram model's, and close to its training loss",
        cg_gpt,
        [
            Break(ORDER, GPT, r"(?m)(CharGPT after .* val loss )\S+$", r"\g<1>2.450"),
            Break(MARGIN, GPT, r"(train loss )\S+(, val loss )(\d+\.\d+)", _memorised),
        ],
    ),
    Claim(
        "real words: most at temperature 0.5, fewer than half at 1.5; top-5 spells better than temperature 1 alone",
        cg_samples,
        [_share("1.0/5", "20"), _share("1.5/None", "70"), _share("0.5/None", "30")],
    ),
    Claim(
        "in the same CPU time both the LSTM and the GPT reached a validation loss far below the bigram model's",
        cg_race,
        [
            Break(MARGIN, RACE, r"(?m)^(CharLSTM(?:\s+\S+){4}\s+)\S+", r"\g<1>2.900"),
            Break(MARGIN, RACE, r"(?m)^(bigram(?:\s+\S+){4}\s+)\S+", r"\g<1>1.900"),
            Break(MARGIN, RACE, r"(?m)^(CharLSTM\s+\S+\s+)(\S+)", _longer),
        ],
    ),
    Claim(
        "the scaling table has a row for T = 32, 128 and 512",
        cg_scaling,
        [Break(TABLE, SCALING, r"(?m)^512 .*\n?", "")],
    ),
    Claim(
        "a first-layer head puts most of its weight on the previous character; the second layer looks further back",
        cg_heads,
        [
            Break(MARGIN, HEADS, r"(?m)^(\s*(?:0\s+)?\d+\s+\S+\s+)(0\.[5-9]\d*|1\.0+)", r"\g<1>0.300"),
            Break(ORDER, HEADS, r"(?ms)^1 .*", _second_layer_close),
        ],
    ),
]
