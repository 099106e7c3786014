"""Grader of lesson 12's `load_llama_weights` (re-exported by `course_lib.grading.modern`).

The check builds a Hugging Face `LlamaForCausalLM` with random weights at a small size with grouped-query attention
(offline: no download), hands its state dict and a course ModernGPT of the same configuration (built where the
answer lives: `core.make`) with weights of its own to the answer, and asks what the contract asks: the model passed
in is loaded and returned, the state dict is left as it was, a tied head stays tied (an untied one stays its own),
and the model computes the Hugging Face model's logits (fp32, atol 1e-4). The weights are drawn so that every piece
moves the logits by far more than float rounding, and the RMSNorm gains are not left at 1.

A wrong load is compared with the known wrong mappings, each made from the reference's load: the query and key rows
not permuted (Hugging Face's "rotate half" layout left as it is), permuted the other way, permuted over the whole
projection instead of head by head, the value rows permuted too, q, k, v in another order (a case with as many
key/value heads as query heads, where the shapes allow it), gate_proj and up_proj swapped, the two norms of a block
swapped, o_proj transposed, the final norm not loaded, an untied head not loaded or given the embedding. Any other
wrong load is named by the first parameter that differs. Last, the errors: a key cut short (ValueError naming it), a
model twice as wide (ValueError naming embed_tokens, the first key), a key missing (KeyError naming it) and, for a
tied model, an lm_head.weight that is not the embedding (ValueError).

Shape legend: L layers, H query heads, H_kv key/value heads, D head size, C d_model, F SwiGLU width, V vocabulary.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import llama_weights as ref
from course_lib.grading.attention_common import keeps_rng
from course_lib.grading.gpt2_weights import expect_model_returned, judge_loaded_model, logits_of
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, call_label, tagged_cases
from course_lib.grading.kit.guard import check_definition
from course_lib.modern_gpt import ModernConfig, ModernGPT

__all__ = ["check_load_llama_weights", "head_is_tied", "llama_to_load"]

# (n_layers, n_heads, n_kv_heads, d_model, d_hidden, vocab_size, tied, extras, seed). extras: "head" (the state dict
# as LlamaForCausalLM gives it, lm_head.weight included), "no head" (tied, without lm_head.weight), "inv_freq" (with
# the rotary_emb.inv_freq buffers older checkpoints keep). The third case has as many key/value heads as query heads.
_CASES: list = [
    (2, 4, 2, 16, 24, 30, True, "head", 0),
    (1, 4, 1, 16, 20, 37, False, "head", 1),
    (2, 2, 2, 12, 16, 25, True, "inv_freq", 2),
]
_CONTEXT = 10  # positions of the ids the logits are compared on


# ------------------------------------------------------------------------------------------------------------
# What the check builds (module-level functions of the graders, so that `core.make` can build them in a sandbox)


def _config(case: tuple) -> ModernConfig:
    L, H, H_kv, C, F, V, tied, _, seed = case
    return ModernConfig(
        V, _CONTEXT, d_model=C, n_heads=H, n_layers=L, n_kv_heads=H_kv, norm="rms", position="rope", mlp="swiglu",
        bias=False, tie_weights=tied, mlp_hidden=F, norm_eps=1e-5, rope_base=500.0 + 100 * seed,
    )  # fmt: skip


def llama_to_load(case: tuple) -> ModernGPT:
    """The course's ModernGPT of the case's configuration, with random weights of its own (PyTorch's default
    initialisation), to be loaded."""
    torch.manual_seed(case[-1])
    return ModernGPT(_config(tuple(case))).eval()


def head_is_tied(model: nn.Module) -> bool:
    """Whether the output head's weight is the token table itself."""
    return model.lm_head.weight is model.tok_emb.weight


def _hf_case(case: tuple) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    """A random LlamaForCausalLM of the case's configuration: its state dict as the case gives it (a new dict,
    whose tensors are not to be changed in place), ids, logits."""
    state, idx, logits = _hf_model_case(tuple(case))
    return dict(state), idx, logits


