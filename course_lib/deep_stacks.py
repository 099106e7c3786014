"""Why blocks are built the way they are: measurements on deep stacks at initialisation (Lesson 06).

    residual_gradient_norms   how much gradient reaches the input of a stack of feed-forward layers, and each
                              layer's weights, with and without residual connections
    depth_statistics          post-LN vs pre-LN stacks of TransformerBlocks: the size of the residual stream after
                              each block, and the gradient each block's parameters get

Both build fresh random models from a seed, run one forward and one backward pass on random data and return
plain rows (lists of dicts) for a table or a plot. Nothing is trained.

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import FeedForward, TransformerBlock

__all__ = ["residual_gradient_norms", "depth_statistics"]


def _norm(tensors: Sequence[Tensor]) -> float:
    """The Euclidean norm of several tensors taken together."""
    return float(torch.sqrt(sum(t.double().pow(2).sum() for t in tensors)))


def residual_gradient_norms(
    depths: Sequence[int] = (2, 8, 32),
    d_model: int = 64,
    batch_size: int = 16,
    T: int = 8,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> list[dict]:
    """Stacks of `depth` FeedForward(d_model, 4 d_model) layers (PyTorch's default init), plain `x = f(x)` or
    residual `x = x + f(x)`; the loss is a fixed random projection of the output.

    One row per (depth, residual): `input_grad` = |dloss/dx| at the stack's input, `layer_grads` = |dloss/dW| of
    each layer's fc1 weight, bottom to top. float64 by default: in float32 the plain stack's smallest gradients
    round to exactly 0. Lesson 06, "residual connections".
    """
    _checks.positive_ints(d_model=d_model, batch_size=batch_size, T=T)
    for depth in depths:
        _checks.positive_int("depth", depth)
    rows = []
    for depth in depths:
        for residual in (False, True):
            torch.manual_seed(seed)  # the same layers and data with and without the residual connections
            layers = nn.ModuleList(FeedForward(d_model, 4 * d_model) for _ in range(depth)).to(dtype)
            x = torch.randn(batch_size, T, d_model, dtype=dtype, requires_grad=True)  # (B, T, C)
            direction = torch.randn(batch_size, T, d_model, dtype=dtype)  # what the loss measures
            h = x
            for layer in layers:
                h = h + layer(h) if residual else layer(h)  # (B, T, C)
            loss = (h * direction).sum() / batch_size
            loss.backward()
            rows.append(
                {
                    "depth": depth,
                    "residual": residual,
                    "input_grad": _norm([x.grad]),
                    "layer_grads": [_norm([layer.fc1.weight.grad]) for layer in layers],
                    "output_std": float(h.detach().std()),
                }
            )
    return rows


def _xavier(module: nn.Module) -> None:
    """Glorot-uniform weights and zero biases for every linear layer, as nn.Transformer initialises its own."""
    for sub in module.modules():
        if isinstance(sub, nn.Linear):
            nn.init.xavier_uniform_(sub.weight)
            nn.init.zeros_(sub.bias)


def depth_statistics(
    n_layers: int = 24,
    norm_first: bool = True,
    d_model: int = 64,
    n_heads: int = 4,
    batch_size: int = 8,
    T: int = 16,
    vocab_size: int = 100,
    seed: int = 0,
) -> list[dict]:
    """A stack of `n_layers` causal TransformerBlocks, post-LN (`norm_first=False`) or pre-LN (True, with the
    final LayerNorm GPT-2 adds), Glorot-initialised; the loss is the cross-entropy of a linear read-out against
    random targets (a language model at initialisation).

    One row per block, bottom to top: `layer` (1..n_layers), `stream_std` = the standard deviation of the residual
    stream after the block, `grad_norm` = the norm of the gradient of all the block's parameters together.
    Lesson 06, "post-LN vs pre-LN".
    """
    _checks.positive_ints(n_layers=n_layers, batch_size=batch_size, T=T, vocab_size=vocab_size)
    torch.manual_seed(seed)
    blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, norm_first=norm_first) for _ in range(n_layers))
    _xavier(blocks)
    final_norm = nn.LayerNorm(d_model) if norm_first else nn.Identity()  # post-LN already ends with a norm
    head = nn.Linear(d_model, vocab_size)
    x = torch.randn(batch_size, T, d_model)  # stands for token embeddings + positions
    targets = torch.randint(vocab_size, (batch_size, T))
    stream_std = []
    for block in blocks:
        x = block(x)  # (B, T, C)
        stream_std.append(float(x.detach().std()))
    logits = head(final_norm(x))  # (B, T, V)
    F.cross_entropy(logits.flatten(0, 1), targets.flatten()).backward()
    return [
        {"layer": i + 1, "stream_std": std, "grad_norm": _norm([p.grad for p in block.parameters()])}
        for i, (std, block) in enumerate(zip(stream_std, blocks, strict=True))
    ]
