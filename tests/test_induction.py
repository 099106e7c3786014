"""course_lib.induction: the two head scores against patterns whose scores are worked out by hand and against plain
loops, and ablate_head against the head switched off by hand (its output recomputed without it, or the columns of
out_proj that read it zeroed in a copy of the module)."""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
import torch

from course_lib import induction
from course_lib.multihead import MultiHeadAttention, MultiHeadAttentionWrapper, merge_heads, split_heads


def _one_hot_rows(T: int, key_of_query) -> torch.Tensor:
    """(T, T): row t puts all its weight on key_of_query(t)."""
    pattern = torch.zeros(T, T)
    for t in range(T):
        pattern[t, key_of_query(t)] = 1.0
    return pattern


def _uniform_causal(T: int) -> torch.Tensor:
    """(T, T): row t spreads its weight evenly over keys 0..t."""
    return torch.ones(T, T).tril() / torch.arange(1, T + 1)[:, None]


# ------------------------------------------------------------------------------------------------------------
# prev_token_scores


def test_prev_token_scores_of_patterns_worked_out_by_hand():
    T = 5
    heads = torch.stack(
        [
            _one_hot_rows(T, lambda t: max(t - 1, 0)),  # a perfect previous-token head: 1
            _one_hot_rows(T, lambda t: t),  # each position on itself: 0
            _uniform_causal(T),  # weight 1/(t+1) on t-1: (1/2 + 1/3 + 1/4 + 1/5) / 4
            _one_hot_rows(T, lambda t: 0),  # everything on the first token: only query 1's previous is 0 -> 1/4
        ]
    )  # (H, T, T)
    by_hand = [1, 0, sum(Fraction(1, t + 1) for t in range(1, T)) / (T - 1), Fraction(1, T - 1)]
    got = induction.prev_token_scores(heads)
    assert got.shape == (4,)
    assert torch.allclose(got.double(), torch.tensor([float(f) for f in by_hand], dtype=torch.float64), atol=1e-7)


@pytest.mark.parametrize("shape", [(3, 6, 6), (2, 4, 7, 7), (2, 1, 3, 2, 2)])
def test_prev_token_scores_equal_a_loop_over_heads_and_queries(shape):
    attn = torch.rand(shape, generator=torch.Generator().manual_seed(0)).softmax(-1)
    T = shape[-1]
    flat = attn.reshape(-1, T, T)
    looped = torch.tensor([sum(float(m[t, t - 1]) for t in range(1, T)) / (T - 1) for m in flat]).reshape(shape[:-2])
    got = induction.prev_token_scores(attn)
    assert got.shape == shape[:-2] and torch.allclose(got, looped, atol=1e-6)


def test_prev_token_scores_refuse_what_has_no_previous_position_or_is_not_square():
    with pytest.raises(ValueError, match="T >= 2"):
        induction.prev_token_scores(torch.ones(2, 1, 1))
    with pytest.raises(ValueError, match="attn"):
        induction.prev_token_scores(torch.ones(2, 3, 4))
    with pytest.raises(TypeError, match="attn"):
        induction.prev_token_scores([[0.5, 0.5]])


# ------------------------------------------------------------------------------------------------------------
# induction_scores


def test_induction_scores_of_patterns_worked_out_by_hand():
    period, T = 3, 7
    heads = torch.stack(
        [
            _one_hot_rows(T, lambda t: t - period + 1 if t >= period else 0),  # a perfect induction head: 1
            _one_hot_rows(T, lambda t: t - period if t >= period else 0),  # the earlier copy itself: 0
            _one_hot_rows(T, lambda t: max(t - 1, 0)),  # the previous token: key t-1 = t-2 only when period = 2
            _uniform_causal(T),  # 1/(t+1) for t = 3..6
        ]
    )[None]  # (1, H, T, T)
    by_hand = [1, 0, 0, sum(Fraction(1, t + 1) for t in range(period, T)) / (T - period)]
    got = induction.induction_scores(heads, period)
    assert got.shape == (1, 4)
    assert torch.allclose(got[0].double(), torch.tensor([float(f) for f in by_hand], dtype=torch.float64), atol=1e-7)


