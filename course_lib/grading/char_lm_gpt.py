"""Grader of lesson 09's `GPT` exercise, re-exported by `course_lib.grading.char_lm`, which the test cells import.

The learner's GPT is built from the `TransformerBlock` the lesson binds: in the learner's kernel theirs from
lesson 06 (where it passed its checks) or the course's; when graded, the course's. Either way the contract fixes
every module name, so the state dicts of the answer and of the reference `course_lib.gpt.GPT` have the same keys:
random values are loaded into both, and the logits and the loss are compared on seeded inputs. On a mismatch the
known mistakes (no position embedding, positions looked up by token id, the blocks skipped, no final LayerNorm,
blocks that see the future, the logits softmaxed, the loss summed or over the last position only) are recomputed
with the same weights and named.

The tie is checked by behaviour, which works the same on an answer in a sandbox: loading new values into
`tok_emb.weight` alone must change `lm_head.weight` (one tensor), and the model's parameters, which PyTorch lists
once each, must count the (V, C) matrix once (one Parameter, not two that share their values). Then the
`ValueError` for T > context_length, causality (changing a later token leaves earlier logits alone) and dropout
(a training-mode run with a fixed seed draws exactly the reference's masks).

Shape legend: B batch, T time, V vocab_size, C d_model, L context_length.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import gpt as ref
from course_lib.blocks import TransformerBlock
from course_lib.grading.attention_common import (
    build_module,
    call_in_training_mode,
    call_without_grad,
    keeps_rng,
    same_values,
)
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_GPT"]

# (vocab_size, context_length, d_model, n_heads, n_layers, B, T, seed). T < context_length in most cases, so that
# adding the whole position table fails; vocab_size <= context_length in some, so that positions looked up by token
# id run (and are named).
_CASES: list = [(9, 12, 16, 2, 2, 2, 7, 0), (13, 6, 12, 3, 1, 3, 6, 1), (5, 10, 8, 4, 3, 1, 4, 2)]
_DROPOUT = 0.5

_NAMES = (
    "The contract's modules are self.tok_emb = nn.Embedding(vocab_size, d_model), self.pos_emb = "
    "nn.Embedding(context_length, d_model), self.drop = nn.Dropout(dropout), self.blocks = nn.ModuleList of n_layers "
    "TransformerBlock(d_model, n_heads, dropout=dropout), self.ln_f = nn.LayerNorm(d_model) and self.lm_head = "
    "nn.Linear(d_model, vocab_size, bias=False) — with these names, lesson 10 loads GPT-2's weights into your class."
)
_KEY_HINTS = {
    "lm_head.bias": "lm_head has a bias: the contract's head is nn.Linear(d_model, vocab_size, bias=False).",
    "lm_head.weight": "there is no lm_head.weight: the head is self.lm_head = nn.Linear(d_model, vocab_size, "
    "bias=False), whose weight you then set to tok_emb's (self.lm_head.weight = self.tok_emb.weight).",
    "ln_f.weight": "there is no final LayerNorm: add self.ln_f = nn.LayerNorm(d_model) and apply it after the blocks "
    "(pre-LN blocks leave the stream un-normalised).",
    "pos_emb.weight": "there is no position embedding: add self.pos_emb = nn.Embedding(context_length, d_model).",
}
_LOSS_HINTS = [
    (
        lambda message: "must match the size of tensor" in message,
        "are all context_length positions added to a window of T? Look up only the first T: "
        "self.pos_emb(torch.arange(T)).",
    ),
    (
        lambda message: "target size" in message or "target batch_size" in message,
        "F.cross_entropy wants the logits as (N, V) and the targets as (N,): flatten B and T, "
        "logits.view(B * T, V) and targets.view(B * T).",
    ),
]


def _random_state(reference: nn.Module, seed: int) -> dict[str, Tensor]:
    """Random values for every key (LayerNorm's 1s and 0s would hide a missing norm); the tied pair shares one."""
    g = core.generator(seed)
    state = {k: v + 0.3 * torch.randn(v.shape, generator=g) for k, v in reference.state_dict().items()}
    state["lm_head.weight"] = state["tok_emb.weight"]
    reference.load_state_dict(state)
    return state


def _pieces(
    reference: ref.GPT,
    idx: Tensor,
    *,
    positions: str = "arange",
    blocks: bool = True,
    ln_f: bool = True,
    causal: bool = True,
) -> Tensor:
    """The reference's logits with one part changed (the defaults are right), for naming mistakes."""
    T = idx.shape[1]
    x = reference.tok_emb(idx)  # (B, T, C)
    if positions == "arange":
        x = x + reference.pos_emb(torch.arange(T))
    elif positions == "token ids":
        x = x + reference.pos_emb(idx)
    if blocks:
        for block in reference.blocks:
            if not causal:
                block = _uncausal(block)
            x = block(x)
    if ln_f:
        x = reference.ln_f(x)
    return reference.lm_head(x)  # (B, T, V)


def _uncausal(block: TransformerBlock) -> TransformerBlock:
    attn = block.attn
    twin = TransformerBlock(attn.d_model, attn.n_heads, causal=False).eval()
    twin.load_state_dict(block.state_dict())
    return twin


def _logit_variants(reference: ref.GPT, idx: Tensor) -> list[Variant]:
    return [
        (
            lambda: _pieces(reference, idx, positions="none"),
            "no position embedding was added: every position of a "
            "window looks alike. x = self.tok_emb(idx) + self.pos_emb(torch.arange(T)).",
        ),
        (
            lambda: _pieces(reference, idx, positions="token ids"),
            "pos_emb was looked up with the token ids; it is "
            "indexed by position: self.pos_emb(torch.arange(T, device=idx.device)).",
        ),
        (
            lambda: _pieces(reference, idx, blocks=False),
            "the blocks left x unchanged: write x = block(x) in the loop "
            "(block(x) alone computes a result and drops it).",
        ),
        (
            lambda: _pieces(reference, idx, ln_f=False),
            "the final LayerNorm is missing: logits = "
            "self.lm_head(self.ln_f(x)) (a pre-LN stack never normalises the stream itself).",
        ),
        (
            lambda: _pieces(reference, idx, causal=False),
            "the blocks attend to later positions: build them causal, "
            "TransformerBlock(d_model, n_heads, dropout=dropout) (causal is its default).",
        ),
        (
            lambda: _pieces(reference, idx).softmax(-1),
            "the logits went through a softmax: return lm_head's raw "
            "outputs; F.cross_entropy applies log-softmax itself.",
        ),
    ]


def _loss_variants(logits: Tensor, targets: Tensor) -> list[Variant]:
    B, T, V = logits.shape
    flat, flat_targets = logits.reshape(B * T, V), targets.reshape(B * T)
    return [
        (
            lambda: F.cross_entropy(flat, flat_targets, reduction="sum"),
            "the loss is a sum over the positions; the "
            "contract's loss is their mean (F.cross_entropy's default reduction).",
        ),
        (
            lambda: F.cross_entropy(flat, flat_targets, reduction="sum") / B,
            "the loss is summed over each window and "
            "averaged over the batch; average over all B * T positions instead.",
        ),
        (
            lambda: F.cross_entropy(logits[:, -1], targets[:, -1]),
            "the loss counts the last position only; every position predicts its next character and counts.",
        ),
        (
            lambda: F.cross_entropy(flat.softmax(-1), flat_targets),
            "softmax was applied before F.cross_entropy, which applies log-softmax itself: pass the raw logits.",
        ),
    ]


@keeps_rng
def check_GPT(answer: Any, cases: list | None = None) -> Passed:
    """Check `GPT(vocab_size, context_length, d_model, n_heads, n_layers, dropout=0.0)`: its modules and tie,
    forward(idx, targets) -> (logits (B, T, V), mean cross-entropy) against the reference with the same weights,
    forward(idx) -> (logits, None), the ValueError for T > context_length and causality; every run also checks
    dropout. A case is `(vocab_size, context_length, d_model, n_heads, n_layers, B, T, seed)`."""
    name = Graded(ref.GPT)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, (V, L, C, H, N, B, T, seed) in run:
        what = call_label(name, f"{V}, {L}, {C}, {H}, {N}", tag)
        module = build_module(name, answer, V, L, C, H, N, what=what, seed=seed)
        reference = ref.GPT(V, L, C, H, N).eval()
        _expect_modules(name, module, reference, what, (V, L, C))
        state = _random_state(reference, seed)
        call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
        _expect_tied(name, module, reference, what, seed)
        call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
        g = core.generator(seed + 100)
        idx, targets = torch.randint(V, (B, T), generator=g), torch.randint(V, (B, T), generator=g)
        _expect_forward(name, module, reference, idx, targets, what if tag is None else f"{what} on its input", tag)
        _expect_causal(name, module, idx, V, what)
        _expect_too_long(name, module, V, L, what)
    _check_dropout(name, answer)
    return Passed(name, len(run) + 1, hidden=cases is not None)


def _expect_modules(name: Graded, module: Any, reference: nn.Module, what: str, sizes: tuple[int, int, int]) -> None:
    """The state dict's keys and shapes are the reference's (a block may keep a buffer of its own), and the head
    maps d_model channels to vocab_size logits."""
    V, L, C = sizes
    state = module.state_dict()
    shapes = {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    missing = sorted(set(shapes) - set(state))
    extra = sorted(k for k in set(state) - set(shapes) if not k.startswith("blocks."))
    for key in missing + extra:
        if key in _KEY_HINTS:
            raise GradingError(name, f"{what}: {_KEY_HINTS[key]}")
    if missing or extra:
        detail = "; ".join(p for p in (f"missing {missing}" if missing else "", f"extra {extra}" if extra else "") if p)
        raise GradingError(name, f"{what}: wrong parameter names ({detail}). {_NAMES}")
    for key, shape in shapes.items():
        if tuple(state[key].shape) != shape:
            raise GradingError(name, f"{what}: {key} has shape {tuple(state[key].shape)}, expected {shape}. {_NAMES}")
    head = module.lm_head
    if not core.is_instance(head, nn.Linear):
        raise GradingError(name, f"{what}: lm_head is a {core.type_name(head)}, not an nn.Linear. {_NAMES}")
    if (head.in_features, head.out_features) != (C, V):
        raise GradingError(
            name,
            f"{what}: lm_head = nn.Linear({head.in_features}, {head.out_features}); the head reads the d_model = {C} "
            f"channels of the stream and gives vocab_size = {V} logits: nn.Linear(d_model, vocab_size, bias=False).",
        )
    if not core.is_instance(module.ln_f, nn.LayerNorm):
        raise GradingError(name, f"{what}: ln_f is a {core.type_name(module.ln_f)}, not an nn.LayerNorm(d_model).")


def _expect_tied(name: Graded, module: Any, reference: nn.Module, what: str, seed: int) -> None:
    """lm_head.weight *is* tok_emb.weight: one tensor (loading tok_emb changes the head) and one Parameter
    (PyTorch lists a shared Parameter once; two Parameters that share their values are counted twice)."""
    probe = core.random_tensor(*reference.tok_emb.weight.shape, seed=seed + 200)
    call_without_grad(
        name, module.load_state_dict, {"tok_emb.weight": probe}, strict=False, what=f"{what}.load_state_dict"
    )
    if not torch.equal(module.lm_head.weight, probe):
        raise GradingError(
            name,
            f"{what}: lm_head.weight is a matrix of its own: new values loaded into tok_emb.weight did not reach it. "
            "Tie them after creating both: self.lm_head.weight = self.tok_emb.weight (one (vocab_size, d_model) "
            "matrix embeds a token and scores it as the next one).",
        )
    params = list(call_without_grad(name, module.parameters, what=f"{what}.parameters()"))
    count, expected = sum(p.numel() for p in params), sum(p.numel() for p in reference.parameters())
    V, C = reference.tok_emb.weight.shape
    if count == expected + V * C:
        raise GradingError(
            name,
            f"{what}: lm_head.weight shares its values with tok_emb.weight but is another Parameter, so the model "
            f"counts the matrix twice ({count:,} parameters instead of {expected:,}) and each copy would get its own "
            "gradient. Assign the Parameter itself: self.lm_head.weight = self.tok_emb.weight (not .data, not "
            "nn.Parameter(...)).",
        )


def _pair(name: Graded, got: Any, what: str) -> tuple[Any, Any]:
    if not (isinstance(got, tuple | list) and len(got) == 2):
        raise GradingError(name, f"{what} should return a pair (logits, loss), got {describe(got)}.")
    return got[0], got[1]


def _expect_forward(
    name: Graded, module: Any, reference: ref.GPT, idx: Tensor, targets: Tensor, what: str, tag: str | None
) -> None:
    B, T = idx.shape
    V, C = reference.tok_emb.weight.shape
    with torch.no_grad():
        expected, expected_loss = reference(idx, targets)
    call = f"{what}(idx, targets) with idx of shape {(B, T)}" if tag is None else f"{what}(idx, targets)"
    got = call_without_grad(name, module, idx.clone(), targets.clone(), what=call, hints=_LOSS_HINTS)
    logits, loss = _pair(name, got, call)
    if not isinstance(logits, Tensor):
        raise GradingError(name, f"{call}: logits should be a tensor of shape {(B, T, V)}, got {describe(logits)}.")
    if tuple(logits.shape) == (B, T, C) and C != V:
        raise GradingError(
            name,
            f"{call}: the logits have shape {(B, T, C)}: d_model = {C} channels, the stream itself. Turn it into "
            f"vocab_size = {V} scores: logits = self.lm_head(self.ln_f(x)).",
        )
    if tuple(logits.shape) == (B * T, V):
        raise GradingError(name, f"{call}: the logits came back flattened to (B*T, V); return them as (B, T, V).")
    if tuple(logits.shape) != (B, T, V):
        raise GradingError(name, f"{call}: logits have shape {tuple(logits.shape)}, expected {(B, T, V)}.")
    if not same_values(logits, expected):
        with torch.no_grad():
            mistake = find_mistake(
                _logit_variants(reference, idx),
                lambda value: same_values(logits, value),
                lambda value: same_values(value, expected),
            )
        if mistake is not None:
            raise GradingError(name, f"{call}: {mistake}")
        core.expect_close(name, logits, expected, f"{call}: the logits", atol=1e-4, rtol=1e-3)
    if not isinstance(loss, Tensor) or loss.numel() != 1:
        raise GradingError(name, f"{call}: the loss should be a 0-dim tensor (one number), got {describe(loss)}.")
    if not same_values(loss.reshape(()), expected_loss):
        mistake = find_mistake(
            _loss_variants(expected, targets),
            lambda value: same_values(loss.reshape(()), value),
            lambda value: same_values(value, expected_loss),
        )
        detail = mistake or f"expected {expected_loss.item():.5f}, got {loss.item():.5f} (the mean cross-entropy)."
        raise GradingError(name, f"{call}: the loss is wrong — {detail}")
    call = f"{what}(idx) without targets"
    logits, loss = _pair(name, call_without_grad(name, module, idx.clone(), what=call), call)
    if loss is not None:
        raise GradingError(name, f"{call}: without targets the loss must be None, got {describe(loss)}.")
    if not same_values(logits, expected):
        raise GradingError(name, f"{call}: the logits differ from those computed with targets; they should not.")


def _expect_causal(name: Graded, module: Any, idx: Tensor, V: int, what: str) -> None:
    """Changing the last token must leave the logits of every earlier position as they were."""
    T = idx.shape[1]
    if T < 2:
        return
    changed = idx.clone()
    changed[:, -1] = (changed[:, -1] + 1) % V
    before = call_without_grad(name, module, idx.clone(), what=f"{what}(idx)")[0]
    after = call_without_grad(name, module, changed, what=f"{what}(idx)")[0]
    if not same_values(before[:, :-1], after[:, :-1]):
        raise GradingError(
            name,
            f"{what}: changing the last token of a window changed the logits of earlier positions: position t must "
            "see only tokens 0..t. The blocks must be causal: TransformerBlock(d_model, n_heads, dropout=dropout).",
        )


def _expect_too_long(name: Graded, module: Any, V: int, L: int, what: str) -> None:
    call = f"{what}(idx) with T = {L + 1} > context_length = {L}"
    idx = torch.randint(V, (1, L + 1), generator=core.generator(L))
    raised = call_without_grad(name, core.catching(module), idx, what=call)
    if raised is None or not issubclass(type(raised), ValueError):
        got = "returned without an error" if raised is None else f"raised {type(raised).__name__}: {raised}"
        raise GradingError(
            name,
            f"{call} {got}. Raise ValueError when T > context_length, naming both: there is no learned position "
            "beyond the table.",
        )


def _check_dropout(name: Graded, answer: Any) -> None:
    """With dropout, a training-mode run draws the reference's masks: after the embeddings, then in each block."""
    V, L, C, H, N, B, T, seed = 7, 8, 8, 2, 2, 2, 6, 5
    what = f"{name}({V}, {L}, {C}, {H}, {N}, dropout={_DROPOUT})"
    module = build_module(name, answer, V, L, C, H, N, what=what, seed=seed, dropout=_DROPOUT)
    try:
        drop = module.drop
    except AttributeError:
        drop = None
    if drop is None or not core.is_instance(drop, nn.Dropout) or abs(float(drop.p) - _DROPOUT) > 1e-9:
        shown = (
            "missing"
            if drop is None
            else f"{core.type_name(drop)}" + (f"(p={drop.p})" if core.is_instance(drop, nn.Dropout) else "")
        )
        raise GradingError(name, f"{what}: self.drop is {shown}; the contract's is nn.Dropout(dropout).")
    reference = ref.GPT(V, L, C, H, N, dropout=_DROPOUT).eval()
    state = _random_state(reference, seed)
    call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
    idx = torch.randint(V, (B, T), generator=core.generator(seed))
    call = f"{what} in training mode"
    got = call_in_training_mode(name, module, idx.clone(), what=call, seed=seed)
    logits = got[0] if isinstance(got, tuple | list) else got
    expected = _in_training(reference, idx, seed)
    if same_values(logits, expected):
        return
    with torch.no_grad():
        clean = reference(idx)[0]
    if same_values(logits, clean):
        raise GradingError(
            name,
            f"{call}: nothing was dropped. Apply self.drop to the embeddings' sum and pass dropout=dropout to each "
            "TransformerBlock.",
        )
    variants = [
        (
            lambda: _in_training(_with_dropout(reference, blocks=0.0), idx, seed),
            "the blocks got no dropout: build them with TransformerBlock(d_model, n_heads, dropout=dropout).",
        ),
        (
            lambda: _in_training(_with_dropout(reference, embeddings=0.0), idx, seed),
            "self.drop is never applied: x = self.drop(self.tok_emb(idx) + self.pos_emb(positions)).",
        ),
    ]
    mistake = find_mistake(variants, lambda v: same_values(logits, v), lambda v: same_values(v, expected))
    raise GradingError(
        name,
        f"{call}: {mistake}"
        if mistake
        else f"{call}: the output differs from the reference's with the same seed. "
        "Dropout belongs after the embeddings (self.drop) and inside the blocks (pass dropout=dropout to each), "
        "nowhere else.",
    )


def _in_training(reference: ref.GPT, idx: Tensor, seed: int) -> Tensor:
    reference.train(True)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        out = reference(idx)[0]
    reference.train(False)
    return out


def _with_dropout(reference: ref.GPT, *, embeddings: float | None = None, blocks: float | None = None) -> ref.GPT:
    """A copy of the reference with the embedding dropout and/or every block's dropout set to another p."""
    V, C = reference.tok_emb.weight.shape
    N, H = len(reference.blocks), reference.blocks[0].attn.n_heads
    p = reference.drop.p
    twin = ref.GPT(V, reference.context_length, C, H, N, dropout=p if blocks is None else blocks)
    twin.load_state_dict(reference.state_dict())
    twin.drop.p = p if embeddings is None else embeddings
    return twin.eval()
