"""Claims of lesson 04_attention: what its text says its code cells show."""

from __future__ import annotations

from tests.claims.common import (
    FLOAT,
    Break,
    Claim,
    Family,
    close,
    falling,
    literal,
    number,
    output,
    require,
    rising,
    rows,
    tensors,
)

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

JOURNEY = "weights = [e / sum(exps)"
ALL_WEIGHTS = "all_weights = torch.softmax(all_scores"
BY_HAND = "context vector of 'journey'"
AGAIN = "ref.simple_self_attention(x)[1]"
VARIANCE = "var(q·k / sqrt(d_k))"
SATURATION = "softmax_statistics(raw / math.sqrt(d_k))"
PYTORCH = "theirs = F.scaled_dot_product_attention"
TWO_WAYS = "renormalised = zeroed"
CAUSAL = "print(ref.causal_mask(4))"
PADDING = "largest weight on a <pad> key"
BOTH = "both = ref.causal_mask(T) & key_padding"
DROPOUT = "dropping.train()"
MODULE = "causal_attention = ref.CausalSelfAttention"
CROSS = "cross = ref.CrossAttention("
SWAPPED = "swapped = cross.W_key(memory)"
COUNTS = "shakespeare_counts = Counter("
VILLAGE = "mixed = ref.simple_self_attention(vectors)"
AND = "urban = ["
SYMMETRY = 'print("x xᵀ is symmetric:"'
UNTRAINED_MODULE = "self_attention = ref.SelfAttention(d_in=3, d_out=2)"
BATCH = "largest change of the first sequence's output"
TOY_UNTRAINED = "_, untrained = model(probe"
TRAINING = "losses = toys.train_toy(model"
ONE_STEP = "optimizer_class(fresh.parameters(), lr=0.01)"
SGD = "sgd_model = toys.build_toy("
TRAINED = "_, trained = model(probe"
QK_OV = "position_scores = layer.W_query(P)"
TIED = "tied_scores = shared @ shared"


def att_journey_weights(nb):
    found = rows(output(nb, JOURNEY), rf"^weight of (\w+)\s+{FLOAT}$", "weights", 6)
    ranked = [token for token, _ in sorted(found, key=lambda item: float(item[1]), reverse=True)]
    require(set(ranked[:3]) == {"journey", "step", "starts"}, f"the three largest weights are {ranked[:3]}")
    require(set(ranked[-2:]) == {"Your", "with"}, f"the two smallest weights are {ranked[-2:]}")


def att_rows_sum_to_one(nb):
    text = output(nb, ALL_WEIGHTS)
    require(all(close(s, 1, 1e-3) for s in tensors(text)[0]), f"rows do not sum to 1:\n{text}")
    require("row 'journey' as computed by hand? True" in text, f"vectorised row differs:\n{text}")
    by_hand = literal(output(nb, BY_HAND), r"journey': (\[.*\])", "by hand")
    again = tensors(output(nb, AGAIN))[0]
    require(all(close(a, b, 2e-3) for a, b in zip(by_hand, again, strict=True)), f"{again} is not {by_hand} again")


def _table(nb, marker, columns, what):
    pattern = r"^\s*(\d+)" + r"\s*\|?\s+([\d.]+)" * columns + r"\s*$"
    return [[float(v) for v in row] for row in rows(output(nb, marker), pattern, what, 5)]


def att_variance(nb):
    table = _table(nb, VARIANCE, 2, "variance table")
    for d_k, raw, scaled in table:
        require(close(raw / d_k, 1, 0.15), f"var(q·k) = {raw} at d_k = {d_k:.0f}: not about d_k")
        require(close(scaled, 1, 0.15), f"scaled variance {scaled} at d_k = {d_k:.0f}: not near 1")