@pytest.mark.parametrize("shape, period", [((2, 8, 8), 4), ((3, 2, 9, 9), 2), ((1, 10, 10), 7), ((2, 5, 5), 1)])
def test_induction_scores_equal_a_loop_over_heads_and_queries(shape, period):
    attn = torch.rand(shape, generator=torch.Generator().manual_seed(1)).softmax(-1)
    T = shape[-1]
    flat = attn.reshape(-1, T, T)
    looped = [sum(float(m[t, t - period + 1]) for t in range(period, T)) / (T - period) for m in flat]
    got = induction.induction_scores(attn, period)
    assert got.shape == shape[:-2] and torch.allclose(got, torch.tensor(looped).reshape(shape[:-2]), atol=1e-6)


@pytest.mark.parametrize("period", [0, -1, 6, 7, 2.0, True])
def test_induction_scores_refuse_a_period_outside_1_to_T_minus_1(period):
    with pytest.raises(ValueError, match="period"):
        induction.induction_scores(torch.ones(2, 6, 6) / 6, period)


def test_a_trained_pattern_repeats_scores_on_the_sequences_they_are_defined_on():
    """repeated_tokens gives what the scores assume: token t equals token t - period from t = period on."""
    seqs = induction.repeated_tokens(4, 5, 11, torch.Generator().manual_seed(0))
    assert seqs.shape == (4, 10) and seqs.dtype == torch.long and int(seqs.max()) < 11
    assert torch.equal(seqs[:, 5:], seqs[:, :5])


# ------------------------------------------------------------------------------------------------------------
# ablate_head


def _mha(d_model=12, n_heads=3, seed=0, bias=True) -> MultiHeadAttention:
    torch.manual_seed(seed)
    return MultiHeadAttention(d_model, n_heads, causal=True, bias=bias).eval()


