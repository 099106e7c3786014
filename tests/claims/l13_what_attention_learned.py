"""Claims of lesson 13_what_attention_learned: what its text says its code cells show.

The benchmark's figures over eight seeds, which the text quotes in section 5, are in
tests/benchmarks/RESULTS_induction_seeds.md (a script's output, not the lesson's); the claims here are the lesson's
own run's."""

from __future__ import annotations

import ast
import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, number, output, require, rows

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

WINDOWS = "x, y = repeat_task.repeat_batch(train_ids, 6"
MODEL = "model = repeat_task.attention_only_gpt("
LOSSES = "windows = repeat_task.repeated_text(val_ids, 64, period"
SCORES = "scores = pd.DataFrame(ref.head_scores(model, scoring, period))"
ABLATION = "baseline, *rows = ref.ablation_losses(model, windows, period)"
COMPOSITION = "with_ablated = ref.scores_with_head_ablated("
PHASE = "records = ref.track_checkpoints("
CHAR_GPT = "char_gpt = course_gpt.init_gpt2(yours.GPT("
GPT2 = 'gpt2_weights.pretrained_if_available("gpt2")'

_ROW = r"^\s*(?:(\d)\s+)?(\d)\s+" + r"\s+".join([FLOAT] * 3) + r"\s*$"  # layer (first row of a layer), head, 3 numbers


def _table(text: str, what: str) -> dict[tuple[int, int], tuple[float, float, float]]:
    """The printed (layer, head) -> (itself, previous token, induction) table of `ref.head_scores`."""
    table, layer = {}, None
    for match in rows(text, _ROW, what, at_least=8):
        first, head, *values = match
        layer = int(first) if first else layer
        table[(layer, int(head))] = tuple(float(v) for v in values)
    return table


def cg_windows(nb):
    found = rows(output(nb, WINDOWS), r"^(['\"].*['\"])$", "the training windows", at_least=6)
    for (shown,) in found:
        window = ast.literal_eval(shown)  # a printed repr of a str
        require(len(window) == 32, f"32 characters: {window!r}")
        require(any(window[p : 2 * p] == window[:p] for p in range(4, 17)), f"a stretch said twice: {window!r}")


def cg_model(nb):
    text = output(nb, MODEL)
    require(text.count("AttentionOnlyBlock(") == 2 and "FeedForward" not in text, "two blocks of attention only")
    require(number(text, rf"^{FLOAT} parameters", "parameters") < 50_000, "a small model")


def _losses(nb) -> dict[str, dict[str, float]]:
    text = output(nb, LOSSES)
    found = {}
    for name in ("held-out text", "random characters"):
        pattern = (
            rf"^{name}: mean loss on characters 1..15 \(first copy\) {FLOAT}; on character 16 \(the repeat "
            rf"begins\) {FLOAT}; on characters 17..31 \(second copy\) {FLOAT}; highest on character (\d+)$"
        )
        match = re.search(pattern, text, re.M)
        require(match, f"the losses on {name}: {text}")
        first, start, second, highest = match.groups()
        found[name] = {"first": float(first), "start": float(start), "second": float(second), "highest": int(highest)}
    found["bets"] = {"hits": number(text, r"likeliest next character is character 0 in (\d+) of 64", "the bets")}
    return found


def cg_copying(nb):
    losses = _losses(nb)
    text, random = losses["held-out text"], losses["random characters"]
    require(2.2 < text["first"] < 2.8, f"the first copy of text: about a small character model's loss: {text}")
    require(math.log(65) < random["first"] < math.log(65) + 0.5, f"random first copy: a little above ln 65: {random}")
    require(text["second"] < text["first"] / 2 and random["second"] < random["first"] / 2, f"far below: {losses}")


def cg_repeat_start(nb):
    losses = _losses(nb)
    text, random = losses["held-out text"], losses["random characters"]
    require(text["highest"] == 16 and text["start"] > text["first"], f"character 16 the hardest of the text: {text}")
    require(random["start"] < random["first"], f"on random characters character 16 costs less: {random}")
    hits = losses["bets"]["hits"]
    require(14 <= hits <= 30, f"character 0 the likeliest in about a third of 64 sequences: {hits}")


def _scores(nb) -> tuple[dict, str]:
    text = output(nb, SCORES)
    return _table(text, "the heads' scores"), text


def cg_heads(nb):
    table, text = _scores(nb)
    even_prev = number(text, rf"scores {FLOAT} \(previous token\)", "an even head's previous-token score")
    even_ind = number(text, rf"and {FLOAT} \(induction\)", "an even head's induction score")
    best_prev = max(v[1] for (layer, _), v in table.items() if layer == 0)
    induction = sorted((v[2] for (layer, _), v in table.items() if layer == 1), reverse=True)
    require(best_prev > 0.5 and best_prev > 4 * even_prev, f"a previous-token head in layer 0: {best_prev}")
    require(induction[1] > 0.5 and induction[1] > 10 * even_ind, f"two induction heads in layer 1: {induction}")
    selfish = [v[0] for (layer, _), v in table.items() if layer == 0 and v[0] > 0.5]
    require(len(selfish) == 2, f"two heads of layer 0 look mostly at the query's own position: {table}")
    shown = number(text, rf"strongest induction head of layer 1: head \d, score {FLOAT}", "the strongest")
    require(math.isclose(shown, induction[0], abs_tol=1e-3), "the strongest induction head is the one named")
    shown = number(text, rf"strongest previous-token head of layer 0: head \d, score {FLOAT}", "the strongest")
    require(math.isclose(shown, best_prev, abs_tol=1e-3), "the strongest previous-token head is the one named")


