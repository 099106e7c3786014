"""Tests of course_lib.char_gpt (Lesson 09): the model built from lesson 06's blocks, its options and checks.
(Its attention maps and a few seconds of training are tested in tests/test_char_lm.py.)"""

from __future__ import annotations

import pytest
import torch

from course_lib.char_gpt import CharGPT
from tests.compile_check import assert_one_graph


def _model(seed: int = 0, **options) -> CharGPT:
    torch.manual_seed(seed)
    return CharGPT(13, block_size=8, d_model=16, n_layers=2, n_heads=4, **options).eval()


def test_use_sdpa_reaches_every_attention_and_computes_the_same_function():
    explicit, fast = _model(), _model(use_sdpa=True)
    assert all(block.attn.use_sdpa for block in fast.blocks)
    assert not any(block.attn.use_sdpa for block in explicit.blocks)
    idx = torch.randint(13, (3, 8))
    torch.testing.assert_close(fast(idx)[0], explicit(idx)[0])
    torch.testing.assert_close(fast.attention_maps(idx), explicit.attention_maps(idx))  # maps: explicit path


def test_forward_names_wrong_inputs():
    model = _model()
    with pytest.raises(ValueError, match="T=9.*block_size is 8"):
        model(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="T=9.*block_size is 8"):
        model.attention_maps(torch.zeros(1, 9, dtype=torch.long))
    with pytest.raises(TypeError, match="idx"):
        model(torch.zeros(1, 4))


@pytest.mark.parametrize("use_sdpa", [False, True])
def test_compiled_forward_is_one_graph(use_sdpa):
    idx = torch.randint(13, (2, 8))
    assert_one_graph(_model(use_sdpa=use_sdpa), idx, torch.roll(idx, -1, dims=1))