def _by_hand(module: MultiHeadAttention, x: torch.Tensor, head: int, mode: str) -> torch.Tensor:
    """The module's output recomputed step by step, with head `head`'s output replaced before out_proj."""
    C, H = module.d_model, module.n_heads
    q, k, v = (split_heads(t, H) for t in module.qkv(x).split(C, dim=-1))  # (B, H, T, D)
    T = x.shape[1]
    scores = (q @ k.transpose(-2, -1)) / (C // H) ** 0.5
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    heads = scores.softmax(-1) @ v  # (B, H, T, D)
    if mode == "zero":
        heads[:, head] = 0.0
    else:
        heads[:, head] = heads[:, head].mean(dim=(0, 1))  # over the batch and the positions
    return module.out_proj(merge_heads(heads))


@pytest.mark.parametrize("mode", ["zero", "mean"])
@pytest.mark.parametrize("head", [0, 2])
def test_ablating_a_head_equals_recomputing_the_output_without_it(mode, head):
    module = _mha()
    x = torch.randn(2, 5, 12)
    with torch.no_grad(), induction.ablate_head(module, head, mode):
        got = module(x)
    with torch.no_grad():
        assert torch.allclose(got, _by_hand(module, x, head, mode), atol=1e-6)
        assert not torch.allclose(got, module(x), atol=1e-3)  # it did change something


def test_zero_ablation_equals_zeroing_the_columns_of_out_proj_that_read_the_head():
    module = _mha(bias=False)
    edited = copy.deepcopy(module)
    with torch.no_grad():
        edited.out_proj.weight[:, 4:8] = 0.0  # head 1 of 3, D = 4
    x = torch.randn(3, 4, 12)
    with torch.no_grad(), induction.ablate_head(module, 1):
        assert torch.allclose(module(x), edited(x), atol=1e-6)


def test_the_mean_is_that_of_each_call_and_the_weights_are_still_returned():
    module = _mha()
    x1, x2 = torch.randn(2, 5, 12), 3 * torch.randn(4, 5, 12)
    with torch.no_grad(), induction.ablate_head(module, 0, "mean"):
        first = module(x1)
        second, weights = module(x2, need_weights=True)
    with torch.no_grad():
        assert torch.allclose(first, _by_hand(module, x1, 0, "mean"), atol=1e-6)
        assert torch.allclose(second, _by_hand(module, x2, 0, "mean"), atol=1e-6)
        assert torch.allclose(weights, module(x2, need_weights=True)[1])  # the pattern itself is not changed


def test_parameters_are_never_touched_and_the_module_is_restored_even_after_an_exception():
    module = _mha()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    pointers = {k: v.data_ptr() for k, v in module.state_dict().items()}
    x = torch.randn(2, 5, 12)
    with torch.no_grad():
        plain = module(x)
    with pytest.raises(KeyError, match="raised inside"), induction.ablate_head(module, 1, "zero"):
        for key, value in module.state_dict().items():
            assert torch.equal(value, before[key]) and value.data_ptr() == pointers[key]
        raise KeyError("raised inside")
    assert not module.out_proj._forward_pre_hooks and not module.out_proj._forward_hooks
    with torch.no_grad():
        assert torch.equal(module(x), plain)
    assert all(torch.equal(v, before[k]) for k, v in module.state_dict().items())


def test_heads_of_a_wrapper_of_single_heads_ablate_the_same_way_and_ablations_nest():
    torch.manual_seed(0)
    wrapper = MultiHeadAttentionWrapper(8, 8, 6, 2).eval()
    x = torch.randn(2, 6, 8)
    with torch.no_grad():
        head_outputs = [h(x) for h in wrapper.heads]  # (B, T, D) each
        alone = wrapper.out_proj(torch.cat([torch.zeros_like(head_outputs[0]), head_outputs[1]], dim=-1))
        with induction.ablate_head(wrapper, 0):
            assert torch.allclose(wrapper(x), alone, atol=1e-6)
            with induction.ablate_head(wrapper, 1):
                assert torch.allclose(wrapper(x), wrapper.out_proj.bias.expand(2, 6, 8), atol=1e-6)
            assert torch.allclose(wrapper(x), alone, atol=1e-6)


def test_bad_arguments_are_named():
    module = _mha()
    with pytest.raises(ValueError, match="head"), induction.ablate_head(module, 3):
        pass
    with pytest.raises(ValueError, match="mode"), induction.ablate_head(module, 0, "mean over heads"):
        pass
    with pytest.raises(TypeError, match="out_proj"), induction.ablate_head(torch.nn.Linear(3, 3), 0):
        pass


# ------------------------------------------------------------------------------------------------------------
# Measuring a model


def _small_model(seed: int = 0):
    from course_lib.repeat_task import attention_only_gpt

    return attention_only_gpt(13, 12, 16, 2, n_layers=2, seed=seed).eval()


def _maps_by_hand(model, idx):
    """Each layer's weights, asked of each block's attention on the stream as the forward pass leaves it."""
    x = model.tok_emb(idx) + model.pos_emb(torch.arange(idx.shape[1]))
    maps = []
    for block in model.blocks:
        maps.append(block.attn(block.ln1(x), need_weights=True)[1])
        x = x + block.attn(block.ln1(x))
    return torch.stack(maps)  # (L, B, H, T, T)


def test_head_scores_are_the_two_scores_of_every_layer_and_head_averaged_over_the_batch():
    model = _small_model()
    seqs = induction.repeated_tokens(5, 6, 13, torch.Generator().manual_seed(0))
    rows = induction.head_scores(model, seqs, 6)
    with torch.no_grad():
        maps = _maps_by_hand(model, seqs)
    assert [(r["layer"], r["head"]) for r in rows] == [(0, 0), (0, 1), (1, 0), (1, 1)]
    for r in rows:
        m = maps[r["layer"], :, r["head"]]  # (B, T, T)
        assert r["itself"] == pytest.approx(float(torch.stack([m[:, t, t] for t in range(12)]).mean()))
        assert r["previous token"] == pytest.approx(float(torch.stack([m[:, t, t - 1] for t in range(1, 12)]).mean()))
        assert r["induction"] == pytest.approx(float(torch.stack([m[:, t, t - 5] for t in range(6, 12)]).mean()))


def test_ablation_losses_switch_off_one_head_at_a_time_and_leave_the_model_as_it_was():
    from course_lib.repeat_task import loss_per_position

    model = _small_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    seqs = induction.repeated_tokens(6, 6, 13, torch.Generator().manual_seed(1))
    rows = induction.ablation_losses(model, seqs, 6)
    assert len(rows) == 1 + 4 and rows[0]["layer"] is None
    assert rows[0]["zero ablated"] == pytest.approx(float(loss_per_position(model, seqs)[6:].mean()))
    for row in rows[1:]:
        with induction.ablate_head(model.blocks[row["layer"]].attn, row["head"], "mean"):
            assert row["mean ablated"] == pytest.approx(float(loss_per_position(model, seqs)[6:].mean()))
        assert row["zero ablated"] != pytest.approx(rows[0]["zero ablated"])
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())
    assert float(loss_per_position(model, seqs)[6:].mean()) == pytest.approx(rows[0]["zero ablated"])