def _ablation(nb) -> dict[str, float]:
    text = output(nb, ABLATION)
    named = {}
    for name in ("previous-token head", "induction head", "head of layer 0 that reads its own position"):
        named[name] = number(text, rf"the {name} \(layer \d, head \d\) ablated: {FLOAT} \(zero\), ", name)
        named[name + " (mean)"] = number(
            text, rf"the {name} \(layer \d, head \d\) ablated: \S+ \(zero\), {FLOAT}", name
        )
    named["baseline"] = number(text, rf"second-copy loss of the whole model: {FLOAT};", "the whole model")
    named["others"] = number(text, rf"any other head ablated: at most {FLOAT} \(mean\)", "the other heads")
    return named


def cg_ablation(nb):
    a = _ablation(nb)
    mechanism = [a[k + " (mean)"] for k in ("previous-token head", "induction head",
                                            "head of layer 0 that reads its own position")]  # fmt: skip
    require(min(mechanism) > a["others"] > a["baseline"], f"the three heads cost the most: {a}")
    require(a["induction head (mean)"] < min(mechanism[0], mechanism[2]),
            f"losing one induction head costs less than losing what both depend on: {a}")  # fmt: skip


def _composition(nb) -> tuple[str, dict[str, dict[str, float]]]:
    text = output(nb, COMPOSITION)
    header = re.search(r"^\s+none\s+(L0 head 0)\s+(L0 head 1)\s+(L0 head 2)\s+(L0 head 3)\s*$", text, re.M)
    require(header, f"the composition table's header: {text}")
    table = {}
    for head, *values in rows(text, r"^L1 head (\d)\s+" + r"\s+".join([FLOAT] * 5) + r"\s*$", "the table", 4):
        table[int(head)] = dict(zip(["none", 0, 1, 2, 3], (float(v) for v in values), strict=True))
    return text, table


def cg_composition(nb):
    text, table = _composition(nb)
    prev = int(re.search(r"previous-token head of layer 0: head (\d)", output(nb, SCORES)).group(1))
    scores = _table(output(nb, SCORES), "the heads' scores")
    own = max((h for (layer, h) in scores if layer == 0), key=lambda h: scores[(0, h)][0])
    inductive = [h for h, row in table.items() if row["none"] > 0.5]
    require(len(inductive) == 2, f"two induction heads: {table}")
    for h in inductive:
        row = table[h]
        require(row[prev] < 0.2 and row[own] < 0.2, f"without either head the score collapses: {row}")
        others = [row[k] for k in (0, 1, 2, 3) if k not in (prev, own)]
        require(all(abs(v - row["none"]) <= 0.15 for v in others), f"the other two change it by 0.1 or so: {row}")
    quoted = number(text, rf"the induction head's score: {FLOAT} as trained", "the induction head as trained")
    require(quoted > 0.5, f"as trained: {quoted}")


def _history(nb) -> tuple[str, dict[int, tuple[float, ...]]]:
    text = output(nb, PHASE)
    found = rows(text, r"^(\d+)\s+" + r"\s+".join([FLOAT] * 5) + r"\s*$", "the checkpoints", at_least=10)
    return text, {int(step): tuple(float(v) for v in values) for step, *values in found}


def cg_phase_change(nb):
    text, history = _history(nb)
    marks = re.search(r"at steps \[(\d+), (\d+), (\d+)\]", text)
    require(marks, f"the 20/50/80 % steps: {text}")
    low, half, high = (int(m) for m in marks.groups())
    require(high - low <= 500, f"within a few hundred steps: {low}..{high}")
    require(half > 1000, f"after the first thousand steps: {half}")
    induction, previous, first, second, in_context = zip(*(history[s] for s in sorted(history)), strict=True)
    early = [history[s] for s in sorted(history) if s <= 1000]
    require(all(v[0] < 0.1 for v in early), f"the induction score stays near its start: {early}")
    require(2.3 < history[1000][2] < 2.7 and -0.5 < history[1000][4] < 0, f"at step 1,000: {history[1000]}")
    require(in_context[-1] < -1.5 and previous[-1] > 0.5, f"the in-context loss drops, the head sharpens: {history}")


def cg_bump(nb):
    _, history = _history(nb)
    require(math.isclose(history[1200][2], 2.49, abs_tol=0.1), f"2.49 at step 1,200: {history[1200]}")
    require(math.isclose(history[1400][2], 2.77, abs_tol=0.1), f"2.77 at step 1,400: {history[1400]}")
    last = history[max(history)][2]
    require(history[1200][2] < last < history[1400][2], f"back only part of the way: {last}")


