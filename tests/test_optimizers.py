"""Tests of course_lib.optimizers (Lesson 12): Muon's Newton-Schulz iteration and one step, computed by hand."""

from __future__ import annotations

import pytest
import torch

from course_lib import optimizers
from course_lib.modern_gpt import ModernConfig, ModernGPT

A, B, C = 3.4445, -4.7750, 2.0315  # the quintic's coefficients, as Jordan's post gives them


def _scalar_iteration(s: float, steps: int = 5) -> float:
    """What the iteration does to one singular value s (of the matrix divided by its Frobenius norm)."""
    for _ in range(steps):
        s = A * s + B * s**3 + C * s**5
    return s


def test_newton_schulz_on_a_diagonal_matrix_is_the_scalar_iteration_by_hand():
    G = torch.diag(torch.tensor([3.0, 4.0], dtype=torch.float64))  # Frobenius norm 5: singular values 0.6, 0.8
    out = optimizers.newton_schulz(G, eps=0.0)
    # 0.6 -> 0.72288 and 0.8 -> 1.11920 after five iterations (worked out on the scalars, not the matrices)
    assert _scalar_iteration(0.6) == pytest.approx(0.722876, abs=1e-6)
    assert _scalar_iteration(0.8) == pytest.approx(1.119204, abs=1e-6)
    torch.testing.assert_close(out, torch.diag(torch.tensor([0.722876, 1.119204], dtype=torch.float64)), atol=1e-6,
                               rtol=0)  # fmt: skip


@pytest.mark.parametrize("shape", [(6, 9), (9, 6), (5, 5)])
def test_newton_schulz_acts_on_singular_values_only(shape):
    """G = U S V^T gives U f(S / ||G||) V^T, f the scalar iteration: the singular vectors are kept (tall or wide)."""
    g = torch.Generator().manual_seed(0)
    U, _ = torch.linalg.qr(torch.randn(shape[0], shape[0], generator=g, dtype=torch.float64))
    W, _ = torch.linalg.qr(torch.randn(shape[1], shape[1], generator=g, dtype=torch.float64))
    k = min(shape)
    S = torch.linspace(0.5, 3.0, k, dtype=torch.float64)
    G = U[:, :k] @ torch.diag(S) @ W[:, :k].T
    expected = U[:, :k] @ torch.diag(torch.tensor([_scalar_iteration(s) for s in (S / S.norm()).tolist()],
                                                  dtype=torch.float64)) @ W[:, :k].T  # fmt: skip
    torch.testing.assert_close(optimizers.newton_schulz(G, eps=0.0), expected, atol=1e-9, rtol=1e-9)


def test_newton_schulz_brings_singular_values_near_one():
    G = torch.randn(64, 128, generator=torch.Generator().manual_seed(1)) @ torch.diag(torch.logspace(0, -2, 128))
    values = torch.linalg.svdvals(optimizers.newton_schulz(G))
    assert values.min().item() > 0.6 and values.max().item() < 1.25
    grid = torch.logspace(-2.5, 0, 500, dtype=torch.float64)  # every normalised singular value above 0.003
    mapped = torch.tensor([_scalar_iteration(s) for s in grid.tolist()])
    assert mapped.min().item() > 0.68 and mapped.max().item() < 1.21  # the range the module's docstring states


def test_one_muon_step_by_hand():
    p = torch.nn.Parameter(torch.ones(2, 2, dtype=torch.float64))
    opt = optimizers.Muon([p], lr=0.1, momentum=0.95, weight_decay=0.5)
    p.grad = torch.diag(torch.tensor([3.0, 4.0], dtype=torch.float64))
    opt.step()
    # momentum buffer = grad; Nesterov direction = grad + 0.95 * buffer = 1.95 grad, whose orthogonalisation is
    # that of grad (the norm divides the 1.95 out); a square matrix is not rescaled; decay first: 1 - 0.1 * 0.5
    expected = 0.95 * torch.ones(2, 2, dtype=torch.float64) - 0.1 * torch.diag(
        torch.tensor([0.722876, 1.119204], dtype=torch.float64)
    )
    torch.testing.assert_close(p.detach(), expected, atol=1e-6, rtol=0)
    # second step with the gradient gone to zero: buffer = 0.95 * grad, direction = 0 + 0.95 * buffer -> the same
    # orthogonalised direction again (its size is divided out)
    p.grad = torch.zeros(2, 2, dtype=torch.float64)
    opt.step()
    expected = 0.95 * expected - 0.1 * torch.diag(torch.tensor([0.722876, 1.119204], dtype=torch.float64))
    torch.testing.assert_close(p.detach(), expected, atol=1e-6, rtol=0)