def test_switching_off_a_layer_0_head_changes_the_patterns_of_layer_1_only():
    model = _small_model()
    seqs = induction.repeated_tokens(4, 6, 13, torch.Generator().manual_seed(2))
    results = induction.scores_with_head_ablated(model, seqs, 6, layer=0)
    assert set(results) == {None, 0, 1}
    for head in (0, 1):
        for plain, ablated in zip(results[None], results[head], strict=True):
            if plain["layer"] == 0:  # a layer's own patterns come before its output: unchanged
                assert ablated == pytest.approx(plain)
            else:
                assert ablated["induction"] != pytest.approx(plain["induction"])


def test_tracking_measures_each_checkpoint_and_leaves_the_last_one_loaded():
    from course_lib.repeat_task import Checkpoint, loss_per_position

    models = [_small_model(seed) for seed in (0, 1, 2)]
    checkpoints = [Checkpoint(10 * i, m.state_dict(), 0.0, 0.0) for i, m in enumerate(models)]
    scoring = induction.repeated_tokens(4, 6, 13, torch.Generator().manual_seed(3))
    text = induction.repeated_tokens(4, 6, 13, torch.Generator().manual_seed(4))
    model = _small_model(7)
    records = induction.track_checkpoints(model, checkpoints, scoring, text, 6)
    assert [r["step"] for r in records] == [0, 10, 20]
    for record, trained in zip(records, models, strict=True):
        losses = loss_per_position(trained, text)
        assert record["first copy"] == pytest.approx(float(losses[:5].mean()))
        assert record["second copy"] == pytest.approx(float(losses[6:].mean()))
        assert record["in-context"] == pytest.approx(record["second copy"] - record["first copy"])
        best = max(r["induction"] for r in induction.head_scores(trained, scoring, 6) if r["layer"] == 1)
        assert record["induction L1"] == pytest.approx(best)
    assert all(torch.equal(v, models[-1].state_dict()[k]) for k, v in model.state_dict().items())


def test_the_phase_change_step_is_where_a_curve_has_covered_the_fraction_of_its_way():
    steps = [0, 100, 200, 300, 400, 500]
    rising = [0.05, 0.06, 0.10, 0.40, 0.55, 0.60]  # from 0.05 to 0.60: half way is 0.325
    assert induction.phase_change_step(steps, rising) == 300
    assert induction.phase_change_step(steps, rising, 0.2) == 300  # 0.16
    assert induction.phase_change_step(steps, rising, 0.05) == 200  # 0.0775
    falling = [0.0, -0.1, -0.2, -1.5, -1.9, -2.0]
    assert induction.phase_change_step(steps, falling) == 300
    with pytest.raises(ValueError, match="same length"):
        induction.phase_change_step(steps, rising[:-1])
