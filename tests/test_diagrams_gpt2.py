"""What lesson 10's diagrams say (course_lib.diagrams.gpt2): the stack's labels are GPT-2 small's sizes and the
course model's names, the head is drawn tied to the token table as the model ties it, and the cache picture keeps
every earlier position and appends exactly one."""

from __future__ import annotations

import torch
from matplotlib.text import Text

from course_lib.diagrams import DIAGRAMS, gpt2
from course_lib.gpt2 import GPT2, GPT2Config


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    assert {"gpt2_architecture", "kv_cache_step"} <= set(DIAGRAMS)


def test_architecture_shows_gpt2_smalls_sizes_and_the_models_names():
    texts = "\n".join(_texts(gpt2.gpt2_architecture()))
    c = GPT2Config.small()
    for label in (
        f"{c.vocab_size:,} × {c.d_model}",
        f"{c.context_length:,} × {c.d_model}",
        f"{c.n_heads} heads × {c.d_head} channels",
        f"{c.d_model} → {4 * c.d_model:,} → {c.d_model}",
        f"× {c.n_layers}",
        f"logits (B, T, {c.vocab_size:,})",
    ):
        assert label in texts, label
    with torch.device("meta"):
        model = GPT2(c)
    names = {name.split(".")[-1] for name, _ in model.named_modules()} | {n for n, _ in model.named_children()}
    for name in ("tok_emb", "pos_emb", "ln1", "ln2", "ln_f", "lm_head"):
        assert name in names and name in texts, name


def test_the_head_is_drawn_tied_as_the_model_ties_it():
    texts = _texts(gpt2.gpt2_architecture())
    assert any("lm_head.weight is tok_emb.weight" in t for t in texts)
    model = GPT2(GPT2Config.tiny())
    assert model.lm_head.weight is model.tok_emb.weight


def test_cache_picture_keeps_every_earlier_position_and_appends_one():
    texts = _texts(gpt2.kv_cache_step())
    P = gpt2.CACHED_POSITIONS
    for letter in "kv":
        assert [t for t in texts if t.startswith(letter) and t[1:].isdigit()] == [f"{letter}{i}" for i in range(P + 1)]
    assert f"positions 0..{P - 1}: from earlier steps, reused" in texts and "appended" in texts
    assert any(f"q{P} attends to positions 0..{P}" in t and f"1 × {P + 1}" in t for t in texts)
