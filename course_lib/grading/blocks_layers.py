"""Graders of lesson 06 — the layers (`TransformerBlock`, `EncoderLayer`), and what the lesson's graders share.

The lesson's test cells import these checks from `course_lib.grading.blocks`, which re-exports them. A learner
module is built with a fixed seed; its state dict must have the contract's names and shapes; then random
values (LayerNorm's 1s and 0s would hide a swapped norm) are loaded into it and into the reference of
`course_lib.blocks`, so both compute the same function when the answer is right. On a mismatch the known
mistakes — the other norm order, a missing residual, norms swapped, the causal flag or the mask dropped, the
residual taken from the normalised input, "add & norm" read as x + norm(sublayer(x)) — are recomputed with the
same weights and named. A training-mode run with a fixed seed checks that dropout sits where the contract puts it.

Shape legend: B batch, T time, H heads, C / d_model channels.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from course_lib import blocks as ref
from course_lib.attention import padding_mask
from course_lib.grading.attention_common import (
    build_module,
    call_in_training_mode,
    call_without_grad,
    expect_tensor_output,
    keeps_rng,
    make_mask,
    name_mistake,
    same_values,
)
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_close, tagged_cases
from course_lib.grading.kit.diagnose import Variant
from course_lib.grading.kit.guard import check_definition
from course_lib.multihead import MultiHeadAttention

__all__ = ["check_TransformerBlock", "check_EncoderLayer", "expect_state", "load_random_state"]

_DROPOUT = 0.5


# ------------------------------------------------------------------------------------------------------------
# Shared: the state dict, random weights, dropout in training mode


def expect_state(name: str, module: Any, expected: nn.Module, what: str, hint: str, shape_hint: str = "") -> None:
    """The learner's state dict has exactly the keys and shapes of `expected`'s; `hint` says how to name them,
    `shape_hint` what a wrong shape may mean."""
    state = module.state_dict()
    shapes = {key: tuple(value.shape) for key, value in expected.state_dict().items()}
    missing, extra = sorted(set(shapes) - set(state)), sorted(set(state) - set(shapes))
    if missing or extra:
        detail = "; ".join(
            part for part in (f"missing {missing}" if missing else "", f"extra {extra}" if extra else "") if part
        )
        raise GradingError(name, f"{what}: wrong parameter names ({detail}). {hint}")
    for key, shape in shapes.items():
        if tuple(state[key].shape) != shape:
            message = f"{what}: {key} has shape {tuple(state[key].shape)}, expected {shape}"
            raise GradingError(name, f"{message}: {shape_hint}." if shape_hint else f"{message}.")


def load_random_state(name: str, module: Any, reference: nn.Module, seed: int, what: str) -> None:
    """Give the learner's module and the reference the same random parameters (away from their initial values)."""
    g = core.generator(seed)
    state = {key: value + 0.3 * torch.randn(value.shape, generator=g) for key, value in reference.state_dict().items()}
    reference.load_state_dict(state)
    call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")


def _reference_in_training(reference: nn.Module, x: Tensor, *args: Any, seed: int) -> Tensor:
    """The reference's output in training mode with the seed the learner's call got."""
    reference.train(True)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        out = reference(x, *args)
    reference.train(False)
    return out


def _expect_norms(name: str, module: Any, attrs: tuple[str, ...], what: str) -> None:
    for attr in attrs:
        try:
            norm = getattr(module, attr)
        except AttributeError:
            raise GradingError(
                name, f"{what} has no attribute `{attr}`: the contract names the norms {attrs}."
            ) from None
        if not core.is_instance(norm, nn.LayerNorm):
            kind = core.type_name(norm)
            raise GradingError(name, f"{what}: `{attr}` is a {kind}, not an nn.LayerNorm(d_model) (eps 1e-5).")
        if abs(float(norm.eps) - 1e-5) > 1e-12:
            raise GradingError(name, f"{what}: `{attr}` has eps={norm.eps}; the contract uses nn.LayerNorm's 1e-5.")


