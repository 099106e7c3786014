"""Grader of lesson 10's `load_gpt2_weights`, re-exported by `course_lib.grading.gpt2`, which the test cells import.

The check builds a Hugging Face `GPT2LMHeadModel` with random weights at a small size (offline: no download), hands
its state dict and a course GPT (`course_lib.gpt.GPT`, built where the answer lives: `core.make`) with weights of its
own to the answer, and asks of the result what the contract asks: the model passed in is loaded and returned, the
state dict is left as it was, the head is still tied to the token table, and the model computes the Hugging Face
model's logits (fp32, atol 1e-4). The weights are drawn larger than Hugging Face's 0.02, so that every piece of the
model moves the logits by far more than float rounding, and biases and LayerNorms are not left at 0 and 1, where a
piece copied to the wrong place would go unnoticed.

A wrong load is compared with the known wrong mappings, each made with the reference: `attn.c_proj` not transposed
(square, so its shape cannot tell), the Conv1D matrices reshaped instead of transposed, q, k, v in another order,
the token and position tables swapped (the cases include one where vocab_size equals context_length, so the swap
fits), ln_1 and ln_2 swapped, ln_f, the biases or the position table not copied. A wrong load that is none of these
is named by the first parameter that differs from what its Hugging Face weight should give it. Last, the
ValueError: one key cut short in the middle of the state dict, and a model twice as wide, whose first key
(`transformer.wte.weight`) must be the one named.

Shape legend: L layers, H heads, C d_model, V vocabulary, Tctx context length.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import gpt2_weights as ref
from course_lib.gpt import GPT
from course_lib.grading.attention_common import call_without_grad, keeps_rng
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, describe, tagged_cases
from course_lib.grading.kit.diagnose import find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = [
    "check_load_gpt2_weights",
    "expect_model_returned",
    "gpt_to_load",
    "head_is_tied",
    "is_same",
    "judge_loaded_model",
    "logits_close",
    "logits_of",
]

# (n_layers, n_heads, d_model, vocab_size, context_length, extras, seed). extras: "head" (lm_head.weight in the state
# dict, as GPT2LMHeadModel has it), "no head" (without it) or "old buffers" (with the attn.bias / attn.masked_bias
# buffers older checkpoints store). The first case has vocab_size == context_length: swapped tables fit there.
_CASES: list = [
    (2, 2, 16, 30, 30, "head", 0),
    (1, 4, 24, 37, 20, "no head", 1),
    (3, 2, 8, 50, 12, "old buffers", 2),
]
_ATOL = 1e-4  # the contract's: fp32 logits within 1e-4 of Hugging Face's


# ------------------------------------------------------------------------------------------------------------
# What the check builds (module-level functions of the graders, so that `core.make` can build them in a sandbox)


def gpt_to_load(vocab_size: int, context_length: int, d_model: int, n_heads: int, n_layers: int, seed: int) -> GPT:
    """The course's GPT with random weights of its own (PyTorch's default initialisation), to be loaded."""
    torch.manual_seed(seed)
    return GPT(vocab_size, context_length, d_model, n_heads, n_layers).eval()


def is_same(a: Any, b: Any) -> bool:
    """Whether `a` is `b` (asked where the answer's objects live)."""
    return a is b


def head_is_tied(model: nn.Module) -> bool:
    """Whether the output head's weight is still the token table itself."""
    return model.lm_head.weight is model.tok_emb.weight


def _hf_case(case: tuple) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """A random GPT2LMHeadModel of the case's size: its state dict as the case gives it, ids (2, Tctx), its logits."""
    from transformers import GPT2Config as HFConfig
    from transformers import GPT2LMHeadModel

    L, H, C, V, Tctx, extras, seed = case
    config = HFConfig(
        vocab_size=V, n_positions=Tctx, n_embd=C, n_layer=L, n_head=H, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5, bos_token_id=V - 1,
        eos_token_id=V - 1,
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(1000 + seed)
        hf = GPT2LMHeadModel(config).eval()
        for name, p in hf.named_parameters():
            if ".ln_" in name and name.endswith("weight"):
                p.copy_(1.0 + 0.3 * torch.randn_like(p))  # LayerNorm gains around 1
            elif name.endswith("bias") or name.startswith(("transformer.wte", "transformer.wpe")):
                p.copy_(0.5 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) / p.shape[0] ** 0.5)  # Conv1D (in, out): unit-size outputs
        idx = torch.randint(V, (2, Tctx), generator=core.generator(2000 + seed))  # every position of the context
        logits = hf(idx).logits.float()
    state = {k: v.detach().clone() for k, v in hf.state_dict().items()}
    if extras == "no head":
        del state["lm_head.weight"]
    elif extras == "old buffers":  # as transformers < 4.31 saved them: the causal mask and its fill value
        for i in range(L):
            state[f"transformer.h.{i}.attn.bias"] = (
                torch.ones(Tctx, Tctx, dtype=torch.bool).tril().view(1, 1, Tctx, Tctx)
            )
            state[f"transformer.h.{i}.attn.masked_bias"] = torch.tensor(-1e4)
    return state, idx, logits


def _shown(case: tuple) -> str:
    L, H, C, V, Tctx, extras, _ = case
    what = {"head": "", "no head": ", without lm_head.weight", "old buffers": ", with attn.bias buffers"}[extras]
    return (
        f"GPT({V}, {Tctx}, {C}, {H}, {L}), the state dict of a GPT2LMHeadModel(n_layer={L}, n_head={H}, n_embd={C}, "
        f"vocab_size={V}, n_positions={Tctx}){what}"
    )


# ------------------------------------------------------------------------------------------------------------
# Known wrong mappings: the reference load, then one piece changed


def _model_of(case: tuple) -> GPT:
    L, H, C, V, Tctx, _, seed = case
    with torch.random.fork_rng(devices=[]):
        return gpt_to_load(V, Tctx, C, H, L, seed)


def _loaded(case: tuple, state: dict[str, Tensor]) -> GPT:
    return ref.load_gpt2_weights(_model_of(case), state)


def _conv1d(i: int) -> dict[str, str]:
    """Our name -> Hugging Face's key, for the four Conv1D matrices of block i."""
    pairs = {"attn.qkv": "attn.c_attn", "attn.out_proj": "attn.c_proj", "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
    return {ours: f"transformer.h.{i}.{theirs}.weight" for ours, theirs in pairs.items()}


def _wrong_load(case: tuple, state: dict[str, Tensor], mistake: str) -> GPT:
    """The model as a loader with `mistake` leaves it."""
    model = _loaded(case, state)
    untouched = _model_of(case)  # what the model held before any copy
    C = case[2]
    with torch.no_grad():
        for i, (block, fresh) in enumerate(zip(model.blocks, untouched.blocks, strict=True)):
            linears = {name: block.get_submodule(name) for name in _conv1d(i)}
            if mistake == "c_proj_untransposed":
                block.attn.out_proj.weight.copy_(state[f"transformer.h.{i}.attn.c_proj.weight"])
            elif mistake == "reshaped":
                for ours, key in _conv1d(i).items():
                    linears[ours].weight.copy_(state[key].reshape(linears[ours].weight.shape))
            elif mistake.startswith("qkv:"):  # e.g. "qkv:kqv": the three blocks of rows in that order
                order = ["qkv".index(c) for c in mistake.removeprefix("qkv:")]
                for p in (block.attn.qkv.weight, block.attn.qkv.bias):
                    parts = p.detach().clone().split(C, dim=0)  # q, k, v: (C, ...) each
                    p.copy_(torch.cat([parts[j] for j in order], dim=0))
            elif mistake == "ln_swapped":
                for a, b in ((block.ln1.weight, block.ln2.weight), (block.ln1.bias, block.ln2.bias)):
                    saved = a.detach().clone()
                    a.copy_(b)
                    b.copy_(saved)
            elif mistake == "biases_missing":
                for ours in linears:
                    linears[ours].bias.copy_(fresh.get_submodule(ours).bias)
        if mistake == "tables_swapped":
            model.tok_emb.weight.copy_(state["transformer.wpe.weight"])
            model.pos_emb.weight.copy_(state["transformer.wte.weight"])
        elif mistake == "ln_f_missing":
            model.ln_f.load_state_dict(untouched.ln_f.state_dict())
        elif mistake == "positions_missing":
            model.pos_emb.weight.copy_(untouched.pos_emb.weight)
    return model


_TRANSPOSE = (
    "Hugging Face's Conv1D stores every matrix of a block as (in, out), where nn.Linear keeps (out, in): transpose "
    "all four — c_attn, attn.c_proj, c_fc and mlp.c_proj — with .t()."
)
_QKV = (
    "the three d_model-wide parts of c_attn are q, k and v, in that order, as the output of your `qkv` layer is "
    "[q | k | v]: copy c_attn (transposed) whole, or keep q, k, v in order, for the weight and the bias."
)
_MISTAKES: list[tuple[str, str]] = [
    (
        "c_proj_untransposed",
        "`attn.c_proj.weight` was copied without its transpose. It is square (d_model × d_model), so its shape fits "
        "either way and only the logits show it. " + _TRANSPOSE,
    ),
    (
        "reshaped",
        "the Conv1D matrices were reshaped (.view / .reshape) into nn.Linear's shape instead of transposed: a "
        "reshape keeps the numbers in their memory order, which scrambles rows and columns. Use .t().",
    ),
    ("qkv:kqv", "q and k came out swapped: " + _QKV),
    ("qkv:qvk", "k and v came out swapped: " + _QKV),
    ("qkv:vkq", "q and v came out swapped: " + _QKV),
    ("qkv:kvq", "q, k and v came out rotated (k, v, q): " + _QKV),
    ("qkv:vqk", "q, k and v came out rotated (v, q, k): " + _QKV),
    (
        "tables_swapped",
        "the token and position tables were swapped: transformer.wte.weight (one row per token) goes into tok_emb, "
        "transformer.wpe.weight (one row per position) into pos_emb. Here vocab_size equals context_length, so the "
        "shapes could not tell.",
    ),
    (
        "ln_swapped",
        "ln_1 and ln_2 were swapped: ln_1 is the LayerNorm before the attention (your ln1), ln_2 the one before the "
        "MLP (ln2).",
    ),
    ("ln_f_missing", "the final LayerNorm was not loaded: copy transformer.ln_f.weight and .bias into ln_f."),
    (
        "biases_missing",
        "the biases of the linear layers were not loaded: c_attn, attn.c_proj, c_fc and mlp.c_proj each have a "
        ".bias, copied as it is (a vector has nothing to transpose).",
    ),
    ("positions_missing", "the position table was not loaded: copy transformer.wpe.weight into pos_emb."),
]


def logits_close(a: Any, b: Tensor) -> bool:
    """Whether `a` is a float tensor of `b`'s shape within the contract's tolerance of it."""
    return (
        isinstance(a, Tensor)
        and tuple(a.shape) == tuple(b.shape)
        and a.is_floating_point()
        and torch.allclose(a.float(), b, atol=_ATOL, rtol=0)
    )


def logits_of(model: nn.Module, idx: Tensor) -> Tensor:
    """The logits a course-shaped model returns first for `idx`, without gradients."""
    with torch.no_grad():
        return model(idx)[0]


def _first_wrong_weight(case: tuple, state: dict[str, Tensor], got_state: Any) -> str | None:
    """The first parameter of the answer's model that does not hold what its Hugging Face weight should give it."""
    if not isinstance(got_state, dict):
        return None
    expected = _loaded(case, state).state_dict()
    for ours, theirs, transposed in ref.weight_names(case[0]):
        got = got_state.get(ours)
        if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected[ours].shape):
            continue
        if not torch.allclose(got.float(), expected[ours], atol=1e-6, rtol=0):
            how = " (transposed)" if transposed else ""
            worst = (got.float() - expected[ours]).abs().max().item()
            return f"`{ours}` does not hold {theirs}{how}: it differs by up to {worst:.3g}."
    return None


# ------------------------------------------------------------------------------------------------------------
# The check


_HINTS: list[tuple[Callable[[str], bool], str]] = [
    (
        lambda m: "leaf Variable that requires grad" in m,
        "copying into a parameter is an in-place change autograd must not record: do the copies inside "
        "`with torch.no_grad():`.",
    ),
    (
        lambda m: "masked_bias" in m or ".attn.bias" in m,
        "older checkpoints store attn.bias and attn.masked_bias in every block: buffers of the causal mask, not "
        "weights. Skip them.",
    ),
    (
        lambda m: "lm_head.weight" in m and "KeyError" in m,
        "lm_head.weight is optional: the head is tied to the token table, which gets transformer.wte.weight.",
    ),
    (
        lambda m: ("wte" in m or "wpe" in m or "emb" in m) and ("size" in m or "shape" in m),
        "transformer.wte.weight (vocab_size × d_model) is the token table, tok_emb; transformer.wpe.weight "
        "(context_length × d_model) the position table, pos_emb.",
    ),
    (lambda m: "size" in m or "shape" in m, "a shape does not fit. " + _TRANSPOSE),
    (lambda m: "KeyError" in m, "check the names against the table of section 3 (`weight_names`)."),
]


def expect_model_returned(name: Graded, what: str, got: Any, model: Any) -> None:
    """A loader returns the model it was given (`model`), loaded in place."""
    if got is None:
        raise GradingError(name, f"{what} returned None: return the model (the one passed in, now loaded).")
    if not core.is_instance(got, nn.Module):
        raise GradingError(name, f"{what} should return the model, got {core.type_name(got)}: {describe(got)}.")
    if not core.make(model, is_same, got, model):
        raise GradingError(
            name, f"{what} returned another model: load the weights into `model` itself, in place, and return it."
        )


def _expect_state_unchanged(name: Graded, what: str, given: dict, state: dict[str, Tensor]) -> None:
    changed = [k for k in state if k not in given or not torch.equal(given[k], state[k])]
    added = [k for k in given if k not in state]
    if changed or added:
        key = (changed or added)[0]
        raise GradingError(
            name,
            f"{what} changed the state dict it was given (`{key}`). Leave it as it is: transpose with .t(), which "
            "makes a new view, and read keys without popping or replacing them.",
        )


def _load_one(name: Graded, answer: Any, tag: str | None, case: tuple) -> None:
    L, H, C, V, Tctx, _, seed = case
    state, idx, expected = _hf_case(case)
    model = core.make(answer, gpt_to_load, V, Tctx, C, H, L, seed)
    given = {k: v.clone() for k, v in state.items()}
    what = call_label(name, _shown(case), tag)
    with torch.enable_grad():  # as the lesson calls it: the copies must not be recorded by autograd
        got = core.call_answer(name, answer, model, given, what=what, hints=_HINTS)
    _expect_state_unchanged(name, what, given, state)
    expect_model_returned(name, what, got, model)
    if not core.make(model, head_is_tied, model):
        raise GradingError(
            name,
            f"after {what}, model.lm_head.weight is no longer model.tok_emb.weight: the head must stay tied. Copy "
            "into the parameters that are there (param.copy_(tensor) under torch.no_grad()) instead of assigning "
            "new ones; the head then gets transformer.wte.weight through the token table.",
        )
    judge_loaded_model(
        name,
        what,
        model,
        idx,
        expected,
        unloaded=lambda: logits_of(_model_of(case), idx),
        variants=[(lambda m=m: logits_of(_wrong_load(case, state, m), idx), text) for m, text in _MISTAKES],
        first_wrong=lambda: _first_wrong_weight(case, state, model.state_dict()) if tag is None else None,
        advice="transposing the four Conv1D matrices of each block",
    )


def judge_loaded_model(
    name: Graded,
    what: str,
    model: Any,
    idx: Tensor,
    expected: Tensor,
    unloaded: Callable[[], Tensor],
    variants: list[tuple[Callable[[], Tensor], str]],
    first_wrong: Callable[[], str | None],
    advice: str,
) -> None:
    """The verdict on a model after a loader ran (`what`), from its logits for `idx`: Hugging Face's (`expected`)
    pass; the model's before loading (`unloaded()`) mean nothing was loaded; one of `variants` (the logits of a known
    wrong load, and the mistake's words) names that mistake; otherwise the first wrong weight (`first_wrong()`, or
    None) and `advice` on copying by the name table. Lessons 10 (GPT-2) and 12 (Llama) judge their loaders so."""
    out = call_without_grad(name, model, idx, what=f"the model's forward after {what}", guard=False)
    logits = out[0] if isinstance(out, tuple) and out else out
    if logits_close(logits, expected):
        return
    if logits_close(logits, unloaded()):
        raise GradingError(name, f"after {what} the model computes what it computed before: nothing was loaded.")
    mistake = find_mistake(variants, lambda v: logits_close(logits, v), lambda v: logits_close(v, expected))
    if mistake is not None:
        raise GradingError(name, f"after {what}: {mistake}")
    wrong = first_wrong()
    detail = f" {wrong}" if wrong else ""
    raise GradingError(
        name,
        f"after {what} the model's logits are not the Hugging Face model's.{detail} Copy every weight by the name "
        f"table, {advice}.",
    )


def _expect_value_error(name: Graded, answer: Any, tag: str | None, case: tuple, wide: bool) -> None:
    """A state dict that does not fit: ValueError naming the first key whose shape is wrong."""
    L, H, C, V, Tctx, _, seed = case
    state, _, _ = _hf_case(case)
    if wide:  # a model twice as wide as the weights: every matrix is wrong, the token table first
        model, key = core.make(answer, gpt_to_load, V, Tctx, 2 * C, H, L, seed), "transformer.wte.weight"
        shown = f"GPT({V}, {Tctx}, {2 * C}, {H}, {L}) and weights of width {C}"
    else:  # one key cut short in the middle of the state dict
        key = f"transformer.h.{L - 1}.mlp.c_fc.weight"
        state[key] = state[key][:, :-1].clone()
        model = core.make(answer, gpt_to_load, V, Tctx, C, H, L, seed)
        shown = f"GPT({V}, {Tctx}, {C}, {H}, {L}) and {key} of shape {tuple(state[key].shape)}"
    what = call_label(name, shown, tag)
    with torch.enable_grad():
        raised = core.call_answer(name, core.catching(answer), model, state, what=what)
    short = key.removeprefix("transformer.")
    if raised is None:
        raise GradingError(
            name,
            f"{what} did not raise. Compare each shape before copying (Conv1D matrices after the transpose) and "
            f"raise ValueError naming the key, here `{key}`.",
        )
    if not isinstance(raised, ValueError):
        raise GradingError(
            name,
            f"{what} raised {type(raised).__name__} ({raised}); raise a ValueError naming the first key whose shape "
            f"does not fit, here `{key}`, before PyTorch's copy fails.",
        )
    if short not in str(raised):
        raise GradingError(
            name,
            f"{what} raised ValueError('{raised}'), which does not name the key `{key}`: name the state dict's "
            "first key whose shape does not fit.",
        )


@keeps_rng
def check_load_gpt2_weights(answer: Any, cases: list | None = None) -> Passed:
    """Check `load_gpt2_weights(model, state_dict) -> model`. A case is `(n_layers, n_heads, d_model, vocab_size,
    context_length, extras, seed)`: the state dict of a random GPT2LMHeadModel of that size, loaded into a course
    GPT whose logits must then be the Hugging Face model's; two more calls must raise ValueError."""
    name = Graded(ref.load_gpt2_weights)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, case in run:
        _load_one(name, answer, tag, tuple(case))
    tag, case = run[0]
    _expect_value_error(name, answer, tag, tuple(case), wide=False)
    _expect_value_error(name, answer, tag, tuple(case), wide=True)
    return Passed(name, len(run) + 2, hidden=cases is not None)
