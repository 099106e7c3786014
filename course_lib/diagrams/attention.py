"""Lessons 04 and 05: attention's data flow with real numbers, the causal mask, cross-attention's wiring, the
split of the channels into heads and their merge, and the layout of a fused qkv projection's output.

The numbers in the pictures are computed here, with the course's own functions (course_lib.attention,
course_lib.multihead), from the small fixed inputs below; tests/test_diagrams_attention.py reads them back from the
drawn text and checks them against the computation.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from course_lib.attention import causal_mask, scaled_dot_product_attention
from course_lib.diagrams.draw import COLOURS, FONT, INK, arrow, box, canvas
from course_lib.multihead import merge_heads, split_heads

__all__ = [
    "attention_data_flow",
    "causal_mask_grid",
    "cross_attention_wiring",
    "head_split_merge",
    "fused_qkv_layout",
    "FLOW_TOKENS",
    "FLOW_X",
    "FLOW_WEIGHTS",
    "flow_numbers",
    "MASK_TOKENS",
    "SPLIT_HEADS",
    "split_example",
    "QKV_D_MODEL",
    "QKV_HEADS",
    "qkv_channels_per_head",
]

# The data-flow picture: three of lesson 04's six token vectors, and made-up projections (C = 3 -> d_k = d_v = 2).
FLOW_TOKENS = ["Your", "journey", "starts"]
FLOW_X = [[0.10, 0.30, 0.90], [0.80, 0.70, 0.10], [0.90, 0.40, 0.20]]  # (T, C), as in lesson 04
FLOW_WEIGHTS = {  # (C, d) each: q = x @ W_q, k = x @ W_k, v = x @ W_v
    "W_q": [[1.0, 0.0], [0.5, 1.0], [0.0, -1.0]],
    "W_k": [[1.0, 0.5], [0.0, 1.0], [-1.0, 0.0]],
    "W_v": [[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]],
}
MASK_TOKENS = ["Your", "journey", "starts", "with", "one"]
SPLIT_HEADS = 3  # the split picture: C = 6 channels, H = 3 heads of D = 2
QKV_D_MODEL, QKV_HEADS = 6, 3  # the fused-qkv picture: qkv gives 3 x 6 = 18 channels, 3 heads of D = 2


def flow_numbers() -> dict[str, np.ndarray]:
    """Every matrix the data-flow picture shows, computed with lesson 04's scaled_dot_product_attention."""
    x = torch.tensor(FLOW_X)  # (T, C)
    q, k, v = (x @ torch.tensor(FLOW_WEIGHTS[name]) for name in ("W_q", "W_k", "W_v"))  # (T, d) each
    out, weights = scaled_dot_product_attention(q, k, v)  # (T, d_v), (T, T)
    scores = q @ k.T / math.sqrt(k.shape[-1])  # (T, T): what the softmax turns into the weights
    values = {"x": x, "q": q, "k": k, "v": v, "scores": scores, "weights": weights, "out": out}
    return {name: value.numpy() for name, value in values.items()}


def split_example() -> tuple[torch.Tensor, torch.Tensor]:
    """Lesson 05's tensor whose entries tell where they come from (token t, channel c holds 10t + c), and its split:
    (1, 2, 6) -> (1, H, 2, D)."""
    tiny = torch.tensor([[[10 * t + c for c in range(6)] for t in range(2)]])  # (B=1, T=2, C=6)
    return tiny, split_heads(tiny, SPLIT_HEADS)  # (1, H, T, D)


# ------------------------------------------------------------------------------------------------------------
# Drawing pieces
# ------------------------------------------------------------------------------------------------------------


def _cell(ax: Axes, x: float, y: float, text: str, kind: str, w: float = 0.62, h: float = 0.42, size: float = 8.5):
    """One entry of a matrix: a square box with its value, centred on (x, y)."""
    fill, edge = COLOURS[kind]
    ax.add_patch(Rectangle((x - w / 2, y - h / 2), w, h, facecolor=fill, edgecolor=edge, linewidth=1.0, zorder=3))
    ax.text(x, y, text, ha="center", va="center", fontsize=size, color=INK, zorder=4)


