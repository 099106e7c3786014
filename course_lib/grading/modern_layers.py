"""Graders of lesson 12's `SwiGLU` and `repeat_kv` (re-exported by `course_lib.grading.modern`).

`SwiGLU`: the three linears by name and shape (w1, w3: d_model -> d_hidden; w2: d_hidden -> d_model; biases
exactly when `bias=True`), then the output on random weights; named mistakes: SiLU on the value branch instead
of the gate, w2 and w3 swapped, SiLU on both branches or after the product, a sigmoid, GELU or ReLU gate, a sum
instead of a product, the value branch left out. `repeat_kv`: exact values against the reference, with the heads
interleaved (h % H_kv, what `x.repeat` gives) and repeats along the wrong dimension named, and `x` itself returned
when n_rep == 1.

Shape legend: B batch, H_kv key/value heads, T time, D head size, C d_model channels.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import modern as ref
from course_lib.grading.attention_common import build_module, call_without_grad, expect_linears, keeps_rng
from course_lib.grading.blocks_layers import expect_state
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, expect_unchanged, tagged_cases
from course_lib.grading.kit.diagnose import Variant, diagnose_tensor, tensor_result
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_SwiGLU", "check_repeat_kv", "returns_its_input"]

# ------------------------------------------------------------------------------------------------------------
# Exercise 3: SwiGLU

# (B, T, d_model, d_hidden, bias, seed); the last case has d_model == d_hidden, where swapped w2 and w3 still fit.
_SWIGLU_CASES: list = [(2, 5, 8, 12, False, 0), (1, 3, 6, 16, True, 1), (2, 4, 5, 5, False, 2)]
_NAMES = (
    "Name the layers as the contract does: self.w1 and self.w3 = nn.Linear(d_model, d_hidden, bias=bias) (the gate "
    "and the value), self.w2 = nn.Linear(d_hidden, d_model, bias=bias) (back to the residual stream)."
)


def _swiglu_mistakes(state: dict[str, Tensor], x: Tensor) -> list[Variant]:
    def linear(key: str, h: Tensor) -> Tensor:
        return F.linear(h, state[f"{key}.weight"], state.get(f"{key}.bias"))

    w1, w3 = linear("w1", x), linear("w3", x)  # (B, T, d_hidden) each
    w2 = lambda h: linear("w2", h)  # noqa: E731
    variants: list[Variant] = [
        (
            lambda: w2(w1 * F.silu(w3)),
            "SiLU is on the wrong branch: the gate is w1 (w2(silu(w1(x)) * w3(x))); w3 is the value, not activated.",
        ),
        (
            lambda: w2(F.silu(w1) * F.silu(w3)),
            "SiLU was applied to both branches: only the gate w1(x) goes through it.",
        ),
        (lambda: w2(F.silu(w1 * w3)), "SiLU was applied after the product: silu(w1(x)) * w3(x), gate first."),
        (
            lambda: w2(torch.sigmoid(w1) * w3),
            "the gate uses a sigmoid (that is the original GLU): SwiGLU's gate is silu(z) = z * sigmoid(z).",
        ),
        (lambda: w2(F.gelu(w1) * w3), "the gate uses GELU (that is GEGLU): SwiGLU's gate is F.silu."),
        (lambda: w2(F.relu(w1) * w3), "the gate uses ReLU (that is ReGLU): SwiGLU's gate is F.silu."),
        (lambda: w2(F.silu(w1) + w3), "the branches were added: SwiGLU multiplies the gate by the value."),
        (lambda: w2(F.silu(w1)), "the value branch w3(x) is missing: multiply the gate by it, silu(w1(x)) * w3(x)."),
    ]
    if state["w2.weight"].shape == state["w3.weight"].shape:  # square: swapped names still fit their shapes
        variants.append(
            (
                lambda: linear("w3", F.silu(w1) * linear("w2", x)),
                "w2 and w3 are swapped: w3 is the value (d_model -> d_hidden, multiplied by the gate) and w2 the "
                "output projection (d_hidden -> d_model), as in Llama's code.",
            )
        )
    return variants


@keeps_rng
def check_SwiGLU(answer: Any, cases: list | None = None) -> Passed:
    """Check `SwiGLU(d_model, d_hidden, bias=False)`; a case is `(B, T, d_model, d_hidden, bias, seed)`."""
    name = Graded(ref.SwiGLU)
    check_definition(answer, name)
    run = tagged_cases(cases, _SWIGLU_CASES)
    for tag, (B, T, d_model, d_hidden, bias, seed) in run:
        what = call_label(name, f"{d_model}, {d_hidden}" + (", bias=True" if bias else ""), tag)
        module = build_module(name, answer, d_model, d_hidden, what=what, seed=seed, **({"bias": True} if bias else {}))
        reference = ref.SwiGLU(d_model, d_hidden, bias=bias).eval()
        shapes = {
            "w1": (d_model, d_hidden, "x"),
            "w3": (d_model, d_hidden, "x"),
            "w2": (d_hidden, d_model, "the gated hidden layer"),
        }
        swapped = (
            "w2 maps the hidden layer back (d_hidden -> d_model) and w3 is the value (d_model -> d_hidden); "
            "are w2 and w3 swapped?"
        )
        expect_state(name, module, reference, what, _NAMES, shape_hint=swapped)
        expect_linears(name, module, shapes, bias, what)
        # Weights of about twice 1/sqrt(fan_in): the gate's inputs spread over -3..3, where SiLU is far from linear.
        g = core.generator(seed + 50)
        state = {
            k: 2 * torch.randn(v.shape, generator=g) / math.sqrt(v.shape[-1]) for k, v in reference.state_dict().items()
        }
        reference.load_state_dict(state)
        call_without_grad(name, module.load_state_dict, state, what=f"{what}.load_state_dict(...)")
        x = core.random_tensor(B, T, d_model, seed=seed + 100)
        call = f"{what} on x {tuple(x.shape)}" if tag is None else f"{what} on its input"
        got = tensor_result(name, call_without_grad(name, module, x.clone(), what=call), call)
        with torch.no_grad():
            diagnose_tensor(name, call, got, reference(x), _swiglu_mistakes(state, x))
    return Passed(name, len(run), hidden=cases is not None)


# ------------------------------------------------------------------------------------------------------------
# Exercise 4: repeat_kv

# (B, H_kv, T, D, n_rep, seed); the last case has n_rep == 1, where x itself comes back.
_REPEAT_CASES: list = [(2, 2, 5, 4, 3, 0), (1, 3, 4, 2, 2, 1), (2, 1, 3, 4, 4, 2), (1, 2, 3, 4, 1, 3)]


def _repeat_mistakes(x: Tensor, n_rep: int) -> list[Variant]:
    variants: list[Variant] = [
        (
            lambda: x.repeat(1, n_rep, 1, 1),
            "the heads are interleaved: output head h is input head h % H_kv (what x.repeat(1, n_rep, 1, 1) or "
            "torch.cat([x] * n_rep, dim=1) gives). Each key/value head serves n_rep *consecutive* query heads: "
            "output head h is input head h // n_rep (torch.repeat_interleave(x, n_rep, dim=1), or expand a new "
            "dimension after the heads and reshape).",
        ),
    ]
    for dim, what in ((0, "the batch"), (2, "time"), (3, "the channels of a head")):
        variants.append(
            (
                lambda dim=dim: torch.repeat_interleave(x, n_rep, dim=dim),
                f"the repeats went along dim={dim} ({what}); they go along dim=1, the heads: (B, H_kv * n_rep, T, D).",
            )
        )
    return variants


def returns_its_input(answer: Any) -> bool:
    """Whether `answer(x, 1)` is `x` itself (built where the answer lives, so that identity can be seen there)."""
    x = torch.randn(1, 2, 3, 4)
    return answer(x, 1) is x


def check_repeat_kv(answer: Any, cases: list | None = None) -> Passed:
    """Check `repeat_kv(x, n_rep)`; a case is `(B, H_kv, T, D, n_rep, seed)`. Values must be exact (a copy)."""
    name = Graded(ref.repeat_kv)
    check_definition(answer, name)
    run = tagged_cases(cases, _REPEAT_CASES)
    for tag, (B, H_kv, T, D, n_rep, seed) in run:
        x = core.random_tensor(B, H_kv, T, D, seed=seed)
        expected = ref.repeat_kv(x, n_rep)  # (B, H_kv * n_rep, T, D)
        what = call_label(name, f"x of shape {(B, H_kv, T, D)}, n_rep={n_rep}", tag)
        given = x.clone()
        got = tensor_result(name, call_without_grad(name, answer, given, n_rep, what=what), what)
        expect_unchanged(name, {"x": (given, x)}, what)
        diagnose_tensor(name, what, got, expected, _repeat_mistakes(x, n_rep), atol=0.0, rtol=0.0)
    if not core.make(answer, returns_its_input, answer):
        raise GradingError(
            name,
            f"{name}(x, 1) returned a copy of x. Its values are right, but the contract returns x itself when "
            "n_rep == 1 (`if n_rep == 1: return x`): with one key/value head per query head there is nothing to "
            "share, and a model should not copy every layer's keys and values for nothing.",
        )
    return Passed(name, len(run) + 1, hidden=cases is not None)
