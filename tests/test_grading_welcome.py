"""Lesson 00 graders: right answers and the reference pass; each common mistake is named, the primer's too.

The tests every lesson gets, and the tables below, run through tests/grader_kit.py.
"""

from course_lib.grading import welcome as grading
from tests.grader_kit import HIDDEN, Edit, GraderKit, LessonGraderTests, mistake, wrong_answer

KIT = GraderKit(
    "00_welcome",
    grading,
    {
        "count_characters": "def count_characters(t):\n    c = {}\n    for ch in t:\n"
        "        c[ch] = c.get(ch, 0) + 1\n    return c",
        "next_token_pairs": "def next_token_pairs(i):\n    return list(zip(i, i[1:]))",
        "normalize_rows": "def normalize_rows(x):\n    return x / x.sum(1, keepdim=True)",
        "pairwise_distances": "def pairwise_distances(a, b):\n"
        "    return (a.unsqueeze(-2) - b.unsqueeze(-3)).norm(dim=-1)",
        "gradient_descent": "import torch\n"
        "def gradient_descent(w, x, y, lr, steps):\n"
        "    w = w.detach().clone().requires_grad_(True)\n"
        "    losses = []\n"
        "    for _ in range(steps):\n"
        "        loss = ((x @ w - y) ** 2).mean()\n"
        "        loss.backward()\n"
        "        with torch.no_grad():\n"
        "            w -= lr * w.grad\n"
        "        w.grad.zero_()\n"
        "        losses.append(loss.item())\n"
        "    return w.detach(), losses",
    },
)

# Another right route to the distances: |a - b|^2 = |a|^2 + |b|^2 - 2 a.b, with one batched product for all pairs.
EXPANDED = (
    "def f(a, b):\n"
    "    squares = (a**2).sum(-1)[..., :, None] + (b**2).sum(-1)[..., None, :] - 2 * a @ b.transpose(-2, -1)\n"
    "    return squares.clamp_min(0).sqrt()"
)

# Each known mistake, as a whole answer, and what its message names.
MISTAKES = [
    wrong_answer(
        "count_characters",
        "def f(t):\n    return {c: t.count(c) for c in t if c != ' '}",
        "Spaces",
        id="count-skips-spaces",
    ),
    wrong_answer(
        "count_characters",
        "def f(t):\n    return {c: t.count(c) for c in sorted(set(t))}",
        "first appearance",
        id="count-keys-sorted",
    ),
    wrong_answer(
        "next_token_pairs",
        "def f(i):\n    return [(i[k], i[k + 1]) for k in range(len(i) - 2)]",
        "too few",
        id="pairs-one-too-few",
    ),
    wrong_answer(
        "next_token_pairs", "def f(i):\n    return [(b, a) for a, b in zip(i, i[1:])]", "reversed", id="pairs-reversed"
    ),
    wrong_answer(
        "normalize_rows", "def f(x):\n    return x / x.sum(0, keepdim=True)", "columns sum to 1", id="normalize-columns"
    ),
    wrong_answer(
        "normalize_rows",
        "def f(x):\n    x /= x.sum(1, keepdim=True)\n    return x",
        "in place",
        id="normalize-in-place",
    ),
    wrong_answer(
        "normalize_rows", "def f(x):\n    raise NotImplementedError()", "not written yet", id="normalize-unwritten"
    ),
    mistake(
        "pairwise_distances",
        "a.unsqueeze(-2) - b.unsqueeze(-3)",
        "b.unsqueeze(-2) - a.unsqueeze(-3)",
        "transposed",
        id="distances-transposed",
    ),
    mistake("pairwise_distances", ".norm(dim=-1)", ".pow(2).sum(-1)", "squared distances", id="distances-squared"),
    mistake("pairwise_distances", ".norm(dim=-1)", ".abs().sum(-1)", "L1", id="distances-l1"),
    mistake("pairwise_distances", ".norm(dim=-1)", ".pow(2).mean(-1).sqrt()", "averaged", id="distances-mean"),
    mistake(
        "pairwise_distances",
        ".norm(dim=-1)",
        ".pow(2).sum(-2).sqrt()",
        "instead of the coordinates",
        id="distances-wrong-axis",
    ),
    mistake(
        "pairwise_distances",
        "(a.unsqueeze(-2) - b.unsqueeze(-3))",
        "(a - b)",
        "matching rows",
        id="distances-matching-rows",
    ),
    mistake(
        "pairwise_distances",
        "a.unsqueeze(-2) - b.unsqueeze(-3)",
        "a[:, None] - b[None]",
        ("line the dimensions up from the right", "unsqueeze(-2)"),
        id="distances-axes-from-the-front",
    ),
    wrong_answer(
        "pairwise_distances",
        EXPANDED.replace("b.transpose(-2, -1)", "b.T"),
        ("b.transpose(-2, -1)", "b.T reverses all of them"),
        id="distances-dot-T-on-a-batch",
    ),
    mistake(
        "pairwise_distances",
        "return (a.unsqueeze(-2) - b.unsqueeze(-3)).norm(dim=-1)",
        "import torch\n    return torch.stack([torch.stack([(p - q).norm() for q in b]) for p in a])",
        "line the dimensions up from the right",
        id="distances-loop-over-points",
    ),
    mistake(
        "pairwise_distances",
        "return (a.unsqueeze(-2)",
        "a -= a.mean(-2, keepdim=True)\n    b -= a.mean(-2, keepdim=True)\n    return (a.unsqueeze(-2)",
        "changed its argument",
        id="distances-changes-its-input",
    ),
    mistake("gradient_descent", "        w.grad.zero_()\n", "", "never reset", id="descent-gradient-not-reset"),
    mistake("gradient_descent", "w -= lr", "w += lr", "up the gradient", id="descent-ascends"),
    mistake("gradient_descent", ".mean()", ".sum()", "sum of the squared errors", id="descent-sum"),
    mistake(
        "gradient_descent",
        "        with torch.no_grad():\n            w -= lr * w.grad\n",
        "        w -= lr * w.grad\n",
        ("leaf Variable", "torch.no_grad()"),
        id="descent-update-recorded",
    ),
    mistake(
        "gradient_descent",
        "        with torch.no_grad():\n            w -= lr * w.grad\n        w.grad.zero_()\n",
        "        w = w - lr * w.grad\n",
        ("w.grad is None", "leaf"),
        id="descent-new-tensor",
    ),
    mistake(
        "gradient_descent",
        "w = w.detach().clone().requires_grad_(True)",
        "w = w.detach().clone()",
        "does not require gradients",
        id="descent-not-tracked",
    ),
    mistake(
        "gradient_descent",
        "w = w.detach().clone().requires_grad_(True)",
        "w.requires_grad_(True)",
        "changed the caller's w",
        id="descent-changes-callers-w",
    ),
    mistake(
        "gradient_descent",
        "losses.append(loss.item())",
        "losses.append(loss)",
        "loss.item()",
        id="descent-loss-tensors",
    ),
    mistake(
        "gradient_descent",
        "        losses.append(loss.item())\n",
        "        losses.append(((x @ w - y) ** 2).mean().item())\n",
        "after its update",
        id="descent-loss-after",
    ),
    mistake(
        "gradient_descent",
        "range(steps)",
        "range(steps - 1)",
        "1 losses for 2 steps",
        id="descent-one-step-short",
        cases=[(5, 2, 0.1, 2, 7)],
    ),
    mistake(
        "gradient_descent",
        "return w.detach(), losses",
        "return w.detach()",
        "a pair (w, losses)",
        id="descent-no-losses",
    ),
    mistake(
        "gradient_descent",
        "loss.backward()",
        "loss.backward(retain_graph=True)",
        "hidden case 1",
        id="descent-hidden-messages-hide-inputs",
        also=(("w -= lr", "w += lr"),),
        cases=HIDDEN,
    ),
]

