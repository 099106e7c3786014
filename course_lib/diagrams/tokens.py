"""Lessons 01 and 02: text to token ids to vectors, the sliding window, an embedding lookup as a row pick, and a GPT's
input as token vectors plus position vectors."""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from course_lib.diagrams.draw import FONT, INK, arrow, box, canvas

__all__ = [
    "tokenization_pipeline",
    "sliding_window",
    "embedding_row_pick",
    "token_plus_position",
    "PIPELINE_VOCAB",
    "EMBEDDING_TABLE",
    "GPT_INPUT_IDS",
    "TOKEN_TABLE",
    "POSITION_TABLE",
]

# The toy vocabulary the pipeline picture uses, built as lesson 01's build_vocab does (sorted tokens, then the
# two special tokens): each piece's id is its place in this list.
PIPELINE_VOCAB = [*sorted({"the", "cat", "sat", "on", "mat", "."}), "<|endoftext|>", "<|unk|>"]
PIPELINE_TEXT = "the cat sat on the mat."
# The embedding table drawn in lesson 02's picture: 5 ids, 3 dimensions, one decimal (seeded, so the PNG is fixed).
EMBEDDING_TABLE = np.round(np.random.default_rng(2).normal(size=(5, 3)), 1)
EMBEDDING_ID = 3
# Lesson 02's GPT input: a batch of B = 2 sequences of T = 3 ids, a token table (V = 5, C = 2) and a position table
# (context_length = 3, C = 2), one decimal each (seeded, so the PNG is fixed).
GPT_INPUT_IDS = [[4, 0, 2], [2, 2, 1]]
TOKEN_TABLE = np.round(np.random.default_rng(5).normal(size=(5, 2)), 1)
POSITION_TABLE = np.round(np.random.default_rng(6).normal(scale=0.5, size=(3, 2)), 1)


def _pieces(text: str) -> list[str]:
    """Split into words and punctuation, as lesson 01's first tokenizer does."""
    return text.replace(".", " .").split()


def tokenization_pipeline() -> Figure:
    """Lesson 01: text -> pieces -> ids (places in the vocabulary) -> one embedding vector per id."""
    pieces = _pieces(PIPELINE_TEXT)
    ids = [PIPELINE_VOCAB.index(p) for p in pieces]
    n = len(pieces)
    fig, ax = canvas(9.4, 4.6, (-2.4, n * 1.1 + 0.2), (-3.9, 1.3))
    box(ax, n * 0.55, 0.8, n * 1.1 - 0.2, 0.6, f'"{PIPELINE_TEXT}"', "output")
    rows = (("text", 0.8), ("pieces", -0.4), ("ids", -1.5), ("vectors", -2.9))
    for label, y in rows:
        ax.text(-2.3, y, label, ha="left", va="center", fontsize=FONT, weight="bold", color=INK)
    for i, (piece, i_d) in enumerate(zip(pieces, ids, strict=True)):
        x = i * 1.1 + 0.55
        box(ax, x, -0.4, 0.95, 0.55, piece, "token")
        box(ax, x, -1.5, 0.95, 0.55, str(i_d), "bos")
        box(ax, x, -2.9, 0.5, 1.2, "", "embed")
        arrow(ax, [(x, 0.45), (x, -0.1)], width=1.0)
        arrow(ax, [(x, -0.7), (x, -1.2)], width=1.0)
        arrow(ax, [(x, -1.8), (x, -2.25)], width=1.0)
    vocab = ", ".join(f"{p}:{i}" for i, p in enumerate(PIPELINE_VOCAB))
    ax.text(-2.3, -3.75, f"vocabulary  {vocab}", ha="left", va="center", fontsize=8.5, color=INK)
    return fig


def sliding_window_rows(n_tokens: int = 13, context: int = 4, stride: int = 4) -> list[tuple[int, int]]:
    """(first input position, first target position) of each window: inputs t..t+context-1, targets one on."""
    return [(s, s + 1) for s in range(0, n_tokens - context, stride)]


def sliding_window(n_tokens: int = 13, context: int = 4, stride: int = 4) -> Figure:
    """Lesson 01: input windows of `context` ids taken every `stride` positions; each target window is its input
    window moved one position on, so target[t] is the token that follows input[t]."""
    windows = sliding_window_rows(n_tokens, context, stride)
    height = 9.4 * (2.2 + 1.3 * len(windows)) / (n_tokens + 3.0)
    fig, ax = canvas(9.4, height, (-2.6, n_tokens + 0.4), (-1.3 * len(windows) - 0.5, 1.7))
    for i in range(n_tokens):
        box(ax, i + 0.5, 0.7, 0.86, 0.6, f"t{i}", "token")
    ax.text(-2.5, 0.7, "token ids", ha="left", va="center", fontsize=FONT, weight="bold")
    for row, (s, t) in enumerate(windows):
        y = -0.45 - 1.3 * row
        for k in range(context):
            box(ax, s + k + 0.5, y, 0.86, 0.5, f"t{s + k}", "embed", size=9)
            box(ax, t + k + 0.5, y - 0.55, 0.86, 0.5, f"t{t + k}", "attention", size=9)
        ax.text(-2.5, y, f"input {row}", ha="left", va="center", fontsize=9.5)
        ax.text(-2.5, y - 0.55, f"target {row}", ha="left", va="center", fontsize=9.5)
    ax.text(n_tokens + 0.3, 1.25, f"context = {context}, stride = {stride}", ha="right", va="center", fontsize=9.5)
    return fig


