"""Architecture pictures of lessons 04-08, drawn bottom to top as in the papers (the input enters at the bottom).

transformer_block_post_ln_vs_pre_ln  the 2017 post-LN block next to GPT-2's pre-LN block (lesson 06)
residual_stream                      a pre-LN stack seen as one residual stream that sublayers read and add to
                                     (lesson 06)
encoder_decoder_data_flow            the original encoder-decoder transformer, cross-attention wiring included
                                     (lesson 04 shows it where cross-attention is introduced; lesson 07 builds it)
statquest_decoder                    lesson 08's toy decoder-only model
"""

from __future__ import annotations

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from course_lib.diagrams.draw import COLOURS, FONT, INK, STREAM, add, arrow, box, canvas, stream

__all__ = ["transformer_block_post_ln_vs_pre_ln", "residual_stream", "encoder_decoder_data_flow", "statquest_decoder"]


# ------------------------------------------------------------------------------------------------------------
# Post-LN and pre-LN blocks
# ------------------------------------------------------------------------------------------------------------


def _bypasses(ax: Axes, x: float, adds: tuple[float, float]) -> None:
    """The residual stream of a block whose column is at `x`: around each sublayer (left of it) into its add."""
    by, band = x - 1.45, [(x, 0.35)]
    for start, end in zip((0.85, 4.3), adds, strict=True):
        arrow(ax, [(x, start), (by, start), (by, end), (x - 0.2, end)], color=STREAM, width=2.2)
        band += [(x, start), (by, start), (by, end), (x, end)]
    stream(ax, [*band, (x, 8.2)])


def _post_ln_column(ax: Axes, x: float) -> None:
    arrow(ax, [(x, 0.35), (x, 1.25)])
    box(ax, x, 1.65, 2.2, 0.8, "Multi-head\nattention", "attention")
    arrow(ax, [(x, 2.05), (x, 2.7)])
    add(ax, x, 2.9)
    arrow(ax, [(x, 3.1), (x, 3.45)])
    box(ax, x, 3.7, 2.2, 0.5, "LayerNorm", "norm")
    arrow(ax, [(x, 3.95), (x, 4.75)])
    box(ax, x, 5.15, 2.2, 0.8, "Feed-forward", "ffn")
    arrow(ax, [(x, 5.55), (x, 6.2)])
    add(ax, x, 6.4)
    arrow(ax, [(x, 6.6), (x, 6.95)])
    box(ax, x, 7.2, 2.2, 0.5, "LayerNorm", "norm")
    arrow(ax, [(x, 7.45), (x, 8.2)])
    _bypasses(ax, x, (2.9, 6.4))  # the stream then goes on through each LayerNorm


def _pre_ln_column(ax: Axes, x: float) -> None:
    arrow(ax, [(x, 0.35), (x, 1.25)])
    box(ax, x, 1.5, 2.2, 0.5, "LayerNorm", "norm")
    arrow(ax, [(x, 1.75), (x, 2.1)])
    box(ax, x, 2.5, 2.2, 0.8, "Multi-head\nattention", "attention")
    arrow(ax, [(x, 2.9), (x, 3.35)])
    add(ax, x, 3.55)
    arrow(ax, [(x, 3.75), (x, 4.75)])
    box(ax, x, 5.0, 2.2, 0.5, "LayerNorm", "norm")
    arrow(ax, [(x, 5.25), (x, 5.6)])
    box(ax, x, 6.0, 2.2, 0.8, "Feed-forward", "ffn")
    arrow(ax, [(x, 6.4), (x, 6.85)])
    add(ax, x, 7.05)
    arrow(ax, [(x, 7.25), (x, 8.2)])
    _bypasses(ax, x, (3.55, 7.05))  # around every sublayer: nothing but additions touch the stream


