"""Lesson 08's reference (course_lib.statquest): the dataset, the toy model against PyTorch's attention, the
tensor-only forward pass and generation, Lightning against a plain loop, and the seed table."""

from __future__ import annotations

import os
import time

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


def test_model_shapes_and_forward_equal_the_tensor_version():
    torch.manual_seed(1)
    model = sq.DecoderOnlyTransformer()
    inputs, _ = sq.statquest_dataset()
    logits, weights = model(inputs, need_weights=True)
    assert logits.shape == (2, 5, 5) and weights.shape == (2, 5, 5)
    assert sum(p.numel() for p in model.parameters()) == 37
    torch.testing.assert_close(sq.decoder_only_forward(model.state_dict(), inputs), logits)


def test_model_is_causal():
    torch.manual_seed(2)
    model = sq.DecoderOnlyTransformer()
    a = torch.tensor([[0, 1, 2, 4, 3]])
    b = torch.tensor([[0, 1, 2, 0, 0]])
    torch.testing.assert_close(model(a)[:, :3], model(b)[:, :3])


def test_forward_refuses_sequences_longer_than_the_position_table():
    params = sq.DecoderOnlyTransformer(max_len=4).state_dict()
    with pytest.raises(ValueError, match="5 positions; the position table has only 4"):
        sq.decoder_only_forward(params, torch.zeros(1, 5, dtype=torch.long))


def test_greedy_generate_returns_ints_and_stops_at_eos():
    model = sq.train_plain(seed=0)
    params = model.state_dict()
    for prompt in sq.PROMPTS:
        out = sq.greedy_generate(params, sq.encode(prompt), sq.EOS_ID, 3)
        assert out == [3, 4] and all(type(i) is int for i in out)
    # without <EOS> as a stop, it writes its whole budget
    assert len(sq.greedy_generate(params, sq.encode(sq.PROMPTS[0]), 99, 2)) == 2
    with pytest.raises(ValueError, match="max_new_tokens"):
        sq.greedy_generate(params, [0], sq.EOS_ID, 0)


def test_lightning_and_the_plain_loop_give_the_same_weights(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    monkeypatch.chdir(tmp_path)
    deterministic_before = torch.are_deterministic_algorithms_enabled()
    lit = sq.train_lightning(seed=7, progress_bar=False)
    plain = sq.train_plain(seed=7)
    assert list(tmp_path.iterdir()) == []  # no checkpoints, no lightning_logs
    assert torch.are_deterministic_algorithms_enabled() == deterministic_before
    assert lit.loss_history == plain.loss_history and len(lit.loss_history) == 60
    for name, value in lit.state_dict().items():
        assert torch.equal(value, plain.state_dict()[name]), name


def test_training_is_reproducible():
    a, b = sq.train_plain(seed=3), sq.train_plain(seed=3)
    assert a.loss_history == b.loss_history


def test_every_seed_of_the_table_answers_awesome_eos():
    """The lesson's seed table: seeds 0..29, the tutorial's recipe (Adam 0.1, 30 epochs, batch 1), plain loop."""
    torch.set_num_threads(1)
    assert tuple(range(30)) == sq.SEEDS
    start = time.perf_counter()
    rows = sq.seed_table(sq.SEEDS)
    print(f"\nseed table: {len(rows)} seeds trained in {time.perf_counter() - start:.1f} s (pid {os.getpid()})")
    wrong = [r for r in rows if r["what is statquest"] != "awesome <EOS>" or r["statquest is what"] != "awesome <EOS>"]
    assert wrong == []