def _matrix(
    ax: Axes,
    left: float,
    top: float,
    values: np.ndarray,
    kind: str,
    title: str,
    rows: list[str] | None = None,
    fmt: str = "{:.2f}",
) -> tuple[float, float, float, float]:
    """A matrix of numbers with its title above and optional row labels; returns (left, right, bottom, top)."""
    n_rows, n_cols = values.shape
    for i in range(n_rows):
        for j in range(n_cols):
            _cell(ax, left + 0.31 + 0.64 * j, top - 0.21 - 0.44 * i, fmt.format(values[i, j]), kind)
    right, bottom = left + 0.64 * n_cols, top - 0.44 * n_rows
    ax.text((left + right) / 2, top + 0.12, title, ha="center", va="bottom", fontsize=9.5, color=INK)
    for i, label in enumerate(rows or []):
        ax.text(left - 0.1, top - 0.21 - 0.44 * i, label, ha="right", va="center", fontsize=8.5, color=INK)
    return left, right, bottom, top


# ------------------------------------------------------------------------------------------------------------
# Lesson 04
# ------------------------------------------------------------------------------------------------------------


def attention_data_flow() -> Figure:
    """Lesson 04: token vectors x -> queries, keys, values -> scores q kᵀ / √d_k -> softmax weights (each row
    sums to 1) -> context vectors = weights @ v, with the numbers of a three-token example."""
    n = flow_numbers()
    fig, ax = canvas(11.0, 4.6, (-1.6, 17.0), (-4.9, 2.6))
    _matrix(ax, 0.0, 0.6, n["x"], "token", "x  (T × C)", FLOW_TOKENS)
    tops = {"q": 2.0, "k": 0.1, "v": -1.8}
    names = {"q": "queries  x W_q", "k": "keys  x W_k", "v": "values  x W_v"}
    kinds = {"q": "attention", "k": "ffn", "v": "embed"}
    for name, top in tops.items():
        _matrix(ax, 3.6, top, n[name], kinds[name], names[name])
        arrow(ax, [(2.05, 0.6 - 0.66), (3.45, top - 0.44)], width=1.1)
    _matrix(ax, 6.9, 1.0, n["scores"], "output", "scores  q kᵀ / √d_k")
    arrow(ax, [(4.95, 1.56), (6.75, 0.56)], width=1.1)  # from q
    arrow(ax, [(4.95, -0.34), (6.75, 0.34)], width=1.1)  # from k
    _matrix(ax, 10.1, 1.0, n["weights"], "cross", "weights  softmax of each row")
    arrow(ax, [(8.9, 0.34), (9.95, 0.34)], width=1.1)
    for i, total in enumerate(n["weights"].sum(axis=1)):
        ax.text(12.15, 0.79 - 0.44 * i, f"Σ {total:.2f}", ha="left", va="center", fontsize=8, color="#777777")
    _matrix(ax, 13.6, 1.0, n["out"], "norm", "context  weights @ v")
    for i, token in enumerate(FLOW_TOKENS):
        ax.text(14.98, 0.79 - 0.44 * i, token, ha="left", va="center", fontsize=8.5, color=INK)
    arrow(ax, [(12.95, 0.34), (13.5, 0.34)], width=1.1)  # from the weights
    arrow(ax, [(4.95, -2.24), (14.24, -2.24), (14.24, -0.4)], width=1.1)  # from v
    ax.text(
        -1.5,
        -3.75,
        "Each query row asks; every key answers with a score; the softmax turns one row of scores into weights that "
        "sum to 1;\nthe context vector of a token is the weighted average of the values — a soft dictionary lookup.",
        ha="left",
        va="center",
        fontsize=9.5,
        color=INK,
    )
    ax.text(-1.5, -4.55, "d_k = d_v = 2,  √d_k ≈ 1.41", ha="left", va="center", fontsize=9, color="#555555")
    return fig


