"""Pictures for every lesson: attention heatmaps, position tables, word-vector maps and loss curves.

    attention_heatmap          weights (q, k), (heads, q, k) or (layers, heads, q, k) with token labels
    position_encoding_heatmap  a (max_len, d_model) position table
    word_vectors_scatter       words placed by the first two principal components of their vectors
    pca_2d                     that projection on its own (SVD in torch)
    loss_curve, LossPlot       loss curves, from `course_lib.loss_plots` (re-exported here)

`backend="altair"` returns an interactive altair chart (hover for values), shown by whichever altair renderer
the notebook has enabled; `backend="matplotlib"` returns `(fig, ax)` or `(fig, axes)`. Nothing here saves
files, prints or changes global settings (matplotlib styles, altair renderers or data transformers).
Altair charts carry their data inline; inputs above `max_cells` values raise a ValueError instead of
silently producing a multi-megabyte notebook.

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import altair as alt
import matplotlib.pyplot as plt
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from course_lib import _checks
from course_lib.loss_plots import LossPlot, loss_curve

__all__ = ["attention_heatmap", "position_encoding_heatmap", "pca_2d", "word_vectors_scatter", "loss_curve", "LossPlot"]

_BACKENDS = ("altair", "matplotlib")


# ------------------------------------------------------------------------------------------------------------
# Data for altair
# ------------------------------------------------------------------------------------------------------------


def _number(v: float) -> float | None:
    """JSON-safe value for altair: 6 decimals keep notebooks small; NaN/inf become null (drawn blank)."""
    return round(float(v), 6) if np.isfinite(v) else None


def _label_expr(labels: list[str]) -> str:
    """Vega expression that turns an axis position (0, 1, ...) into its token; tokens may repeat."""
    return f"{json.dumps(labels)}[datum.value]"


# ------------------------------------------------------------------------------------------------------------
# Attention heatmaps (Lessons 04, 05, 07, 08, 10)
# ------------------------------------------------------------------------------------------------------------


def attention_heatmap(
    weights: torch.Tensor | np.ndarray,
    x_labels: Sequence[object] | None = None,
    y_labels: Sequence[object] | None = None,
    title: str | None = None,
    backend: str = "altair",
    *,
    panel_names: tuple[str, str] = ("layer", "head"),
    layout: str = "auto",
    show_values: bool = False,
    cmap: str = "viridis",
    max_cells: int = 10_000,
) -> alt.TopLevelMixin | tuple[Figure, Any]:
    """Heatmap of attention weights: rows are queries (`y_labels`), columns are keys (`x_labels`).

    Lessons 04-10. weights (q, k), (heads, q, k) or (rows, cols, q, k), e.g. (layers, heads, q, k); the two
    grid dimensions are named by `panel_names`. Weights that are all in [0, 1] (probabilities) are coloured on the
    whole 0..1 scale, so near-uniform weights (0.16-0.18 everywhere) look uniform instead of stretched over the
    colour map; anything else (raw scores) on its own finite range. altair: hover shows query, key and weight;
    several panels are a faceted grid (`layout="grid"`) or one panel with dropdown selectors (`layout="select"`);
    "auto" picks the grid up to 16 panels. matplotlib: one shared colour bar; returns (fig, ax) for 2-D input,
    (fig, axes) with axes[h] for 3-D and axes[r, c] for 4-D. NaN / inf cells (e.g. masked scores) are left blank.
    """
    _checks.one_of("backend", backend, _BACKENDS)
    _checks.one_of("layout", layout, ("auto", "grid", "select"))
    w = _checks.array("weights", weights)
    if w.ndim not in (2, 3, 4):
        raise ValueError(f"`weights` must be (q, k), (heads, q, k) or (rows, cols, q, k), got shape {w.shape}")
    grid = w.reshape((1,) * (4 - w.ndim) + w.shape)  # (rows, cols, q, k); 2-D -> (1, 1, q, k)
    xs, ys = _checks.labels("x_labels", x_labels, grid.shape[3]), _checks.labels("y_labels", y_labels, grid.shape[2])
    limits = _checks.finite_range("weights", grid)
    if limits[0] >= 0.0 and limits[1] <= 1.0:  # probabilities: the full 0..1 scale, so near-uniform looks uniform
        limits = (0.0, 1.0)
    # the grid dimensions the caller gave, as (axis of `grid`, name): none for 2-D, only heads for 3-D
    dims = [(axis, panel_names[axis]) for axis in range(4 - w.ndim, 2)]
    if backend == "matplotlib":
        return _attention_matplotlib(grid, xs, ys, title, dims, show_values, cmap, limits)
    _checks.max_cells("`weights`", grid.size, max_cells)
    chart = _attention_altair(grid, xs, ys, dims, layout, show_values, cmap, limits)
    return chart.properties(title=title) if title else chart


def _attention_altair(grid, xs, ys, dims, layout, show_values, cmap, limits):
    n_rows, n_cols, n_q, n_k = grid.shape
    records = [
        {"query_pos": i, "key_pos": j, "query": ys[i], "key": xs[j], "weight": _number(grid[r, c, i, j])}
        | {name: (r, c)[axis] for axis, name in dims}
        for r, c, i, j in np.ndindex(grid.shape)
    ]
    names = [name for _, name in dims]
    tooltip = [*(f"{n}:O" for n in names), "query:N", "key:N", alt.Tooltip("weight:Q", format=".4f")]
    base = alt.Chart().encode(
        x=alt.X("key_pos:O", title="key", axis=alt.Axis(labelExpr=_label_expr(xs), labelAngle=-45)),
        y=alt.Y("query_pos:O", title="query", axis=alt.Axis(labelExpr=_label_expr(ys))),
    )
    scale = alt.Scale(scheme=cmap, domain=list(limits))
    layers = [base.mark_rect().encode(color=alt.Color("weight:Q", scale=scale), tooltip=tooltip)]
    if show_values:
        bright = alt.datum.weight > (limits[0] + limits[1]) / 2  # dark text on the bright half of the scale
        colour = alt.condition(bright, alt.value("black"), alt.value("white"))
        layers.append(base.mark_text(fontSize=9).encode(text=alt.Text("weight:Q", format=".2f"), color=colour))
    cell = 22 if max(n_q, n_k) <= 16 else max(4, 360 // max(n_q, n_k))  # pixels per cell
    chart = alt.layer(*layers, data=alt.Data(values=records)).properties(width=alt.Step(cell), height=alt.Step(cell))
    if not names:
        return chart
    if layout == "grid" or (layout == "auto" and n_rows * n_cols <= 16):  # every panel at once
        if len(names) == 1:
            return chart.facet(facet=f"{names[0]}:O", columns=4)
        return chart.facet(row=f"{names[0]}:O", column=f"{names[1]}:O")
    for axis, name in dims:  # one panel at a time, picked with a dropdown per grid dimension
        options = list(range(grid.shape[axis]))
        param = alt.param(name=f"select_{name}", value=0, bind=alt.binding_select(options=options, name=f"{name} "))
        chart = chart.add_params(param).transform_filter(alt.datum[name] == param)
    return chart


def _attention_matplotlib(grid, xs, ys, title, dims, show_values, cmap, limits):
    n_rows, n_cols, n_q, n_k = grid.shape
    panels = [((r, c), grid[r, c]) for r, c in np.ndindex(n_rows, n_cols)]
    if len(dims) == 1:  # a list of heads wraps after 4 panels
        n_rows, n_cols = -(-n_cols // 4), min(n_cols, 4)
    panel = max(1.8, min(max(3.0, 0.4 * max(n_q, n_k)), 14 / n_cols))  # inches per panel
    size = (panel * n_cols + 1.2, panel * n_rows)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=size, squeeze=False, layout="constrained")
    for ax, (index, values) in zip(axes.flat, panels, strict=False):
        image = ax.imshow(np.ma.masked_invalid(values), cmap=cmap, vmin=limits[0], vmax=limits[1])
        ax.set_xticks(range(n_k), labels=xs, rotation=90)
        ax.set_yticks(range(n_q), labels=ys)
        if dims:
            ax.set_title(", ".join(f"{name} {index[axis]}" for axis, name in dims), fontsize=9)
        if len(dims) == 2:
            ax.label_outer()  # token labels on the left column and the bottom row only
        for i, j in np.ndindex(n_q, n_k) if show_values else ():
            if np.isfinite(values[i, j]):  # dark text on the bright half of the colour map, light on the dark
                colour = "k" if values[i, j] > (limits[0] + limits[1]) / 2 else "w"
                ax.text(j, i, f"{values[i, j]:.2f}", ha="center", va="center", fontsize=7, color=colour)
    for ax in axes.flat[len(panels) :]:
        fig.delaxes(ax)  # the unused end of the last row of heads
    fig.colorbar(image, ax=axes.flat[: len(panels)], shrink=0.8)  # one bar: all panels share vmin/vmax
    if not dims:
        axes[0, 0].set(xlabel="key", ylabel="query", title=title or "")
        return fig, axes[0, 0]
    fig.supxlabel("key", fontsize=9)
    fig.supylabel("query", fontsize=9)
    if title:
        fig.suptitle(title)
    return fig, axes.flat[: len(panels)] if len(dims) == 1 else axes


# ------------------------------------------------------------------------------------------------------------
# Position tables (Lesson 03)
# ------------------------------------------------------------------------------------------------------------


def position_encoding_heatmap(
    pe: torch.Tensor | np.ndarray, backend: str = "altair", title: str | None = None, *, max_cells: int = 10_000
) -> alt.Chart | tuple[Figure, Axes]:
    """Heatmap of a position table pe (max_len, d_model): x = dimension, y = position (0 at the top).

    Lesson 03. A diverging colour scale centred on 0; altair tooltips show position, dimension and value.
    """
    _checks.one_of("backend", backend, _BACKENDS)
    table = _checks.array("pe", pe)
    if table.ndim != 2:
        raise ValueError(f"`pe` must be 2-D (max_len, d_model), got shape {table.shape}")
    L, C = table.shape
    low, high = _checks.finite_range("pe", table)
    m = max(abs(low), abs(high)) or 1.0  # symmetric limits so 0 is the middle colour
    if backend == "matplotlib":
        fig, ax = plt.subplots(figsize=(7, 4.5), layout="constrained")
        image = ax.imshow(table, aspect="auto", cmap="RdBu_r", vmin=-m, vmax=m, interpolation="nearest")
        ax.set(xlabel="dimension", ylabel="position", title=title or "")
        fig.colorbar(image, ax=ax)
        return fig, ax
    _checks.max_cells("`pe`", table.size, max_cells)
    records = [{"position": p, "dimension": d, "value": _number(table[p, d])} for p, d in np.ndindex(L, C)]
    tick = lambda n: list(range(0, n, max(1, n // 8)))  # about 8 axis labels, whatever the size  # noqa: E731
    chart = (
        alt.Chart(alt.Data(values=records))
        .mark_rect()
        .encode(
            x=alt.X("dimension:O", axis=alt.Axis(values=tick(C), labelAngle=0)),
            y=alt.Y("position:O", axis=alt.Axis(values=tick(L))),
            color=alt.Color("value:Q", scale=alt.Scale(scheme="redblue", domain=[-m, m], reverse=True)),
            tooltip=["position:O", "dimension:O", alt.Tooltip("value:Q", format=".4f")],
        )
        .properties(width=480, height=320)
    )
    return chart.properties(title=title) if title else chart


# ------------------------------------------------------------------------------------------------------------
# Word vectors (Lesson 02)
# ------------------------------------------------------------------------------------------------------------


def _pca(vectors: torch.Tensor | np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(projection (N, 2), share of the variance of the two components (2,)) of vectors (N, C)."""
    v = torch.from_numpy(_checks.array("vectors", vectors))
    if v.ndim != 2 or v.shape[0] < 2 or v.shape[1] < 2:
        raise ValueError(f"`vectors` must be (N, C) with N >= 2 and C >= 2, got shape {tuple(v.shape)}")
    centred = v - v.mean(dim=0)  # (N, C)
    _, s, vh = torch.linalg.svd(centred, full_matrices=False)  # s (min(N, C),), vh (min(N, C), C)
    # An SVD fixes each direction only up to sign: make the largest entry of each direction positive,
    # so the picture does not flip between runs or machines.
    signs = torch.sign(vh.gather(1, vh.abs().argmax(dim=1, keepdim=True)))  # (min(N, C), 1)
    vh = vh * signs
    explained = s**2 / (s**2).sum().clamp_min(1e-30)
    return centred @ vh[:2].T, explained[:2]  # (N, C) @ (C, 2) -> (N, 2)


