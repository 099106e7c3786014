"""Tests of course_lib.encoder_decoder (Lesson 07): the exercises' references against formulas written out here,
the model's shapes, masks, causality and weight tying, greedy decoding that stops each sequence at its <eos>,
determinism, and a CPU training run of a few seconds that learns."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import encoder_decoder as ed
from course_lib import reversal_task as rt
from course_lib.blocks import DecoderLayer
from course_lib.loss_plots import LossPlot
from course_lib.position import sinusoidal_position_encoding

FAST = settings(max_examples=30, deadline=None)
SMALL = ed.Seq2SeqConfig(d_model=16, n_heads=2, n_layers=2, d_hidden=32, context_length=16)


def _model(config: ed.Seq2SeqConfig = SMALL, seed: int = 0) -> ed.EncoderDecoderTransformer:
    torch.manual_seed(seed)
    return ed.EncoderDecoderTransformer(config).eval()


def _batch(strings=("3141", "27", "999999")):
    return rt.reversal_batch(list(strings))


# ------------------------------------------------------------------------------------------- the exercises


@FAST
@given(B=st.integers(1, 4), T=st.integers(1, 7), bos=st.integers(0, 20), seed=st.integers(0, 99))
def test_shift_right_puts_bos_first_and_drops_the_last_label(B, T, bos, seed):
    labels = torch.randint(0, 13, (B, T), generator=torch.Generator().manual_seed(seed))
    before = labels.clone()
    shifted = ed.shift_right(labels, bos)
    assert shifted.shape == (B, T) and shifted.dtype == labels.dtype
    assert (shifted[:, 0] == bos).all() and torch.equal(shifted[:, 1:], labels[:, :-1])
    assert torch.equal(labels, before)  # a new tensor, the labels untouched


def test_shift_right_refuses_float_labels():
    with pytest.raises(TypeError, match="integer"):
        ed.shift_right(torch.zeros(2, 3), 1)


def test_masked_cross_entropy_averages_over_real_tokens_only():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 5, 7, generator=g)
    targets = torch.randint(1, 7, (3, 5), generator=g)
    targets[1, 3:] = 0
    targets[2, 1:] = 0
    log_probs = torch.log_softmax(logits, dim=-1)
    terms = [-log_probs[b, t, targets[b, t]] for b in range(3) for t in range(5) if targets[b, t] != 0]
    expected = torch.stack(terms).mean()
    got = ed.masked_cross_entropy(logits, targets, pad_id=0)
    assert got.dim() == 0 and torch.allclose(got, expected)
    # the logits at padded positions do not matter, and get no gradient
    changed = logits.clone()
    changed[targets == 0] = 100.0
    assert torch.allclose(ed.masked_cross_entropy(changed, targets, 0), expected)
    logits.requires_grad_(True)
    ed.masked_cross_entropy(logits, targets, 0).backward()
    assert (logits.grad[targets == 0] == 0).all() and (logits.grad[targets != 0] != 0).any()


def test_greedy_step_stops_each_sequence_at_its_eos():
    V, eos, pad = 6, 2, 0
    logits = torch.zeros(4, 3, V)
    for b, token in enumerate([4, eos, eos, 5]):
        logits[b, -1, token] = 1.0  # the last position decides
        logits[b, 0, 3] = 9.0  # earlier positions do not
    finished = torch.tensor([False, False, True, True])
    before = finished.clone()
    next_ids, now = ed.greedy_step(logits, finished, eos, pad)
    assert next_ids.tolist() == [4, eos, pad, pad]
    assert now.tolist() == [False, True, True, True]
    assert torch.equal(finished, before)


# ------------------------------------------------------------------------------------------- the model


def test_shapes_of_memory_logits_and_cross_attention():
    model = _model()
    src, labels = _batch()
    memory = model.encode(src)
    assert memory.shape == (3, src.shape[1], SMALL.d_model)
    tgt = ed.shift_right(labels[:, :4], rt.BOS_ID)  # a target shorter than the source
    logits, weights = model.decode(tgt, memory, model.source_mask(src), need_weights=True)
    assert logits.shape == (3, 4, SMALL.vocab_size)
    assert weights.shape == (SMALL.n_layers, 3, SMALL.n_heads, 4, src.shape[1])
    assert torch.allclose(weights.sum(-1), torch.ones(()))
    assert torch.allclose(
        model(src, ed.shift_right(labels, rt.BOS_ID)), model.decode(ed.shift_right(labels, 1), memory, src != 0)
    )


def test_embeddings_are_scaled_by_sqrt_d_model_and_get_sinusoidal_positions():
    model = _model()
    ids = torch.tensor([[5, 6, 7]])
    expected = model.tok_emb(ids) * math.sqrt(SMALL.d_model) + sinusoidal_position_encoding(3, SMALL.d_model)
    assert torch.allclose(model.embed(ids), expected)
    # initialised so that sqrt(d_model) * embedding has entries of size ~1
    big = _model(ed.Seq2SeqConfig(d_model=256, n_heads=4))
    assert 0.9 < (big.tok_emb.weight * 16).std().item() < 1.1


def test_padding_is_never_attended_and_changes_nothing():
    model = _model()
    src, labels = _batch()
    tgt = ed.shift_right(labels, rt.BOS_ID)
    logits, weights = model.decode(tgt, model.encode(src), model.source_mask(src), need_weights=True)
    padded = (src == rt.PAD_ID)[None, :, None, None, :].expand_as(weights)  # (L, B, H, T, S)
    assert padded.any() and (weights[padded] == 0).all()
    other = src.masked_fill(src == rt.PAD_ID, 9)  # other tokens where the padding was, same mask
    again = model.decode(tgt, model.encode(other, src != rt.PAD_ID), src != rt.PAD_ID)
    assert torch.allclose(logits, again, atol=1e-6)
    # and the padding of the memory itself: shorter batches give the same logits for the same string
    alone = model(src[1:2, :3], tgt[1:2, :3])
    assert torch.allclose(alone, logits[1:2, :3], atol=1e-5)


def test_the_decoder_is_causal():
    model = _model()
    src, labels = _batch()
    tgt = ed.shift_right(labels, rt.BOS_ID)
    logits = model(src, tgt)
    changed = tgt.clone()
    changed[:, 3:] = 11  # later inputs changed
    assert torch.allclose(model(src, changed)[:, :3], logits[:, :3], atol=1e-6)
    assert torch.equal(ed.past_only_predictions(model, src, labels), logits.argmax(-1))


def test_weight_tying_is_one_parameter():
    tied = _model()
    assert tied.lm_head.weight is tied.tok_emb.weight
    assert sum(p is tied.tok_emb.weight for p in tied.parameters()) == 1  # counted and optimised once
    untied = _model(ed.Seq2SeqConfig(**{**SMALL.__dict__, "tie_embeddings": False}))
    assert untied.lm_head.weight is not untied.tok_emb.weight
    extra = sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters())
    assert extra == SMALL.vocab_size * SMALL.d_model


def test_paper_base_has_about_63_million_parameters():
    config = ed.Seq2SeqConfig.paper_base()
    with torch.device("meta"):  # shapes only, no memory
        model = ed.EncoderDecoderTransformer(config)
    d, f, V = 512, 2048, 37_000
    attention, ffn, norm = 4 * d * d + 4 * d, 2 * d * f + f + d, 2 * d
    expected = V * d + 6 * (attention + ffn + 2 * norm) + 6 * (2 * attention + ffn + 3 * norm)
    assert sum(p.numel() for p in model.parameters()) == expected
    assert 62e6 < expected < 64e6


@pytest.mark.parametrize(
    "kwargs, word",
    [
        (dict(d_model=30, n_heads=4), "divisible"),
        (dict(d_model=9, n_heads=3), "sin/cos"),  # the position table pairs channels
        (dict(dropout=1.0), "dropout"),
        (dict(pad_id=13), "pad_id"),
    ],
)
def test_bad_configs_are_refused(kwargs, word):
    with pytest.raises(ValueError, match=word):
        ed.Seq2SeqConfig(**kwargs)


def test_too_long_inputs_are_refused_with_a_message():
    model = _model()
    with pytest.raises(ValueError, match="context_length"):
        model.encode(torch.full((1, 17), 5))


# ------------------------------------------------------------------------------------------- decoding


def test_greedy_decode_stops_each_sequence_at_its_eos():
    model = _model()
    src, _ = _batch()
    stops = [2, 4, 1]  # sequence b emits <eos> at step stops[b], digit 7 before
    calls = []

    def scripted(tgt, memory, src_mask=None, need_weights=False):
        step = tgt.shape[1] - 1
        calls.append(step)
        logits = torch.zeros(tgt.shape[0], tgt.shape[1], SMALL.vocab_size)
        for b, stop in enumerate(stops):
            logits[b, -1, rt.EOS_ID if step == stop else 7] = 1.0
        return logits

    model.decode = scripted
    out = ed.greedy_decode(model, src, max_new_tokens=10)
    assert out.shape == (3, 5) and calls == [0, 1, 2, 3, 4]  # stopped when the last sequence finished
    assert out.tolist() == [[7, 7, 2, 0, 0], [7, 7, 7, 7, 2], [7, 2, 0, 0, 0]]
    assert ed.greedy_decode(model, src, max_new_tokens=2).shape == (3, 2)


def test_greedy_decode_leaves_the_training_mode_as_it_was():
    model = _model().train()
    ed.greedy_decode(model, _batch()[0], max_new_tokens=3)
    assert model.training


# ------------------------------------------------------------------------------------------- training


def test_learning_rate_warms_up_then_decays_to_zero():
    config = ed.TrainConfig(steps=100, lr=1e-3, warmup=10)
    assert config.lr_at(0) == pytest.approx(1e-4) and config.lr_at(9) == pytest.approx(1e-3)
    assert config.lr_at(10) == pytest.approx(1e-3) and config.lr_at(100) == pytest.approx(0.0, abs=1e-12)
    rates = [config.lr_at(s) for s in range(10, 101)]
    assert all(a >= b for a, b in zip(rates, rates[1:], strict=False))
    with pytest.raises(ValueError, match="warmup"):  # a warm-up as long as the run leaves no step to decay
        ed.TrainConfig(steps=10, warmup=10)


TINY_TASK = rt.ReversalTask(train_lengths=(1, 2, 3), test_lengths=(3,), test_per_length=50)
TINY_MODEL = ed.Seq2SeqConfig(d_model=32, n_heads=2, n_layers=1, d_hidden=64, context_length=8)
TINY_TRAIN = ed.TrainConfig(steps=200, batch_size=32, lr=5e-3, warmup=20, log_every=20)


def test_training_on_the_cpu_learns_to_reverse_short_strings():
    """A few seconds: the loss falls from chance level (ln 13 = 2.56) and most unseen 3-digit strings come out
    reversed (a model that had learned nothing gets 1 in 1000)."""
    torch.manual_seed(0)
    model = ed.EncoderDecoderTransformer(TINY_MODEL)
    history = ed.train(model, TINY_TASK, TINY_TRAIN, seed=0, progress=False, num_threads=1)
    assert len(history["losses"]) == 10 and history["steps"][-1] == 199
    assert history["losses"][0] > 2.0 and history["losses"][-1] < 0.5 * history["losses"][0]
    assert ed.evaluate(model, TINY_TASK)[3] >= 0.3
    assert not model.training


def test_training_is_deterministic_with_a_seed_and_keeps_the_callers_random_state():
    config = ed.TrainConfig(steps=5, batch_size=8, warmup=2, log_every=1)
    results = []
    for _ in range(2):
        torch.manual_seed(1)
        model = ed.EncoderDecoderTransformer(TINY_MODEL)
        before = torch.random.get_rng_state()
        threads = torch.get_num_threads()
        history = ed.train(model, TINY_TASK, config, seed=3, progress=False, num_threads=1)
        assert torch.equal(torch.random.get_rng_state(), before) and torch.get_num_threads() == threads
        results.append((history["losses"], [p.detach().clone() for p in model.parameters()]))
    assert results[0][0] == results[1][0]
    assert all(torch.equal(a, b) for a, b in zip(results[0][1], results[1][1], strict=True))


def test_training_feeds_a_loss_plot():
    plot = LossPlot(live=False, redraw_every=3600.0)  # drawn at the first point, then only by show() at the end
    model = ed.EncoderDecoderTransformer(TINY_MODEL)
    config = ed.TrainConfig(steps=6, batch_size=4, warmup=1, log_every=4)
    history = ed.train(model, TINY_TASK, config, progress=False, plot=plot)
    assert plot.history["train"] == (history["steps"], history["losses"]) and history["steps"] == [3, 5]
    _, ax = plot.figure()
    assert len(ax.lines[0].get_xdata()) == 2
    with pytest.raises(TypeError, match="LossPlot"):
        ed.train(model, TINY_TASK, config, progress=False, plot=[])


def test_masked_cross_entropy_is_what_train_minimises():
    model = _model()
    src, labels = _batch()
    logits = model(src, ed.shift_right(labels, rt.BOS_ID))
    V = logits.shape[-1]
    expected = F.cross_entropy(
        logits.reshape(-1, V)[labels.reshape(-1) != 0], labels.reshape(-1)[labels.reshape(-1) != 0]
    )
    assert torch.allclose(ed.masked_cross_entropy(logits, labels, 0), expected)


# A learner's encoder layer as lesson 06 asks for it, written here without course_lib: its forward takes no
# need_weights, and its attention is its own (heads split by hand), so the model must run any class of that contract.
class _OwnEncoderLayer(torch.nn.Module):
    def __init__(self, d_model, n_heads, d_hidden=None, dropout=0.0, activation="relu", norm_first=False):
        super().__init__()
        self.n_heads, self.norm_first = n_heads, norm_first
        self.qkv, self.out = torch.nn.Linear(d_model, 3 * d_model), torch.nn.Linear(d_model, d_model)
        self.norm1, self.norm2 = torch.nn.LayerNorm(d_model), torch.nn.LayerNorm(d_model)
        hidden = d_hidden or 4 * d_model
        self.fc1, self.fc2 = torch.nn.Linear(d_model, hidden), torch.nn.Linear(hidden, d_model)

    def attend(self, x, keep):
        B, S, C = x.shape
        q, k, v = (t.view(B, S, self.n_heads, -1).transpose(1, 2) for t in self.qkv(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(C // self.n_heads)  # (B, H, S, S)
        if keep is not None:
            scores = scores.masked_fill(~keep[:, None, None, :], float("-inf"))
        return self.out((scores.softmax(-1) @ v).transpose(1, 2).reshape(B, S, C))

    def forward(self, x, padding_mask=None):
        x = self.norm1(x + self.attend(x, padding_mask))
        return self.norm2(x + self.fc2(torch.relu(self.fc1(x))))


def test_the_model_is_built_from_the_layer_classes_given_and_runs_them():
    config = ed.Seq2SeqConfig.tiny()
    torch.manual_seed(0)
    ours = ed.EncoderDecoderTransformer(config)
    torch.manual_seed(0)
    theirs = ed.EncoderDecoderTransformer(config, encoder_layer=_OwnEncoderLayer)
    assert all(type(layer) is _OwnEncoderLayer for layer in theirs.encoder)
    assert type(theirs.decoder[0]) is type(ours.decoder[0])  # the course's decoder layer
    # The same weights under the learner's names: the same logits, so the model runs the given layers as they are.
    names = {"self_attn.qkv": "qkv", "self_attn.out_proj": "out", "mlp.fc1": "fc1", "mlp.fc2": "fc2"}
    state = {}
    for key, value in ours.state_dict().items():
        for old, new in names.items():
            key = key.replace(f".{old}.", f".{new}.") if key.startswith("encoder.") else key
        state[key] = value
    theirs.load_state_dict(state)
    src, labels = rt.reversal_batch(["4071", "95", "123456"])
    tgt = ed.shift_right(labels, rt.BOS_ID)
    with torch.no_grad():
        assert torch.allclose(theirs(src, tgt), ours(src, tgt), atol=1e-5)
        assert torch.equal(ed.greedy_decode(theirs, src), ed.greedy_decode(ours, src))
    history = ed.train(theirs, rt.ReversalTask.tiny(), ed.TrainConfig(steps=20, warmup=5, log_every=5), progress=False)
    assert history["losses"][-1] < history["losses"][0]


def test_the_decoder_layer_class_given_is_the_one_that_runs():
    class Counting(DecoderLayer):
        calls = 0

        def forward(self, *args, **kwargs):
            Counting.calls += 1
            return super().forward(*args, **kwargs)

    model = ed.EncoderDecoderTransformer(ed.Seq2SeqConfig.tiny(), decoder_layer=Counting)
    src, labels = rt.reversal_batch(["12"])
    model(src, ed.shift_right(labels, rt.BOS_ID))
    assert Counting.calls == model.config.n_layers