def _flipped_attention(attention: MultiHeadAttention) -> MultiHeadAttention:
    """The same attention weights with the causal flag flipped."""
    flipped = MultiHeadAttention(attention.d_model, attention.n_heads, causal=not attention.causal).eval()
    flipped.load_state_dict(attention.state_dict())
    return flipped


# ------------------------------------------------------------------------------------------------------------
# Exercise 3: TransformerBlock

# (B, T, d_model, n_heads, d_hidden, causal, mask kind, seed); masks: "padding" (B, 1, 1, T), "random" (B, 1, T, T)
_BLOCK_CASES: list = [
    (2, 5, 8, 2, None, True, None, 0),
    (2, 6, 12, 3, 20, False, "padding", 1),
    (1, 4, 8, 4, 16, True, "random", 2),
]
_BLOCK_NAMES = (
    "The contract's submodules are self.ln1 = nn.LayerNorm(d_model), self.attn = MultiHeadAttention(d_model, n_heads, "
    "dropout, causal), self.ln2 = nn.LayerNorm(d_model) and self.mlp = FeedForward(d_model, d_hidden, dropout) — with "
    "these names, lesson 10 can load GPT-2's weights."
)


def _block_mask(kind: str | None, B: int, T: int, seed: int) -> Tensor | None:
    if kind == "padding":
        lengths = [T - (b + seed) % max(T - 1, 1) for b in range(B)]  # each >= 2: every query keeps a key
        return padding_mask(lengths, T)[:, None, None, :]  # (B, 1, 1, T)
    return make_mask(kind, (B, 1), T, T, seed)  # (B, 1, T, T) or None


