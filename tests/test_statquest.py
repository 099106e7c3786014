"""Lesson 08's tensor code (course_lib.statquest): the dataset, the vocabulary, the two masks, attention against
PyTorch's, and the errors of the tensor-only forward pass. The model and its training: test_statquest_model.py."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from course_lib import statquest as sq
from course_lib.attention import causal_mask


def test_dataset_follows_the_contract():
    inputs, labels = sq.statquest_dataset()
    assert inputs.dtype == labels.dtype == torch.long
    assert inputs.tolist() == [[0, 1, 2, 4, 3], [2, 1, 0, 4, 3]]
    assert labels.tolist() == [[1, 2, 4, 3, 4], [1, 0, 4, 3, 4]]
    assert sq.VOCAB == {"what": 0, "is": 1, "statquest": 2, "awesome": 3, "<EOS>": 4}


def test_encode_decode_and_their_errors():
    assert sq.decode(sq.encode(["what", "is", "<EOS>"])) == ["what", "is", "<EOS>"]
    with pytest.raises(KeyError, match="'hello' is not in the vocabulary"):
        sq.encode(["hello"])
    with pytest.raises(TypeError, match="append int"):
        sq.decode([torch.tensor(3)])


def test_blocked_mask_is_the_negated_causal_mask():
    assert torch.equal(sq.blocked_mask(5), ~causal_mask(5))
    assert sq.blocked_mask(3).tolist() == [[False, True, True], [False, False, True], [False, False, False]]


def test_attention_matches_pytorch():
    torch.manual_seed(0)
    attn = sq.Attention(4)
    x = torch.randn(3, 5, 4)
    out, weights = attn(x, x, x, causal_mask(5), need_weights=True)
    q, k, v = attn.W_q(x), attn.W_k(x), attn.W_v(x)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    torch.testing.assert_close(weights.sum(-1), torch.ones(3, 5))
    assert torch.all(weights[:, 0, 1:] == 0)


def test_forward_refuses_sequences_longer_than_the_position_table():
    params = {"pe.pe": torch.zeros(4, 2), "we.weight": torch.zeros(5, 2)}
    with pytest.raises(ValueError, match="5 positions; the position table has only 4"):
        sq.decoder_only_forward(params, torch.zeros(1, 5, dtype=torch.long))
