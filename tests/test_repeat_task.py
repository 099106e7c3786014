"""course_lib.repeat_task: the windows repeat what they say, the attention-only model is lesson 09's GPT without
feed-forward layers, and training keeps its checkpoints and the caller's random state."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F

from course_lib import repeat_task
from course_lib.gpt import GPT
from course_lib.multihead import MultiHeadAttention


def test_each_training_window_repeats_its_first_stretch_and_then_carries_on():
    data = torch.arange(1000)  # every id is its own position in the text: what a window read is visible
    x, y = repeat_task.repeat_batch(data, 64, 12, (3, 5), torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (64, 12) and torch.equal(x[:, 1:], y[:, :-1])
    periods = set()
    for row in torch.cat([x, y[:, -1:]], dim=1):  # the 13 ids of the window
        start = int(row[0])
        period = int((row[1:] == start).nonzero()[0]) + 1  # where the first id comes again
        periods.add(period)
        expected = [start + t for t in range(period)] + [start + t for t in range(13 - period)]
        assert row.tolist() == expected
    assert periods == {3, 4, 5}


def test_a_share_of_the_windows_is_random_ids_repeated_the_same_way():
    data = torch.arange(1000, 3000)  # text ids are all >= 1000, random ones < 50
    x, y = repeat_task.repeat_batch(data, 400, 12, (3, 5), torch.Generator().manual_seed(1), 0.25, vocab_size=50)
    rows = torch.cat([x, y[:, -1:]], dim=1)  # (400, 13)
    random_rows = rows[(rows < 50).all(dim=1)]
    assert ((rows < 50).any(dim=1) == (rows < 50).all(dim=1)).all()  # a row is all text or all random
    assert 60 < len(random_rows) < 140  # about a quarter of 400
    for row in random_rows:  # each repeats its first stretch of 3 to 5 ids
        assert any(torch.equal(row[p : 2 * p], row[:p]) for p in (3, 4, 5))
    with pytest.raises(ValueError, match="vocab_size"):
        repeat_task.repeat_batch(data, 2, 12, (3, 5), random_fraction=0.5)


def test_the_periods_are_checked_against_the_window():
    data = torch.arange(100)
    with pytest.raises(ValueError, match="periods"):
        repeat_task.repeat_batch(data, 2, 8, (3, 5))  # two copies of 5 do not fit 9 ids
    with pytest.raises(ValueError, match="periods"):
        repeat_task.repeat_batch(data, 2, 8, (0, 2))
    with pytest.raises(TypeError, match="data"):
        repeat_task.repeat_batch(data.float(), 2, 8, (2, 3))
    with pytest.raises(ValueError, match="periods"):
        repeat_task.RepeatSettings(context_length=16, periods=(4, 9))


def test_repeated_text_windows_repeat_a_stretch_of_the_text():
    data = torch.arange(50, 150)
    seqs = repeat_task.repeated_text(data, 5, 7, torch.Generator().manual_seed(1))
    assert seqs.shape == (5, 14) and torch.equal(seqs[:, 7:], seqs[:, :7])
    assert torch.equal(seqs[:, 1:7] - seqs[:, :6], torch.ones(5, 6, dtype=torch.long))  # consecutive text


def test_the_attention_only_model_is_gpt_with_attention_blocks_only():
    model = repeat_task.attention_only_gpt(11, 8, 16, 4, n_layers=2, seed=0)
    assert isinstance(model, GPT) and len(model.blocks) == 2
    assert all(set(dict(b.named_children())) == {"ln1", "attn"} for b in model.blocks)
    assert model.lm_head.weight is model.tok_emb.weight
    x = torch.randint(11, (3, 8), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        stream = model.tok_emb(x) + model.pos_emb(torch.arange(8))
        for block in model.blocks:
            stream = stream + block.attn(block.ln1(stream))
        by_hand = model.lm_head(model.ln_f(stream))
        assert torch.allclose(model(x)[0], by_hand, atol=1e-6)
    again = repeat_task.attention_only_gpt(11, 8, 16, 4, n_layers=2, seed=0)
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values(), strict=True))


def test_the_blocks_are_built_on_the_attention_class_given():
    class Counted(MultiHeadAttention):
        built = 0

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            Counted.built += 1

    model = repeat_task.attention_only_gpt(11, 8, 16, 2, n_layers=3, attention=Counted)
    assert Counted.built == 3 and all(isinstance(b.attn, Counted) and b.attn.causal for b in model.blocks)


def test_training_keeps_a_checkpoint_every_few_steps_and_leaves_the_callers_random_state():
    data = torch.randint(20, (500,), generator=torch.Generator().manual_seed(3))
    settings = dataclasses.replace(repeat_task.RepeatSettings(), vocab_size=20, context_length=8, periods=(2, 4),
                                   d_model=16, n_heads=2, batch_size=4, steps=25, every=10)  # fmt: skip
    model = repeat_task.attention_only_gpt(20, 8, 16, 2, seed=0)
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    seen = []
    checkpoints = repeat_task.train_with_checkpoints(
        model, data, settings, seed=1, progress=lambda s, _: seen.append(s)
    )
    assert torch.equal(torch.random.get_rng_state(), before)
    assert [c.step for c in checkpoints] == [0, 10, 20, 25] and seen == list(range(1, 26))
    assert not model.training
    last = checkpoints[-1].state
    assert all(torch.equal(last[k], v) for k, v in model.state_dict().items())
    assert not torch.equal(checkpoints[0].state["blocks.0.attn.qkv.weight"], last["blocks.0.attn.qkv.weight"])
    # the same seed trains the same weights
    twin = repeat_task.attention_only_gpt(20, 8, 16, 2, seed=0)
    repeat_task.train_with_checkpoints(twin, data, settings, seed=1)
    assert all(torch.equal(twin.state_dict()[k], v) for k, v in model.state_dict().items())


def test_loss_per_position_is_the_cross_entropy_of_each_prediction():
    model = repeat_task.attention_only_gpt(13, 10, 16, 2, seed=0)
    seqs = torch.randint(13, (4, 10), generator=torch.Generator().manual_seed(4))
    got = repeat_task.loss_per_position(model, seqs)
    assert got.shape == (9,)
    with torch.no_grad():
        for t in range(9):
            logits, _ = model(seqs[:, : t + 1])  # only what comes before: the model is causal
            assert torch.allclose(got[t], F.cross_entropy(logits[:, -1], seqs[:, t + 1]), atol=1e-5)
