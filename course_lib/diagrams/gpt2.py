"""Lesson 10's pictures: GPT-2's stack with its sizes, and what a KV cache keeps from one step to the next.

gpt2_architecture   token + learned position embeddings -> N pre-LN blocks -> final LayerNorm -> tied head,
                    labelled with GPT-2 small's sizes (read from GPT2Config.small(), so picture and code agree)
kv_cache_step       one generation step with a cache: the cached keys and values of the earlier positions are
                    reused, the new token's k and v are appended, and only its query attends
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from course_lib.diagrams.draw import COLOURS, FONT, INK, STREAM, add, arrow, box, canvas, stream
from course_lib.gpt2 import GPT2Config

__all__ = ["gpt2_architecture", "kv_cache_step", "CACHED_POSITIONS"]

CACHED_POSITIONS = 5  # positions already in the cache in kv_cache_step's picture


def _n(value: int) -> str:
    return f"{value:,}"


def gpt2_architecture() -> Figure:
    """Lesson 10: GPT-2 small bottom to top, with the course's names. Token ids pick rows of the token table
    (tok_emb) and positions rows of a learned position table (pos_emb); their sum enters n_layers pre-LN blocks
    (lesson 06), then a final LayerNorm and a linear head whose weight *is* the token table (weight tying),
    giving one logit per vocabulary entry."""
    c = GPT2Config.small()
    V, Tctx, C, L, H = c.vocab_size, c.context_length, c.d_model, c.n_layers, c.n_heads
    fig, ax = canvas(8.4, 10.0, (-4.6, 5.2), (-0.45, 11.3))
    small = FONT - 1
    x = 0.0
    box(ax, x, 0.05, 3.6, 0.5, "token ids (B, T)", "token", size=small)
    # Embeddings: two tables, one row each per token and per position, added.
    arrow(ax, [(x, 0.3), (x, 0.6), (-1.9, 0.6), (-1.9, 0.95)])
    arrow(ax, [(x, 0.3), (x, 0.6), (1.9, 0.6), (1.9, 0.95)])
    box(ax, -1.9, 1.4, 3.2, 0.9, f"token embedding tok_emb\n{_n(V)} × {_n(C)}", "embed", size=small)
    box(ax, 1.9, 1.4, 3.2, 0.9, f"position embedding pos_emb\n{_n(Tctx)} × {_n(C)} (learned)", "embed", size=small)
    arrow(ax, [(-1.9, 1.85), (-1.9, 2.35), (x - 0.2, 2.35)])
    arrow(ax, [(1.9, 1.85), (1.9, 2.35), (x + 0.2, 2.35)])
    add(ax, x, 2.35)
    # One pre-LN block, framed, repeated n_layers times.
    ax.add_patch(
        FancyBboxPatch(
            (x - 2.3, 2.95), 4.6, 4.75, boxstyle="round,pad=0,rounding_size=0.2",
            facecolor="#f5f5f5", edgecolor="#999999", linewidth=1.4, zorder=0,
        )
    )  # fmt: skip
    ax.text(x + 2.55, 5.55, f"× {L}", ha="left", va="center", fontsize=FONT + 4, color=INK, fontweight="bold")
    ax.text(x + 2.55, 5.0, "pre-LN\nblocks", ha="left", va="center", fontsize=small, color=INK)
    stream(ax, [(x, 2.55), (x, 8.1)])
    arrow(ax, [(x, 2.55), (x, 3.2)])
    box(ax, x, 3.45, 2.6, 0.45, "LayerNorm ln1", "norm", size=small)
    arrow(ax, [(x, 3.68), (x, 3.95)])
    box(ax, x, 4.35, 3.6, 0.75, f"masked multi-head attention\n{H} heads × {C // H} channels", "attention", size=small)
    arrow(ax, [(x, 4.73), (x, 5.0)])
    add(ax, x, 5.2)
    arrow(ax, [(x, 5.4), (x, 5.65)])
    box(ax, x, 5.9, 2.6, 0.45, "LayerNorm ln2", "norm", size=small)
    arrow(ax, [(x, 6.13), (x, 6.4)])
    box(ax, x, 6.8, 3.6, 0.75, f"feed-forward (GELU)\n{_n(C)} → {_n(4 * C)} → {_n(C)}", "ffn", size=small)
    arrow(ax, [(x, 7.18), (x, 7.45)])
    add(ax, x, 7.65)
    for start, end in ((3.05, 5.2), (5.5, 7.65)):  # the residual stream around each sublayer
        arrow(ax, [(x, start), (x - 2.05, start), (x - 2.05, end), (x - 0.2, end)], color=STREAM, width=2.0)
    ax.text(x - 2.15, 4.1, "residual", ha="right", va="center", fontsize=small, color=STREAM, rotation=90)
    # Final LayerNorm and the tied head.
    arrow(ax, [(x, 7.85), (x, 8.3)])
    box(ax, x, 8.55, 2.6, 0.45, "final LayerNorm ln_f", "norm", size=small)
    arrow(ax, [(x, 8.78), (x, 9.1)])
    box(ax, x, 9.45, 3.6, 0.65, f"linear head lm_head\n{_n(C)} → {_n(V)}, no bias", "output", size=small)
    arrow(ax, [(x, 9.78), (x, 10.15)])
    box(ax, x, 10.45, 3.6, 0.5, f"logits (B, T, {_n(V)})", "token", size=small)
    tie = COLOURS["embed"][1]
    ax.plot([-1.8, -3.9, -3.9, -3.5], [9.45, 9.45, 1.4, 1.4], color=tie, linewidth=1.8, linestyle="--", zorder=2)
    ax.text(-4.2, 5.4, "tied: lm_head.weight is tok_emb.weight, one matrix", ha="center", va="center",
            fontsize=small, color=tie, rotation=90)  # fmt: skip
    return fig


def kv_cache_step() -> Figure:
    """Lesson 10: generating the token after position P with a cache. The keys and values of positions 0..P-1 were
    computed at earlier steps and are reused as they are (in a causal model a position never sees later ones, so
    they cannot change); the new token's k and v are appended; its query alone attends to all P + 1 keys."""
    P = CACHED_POSITIONS
    fig, ax = canvas(9.0, 4.6, (-1.9, 11.6), (-1.0, 5.2))
    small = FONT - 1
    new = COLOURS["attention"][1]
    slot = lambda i: 0.5 + 1.05 * i  # noqa: E731 - centre of position i's box
    for name, y in (("K cache", 3.3), ("V cache", 2.3)):
        ax.text(-1.8, y, name, ha="left", va="center", fontsize=FONT, color=INK, fontweight="bold")
        letter = name[0].lower()
        for i in range(P):
            box(ax, slot(i), y, 0.9, 0.6, f"{letter}{i}", "output", size=small)
        box(ax, slot(P), y, 0.9, 0.6, f"{letter}{P}", "attention", size=small)
        box(ax, 7.9, y, 1.6, 0.6, f"{letter}{P} = x{P} W_{letter}", "embed", size=small)
        arrow(ax, [(7.1, y), (slot(P) + 0.45, y)], color=new)
    for i in range(P + 1):
        ax.text(slot(i), 3.8, str(i), ha="center", va="center", fontsize=8, color="#888888")
    ax.text(slot((P - 1) / 2), 4.45, f"positions 0..{P - 1}: from earlier steps, reused",
            ha="center", va="center", fontsize=small, color=INK, style="italic")  # fmt: skip
    ax.text(slot(P), 4.45, "appended", ha="center", va="center", fontsize=small, color=new)
    # The new token feeds its three projections.
    box(ax, 7.9, 1.0, 1.6, 0.6, f"q{P} = x{P} W_q", "attention", size=small)
    box(ax, 10.75, 2.3, 1.3, 0.8, f"new token\nx{P}", "token", size=small)
    ax.plot([10.1, 9.3], [2.3, 2.3], color=INK, linewidth=1.6, zorder=2)
    ax.plot([9.3, 9.3], [1.0, 3.3], color=INK, linewidth=1.6, zorder=2)
    for y in (3.3, 2.3, 1.0):
        arrow(ax, [(9.3, y), (8.7, y)])
    # Its query alone attends, over all P + 1 cached keys and values.
    ax.plot([slot(0) - 0.45, slot(P) + 0.45], [1.75, 1.75], color=new, linewidth=2.0, zorder=2)
    arrow(ax, [(7.1, 1.0), (slot(P // 2), 1.0), (slot(P // 2), 1.7)], color=new)
    ax.text(slot(P // 2), 0.25, f"q{P} attends to positions 0..{P}:\nweights = softmax(q{P} Kᵀ / √D), 1 × {P + 1};  "
            "out = weights @ V", ha="center", va="center", fontsize=small, color=new)  # fmt: skip
    ax.text(4.8, -0.65, "In a causal model a position never sees later ones, so its k and v never change.",
            ha="center", va="center", fontsize=small, color=INK, style="italic")  # fmt: skip
    return fig
