"""Claims of lesson 03_position_encoding: what its text says its code cells show."""

from __future__ import annotations

import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, close, literal, number, output, require, rising, rows

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

SENTENCES = "dog_bites_man = attend("
ALONE = 'print(f"attention alone: {'
HANDS = "one turn every"
HEATMAP = "position_encoding_heatmap(pe, title="
BOUNDED = "row lengths between"
DISTINCT = "distances.fill_diagonal_"
OFFSET = "M = offset_matrix(k, 64)"
CURVES = "mean_curve = ref.offset_dot_products"
BUFFER = "module = ref.PositionEncoding(d_model=16, max_len=10)"
ADDED = "positions added, then attention"
LEARNED = "learned = ref.LearnedPositionEmbedding"
LONGER = "learned(torch.zeros(1, 101, 64))"
LENGTHS_KEPT = "lengths kept"
SPREAD = "def diagonal_spread("
LAYOUTS = "interleave = torch.stack("


def pos_equivariance(nb):
    text = output(nb, SENTENCES)
    require(
        "'dog' gets the same output in both sentences: True" in text
        and "the second output is the first one reordered: True" in text,
        f"not equivariant:\n{text}",
    )
    error = number(output(nb, ALONE), rf"attention alone: {FLOAT}", "error")
    require(error < 1e-5, f"'the difference is rounding error', but it is {error}")


def pos_clock_hands(nb):
    pairs = rows(
        output(nb, HANDS),
        rf"^pair (\d+): .*?\s{FLOAT} rad per position, one turn every\s+{FLOAT}",
        "clock hands",
        8,
    )
    speeds, turns = [float(s) for _, s, _ in pairs], [float(t) for _, _, t in pairs]
    require(close(speeds[0], 1.0, 1e-4) and close(turns[0], 2 * math.pi, 0.06), f"first hand: {pairs[0]}")
    require(rising(turns), f"hands do not get slower: {turns}")
    require(close(turns[-1], 19_869, 1), f"the text says the last hand (d = 16) turns every 19,869 positions: {turns}")


def pos_heatmap_columns(nb):
    text = output(nb, HEATMAP)
    low, high = (number(text, p, "channel 0") for p in (rf"channel 0 .*?: {FLOAT} to", rf"channel 0 .*? to {FLOAT};"))
    sin = number(text, rf"sin at most {FLOAT}", "slowest sin")
    cos = number(text, rf"cos at least {FLOAT}", "slowest cos")
    require(low < -0.95 and high > 0.95, f"channel 0 should swing between −1 and 1: {low} to {high}")
    require(sin < 0.05 and cos > 0.99, f"the last columns should hardly change (sin ≈ 0, cos ≈ 1): {sin}, {cos}")


def pos_bounded(nb):
    text = output(nb, BOUNDED)
    low, high = number(text, rf"values between {FLOAT}", "min"), number(text, rf"values between \S+ and {FLOAT}", "max")
    require(low >= -1.0005 and high <= 1.0005, f"values outside [−1, 1]: {low} to {high}")
    shortest, longest, root = (
        number(text, p, "lengths")
        for p in (rf"row lengths between {FLOAT}", rf"row lengths between \S+ and {FLOAT}", rf"sqrt\(d/2\) = {FLOAT}")
    )
    require(
        close(shortest, root, 1e-3) and close(longest, root, 1e-3),
        f"row lengths {shortest}..{longest}, √(d/2) = {root}",
    )


def pos_distinct(nb):
    smallest = number(output(nb, DISTINCT), rf"positions: {FLOAT}", "smallest distance")
    require(smallest > 0.1, f"the closest rows are {smallest} apart: not far from rounding error")


def pos_offset_matrix(nb):
    error = number(output(nb, OFFSET), rf"over all p: {FLOAT}", "rotation error")
    require(error < 1e-5, f"PE[p + k] differs from M_k PE[p] by {error}")


