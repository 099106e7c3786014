"""Lesson 01 — pictures of tokenization: coloured token boundaries and the compression curve.

``token_boundaries_html`` shows where a tokenizer cuts a text (one coloured box per token, whitespace made
visible, the id in a tooltip). ``compression_table`` / ``compression_curve`` show how a larger BPE
vocabulary makes sequences shorter: tokens per character against vocabulary size.

Shape legend (no tensors here; for symmetry with the other modules): B batch, T time, H heads,
D head size, C/d_model channels, V vocabulary.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence

from course_lib import _checks
from course_lib.tokenization import N_BYTES, apply_merge, train_bpe

# Light colours that stay readable under black text; neighbours always differ (colour = position % 8).
PALETTE = ("#ffd6a5", "#caffbf", "#9bf6ff", "#bdb2ff", "#ffc6ff", "#fdffb6", "#a0c4ff", "#ffadad")
# How invisible characters are drawn inside a box.
VISIBLE_WHITESPACE = {" ": "·", "\n": "↵", "\t": "→", "\r": "␍"}


def _visible(piece: str | bytes) -> str:
    """The piece as text a reader can see: whitespace and control characters get a visible stand-in."""
    if isinstance(piece, bytes):
        try:
            piece = piece.decode("utf-8")
        except UnicodeDecodeError:  # part of a multi-byte character: show the raw bytes
            return "⟨" + " ".join(f"{byte:02x}" for byte in piece) + "⟩"
    shown = []
    for char in piece:
        if char in VISIBLE_WHITESPACE:
            shown.append(VISIBLE_WHITESPACE[char])
        elif char.isspace() or not char.isprintable():
            shown.append(f"⟨U+{ord(char):04X}⟩")
        else:
            shown.append(char)
    return "".join(shown)


def token_boundaries_html(pieces: Sequence[str | bytes], ids: Sequence[int] | None = None):
    """Each token in its own coloured box; hover a box to see its id. Returns ``IPython.display.HTML``.

    Lesson 01, sections "GPT-2's tokenizer" and "BPE from scratch". ``pieces`` are the tokens' texts (str)
    or bytes (e.g. tiktoken's ``decode_single_token_bytes``); ``ids``, if given, has one id per piece.
    """
    from IPython.display import HTML

    pieces = _checks.items("pieces", pieces, (str, bytes), "str or bytes")
    ids = None if ids is None else _checks.int_list("ids", ids)
    if ids is not None and len(ids) != len(pieces):
        raise ValueError(f"ids must have one id per piece: got {len(ids)} ids for {len(pieces)} pieces")

    boxes = []
    for position, piece in enumerate(pieces):
        tooltip = repr(piece) if ids is None else f"id {ids[position]}: {piece!r}"
        colour = PALETTE[position % len(PALETTE)]
        boxes.append(
            f'<span class="token" title="{html.escape(tooltip, quote=True)}" style="background:{colour};'
            'border:1px solid #8888;border-radius:3px;padding:0 1px;margin:0 1px 2px 0;color:#000">'
            f"{html.escape(_visible(piece))}</span>"
        )
        text = piece.decode("utf-8", errors="replace") if isinstance(piece, bytes) else piece
        if text.endswith("\n"):
            boxes.append("<br>")  # keep the text's line structure
    body = "".join(boxes)
    return HTML(f'<div class="token-boundaries" style="font-family:monospace;line-height:1.9">{body}</div>')


def compression_table(text: str, vocab_sizes: Iterable[int]) -> list[tuple[int, float]]:
    """``(vocab_size, tokens per character)`` for each size, from ONE ``train_bpe`` run at the largest size.

    Lesson 01, section "How big should the vocabulary be?". The first ``k`` merges of a larger vocabulary
    are exactly the merges of a ``256 + k`` vocabulary, so we replay them in order and note the length of
    the sequence after each (it equals ``len(bpe_encode(text, those merges))``).
    """
    if not isinstance(text, str) or not text:
        raise ValueError(f"text must be a non-empty str, got {text!r:.40}")
    sizes = _checks.int_list("vocab_sizes", vocab_sizes, minimum=N_BYTES, non_empty=True)
    merges = train_bpe(text, max(sizes))
    ids = list(text.encode("utf-8"))
    length_after = [len(ids)]  # length_after[k] = sequence length after the first k merges
    for pair, new_id in merges.items():  # dicts keep insertion order: merge id order
        ids = apply_merge(ids, pair, new_id)
        length_after.append(len(ids))
    # when training stopped early, bigger vocabularies add nothing: use the last length
    return [(size, length_after[min(size - N_BYTES, len(merges))] / len(text)) for size in sizes]


def compression_curve(text: str, vocab_sizes: Iterable[int], ax=None):
    """Plot tokens per character (y) against vocabulary size (x); returns ``(fig, ax)``.

    Lesson 01, section "How big should the vocabulary be?". Uses ``compression_table``.
    """
    import matplotlib.pyplot as plt

    table = sorted(compression_table(text, vocab_sizes))
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.5))
    else:
        fig = ax.figure
    sizes = [size for size, _ in table]
    ratios = [ratio for _, ratio in table]
    ax.plot(sizes, ratios, marker="o", label="byte-level BPE")
    ax.axhline(len(text.encode("utf-8")) / len(text), color="grey", linestyle=":", label="bytes (no merges)")
    ax.set_xlabel("vocabulary size")
    ax.set_ylabel("tokens per character")
    ax.set_title("A bigger vocabulary gives shorter sequences")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig, ax
