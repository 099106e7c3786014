"""course_lib.generate: the filters against Hugging Face's logits warpers, sampling, and KV-cache generation."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

from course_lib.generate import complete, generate, sample_next_token, top_k_filter, top_p_filter
from course_lib.gpt import GPT, KVCache
from course_lib.gpt2 import GPT2, GPT2Config
from tests import learner_gpt
from tests.learner_gpt import LearnerGPT


def _model(seed: int = 0, **overrides) -> GPT2:
    torch.manual_seed(seed)
    return GPT2(GPT2Config.tiny(**overrides)).eval()


# ---------------------------------------------------------------------------------------------------- filters


def test_top_p_keeps_the_token_that_crosses_p():
    logits = torch.log(torch.tensor([[0.1, 0.5, 0.15, 0.25]]))
    kept = lambda p: torch.isfinite(top_p_filter(logits, p))[0].tolist()  # noqa: E731
    assert kept(0.5) == [False, True, False, False]  # 0.5 reaches p exactly: nothing more is needed
    assert kept(0.6) == [False, True, False, True]  # 0.5 < 0.6, 0.75 >= 0.6: the crossing token stays
    assert kept(0.8) == [False, True, True, True]
    assert kept(0.01) == [False, True, False, False]  # the top token always stays
    assert kept(0.0) == [False, True, False, False]  # p = 0 too
    assert kept(1.0) == [True, True, True, True]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), p=st.floats(0.01, 0.99), vocab=st.integers(2, 50))
def test_top_p_matches_hugging_faces_warper(seed, p, vocab):
    logits = 3 * torch.randn(4, vocab, generator=torch.Generator().manual_seed(seed))
    theirs = TopPLogitsWarper(top_p=p)(None, logits.clone())
    assert torch.equal(torch.isfinite(top_p_filter(logits, p)), torch.isfinite(theirs))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), p=st.floats(0.01, 1.0))
def test_top_p_keeps_the_smallest_set_reaching_p(seed, p):
    logits = 2 * torch.randn(3, 30, generator=torch.Generator().manual_seed(seed))
    probs = logits.softmax(-1)
    kept = torch.isfinite(top_p_filter(logits, p))
    for row in range(3):
        mass = probs[row][kept[row]].sum().item()
        assert mass >= p - 1e-6  # enough probability
        smallest_kept = probs[row][kept[row]].min().item()
        assert mass - smallest_kept < p + 1e-6  # but without its least likely token it would not be enough
        assert kept[row, probs[row].argmax()]
        # Kept tokens are exactly the most probable ones.
        assert probs[row][~kept[row]].max().item() <= smallest_kept if (~kept[row]).any() else True


def test_top_p_leaves_its_input_alone_and_keeps_other_dims():
    logits = torch.randn(2, 3, 10)
    before = logits.clone()
    out = top_p_filter(logits, 0.7)
    assert out.shape == (2, 3, 10) and torch.equal(logits, before)
    assert torch.equal(out[1, 2], top_p_filter(logits[1, 2], 0.7))


@pytest.mark.parametrize("vocab", [2, 7, 50])
def test_top_p_zero_keeps_only_the_top_token_as_hugging_faces_warper_does(vocab):
    logits = 3 * torch.randn(5, vocab, generator=torch.Generator().manual_seed(vocab))
    theirs = TopPLogitsWarper(top_p=0.0)(None, logits.clone())
    kept = torch.isfinite(top_p_filter(logits, 0.0))
    assert torch.equal(kept, torch.isfinite(theirs))
    assert kept.sum(dim=-1).tolist() == [1] * 5 and kept.gather(-1, logits.argmax(-1, keepdim=True)).all()
    assert torch.equal(top_p_filter(logits, 0.0)[kept], logits[kept])  # the kept logit as it was


@pytest.mark.parametrize("p", [-0.1, -1e-9, 1.5, float("nan")])
def test_top_p_rejects_p_outside_0_1(p):
    with pytest.raises(ValueError, match="p must be in"):
        top_p_filter(torch.randn(1, 5), p)


def test_top_p_rejects_a_non_number():
    with pytest.raises(TypeError, match="p"):
        top_p_filter(torch.randn(1, 5), "0.9")


@pytest.mark.parametrize("k", [1, 3, 7])
def test_top_k_matches_hugging_faces_warper(k):
    logits = torch.randn(5, 7, generator=torch.Generator().manual_seed(k))
    assert torch.equal(top_k_filter(logits, k), TopKLogitsWarper(top_k=k)(None, logits.clone()))


def test_top_k_keeps_ties_with_the_kth():
    out = top_k_filter(torch.tensor([[3.0, 1.0, 2.0, 2.0]]), 2)
    assert torch.isfinite(out).tolist() == [[True, False, True, True]]
    with pytest.raises(ValueError, match="top_k"):
        top_k_filter(torch.randn(1, 4), 5)


# ---------------------------------------------------------------------------------------------------- sampling


def test_samples_are_long_column_vectors_and_seeded():
    logits = torch.randn(3, 11)
    a = sample_next_token(logits, generator=torch.Generator().manual_seed(7))
    b = sample_next_token(logits, generator=torch.Generator().manual_seed(7))
    assert a.shape == (3, 1) and a.dtype == torch.long and torch.equal(a, b)


def test_sample_frequencies_follow_the_filtered_softmax():
    logits = torch.log(torch.tensor([[0.4, 0.3, 0.2, 0.1]])).expand(20_000, 4)
    draws = sample_next_token(logits, temperature=1.0, top_p=0.8, generator=torch.Generator().manual_seed(0))
    freq = torch.bincount(draws[:, 0], minlength=4) / 20_000
    # top_p = 0.8 keeps 0.4, 0.3 and 0.2 (renormalised by 0.9); 20,000 draws: standard error < 0.004.
    assert torch.allclose(freq, torch.tensor([4 / 9, 3 / 9, 2 / 9, 0.0]), atol=0.015)
    cold = sample_next_token(logits, temperature=0.05, generator=torch.Generator().manual_seed(0))
    assert (cold == 0).float().mean() > 0.99  # low temperature: almost always the top token


def test_sampling_rejects_bad_temperature():
    with pytest.raises(ValueError, match="temperature"):
        sample_next_token(torch.randn(1, 4), temperature=0.0)


# ---------------------------------------------------------------------------------------------------- generate


@pytest.mark.parametrize("use_sdpa", [False, True])
@pytest.mark.parametrize(
    "options",
    [dict(greedy=True), dict(temperature=0.8), dict(temperature=1.2, top_k=20, top_p=0.9)],
    ids=["greedy", "sampled", "top-k-top-p"],
)
def test_cache_generates_the_ids_of_full_recomputation(use_sdpa, options):
    model = _model(use_sdpa=use_sdpa)
    prompt = torch.randint(0, 97, (3, 5))
    # 5 + 60 > context 32: the window slides and the cache is rebuilt, as recomputation crops.
    runs = [
        generate(model, prompt, 60, generator=torch.Generator().manual_seed(3), use_cache=cache, **options)
        for cache in (True, False)
    ]
    assert runs[0].shape == (3, 65) and torch.equal(runs[0], runs[1])
    assert torch.equal(runs[0][:, :5], prompt)


def test_greedy_takes_the_argmax_of_each_step():
    model = _model()
    out = generate(model, torch.tensor([[1, 2, 3]]), 4, greedy=True)
    for t in range(3, 7):
        assert out[0, t] == model(out[:, :t])[0][0, -1].argmax()


def test_stop_tokens_end_rows_and_pad_them():
    model = _model()
    prompt = torch.randint(0, 97, (2, 4))
    free = generate(model, prompt, 12, greedy=True)
    stop = int(free[0, 7])  # row 0's 4th new id
    first_stop = [int((row[4:] == stop).nonzero()[0]) + 4 if (row[4:] == stop).any() else None for row in free]
    out = generate(model, prompt, 12, greedy=True, stop_tokens=[stop], pad_id=0)
    end = max(t for t in first_stop if t is not None) + 1 if None not in first_stop else 16
    assert out.shape[1] == end
    for row, t in enumerate(first_stop):
        stop_at = out.shape[1] if t is None else t + 1
        assert torch.equal(out[row, :stop_at], free[row, :stop_at])
        assert torch.all(out[row, stop_at:] == 0)  # after its stop token, a row only pads


def test_generation_restores_training_mode_and_checks_arguments():
    model = _model().train()
    generate(model, torch.tensor([[1]]), 2, greedy=True)
    assert model.training
    with pytest.raises(ValueError, match="max_new_tokens"):
        generate(model, torch.tensor([[1]]), -1)
    with pytest.raises(TypeError, match="idx"):
        generate(model, torch.tensor([[1.0]]), 2)
    with pytest.raises(TypeError, match="stop_tokens"):
        generate(model, torch.tensor([[1]]), 2, stop_tokens=["a"])
    assert generate(model, torch.tensor([[1, 2]]), 0).tolist() == [[1, 2]]


def test_complete_returns_python_ints_without_the_stop_token():
    model = _model()
    free = complete(model, [5, 6, 7], 10, greedy=True)
    assert len(free) == 10 and all(type(i) is int for i in free)
    stop = free[4]
    cut = complete(model, [5, 6, 7], 10, greedy=True, stop_tokens=stop)
    assert cut == free[: free.index(stop)]
    with pytest.raises(ValueError, match="prompt"):
        complete(model, [], 3)


def test_a_model_without_a_cache_generates_by_recomputation():
    # A learner's lesson 09 GPT has no new_cache: generate recomputes the window at every step and gives the ids the
    # cached GPT2 with the same weights gives, the window sliding past the context (32).
    cached = _model()
    plain = LearnerGPT(97, 32, 16, 2, 2).eval()
    plain.load_state_dict(cached.state_dict())
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(2))
    for options in (dict(greedy=True), dict(temperature=0.9, top_p=0.9)):
        ids = [generate(m, prompt, 50, generator=torch.Generator().manual_seed(4), **options) for m in (plain, cached)]
        assert ids[0].shape == (2, 55) and torch.equal(ids[0], ids[1])
    with pytest.raises(TypeError, match="use_cache=True needs a model with a KV cache .* or a `forward_with_cache`"):
        generate(plain, prompt, 3, use_cache=True)


def test_a_learners_gpt_generates_with_their_own_cache_and_the_ids_of_recomputation():
    # Lesson 10's last exercise: a GPT written without course_lib (tests/learner_gpt.py), run with a cache by the
    # learner's own forward_with_cache, writes the ids that recomputing every window writes, past its context (32):
    # the cache is rebuilt when the window slides. The prompt goes in once, then one token per call.
    torch.manual_seed(0)
    model = LearnerGPT(97, 32, 16, 2, 2).eval()
    fed = []

    def counted(model, idx, cache):
        assert isinstance(cache, KVCache)  # made by generate for a model without new_cache
        fed.append((idx.shape[1], cache.length))
        return learner_gpt.forward_with_cache(model, idx, cache)

    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(2))
    for options in (dict(greedy=True), dict(temperature=0.9, top_p=0.9)):
        fed.clear()
        cached = generate(
            model, prompt, 50, forward_with_cache=counted, generator=torch.Generator().manual_seed(4), **options
        )
        again = generate(model, prompt, 50, use_cache=False, generator=torch.Generator().manual_seed(4), **options)
        assert cached.shape == (2, 55) and torch.equal(cached, again)
        assert fed[:3] == [(5, 0), (1, 5), (1, 6)] and len(fed) == 50
        assert (32, 0) in fed[1:]  # the window outgrew the context: a fresh cache, prefilled with the last 32


def test_the_learners_cached_pass_equals_the_courses_on_the_courses_gpt():
    # The learner's forward_with_cache reads only the module names of lesson 09's contract, so it runs the course's
    # GPT too: logits and every layer's cache equal the course's own cached forward pass, chunk by chunk.
    torch.manual_seed(1)
    model = GPT(97, 32, 16, 4, 3).eval()
    idx = torch.randint(0, 97, (2, 12), generator=torch.Generator().manual_seed(5))
    theirs, ours = KVCache.for_model(model, 2), model.new_cache(2)
    with torch.no_grad():
        for start, stop in [(0, 6), (6, 7), (7, 10), (10, 12)]:
            got = learner_gpt.forward_with_cache(model, idx[:, start:stop], theirs)
            expected, _ = model(idx[:, start:stop], cache=ours)
            assert torch.allclose(got, expected, atol=1e-5)
            for a, b in zip(theirs.layers, ours.layers, strict=True):
                assert torch.allclose(a.keys, b.keys, atol=1e-6) and torch.allclose(a.values, b.values, atol=1e-6)
    assert ours.length == theirs.length == 12


def test_lesson_09s_gpt_generates_with_its_cache():
    # The course's GPT takes the cache (GPT2 only configures it): cached and recomputed ids agree past the context.
    torch.manual_seed(0)
    model = GPT(97, 32, 16, 2, 2).eval()
    prompt = torch.randint(0, 97, (2, 5), generator=torch.Generator().manual_seed(2))
    ids = [generate(model, prompt, 50, greedy=True, use_cache=use) for use in (True, False)]
    assert ids[0].shape == (2, 55) and torch.equal(ids[0], ids[1])


def test_the_context_is_read_from_the_position_table():
    # A learner's GPT records its context only in its position table (8 rows): every step feeds the last 8 ids.
    torch.manual_seed(0)
    model = LearnerGPT(97, 8, 16, 2, 1).eval()
    out = generate(model, torch.tensor([[1, 2, 3]]), 12, greedy=True)
    assert out.shape == (1, 15)
    for t in range(3, 15):
        window = out[:, max(0, t - 8) : t]
        assert out[0, t] == model(window)[0][0, -1].argmax(), t
