"""Why blocks are built the way they are: measurements on deep stacks (Lesson 06).

    residual_gradient_norms   how much gradient reaches the input of a stack of feed-forward layers, and each
                              layer's weights, with and without residual connections (at initialisation)
    depth_statistics          post-LN vs pre-LN stacks of TransformerBlocks at initialisation: the size of the
                              residual stream after each block, and the gradient each block's parameters get
    copy_task_batch           a small task to train on: a random first half, then the same tokens again
    StackLM                   lesson 09's GPT over a post-LN or pre-LN stack of TransformerBlocks, untied read-out
    train_stack               train a StackLM on the copy task with Adam, with or without a learning-rate warm-up
                              (lesson 10's `train.cosine_lr` with its floor at the peak: no decay): the loss of
                              every step

The first two build fresh random models from a seed, run one forward and one backward pass on random data and
return plain rows (lists of dicts) for a table or a plot; nothing is trained. `train_stack` trains for a fixed
number of steps (never a fixed time), from a seed, so its result does not depend on how fast the machine is.

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import FeedForward, TransformerBlock
from course_lib.gpt import GPT
from course_lib.train import cosine_lr

__all__ = [
    "residual_gradient_norms",
    "depth_statistics",
    "copy_task_batch",
    "StackLM",
    "train_stack",
]


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
    """Glorot-uniform weights for every linear layer, as nn.Transformer initialises its weight matrices, and zero
    biases. Glorot (Xavier) draws from U(-a, a) with a = sqrt(6 / (fan_in + fan_out)): std sqrt(2 / (fan_in +
    fan_out)), the same for a layer and its transpose; nn.Linear's default depends on fan_in only (std
    1 / sqrt(3 fan_in))."""
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
    final LayerNorm GPT-2 adds), Glorot-initialised (`_xavier`); the loss is the cross-entropy of a linear read-out
    against random targets (a language model at initialisation).

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


# ------------------------------------------------------------------------------------------------------------
# Training a stack: does the position of the LayerNorm decide whether it needs a learning-rate warm-up?


def copy_task_batch(batch_size: int, half: int, vocab_size: int, generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """`batch_size` sequences of 2 * half tokens: `half` random tokens, then the same tokens again.

    Returns (inputs, targets), each (B, 2 * half - 1): a language model's pairs, targets = inputs shifted by one.
    Only the targets of the second half, `targets[:, half - 1:]`, can be predicted (the first half is random):
    a model that has learned to copy gets them right, one that guesses scores ln(vocab_size) on them.
    """
    _checks.positive_ints(batch_size=batch_size, half=half, vocab_size=vocab_size)
    first = torch.randint(vocab_size, (batch_size, half), generator=generator)  # (B, half)
    sequence = torch.cat([first, first], dim=1)  # (B, 2 half)
    return sequence[:, :-1], sequence[:, 1:]  # (B, 2 half - 1) each


class StackLM(GPT):
    """Lesson 09's GPT — its forward pass — over a post-LN or pre-LN stack: token and learned position
    embeddings, `n_layers` causal TransformerBlocks, an untied linear read-out `lm_head` (with a bias).

    `norm_first=False` stacks post-LN blocks (the 2017 order; the last block already ends with a LayerNorm, so
    `ln_f` is nothing), True pre-LN blocks followed by GPT-2's final LayerNorm. The blocks' linear layers are
    Glorot-initialised, as in `depth_statistics`; no dropout. idx (B, T) long -> (logits (B, T, V), loss or None).
    Lesson 06, "warm-up, measured".
    """

    def __init__(
        self, vocab_size: int, context_length: int, d_model: int, n_heads: int, n_layers: int, norm_first: bool
    ) -> None:
        _checks.positive_ints(vocab_size=vocab_size, context_length=context_length, n_layers=n_layers)
        nn.Module.__init__(self)  # GPT's parts, for this experiment (GPT.__init__ would build lesson 09's)
        self.context_length = context_length
        self.tok_emb = nn.Embedding(vocab_size, d_model)
        self.pos_emb = nn.Embedding(context_length, d_model)
        self.drop = nn.Dropout(0.0)
        self.blocks = nn.ModuleList(TransformerBlock(d_model, n_heads, norm_first=norm_first) for _ in range(n_layers))
        _xavier(self.blocks)
        self.ln_f = nn.LayerNorm(d_model) if norm_first else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size)


def train_stack(
    norm_first: bool,
    warmup_steps: int,
    steps: int = 200,
    lr: float = 1e-2,
    n_layers: int = 6,
    d_model: int = 32,
    n_heads: int = 4,
    vocab_size: int = 16,
    half: int = 8,
    batch_size: int = 16,
    seed: int = 0,
) -> list[float]:
    """Train a fresh StackLM on `copy_task_batch` for `steps` steps of Adam (PyTorch's defaults but the learning
    rate), and return the loss of every step: the cross-entropy on the second half. The rate climbs linearly,
    lr / warmup_steps at step 0 up to lr at step warmup_steps - 1, then stays at lr (warmup_steps = 0: lr from the
    first step): the warm-up of lesson 10's cosine schedule, `train.cosine_lr`, with min_lr = max_lr.

    The seed fixes the model and the batches: runs that differ only in `norm_first` or `warmup_steps` start from
    models of the same shapes drawn from the same seed and see the same batches. Lesson 06, "warm-up, measured".
    """
    _checks.positive_ints(steps=steps, batch_size=batch_size, half=half)
    _checks.positive_number("lr", lr)
    torch.manual_seed(seed)
    model = StackLM(vocab_size, 2 * half, d_model, n_heads, n_layers, norm_first)
    schedule = lambda step: cosine_lr(step, lr, lr, warmup_steps, steps)  # min_lr = max_lr: no decay
    optimizer = torch.optim.Adam(model.parameters(), lr=schedule(0))
    batches = torch.Generator().manual_seed(seed + 1)
    losses = []
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step)
        inputs, targets = copy_task_batch(batch_size, half, vocab_size, batches)  # (B, 2 half - 1) each
        logits, _ = model(inputs)  # (B, 2 half - 1, V)
        logits = logits[:, half - 1 :]  # (B, half, V): the predictions of the second half
        loss = F.cross_entropy(logits.flatten(0, 1), targets[:, half - 1 :].flatten())
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    return losses
