"""Lesson 00's PyTorch primer: broadcasting a column against a row."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from course_lib.diagrams.draw import FONT, INK, box, canvas

__all__ = ["broadcasting", "BROADCAST_COLUMN", "BROADCAST_ROW"]

# The example the primer runs next to the picture: a (3, 1) column plus a (4,) row gives a (3, 4) grid.
BROADCAST_COLUMN = np.array([[0.0], [10.0], [20.0]])  # (3, 1)
BROADCAST_ROW = np.array([0.0, 1.0, 2.0, 3.0])  # (4,)


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
