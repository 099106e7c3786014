"""Drawing pieces shared by every diagram: one colour per kind of box, rounded boxes, arrows, residual adds.

Data coordinates throughout; every diagram draws on an equal-aspect axes with its frame hidden (`canvas`).
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

__all__ = ["COLOURS", "INK", "STREAM", "DPI", "FONT", "canvas", "box", "add", "arrow", "stream"]

# One colour per kind of box, the same in every diagram: (fill, edge).
COLOURS = {
    "attention": ("#fde2c8", "#d9822b"),
    "cross": ("#f9c6c0", "#c0392b"),
    "ffn": ("#cfe2f3", "#2e75b6"),
    "norm": ("#d9ead3", "#4f8a3c"),
    "embed": ("#e4d7ee", "#7d5ba6"),
    "output": ("#eeeeee", "#666666"),
    "token": ("#ffffff", "#888888"),
    "bos": ("#fff2cc", "#bf9000"),
}
INK = "#333333"
STREAM = "#c0392b"  # the residual stream
DPI = 110
FONT = 11


def canvas(width: float, height: float, xlim: tuple[float, float], ylim: tuple[float, float]) -> tuple[Figure, Axes]:
    fig = Figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal")
    ax.set_axis_off()
    return fig, ax


def box(ax: Axes, x: float, y: float, w: float, h: float, text: str, kind: str, size: float = FONT, **kw) -> None:
    """A rounded box centred on (x, y), filled with the colour of its kind, with its label inside."""
    fill, edge = COLOURS[kind]
    ax.add_patch(
        FancyBboxPatch(
            (x - w / 2, y - h / 2),
            w,
            h,
            boxstyle="round,pad=0,rounding_size=0.12",
            facecolor=fill,
            edgecolor=edge,
            linewidth=1.6,
            zorder=3,
        )
    )
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=INK, zorder=4, **kw)


def add(ax: Axes, x: float, y: float, r: float = 0.2) -> None:
    """A residual add: a circle with a plus."""
    ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=INK, linewidth=1.6, zorder=3))
    ax.plot([x - r * 0.6, x + r * 0.6], [y, y], color=INK, linewidth=1.6, zorder=4)
    ax.plot([x, x], [y - r * 0.6, y + r * 0.6], color=INK, linewidth=1.6, zorder=4)


def arrow(ax: Axes, points: list[tuple[float, float]], color: str = INK, width: float = 1.6) -> None:
    """A polyline through `points`, with an arrow head at the last one."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs[:-1], ys[:-1], color=color, linewidth=width, zorder=2, solid_capstyle="butt")
    style = "-|>,head_length=7,head_width=3.5"
    arrow = FancyArrowPatch(points[-2], points[-1], arrowstyle=style, color=color, linewidth=width, zorder=2)
    ax.add_patch(arrow)


def stream(ax: Axes, points: list[tuple[float, float]]) -> None:
    """A wide translucent band under the residual stream."""
    xs, ys = zip(*points, strict=True)
    ax.plot(xs, ys, color=STREAM, alpha=0.18, linewidth=13, solid_capstyle="round", solid_joinstyle="round", zorder=1)
