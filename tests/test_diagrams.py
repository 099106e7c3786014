"""Tests of course_lib.diagrams: what each diagram says, and that the committed images/ are what the code draws."""

from __future__ import annotations

import matplotlib
import matplotlib.image
import matplotlib.pyplot as plt
import numpy as np
import pytest
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyBboxPatch
from matplotlib.text import Text

from course_lib import diagrams
from tests.nbtools import ROOT

IMAGES = ROOT.parent / "images"
# Decoded pixels may differ this much (0..1 per channel) in at most this many pixels: rounding noise passes, a
# changed word, colour or position does not. PNG compression settings do not matter (pixels are compared).
TOLERANCE, MAX_PIXELS = 0.1, 20


def _texts(fig: Figure) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _differences(a_path, b_path) -> str | None:
    """None when two PNGs show the same picture; otherwise what differs."""
    a, b = matplotlib.image.imread(a_path), matplotlib.image.imread(b_path)
    if a.shape != b.shape:
        return f"size {a.shape} vs {b.shape}"
    changed = int((np.abs(a - b).max(axis=-1) > TOLERANCE).sum())
    return f"{changed} pixels differ" if changed > MAX_PIXELS else None


def test_post_ln_vs_pre_ln_labels():
    fig = diagrams.transformer_block_post_ln_vs_pre_ln()
    assert isinstance(fig, Figure)
    texts = _texts(fig)
    assert texts.count("LayerNorm") == 4  # two per block: after each add (post-LN), before each sublayer (pre-LN)
    assert texts.count("Multi-head\nattention") == 2 and texts.count("Feed-forward") == 2
    assert any(t.startswith("Post-LN") for t in texts) and any(t.startswith("Pre-LN") for t in texts)
    assert "residual stream" in texts


def test_residual_stream_labels_and_wiring():
    fig = diagrams.residual_stream()
    assert isinstance(fig, Figure)
    texts = _texts(fig)
    # Two blocks, each an attention and an MLP sublayer that reads through its own LayerNorm.
    assert texts.count("LayerNorm") == 4 and texts.count("Attention") == 2 and texts.count("MLP") == 2
    assert {"block 1", "block 2", "residual stream", "token embeddings + positions"} <= set(texts)
    assert any("x ← x + sublayer(LayerNorm(x))" in t for t in texts)
    adds = [p for p in fig.findobj(Circle) if p.get_radius() == 0.2]
    assert len(adds) == 4  # one residual add per sublayer, all on the stream's column
    assert len({p.center[0] for p in adds}) == 1


def test_encoder_decoder_labels_and_cross_attention_wiring():
    fig = diagrams.encoder_decoder_data_flow()
    assert isinstance(fig, Figure)
    texts = _texts(fig)
    for label in ["Self-attention", "Masked\nself-attention", "memory", "Softmax", "<BOS>", "queries Q"]:
        assert label in texts, label
    assert texts.count("Embedding × √d_model") == 2 and texts.count("sinusoidal\npositions") == 2
    assert texts.count("Feed-forward") == 2 and texts.count("N × layers") == 2
    (cross,) = [t for t in texts if t.startswith("Cross-attention")]
    assert "Q from the decoder" in cross and "K, V from the memory" in cross
    assert any(t.startswith("keys K,\nvalues V") for t in texts)


def test_drawing_changes_no_global_state():
    before = dict(matplotlib.rcParams)
    figures = plt.get_fignums()
    for draw in diagrams.DIAGRAMS.values():
        draw()
    assert plt.get_fignums() == figures  # plain Figures: pyplot never shows or keeps them
    assert dict(matplotlib.rcParams) == before


def test_committed_images_are_what_the_code_draws(tmp_path):
    """Fails when a diagram's code changed and `make images` was not run (or a PNG is missing or left over)."""
    assert sorted(p.name for p in IMAGES.glob("*.png")) == sorted(f"{name}.png" for name in diagrams.DIAGRAMS)
    for path in diagrams.write_all(tmp_path):
        committed = IMAGES / path.name
        assert committed.stat().st_size < 150_000, f"{path.name} is large for a notebook"
        problem = _differences(path, committed)
        assert problem is None, f"images/{path.name} is stale ({problem}): run `make images` and commit it"


@pytest.mark.parametrize("change", ["label", "colour"])
def test_a_changed_drawing_is_caught(tmp_path, change):
    fig = diagrams.encoder_decoder_data_flow()
    if change == "label":  # the known mistake, in words only: queries from the encoder
        (text,) = [t for t in fig.findobj(Text) if t.get_text().startswith("Cross-attention")]
        text.set_text(text.get_text().replace("Q from the decoder", "Q from the encoder"))
    else:
        bos = diagrams.COLOURS["bos"][1]
        (box,) = [p for p in fig.findobj(FancyBboxPatch) if to_hex(p.get_edgecolor()) == bos]
        box.set_facecolor("white")  # the <BOS> chip loses its colour
    diagrams.save_png(fig, tmp_path / "changed.png")
    assert _differences(tmp_path / "changed.png", IMAGES / "encoder_decoder_data_flow.png") is not None


def test_main_writes_every_diagram_into_a_folder(tmp_path, capsys):
    assert diagrams.main([str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{name}.png" for name in diagrams.DIAGRAMS)
    assert "wrote" in capsys.readouterr().out


def test_your_gpt_stack_names_every_module_and_whose_class_it_is():
    texts = _texts(diagrams.your_gpt_stack())
    joined = "\n".join(texts)
    for name in ("tok_emb", "pos_emb", "drop: nn.Dropout", "ln1: nn.LayerNorm", "ln2: nn.LayerNorm",
                 "ln_f: nn.LayerNorm", "lm_head: nn.Linear", "× n_layers"):  # fmt: skip
        assert name in joined, name
    assert "attn: causal\nMultiHeadAttention" in texts and any(t.startswith("mlp: FeedForward") for t in texts)
    owners = {t.split("\n")[0]: t.split("\n")[1] for t in texts if t.startswith("your ")}
    assert owners == {
        "your GPT": "(lesson 09, exercise 5)",
        "your TransformerBlock": "(lesson 06)",
        "your FeedForward": "(lesson 06)",
        "your MultiHeadAttention": "(lesson 05)",
    }
    assert "tied: lm_head.weight is tok_emb.weight" in texts