def att_saturation(nb):
    table = _table(nb, SATURATION, 4, "softmax table")
    top_raw, top_scaled, grad_raw, grad_scaled = ([row[i] for row in table] for i in (1, 2, 3, 4))
    require(
        rising(top_raw) and top_raw[-1] > 0.9,
        f"unscaled rows should turn one-hot as d_k grows: {top_raw}",
    )
    require(
        falling(grad_raw) and grad_raw[-1] < grad_raw[0] / 4,
        f"the unscaled gradient should almost vanish: {grad_raw}",
    )
    for name, values in (("largest weight", top_scaled), ("gradient", grad_scaled)):
        require(max(values) <= 1.2 * min(values), f"scaled {name} should keep its size: {values}")


def att_matches_pytorch(nb):
    text = output(nb, PYTORCH)
    require(number(text, rf"largest difference from PyTorch: {FLOAT}", "difference") < 1e-5, f"differs:\n{text}")
    require(tensors(text)[0] == [0.0] * 6, f"masked key 'with' should get weight exactly 0:\n{text}")


def att_two_ways(nb):
    text = output(nb, TWO_WAYS)
    weights, zeroed = tensors(text)[:2]
    for i, row in enumerate(weights):
        require(all(w == 0 for w in row[i + 1 :]) and close(sum(row), 1, 5e-3), f"row {i} of the causal weights: {row}")
    require(number(text, rf"between the two ways: {FLOAT}", "difference") < 1e-6, f"the two ways differ:\n{text}")
    require(
        all(s < 0.999 for s in zeroed[:-1]) and close(zeroed[-1], 1, 1e-3),
        f"zeroing without renormalising should leave rows below 1: {zeroed}",
    )


def att_causal_mask(nb):
    mask = tensors(output(nb, CAUSAL))[0]
    expected = [[j <= i for j in range(4)] for i in range(4)]
    require(mask == expected, f"causal mask is not True on and below the diagonal: {mask}")


def att_padding(nb):
    text = output(nb, PADDING)
    require(number(text, rf"on a <pad> key: {FLOAT}", "pad weight") == 0, f"<pad> columns are not all 0:\n{text}")
    real = tensors(text.split("per row:")[-1])[0]
    require(len(real) == 6 and all(close(s, 1, 1e-3) for s in real), f"rows should attend to the real tokens: {real}")


def att_padding_and_causal(nb):
    both = tensors(output(nb, BOTH))[0]
    expected = [[int(j <= i and j < 2) for j in range(6)] for i in range(6)]
    require(both == expected, f"'both in the past and real' should be {expected}, got {both}")


def att_dropout(nb):
    dropped, training, evaluation = tensors(output(nb, DROPOUT))[:3]
    require(
        dropped[0][0] in (0.0, 2.0) and all(w <= 2.0005 for row in dropped for w in row),
        f"surviving weights should be doubled: first row {dropped[0]}",
    )
    require(any(not close(s, 1, 1e-3) for s in training), f"training rows still sum to 1: {training}")
    require(all(close(s, 1, 1e-3) for s in evaluation), f"evaluation rows do not sum to 1: {evaluation}")


def att_causal_module(nb):
    text = output(nb, MODULE)
    require("state dict: ['W_query.weight', 'W_key.weight', 'W_value.weight']" in text, f"extra state:\n{text}")
    require("output for 4 tokens: (1, 4, 2)" in text and "ValueError:" in text, f"T handling:\n{text}")


def att_cross_shapes(nb):
    text = output(nb, CROSS)
    require("output (1, 3, 4) weights (1, 3, 6)" in text, f"not one row per decoder token:\n{text}")
    require(output(nb, SWAPPED).startswith("weights (1, 6, 3)"), "swapped roles: wrong shape")


def att_shakespeare_counts(nb):
    text = output(nb, COUNTS)
    counts = {w: int(n) for w, n in rows(text, r"^(\w+)\s+appears\s+(\d+) times", "counts", 5)}
    require(counts["cows"] == 0 and counts["huts"] == 0 and counts["village"] == 1, f"counts: {counts}")


