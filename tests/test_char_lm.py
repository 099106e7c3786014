"""Tests of course_lib.char_lm (Lesson 09): the exercises' references against formulas written out here and
against PyTorch, sampling statistics, generation, loss estimation, the LSTM baseline,
and a few seconds of training that beat a uniform guess."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib import char_lm as cl
from tests.char_gpt import CharGPT

FAST = settings(max_examples=30, deadline=None)


# ------------------------------------------------------------------------------------------- the exercises


@FAST
@given(text=st.text(min_size=0, max_size=40))
def test_build_char_vocab_numbers_the_sorted_distinct_characters(text):
    stoi, itos = cl.build_char_vocab(text)
    assert list(stoi) == sorted(set(text)) and list(stoi.values()) == list(range(len(set(text))))
    assert all(itos[i] == ch for ch, i in stoi.items()) and len(itos) == len(stoi)
    if text:
        assert cl.decode_chars(cl.encode_chars(text, stoi), itos) == text


def test_build_char_vocab_on_a_known_text():
    stoi, itos = cl.build_char_vocab("hello, world")
    assert stoi == {" ": 0, ",": 1, "d": 2, "e": 3, "h": 4, "l": 5, "o": 6, "r": 7, "w": 8}
    assert itos[4] == "h"


def test_encode_names_characters_outside_the_vocabulary():
    stoi, _ = cl.build_char_vocab("abc")
    with pytest.raises(ValueError, match="'xz'"):
        cl.encode_chars("abzx", stoi)


@FAST
@given(N=st.integers(2, 40), T=st.integers(1, 8), B=st.integers(1, 5), seed=st.integers(0, 99))
def test_get_batch_follows_the_contract(N, T, B, seed):
    if N <= T:
        with pytest.raises(ValueError, match="block_size"):
            cl.get_batch(torch.arange(N), T, B, torch.Generator().manual_seed(seed))
        return
    data = torch.arange(100, 100 + N)  # id = position + 100: a window's start is readable from its first id
    x, y = cl.get_batch(data, T, B, torch.Generator().manual_seed(seed))
    ix = torch.randint(N - T, (B,), generator=torch.Generator().manual_seed(seed))  # the contract's draw
    assert x.shape == y.shape == (B, T) and x.dtype == y.dtype == torch.long
    for b in range(B):
        assert x[b].tolist() == list(range(100 + ix[b], 100 + ix[b] + T))
    assert torch.equal(y, x + 1)  # shifted by one
    assert int(y.max()) <= 100 + N - 1  # the last target is inside the data


def test_get_batch_reaches_every_start_including_the_last():
    data = torch.arange(6)
    x, _ = cl.get_batch(data, 3, 400, torch.Generator().manual_seed(0))
    assert set(x[:, 0].tolist()) == {0, 1, 2}  # starts 0..N-T-1: the last window's target ends at data[-1]


def test_bigram_logits_are_rows_of_its_table_and_the_loss_is_pytorchs():
    torch.manual_seed(0)
    model = cl.BigramLanguageModel(7)
    assert tuple(model.token_embedding_table.weight.shape) == (7, 7)
    idx = torch.randint(7, (3, 5))
    targets = torch.randint(7, (3, 5))
    logits, loss = model(idx, targets)
    assert torch.equal(logits, model.token_embedding_table.weight[idx])
    by_hand = -torch.log_softmax(logits, -1).gather(-1, targets[..., None]).mean()
    torch.testing.assert_close(loss, by_hand)
    assert model(idx)[1] is None


def test_bigram_refuses_targets_of_another_shape():
    with pytest.raises(ValueError, match="targets"):
        cl.BigramLanguageModel(5)(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, 4, dtype=torch.long))


def test_sample_next_token_draws_from_the_softmax_of_logits_over_temperature():
    logits = torch.tensor([[2.0, 0.0, -1.0, 1.0]])
    for temperature in (0.5, 1.0, 2.0):
        g = torch.Generator().manual_seed(0)
        draws = torch.cat([cl.sample_next_token(logits, temperature, generator=g) for _ in range(20000)])
        freq = torch.bincount(draws[:, 0], minlength=4).float() / len(draws)
        torch.testing.assert_close(freq, F.softmax(logits[0] / temperature, -1), atol=0.015, rtol=0)


def test_sample_next_token_is_multinomial_with_the_same_generator():
    logits = torch.randn(5, 9, generator=torch.Generator().manual_seed(3))
    got = cl.sample_next_token(logits, 0.7, generator=torch.Generator().manual_seed(4))
    expected = torch.multinomial(F.softmax(logits / 0.7, -1), 1, generator=torch.Generator().manual_seed(4))
    assert got.shape == (5, 1) and got.dtype == torch.long and torch.equal(got, expected)


def test_top_k_keeps_the_k_largest_and_ties_with_the_kth():
    logits = torch.tensor([[5.0, 1.0, 3.0, 3.0, 0.0, 4.0]])
    seen = set()
    g = torch.Generator().manual_seed(0)
    for _ in range(2000):
        seen.add(int(cl.sample_next_token(logits, top_k=3, generator=g)))
    assert seen == {0, 2, 3, 5}  # 5, 4 and the two 3s tied for third place
    g = torch.Generator().manual_seed(0)
    assert {int(cl.sample_next_token(logits, top_k=1, generator=g)) for _ in range(200)} == {0}


def test_sample_next_token_leaves_the_logits_alone_and_checks_its_arguments():
    logits = torch.randn(2, 4)
    before = logits.clone()
    cl.sample_next_token(logits, 0.5, top_k=2)
    assert torch.equal(logits, before)
    for bad in (0, -1.0):
        with pytest.raises(ValueError, match="temperature"):
            cl.sample_next_token(logits, bad)
    with pytest.raises(ValueError, match="top_k"):
        cl.sample_next_token(logits, top_k=5)


# ------------------------------------------------------------------------------------------- the rest


def test_train_val_split_is_by_position():
    data = torch.arange(10)
    train, val = cl.train_val_split(data, 0.8)
    assert train.tolist() == list(range(8)) and val.tolist() == [8, 9]


def test_generate_appends_ids_and_crops_the_context():
    torch.manual_seed(0)
    model = CharGPT(11, block_size=6, d_model=16, n_layers=1, n_heads=2)
    prompt = torch.tensor([[1, 2, 3]])
    out = cl.generate(model, prompt, 10, generator=torch.Generator().manual_seed(0))
    assert out.shape == (1, 13) and torch.equal(out[:, :3], prompt) and int(out.max()) < 11
    again = cl.generate(model, prompt, 10, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, again) and model.training  # seeded, and the mode restored


def test_generate_with_top_1_is_greedy():
    torch.manual_seed(0)
    model = cl.BigramLanguageModel(6)
    out = cl.generate(model, torch.tensor([[0]]), 5, top_k=1)
    table = model.token_embedding_table.weight
    expected = [0]
    for _ in range(5):
        expected.append(int(table[expected[-1]].argmax()))
    assert out[0].tolist() == expected


def test_estimate_loss_is_the_mean_of_the_batch_losses():
    torch.manual_seed(0)
    model = cl.BigramLanguageModel(5)
    data = torch.randint(5, (50,), generator=torch.Generator().manual_seed(1))
    got = cl.estimate_loss(model, {"val": data}, 4, 3, eval_iters=6, generator=torch.Generator().manual_seed(2))
    g = torch.Generator().manual_seed(2)
    losses = [model(*cl.get_batch(data, 4, 3, g))[1].item() for _ in range(6)]
    assert got["val"] == pytest.approx(sum(losses) / 6, rel=1e-6)


def test_lstm_is_causal_and_returns_the_same_interface():
    torch.manual_seed(0)
    model = cl.CharLSTM(9, block_size=8, d_embed=8, hidden=16).eval()
    idx = torch.randint(9, (2, 6))
    logits, loss = model(idx, idx)
    assert logits.shape == (2, 6, 9) and loss.dim() == 0
    changed = idx.clone()
    changed[:, 4:] = (changed[:, 4:] + 1) % 9
    torch.testing.assert_close(model(changed)[0][:, :4], logits[:, :4])  # later inputs do not reach position 3


def test_a_few_seconds_of_training_beat_a_uniform_guess():
    torch.set_num_threads(1)
    text = "to be or not to be, that is the question. " * 40
    stoi, _ = cl.build_char_vocab(text)
    data = cl.encode_chars(text, stoi)
    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    for model, lr in ((cl.BigramLanguageModel(len(stoi)), 0.1), (CharGPT(len(stoi), 16, 32, 2, 2), 3e-3)):
        opt = torch.optim.AdamW(model.parameters(), lr=lr)
        for _ in range(150):
            _, loss = model(*cl.get_batch(data, 16, 16, g))
            opt.zero_grad()
            loss.backward()
            opt.step()
        val = cl.estimate_loss(model, {"all": data}, 16, 16, 4, g)["all"]
        assert val < 0.6 * math.log(len(stoi)), (type(model).__name__, val)
