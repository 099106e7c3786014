"""Grader of lesson 12's `ModernBlock` (re-exported by `course_lib.grading.modern`).

Its submodules and state dict, then the output on random weights (the course's ModernAttention, rms_norm and SwiGLU
inside when graded, the learner's own in their notebook), then a call through a KV cache (built where the answer
lives) whose output and grown cache are compared with the reference's. Named mistakes: post-norm, OLMo 2's order
(each sublayer's output normalised), the two sublayers in parallel, a residual missing, the two norms swapped, `eps`
not passed on to the norms, the cache not passed on to the attention.

Shape legend: B batch, T positions, H query heads, H_kv key/value heads, D head size, C d_model, F SwiGLU width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from course_lib import modern as ref
from course_lib.grading.attention_common import build_module, call_without_grad, keeps_rng
from course_lib.grading.blocks_layers import expect_state
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, tensor_result
from course_lib.grading.kit.guard import check_definition
from course_lib.grading.modern_attention import layer_cache, random_state, same_values
from course_lib.multihead import LayerCache

__all__ = ["check_ModernBlock"]

# ------------------------------------------------------------------------------------------------------------
# Exercise: ModernBlock

# (B, T, d_model, n_heads, n_kv_heads, d_hidden, qk_norm, eps or None, rope_base or None, scale of x, seed). The
# second case has a large eps and a small x, where eps decides the output.
_BLOCK_CASES: list = [
    (2, 5, 16, 4, 2, 24, False, None, None, 1.0, 0),
    (1, 4, 12, 2, 1, 20, True, 0.1, 500.0, 0.05, 1),
]
_BLOCK_NAMES = (
    "Name the submodules as the contract does: self.ln1 and self.ln2 (RMSNorm modules with a `weight` of size "
    "d_model), self.attn = ModernAttention(d_model, n_heads, n_kv_heads, qk_norm, rope_base) and "
    "self.mlp = SwiGLU(d_model, d_hidden)."
)


def _block_mistakes(block: ref.ModernBlock, x: Tensor, eps: float | None, past: LayerCache | None) -> list[Variant]:
    ln1, ln2, attn, mlp = block.ln1, block.ln2, block.attn, block.mlp

    def cached() -> LayerCache | None:
        return None if past is None else LayerCache(keys=past.keys, values=past.values)

    def pre(n1=ln1, n2=ln2, attn_residual=True, mlp_residual=True, cache=True):
        h = (x if attn_residual else 0) + attn(n1(x), cache=cached() if cache else None)
        return (h if mlp_residual else 0) + mlp(n2(h))

    def post():
        h = ln1(x + attn(x, cache=cached()))
        return ln2(h + mlp(h))

    def olmo2():
        h = x + ln1(attn(x, cache=cached()))
        return h + ln2(mlp(h))

    def parallel():
        return x + attn(ln1(x), cache=cached()) + mlp(ln2(x))

    variants: list[Variant] = [
        (
            post,
            "this is the post-norm order, x = norm(x + sublayer(x)). The block is pre-norm, as GPT-2's and Llama's: "
            "x = x + attn(ln1(x)), then x = x + mlp(ln2(x)).",
        ),
        (
            olmo2,
            "this normalises each sublayer's output, x = x + norm(sublayer(x)): that is OLMo 2's order. Llama's "
            "normalises the input: x = x + attn(ln1(x)), then x = x + mlp(ln2(x)).",
        ),
        (
            parallel,
            "the two sublayers read the same x (in parallel, as GPT-J): the mlp reads ln2 of x after the attention.",
        ),
        (lambda: pre(attn_residual=False), "the residual connection around the attention is missing: x = x + ..."),
        (lambda: pre(mlp_residual=False), "the residual connection around the mlp is missing: x = x + ..."),
        (lambda: pre(n1=ln2, n2=ln1), "ln1 and ln2 are swapped: ln1 goes before the attention, ln2 before the mlp."),
    ]
    if past is not None:
        variants.append(
            (
                lambda: pre(cache=False),
                "the cache was not passed on to the attention: self.attn(self.ln1(x), cache=cache).",
            )
        )
    if eps is not None:
        default = ref.ModernBlock(
            x.shape[-1], attn.n_heads, attn.n_kv_heads, mlp.w1.out_features, attn.qk_norm, rope_base=attn.rope_base
        )
        default = default.double().eval()
        default.load_state_dict(block.state_dict())
        variants.append(
            (
                lambda: default(x, cache=cached()),
                f"the norms use eps=1e-6, not eps={eps}: pass eps on to both RMSNorms.",
            )
        )
    return variants


@keeps_rng
def check_ModernBlock(answer: Any, cases: list | None = None) -> Passed:
    """Check `ModernBlock(d_model, n_heads, n_kv_heads, d_hidden, qk_norm=False, eps=1e-6, rope_base=10000.0)`. A
    case is `(B, T, d_model, n_heads, n_kv_heads, d_hidden, qk_norm, eps or None, rope_base or None, scale, seed)`;
    each is called without a cache and then with one (its first T - 1 positions cached)."""
    name = Graded(ref.ModernBlock)
    check_definition(answer, name)
    run = tagged_cases(cases, _BLOCK_CASES)
    for tag, (B, T, d_model, H, H_kv, d_hidden, qk_norm, eps, base, scale, seed) in run:
        args = (d_model, H, H_kv, d_hidden)
        options = {
            **({"qk_norm": True} if qk_norm else {}),
            **({"eps": eps} if eps is not None else {}),
            **({"rope_base": base} if base is not None else {}),
        }
        shown = ", ".join([*map(str, args), *(f"{k}={v}" for k, v in options.items())])
        what = call_label(name, shown, tag)
        module = build_module(name, answer, *args, what=what, seed=seed, **options)
        for attr in ("ln1", "attn", "ln2", "mlp"):
            if getattr(module, attr, None) is None:
                raise GradingError(name, f"{what} has no `{attr}`. {_BLOCK_NAMES}")
        reference = ref.ModernBlock(*args, **options).eval()
        expect_state(name, module, reference, what, _BLOCK_NAMES)
        state = random_state(reference, seed + 50)
        call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")
        reference = ref.ModernBlock(*args, **options).double().eval()
        reference.load_state_dict({k: v.double() for k, v in state.items()})
        x = core.random_tensor(B, T, d_model, seed=seed + 100, scale=scale)
        call = f"{what} on x {(B, T, d_model)}" if tag is None else f"{what} on its input"
        got = tensor_result(name, call_without_grad(name, module, x.clone(), what=call), call)
        with torch.no_grad():
            expected = reference(x.double())
            diagnose_tensor(
                name, call, got, expected, _block_mistakes(reference, x.double(), eps, None), atol=1e-4, rtol=1e-4,
                hint=_INSIDE,
            )  # fmt: skip
        _cached_block_call(name, answer, module, reference, x, H_kv, d_model // H, eps, call)
    return Passed(name, 2 * len(run), hidden=cases is not None)


_INSIDE = (
    "(In your notebook the block runs your own ModernAttention, rms_norm and SwiGLU: if one of them fails its checks, "
    "fix that one first.)"
)


def _cached_block_call(name, answer, module, reference, x: Tensor, H_kv: int, D: int, eps, call: str) -> None:
    """The block with a cache of its first T - 1 positions, fed the last: its output, and the cache passed on."""
    B, T, _ = x.shape
    with torch.no_grad():
        past = LayerCache(keys=torch.zeros(B, H_kv, 0, D, dtype=torch.float64), values=None)
        past.values = past.keys
        reference(x[:, :-1].double(), cache=past)
        grown = LayerCache(keys=past.keys, values=past.values)
        expected = reference(x[:, -1:].double(), cache=grown)
    cache = core.make(answer, layer_cache, past.keys.float(), past.values.float())
    cached = f"{call}, its last position fed alone after a cache of the first {T - 1}"
    hints = [(lambda m: "cache" in m and "argument" in m, "forward(x, cache=None) passes the cache to the attention.")]
    got = tensor_result(
        name, call_without_grad(name, module, x[:, -1:].clone(), cache=cache, what=cached, hints=hints), cached
    )
    with torch.no_grad():
        diagnose_tensor(
            name, cached, got, expected, _block_mistakes(reference, x[:, -1:].double(), eps, past), atol=1e-4,
            rtol=1e-4, hint=_INSIDE,
        )  # fmt: skip
    keys = getattr(cache, "keys", None)
    if not same_values(keys, grown.keys):
        raise GradingError(
            name,
            f"after {cached}, the cache does not hold the keys of all {T} positions: pass the cache to the attention "
            "(self.attn(self.ln1(x), cache=cache)), which grows it.",
        )