def pos_offset_curves(nb):
    text = output(nb, CURVES)
    at_zero = number(text, rf"offset 0: {FLOAT}", "offset 0")
    lowest = number(text, rf"lowest: {FLOAT}", "lowest")
    at_end = number(text, rf"offset 60: {FLOAT}", "offset 60")
    gap = number(text, rf"between the curves: {FLOAT}", "gap")
    asymmetry = number(text, rf"\|f\(k\) - f\(-k\)\|: {FLOAT}", "asymmetry")
    require(close(at_zero, 32, 0.01), f"largest at offset 0 should be d/2 = 32, got {at_zero}")
    require(1 < lowest < at_zero, f"falls off but 'not to zero': lowest {lowest}")
    require(
        at_end > lowest + 0.5,
        f"'not smoothly': the curve should rise again after its lowest point ({lowest}), but offset 60 gives {at_end}",
    )
    require(
        gap < 1e-3 and asymmetry < 1e-3,
        f"curves apart by {gap}, asymmetry {asymmetry}: not on top of each other or not symmetric",
    )


def pos_buffer(nb):
    text = output(nb, BUFFER)
    for shown in ("state dict: ['pe']   parameters: []", "pe follows the module: torch.float64", "ValueError: "):
        require(shown in text, f"expected {shown!r} in:\n{text}")


def pos_positions_break_symmetry(nb):
    text = output(nb, ADDED)
    alone = number(text, rf"attention alone:\s+{FLOAT}", "without positions")
    added = number(text, rf"positions added, then attention:\s+{FLOAT}", "with positions")
    require(added > 1e-2 and added > 1000 * alone, f"positions do not break the symmetry: {alone} vs {added}")
    require("'dog' gets the same output in both sentences: False" in text, f"'dog' still gets the same output:\n{text}")


def pos_learned(nb):
    text = output(nb, LEARNED)
    require(number(text, rf"trainable parameters: {FLOAT}", "parameters") == 6_400, f"not 100 x 64 parameters:\n{text}")
    text = output(nb, LONGER)
    require(
        re.search(r"^learned table: .*max_len", text, re.M) and "101 positions: (101, 64)" in text,
        f"the learned table should refuse 101 positions and the formula give them:\n{text}",
    )


def pos_rope(nb):
    require("lengths kept: True" in output(nb, LENGTHS_KEPT), "RoPE changed the lengths")
    text = output(nb, SPREAD)
    rotary = number(text, rf"RoPE:\s+spread along the diagonals {FLOAT}", "RoPE spread")
    added = number(text, rf"sinusoidal, added:\s+spread along the diagonals {FLOAT}", "additive spread")
    require(rotary < 1e-4 and added > 0.1, f"RoPE spread {rotary} (should be rounding), additive {added} (should not)")


def pos_layouts(nb):
    text = output(nb, LAYOUTS)
    require(literal(text, r"channel order: (\[.*\])", "order") == [0, 4, 1, 5, 2, 6, 3, 7], f"channel order:\n{text}")
    require(
        re.search(r"same layout:\s+False", text) and re.search(r"after reordering:\s+True", text),
        f"the two layouts should differ, and agree after reordering:\n{text}",
    )