def causal_mask_grid() -> Figure:
    """Lesson 04: the causal mask of five tokens. Row = query, column = key; True (may attend) on and below the
    diagonal. Blocked scores become -inf, so their weights are exactly 0."""
    T = len(MASK_TOKENS)
    mask = causal_mask(T)  # (T, T)
    fig, ax = canvas(8.4, 4.2, (-2.2, 12.8), (-T - 1.0, 2.1))
    for i in range(T):
        ax.text(-0.15, -i - 0.5, MASK_TOKENS[i], ha="right", va="center", fontsize=FONT, color=INK)
        ax.text(i + 0.5, 0.15, MASK_TOKENS[i], ha="left", va="bottom", fontsize=FONT, rotation=40, color=INK)
        for j in range(T):
            allowed = bool(mask[i, j])
            fill = COLOURS["norm"][0] if allowed else "#eeeeee"
            ax.add_patch(Rectangle((j, -i - 1), 1, 1, facecolor=fill, edgecolor="#999999", linewidth=1.0))
            ax.text(j + 0.5, -i - 0.5, "True" if allowed else "False", ha="center", va="center", fontsize=8.5,
                    color=INK if allowed else "#999999")  # fmt: skip
    ax.text(-2.1, 1.4, "query ↓   key →", ha="left", va="center", fontsize=9.5, color="#555555")
    notes = [
        (-0.5, "row 0: “Your” sees only itself"),
        (-T + 0.5, f"row {T - 1}: “{MASK_TOKENS[-1]}” sees all {T} tokens"),
    ]
    for y, text in notes:
        arrow(ax, [(T + 0.9, y), (T + 0.15, y)], width=1.0)
        ax.text(T + 1.0, y, text, ha="left", va="center", fontsize=9.5, color=INK)
    ax.text(
        T + 1.0,
        -T / 2,
        "True: may attend (on and below the diagonal)\nFalse: a later token, hidden: its score\nbecomes −inf, "
        "so its weight is exactly 0",
        ha="left",
        va="center",
        fontsize=9.5,
        color=INK,
    )
    return fig


CROSS_SOURCE = ["Your", "journey", "starts", "with", "one", "step"]  # the encoder's memory: Tk = 6 tokens
CROSS_TARGET = ["Ton", "voyage", "commence"]  # what the decoder has written so far: Tq = 3 tokens


def cross_attention_wiring() -> Figure:
    """Lesson 04: cross-attention. Queries come from the decoder (Tq rows), keys and values from the encoder's
    memory (Tk rows); the weights are (Tq, Tk) and the output has one row per decoder token."""
    Tq, Tk = len(CROSS_TARGET), len(CROSS_SOURCE)
    fig, ax = canvas(10.4, 5.1, (-0.5, 16.0), (-4.1, 3.9))
    ax.text(0.1, 3.6, f"decoder: Tq = {Tq} tokens", ha="left", va="center", fontsize=FONT, weight="bold")
    ax.text(7.4, 3.6, f"encoder memory: Tk = {Tk} tokens", ha="left", va="center", fontsize=FONT, weight="bold")
    for i, token in enumerate(CROSS_TARGET):
        box(ax, 0.8 + 1.5 * i, 3.0, 1.4, 0.5, token, "bos", size=9.5)
    for j, token in enumerate(CROSS_SOURCE):
        box(ax, 8.0 + 1.3 * j, 3.0, 1.2, 0.5, token, "token", size=9)
    for left, right in ((0.1, 4.5), (7.4, 15.1)):  # a bracket under each sequence
        ax.plot([left, left, right, right], [2.65, 2.55, 2.55, 2.65], color=INK, linewidth=1.2)
    columns = [
        (2.3, "attention", "W_query: d_model → d_model", f"Q: Tq × d_model = {Tq} rows"),
        (9.6, "ffn", "W_key: d_memory → d_model", f"K: Tk × d_model = {Tk} rows"),
        (13.4, "embed", "W_value: d_memory → d_model", f"V: Tk × d_model = {Tk} rows"),
    ]
    for x, kind, projection, result in columns:
        arrow(ax, [(x, 2.55), (x, 1.9)])
        box(ax, x, 1.6, 3.7, 0.6, projection, kind, size=9)
        arrow(ax, [(x, 1.3), (x, 0.6)])
        box(ax, x, 0.3, 3.7, 0.6, result, kind, size=9)
    left, top, size = 5.6, -0.7, 0.55  # the weights: a row per query (decoder token), a column per key
    for i in range(Tq):
        ax.text(left - 0.12, top - size * (i + 0.5), CROSS_TARGET[i], ha="right", va="center", fontsize=9)
        for j in range(Tk):
            ax.add_patch(Rectangle((left + size * j, top - size * (i + 1)), size, size, facecolor=COLOURS["cross"][0],
                                   edgecolor=COLOURS["cross"][1], linewidth=1.0))  # fmt: skip
    right, bottom, middle = left + size * Tk, top - size * Tq, top - size * Tq / 2
    ax.text((left + right) / 2, bottom - 0.15, f"weights: Tq × Tk = {Tq} × {Tk}", ha="center", va="top", fontsize=9.5)
    arrow(ax, [(2.3, 0.0), (left + 0.3, top + 0.05)])  # the queries
    arrow(ax, [(9.6, 0.0), (right - 0.3, top + 0.05)])  # the keys
    box(ax, 12.9, middle, 4.6, 0.6, f"output = weights @ V: {Tq} rows", "norm", size=9.5)
    arrow(ax, [(right + 0.1, middle), (10.6, middle)])
    arrow(ax, [(13.4, 0.0), (13.4, middle + 0.3)])  # the values
    ax.text(0.1, -3.1, "Queries come from the decoder; keys and values from the encoder's memory.", ha="left",
            va="center", fontsize=9.5, color=INK)  # fmt: skip
    ax.text(0.1, -3.7, "One output row per decoder token, whatever the length of the source.", ha="left",
            va="center", fontsize=9.5, color="#555555")  # fmt: skip
    return fig


