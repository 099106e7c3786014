"""course_lib.attention_toys: the toy tasks have the answers they claim, the models learn them, and the trained
heads look where the lessons say they look, for the seeds tested here (the lessons use seed 0)."""

from __future__ import annotations

import pytest
import torch

from course_lib import attention_toys as toys
from course_lib.attention import SelfAttention
from course_lib.multihead import MultiHeadAttention

# What the lessons run: lesson 04 trains the mirror with one head, lesson 05 the neighbours with two.
MIRROR_STEPS, NEIGHBOUR_STEPS = 150, 200


def test_mirror_answers_are_the_reversed_sequence():
    task = toys.ToyTask.mirror(vocab_size=5, length=4)
    inputs, targets = task.batch(3, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (3, 4) and task.n_classes == 5
    for seq, answer in zip(inputs.tolist(), targets.tolist(), strict=True):
        assert answer == seq[::-1]
    assert task.keys()["mirror"].tolist() == [3, 2, 1, 0]
    assert task.decode(4) == (4,)


def test_neighbour_answers_are_the_left_and_right_tokens_wrapping_round():
    task = toys.ToyTask.neighbours(vocab_size=5, length=4)
    inputs = torch.tensor([[1, 2, 3, 4]])
    targets = task.answer(inputs)
    pairs = [task.decode(int(c)) for c in targets[0]]
    assert pairs == [(4, 2), (1, 3), (2, 4), (3, 1)]  # position 0's left neighbour is the last token
    assert task.n_classes == 25
    assert task.keys()["left"].tolist() == [3, 0, 1, 2] and task.keys()["right"].tolist() == [1, 2, 3, 0]


@pytest.mark.parametrize(
    "make, error",
    [
        (lambda: toys.ToyTask("sort"), "kind"),
        (lambda: toys.ToyTask.mirror(vocab_size=1), "vocab_size"),
        (lambda: toys.ToyTask.neighbours(length=2), "length"),
        (lambda: toys.ToyTask.mirror().decode(8), "target"),
        (lambda: toys.build_toy(toys.ToyTask.mirror(), d_model=10, n_heads=3), "d_model"),
        (lambda: toys.train_toy(toys.build_toy(toys.ToyTask.mirror()), steps=0), "steps"),
        (lambda: toys.weight_on(torch.rand(2, 4, 4), torch.tensor([0, 1, 2, 4])), "keys"),
    ],
)
def test_bad_arguments_are_named(make, error):
    with pytest.raises(ValueError, match=error):
        make()


def test_build_toy_is_seeded_and_leaves_the_global_random_state_alone():
    torch.manual_seed(5)
    before = torch.random.get_rng_state()
    a = toys.build_toy(toys.ToyTask.mirror(), seed=3)
    b = toys.build_toy(toys.ToyTask.mirror(), seed=3)
    assert torch.equal(torch.random.get_rng_state(), before)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert isinstance(a.attention, SelfAttention)
    assert isinstance(toys.build_toy(toys.ToyTask.neighbours(), n_heads=2).attention, MultiHeadAttention)


def test_weight_on_picks_each_querys_key():
    weights = torch.rand(3, 2, 4, 4, generator=torch.Generator().manual_seed(0))  # (B, H, T, T)
    keys = torch.tensor([3, 0, 2, 1])
    by_hand = torch.stack([weights[:, :, t, int(keys[t])] for t in range(4)], dim=-1).mean(dim=(0, 2))  # (H,)
    assert torch.allclose(toys.weight_on(weights, keys), by_hand)
    assert torch.allclose(toys.weight_on(weights[:, 0], keys), by_hand[0])


def test_train_toy_uses_the_step_it_is_given():
    calls = []

    def step(model, optimizer, inputs, targets):
        calls.append((inputs.shape, targets.shape))
        return 1.0

    losses = toys.train_toy(toys.build_toy(toys.ToyTask.mirror()), steps=3, batch_size=5, step=step)
    assert losses == [1.0, 1.0, 1.0] and calls == [((5, 8), (5, 8))] * 3


def _trained(task, n_heads, seed, steps):
    model = toys.build_toy(task, d_model=16, n_heads=n_heads, seed=seed)
    losses = toys.train_toy(model, steps, seed=seed)
    inputs, _ = task.batch(500, torch.Generator().manual_seed(99))
    with torch.no_grad():
        _, weights = model(inputs, need_weights=True)
    return model, losses, weights


@pytest.mark.parametrize("seed", range(5))
def test_one_head_learns_the_mirror(seed):
    task = toys.ToyTask.mirror()
    model, losses, weights = _trained(task, None, seed, MIRROR_STEPS)
    assert losses[0] > 1.8 and losses[-1] < 0.01  # from about ln 8 = 2.08 (a uniform guess) to almost 0
    assert toys.accuracy(model) >= 0.99
    assert toys.weight_on(weights, task.keys()["mirror"]) > 0.95  # the anti-diagonal


@pytest.mark.parametrize("seed", range(5))
def test_two_heads_split_the_neighbours_between_them(seed):
    task = toys.ToyTask.neighbours()
    model, losses, weights = _trained(task, 2, seed, NEIGHBOUR_STEPS)
    assert toys.accuracy(model) >= 0.99
    left, right = (toys.weight_on(weights, task.keys()[side]) for side in ("left", "right"))  # (H,) each
    assert left.max() > 0.75 and right.max() > 0.75  # each neighbour has a head that mostly looks there
    assert left.argmax() != right.argmax()  # ... and it is not the same head


def test_one_head_alone_splits_its_weight_between_both_neighbours():
    task = toys.ToyTask.neighbours()
    model, _, weights = _trained(task, 1, 0, NEIGHBOUR_STEPS)
    assert toys.accuracy(model) >= 0.99
    left, right = (float(toys.weight_on(weights, task.keys()[side])) for side in ("left", "right"))
    assert min(left, right) > 0.2 and max(left, right) < 0.8 and left + right > 0.9
