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
CAUSAL = "changed[0, -1] = (changed[0, -1] + 1) % V"
LADDER = "ladder = pd.DataFrame(rows)"
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


def _gpt(nb) -> dict:
    text = output(nb, GPT)
    at = rows(text, rf"^at step\s+(\d+): val loss {FLOAT}, val - train gap {FLOAT}$", "estimates every 500 steps")
    return {
        "untrained": number(text, rf"^untrained: val loss {FLOAT};", "untrained val loss"),
        "uniform": number(text, rf"uniform guess ln 65 = {FLOAT}$", "uniform guess"),
        "train": number(text, rf"GPT after .* train loss {FLOAT}", "GPT train loss"),
        "val": number(text, rf"GPT after .* val loss {FLOAT}$", "GPT val loss"),
        "steps": number(text, rf"GPT after {FLOAT} steps", "GPT steps"),
        "at": [(int(step), float(val), float(gap)) for step, val, gap in at],
        "seen": number(text, rf"seen about {FLOAT} times", "times each character was seen"),
    }


def cg_gpt_start(nb):
    g = _gpt(nb)
    require(abs(g["uniform"] - math.log(65)) < 1e-3, f"ln 65 = {g['uniform']}")
    require(abs(g["untrained"] - g["uniform"]) < 0.05, f"the untrained GPT starts on ln 65: {g['untrained']}")


def cg_gpt(nb):
    g = _gpt(nb)
    bigram_val, _ = _bigram(nb)
    require(g["val"] < bigram_val - 0.2, f"well below the bigram model: {g['val']} vs {bigram_val}")
    gap = g["val"] - g["train"]
    # "Nearly 0.2 (0.19 in our run)": the two are estimates over 10 batches each, so the margin is wide.
    require(0.12 < gap < 0.26, f"val above train by nearly 0.2: {g['val']} vs {g['train']}")
    steps, vals, gaps = zip(*g["at"], strict=True)
    require(steps == (500, 1000, 1500), f"an estimate every 500 steps: {steps}")
    require(gaps[0] < 0.1 and gaps[0] < gaps[-1], f"the gap widened, from about 0.05 at step 500: {gaps}")
    require(all(a > b for a, b in zip(vals, vals[1:], strict=False)), f"the val loss was still falling: {vals}")
    require(abs(g["seen"] - 1.5) < 0.05, f"each training character seen about 1.5 times: {g['seen']}")


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
            output(nb, RACE), rf"^(GPT|CharLSTM)\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s*$", "race table", 2
        )
    }
    require(set(table) == {"GPT", "CharLSTM"}, f"one row per model: {sorted(table)}")
    require(table["GPT"][0] == 500, f"the GPT at its first 500 steps: {table['GPT']}")
    # The same CPU time: the LSTM stops at the first step past the GPT's, and a step takes milliseconds. Which
    # model is ahead is a speed result, so it is not asserted: the text says what it was on the course's machine
    # and that yours will differ.
    seconds = (table["GPT"][1], table["CharLSTM"][1])
    require(abs(seconds[0] - seconds[1]) <= 1.0, f"the same training time: {seconds}")


def _ladder(nb) -> dict[str, tuple[float, float]]:
    found = rows(
        output(nb, LADDER),
        rf"^(bigram|\+ .*?)\s+(\d+)\s+{FLOAT}\s+{FLOAT}\s+{FLOAT}\s*$",
        "ladder table",
        7,
    )
    return {name: (float(train), float(val)) for name, _params, train, val, _cpu in found}


