"""Lesson 03: how the sinusoidal table is built (one sin/cos pair of channels per clock hand, each hand slower than
the last), and RoPE as the rotation of each channel pair by position × frequency.

The numbers in the pictures are computed with the course's own functions (course_lib.position);
tests/test_diagrams_position.py reads them back from the figures and checks them against the computation.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Arc, Rectangle

from course_lib.diagrams.draw import COLOURS, FONT, INK
from course_lib.position import apply_rope, sinusoidal_position_encoding

__all__ = [
    "sinusoidal_table",
    "rope_rotation",
    "TABLE_POSITIONS",
    "TABLE_D_MODEL",
    "ROPE_VECTOR",
    "ROPE_POSITIONS",
    "ROPE_QUERY_KEY",
    "ROPE_OFFSETS",
    "pair_speeds",
    "rope_points",
]

BASE = 10000.0
TABLE_POSITIONS, TABLE_D_MODEL = 8, 8  # the table drawn: 8 positions x 8 channels = 4 clock hands
ROPE_D = 8  # RoPE's picture: one vector of 8 channels = 4 pairs, turning at 1, 0.1, 0.01, 0.001 rad per position
ROPE_VECTOR = [1.0, 0.4] * 4  # the same (a, b) in every pair, so that only the speed differs
# Pair 0 at positions 0-3 and pair 1 at positions 0, 10, 20, 30: pair 1 turns 10 times slower, so it needs ten
# positions to turn as far as pair 0 turns in one (the two panels show the same four angles, 0-3 rad).
ROPE_POSITIONS = {0: [0, 1, 2, 3], 1: [0, 10, 20, 30]}
ROPE_QUERY_KEY = ([1.0, 0.4], [0.2, 0.9])  # pair 0 of a query and of a key, for the relative-position panel
ROPE_OFFSETS = [(0, 2), (3, 5)]  # (query position m, key position n): the same offset n - m = 2


def pair_speeds(d_model: int = TABLE_D_MODEL, base: float = BASE) -> list[float]:
    """ω_i = base**(-2i/d_model), radians per position of channel pair i (the table's and RoPE's frequencies)."""
    return [base ** (-2 * i / d_model) for i in range(d_model // 2)]


def rope_points(vector: list[float], positions: list[int], base: float = BASE) -> torch.Tensor:
    """`vector` (D,) placed at every position of `positions` and rotated by lesson 03's apply_rope: (len, D)."""
    T = max(positions) + 1
    rotated = apply_rope(torch.tensor(vector).expand(T, len(vector)), base=base)  # (T, D): position p turned by p·ω
    return rotated[positions]


# ------------------------------------------------------------------------------------------------------------
# The sinusoidal table
# ------------------------------------------------------------------------------------------------------------