@functools.lru_cache(maxsize=8)
def _hf_model_case(case: tuple) -> tuple[dict[str, Tensor], Tensor, Tensor]:
    from transformers import LlamaForCausalLM

    L, H, H_kv, C, F, V, tied, extras, seed = case
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(1000 + seed)
        hf = LlamaForCausalLM(ref.llama_config_from(_config(case))).eval()
        for p in hf.parameters():
            if p.dim() == 1:
                p.copy_(1.0 + 0.3 * torch.randn_like(p))  # RMSNorm gains around 1
            else:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)  # unit-size outputs
        idx = torch.randint(V, (2, _CONTEXT), generator=core.generator(2000 + seed))
        logits = hf(idx).logits.float()
        state = {k: v.detach().clone() for k, v in hf.state_dict().items()}
    if extras == "no head":
        del state["lm_head.weight"]
    elif extras == "inv_freq":
        D = C // H
        buffer = 1.0 / (500.0 + 100 * seed) ** (torch.arange(0, D, 2).float() / D)
        state["model.rotary_emb.inv_freq"] = buffer
        for i in range(L):
            state[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = buffer.clone()
    return state, idx, logits


def _shown(case: tuple) -> str:
    L, H, H_kv, C, F, V, tied, extras, _ = case
    what = {"head": "", "no head": ", without lm_head.weight", "inv_freq": ", with rotary_emb.inv_freq buffers"}
    return (
        f"a ModernGPT and the state dict of a LlamaForCausalLM(num_hidden_layers={L}, num_attention_heads={H}, "
        f"num_key_value_heads={H_kv}, hidden_size={C}, intermediate_size={F}, vocab_size={V}, "
        f"tie_word_embeddings={tied}){what[extras]}"
    )


# ------------------------------------------------------------------------------------------------------------
# Known wrong mappings: the reference's load, then one piece changed


def _halves_to_pairs_other_way(w: Tensor, heads: int) -> Tensor:
    """The inverse permutation: rows 2i, 2i + 1 of each head go to i and i + D/2."""
    rows, C = w.shape
    D = rows // heads
    return w.reshape(heads, D // 2, 2, C).transpose(1, 2).reshape(rows, C)


def _wrong_load(case: tuple, state: dict[str, Tensor], mistake: str) -> ModernGPT:
    """The model as a loader with `mistake` leaves it."""
    model = ref.load_llama_weights(llama_to_load(case), state)
    untouched = llama_to_load(case)
    H, H_kv = case[1], case[2]
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            key = lambda part, i=i: state[f"model.layers.{i}.{part}.weight"]  # noqa: E731
            q, k, v = key("self_attn.q_proj"), key("self_attn.k_proj"), key("self_attn.v_proj")
            pairs = ref.rotate_half_to_pairs
            rows = {
                "no_permutation": (q, k, v),
                "other_way": (_halves_to_pairs_other_way(q, H), _halves_to_pairs_other_way(k, H_kv), v),
                "whole_projection": (pairs(q, 1), pairs(k, 1), v),
                "values_permuted": (pairs(q, H), pairs(k, H_kv), pairs(v, H_kv)),
                "qkv:kqv": (pairs(k, H_kv), pairs(q, H), v),
                "qkv:qvk": (pairs(q, H), v, pairs(k, H_kv)),
                "qkv:vkq": (v, pairs(k, H_kv), pairs(q, H)),
            }.get(mistake)
            if rows is not None:
                block.attn.qkv.weight.copy_(torch.cat(rows))
            elif mistake == "gate_up_swapped":
                block.mlp.w1.weight.copy_(key("mlp.up_proj"))
                block.mlp.w3.weight.copy_(key("mlp.gate_proj"))
            elif mistake == "norms_swapped":
                block.ln1.weight.copy_(key("post_attention_layernorm"))
                block.ln2.weight.copy_(key("input_layernorm"))
            elif mistake == "o_proj_transposed":
                block.attn.out_proj.weight.copy_(key("self_attn.o_proj").T)
        if mistake == "final_norm_missing":
            model.ln_f.weight.copy_(untouched.ln_f.weight)
        elif mistake == "head_missing":
            model.lm_head.weight.copy_(untouched.lm_head.weight)
        elif mistake == "head_from_embedding":
            model.lm_head.weight.copy_(state["model.embed_tokens.weight"])
    return model


_PAIRS = (
    "Hugging Face's Llama rotates channel i of a head with channel i + D/2 ('rotate half'); the course's attention "
    "rotates neighbours (2i, 2i + 1). Within each head, row i of q_proj and k_proj goes to row 2i and row i + D/2 "
    "to row 2i + 1."
)
_QKV = "qkv's rows are [q | k | v]: q_proj, then k_proj, then v_proj (torch.cat in that order)."
_MISTAKES: list[tuple[str, str]] = [
    ("no_permutation", "the rows of q_proj and k_proj were copied as they are. " + _PAIRS),
    ("other_way", "the rows of q_proj and k_proj were permuted the other way round. " + _PAIRS),
    (
        "whole_projection",
        "the rows were permuted over the whole projection as if it were one head: permute within each head of D "
        "rows (D = d_model // n_heads). " + _PAIRS,
    ),
    (
        "values_permuted",
        "the rows of v_proj were permuted too: values are not rotated, so their rows stay as they are.",
    ),
    ("qkv:kqv", "q and k came out swapped: " + _QKV),
    ("qkv:qvk", "k and v came out swapped: " + _QKV),
    ("qkv:vkq", "q and v came out swapped: " + _QKV),
    (
        "gate_up_swapped",
        "gate_proj and up_proj are swapped: gate_proj is the gate, SwiGLU's w1 (through SiLU); up_proj is the "
        "value, w3.",
    ),
    (
        "norms_swapped",
        "the two norms of a block are swapped: input_layernorm is ln1 (before the attention), "
        "post_attention_layernorm is ln2 (before the mlp).",
    ),
    (
        "o_proj_transposed",
        "o_proj was transposed: Llama's projections are nn.Linear weights, (out, in) like ours; copy them as they are "
        "(only GPT-2's Conv1D needed a transpose).",
    ),
    ("final_norm_missing", "the final norm was not loaded: model.norm.weight goes into ln_f."),
    ("head_missing", "the output head was not loaded: with an untied head, lm_head.weight goes into lm_head."),
    (
        "head_from_embedding",
        "the untied head got the token table: this checkpoint has its own lm_head.weight (tie_word_embeddings is "
        "False); copy that.",
    ),
]


def _first_wrong_weight(case: tuple, state: dict[str, Tensor], got_state: Any) -> str | None:
    """The first parameter of the answer's model that does not hold what its Llama weights should give it."""
    if not isinstance(got_state, dict):
        return None
    expected = ref.load_llama_weights(llama_to_load(case), state).state_dict()
    sources: dict[str, list[str]] = {}
    for ours, theirs, _ in ref.weight_names(case[0], tied=case[6]):
        sources.setdefault(ours.partition("[")[0], []).append(theirs)
    for ours, theirs in sources.items():
        got = got_state.get(ours)
        if not isinstance(got, Tensor) or tuple(got.shape) != tuple(expected[ours].shape):
            continue
        if not torch.allclose(got.float(), expected[ours], atol=1e-6, rtol=0):
            worst = (got.float() - expected[ours]).abs().max().item()
            return f"`{ours}` does not hold {' + '.join(theirs)} as it should: it differs by up to {worst:.3g}."
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
        lambda m: "inv_freq" in m,
        "older checkpoints keep rotary_emb.inv_freq buffers: RoPE's frequencies, not weights. Skip them.",
    ),
    (lambda m: "size" in m or "shape" in m, "a shape does not fit: compare each shape before copying."),
]