@keeps_rng
def check_TransformerBlock(answer: Any, cases: list | None = None) -> Passed:
    """Check the pre-LN `TransformerBlock(d_model, n_heads, d_hidden=None, dropout=0.0, causal=True)`.

    A case is `(B, T, d_model, n_heads, d_hidden, causal, mask_kind, seed)`; mask_kind None, "padding" or
    "random". Each case checks the submodules, the state dict and the output; every run also checks dropout.
    """
    name = Graded(ref.TransformerBlock)
    check_definition(answer, name)
    run = tagged_cases(cases, _BLOCK_CASES)
    for tag, (B, T, d_model, n_heads, d_hidden, causal, kind, seed) in run:
        what = call_label(name, f"{d_model}, {n_heads}, d_hidden={d_hidden}, causal={causal}", tag)
        module = build_module(name, answer, d_model, n_heads, what=what, seed=seed, d_hidden=d_hidden, causal=causal)
        _expect_norms(name, module, ("ln1", "ln2"), what)
        reference = ref.TransformerBlock(d_model, n_heads, d_hidden, causal=causal).eval()
        width = f"with d_hidden=None the feed-forward is 4 * d_model = {4 * d_model} wide" if d_hidden is None else ""
        expect_state(name, module, reference, what, _BLOCK_NAMES, shape_hint=width)
        load_random_state(name, module, reference, seed + 50, what)
        x = core.random_tensor(B, T, d_model, seed=seed + 100)
        mask = _block_mask(kind, B, T, seed + 200)
        args = () if mask is None else (mask.clone(),)
        call = f"{what} on x {tuple(x.shape)}" + ("" if mask is None else f" with a {kind} mask {tuple(mask.shape)}")
        call = call if tag is None else f"{what} on its inputs"
        with torch.no_grad():
            expected = reference(x, mask)
            got = call_without_grad(name, module, x.clone(), *args, what=call)
            expect_tensor_output(name, got, call)
            name_mistake(name, call, got, expected, _block_mistakes(reference, x, mask))
        expect_close(name, got, expected, call, atol=1e-4, rtol=1e-4)
    _check_block_dropout(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _block_mistakes(block: ref.TransformerBlock, x: Tensor, mask: Tensor | None) -> list[Variant]:
    ln1, ln2, attn, mlp = block.ln1, block.ln2, block.attn, block.mlp
    flipped = _flipped_attention(attn)

    def pre(a=attn, n1=ln1, n2=ln2, m=mask, attn_residual=True, mlp_residual=True):
        h = (x if attn_residual else 0) + a(n1(x), m)
        return (h if mlp_residual else 0) + mlp(n2(h))

    def from_normalised():
        h = ln1(x)
        h = h + attn(h, mask)
        h2 = ln2(h)
        return h2 + mlp(h2)

    def post():
        h = ln1(x + attn(x, mask))
        return ln2(h + mlp(h))

    causal = "causal=True" if attn.causal else "causal=False"
    return [
        (
            post,
            "this is the post-LN order, x = ln(x + sublayer(x)), as in the 2017 paper. The block is pre-LN (GPT-2): "
            "normalise the sublayer's input and add its output to the unnormalised stream: x = x + attn(ln1(x)), "
            "then x = x + mlp(ln2(x)).",
        ),
        (
            lambda: pre(attn_residual=False),
            "the residual connection around the attention is missing: x = x + self.attn(self.ln1(x), mask).",
        ),
        (
            lambda: pre(mlp_residual=False),
            "the residual connection around the feed-forward is missing: x = x + self.mlp(self.ln2(x)).",
        ),
        (
            lambda: pre(attn_residual=False, mlp_residual=False),
            "both residual connections are missing: add each sublayer's output to its input (x = x + ...).",
        ),
        (
            from_normalised,
            "the residual adds the normalised x: h = ln1(x); x = h + attn(h). Add the sublayer's output to the "
            "stream itself, x = x + attn(ln1(x)), so that nothing but additions touch it.",
        ),
        (lambda: pre(n1=ln2, n2=ln1), "ln1 and ln2 are swapped: ln1 goes before the attention, ln2 before the mlp."),
        (lambda: pre(n2=ln1), "ln1 is used before both sublayers: the feed-forward's input goes through ln2."),
        (lambda: pre(n1=ln2), "ln2 is used before both sublayers: the attention's input goes through ln1."),
        (
            lambda: pre(a=flipped),
            f"the attention ignores {causal}: pass `causal` on to MultiHeadAttention(d_model, n_heads, dropout, "
            "causal=causal).",
        ),
        (lambda: pre(m=None), "the mask was not passed on: call self.attn(self.ln1(x), mask)."),
    ]


def _check_block_dropout(name: str, answer: Any) -> None:
    B, T, d_model, n_heads, seed = 2, 6, 8, 2, 7
    what = f"{name}({d_model}, {n_heads}, dropout={_DROPOUT})"
    module = build_module(name, answer, d_model, n_heads, what=what, seed=seed, dropout=_DROPOUT)
    reference = ref.TransformerBlock(d_model, n_heads, dropout=_DROPOUT).eval()
    reference.load_state_dict(module.state_dict())
    x = core.random_tensor(B, T, d_model, seed=seed)
    call = f"{what} in training mode"
    got = call_in_training_mode(name, module, x.clone(), what=call, seed=seed)
    expect_tensor_output(name, got, call)
    with torch.no_grad():
        clean = reference(x)
    expected = _reference_in_training(reference, x, seed=seed)
    if same_values(got, expected):
        return
    if same_values(got, clean):
        raise GradingError(
            name,
            f"{call}: nothing was dropped. Pass `dropout` on to MultiHeadAttention and FeedForward (the block adds "
            "no dropout of its own).",
        )
    raise GradingError(
        name,
        f"{call}: the output differs from the reference's with the same seed. Dropout belongs only where "
        "MultiHeadAttention (the attention weights) and FeedForward (its output) apply it: pass `dropout` to both "
        "and add no nn.Dropout of your own.",
    )


# ------------------------------------------------------------------------------------------------------------
# Exercise 4: EncoderLayer

# (B, S, d_model, n_heads, d_hidden, activation, norm_first, padded, seed)
_ENCODER_CASES: list = [
    (2, 5, 8, 2, 16, "relu", False, True, 0),
    (3, 4, 12, 3, None, "relu", True, True, 1),
    (2, 6, 8, 4, 12, "gelu", False, False, 2),
]
_ENCODER_NAMES = (
    "The layer's submodules are self.self_attn = MultiHeadAttention(d_model, n_heads, dropout) (not causal), "
    "self.norm1, self.mlp = FeedForward(d_model, d_hidden, dropout, activation=activation), self.norm2 and "
    "self.dropout — the names torch_layers.to_torch maps onto PyTorch's layer."
)


@keeps_rng
def check_EncoderLayer(answer: Any, cases: list | None = None) -> Passed:
    """Check `EncoderLayer(d_model, n_heads, d_hidden=None, dropout=0.0, activation="relu", norm_first=False)`.

    A case is `(B, S, d_model, n_heads, d_hidden, activation, norm_first, padded, seed)`; with `padded`, a (B, S)
    padding mask (True at real tokens) is passed. Every run also checks dropout on the attention output.
    """
    name = Graded(ref.EncoderLayer)
    check_definition(answer, name)
    run = tagged_cases(cases, _ENCODER_CASES)
    for tag, (B, S, d_model, n_heads, d_hidden, activation, norm_first, padded, seed) in run:
        options = dict(d_hidden=d_hidden, activation=activation, norm_first=norm_first)
        shown = f"{d_model}, {n_heads}, " + ", ".join(f"{k}={v!r}" for k, v in options.items())
        what = call_label(name, shown, tag)
        module = build_module(name, answer, d_model, n_heads, what=what, seed=seed, **options)
        _expect_norms(name, module, ("norm1", "norm2"), what)
        reference = ref.EncoderLayer(d_model, n_heads, **options).eval()
        expect_state(name, module, reference, what, _ENCODER_NAMES)
        load_random_state(name, module, reference, seed + 50, what)
        x = core.random_tensor(B, S, d_model, seed=seed + 100)
        keep = padding_mask([S - (b + seed) % (S - 1) for b in range(B)], S) if padded else None  # (B, S)
        args = () if keep is None else (keep.clone(),)
        call = f"{what} on x {tuple(x.shape)}" + (f" with a padding mask {tuple(keep.shape)}" if padded else "")
        call = call if tag is None else f"{what} on its inputs"
        reshape = (
            lambda message: "broadcast" in message or "size of tensor" in message,
            "a (B, S) padding mask must become (B, 1, 1, S) before it reaches the attention, so that it blocks keys "
            "for every head and query: padding_mask[:, None, None, :].",
        )
        with torch.no_grad():
            expected = reference(x, keep)
            got = call_without_grad(name, module, x.clone(), *args, what=call, hints=[reshape])
            expect_tensor_output(name, got, call, hint="Return the (B, S, d_model) output only.")
            name_mistake(name, call, got, expected, _encoder_mistakes(reference, x, keep))
        expect_close(name, got, expected, call, atol=1e-4, rtol=1e-4)
    _check_encoder_dropout(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _encoder_mistakes(layer: ref.EncoderLayer, x: Tensor, keep: Tensor | None) -> list[Variant]:
    attn, norm1, norm2, mlp = layer.self_attn, layer.norm1, layer.norm2, layer.mlp
    mask = None if keep is None else keep[:, None, None, :]  # (B, 1, 1, S)
    causal = _flipped_attention(attn)

    def order(pre: bool, a=attn, m=mask, n1=norm1, n2=norm2, f=mlp, residual=(True, True), inner=False):
        if pre:
            h = (x if residual[0] else 0) + a(n1(x), m)
            return (h if residual[1] else 0) + f(n2(h))
        if inner:  # x + norm(sublayer(x))
            h = x + n1(a(x, m))
            return h + n2(f(h))
        h = n1((x if residual[0] else 0) + a(x, m))
        return n2((h if residual[1] else 0) + f(h))

    pre = layer.norm_first
    other = "pre-LN order x = x + sublayer(norm(x))" if not pre else "post-LN order x = norm(x + sublayer(x))"
    wanted = "norm_first=True: x = x + sublayer(norm(x))" if pre else "norm_first=False: x = norm(x + sublayer(x))"
    variants: list[Variant] = [
        (lambda: order(not pre), f"this is the {other}; with {wanted}. Check self.norm_first."),
        (
            lambda: order(False, inner=True),
            "'add & norm' became x + norm(sublayer(x)): the norm must take the sum, x = norm(x + sublayer(x)).",
        ),
        (
            lambda: order(pre, residual=(False, True)),
            "the residual connection around the self-attention is missing.",
        ),
        (lambda: order(pre, residual=(True, False)), "the residual connection around the feed-forward is missing."),
        (lambda: order(pre, n1=norm2, n2=norm1), "norm1 and norm2 are swapped: norm1 belongs to the attention."),
        (
            lambda: order(pre, a=causal),
            "the self-attention is causal: an encoder lets every position see every other one (causal=False).",
        ),
    ]
    if mask is not None:
        variants += [
            (
                lambda: order(pre, m=None),
                "the padding mask was ignored: padded keys got attention. Pass padding_mask[:, None, None, :] to "
                "the self-attention.",
            ),
            (
                lambda: order(pre, m=(~keep)[:, None, None, :]),  # rows without padding become NaN
                "the padding mask is inverted: in this course True means 'may attend' (a real token), as in "
                "F.scaled_dot_product_attention — only PyTorch's nn.Transformer* layers use True for padding.",
            ),
        ]
    for activation in ref.ACTIVATIONS:
        if activation == layer.mlp.activation:
            continue
        other = ref.FeedForward(mlp.fc1.in_features, mlp.fc1.out_features, activation=activation).eval()
        other.load_state_dict(mlp.state_dict())
        variants.append(
            (
                lambda other=other: order(pre, f=other),
                f"the feed-forward used {activation!r} although activation={layer.mlp.activation!r}: pass "
                "`activation` on to FeedForward (its default is 'gelu_tanh').",
            )
        )
    return variants


def _check_encoder_dropout(name: str, answer: Any) -> None:
    B, S, d_model, n_heads, seed = 2, 5, 8, 2, 8
    what = f"{name}({d_model}, {n_heads}, dropout={_DROPOUT})"
    module = build_module(name, answer, d_model, n_heads, what=what, seed=seed, dropout=_DROPOUT)
    reference = ref.EncoderLayer(d_model, n_heads, dropout=_DROPOUT).eval()
    reference.load_state_dict(module.state_dict())
    x = core.random_tensor(B, S, d_model, seed=seed)
    call = f"{what} in training mode"
    got = call_in_training_mode(name, module, x.clone(), what=call, seed=seed)
    expect_tensor_output(name, got, call)
    if same_values(got, _reference_in_training(reference, x, seed=seed)):
        return
    with torch.no_grad():
        clean = reference(x)
    if same_values(got, clean):
        raise GradingError(name, f"{call}: nothing was dropped. Pass `dropout` on to the sublayers.")
    reference.dropout = nn.Identity()  # the same layer without the dropout on the attention output
    if same_values(got, _reference_in_training(reference, x, seed=seed)):
        raise GradingError(
            name,
            f"{call}: the attention's output is not dropped out. Apply self.dropout to it before the residual add: "
            "x + self.dropout(self.self_attn(...)).",
        )
    raise GradingError(
        name,
        f"{call}: the output differs from the reference's with the same seed. Dropout acts on the attention weights "
        "(inside MultiHeadAttention), on the attention output (self.dropout) and on the feed-forward output (inside "
        "FeedForward), in that order.",
    )
