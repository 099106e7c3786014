"""Lesson 09's picture of the GPT a learner assembles, and whose class each part is.

your_gpt_stack   token + position embeddings -> dropout -> n_layers TransformerBlocks (ln1, MultiHeadAttention,
                 ln2, FeedForward, each sublayer inside a residual connection) -> ln_f -> tied lm_head, every box
                 labelled with the lesson whose exercise wrote it (OWNERS), so the picture says which classes are yours
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from course_lib.diagrams.draw import COLOURS, FONT, INK, STREAM, add, arrow, box, canvas, stream

__all__ = ["OWNERS", "your_gpt_stack"]

# Which exercise of which lesson wrote each class of the lesson's GPT (the learner's, where their answer passed).
OWNERS = {
    "GPT": "lesson 09",
    "TransformerBlock": "lesson 06",
    "FeedForward": "lesson 06",
    "MultiHeadAttention": "lesson 05",
}
_YOURS = "#7d5ba6"  # the ink of the "yours" labels


def _owner(ax, x: float, y: float, name: str, size: float) -> None:
    ax.text(x, y, f"your {name}\n({OWNERS[name]})", ha="left", va="center", fontsize=size, color=_YOURS, style="italic")


def your_gpt_stack() -> Figure:
    """Lesson 09: the GPT of exercise 5 bottom to top, with its module names. tok_emb and pos_emb rows are added
    and pass `drop`; n_layers pre-LN TransformerBlocks (lesson 06) hold ln1, a causal MultiHeadAttention (lesson
    05), ln2 and a FeedForward (lesson 06), each sublayer inside a residual connection; ln_f and lm_head, whose
    weight is tok_emb's, give the logits. Each class is labelled with the lesson in which you wrote it."""
    fig, ax = canvas(9.6, 10.4, (-4.6, 7.2), (-0.45, 12.3))
    small = FONT - 1
    x = 0.0
    # The GPT class: a frame around everything it owns.
    ax.add_patch(
        FancyBboxPatch(
            (x - 4.35, 0.65), 11.3, 10.35, boxstyle="round,pad=0,rounding_size=0.25",
            facecolor="none", edgecolor=_YOURS, linewidth=1.6, linestyle="--", zorder=0,
        )
    )  # fmt: skip
    ax.text(
        x + 6.8,
        10.7,
        "your GPT\n(lesson 09, exercise 5)",
        ha="right",
        va="center",
        fontsize=small,
        color=_YOURS,
        style="italic",
    )
    box(ax, x, 0.05, 3.6, 0.5, "idx: token ids (B, T)", "token", size=small)
    arrow(ax, [(x, 0.3), (x, 0.75), (-1.9, 0.75), (-1.9, 1.05)])
    arrow(ax, [(x, 0.3), (x, 0.75), (1.9, 0.75), (1.9, 1.05)])
    box(ax, -1.9, 1.45, 3.3, 0.8, "tok_emb\nnn.Embedding(V, d_model)", "embed", size=small)
    box(ax, 1.9, 1.45, 3.3, 0.8, "pos_emb, rows 0..T-1\nnn.Embedding(context, d_model)", "embed", size=small)
    arrow(ax, [(-1.9, 1.85), (-1.9, 2.3), (x - 0.2, 2.3)])
    arrow(ax, [(1.9, 1.85), (1.9, 2.3), (x + 0.2, 2.3)])
    add(ax, x, 2.3)
    arrow(ax, [(x, 2.5), (x, 2.75)])
    box(ax, x, 2.98, 2.6, 0.42, "drop: nn.Dropout", "output", size=small)
    # One TransformerBlock, framed, repeated n_layers times.
    ax.add_patch(
        FancyBboxPatch(
            (x - 2.5, 3.55), 5.0, 4.85, boxstyle="round,pad=0,rounding_size=0.2",
            facecolor="#f5f5f5", edgecolor="#999999", linewidth=1.4, zorder=0,
        )
    )  # fmt: skip
    ax.text(x + 2.7, 8.05, "× n_layers", ha="left", va="center", fontsize=FONT + 2, color=INK, fontweight="bold")
    ax.text(x + 2.7, 3.95, "blocks: an nn.ModuleList", ha="left", va="center", fontsize=small, color=INK)
    _owner(ax, x + 2.7, 6.1, "TransformerBlock", small)
    stream(ax, [(x, 3.2), (x, 8.9)])
    arrow(ax, [(x, 3.19), (x, 3.85)])
    box(ax, x, 4.08, 2.4, 0.42, "ln1: nn.LayerNorm", "norm", size=small)
    arrow(ax, [(x, 4.29), (x, 4.55)])
    box(ax, x, 4.95, 3.6, 0.72, "attn: causal\nMultiHeadAttention", "attention", size=small)
    _owner(ax, x + 2.7, 4.95, "MultiHeadAttention", small)
    arrow(ax, [(x, 5.31), (x, 5.62)])
    add(ax, x, 5.82)
    arrow(ax, [(x, 6.02), (x, 6.3)])
    box(ax, x, 6.52, 2.4, 0.42, "ln2: nn.LayerNorm", "norm", size=small)
    arrow(ax, [(x, 6.73), (x, 7.0)])
    box(ax, x, 7.4, 3.6, 0.72, "mlp: FeedForward\nd_model → 4·d_model → d_model", "ffn", size=small)
    _owner(ax, x + 2.7, 7.4, "FeedForward", small)
    arrow(ax, [(x, 7.76), (x, 8.0)])
    add(ax, x, 8.2)
    for start, end in ((3.6, 5.82), (6.1, 8.2)):  # the residual stream around each sublayer
        arrow(ax, [(x, start), (x - 2.25, start), (x - 2.25, end), (x - 0.2, end)], color=STREAM, width=2.0)
    ax.text(x - 2.35, 4.8, "residual", ha="right", va="center", fontsize=small, color=STREAM, rotation=90)
    # Final LayerNorm and the tied head.
    arrow(ax, [(x, 8.4), (x, 8.95)])
    box(ax, x, 9.2, 2.6, 0.45, "ln_f: nn.LayerNorm", "norm", size=small)
    arrow(ax, [(x, 9.43), (x, 9.7)])
    box(ax, x, 10.1, 3.8, 0.7, "lm_head: nn.Linear(d_model, V,\nbias=False)", "output", size=small)
    arrow(ax, [(x, 10.45), (x, 11.45)])
    box(ax, x, 11.75, 3.6, 0.5, "logits (B, T, V)", "token", size=small)
    tie = COLOURS["embed"][1]
    ax.plot([-1.9, -3.9, -3.9, -3.55], [10.1, 10.1, 1.45, 1.45], color=tie, linewidth=1.8, linestyle="--", zorder=2)
    ax.text(-4.15, 5.6, "tied: lm_head.weight is tok_emb.weight", ha="center", va="center", fontsize=small,
            color=tie, rotation=90)  # fmt: skip
    return fig