CLAIMS = [
    Claim(
        "'dog' gets the same output in both sentences ... The difference is rounding error",
        pos_equivariance,
        [
            Break(SHOWN, SENTENCES, r"(?<=in both sentences: )True", "False"),
            Break(MARGIN, ALONE, r"(?<=attention alone: )\S+", "3.0e-02"),
        ],
    ),
    Claim(
        "The first hand turns by one radian per position and goes round every 2π ≈ 6.3 positions; each following "
        "hand is slower; for d = 16, the last turns every 19,869 positions",
        pos_clock_hands,
        [
            Break(MARGIN, HANDS, r"^(pair 0: .* every\s+)\S+", r"\g<1>7.3"),
            Break(ORDER, HANDS, r"^(pair 3: .* every\s+)\S+", r"\g<1>50.0"),
            Break(MARGIN, HANDS, r"^(pair 7: .* every\s+)\S+", r"\g<1>19000.0"),
        ],
    ),
    Claim(
        "The left columns flip between −1 and 1; the last columns hardly change over 100 positions (sin ≈ 0, cos ≈ 1)",
        pos_heatmap_columns,
        [
            Break(MARGIN, HEATMAP, r"(?<=channel 0 \(fastest hand\): )\S+", "-0.50"),
            Break(MARGIN, HEATMAP, r"(?<=sin at most )\S+", "0.300,"),
        ],
    ),
    Claim(
        "Every value lies in [−1, 1], every row has the same length √(d/2)",
        pos_bounded,
        [
            Break(MARGIN, BOUNDED, r"(values between \S+ and )\S+", r"\g<1>1.200"),
            Break(MARGIN, BOUNDED, r"(row lengths between \S+ and )\S+", r"\g<1>6.0000;"),
        ],
    ),
    Claim(
        "The two closest rows ... are still far apart compared with rounding error",
        pos_distinct,
        [Break(MARGIN, DISTINCT, r"(?<=positions: )\S+", "0.002")],
    ),
    Claim(
        "PE[p + k] = M_k PE[p] for every p",
        pos_offset_matrix,
        [Break(MARGIN, OFFSET, r"(?<=over all p: )\S+", "6.7e-02")],
    ),
    Claim(
        "largest at offset 0 (d/2 = 32), symmetric, falls off — not smoothly and not to zero; the curves from "
        "three positions lie on top of each other",
        pos_offset_curves,
        [
            Break(MARGIN, CURVES, r"(?<=offset 0: )\S+", "30.00"),
            Break(MARGIN, CURVES, r"(?<=lowest: )\S+", "0.50"),
            Break(ORDER, CURVES, r"(lowest: (\S+) .*offset 60: )\S+", r"\g<1>\g<2>"),  # no rise after the lowest
            Break(MARGIN, CURVES, r"(?<=between the curves: )[^;]+", "5.7e-02"),
        ],
    ),
    Claim(
        "the table is in the state dict but not among the parameters, follows the module, a too-long input is refused",
        pos_buffer,
        [
            Break(SHOWN, BUFFER, r"parameters: \[\]", "parameters: ['pe']"),
            Break(SHOWN, BUFFER, r"^ValueError: ", "ok: "),
        ],
    ),
    Claim(
        "Adding the positions before attention breaks the permutation symmetry, and dog gets a different output",
        pos_positions_break_symmetry,
        [
            Break(MARGIN, ADDED, r"(positions added, then attention:\s+)\S+", r"\g<1>3.6e-05"),
            Break(SHOWN, ADDED, r"(?<=in both sentences: )False", "True"),
        ],
    ),
    Claim(
        "100 positions x 64 parameters; learned positions cannot be run on a longer input, the formula can",
        pos_learned,
        [
            Break(EXACT, LEARNED, r"(?<=trainable parameters: )[\d,]+", "6,464"),
            Break(SHOWN, LONGER, r"^learned table: .*", "learned table: (101, 64)"),
        ],
    ),
    Claim(
        "Rotations keep lengths; the RoPE matrix is constant along its diagonals, the additive one is not",
        pos_rope,
        [
            Break(SHOWN, LENGTHS_KEPT, r"(?<=lengths kept: )True", "False"),
            Break(MARGIN, SPREAD, r"(RoPE:\s+spread along the diagonals )\S+", r"\g<1>2.4e-02"),
            Break(MARGIN, SPREAD, r"(added:\s+spread along the diagonals )\S+", r"\g<1>0.05"),
        ],
    ),
    Claim(
        "reorder them as [0, D/2, 1, D/2 + 1, …] and the two agree",
        pos_layouts,
        [
            Break(EXACT, LAYOUTS, r"(?<=channel order: )\[.*\]", "[0, 1, 2, 3, 4, 5, 6, 7]"),
            Break(SHOWN, LAYOUTS, r"(after reordering:\s+)True", r"\g<1>False"),
        ],
    ),
]