def cg_char_gpt(nb):
    text = output(nb, CHAR_GPT)
    table = _table(text, "lesson 09's GPT's scores")
    previous = [v[1] for (layer, _), v in table.items() if layer == 0]
    induction = [v[2] for (layer, _), v in table.items() if layer == 1]
    require(all(0.2 < p < 0.45 for p in previous), f"every head of layer 0: about a third: {previous}")
    require(all(v < 0.06 for v in induction), f"no induction head (an even head scores 0.042): {induction}")
    first = number(text, rf"first copy {FLOAT},", "its first copy")
    second = number(text, rf"second copy {FLOAT}$", "its second copy")
    require(second >= first, f"the second copy is not lower: {first} vs {second}")


def cg_gpt2_offline(nb):
    text = output(nb, GPT2)
    require("GPT-2 small not loaded:" in text or "heads with an induction score above 0.3" in text, text)


CLAIMS = [
    Claim(
        "each window's first `period` characters are said twice (periods 4 to 16), 32 characters",
        cg_windows,
        [Break(SHOWN, WINDOWS, r"^'(.)(.)", r"'\g<2>\g<1>")],
    ),
    Claim(
        "two blocks of attention only (no feed-forward), a small model",
        cg_model,
        [Break(MARGIN, MODEL, r"^[\d,]+(?= parameters)", "139,872")],
    ),
    Claim(
        "first copy of text about a small model's loss; random first copy a little above ln 65; second copies low",
        cg_copying,
        [
            Break(MARGIN, LOSSES, r"(held-out text: .*\(second copy\) )\S+;", r"\g<1>1.900;"),
            Break(MARGIN, LOSSES, r"(random characters: .*\(first copy\) )\S+;", r"\g<1>3.900;"),
        ],
    ),
    Claim(
        "character 16 is the hardest of the text window; on random characters it costs less, character 0 a third",
        cg_repeat_start,
        [
            Break(EXACT, LOSSES, r"(held-out text: .*highest on character )\d+", r"\g<1>3"),
            Break(ORDER, LOSSES, r"(random characters: .*\(the repeat begins\) )\S+;", r"\g<1>4.800;"),
            Break(MARGIN, LOSSES, r"(character 0 in )\d+", r"\g<1>2"),
        ],
    ),
    Claim(
        "a previous-token head in layer 0, two induction heads in layer 1, two layer-0 heads reading themselves",
        cg_heads,
        [
            Break(TABLE, SCORES, r"^(1\s+0\s+\S+\s+\S+\s+)\S+", r"\g<1>0.040"),
            Break(TABLE, SCORES, r"^(0\s+0\s+)\S+", r"\g<1>0.200"),
            Break(MARGIN, SCORES, r"(strongest previous-token head of layer 0: head \d, score )\S+", r"\g<1>0.300"),
        ],
    ),
    Claim(
        "the three heads of the mechanism cost the most; one induction head less than what both depend on",
        cg_ablation,
        [
            Break(ORDER, ABLATION, r"(any other head ablated: at most )\S+", r"\g<1>2.950"),
            Break(
                ORDER, ABLATION, r"(the induction head \(layer \d, head \d\) ablated: \S+ \(zero\), )\S+", r"\g<1>2.990"
            ),
        ],
    ),
    Claim(
        "without the previous-token head (or the self-reading head) the induction scores collapse; others move ~0.1",
        cg_composition,
        [
            Break(TABLE, COMPOSITION, r"^(L1 head 0\s+\S+\s+\S+\s+\S+\s+)\S+", r"\g<1>0.700"),
            Break(TABLE, COMPOSITION, r"^(L1 head 1\s+\S+\s+\S+\s+)\S+", r"\g<1>0.300"),
        ],
    ),
    Claim(
        "flat for a thousand steps, then the induction score rises within a few hundred steps, in-context falls",
        cg_phase_change,
        [
            Break(MARGIN, PHASE, r"at steps \[\d+, (\d+), \d+\]", "at steps [400, 1350, 1400]"),
            Break(MARGIN, PHASE, r"^(800\s+)\S+", r"\g<1>0.400"),
        ],
    ),
    Claim(
        "the first-copy loss goes up while the heads form (2.49 at step 1,200 to 2.77 at 1,400), back part of the way",
        cg_bump,
        [Break(MARGIN, PHASE, r"^(1400\s+\S+\s+\S+\s+)\S+", r"\g<1>2.480")],
    ),
    Claim(
        "lesson 09's GPT: previous-character heads (a third) but no induction head; the second copy no cheaper",
        cg_char_gpt,
        [
            Break(TABLE, CHAR_GPT, r"^(1\s+0\s+\S+\s+\S+\s+)\S+", r"\g<1>0.400"),
            Break(ORDER, CHAR_GPT, r"(second copy )\S+$", r"\g<1>0.500"),
        ],
    ),
    Claim(
        "offline, GPT-2's branch says it skipped and why",
        cg_gpt2_offline,
        [Break(SHOWN, GPT2, r"GPT-2 small not loaded:", "GPT-2 small:")],
    ),
]