def cg_ladder(nb):
    ladder = _ladder(nb)
    names = list(ladder)
    require(len(names) == 7 and names[0] == "bigram", f"seven rungs from the bigram model up: {names}")
    val = [v for _, v in ladder.values()]
    # Measured with seeds 0, 1, 2 (1,000 steps each; tests/benchmarks/bench_char_ladder.py): every step of the first
    # four fell by 0.05-0.16; LayerNorm moved the loss by -0.003 to +0.017; the last rung fell by 0.10-0.13. The
    # margins leave room for noise.
    for before, after, name in zip(val[:4], val[1:5], names[1:5], strict=True):
        require(after < before - 0.02, f"{name} lowers the validation loss: {before} -> {after}")
    require(abs(val[5] - val[4]) < 0.05, f"LayerNorm changes little here: {val[4]} -> {val[5]}")
    require(val[6] < min(val[:6]) - 0.05, f"dropout + wider gives the lowest loss: {val}")
    train, last = ladder[names[6]]
    require(last > train, f"the widest rung has started to fit its training text: {train} vs {last}")


def cg_causal(nb):
    text = output(nb, CAUSAL)
    earlier = number(text, rf"at positions 0\.\.30: {FLOAT}$", "largest earlier change")
    last = number(text, rf"at the last position, 31: {FLOAT}$", "change at the last position")
    require(earlier == 0.0, f"no earlier position's logits move: {earlier}")
    require(last > 0.01, f"the last position's logits move: {last}")


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


def _ladder_val(name: str, value: str) -> Break:
    """The validation loss of one rung of the ladder table set to `value`."""
    family = MARGIN if name == "+ LayerNorm" else ORDER
    row = rf"(?m)^({re.escape(name)}\s+\d+\s+\S+\s+)\S+"
    return Break(family, LADDER, row, rf"\g<1>{value}")


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
        "the untrained GPT starts on the uniform guess ln 65",
        cg_gpt_start,
        [Break(MARGIN, GPT, r"(?m)^(untrained: val loss )\S+;", r"\g<1>4.713;")],
    ),
    Claim(
        "the GPT ends well below the bigram model, above its training loss by nearly 0.2, a gap that widened; its "
        "validation loss still falling; each training character seen about 1.5 times",
        cg_gpt,
        [
            Break(ORDER, GPT, r"(?m)(GPT after .* val loss )\S+$", r"\g<1>2.450"),
            Break(MARGIN, GPT, r"(train loss )\S+(, val loss )(\d+\.\d+)", _memorised),
            Break(ORDER, GPT, r"(?m)^(at step  500: val loss \S+, val - train gap )\S+", r"\g<1>0.400"),
            Break(ORDER, GPT, r"(?m)^(at step 1500: val loss )\S+", r"\g<1>2.900"),
            Break(MARGIN, GPT, r"seen about \S+ times", "seen about 3.0 times"),
        ],
    ),
    Claim(
        "changing the last character of a window moves the last position's logits only",
        cg_causal,
        [
            Break(MARGIN, CAUSAL, r"(?m)(at positions 0\.\.30: )\S+$", r"\g<1>1.20e-02"),
            Break(MARGIN, CAUSAL, r"(?m)(at the last position, 31: )\S+$", r"\g<1>0.000"),
        ],
    ),
    Claim(
        "the ladder: each part up to residual connections lowers the validation loss, LayerNorm changes little, "
        "dropout + wider is lowest",
        cg_ladder,
        [
            _ladder_val("+ one self-attention head", "2.600"),
            _ladder_val("+ feed-forward", "2.500"),
            _ladder_val("+ LayerNorm", "1.800"),
            _ladder_val("+ dropout 0.1, wider (d_model 64)", "2.300"),
        ],
    ),
    Claim(
        "real words: most at temperature 0.5, fewer than half at 1.5; top-5 spells better than temperature 1 alone",
        cg_samples,
        [_share("1.0/5", "20"), _share("1.5/None", "70"), _share("0.5/None", "30")],
    ),
    Claim(
        "the LSTM trained for the CPU time the GPT's first 500 steps took",
        cg_race,
        [
            Break(MARGIN, RACE, r"(?m)^(CharLSTM\s+\S+\s+)(\S+)", _longer),
            Break(EXACT, RACE, r"(?m)^(GPT\s+)500", r"\g<1>300"),
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
