"""Lesson 00 references against direct computations."""

import collections

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib.welcome import (
    count_characters,
    gradient_descent,
    next_token_pairs,
    normalize_rows,
    pairwise_distances,
)


@given(st.text())
def test_count_characters_matches_counter_in_first_appearance_order(text):
    counts = count_characters(text)
    assert counts == collections.Counter(text)
    assert list(counts) == list(dict.fromkeys(text))


@given(st.lists(st.integers(-5, 5)))
def test_next_token_pairs_pairs_each_id_with_its_successor(ids):
    pairs = next_token_pairs(ids)
    assert len(pairs) == max(len(ids) - 1, 0)
    assert all(pairs[i] == (ids[i], ids[i + 1]) for i in range(len(pairs)))


def test_normalize_rows_rows_sum_to_one_and_input_is_kept():
    x = torch.rand(5, 7, generator=torch.Generator().manual_seed(0)) + 0.01
    before = x.clone()
    out = normalize_rows(x)
    torch.testing.assert_close(out.sum(dim=1), torch.ones(5))
    torch.testing.assert_close(out * x.sum(dim=1, keepdim=True), x)
    assert torch.equal(x, before)


def test_pairwise_distances_on_the_lessons_example():
    a = torch.tensor([[0.0, 0.0], [3.0, 4.0]])
    b = torch.tensor([[0.0, 0.0], [0.0, 1.0], [6.0, 8.0]])
    expected = torch.tensor([[0.0, 1.0, 10.0], [5.0, 18**0.5, 5.0]])
    torch.testing.assert_close(pairwise_distances(a, b), expected)


@given(
    st.lists(st.integers(1, 3), max_size=2),
    st.integers(1, 6),
    st.integers(1, 6),
    st.integers(1, 5),
    st.integers(0, 2**16),
)
def test_pairwise_distances_match_cdist_and_a_loop(batch, n, m, c, seed):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(*batch, n, c, generator=generator, dtype=torch.float64)
    b = torch.randn(*batch, m, c, generator=generator, dtype=torch.float64)
    before = a.clone(), b.clone()
    out = pairwise_distances(a, b)
    assert out.shape == (*batch, n, m)
    torch.testing.assert_close(out, torch.cdist(a, b))
    flat_a, flat_b, flat_out = a.reshape(-1, n, c), b.reshape(-1, m, c), out.reshape(-1, n, m)
    for k in range(flat_a.shape[0]):  # one pair of points at a time, with Python's own arithmetic
        for i in range(n):
            for j in range(m):
                pairs = zip(flat_a[k, i].tolist(), flat_b[k, j].tolist(), strict=True)
                by_hand = sum((x - y) ** 2 for x, y in pairs) ** 0.5
                assert abs(flat_out[k, i, j].item() - by_hand) < 1e-9
    assert torch.equal(a, before[0]) and torch.equal(b, before[1])


def test_pairwise_distances_broadcast_their_batch_dimensions():
    a, b = torch.randn(2, 1, 3, 4), torch.randn(5, 6, 4)
    torch.testing.assert_close(pairwise_distances(a, b), torch.cdist(a.expand(2, 5, 3, 4), b.expand(2, 5, 6, 4)))


def _problem(seed: int, n: int = 12, c: int = 3):
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, generator=generator)
    y = x @ torch.randn(c, generator=generator) + 0.1 * torch.randn(n, generator=generator)
    return torch.randn(c, generator=generator), x, y


def test_gradient_descent_on_the_lessons_example():
    w, losses = gradient_descent(torch.zeros(2), torch.eye(2), torch.tensor([1.0, 2.0]), lr=0.5, steps=2)
    torch.testing.assert_close(w, torch.tensor([0.75, 1.5]))
    assert losses == [2.5, 0.625]


@pytest.mark.parametrize("seed, lr, steps", [(0, 0.1, 5), (1, 0.03, 12), (2, 0.2, 1), (3, 0.1, 0)])
def test_gradient_descent_matches_torch_sgd_and_keeps_its_input(seed, lr, steps):
    w0, x, y = _problem(seed)
    before = w0.clone()
    w, losses = gradient_descent(w0, x, y, lr, steps)
    assert torch.equal(w0, before) and not w0.requires_grad and not w.requires_grad
    weights = torch.nn.Parameter(w0.clone())
    optimizer = torch.optim.SGD([weights], lr=lr)  # PyTorch's own step, the independent reference
    expected = []
    for _ in range(steps):
        loss = torch.nn.functional.mse_loss(x @ weights, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        expected.append(loss.item())
    torch.testing.assert_close(w, weights.detach())
    assert len(losses) == steps and all(type(v) is float for v in losses)
    torch.testing.assert_close(torch.tensor(losses), torch.tensor(expected))


def test_gradient_descent_reaches_the_least_squares_solution_even_under_no_grad():
    w0, x, y = _problem(4, n=40, c=3)
    with torch.no_grad():  # the function turns gradients on for itself
        w, losses = gradient_descent(w0, x, y, lr=0.1, steps=400)
    solution = torch.linalg.lstsq(x, y[:, None]).solution[:, 0]
    torch.testing.assert_close(w, solution, atol=1e-4, rtol=1e-4)
    assert losses[-1] < losses[0]


@pytest.mark.parametrize(
    "call, error",
    [
        (lambda: count_characters(3), TypeError),
        (lambda: next_token_pairs("abc"), TypeError),
        (lambda: next_token_pairs([1, 2.5]), TypeError),
        (lambda: normalize_rows(torch.ones(3)), ValueError),
        (lambda: normalize_rows(torch.zeros(2, 2)), ValueError),
        (lambda: pairwise_distances(torch.ones(3, 2), torch.ones(4, 3)), ValueError),
        (lambda: pairwise_distances(torch.ones(3), torch.ones(4, 3)), ValueError),
        (lambda: pairwise_distances([[0.0]], torch.ones(1, 1)), TypeError),
        (lambda: gradient_descent(torch.zeros(2), torch.ones(4, 3), torch.ones(4), 0.1, 1), ValueError),
        (lambda: gradient_descent(torch.zeros(3), torch.ones(4, 3), torch.ones(5), 0.1, 1), ValueError),
        (lambda: gradient_descent(torch.zeros(3), torch.ones(4, 3), torch.ones(4), 0.0, 1), ValueError),
        (lambda: gradient_descent(torch.zeros(3), torch.ones(4, 3), torch.ones(4), 0.1, -1), ValueError),
    ],
)
def test_bad_input_is_rejected_clearly(call, error):
    with pytest.raises(error):
        call()