def _load_one(name: Graded, answer: Any, tag: str | None, case: tuple) -> None:
    state, idx, expected = _hf_case(case)
    model = core.make(answer, llama_to_load, case)
    given = {k: v.clone() for k, v in state.items()}
    what = call_label(name, _shown(case), tag)
    with torch.enable_grad():  # as the lesson calls it: the copies must not be recorded by autograd
        got = core.call_answer(name, answer, model, given, what=what, hints=_HINTS)
    changed = [k for k in state if k not in given or not torch.equal(given[k], state[k])]
    if changed or given.keys() != state.keys():
        raise GradingError(
            name,
            f"{what} changed the state dict it was given (`{(changed or sorted(given.keys() ^ state.keys()))[0]}`). "
            "Leave it as it is: build new tensors (the permuted rows, the stacked q, k, v) instead.",
        )
    expect_model_returned(name, what, got, model)
    tied = case[6]
    if core.make(model, head_is_tied, model) != tied:
        raise GradingError(
            name,
            f"after {what}, model.lm_head.weight {'is no longer' if tied else 'has become'} model.tok_emb.weight: "
            + (
                "the head must stay tied. Copy into the parameters that are there (param.copy_(tensor) under "
                "torch.no_grad()) instead of assigning new ones."
                if tied
                else "this model's head is its own matrix (tie_word_embeddings=False): copy lm_head.weight into it."
            ),
        )
    judge_loaded_model(
        name,
        what,
        model,
        idx,
        expected,
        unloaded=lambda: logits_of(llama_to_load(case), idx),
        variants=[(lambda m=m: logits_of(_wrong_load(case, state, m), idx), text) for m, text in _MISTAKES],
        first_wrong=lambda: _first_wrong_weight(case, state, model.state_dict()) if tag is None else None,
        advice="q_proj and k_proj permuted head by head",
    )