def test_a_tall_matrix_moves_by_the_square_root_of_its_aspect():
    p = torch.nn.Parameter(torch.zeros(8, 2, dtype=torch.float64))
    p.grad = torch.zeros(8, 2, dtype=torch.float64)
    p.grad[0, 0], p.grad[1, 1] = 3.0, 4.0
    optimizers.Muon([p], lr=1.0, momentum=0.0, nesterov=False).step()
    assert p[0, 0].item() == pytest.approx(-2 * 0.722876, abs=1e-6)  # sqrt(8 / 2) = 2
    assert p[1, 1].item() == pytest.approx(-2 * 1.119204, abs=1e-6)


def test_muon_takes_matrices_only_and_the_split_covers_every_parameter_once():
    with pytest.raises(ValueError, match="matrices"):
        optimizers.Muon([torch.nn.Parameter(torch.ones(3))])
    model = ModernGPT(ModernConfig(11, 8, d_model=16, n_heads=4, n_layers=2, norm="rms", position="rope"))
    muon, adamw = optimizers.muon_and_adamw(model)
    in_muon = {id(p) for group in muon.param_groups for p in group["params"]}
    in_adamw = {id(p) for group in adamw.param_groups for p in group["params"]}
    assert not in_muon & in_adamw and in_muon | in_adamw == {id(p) for p in model.parameters()}
    assert id(model.tok_emb.weight) in in_adamw and id(model.blocks[0].attn.qkv.weight) in in_muon
    assert all(p.dim() == 2 for group in muon.param_groups for p in group["params"])
    decayed = next(g for g in adamw.param_groups if g["weight_decay"] > 0)["params"]
    assert all(p.dim() >= 2 for p in decayed)


def test_newton_schulz_with_no_step_is_the_normalised_matrix_and_keeps_bf16():
    G = torch.randn(3, 5, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    torch.testing.assert_close(optimizers.newton_schulz(G, steps=0, eps=0.0), G / torch.linalg.matrix_norm(G))
    tall = G.T.contiguous()
    torch.testing.assert_close(optimizers.newton_schulz(tall, steps=0, eps=0.0), tall / torch.linalg.matrix_norm(G))
    out = optimizers.newton_schulz(G.bfloat16())
    assert out.dtype == torch.bfloat16 and out.shape == (3, 5)
    torch.testing.assert_close(out.double(), optimizers.newton_schulz(G), atol=0.05, rtol=0.05)  # bf16 roundings
    with pytest.raises(ValueError, match="steps"):
        optimizers.newton_schulz(G, steps=-1)


def test_muon_steps_along_the_orthogonalisation_it_is_given():
    """Muon calls its `orthogonalise` with the direction and ns_steps: the ladder hands it the learner's."""
    seen = []

    def halves(direction, steps):
        seen.append((tuple(direction.shape), steps))
        return 0.5 * torch.ones_like(direction)

    p = torch.nn.Parameter(torch.zeros(2, 3, dtype=torch.float64))
    p.grad = torch.ones(2, 3, dtype=torch.float64)
    optimizers.Muon([p], lr=1.0, momentum=0.0, nesterov=False, ns_steps=4, orthogonalise=halves).step()
    assert seen == [((2, 3), 4)] and torch.equal(p.detach(), -0.5 * torch.ones(2, 3, dtype=torch.float64))
    model = ModernGPT(ModernConfig(11, 8, d_model=16, n_heads=4, n_layers=1))
    muon, _ = optimizers.muon_and_adamw(model, orthogonalise=halves)
    assert muon.orthogonalise is halves