def transformer_block_post_ln_vs_pre_ln() -> Figure:
    """One transformer block two ways: post-LN (Vaswani et al., 2017) and pre-LN (GPT-2), for lesson 06.

    Post-LN normalises after each residual add, so the residual stream itself passes through LayerNorm. Pre-LN
    normalises only the input of each sublayer: the stream is changed by nothing but additions, which is why
    deep pre-LN stacks train without a learning-rate warm-up (and why GPT-2 adds one final LayerNorm on top).
    """
    fig, ax = canvas(8.0, 7.0, (-0.35, 9.65), (-0.95, 9.8))
    columns = [
        (2.75, "Post-LN  (2017 transformer)", "LayerNorm after each residual add:\nthe stream passes through it"),
        (7.45, "Pre-LN  (GPT-2)", "LayerNorm before each sublayer:\nonly additions touch the stream"),
    ]
    for (x, title, subtitle), column in zip(columns, [_post_ln_column, _pre_ln_column], strict=True):
        column(ax, x)
        ax.text(x - 0.2, 9.45, title, ha="center", va="center", fontsize=FONT + 2, fontweight="bold", color=INK)
        ax.text(x - 0.2, 8.8, subtitle, ha="center", va="center", fontsize=FONT, color=INK, style="italic")
        ax.text(x, 0.1, "x  (from the previous block)", ha="center", va="center", fontsize=FONT - 1, color=INK)
        ax.text(x + 0.15, 8.0, "to the next block", ha="left", va="center", fontsize=FONT - 1, color=INK)
    ax.plot([5.1, 5.1], [0.2, 8.3], color="#cccccc", linewidth=1, linestyle=(0, (4, 4)))
    # Legend, under both columns.
    stream(ax, [(0.6, -0.6), (1.2, -0.6)])
    ax.plot([0.6, 1.2], [-0.6, -0.6], color=STREAM, linewidth=2.2)
    ax.text(1.4, -0.6, "residual stream", va="center", fontsize=FONT - 1, color=INK)
    add(ax, 3.55, -0.6, r=0.16)
    ax.text(3.85, -0.6, "residual add", va="center", fontsize=FONT - 1, color=INK)
    ax.text(5.6, -0.6, "GPT-2 adds one LayerNorm\nafter its last block", va="center", fontsize=FONT - 1, color=INK)
    return fig


def residual_stream() -> Figure:
    """A pre-LN stack as one residual stream, for lesson 06: the embeddings enter at the bottom, every sublayer
    reads a normalised copy of the stream and adds its output back, and the stream reaches the output head.

    Only additions touch the stream, so the gradient of the loss reaches every block (and the embeddings) along
    the straight path, whatever the depth: that is what residual connections buy.
    """
    fig, ax = canvas(7.2, 7.4, (-0.2, 9.2), (-0.35, 9.1))
    sx = 2.2  # the stream's column
    stream(ax, [(sx, 0.55), (sx, 8.25)])
    box(ax, sx, 0.25, 3.4, 0.6, "token embeddings + positions", "embed", size=FONT - 1)
    arrow(ax, [(sx, 0.55), (sx, 8.3)], color=STREAM, width=2.2)
    box(ax, sx, 8.6, 3.4, 0.6, "final LayerNorm → logits", "output", size=FONT - 1)
    sublayers = [("Attention", "attention"), ("MLP", "ffn"), ("Attention", "attention"), ("MLP", "ffn")]
    for i, (label, kind) in enumerate(sublayers):
        y = 1.3 + 1.7 * i  # where the branch leaves the stream; its add is 1.0 higher
        arrow(ax, [(sx, y), (3.9, y)])
        box(ax, 4.55, y, 1.3, 0.46, "LayerNorm", "norm", size=FONT - 2)
        arrow(ax, [(5.2, y), (5.75, y)])
        box(ax, 6.55, y, 1.6, 0.6, label, kind, size=FONT - 1)
        arrow(ax, [(6.55, y + 0.3), (6.55, y + 1.0), (sx + 0.2, y + 1.0)])
        add(ax, sx, y + 1.0)
        if i % 2 == 0:
            label = f"block {i // 2 + 1}"
            ax.text(0.25, y + 1.35, label, ha="center", va="center", fontsize=FONT, color=INK, rotation=90)
            ax.plot([0.55, 0.55], [y - 0.2, y + 2.9], color="#999999", linewidth=1.2)
    ax.text(sx - 0.35, 4.65, "residual stream", ha="right", va="center", fontsize=FONT, color=STREAM, rotation=90)
    notes = [
        (0.2, "each sublayer reads a normalised copy\nand adds its output back:\nx ← x + sublayer(LayerNorm(x))"),
        (8.6, "the gradient flows back along the\nstream, through additions only"),
    ]
    for y, text in notes:
        ax.text(6.55, y, text, ha="center", va="center", fontsize=FONT - 1, color=INK, style="italic")
    return fig