def sinusoidal_table() -> Figure:
    """Lesson 03: the table PE (8 positions x 8 channels) and, beside it, its four (sin, cos) pairs as curves over the
    positions. Pair i turns at ω_i = 10000^(−2i/8) = 1, 0.1, 0.01, 0.001 rad per position; row p of the table
    reads every pair at the angle p·ω_i: sin in the even channel, cos in the odd one."""
    pe = sinusoidal_position_encoding(TABLE_POSITIONS, TABLE_D_MODEL).numpy()  # (P, d)
    speeds = pair_speeds()
    fig = Figure(figsize=(11.6, 5.4))
    table = fig.add_axes((0.0, 0.12, 0.47, 0.8))
    n_rows, n_cols = pe.shape
    table.set_xlim(-1.2, n_cols + 0.1)
    table.set_ylim(-n_rows - 0.2, 2.2)
    table.set_aspect("equal")
    table.set_axis_off()
    cmap = colormaps["RdBu_r"]
    for p in range(n_rows):
        table.text(-0.12, -p - 0.5, f"p = {p}", ha="right", va="center", fontsize=9, color=INK)
        for c in range(n_cols):
            value = pe[p, c]
            table.add_patch(Rectangle((c, -p - 1), 1, 1, facecolor=cmap(0.5 + 0.3 * value), edgecolor="white"))
            table.text(c + 0.5, -p - 0.5, f"{value:.2f}", ha="center", va="center", fontsize=8, color=INK)
    for i, speed in enumerate(speeds):
        colour = COLOURS[("attention", "ffn", "embed", "norm")[i]][1]
        table.plot([2 * i + 0.08, 2 * i + 1.92], [0.12, 0.12], color=colour, linewidth=3, solid_capstyle="butt")
        table.text(2 * i + 0.5, 0.45, "sin", ha="center", va="center", fontsize=8.5, color=INK)
        table.text(2 * i + 1.5, 0.45, "cos", ha="center", va="center", fontsize=8.5, color=INK)
        table.text(2 * i + 1.0, 0.95, f"pair {i}\nω = {speed:g}", ha="center", va="bottom", fontsize=8.5, color=colour)
    table.text(-1.1, 2.05, "PE: 8 positions × 8 channels", ha="left", va="center", fontsize=FONT, weight="bold")
    positions = np.arange(n_rows)
    smooth = np.linspace(0, n_rows - 1, 200)
    for i, speed in enumerate(speeds):
        colour = COLOURS[("attention", "ffn", "embed", "norm")[i]][1]
        panel = fig.add_axes((0.53, 0.72 - 0.19 * i, 0.45, 0.14))
        panel.plot(smooth, np.sin(smooth * speed), color=colour, linewidth=1.2)
        panel.plot(smooth, np.cos(smooth * speed), color=colour, linewidth=1.2, linestyle="--")
        panel.plot(positions, pe[:, 2 * i], "o", color=colour, markersize=4)  # the table's column 2i
        panel.plot(positions, pe[:, 2 * i + 1], "s", color=colour, markersize=4, markerfacecolor="white")  # 2i + 1
        panel.set_ylim(-1.25, 1.25)
        panel.set_yticks([-1, 0, 1])
        panel.set_xticks(positions if i == len(speeds) - 1 else [])
        panel.tick_params(labelsize=8)
        turn = 2 * math.pi / speed
        panel.set_title(f"pair {i}: ω = 10000^(−{2 * i}/8) = {speed:g} rad per position, one turn every {turn:,.1f}",
                        fontsize=8.5, loc="left", color=INK)  # fmt: skip
    fig.axes[-1].set_xlabel("position p", fontsize=9)
    legend = "solid line, dots: sin(p·ω) in channel 2i     dashed line, squares: cos(p·ω) in channel 2i + 1"
    fig.text(0.53, 0.95, legend, ha="left", va="center", fontsize=8.5, color=INK)
    fig.text(
        0.01,
        0.04,
        "Each pair of channels is one clock hand, (sin, cos) of the angle p·ω, with its own speed ω = base^(−2i/d): "
        "each pair\nturns 10 times slower than the one before (d = 8). Fast hands tell neighbours apart; slow hands "
        "change little over these 8 positions.",
        ha="left",
        va="center",
        fontsize=9.5,
        color=INK,
    )
    return fig


# ------------------------------------------------------------------------------------------------------------
# RoPE
# ------------------------------------------------------------------------------------------------------------


def _plane(panel: Axes, title: str) -> None:
    panel.set_xlim(-1.45, 1.45)
    panel.set_ylim(-1.45, 1.45)
    panel.set_aspect("equal")
    panel.axhline(0, color="#cccccc", linewidth=0.8, zorder=0)
    panel.axvline(0, color="#cccccc", linewidth=0.8, zorder=0)
    panel.add_patch(Arc((0, 0), 2.0 * 1.077, 2.0 * 1.077, color="#dddddd", linewidth=0.8))
    panel.set_xticks([])
    panel.set_yticks([])
    panel.set_title(title, fontsize=9, color=INK)