# An answer that calls the reference.
BORROWED = [
    wrong_answer(
        "count_characters",
        "from course_lib.welcome import count_characters as c\ndef f(t):\n    return c(t)",
        "write `count_characters` yourself",
        id="count-calling-the-reference",
    ),
    wrong_answer(
        "pairwise_distances",
        "import torch\ndef f(a, b):\n    return torch.cdist(a, b)",
        ("torch.cdist", "write `pairwise_distances` yourself"),
        id="distances-cdist",
    ),
    wrong_answer(
        "gradient_descent",
        "import torch\n"
        "def f(w, x, y, lr, steps):\n"
        "    w = w.detach().clone().requires_grad_(True)\n"
        "    optimizer = torch.optim.SGD([w], lr=lr)\n"
        "    losses = []\n"
        "    for _ in range(steps):\n"
        "        loss = ((x @ w - y) ** 2).mean()\n"
        "        optimizer.zero_grad()\n"
        "        loss.backward()\n"
        "        optimizer.step()\n"
        "        losses.append(loss.item())\n"
        "    return w.detach(), losses",
        ("torch.optim.SGD", "write `gradient_descent` yourself"),
        id="descent-sgd",
    ),
]


def test_count_characters_runs_four_visible_checks():
    assert "all 4 visible checks passed" in repr(KIT.grade("count_characters"))


def test_normalize_rows_passes_a_case_of_its_own():
    assert KIT.grade("normalize_rows", cases=[(2, 9, 5)]).hidden


def test_the_expanded_route_to_the_distances_passes_visible_and_hidden_checks():
    assert KIT.grade("pairwise_distances", EXPANDED).checks == 3
    assert KIT.grade("pairwise_distances", EXPANDED, cases=HIDDEN).hidden


def test_gradient_descent_with_zero_steps_returns_the_start_and_no_losses():
    assert KIT.grade("gradient_descent", cases=[(4, 2, 0.1, 0, 9)]).hidden
    KIT.fails(
        "gradient_descent",
        Edit("return w.detach(), losses", "return w.detach() + 1, losses"),
        "the weights it returned",
        cases=[(4, 2, 0.1, 0, 9)],
    )


class TestGraders(LessonGraderTests):
    kit = KIT
    at_least = 3
    mistakes = MISTAKES
    borrowed = BORROWED