# ------------------------------------------------------------------------------------------------------------
# The encoder-decoder transformer
# ------------------------------------------------------------------------------------------------------------


def _tokens(ax: Axes, x: float, y: float, words: list[str], first: str = "token") -> None:
    widths = [0.4 + 0.15 * len(w) for w in words]
    left = x - (sum(widths) + 0.12 * (len(words) - 1)) / 2
    for i, (word, w) in enumerate(zip(words, widths, strict=True)):
        box(ax, left + w / 2, y, w, 0.46, word, first if i == 0 else "token", size=FONT - 1)
        left += w + 0.12


def _embedding(ax: Axes, x: float, side: float) -> None:
    """Embedding (× √d_model) plus sinusoidal positions, from y = 0.7 to the stack at y = 3.0."""
    arrow(ax, [(x, 0.7), (x, 1.1)])
    box(ax, x, 1.4, 3.0, 0.6, "Embedding × √d_model", "embed", size=FONT - 1)
    arrow(ax, [(x, 1.7), (x, 2.15)])
    add(ax, x, 2.35)
    px = x + side * 2.4
    box(ax, px, 2.35, 1.55, 0.66, "sinusoidal\npositions", "embed", size=FONT - 1)
    arrow(ax, [(px - side * 0.78, 2.35), (x + side * 0.2, 2.35)])
    arrow(ax, [(x, 2.55), (x, 3.0)])


def _stack(ax: Axes, x: float, top: float, name: str, side: float) -> None:
    """The frame around a stack of N identical layers, from y = 3.0 to `top`, its name outside on `side`."""
    ax.add_patch(
        FancyBboxPatch(
            (x - 1.8, 3.0),
            3.6,
            top - 3.0,
            boxstyle="round,pad=0,rounding_size=0.2",
            facecolor="#f5f5f5",
            edgecolor="#999999",
            linewidth=1.4,
            zorder=1,
        )
    )
    lx, ly = x + side * 2.75, (3.0 + top) / 2
    ax.text(lx, ly + 0.22, name, ha="center", va="center", fontsize=FONT + 2, color=INK, fontweight="bold")
    ax.text(lx, ly - 0.25, "N × layers", ha="center", va="center", fontsize=FONT, color=INK)


def encoder_decoder_data_flow() -> Figure:
    """The original transformer's data flow (Vaswani et al., 2017): lesson 04 shows it at cross-attention,
    lesson 07 builds it.

    The encoder turns the source tokens into the memory, one vector per source token. The decoder reads the
    target tokens shifted right (BOS first), and in each layer its cross-attention takes the queries from the
    decoder and the keys and values from the encoder's memory. Every sublayer is wrapped in a residual add and a
    LayerNorm (post-LN, see `transformer_block_post_ln_vs_pre_ln`), left out here to show the data flow.
    """
    fig, ax = canvas(8.6, 7.8, (-1.6, 12.3), (-0.5, 11.85))
    ex, dx = 2.0, 8.7
    small = FONT - 1
    # Encoder, left: the whole source at once, into the memory.
    _tokens(ax, ex, 0.45, ["Your", "journey", "starts"])
    ax.text(ex, -0.2, "source tokens", ha="center", va="center", fontsize=small, color=INK)
    _embedding(ax, ex, side=-1)
    _stack(ax, ex, 5.9, "Encoder", side=-1)
    box(ax, ex, 3.85, 3.0, 0.8, "Self-attention", "attention")
    arrow(ax, [(ex, 4.25), (ex, 4.75)])
    box(ax, ex, 5.15, 3.0, 0.8, "Feed-forward", "ffn")
    arrow(ax, [(ex, 5.55), (ex, 6.6)])
    box(ax, ex, 6.9, 3.0, 0.6, "memory", "output")
    ax.text(ex, 7.5, "one vector per source token", ha="center", va="center", fontsize=small, style="italic")
    note = "Every sublayer also has a residual\nadd and a LayerNorm (not drawn)."
    ax.text(ex, 11.0, note, ha="center", va="center", fontsize=small, color="#666666", style="italic")
    # Decoder, right: the target so far, shifted right, reads the memory through cross-attention.
    _tokens(ax, dx, 0.45, ["<BOS>", "Ton", "voyage"], first="bos")
    ax.text(dx, -0.2, "target tokens, shifted right (BOS first)", ha="center", va="center", fontsize=small)
    _embedding(ax, dx, side=1)
    _stack(ax, dx, 7.7, "Decoder", side=1)
    box(ax, dx, 3.75, 3.0, 0.8, "Masked\nself-attention", "attention")
    arrow(ax, [(dx, 4.15), (dx, 4.95)])
    ax.text(dx + 0.12, 4.55, "queries Q", ha="left", va="center", fontsize=small, color=INK, fontweight="bold")
    box(ax, dx, 5.45, 3.0, 1.0, "Cross-attention\nQ from the decoder\nK, V from the memory", "cross", size=small)
    arrow(ax, [(dx, 5.95), (dx, 6.5)])
    box(ax, dx, 6.9, 3.0, 0.8, "Feed-forward", "ffn")
    # The memory feeds the cross-attention of every decoder layer: keys and values, never queries.
    mem = COLOURS["cross"][1]
    arrow(ax, [(ex + 1.5, 6.9), (5.3, 6.9), (5.3, 5.45), (dx - 1.5, 5.45)], color=mem, width=2.6)
    ax.text(5.42, 6.2, "keys K,\nvalues V", ha="left", va="center", fontsize=small, color=mem, fontweight="bold")
    ax.text(5.42, 5.75, "(every layer)", ha="left", va="center", fontsize=small - 1, color=mem)
    # Output head: one distribution over the vocabulary per target position.
    arrow(ax, [(dx, 7.3), (dx, 8.25)])
    box(ax, dx, 8.6, 3.0, 0.7, "Linear\nd_model → vocabulary", "output", size=small)
    arrow(ax, [(dx, 8.95), (dx, 9.35)])
    box(ax, dx, 9.65, 3.0, 0.6, "Softmax", "output")
    arrow(ax, [(dx, 9.95), (dx, 10.35)])
    for i, p in enumerate([0.15, 0.7, 0.3, 0.1, 0.45, 0.2, 0.05]):
        ax.add_patch(FancyBboxPatch((dx - 0.95 + i * 0.28, 10.45), 0.2, p, boxstyle="square,pad=0", color="#666666"))
    ax.text(dx, 11.5, "next-token probabilities", ha="center", va="center", fontsize=FONT, color=INK)
    return fig


