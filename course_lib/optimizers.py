"""An optimizer beyond AdamW: Muon, which orthogonalises each weight matrix's update (Lesson 12).

    newton_schulz     an approximately orthogonal matrix with G's singular vectors: U S V^T -> about U V^T (exercise)
    Muon              SGD with Nesterov momentum whose update, for each 2-D weight, passes `newton_schulz` first
    muon_and_adamw    the split the GPT-2 speedruns use: Muon for the blocks' matrices, AdamW for the rest

Muon (Keller Jordan, 2024, "Muon: An optimizer for hidden layers in neural networks", a blog post with the
code of the NanoGPT speedrun) takes the momentum of a matrix's gradient, M = U S V^T, and steps along U V^T
instead: every direction the gradient points to moves by the same amount, however small its singular value.
Five iterations of an odd quintic polynomial, X <- a X + b (X X^T) X + c (X X^T)^2 X with (a, b, c) =
(3.4445, -4.7750, 2.0315) from that post, push the singular values of X = M / ||M|| towards 1 without computing
the SVD: fast, not exact (every one above 0.003 lands between 0.68 and 1.21; tests/test_optimizers.py).
Embeddings, the output head, norms' gains and biases are not hidden matrices and keep AdamW. Muon takes the
orthogonalisation as an argument: lesson 12's ladder hands it the learner's `newton_schulz`.

Shape legend: R rows, K columns of a weight matrix (an nn.Linear weight is (out, in)).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from course_lib import _checks

__all__ = ["NS_COEFFICIENTS", "Muon", "muon_and_adamw", "newton_schulz"]

NS_COEFFICIENTS = (3.4445, -4.7750, 2.0315)  # (a, b, c): Jordan's quintic, tuned for speed over exactness


def newton_schulz(G: Tensor, steps: int = 5, eps: float = 1e-7) -> Tensor:
    """About U V^T for G = U S V^T (R, K): `steps` quintic iterations on G / (||G||_F + eps), whose singular values are
    all <= 1 to start with. Lesson 12, exercise `newton_schulz`.

    Works on the wide orientation (a tall G, R > K, is transposed first and the result transposed back), where
    A = X X^T is the smaller product; each step is X <- a X + (b A + c A A) X with (a, b, c) = NS_COEFFICIENTS,
    which maps every singular value s to a s + b s^3 + c s^5 and leaves the singular vectors alone. Computed in G's
    dtype (Muon runs it in bf16 on a GPU); `steps` = 0 returns the normalised G. G: (R, K) -> (R, K).
    """
    _checks.tensor("G", G, "R, K")
    _checks.int_between("steps", steps, 0)
    a, b, c = NS_COEFFICIENTS
    tall = G.shape[0] > G.shape[1]
    X = G.T if tall else G  # (R', K') with R' <= K'
    X = X / (X.norm() + eps)  # Frobenius norm >= the largest singular value: now every one is <= 1
    for _ in range(steps):
        A = X @ X.T  # (R', R')
        X = a * X + (b * A + c * A @ A) @ X  # each singular value s -> a s + b s^3 + c s^5
    return X.T if tall else X


class Muon(torch.optim.Optimizer):
    """Momentum, then an orthogonalised step, for 2-D parameters only.

    For each parameter: buf <- momentum * buf + grad; the direction is grad + momentum * buf (Nesterov) or buf;
    then p <- p * (1 - lr * weight_decay) - lr * scale * orthogonalise(direction, ns_steps), with scale =
    sqrt(max(1, R / K)) so that a tall matrix (more outputs than inputs) moves as much per entry as a wide one
    (Jordan's choice). `orthogonalise`: `newton_schulz`, or another function with its contract (the learner's).
    """

    def __init__(
        self,
        params,
        lr: float = 0.02,
        momentum: float = 0.95,
        nesterov: bool = True,
        ns_steps: int = 5,
        weight_decay: float = 0.0,
        orthogonalise: Callable[[Tensor, int], Tensor] = newton_schulz,
    ) -> None:
        _checks.positive_number("lr", lr)
        _checks.positive_int("ns_steps", ns_steps)
        if not 0 <= momentum < 1:
            raise ValueError(f"`momentum` must be in [0, 1), got {momentum!r}")
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps, weight_decay=weight_decay)
        super().__init__(params, defaults)
        self.orthogonalise = orthogonalise
        for group in self.param_groups:
            for p in group["params"]:
                if p.dim() != 2:
                    raise ValueError(f"Muon updates matrices only; got a parameter of shape {tuple(p.shape)}")

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        for group in self.param_groups:
            lr, momentum = group["lr"], group["momentum"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                buf = self.state[p].setdefault("momentum_buffer", torch.zeros_like(p))
                buf.mul_(momentum).add_(p.grad)
                direction = p.grad.add(buf, alpha=momentum) if group["nesterov"] else buf
                update = self.orthogonalise(direction, group["ns_steps"])  # (R, K), singular values about 1
                scale = max(1.0, p.shape[0] / p.shape[1]) ** 0.5
                p.mul_(1 - lr * group["weight_decay"])
                p.add_(update.to(p.dtype), alpha=-lr * scale)
        return loss


def muon_and_adamw(
    model: nn.Module,
    muon_lr: float = 0.02,
    adamw_lr: float = 3e-3,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.99),
    orthogonalise: Callable[[Tensor, int], Tensor] = newton_schulz,
) -> list[torch.optim.Optimizer]:
    """[Muon over the 2-D weights inside `model.blocks`, AdamW over every other parameter] (the speedruns' split).

    AdamW decays the matrices it gets (the embedding, an untied head) and not the vectors (gains, biases), as the
    course's AdamW always does; Muon's matrices get no decay. Step both every iteration. `orthogonalise`: Muon's
    `newton_schulz` (the learner's, in lesson 12's ladder)."""
    hidden = [p for p in model.blocks.parameters() if p.dim() == 2 and p.requires_grad]
    chosen = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in chosen and p.requires_grad]
    groups = [
        {"params": [p for p in rest if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in rest if p.dim() < 2], "weight_decay": 0.0},
    ]
    return [Muon(hidden, lr=muon_lr, orthogonalise=orthogonalise), torch.optim.AdamW(groups, lr=adamw_lr, betas=betas)]
