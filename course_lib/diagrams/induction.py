"""Lesson 13: how two heads in two layers find what came next last time.

induction_circuit   a sequence whose second half repeats the first; below it, the previous-token head of
                    layer 0 (every position reads the one before it); above it, the induction head of layer 1
                    (the query reads the position just after the earlier copy of its own token)
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyArrowPatch

from course_lib.diagrams.draw import COLOURS, INK, box, canvas

__all__ = ["CIRCUIT_TOKENS", "CIRCUIT_QUERY", "PERIOD", "induction_circuit", "induction_key"]

CIRCUIT_TOKENS = ["K", "i", "n", "g", "K", "i", "n", "g"]  # period 4: token t equals token t - 4 from t = 4 on
PERIOD = 4
CIRCUIT_QUERY = 5  # the second "i": what comes after it?


def induction_key(query: int, period: int = PERIOD) -> int:
    """The key an induction head reads from `query`: the position just after the earlier copy of its token."""
    return query - period + 1


def _arc(ax, start: float, end: float, y: float, rad: float, color: str, width: float = 1.6) -> None:
    ax.add_patch(
        FancyArrowPatch(
            (start, y),
            (end, y),
            connectionstyle=f"arc3,rad={rad}",
            arrowstyle="-|>,head_length=6,head_width=3",
            color=color,
            linewidth=width,
            zorder=2,
        )
    )


def induction_circuit() -> Figure:
    """Lesson 13: a previous-token head (layer 0) and an induction head (layer 1) on a repeated sequence."""
    T = len(CIRCUIT_TOKENS)
    query, key = CIRCUIT_QUERY, induction_key(CIRCUIT_QUERY)
    fig, ax = canvas(9.6, 3.3, (-1.6, 2 * T + 2.9), (-2.9, 3.1))
    xs = [2 * t for t in range(T)]
    for t, (x, token) in enumerate(zip(xs, CIRCUIT_TOKENS, strict=True)):
        kind = "attention" if t == query else ("ffn" if t == key else "token")
        box(ax, x, 0, 1.2, 0.9, token, kind, size=13)
        ax.text(x, -0.75, f"t={t}", ha="center", va="center", fontsize=8.5, color="#666666")
    # layer 0: every position reads the position before it (arcs below the tokens, right to left)
    prev_colour = COLOURS["norm"][1]
    for t in range(1, T):
        _arc(ax, xs[t] - 0.35, xs[t - 1] + 0.35, -1.15, -0.55, prev_colour, width=1.2)
    ax.text(xs[0] - 1.2, -2.35, "layer 0, previous-token head: each position reads the one before it, and writes\n"
            "“the token before me was …” into its own residual stream (position 2 now holds: after “i”)",
            ha="left", va="center", fontsize=9.5, color=prev_colour)  # fmt: skip
    # layer 1: the query reads the position after the earlier copy of its own token
    ind_colour = COLOURS["cross"][1]
    _arc(ax, xs[query], xs[key], 0.55, 0.45, ind_colour, width=2.2)
    ax.text((xs[query] + xs[key]) / 2, 2.55,
            f"layer 1, induction head: the query “{CIRCUIT_TOKENS[query]}” (t={query}) looks for a key that came "
            f"after an “{CIRCUIT_TOKENS[query]}”:\nt − period + 1 = {key}, which holds “{CIRCUIT_TOKENS[key]}”; "
            f"it copies “{CIRCUIT_TOKENS[key]}” and predicts it as the next token",
            ha="center", va="center", fontsize=9.5, color=ind_colour)  # fmt: skip
    ax.text(xs[-1] + 1.0, 0, f"t={query} predicts\n“{CIRCUIT_TOKENS[key]}”", ha="left", va="center", fontsize=10,
            color=INK)  # fmt: skip
    ax.text(xs[PERIOD] - 1.0, 1.1, "second copy", ha="left", va="center", fontsize=8.5, color="#666666")
    ax.text(xs[0] - 1.0, 1.1, "first copy", ha="left", va="center", fontsize=8.5, color="#666666")
    return fig