def _village(nb):
    text = output(nb, VILLAGE)
    return {
        label: (
            number(text, rf"^{label}\s+cosine to village: {FLOAT}", label),
            number(text, rf"^{label}\s+cosine to village: \S+\s+to city: {FLOAT}", label),
        )
        for label in ("attention mix", "plain average")
    }


def att_village(nb):
    village, city = _village(nb)["attention mix"]
    require(village > city + 0.3, f"the mix is not far closer to village ({village}) than to city ({city})")


def att_plain_average(nb):
    (mix_v, mix_c), (avg_v, avg_c) = _village(nb)["attention mix"], _village(nb)["plain average"]
    require(
        close(mix_v, avg_v, 0.1) and close(mix_c, avg_c, 0.1),
        f"plain average ({avg_v}, {avg_c}) is not close to the mix ({mix_v}, {mix_c})",
    )


def att_and_moves(nb):
    text = output(nb, AND)
    found = {
        (when, where): (float(v), float(c))
        for when, where, v, c in rows(
            text, rf"^(before|after) attention in (\w+)\.\.\.\w+\s+{FLOAT}\s+{FLOAT}$", "'and' rows", 4
        )
    }
    (bv, bc), (rv, rc), (uv, uc) = found["before", "cows"], found["after", "cows"], found["after", "cars"]
    require(found["before", "cars"] == (bv, bc), f"'and' before attention differs between the phrases: {found}")
    require(close(bv, bc, 0.1), f"'and' alone should be of both worlds: village {bv}, city {bc}")
    require(rv - rc > bv - bc + 0.05, f"in the rural phrase 'and' should move toward village: {found}")
    require(uc - uv > bc - bv + 0.05, f"in the urban phrase 'and' should move toward city: {found}")


def att_symmetric_and_self(nb):
    text = output(nb, SYMMETRY)
    require("x xᵀ is symmetric: True" in text, f"x xᵀ should be symmetric:\n{text}")
    ours = number(text, r"itself in (\d+) of 6 rows", "six tokens")
    require(2 <= ours <= 5, f"with the six tokens, self-preference should be a tendency, not a rule: {ours} of 6")
    require(number(text, r"width 64: the token itself in (\d+) of 32", "wide") == 32, f"wide vectors:\n{text}")
    require("with separate W_q and W_k: symmetric? False" in text, f"separate projections symmetric?\n{text}")
    require(number(text, r"symmetric\? \w+; the token itself in (\d+) of 32", "separate") <= 3, f"separate:\n{text}")


def att_causal_rows(nb):
    text = output(nb, CAUSAL)
    first, last = (tensors(text.split(f"row of '{word}':")[1])[0] for word in ("Your", "step"))
    require(first == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0], f"'Your' should put its whole weight on itself: {first}")
    require(all(w > 0.05 for w in last) and close(sum(last), 1, 5e-3), f"'step' should see all six tokens: {last}")


def att_untrained_module(nb):
    text = output(nb, UNTRAINED_MODULE)
    low = number(text, rf"weights range from {FLOAT}", "low")
    high = number(text, rf"weights range from \S+ to {FLOAT}", "high")
    require(0.12 < low <= high < 0.22, f"untrained weights should be almost uniform (1/6): {low} to {high}")


def att_batch_independent(nb):
    text = output(nb, BATCH)
    first = number(text, rf"first sequence's output: {FLOAT}", "first")
    second = number(text, rf"second sequence's output: {FLOAT}", "second")
    require(first < 1e-6 and second > 0.1, f"only the changed sequence's output should move: {first}, {second}")


def att_toy_untrained(nb):
    text = output(nb, TOY_UNTRAINED)
    high = number(text, rf"untrained weights: from \S+ to {FLOAT}", "high")
    mirror = number(text, rf"weight on the mirrored position: {FLOAT}", "mirror")
    require(high > 0.5, f"the untrained toy's weights should range widely, up to {high}")
    require(0.06 < mirror < 0.2, f"untrained weight on the mirror should be about chance (1/8), got {mirror}")