def pca_2d(vectors: torch.Tensor | np.ndarray) -> torch.Tensor:
    """The first two principal components of each row: vectors (N, C) -> float64 (N, 2). Lesson 02."""
    return _pca(vectors)[0]


def word_vectors_scatter(
    vectors: torch.Tensor | np.ndarray,
    labels: Sequence[str],
    method: str = "pca",
    backend: str = "altair",
    title: str | None = None,
    *,
    groups: Sequence[str] | None = None,
    max_cells: int = 10_000,
) -> alt.LayerChart | tuple[Figure, Axes]:
    """Words as labelled points at the 2-D PCA projection of their vectors (N, C). Lesson 02.

    `groups` (one name per word) colours the points. The axis titles say how much of the variance each
    component keeps: a low share means the flat picture hides much of the geometry.
    """
    _checks.one_of("backend", backend, _BACKENDS)
    if method != "pca":
        raise ValueError(f"`method` must be 'pca' (no other projection without extra packages), got {method!r}")
    xy, explained = _pca(vectors)
    xy = xy.numpy()
    words = _checks.labels("labels", labels, len(xy))
    group_names = None if groups is None else _checks.labels("groups", groups, len(xy))
    axis_titles = [f"PC {i + 1} ({100 * float(e):.0f}% of variance)" for i, e in enumerate(explained)]
    if backend == "matplotlib":
        fig, ax = plt.subplots(figsize=(6.5, 5), layout="constrained")
        if group_names is None:
            ax.scatter(*xy.T, s=18)
        else:
            codes = {g: i for i, g in enumerate(dict.fromkeys(group_names))}
            points = ax.scatter(*xy.T, s=18, c=[codes[g] for g in group_names], cmap="tab10", vmin=0, vmax=9)
            ax.legend(points.legend_elements()[0], list(codes), fontsize=8)
        for (x, y), word in zip(xy, words, strict=True):
            ax.annotate(word, (x, y), xytext=(3, 3), textcoords="offset points", fontsize=8)
        ax.set(xlabel=axis_titles[0], ylabel=axis_titles[1], title=title or "")
        return fig, ax
    _checks.max_cells("`vectors` (projected)", xy.size, max_cells)
    records = [{"word": w, "x": _number(x), "y": _number(y)} for w, (x, y) in zip(words, xy, strict=True)]
    for record, group in zip(records, group_names or [], strict=False):
        record["group"] = group
    base = alt.Chart(alt.Data(values=records)).encode(
        x=alt.X("x:Q", title=axis_titles[0]),
        y=alt.Y("y:Q", title=axis_titles[1]),
        tooltip=["word:N", alt.Tooltip("x:Q", format=".3f"), alt.Tooltip("y:Q", format=".3f")],
    )
    points = base.mark_circle(size=50)
    if group_names is not None:
        points = points.encode(color="group:N")
    chart = alt.layer(points, base.mark_text(align="left", dx=5, fontSize=10).encode(text="word:N"))
    chart = chart.properties(width=480, height=360).interactive()  # drag to pan, scroll to zoom
    return chart.properties(title=title) if title else chart