def _expect_error(name: Graded, answer: Any, tag: str | None, case: tuple, kind: str) -> None:
    """A state dict that does not fit the model: the error the contract names, naming the key."""
    L = case[0]
    state, _, _ = _hf_case(case)
    model_case, error, key = case, ValueError, ""
    if kind == "short":  # one key cut short in the middle of the state dict
        key = f"model.layers.{L - 1}.self_attn.k_proj.weight"
        state[key] = state[key][:-2].clone()
        shown = f"{key} of shape {tuple(state[key].shape)}"
    elif kind == "wide":  # a model twice as wide as the weights: every matrix is wrong, the token table first
        model_case = (*case[:3], 2 * case[3], *case[4:])
        key, shown = "model.embed_tokens.weight", f"a model of d_model {2 * case[3]} and weights of {case[3]}"
    elif kind == "missing":
        key, error = f"model.layers.{L - 1}.mlp.up_proj.weight", KeyError
        del state[key]
        shown = f"a state dict without {key}"
    else:  # a tied model and a head that is not the embedding
        key = "lm_head.weight"
        state[key] = state["model.embed_tokens.weight"] + 1.0
        shown = "a tied model and an lm_head.weight that is not the embedding"
    model = core.make(answer, llama_to_load, model_case)
    what = call_label(name, shown, tag)
    with torch.enable_grad():
        raised = core.call_answer(name, core.catching(answer), model, state, what=what)
    short = key.removeprefix("model.")
    kind_name = error.__name__
    if raised is None:
        raise GradingError(name, f"{what} did not raise: raise {kind_name} naming the key, here `{key}`.")
    if not isinstance(raised, error):
        raise GradingError(
            name, f"{what} raised {type(raised).__name__} ({raised}); raise {kind_name} naming the key, here `{key}`."
        )
    if short not in str(raised):
        raise GradingError(name, f"{what} raised {kind_name}('{raised}'), which does not name the key `{key}`.")


@keeps_rng
def check_load_llama_weights(answer: Any, cases: list | None = None) -> Passed:
    """Check `load_llama_weights(model, state_dict) -> model`. A case is `(n_layers, n_heads, n_kv_heads, d_model,
    d_hidden, vocab_size, tied, extras, seed)`: the state dict of a random LlamaForCausalLM of that configuration,
    loaded into a course ModernGPT whose logits must then be the Hugging Face model's; four more calls must raise."""
    name = Graded(ref.load_llama_weights)
    check_definition(answer, name)
    run = tagged_cases(cases, _CASES)
    for tag, case in run:
        _load_one(name, answer, tag, tuple(case))
    tag, case = run[0]
    for kind in ("short", "wide", "missing"):
        _expect_error(name, answer, tag, tuple(case), kind)
    tied = next(((t, c) for t, c in run if c[6]), None)
    if tied is not None:
        _expect_error(name, answer, tied[0], tuple(tied[1]), "head")
    return Passed(name, len(run) + 3 + (tied is not None), hidden=cases is not None)
