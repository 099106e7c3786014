"""Lesson 00's PyTorch primer: broadcasting a column against a row, and one step of gradient descent."""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

from course_lib.diagrams.draw import COLOURS, FONT, INK, box, canvas

__all__ = [
    "broadcasting",
    "gradient_step",
    "BROADCAST_COLUMN",
    "BROADCAST_ROW",
    "STEP_W",
    "STEP_X",
    "STEP_LR",
    "step_numbers",
]

# The example the primer runs next to the picture: a (3, 1) column plus a (4,) row gives a (3, 4) grid.
BROADCAST_COLUMN = np.array([[0.0], [10.0], [20.0]])  # (3, 1)
BROADCAST_ROW = np.array([0.0, 1.0, 2.0, 3.0])  # (4,)
# The gradient step the primer takes (section 3.6): loss = (w · x)², w = [1, -2], x = [3, 4], lr = 0.01.
STEP_W, STEP_X, STEP_LR = [1.0, -2.0], [3.0, 4.0], 0.01


def _grid(ax, x0: float, y0: float, values: np.ndarray, real: np.ndarray, kind: str) -> None:
    """Boxes for a 2-D array, top-left at (x0, y0); where `real` is False the box is a faded, stretched copy."""
    for r in range(values.shape[0]):
        for c in range(values.shape[1]):
            box(ax, x0 + c * 0.8, y0 - r * 0.8, 0.7, 0.7, f"{values[r, c]:g}", kind, size=10)
            if not real[r, c]:
                ax.patches[-1].set_alpha(0.3)
                ax.texts[-1].set_alpha(0.45)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(n) for n in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcasting(column: np.ndarray = BROADCAST_COLUMN, row: np.ndarray = BROADCAST_ROW) -> Figure:
    """Lesson 00: column (3, 1) + row (4,). Shapes are lined up from the right, the row counts as (1, 4), and every
    dimension of size 1 is stretched (faded boxes: read again, never copied) to give a (3, 4) result."""
    rows, cols = column.shape[0], row.shape[0]
    column_grid = np.repeat(column, cols, axis=1)  # (3, 4): the column read 4 times
    row_grid = np.repeat(row[None, :], rows, axis=0)  # (3, 4): the row read 3 times
    result = column + row  # (3, 1) + (4,) -> (3, 4)
    first = np.zeros((rows, cols), dtype=bool)
    first[:, 0] = True
    top = np.zeros((rows, cols), dtype=bool)
    top[0, :] = True
    width = 3 * cols * 0.8 + 2 * 1.0
    fig, ax = canvas(9.6, 4.2, (-0.6, width + 0.2), (-rows * 0.8 - 2.0, 1.3))
    starts = [0.0, cols * 0.8 + 1.0, 2 * (cols * 0.8 + 1.0)]
    titles = (
        f"column {_shape(column.shape)}",
        f"row {_shape(row.shape)} → (1, {cols})",
        f"column + row {_shape(result.shape)}",
    )
    grids = ((column_grid, first, "embed"), (row_grid, top, "bos"), (result, np.ones_like(first), "ffn"))
    for x0, title, (values, real, kind) in zip(starts, titles, grids, strict=True):
        ax.text(x0 - 0.35, 0.75, title, ha="left", va="center", fontsize=FONT, weight="bold", color=INK)
        _grid(ax, x0, 0.0, values, real, kind)
    for x, sign in ((starts[1] - 0.5, "+"), (starts[2] - 0.5, "=")):
        ax.text(x, -(rows - 1) * 0.4, sign, ha="center", va="center", fontsize=18, color=INK)
    r, one = column.shape
    lines = (
        f"column  {r} × {one}",
        f"row         {cols}    lined up from the right: the missing dimension counts as 1",
        f"result  {rows} × {cols}    each pair is equal, or one of them is 1 and is stretched (faded boxes)",
    )
    for i, line in enumerate(lines):
        ax.text(-0.35, -rows * 0.8 - 0.4 - i * 0.5, line, ha="left", va="center", fontsize=10, color=INK,
                family="monospace")  # fmt: skip
    return fig