def statquest_decoder() -> Figure:
    """Lesson 08's toy decoder-only model (StatQuest's): ids -> embedding + positions -> masked self-attention
    with a residual add -> a linear layer to the five-word vocabulary. d_model = 2, one layer, one head."""
    fig, ax = canvas(5.6, 6.2, (-3.2, 4.2), (-0.6, 7.6))
    small = FONT - 1
    _tokens(ax, 0, 0.1, ["what", "is", "statquest", "<EOS>"])
    ax.text(0, -0.45, "prompt ids (B, T)", ha="center", va="center", fontsize=small, color=INK)
    arrow(ax, [(0, 0.35), (0, 0.8)])
    box(ax, 0, 1.1, 3.0, 0.6, "Embedding  we (5 × 2)", "embed", size=small)
    arrow(ax, [(0, 1.4), (0, 1.85)])
    add(ax, 0, 2.05)
    box(ax, 2.6, 2.05, 1.6, 0.66, "sinusoidal\npositions pe", "embed", size=small)
    arrow(ax, [(1.8, 2.05), (0.2, 2.05)])
    arrow(ax, [(0, 2.25), (0, 2.9)])
    box(ax, 0, 3.3, 3.0, 0.8, "Masked self-attention\n(True = may attend)", "attention", size=small)
    arrow(ax, [(0, 3.7), (0, 4.3)])
    add(ax, 0, 4.5)
    arrow(ax, [(0, 2.6), (-2.0, 2.6), (-2.0, 4.5), (-0.2, 4.5)], color=STREAM, width=2.2)
    ax.text(-2.1, 3.55, "residual", ha="right", va="center", fontsize=small, color=STREAM, rotation=90)
    arrow(ax, [(0, 4.7), (0, 5.2)])
    box(ax, 0, 5.5, 3.0, 0.6, "Linear fc_layer (2 → 5)", "output", size=small)
    arrow(ax, [(0, 5.8), (0, 6.3)])
    ax.text(
        0,
        6.6,
        'logits (B, T, 5): argmax at the last\nposition = next word ("awesome")',
        ha="center",
        va="center",
        fontsize=small,
        color=INK,
    )
    return fig


# ------------------------------------------------------------------------------------------------------------
# images/: `make images`
