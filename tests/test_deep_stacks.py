"""Tests of course_lib.deep_stacks (Lesson 06): the measurements behind the residual and post-LN/pre-LN plots."""

from __future__ import annotations

import pytest

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