def _vector(panel: Axes, tip: tuple[float, float], colour: str, label: str, alpha: float = 1.0) -> None:
    """An arrow from the origin to `tip` (an Annotation whose .xy is the tip: the tests read it back)."""
    panel.annotate("", xy=tip, xytext=(0.0, 0.0), arrowprops=dict(arrowstyle="-|>", color=colour, linewidth=1.6,
                   alpha=alpha, shrinkA=0, shrinkB=0))  # fmt: skip
    norm = math.hypot(*tip)
    panel.text(tip[0] * (1 + 0.16 / norm), tip[1] * (1 + 0.16 / norm), label, ha="center", va="center",
               fontsize=8, color=colour)  # fmt: skip


def rope_rotation() -> Figure:
    """Lesson 03: RoPE turns each channel pair (a, b) of a query or key at position p by the angle p·ω_i. Left, one
    vector's two pairs at positions 0-3 (pair 0 turns 1 rad per position, pair 1 only 0.01); right, a query at m and
    a key at n: turning both changes the angle between them by (n − m)·ω, so their dot product depends on n − m."""
    speeds = pair_speeds(ROPE_D)
    fig = Figure(figsize=(11.6, 4.3))
    shades = ["#1f4e79", "#2e75b6", "#6fa8dc", "#a9cbe8"]
    for k, (pair, positions) in enumerate(ROPE_POSITIONS.items()):
        points = rope_points(ROPE_VECTOR, positions)  # (4, D): the vector at each of these positions
        panel = fig.add_axes((0.01 + 0.25 * k, 0.2, 0.23, 0.68))
        _plane(panel, f"pair {pair} (channels {2 * pair}, {2 * pair + 1}): ω = {speeds[pair]:g} rad / position")
        for row, (p, shade) in enumerate(zip(positions, shades, strict=True)):
            a, b = points[row, 2 * pair : 2 * pair + 2].tolist()
            _vector(panel, (a, b), shade, f"p={p}")
    query, key = ROPE_QUERY_KEY
    colours = {"q": COLOURS["attention"][1], "k": COLOURS["ffn"][1]}
    for k, (m, n) in enumerate(ROPE_OFFSETS):
        panel = fig.add_axes((0.52 + 0.245 * k, 0.2, 0.23, 0.68))
        q = rope_points(query, [m])[0]  # (2,): a query's pair 0 at position m, turned by m·ω0
        kv = rope_points(key, [n])[0]  # (2,): a key's pair 0 at position n, turned by n·ω0
        _plane(panel, f"pair 0 of a query at m = {m}, a key at n = {n}")
        _vector(panel, tuple(q.tolist()), colours["q"], f"q at {m}")
        _vector(panel, tuple(kv.tolist()), colours["k"], f"k at {n}")
        start, end = sorted(math.degrees(math.atan2(v[1], v[0])) for v in (q.tolist(), kv.tolist()))
        if end - start > 180:  # draw the smaller of the two arcs between the vectors
            start, end = end, start + 360
        panel.add_patch(Arc((0, 0), 0.7, 0.7, theta1=start, theta2=end, color=INK, linewidth=1.2))
        score = float(q[:2] @ kv[:2])
        panel.text(0.0, -1.3, f"n − m = {n - m}:  q · k = {score:.3f}", ha="center", va="center", fontsize=9.5,
                   color=INK)  # fmt: skip
    fig.text(
        0.01,
        0.07,
        "Left: RoPE turns pair i of a vector at position p by p·ω_i (D = 8, base 10000); pair 1 turns ten times slower "
        "than pair 0, and lengths never change.\nRight: turning the query by m·ω and the key by n·ω changes the angle "
        "between them by (n − m)·ω, so q · k is the same for any two positions\nthe same distance apart.",
        ha="left",
        va="center",
        fontsize=9.5,
        color=INK,
    )
    return fig