# ------------------------------------------------------------------------------------------------------------
# Lesson 05
# ------------------------------------------------------------------------------------------------------------

_HEAD_KINDS = ("attention", "ffn", "embed")  # one colour per head


def head_split_merge() -> Figure:
    """Lesson 05: (B, T, H·D) --view--> (B, T, H, D) --transpose(1, 2)--> (B, H, T, D): head h owns channels
    h·D..(h+1)·D of every token; merge_heads undoes it. Token t, channel c holds 10t + c, so each entry says where
    it came from."""
    tiny, heads = split_example()  # (1, 2, 6), (1, 3, 2, 2)
    merged = merge_heads(heads)  # (1, 2, 6)
    T, C = tiny.shape[1:]
    D = C // SPLIT_HEADS
    fig, ax = canvas(11.2, 2.3, (-1.2, 20.2), (-2.3, 1.9))

    def row_of_channels(left: float, top: float, values: torch.Tensor, title: str) -> None:
        ax.text(left + 0.32 * C, top + 0.55, title, ha="center", va="bottom", fontsize=9.5, color=INK)
        for t in range(T):
            ax.text(left - 0.15, top - 0.5 * t, f"t{t}", ha="right", va="center", fontsize=8.5, color="#555555")
            for c in range(C):
                _cell(ax, left + 0.32 + 0.64 * c, top - 0.5 * t, str(int(values[0, t, c])), _HEAD_KINDS[c // D])
        for h in range(SPLIT_HEADS):
            ax.text(left + 0.64 * (h * D + D / 2), top + 0.3, f"head {h}", ha="center", va="center", fontsize=8,
                    color=COLOURS[_HEAD_KINDS[h]][1])  # fmt: skip

    row_of_channels(0.0, 0.6, tiny, "x  (B, T, H·D) = (1, 2, 6)")
    arrow(ax, [(4.05, 0.35), (5.3, 0.35)])
    ax.text(4.7, 0.6, "view(1, 2, 3, 2)\ntranspose(1, 2)", ha="center", va="bottom", fontsize=8)
    ax.text(8.4, 1.15, "split_heads → (B, H, T, D) = (1, 3, 2, 2)", ha="center", va="bottom", fontsize=9.5)
    for h in range(SPLIT_HEADS):
        left = 5.8 + 2.0 * h
        colour = COLOURS[_HEAD_KINDS[h]][1]
        ax.text(left + 0.64, 0.75, f"head {h}", ha="center", va="center", fontsize=8.5, color=colour)
        for t in range(T):
            if h == 0:
                ax.text(left - 0.15, 0.35 - 0.5 * t, f"t{t}", ha="right", va="center", fontsize=8.5, color="#555555")
            for d in range(D):
                _cell(ax, left + 0.32 + 0.64 * d, 0.35 - 0.5 * t, str(int(heads[0, h, t, d])), _HEAD_KINDS[h])
    arrow(ax, [(11.9, 0.35), (13.2, 0.35)])
    ax.text(12.55, 0.75, "merge_heads", ha="center", va="bottom", fontsize=8.5)
    row_of_channels(13.9, 0.6, merged, "merged  (1, 2, 6): x again")
    ax.text(
        -1.1,
        -1.05,
        "Each head gets its own D = 2 channels of every token (head 0: channels 0–1 of t0 and of t1), and a batched "
        "matmul\nthen attends all heads at once. Without the transpose, view(1, 3, 2, 2) would give head 0 "
        "channels 0–3 of t0 alone:\nthe right shape, the wrong numbers.",
        ha="left",
        va="top",
        fontsize=9.5,
        color=INK,
    )
    return fig


def qkv_channels_per_head(d_model: int = QKV_D_MODEL, n_heads: int = QKV_HEADS, per_head_layout: bool = False):
    """Which of qkv's 3·d_model output channels head h reads as its queries, keys and values: {h: (q, k, v)}, each a
    list of channel numbers. The course's layout is [q | k | v] (split, then split_heads, as MultiHeadAttention
    does); `per_head_layout=True` is the bug that reads the output as [q_0 k_0 v_0 | q_1 k_1 v_1 | ...]."""
    channels = torch.arange(3 * d_model).reshape(1, 1, 3 * d_model)  # (B=1, T=1, 3*d_model): channel c holds c
    D = d_model // n_heads
    if per_head_layout:
        per_head = channels.view(1, 1, n_heads, 3 * D).transpose(1, 2)  # (1, H, 1, 3D): head h's block of 3D
        q, k, v = per_head.split(D, dim=-1)  # (1, H, 1, D) each
    else:
        q, k, v = (split_heads(part, n_heads) for part in channels.split(d_model, dim=-1))  # (1, H, 1, D) each
    return {h: tuple(t[0, h, 0].tolist() for t in (q, k, v)) for h in range(n_heads)}


def fused_qkv_layout() -> Figure:
    """Lesson 05: the fused projection qkv = nn.Linear(d_model, 3·d_model) writes [q | k | v], each d_model channels
    with the heads contiguous inside each part; head h reads channels h·D..(h+1)·D of q, of k and of v. Reading the
    output per head instead, [q_h | k_h | v_h], gives the same shapes and other numbers."""
    d_model, H = QKV_D_MODEL, QKV_HEADS
    D = d_model // H
    fig, ax = canvas(11.4, 4.3, (-2.3, 17.3), (-5.5, 1.9))
    ax.text(-2.2, 1.55, f"qkv(x) for one token: 3 · d_model = {3 * d_model} channels (d_model = {d_model}, "
            f"{H} heads of D = {D})", ha="left", va="center", fontsize=FONT, weight="bold", color=INK)  # fmt: skip
    for c in range(3 * d_model):
        part, within = divmod(c, d_model)
        _cell(ax, 0.5 + 0.86 * c, 0.3, str(c), _HEAD_KINDS[within // D], w=0.8, h=0.5, size=9)
    for part, name in enumerate("qkv"):
        left, right = 0.1 + 0.86 * d_model * part, 0.9 + 0.86 * (d_model * (part + 1) - 1)
        ax.plot([left, left, right, right], [0.75, 0.85, 0.85, 0.75], color=INK, linewidth=1.2)
        ax.text((left + right) / 2, 1.05, f"{name}: channels {d_model * part}–{d_model * (part + 1) - 1}",
                ha="center", va="center", fontsize=9.5, color=INK)  # fmt: skip
    ax.text(-2.2, 0.3, "channel", ha="left", va="center", fontsize=9, color="#555555")
    ax.text(-2.2, -0.55, "qkv(x).split(d_model), then split_heads on q, k and v: each head reads its D channels of "
            "each part", ha="left", va="center", fontsize=9.5, color=INK)  # fmt: skip
    right_way = qkv_channels_per_head()
    wrong_way = qkv_channels_per_head(per_head_layout=True)
    for h in range(H):
        q, k, v = right_way[h]
        text = f"head {h}:  q ← {q[0]}, {q[1]}   k ← {k[0]}, {k[1]}   v ← {v[0]}, {v[1]}"
        box(ax, 2.6 + 5.3 * h, -1.35, 5.1, 0.6, text, _HEAD_KINDS[h], size=8.5)
    ax.text(-2.2, -2.45, "The bug: reading the output per head, [q_0 k_0 v_0 | q_1 k_1 v_1 | ...], "
            "as a view(B, T, H, 3·D) would", ha="left", va="center", fontsize=9.5, color=INK)  # fmt: skip
    for h in range(H):
        q, k, v = wrong_way[h]
        text = f"head {h}:  q ← {q[0]}, {q[1]}   k ← {k[0]}, {k[1]}   v ← {v[0]}, {v[1]}"
        box(ax, 2.6 + 5.3 * h, -3.25, 5.1, 0.6, text, "output", size=8.5)
    ax.text(
        -2.2,
        -4.5,
        "Same shapes, other numbers, and nothing crashes: head 0 would take channels 2–3 (head 1's queries) as its "
        "keys and 4–5\n(head 2's queries) as its values. nn.MultiheadAttention's in_proj_weight has the course's "
        "layout (the query rows, then the key\nrows, then the value rows), so weights copy across unchanged.",
        ha="left",
        va="top",
        fontsize=9.5,
        color=INK,
    )
    return fig