def embedding_row_pick() -> Figure:
    """Lesson 02: looking up id 3 picks row 3 of the embedding matrix; one-hot(3) @ matrix gives the same row."""
    table, pick = EMBEDDING_TABLE, EMBEDDING_ID
    rows, cols = table.shape
    one_hot = np.eye(rows)[pick]
    fig, ax = canvas(10.2, 3.8, (-0.4, 13.4), (-rows - 0.9, 1.3))
    ax.text(0.1, 0.8, "one_hot(3)", ha="left", va="center", fontsize=FONT, weight="bold")
    for i, v in enumerate(one_hot):
        box(ax, 0.4 + i * 0.75, 0.0, 0.66, 0.6, f"{v:.0f}", "bos" if i == pick else "token", size=10)
    ax.text(4.25, 0.0, "@", ha="center", va="center", fontsize=14)
    ax.text(5.3, 0.8, "embedding matrix M (5 × 3)", ha="left", va="center", fontsize=FONT, weight="bold")
    for r in range(rows):
        ax.text(5.25, -r - 0.0, f"id {r}", ha="right", va="center", fontsize=9)
        for c in range(cols):
            kind = "embed" if r == pick else "token"
            box(ax, 5.9 + c * 1.1, -r, 1.0, 0.7, f"{table[r, c]:+.1f}", kind, size=10)
    arrow(ax, [(9.3, -pick), (10.0, -pick)])
    ax.text(10.1, -pick + 0.55, "row 3 = one_hot(3) @ M", ha="left", va="center", fontsize=FONT, weight="bold")
    picked = one_hot @ table
    ax.text(10.1, -pick, "  ".join(f"{v:+.1f}" for v in picked), ha="left", va="center", fontsize=10)
    ax.text(
        0.1,
        -rows - 0.5,
        "nn.Embedding(5, 3)(tensor(3)) returns that row without multiplying",
        ha="left",
        va="center",
        fontsize=9.5,
    )
    return fig


def _vector_box(ax, x: float, y: float, values: np.ndarray, kind: str, faded: bool = False) -> None:
    """One vector of C = 2 numbers as a tall box, the numbers stacked."""
    box(ax, x, y, 0.95, 1.0, "\n".join(f"{v:+.1f}" for v in values), kind, size=9.5)
    if faded:  # a position row read again for the next sequence: the same numbers, not a copy in memory
        ax.patches[-1].set_alpha(0.35)
        ax.texts[-1].set_alpha(0.45)


def token_plus_position() -> Figure:
    """Lesson 02: a GPT's input. Each id picks its row of the token table, (B, T) -> (B, T, C); position t adds row t
    of the position table, (T, C), broadcast over the batch: every sequence gets the same position rows."""
    ids = np.array(GPT_INPUT_IDS)  # (B, T)
    tokens = TOKEN_TABLE[ids]  # (B, T, C)
    positions = POSITION_TABLE[: ids.shape[1]]  # (T, C)
    x = tokens + positions  # (B, T, C) + (T, C) -> (B, T, C)
    B, T = ids.shape
    fig, ax = canvas(11.0, 5.4, (-3.2, 14.3), (-2.4 * B - 2.2, 2.1))
    titles = (
        (1.55, f"token vectors\ntoken_embedding(ids): ({B}, {T}, 2)"),
        (6.75, f"position vectors\nposition_embedding(arange(T)): ({T}, 2)"),
        (11.95, f"the model's input x\n(B, T, C) = ({B}, {T}, 2)"),
    )
    for centre, title in titles:
        ax.text(centre, 1.5, title, ha="center", va="center", fontsize=9.5, weight="bold", color=INK)
    for t in range(T):
        for left in (0.0, 5.2, 10.4):
            ax.text(left + 1.55 * t, 0.75, f"t = {t}", ha="center", va="center", fontsize=8.5, color="#555555")
    for b in range(B):
        y = -0.4 - 2.4 * b
        ax.text(-3.1, y, f"sequence {b}\nids {ids[b].tolist()}", ha="left", va="center", fontsize=9.5, color=INK)
        for t in range(T):
            _vector_box(ax, 1.55 * t, y, tokens[b, t], "embed")
            ax.text(1.55 * t, y - 0.75, f"row {ids[b, t]}", ha="center", va="center", fontsize=8, color="#555555")
            _vector_box(ax, 5.2 + 1.55 * t, y, positions[t], "bos", faded=b > 0)
            ax.text(5.2 + 1.55 * t, y - 0.75, f"row {t}", ha="center", va="center", fontsize=8, color="#555555")
            _vector_box(ax, 10.4 + 1.55 * t, y, x[b, t], "ffn")
        ax.text(4.0, y, "+", ha="center", va="center", fontsize=18, color=INK)
        ax.text(9.2, y, "=", ha="center", va="center", fontsize=18, color=INK)
    tables = (
        "token table (V × C = 5 × 2):  "
        + "   ".join(f"{i}: ({a:+.1f}, {c:+.1f})" for i, (a, c) in enumerate(TOKEN_TABLE)),
        "position table (3 × 2):  "
        + "   ".join(f"{i}: ({a:+.1f}, {c:+.1f})" for i, (a, c) in enumerate(POSITION_TABLE)),
        "The same position rows are added to every sequence of the batch (faded: read again, not copied); the same "
        "id gets the same\ntoken vector wherever it stands, and the sum differs by position (sequence 1 holds id 2 at "
        "t = 0 and at t = 1).",
    )
    for i, line in enumerate(tables):
        ax.text(-3.1, -2.4 * B - 0.1 - 0.55 * i, line, ha="left", va="top", fontsize=9, color=INK)
    return fig
