"""Tests of course_lib.deep_stacks (Lesson 06): the measurements behind the residual and post-LN/pre-LN plots."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from course_lib import deep_stacks


def test_residual_gradient_norms_vanish_only_without_residuals():
    rows = deep_stacks.residual_gradient_norms(depths=(2, 6), d_model=16, batch_size=4, T=3)
    assert [(r["depth"], r["residual"]) for r in rows] == [(2, False), (2, True), (6, False), (6, True)]
    table = {(r["depth"], r["residual"]): r for r in rows}
    assert all(len(table[d, res]["layer_grads"]) == d for d, res in table)
    assert table[6, False]["input_grad"] < table[2, False]["input_grad"] / 100  # shrinks with every layer
    assert table[6, True]["input_grad"] > 1 and table[2, True]["input_grad"] > 1  # the identity path carries it
    plain = table[6, False]["layer_grads"]
    assert plain[0] < plain[-1] / 100  # the layers nearest the input get the least


def test_residual_gradient_norms_are_reproducible():
    first = deep_stacks.residual_gradient_norms(depths=(3,), d_model=8, batch_size=2, T=2, seed=4)
    again = deep_stacks.residual_gradient_norms(depths=(3,), d_model=8, batch_size=2, T=2, seed=4)
    other = deep_stacks.residual_gradient_norms(depths=(3,), d_model=8, batch_size=2, T=2, seed=5)
    assert first == again and first != other


def test_depth_statistics_post_ln_keeps_the_stream_normalised_and_pre_ln_lets_it_grow():
    post = deep_stacks.depth_statistics(n_layers=6, norm_first=False, d_model=16, n_heads=2, batch_size=2, T=5)
    pre = deep_stacks.depth_statistics(n_layers=6, norm_first=True, d_model=16, n_heads=2, batch_size=2, T=5)
    assert [r["layer"] for r in post] == list(range(1, 7))
    assert all(abs(r["stream_std"] - 1) < 0.02 for r in post)  # every post-LN block ends with a LayerNorm
    assert pre[-1]["stream_std"] > 1.3 * pre[0]["stream_std"]  # pre-LN only adds to the stream
    assert all(r["grad_norm"] > 0 for r in post + pre)
    assert pre[-1]["grad_norm"] < pre[0]["grad_norm"]


def test_arguments_are_checked():
    with pytest.raises(ValueError, match="`depth`"):
        deep_stacks.residual_gradient_norms(depths=(2, 0))
    with pytest.raises(ValueError, match="`n_layers`"):
        deep_stacks.depth_statistics(n_layers=0)


def test_copy_task_batch_repeats_its_first_half_and_shifts_the_targets():
    inputs, targets = deep_stacks.copy_task_batch(5, 4, 10, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (5, 7)
    sequence = torch.cat([inputs, targets[:, -1:]], dim=1)  # (5, 8): the whole sequence
    assert torch.equal(sequence[:, :4], sequence[:, 4:])
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    assert int(sequence.min()) >= 0 and int(sequence.max()) < 10
    again, _ = deep_stacks.copy_task_batch(5, 4, 10, torch.Generator().manual_seed(0))
    assert torch.equal(inputs, again)


def test_train_stack_warms_up_linearly_then_keeps_the_peak(monkeypatch):
    """The rates Adam is given, step by step: lesson 10's warm-up, then no decay."""
    seen = []
    step = torch.optim.Adam.step

    def record(self, *args, **kwargs):
        seen.append(self.param_groups[0]["lr"])
        return step(self, *args, **kwargs)

    monkeypatch.setattr(torch.optim.Adam, "step", record)
    small = dict(steps=7, n_layers=1, d_model=8, n_heads=2, vocab_size=4, half=2, batch_size=2)
    deep_stacks.train_stack(True, 4, lr=0.01, **small)
    assert seen == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01, 0.01, 0.01], rel=1e-12)
    seen.clear()
    deep_stacks.train_stack(True, 0, lr=0.01, **small)
    assert seen == [0.01] * 7
    with pytest.raises(ValueError, match="lr"):
        deep_stacks.train_stack(True, 4, lr=0.0, **small)
    with pytest.raises(ValueError, match="warmup_steps"):
        deep_stacks.train_stack(True, 7, lr=0.01, **small)


def test_stack_lm_orders_and_final_norm():
    torch.manual_seed(0)
    post = deep_stacks.StackLM(11, 6, 8, 2, 3, norm_first=False)
    pre = deep_stacks.StackLM(11, 6, 8, 2, 3, norm_first=True)
    assert [b.norm_first for b in post.blocks] == [False] * 3 and [b.norm_first for b in pre.blocks] == [True] * 3
    assert isinstance(pre.ln_f, nn.LayerNorm) and isinstance(post.ln_f, nn.Identity)
    idx = torch.randint(11, (2, 6))
    assert post(idx)[0].shape == pre(idx)[0].shape == (2, 6, 11)
    assert pre.lm_head.bias is not None and pre.lm_head.weight is not pre.tok_emb.weight  # an untied read-out
    fc1 = pre.blocks[0].mlp.fc1  # Glorot: U(-a, a), a = sqrt(6 / (8 + 32))
    assert float(fc1.weight.detach().abs().max()) <= (6 / 40) ** 0.5 and torch.count_nonzero(fc1.bias) == 0
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % 11
    assert torch.allclose(pre(changed)[0][:, :-1], pre(idx)[0][:, :-1])  # causal: the past does not see the future


def test_train_stack_is_reproducible_and_learns_the_copy_task():
    small = dict(steps=60, n_layers=2, d_model=16, n_heads=2, vocab_size=8, half=4, batch_size=16)
    first = deep_stacks.train_stack(True, 10, **small)
    assert len(first) == 60 and first == deep_stacks.train_stack(True, 10, **small)
    assert first != deep_stacks.train_stack(True, 10, **small, seed=1)
    assert abs(first[0] - math.log(8)) < 0.5  # an untrained model is close to guessing
    assert sum(first[-10:]) / 10 < 0.5 * math.log(8)  # it learns to copy


def test_post_ln_without_warm_up_stalls_with_another_seed_too():
    # The lesson's run uses seed 0; the same contrast with seed 1 (both runs with the lesson's other settings).
    stalled = deep_stacks.train_stack(False, 0, seed=1)
    warmed = deep_stacks.train_stack(False, 50, seed=1)
    assert abs(sum(stalled[-20:]) / 20 - math.log(16)) < 0.1  # still guessing after 200 steps
    assert sum(warmed[-20:]) / 20 < 1.0


def test_training_arguments_are_checked():
    with pytest.raises(ValueError, match="`steps`"):
        deep_stacks.train_stack(True, 0, steps=0)
    with pytest.raises(ValueError, match="`half`"):
        deep_stacks.copy_task_batch(2, 0, 4, torch.Generator())