def att_training(nb):
    text = output(nb, TRAINING)
    first = number(text, rf"first step: {FLOAT}", "first loss")
    last = number(text, rf"last step: {FLOAT}", "last loss")
    accuracy = number(text, rf"new sequences: {FLOAT}", "accuracy")
    require(close(first, 2.079, 0.15), f"the first loss should be about ln 8 = 2.079, got {first}")
    require(last < first / 100, f"the loss should fall by orders of magnitude: {first} -> {last}")
    require(accuracy >= 0.99, f"the trained model should reverse new sequences: accuracy {accuracy}")


def _one_step(nb) -> dict[str, tuple[float, ...]]:
    found = rows(
        output(nb, ONE_STEP),
        rf"^(SGD|Adam)\s*: {FLOAT} weights, \|gradient\| from {FLOAT} to {FLOAT}; "
        rf"each weight moved by {FLOAT} to {FLOAT}$",
        "one step of each optimizer",
        2,
    )
    return {name: tuple(float(v.replace(",", "")) for v in values) for name, *values in found}


def att_adam_first_step(nb):
    steps = _one_step(nb)
    n, low, high, sgd_min, sgd_max = steps["SGD"]
    require(n == 1160, f"the text says 1,160 weights: {n}")
    require(high / low >= 1e4, f"the text says the gradients range over four orders of magnitude: {low} to {high}")
    require(
        close(sgd_min, 0.01 * low, 0.3 * 0.01 * low) and close(sgd_max, 0.01 * high, 0.02 * 0.01 * high),
        f"SGD should move each weight by lr × |gradient|: {sgd_min} to {sgd_max} for gradients {low} to {high}",
    )
    require(sgd_min < 1e-7 and 5e-4 < sgd_max < 1e-3, f"the text says about 4·10⁻⁸ to 7·10⁻⁴: {sgd_min}, {sgd_max}")
    *_, adam_min, adam_max = steps["Adam"]
    require(
        0.01 * 0.997 <= adam_min <= adam_max <= 0.01 * 1.003,
        f"Adam should move every weight by lr = 0.01 to within 0.3 %: {adam_min} to {adam_max}",
    )


def att_sgd_comparison(nb):
    text = output(nb, SGD)
    found = {
        (name, float(lr)): (float(loss), float(acc))
        for name, lr, loss, acc in rows(
            text, rf"^(SGD|Adam),\s+lr = {FLOAT}\s*: loss of the last step {FLOAT}; accuracy {FLOAT}$", "runs", 3
        )
    }
    slow, fast, adam = found[("SGD", 0.01)], found[("SGD", 1.0)], found[("Adam", 0.01)]
    require(close(slow[0], 2.079, 0.15), f"at lr 0.01 SGD's loss should still be close to ln 8 = 2.079: {slow[0]}")
    require(fast[0] < 0.01 and fast[1] >= 0.99, f"at lr 1.0 SGD should learn the task too: {fast}")
    require(adam[0] < 0.01 and adam[1] >= 0.99, f"Adam at lr 0.01 learned the task: {adam}")


def att_trained_mirror(nb):
    share = number(output(nb, TRAINED), rf"weight on the mirrored position: {FLOAT}", "mirror")
    require(share > 0.95, f"row t should put almost all its weight on 7 - t: {share}")


def att_qk_ov(nb):
    text = output(nb, QK_OV)
    require(number(text, r"mirrored position in (\d+) of 8", "QK rows") == 8, f"QK position part:\n{text}")
    position = number(text, rf"position part: {FLOAT};", "position spread")
    token = number(text, rf"of the token part: {FLOAT}", "token spread")
    require(position > 3 * token, f"the position part ({position}) should be far larger than the token part ({token})")
    require(number(text, r"itself for (\d+) of 8 tokens", "OV") == 8, f"OV should copy every token:\n{text}")


