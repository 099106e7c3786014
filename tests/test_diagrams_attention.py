"""What lessons 04-05's diagrams say (course_lib.diagrams.attention), read back from the drawn text and checked
against the real computation: the data flow's numbers are attention's (PyTorch's SDPA agrees), the mask grid is
the causal mask, cross-attention's weights are (Tq, Tk) with queries from the decoder, and the head split shows
what split_heads and merge_heads return, and the fused qkv picture reads q, k and v per head as the module and
nn.MultiheadAttention do."""

from __future__ import annotations

import math
import re

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from course_lib import attention as att
from course_lib.diagrams import DIAGRAMS
from course_lib.diagrams import attention as pictures
from course_lib.multihead import MultiHeadAttention


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def _numbers(texts: list[str]) -> list[float]:
    return [float(t) for t in texts if re.fullmatch(r"-?\d+\.\d\d", t)]


def test_registered():
    for name in (
        "attention_data_flow",
        "causal_mask_grid",
        "cross_attention_wiring",
        "head_split_merge",
        "fused_qkv_layout",
    ):
        assert DIAGRAMS[name] is getattr(pictures, name)


def test_data_flow_shows_attention_computed_on_its_own_inputs():
    texts = _texts(pictures.attention_data_flow())
    drawn = _numbers(texts)  # matrix entries, in drawing order: x, q, k, v, scores, weights, out
    x = torch.tensor(pictures.FLOW_X)
    q, k, v = (x @ torch.tensor(pictures.FLOW_WEIGHTS[name]) for name in ("W_q", "W_k", "W_v"))
    scores = q @ k.T / math.sqrt(2)
    weights = torch.softmax(scores, dim=-1)
    out = F.scaled_dot_product_attention(q[None], k[None], v[None])[0]  # PyTorch's kernel, not the course's
    expected = torch.cat([t.flatten() for t in (x, q, k, v, scores, weights, out)]).numpy()
    assert len(drawn) == len(expected)
    assert np.allclose(drawn, np.round(expected, 2), atol=0.006)
    assert np.allclose(weights.sum(-1), 1) and [t for t in texts if t.startswith("Σ")] == ["Σ 1.00"] * 3
    assert np.allclose(out, weights @ v, atol=1e-6)
    for token in pictures.FLOW_TOKENS:
        assert texts.count(token) == 2  # a row label of x and of the context vectors


def test_data_flow_numbers_are_the_course_functions():
    numbers = pictures.flow_numbers()
    out, weights = att.scaled_dot_product_attention(*(torch.tensor(numbers[n]) for n in ("q", "k", "v")))
    assert np.allclose(numbers["weights"], weights) and np.allclose(numbers["out"], out)
    assert not np.allclose(numbers["weights"], torch.softmax(torch.tensor(numbers["q"] @ numbers["k"].T), -1))


def test_causal_mask_grid_is_the_causal_mask():
    fig = pictures.causal_mask_grid()
    cells = [t for t in _texts(fig) if t in ("True", "False")]
    T = len(pictures.MASK_TOKENS)
    drawn = torch.tensor([c == "True" for c in cells]).reshape(T, T)
    assert torch.equal(drawn, att.causal_mask(T))
    assert torch.equal(drawn, torch.nn.Transformer.generate_square_subsequent_mask(T) == 0)  # PyTorch's, inverted
    texts = _texts(fig)
    assert any("row 0" in t and "only itself" in t for t in texts)
    assert any(f"row {T - 1}" in t and f"all {T}" in t for t in texts)