def step_numbers() -> dict[str, list[float] | float]:
    """The primer's step, computed with autograd: w, its loss and gradient, and w after one step of lr."""
    w = torch.tensor(STEP_W, requires_grad=True)
    x = torch.tensor(STEP_X)
    loss = (w * x).sum() ** 2
    loss.backward()
    with torch.no_grad():
        new = w - STEP_LR * w.grad
    return {"w": STEP_W, "loss": loss.item(), "grad": w.grad.tolist(), "new": new.tolist(),
            "new_loss": ((new * x).sum() ** 2).item()}  # fmt: skip


def gradient_step() -> Figure:
    """Lesson 00: the loss (w · x)² over the two weights, as contour lines; the gradient at w points uphill,
    across the contours; one step of gradient descent moves w by −lr · gradient, to a lower contour."""
    n = step_numbers()
    (a, b), (c, d), (gx, gy) = n["w"], n["new"], n["grad"]
    fig = Figure(figsize=(9.6, 4.6))
    ax = fig.add_axes((0.07, 0.12, 0.5, 0.8))
    w1, w2 = np.meshgrid(np.linspace(-0.5, 2.5, 200), np.linspace(-2.9, 0.5, 200))
    loss = (STEP_X[0] * w1 + STEP_X[1] * w2) ** 2
    ax.contour(w1, w2, loss, levels=[1, 4, 9, 16, 36, 49], colors="#c5d5e4", linewidths=0.9)
    ax.contour(w1, w2, loss, levels=[n["new_loss"], n["loss"]], colors="#5b84b1", linewidths=1.4)
    ax.plot([-0.5, 2.5], [0.375, -1.875], color=COLOURS["norm"][1], linewidth=1.5, linestyle="--")  # w · x = 0
    ax.plot([a], [b], "o", color=INK, zorder=5)
    ax.plot([c], [d], "o", color=COLOURS["attention"][1], zorder=5)
    ax.annotate("", xy=(c, d), xytext=(a, b),
                arrowprops=dict(arrowstyle="-|>", color=COLOURS["attention"][1], linewidth=2.0))  # fmt: skip
    scale = 0.35 / np.hypot(gx, gy)  # the gradient's direction, drawn 0.35 long (it is 50 long)
    ax.annotate("", xy=(a + gx * scale, b + gy * scale), xytext=(a, b),
                arrowprops=dict(arrowstyle="-|>", color=COLOURS["cross"][1], linewidth=1.5))  # fmt: skip
    label = dict(facecolor="white", edgecolor="none", pad=1.0)  # a white patch under each label
    ax.text(a + gx * scale - 0.08, b + gy * scale, "gradient\n(uphill)", ha="right", va="center", fontsize=8.5,
            color=COLOURS["cross"][1], bbox=label)  # fmt: skip
    ax.text(a + 0.1, b - 0.08, f"w = ({a:g}, {b:g}): loss {n['loss']:g}", ha="left", va="top", fontsize=9,
            color=INK, bbox=label)  # fmt: skip
    ax.text(c + 0.1, d + 0.05, f"new w = ({c:.1f}, {d:.1f}):\nloss {n['new_loss']:.3g}", ha="left", va="bottom",
            fontsize=9, color=COLOURS["attention"][1], bbox=label)  # fmt: skip
    ax.set(xlabel="w[0]", ylabel="w[1]", xlim=(-0.5, 2.5), ylim=(-2.9, 0.5))
    ax.set_aspect("equal")
    ax.set_title("loss (w · x)² for x = (3, 4): contour lines", fontsize=9.5)
    lines = (
        f"w = ({a:g}, {b:g}):  loss = (3·1 + 4·(−2))² = {n['loss']:g}",
        f"gradient = 2 (w · x) x = ({gx:g}, {gy:g})",
        f"step: w − lr · gradient, lr = {STEP_LR:g}",
        f"    = ({a:g}, {b:g}) − ({STEP_LR * gx:g}, {STEP_LR * gy:g}) = ({c:.1f}, {d:.1f})",
        f"new loss = {n['new_loss']:.3g}",
        "",
        "The gradient points where the loss grows fastest:",
        "across the contour lines, uphill. The step goes the",
        "other way, lr times the gradient. Every contour here",
        "is a straight line; the lowest loss, 0, lies on the",
        "whole dashed line w · x = 0.",
    )
    for i, line in enumerate(lines):
        fig.text(0.6, 0.86 - 0.065 * i, line, ha="left", va="center", fontsize=9.5, color=INK)
    return fig
