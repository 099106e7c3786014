"""Lesson 09's picture of `get_batch`: two windows cut from the text, the second moved one character on."""

from __future__ import annotations

from matplotlib.figure import Figure

from course_lib.diagrams.draw import FONT, arrow, box, canvas

__all__ = ["get_batch_windows"]


def get_batch_windows() -> Figure:
    """Lesson 09: one window of get_batch. x is block_size characters from a random start; y is the same window
    moved one character on, so y[t] is the character that follows x[t] — block_size predictions per window."""
    text, start, size = "First Citizen:", 2, 8
    fig, ax = canvas(8.6, 2.9, (-1.4, len(text) + 0.4), (-2.1, 1.6))
    for i, ch in enumerate(text):
        inside = start <= i <= start + size
        box(ax, i + 0.5, 0.6, 0.86, 0.7, "␣" if ch == " " else ch, "token" if inside else "output")
        ax.text(i + 0.5, 1.15, str(i), ha="center", va="bottom", fontsize=8, color="#888888")
    ax.text(-1.3, 0.6, "data", ha="left", va="center", fontsize=FONT)
    for row, (label, shift, kind) in enumerate((("x", 0, "embed"), ("y", 1, "attention"))):
        y = -0.55 - 0.95 * row
        for t in range(size):
            ch = text[start + shift + t]
            box(ax, start + shift + t + 0.5, y, 0.86, 0.6, "␣" if ch == " " else ch, kind)
        ax.text(-1.3, y, label, ha="left", va="center", fontsize=FONT, weight="bold")
    ax.text(start + size + 1.6, -0.55, f"ix = {start}, block_size = {size}", ha="left", va="center", fontsize=9)
    ax.text(start + size + 1.6, -1.5, "y[t] follows x[t]", ha="left", va="center", fontsize=9)
    for t in range(size):
        arrow(ax, [(start + t + 0.62, -0.85), (start + t + 1.38, -1.2)], width=1.0)
    return fig
