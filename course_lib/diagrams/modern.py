"""Lesson 12's pictures: what changed between GPT-2's block and the block of today's open models.

gpt2_vs_modern_block     GPT-2's pre-LN block beside the modern one (RMSNorm, RoPE on q and k, grouped-query
                         attention, QK-norm, SwiGLU, no biases), each change marked where it happens
grouped_query_attention  which key/value head each query head reads: multi-head, grouped-query, multi-query
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from course_lib.diagrams.draw import COLOURS, FONT, INK, STREAM, add, arrow, box, canvas, stream

__all__ = ["gpt2_vs_modern_block", "grouped_query_attention"]

CHANGED = "#c0392b"  # the labels of what changed


def _labelled(ax: Axes, x: float, y: float, w: float, h: float, label: tuple[str, bool], kind: str) -> None:
    """A box whose label is red when it names a change (label = (text, changed))."""
    text, changed = label
    box(ax, x, y, w, h, "", kind)
    ax.text(x, y, text, ha="center", va="center", fontsize=FONT - 1, color=CHANGED if changed else INK, zorder=4)


def _column(ax: Axes, x: float, labels: dict[str, tuple[str, bool]]) -> None:
    """A pre-norm block from y = 1.3 to 7.6, with the embedding below it and the output above; `labels` names
    its boxes (embed, norm1, attn, norm2, mlp, head), each (text, whether it changed)."""
    _labelled(ax, x, 0.45, 4.3, 0.75, labels["embed"], "embed")
    arrow(ax, [(x, 0.83), (x, 1.65)])
    _labelled(ax, x, 1.9, 2.6, 0.5, labels["norm1"], "norm")
    arrow(ax, [(x, 2.15), (x, 2.5)])
    _labelled(ax, x, 3.05, 4.3, 1.1, labels["attn"], "attention")
    arrow(ax, [(x, 3.6), (x, 3.95)])
    add(ax, x, 4.15)
    arrow(ax, [(x, 4.35), (x, 4.95)])
    _labelled(ax, x, 5.2, 2.6, 0.5, labels["norm2"], "norm")
    arrow(ax, [(x, 5.45), (x, 5.8)])
    _labelled(ax, x, 6.3, 4.3, 1.0, labels["mlp"], "ffn")
    arrow(ax, [(x, 6.8), (x, 7.15)])
    add(ax, x, 7.35)
    arrow(ax, [(x, 7.55), (x, 8.3)])
    _labelled(ax, x, 8.65, 4.3, 0.7, labels["head"], "output")
    by = x - 2.45  # the residual stream's bypass, left of the block
    for start, end in ((1.3, 4.15), (4.55, 7.35)):
        arrow(ax, [(x, start), (by, start), (by, end), (x - 0.2, end)], color=STREAM, width=2.2)
    stream(ax, [(x, 0.83), (x, 1.3), (by, 1.3), (by, 4.15), (x, 4.15), (x, 4.55), (by, 4.55), (by, 7.35),
                (x, 7.35), (x, 8.3)])  # fmt: skip
    ax.text(by - 0.15, 5.75, "× n_layers", ha="right", va="center", fontsize=FONT - 1, color=INK, rotation=90)


def gpt2_vs_modern_block() -> Figure:
    """GPT-2's block (2019) beside a modern open model's (Llama and its successors), for lesson 12.

    The order is the same pre-norm order; what changed is inside the boxes, and the changed words are red: the
    position table is gone (RoPE rotates queries and keys inside attention instead), LayerNorm became RMSNorm, the
    GELU feed-forward became SwiGLU with a narrower hidden layer, fewer key/value heads than query heads, an
    optional RMSNorm on queries and keys, no biases, and often an output head of its own.
    """
    fig, ax = canvas(10.4, 7.4, (-0.1, 11.7), (-1.55, 10.1))
    gpt2 = {
        "embed": ("token embedding\n+ learned position table", False),
        "norm1": ("LayerNorm", False),
        "attn": ("multi-head attention\n12 query heads, 12 key/value heads\nbiases", False),
        "norm2": ("LayerNorm", False),
        "mlp": ("MLP: fc2(GELU(fc1 x))\nhidden 4·d, biases", False),
        "head": ("final LayerNorm → output head\n(tied to the token embedding)", False),
    }
    modern = {
        "embed": ("token embedding\n(no position table)", True),
        "norm1": ("RMSNorm", True),
        "attn": ("attention, RoPE on q and k\n32 query heads, 8 key/value heads\n(QK-norm in some), no biases", True),
        "norm2": ("RMSNorm", True),
        "mlp": ("SwiGLU: w2(silu(w1 x) · w3 x)\nhidden 2.7·d to 3.5·d, no biases", True),
        "head": ("final RMSNorm → output head\n(its own matrix, or tied)", True),
    }
    for x, title, subtitle, labels in (
        (3.1, "GPT-2 (2019)", "pre-LN, learned positions", gpt2),
        (8.9, "A modern open model", "e.g. Llama 3 8B; Qwen, OLMo alike", modern),
    ):
        _column(ax, x, labels)
        ax.text(x - 0.3, 9.75, title, ha="center", va="center", fontsize=FONT + 2, fontweight="bold", color=INK)
        ax.text(x - 0.3, 9.3, subtitle, ha="center", va="center", fontsize=FONT - 1, color=INK, style="italic")
    ax.plot([5.95, 5.95], [0.1, 9.0], color="#cccccc", linewidth=1, linestyle=(0, (4, 4)))
    changes = [
        "Changed, each one a rung of the lesson's ladder: LayerNorm → RMSNorm (no mean, no bias);  learned positions →",
        "RoPE inside attention;  GELU MLP → SwiGLU (same parameters);  fewer key/value heads (grouped-query "
        "attention);",
        "biases dropped;  QK-norm added (OLMo 2, Qwen 3, Gemma 3).  Unchanged: the pre-norm order and the residual "
        "stream.",
    ]
    for row, line in enumerate(changes):
        ax.text(0.2, -0.45 - 0.42 * row, line, ha="left", va="center", fontsize=FONT - 1.5, color=INK)
    return fig


def _heads(ax: Axes, x0: float, title: str, n_query: int, n_kv: int) -> None:
    """One panel: n_query query heads on top, n_kv key/value heads below, each query head wired to the key/value
    head it reads (head h reads key/value head h // (n_query / n_kv))."""
    step, group = 0.42, n_query // n_kv
    kv_step = step * group
    for h in range(n_query):
        qx = x0 + h * step
        kv = h // group
        kx = x0 + kv * kv_step + (group - 1) * step / 2
        ax.plot([qx, kx], [2.55, 1.25], color=COLOURS["attention"][1], linewidth=1.0, zorder=1)
        box(ax, qx, 2.8, 0.34, 0.5, "q", "attention", size=FONT - 2)
    for kv in range(n_kv):
        kx = x0 + kv * kv_step + (group - 1) * step / 2
        width = max(0.34, kv_step - 0.08)
        box(ax, kx, 1.0, width, 0.5, "k v", "ffn", size=FONT - 2)
    centre = x0 + (n_query - 1) * step / 2
    ax.text(centre, 3.55, title, ha="center", va="center", fontsize=FONT, fontweight="bold", color=INK)
    ax.text(centre, 0.35, f"{n_query} query heads, {n_kv} key/value head{'s' if n_kv > 1 else ''}", ha="center",
            va="center", fontsize=FONT - 1.5, color=INK)  # fmt: skip
    ax.text(centre, -0.05, f"KV cache: {n_kv}/{n_query} of multi-head's", ha="center", va="center",
            fontsize=FONT - 1.5, color=CHANGED)  # fmt: skip


def grouped_query_attention() -> Figure:
    """Multi-head (GPT-2, Llama 2 7B), grouped-query (Llama 3, Mistral) and multi-query attention, for lesson 12.

    Every query head keeps its own queries; what is shared is keys and values. Query head h reads key/value head
    h // n_rep, so each group of n_rep consecutive query heads reads one key/value head (what `repeat_kv` builds),
    and the cache a model keeps for generation shrinks by the same factor."""
    fig, ax = canvas(10.0, 3.3, (-0.4, 11.5), (-0.4, 3.9))
    _heads(ax, 0.2, "multi-head", 8, 8)
    _heads(ax, 4.25, "grouped-query", 8, 2)
    _heads(ax, 8.3, "multi-query", 8, 1)
    return fig