def test_cross_attention_wiring_matches_the_module():
    fig = pictures.cross_attention_wiring()
    texts = _texts(fig)
    Tq, Tk = len(pictures.CROSS_TARGET), len(pictures.CROSS_SOURCE)
    d_model, d_memory = 4, 3
    module = att.CrossAttention(d_model, d_memory)
    out, weights = module(torch.randn(1, Tq, d_model), torch.randn(1, Tk, d_memory), need_weights=True)
    assert weights.shape == (1, Tq, Tk) and out.shape == (1, Tq, d_model)
    assert f"weights: Tq × Tk = {Tq} × {Tk}" in texts
    assert f"output = weights @ V: {Tq} rows" in texts
    # each projection reads what the picture says it reads
    assert module.W_query.in_features == d_model and "W_query: d_model → d_model" in texts
    assert module.W_key.in_features == d_memory and "W_key: d_memory → d_model" in texts
    assert module.W_value.in_features == d_memory and "W_value: d_memory → d_model" in texts
    assert f"Q: Tq × d_model = {Tq} rows" in texts and f"K: Tk × d_model = {Tk} rows" in texts
    grid = [p for p in fig.findobj(Rectangle) if p.get_width() == p.get_height() and p.get_width() < 1]
    assert len(grid) == Tq * Tk  # one cell per (query, key)


def test_head_split_shows_split_heads_and_merge_heads():
    tiny, heads = pictures.split_example()
    texts = _texts(pictures.head_split_merge())
    cells = [int(t) for t in texts if t.isdigit()]
    C, H = tiny.shape[-1], pictures.SPLIT_HEADS
    D = C // H
    x_drawn, split_drawn, merged_drawn = cells[: 2 * C], cells[2 * C : 4 * C], cells[4 * C :]
    assert x_drawn == tiny.flatten().tolist() == merged_drawn
    # each head block: its own D channels of both tokens; without the transpose it would not be
    expected = tiny.reshape(1, 2, H, D).transpose(1, 2)  # an independent split: (1, H, T, D)
    assert split_drawn == expected.flatten().tolist() == heads.flatten().tolist()
    assert split_drawn[: 2 * D] == [0, 1, 10, 11]
    assert split_drawn != tiny.view(1, H, 2, D).flatten().tolist()


def _head_channels(text: str) -> tuple[int, tuple[list[int], list[int], list[int]]]:
    h, *parts = re.fullmatch(r"head (\d):  q ← (\d+), (\d+)   k ← (\d+), (\d+)   v ← (\d+), (\d+)", text).groups()
    numbers = [int(p) for p in parts]
    return int(h), (numbers[0:2], numbers[2:4], numbers[4:6])


def test_fused_qkv_layout_is_the_modules_and_pytorchs():
    texts = [t for t in _texts(pictures.fused_qkv_layout()) if t.startswith("head ") and "←" in t]
    assert len(texts) == 6  # three heads read the right way, then the same three read the wrong way
    right, wrong = dict(map(_head_channels, texts[:3])), dict(map(_head_channels, texts[3:]))
    d_model, H = pictures.QKV_D_MODEL, pictures.QKV_HEADS
    D = d_model // H
    channels = torch.arange(3 * d_model)
    # PyTorch's own reading of in_proj's output (F.multi_head_attention_forward): chunk into q, k, v, then view
    # each as (heads, D): head h owns channels h*D..(h+1)*D of each part.
    q, k, v = (part.view(H, D) for part in channels.chunk(3))
    assert right == {h: (q[h].tolist(), k[h].tolist(), v[h].tolist()) for h in range(H)}
    assert right == pictures.qkv_channels_per_head()
    per_head = channels.view(H, 3, D)  # the bug: [q_h | k_h | v_h] for each head in turn
    assert wrong == {h: tuple(per_head[h, part].tolist() for part in range(3)) for h in range(H)}
    assert wrong != right and wrong[0][0] == right[0][0]  # head 0's queries agree; its keys and values do not
    # The module reads its qkv output the right way: with qkv's output set to the channel number, the values head h
    # averages are channels right[h][2], whatever the weights (each head's output is a mix of its own values).
    module = MultiHeadAttention(d_model, H).eval()
    with torch.no_grad():
        module.qkv.weight.zero_()
        module.qkv.bias.copy_(channels.float())
        module.out_proj.weight.copy_(torch.eye(d_model))
        module.out_proj.bias.zero_()
        out = module(torch.zeros(1, 2, d_model))  # (1, T, d_model): every token the same, so weights are uniform
    expected = torch.tensor([c for h in range(H) for c in right[h][2]], dtype=torch.float32)
    torch.testing.assert_close(out[0, 0], expected)