def att_tied(nb):
    text = output(nb, TIED)
    found = number(text, r"largest score in ([\d,]+) of", "rows picking themselves")
    total = number(text, r"largest score in \S+ of ([\d,]+) rows", "rows")
    require(found == total, f"with one matrix, every position should pick itself: {found} of {total}")


CLAIMS = [
    Claim(
        "journey gave most weight to itself and to step and starts, and little to Your and with",
        att_journey_weights,
        [
            Break(ORDER, JOURNEY, r"(weight of one\s+)\S+", r"\g<1>0.250"),
            Break(ORDER, JOURNEY, r"(weight of with\s+)\S+", r"\g<1>0.180"),  # above one
        ],
    ),
    Claim(
        "every query's weights sum to 1; the vectorised row is the one computed by hand",
        att_rows_sum_to_one,
        [
            Break(TENSOR, ALL_WEIGHTS, r"(?<=row sums: tensor\(\[)[\d.]+", "0.900"),
            Break(SHOWN, ALL_WEIGHTS, r"(?<=as computed by hand\? )True", "False"),
            Break(TENSOR, AGAIN, r"(?<=tensor\(\[)[\d.]+", "0.123"),
        ],
    ),
    Claim(
        "its variance is d_k ... Divided by √d_k, the scores keep a variance near 1",
        att_variance,
        [
            Break(TABLE, VARIANCE, r"^(\s+64\s+)\S+", r"\g<1>120.0"),
            Break(TABLE, VARIANCE, r"^(\s+256\s+\S+\s+)\S+", r"\g<1>2.500"),
            Break(TABLE, VARIANCE, r"^\s+1024\s.*\n", ""),
        ],
    ),
    Claim(
        "the softmax saturates to an almost one-hot row and its gradient almost vanishes; scaled, the weights stay "
        "spread out and the gradient keeps its size",
        att_saturation,
        [
            Break(ORDER, SATURATION, r"^(\s+256 \|\s+)\S+", r"\g<1>0.700"),
            Break(ORDER, SATURATION, r"^(\s+1024 \|\s+\S+\s+\S+ \|\s+)\S+", r"\g<1>0.200"),
            Break(MARGIN, SATURATION, r"^(\s+1024 \|\s+\S+\s+)\S+", r"\g<1>0.600"),
            Break(MARGIN, SATURATION, r"^(\s+4 \|(?:\s+\S+){2} \|\s+\S+\s+)\S+", r"\g<1>0.100"),
        ],
    ),
    Claim(
        "The reference agrees with F.scaled_dot_product_attention; masked keys get weight exactly 0",
        att_matches_pytorch,
        [
            Break(MARGIN, PYTORCH, r"(?<=largest difference from PyTorch: )\S+", "0.01"),
            Break(TENSOR, PYTORCH, r"(?<=weight given to 'with': tensor\(\[)0\.", "0.001"),
        ],
    ),
    Claim(
        "the two ways give the same weights; zeroing after the softmax leaves rows that sum to less than 1",
        att_two_ways,
        [
            Break(TENSOR, TWO_WAYS, r"(?<=^tensor\(\[\[1\.000, )0\.000", "0.100"),
            Break(MARGIN, TWO_WAYS, r"(?<=between the two ways: )\S+", "5.9e-03"),
            Break(TENSOR, TWO_WAYS, r"(?<=only zero the weights: tensor\(\[)[\d.]+", "1.000"),
        ],
    ),
    Claim(
        "causal mask: True on and below the diagonal",
        att_causal_mask,
        [Break(TENSOR, CAUSAL, r"(?<=^tensor\(\[\[ True, )False", " True")],
    ),
    Claim(
        "The <pad> columns are all 0. The <pad> rows still attend to the real tokens",
        att_padding,
        [
            Break(MARGIN, PADDING, r"(?<=on a <pad> key: )\S+", "0.01"),
            Break(TENSOR, PADDING, r"(?<=per row: tensor\(\[)[\d.]+", "0.900"),
        ],
    ),
    Claim(
        "a key must be both in the past and real",
        att_padding_and_causal,
        [Break(TENSOR, BOTH, r"(?<=^tensor\(\[\[1, )0", "1")],
    ),
    Claim(
        "In training the surviving weights are doubled (p = 0.5) and rows no longer sum to 1; in evaluation they do",
        att_dropout,
        [
            Break(TENSOR, DROPOUT, r"(?<=^tensor\(\[\[)[\d.]+", "1.000"),
            Break(TENSOR, DROPOUT, r"(?<=row sums in training: )tensor\(.*\)", "tensor([1., 1., 1., 1., 1., 1.])"),
            Break(TENSOR, DROPOUT, r"(?<=row sums in evaluation: tensor\(\[)[\d.]+", "0.5"),
        ],
    ),
    Claim(
        "nothing else in the state dict (no persistent mask buffer); T > context_length raises",
        att_causal_module,
        [
            Break(SHOWN, MODULE, r"'W_value\.weight'\]", "'W_value.weight', 'mask']"),
            Break(SHOWN, MODULE, r"^ValueError: ", "ok: "),
        ],
    ),
    Claim(
        "cross-attention weights (Tq, Tk), one row per decoder token; swapped roles give the encoder's length",
        att_cross_shapes,
        [
            Break(SHOWN, CROSS, r"weights \(1, 3, 6\)", "weights (1, 6, 3)"),
            Break(SHOWN, SWAPPED, r"^weights \(1, 6, 3\)", "weights (1, 3, 6)"),
        ],
    ),
    Claim(
        "cows and huts never occur and village once",
        att_shakespeare_counts,
        [
            Break(EXACT, COUNTS, r"^(cows\s+appears\s+)\d+", r"\g<1>3"),
            Break(EXACT, COUNTS, r"^(village\s+appears\s+)\d+", r"\g<1>2"),
        ],
    ),
    Claim(
        "the attention mix of the phrase is far closer to village than to city",
        att_village,
        [Break(ORDER, VILLAGE, r"^(attention mix .*to city: )\S+", r"\g<1>0.800")],
    ),
    Claim(
        "the plain average of the five vectors is close to the attention mix",
        att_plain_average,
        [Break(MARGIN, VILLAGE, r"^(plain average\s+cosine to village: )\S+", r"\g<1>0.500")],
    ),
    Claim(
        "and: before attention the same vector, of both worlds; after it, toward village in the rural phrase and "
        "toward city in the urban one",
        att_and_moves,
        [
            Break(MARGIN, AND, r"^(before attention in cows\S+\s+)\S+", r"\g<1>0.600"),
            Break(EXACT, AND, r"^(before attention in cars\S+\s+)\S+", r"\g<1>0.300"),
            Break(ORDER, AND, r"^(after attention in cows\S+\s+)\S+", r"\g<1>0.250"),
            Break(ORDER, AND, r"^(after attention in cars\S+\s+\S+\s+)\S+", r"\g<1>0.250"),
        ],
    ),
    Claim(
        "x xᵀ is symmetric; a token favours itself: a tendency in three dimensions, the rule for wide vectors; "
        "separate W_q and W_k are neither symmetric nor self-favouring",
        att_symmetric_and_self,
        [
            Break(SHOWN, SYMMETRY, r"(?<=x xᵀ is symmetric: )True", "False"),
            Break(MARGIN, SYMMETRY, r"(?<=our six tokens: the largest score of a row is the token itself in )\d+", "6"),
            Break(EXACT, SYMMETRY, r"(?<=width 64: the token itself in )\d+", "20"),
            Break(SHOWN, SYMMETRY, r"(?<=separate W_q and W_k: symmetric\? )False", "True"),
            Break(MARGIN, SYMMETRY, r"(?<=; the token itself in )\d+", "30"),
        ],
    ),
    Claim(
        "Your puts its whole weight, 1, on itself; the last token sees all six",
        att_causal_rows,
        [
            Break(TENSOR, CAUSAL, r"(?<=row of 'Your': tensor\(\[)1\.", "0.5"),
            Break(TENSOR, CAUSAL, r"(?<=row of 'step': tensor\(\[)[\d.]+", "0.000"),
        ],
    ),
    Claim(
        "an untrained SelfAttention's weights are spread out, almost uniform",
        att_untrained_module,
        [
            Break(MARGIN, UNTRAINED_MODULE, r"(?<=weights range from )\S+", "0.020"),
            Break(MARGIN, UNTRAINED_MODULE, r"(?<=weights range from \S{5} to )\S+", "0.600"),
        ],
    ),
    Claim(
        "change the second sequence of a batch, and the first sequence's output does not move",
        att_batch_independent,
        [
            Break(MARGIN, BATCH, r"(?<=first sequence's output: )\S+", "0.05"),
            Break(MARGIN, BATCH, r"(?<=second sequence's output: )\S+", "0.0"),
        ],
    ),
    Claim(
        "the untrained toy's weights range widely, but its weight on the mirror is no more than chance, about 1/8",
        att_toy_untrained,
        [
            Break(MARGIN, TOY_UNTRAINED, r"(?<=untrained weights: from \S{5} to )\S+", "0.200"),
            Break(MARGIN, TOY_UNTRAINED, r"(?<=weight on the mirrored position: )\S+", "0.600"),
        ],
    ),
    Claim(
        "the first loss is about ln 8; the curve falls by orders of magnitude; it reverses new sequences",
        att_training,
        [
            Break(MARGIN, TRAINING, r"(?<=loss of the first step: )\S+", "3.500"),
            Break(MARGIN, TRAINING, r"(?<=loss of the last step: )\S+", "0.5000"),
            Break(MARGIN, TRAINING, r"(?<=new sequences: )\S+", "0.800"),
        ],
    ),
    Claim(
        "SGD moves each weight by lr × |gradient|, from about 4·10⁻⁸ to 7·10⁻⁴; Adam moves every one of the 1,160 "
        "weights by 0.01 = lr (to within 0.3 %); the gradients range over four orders of magnitude",
        att_adam_first_step,
        [
            Break(MARGIN, ONE_STEP, r"(?<=Adam: 1,160 weights, \|gradient\| from )(.*moved by )\S+", r"\g<1>4.47e-08"),
            Break(MARGIN, ONE_STEP, r"(?<=moved by )(4\.\d+e-08 to )7\.32e-04", r"\g<1>1.00e-02"),
            Break(EXACT, ONE_STEP, r"^SGD : 1,160", "SGD : 1,161"),
        ],
    ),
    Claim(
        "At Adam's learning rate SGD has hardly started (loss close to ln 8); 100 times larger it learns the task too",
        att_sgd_comparison,
        [
            Break(MARGIN, SGD, r"(?<=lr = 0\.01: loss of the last step )\S+", "0.5000;"),
            Break(
                MARGIN, SGD, r"(?<=lr = 1\.0 : loss of the last step )(\S+; accuracy )\S+", r"0.0013; accuracy 0.800"
            ),
        ],
    ),
    Claim(
        "row t puts almost all of its weight on column 7 - t",
        att_trained_mirror,
        [Break(MARGIN, TRAINED, r"(?<=weight on the mirrored position: )\S+", "0.500")],
    ),
    Claim(
        "QK learned where, by position only (the position part points at the mirror in every row and is far larger "
        "than the token part); OV learned what: copy the token",
        att_qk_ov,
        [
            Break(EXACT, QK_OV, r"(?<=mirrored position in )\d", "6"),
            Break(MARGIN, QK_OV, r"(?<=of the token part: )\S+", "3.00"),
            Break(EXACT, QK_OV, r"(?<=itself for )\d", "5"),
        ],
    ),
    Claim(
        "one matrix for queries and keys: every position would attend mostly to itself, the mirror loses in every row",
        att_tied,
        [Break(EXACT, TIED, r"(?<=largest score in )[\d,]+", "3,990")],
    ),
]
