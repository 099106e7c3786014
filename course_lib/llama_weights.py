"""A Hugging Face Llama checkpoint in the course's ModernGPT, whose blocks may be yours (Lesson 12).

    config_from_llama     a ModernConfig for a `transformers.LlamaConfig` (or its config.json as a dict), refusing
                          what ModernGPT does not implement (scaled RoPE, biases, another activation)
    llama_config_from     the `transformers.LlamaConfig` of one of our configs (the lesson's offline check)
    rotate_half_to_pairs  a q_proj / k_proj weight's rows from Hugging Face's "rotate half" layout to interleaved
                          pairs, head by head
    weight_names          the name table: ours, Hugging Face's, and which rows are permuted
    load_llama_weights    copy a LlamaForCausalLM state dict into a model of ModernGPT's names, in place (Lesson 12,
                          exercise): the course's ModernGPT, built from the course's ModernBlocks or from yours
    pretrained_if_available   a small real Llama-architecture checkpoint (SmolLM2-135M) from the Hugging Face cache,
                          or downloaded if the Hub answers quickly; otherwise None and why (the lesson runs offline)

The names map one to one (the table is in `weight_names`): Llama's q_proj, k_proj and v_proj are three linears,
ours one `qkv` whose rows are [q | k | v], so the three are stacked. The one trap is RoPE's channel layout. Lesson
03 rotates interleaved pairs, channels (2i, 2i + 1) of a head; Hugging Face's Llama rotates channel i with channel
i + D/2 ("rotate half"), with the same angle p * base**(-2i/D). A head's queries and keys are only ever used
through their dot products, which do not change when the channels of both are put in another order: so moving
query and key rows h*D + i -> h*D + 2i and h*D + D/2 + i -> h*D + 2i + 1 (for every head h and i < D/2) turns
Hugging Face's rotation into ours and leaves every score as it was. Values and the output projection keep their
rows. `transformers` is imported only by the functions that need a Hugging Face model or config.

Shape legend: L layers, H query heads, H_kv key/value heads, D head size, C d_model, V vocabulary, F SwiGLU width.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.gpt2_weights import from_hub
from course_lib.modern_gpt import ModernConfig

__all__ = [
    "SMALL_LLAMA",
    "config_from_llama",
    "llama_config_from",
    "load_llama_weights",
    "pretrained_if_available",
    "rotate_half_to_pairs",
    "weight_names",
]

# A small real checkpoint of Llama's architecture: 30 layers of 576, 9 query and 3 key/value heads of 64, SwiGLU
# 1,536 wide, tied head, RoPE base 100,000 (Hugging Face's SmolLM2, 2024; about 270 MB in bf16).
SMALL_LLAMA = "HuggingFaceTB/SmolLM2-135M"

# (ours in block i, Hugging Face's in layer i without "model.", how the rows are arranged). q, k, v go into one qkv.
_BLOCK_NAMES = (
    ("attn.qkv.weight[q]", "self_attn.q_proj.weight", "pairs"),
    ("attn.qkv.weight[k]", "self_attn.k_proj.weight", "pairs"),
    ("attn.qkv.weight[v]", "self_attn.v_proj.weight", ""),
    ("attn.out_proj.weight", "self_attn.o_proj.weight", ""),
    ("mlp.w1.weight", "mlp.gate_proj.weight", ""),
    ("mlp.w3.weight", "mlp.up_proj.weight", ""),
    ("mlp.w2.weight", "mlp.down_proj.weight", ""),
    ("ln1.weight", "input_layernorm.weight", ""),
    ("ln2.weight", "post_attention_layernorm.weight", ""),
)


def weight_names(n_layers: int, tied: bool = True) -> list[tuple[str, str, str]]:
    """(our name, LlamaForCausalLM's name, "pairs" where the rows go from rotate-half to interleaved pairs) for
    every weight of an n_layers model, in the order of Hugging Face's state dict. q, k and v all go into the
    block's `attn.qkv.weight` (rows [q | k | v]); with `tied`, `lm_head.weight` is the token table's and is left out."""
    _checks.positive_int("n_layers", n_layers)
    names = [("tok_emb.weight", "model.embed_tokens.weight", "")]
    for i in range(n_layers):
        names += [(f"blocks.{i}.{ours}", f"model.layers.{i}.{theirs}", how) for ours, theirs, how in _BLOCK_NAMES]
    names.append(("ln_f.weight", "model.norm.weight", ""))
    return names if tied else [*names, ("lm_head.weight", "lm_head.weight", "")]


def rotate_half_to_pairs(weight: Tensor, n_heads: int) -> Tensor:
    """The rows of a query or key projection (n_heads * D, C), reordered head by head from Hugging Face's "rotate
    half" layout to interleaved pairs: row h*D + i -> h*D + 2i, row h*D + D/2 + i -> h*D + 2i + 1 (i < D/2).

    Hugging Face rotates channel i of a head with channel i + D/2, lesson 03 rotates channel 2i with 2i + 1, at the
    same angle; after this permutation of the rows the two rotations give the same scores. A new tensor."""
    _checks.tensor("weight", weight, "R, C")
    _checks.positive_int("n_heads", n_heads)
    rows, C = weight.shape
    _checks.divisible("weight.shape[0]", rows, "n_heads", n_heads)
    D = rows // n_heads
    _checks.positive_even("D", D, "RoPE rotates channel pairs")
    halves = weight.reshape(n_heads, 2, D // 2, C)  # [head, which half, i]
    return halves.transpose(1, 2).reshape(rows, C)  # [head, i, which half]: the halves' i-th rows side by side


def _get(config: Any, key: str, default: Any = None) -> Any:
    return config.get(key, default) if isinstance(config, dict) else getattr(config, key, default)


def config_from_llama(hf_config: Any, context_length: int | None = None) -> ModernConfig:
    """Our ModernConfig for a Hugging Face LlamaConfig (an object, or config.json read as a dict): every switch
    modern, with the checkpoint's sizes, `rms_norm_eps`, RoPE base (`rope_theta`), `intermediate_size` and
    `tie_word_embeddings`. `context_length` (default: `max_position_embeddings`) may be smaller, to save memory.

    ValueError for what the course's ModernGPT does not implement: scaled RoPE (`rope_scaling`, Llama 3.1's
    "llama3" type among them), biases (`attention_bias`, `mlp_bias`), an activation other than SiLU, a head size
    other than hidden_size / num_attention_heads."""
    rope = _get(hf_config, "rope_parameters") or {}  # transformers 5 keeps the base and the scaling here
    scaling = _get(hf_config, "rope_scaling") or {}  # transformers 4
    kind = rope.get("rope_type", scaling.get("rope_type", scaling.get("type", "default")))
    if kind not in (None, "default"):
        raise ValueError(f"hf_config scales RoPE ({kind!r}); the course's ModernAttention rotates without scaling")
    for key, wanted in (("attention_bias", False), ("mlp_bias", False), ("hidden_act", "silu")):
        value = _get(hf_config, key, wanted)
        if value != wanted:
            raise ValueError(f"hf_config.{key} is {value!r}; the course's ModernBlock needs {wanted!r}")
    C, H = _get(hf_config, "hidden_size"), _get(hf_config, "num_attention_heads")
    head_dim = _get(hf_config, "head_dim")
    if head_dim not in (None, C // H):
        raise ValueError(
            f"hf_config.head_dim is {head_dim}; the course's attention uses hidden_size // heads = {C // H}"
        )
    return ModernConfig(
        vocab_size=_get(hf_config, "vocab_size"),
        context_length=context_length or _get(hf_config, "max_position_embeddings"),
        d_model=C,
        n_heads=H,
        n_layers=_get(hf_config, "num_hidden_layers"),
        n_kv_heads=_get(hf_config, "num_key_value_heads") or H,
        norm="rms",
        position="rope",
        mlp="swiglu",
        bias=False,
        tie_weights=bool(_get(hf_config, "tie_word_embeddings", True)),
        rope_base=float(rope.get("rope_theta", _get(hf_config, "rope_theta", 10000.0))),
        mlp_hidden=_get(hf_config, "intermediate_size"),
        norm_eps=float(_get(hf_config, "rms_norm_eps", 1e-6)),
    )


def llama_config_from(config: ModernConfig) -> Any:
    """A `transformers.LlamaConfig` with our sizes (every switch of `config` must be modern, without QK-norm)."""
    _checks.instance("config", config, ModernConfig, "a ModernConfig")
    if not config.is_modern or config.qk_norm:
        raise ValueError("config must have every switch modern and no QK-norm: Llama has none")
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=config.vocab_size,
        hidden_size=config.d_model,
        intermediate_size=config.d_hidden,
        num_hidden_layers=config.n_layers,
        num_attention_heads=config.n_heads,
        num_key_value_heads=config.kv_heads,
        max_position_embeddings=config.context_length,
        rms_norm_eps=config.eps,
        rope_theta=config.rope_base,
        tie_word_embeddings=config.tie_weights,
        attention_bias=False,
        mlp_bias=False,
    )


def _target(model: nn.Module, blocks: nn.ModuleList, ours: str) -> tuple[Tensor, int]:
    """The model's tensor that `ours` names, and how many heads its rows hold (0: not a projection of heads). For
    "blocks.i.attn.qkv.weight[q]" ([k], [v]) the rows of qkv's weight that hold the queries (keys, values): a view,
    so that copying into it loads the parameter."""
    name, _, part = ours.partition("[")
    try:
        tensor = model.get_parameter(name)
    except AttributeError:
        raise ValueError(f"model has no {name}: load_llama_weights needs ModernGPT's module names") from None
    if not part:
        return tensor, 0
    attn = blocks[int(ours.split(".")[1])].attn
    H, H_kv = attn.n_heads, attn.n_kv_heads
    D = tensor.shape[0] // (H + 2 * H_kv)
    start, heads = {"q]": (0, H), "k]": (H * D, H_kv), "v]": ((H + H_kv) * D, H_kv)}[part]
    return tensor[start : start + heads * D], heads  # (heads * D, C), sharing the parameter's storage


@torch.no_grad()
def load_llama_weights(model: nn.Module, state_dict: dict[str, Tensor]) -> nn.Module:
    """Copy a Hugging Face LlamaForCausalLM state dict into `model`, in place, and return `model`.

    Lesson 12, exercise `load_llama_weights`. `model` has ModernGPT's names — `tok_emb`, `blocks` (ModernBlocks:
    ln1, attn.qkv, attn.out_proj, ln2, mlp.w1, mlp.w3, mlp.w2; `attn.n_heads` and `attn.n_kv_heads`), `ln_f`,
    `lm_head` — and was built from the checkpoint's configuration (`config_from_llama`). The rules:
    - names follow `weight_names` ("model." may be missing, as in a LlamaModel's state dict);
    - q_proj, k_proj and v_proj are stacked in that order into `attn.qkv.weight`, the rows of q_proj and k_proj
      permuted head by head from "rotate half" to interleaved pairs (`rotate_half_to_pairs`); nothing else moves;
    - `rotary_emb.inv_freq` buffers (older checkpoints keep them) are skipped: the angles are computed;
    - `lm_head.weight`, when the model's head is its own matrix, is copied; when the head is tied to `tok_emb`, it
      must equal `embed_tokens.weight` (ValueError otherwise) or be absent;
    - a missing key: KeyError naming it; a key that is no Llama weight (biases, QK-norm gains): ValueError;
    - ValueError naming the first key whose shape does not fit, before anything is written.
    Afterwards the model's logits equal LlamaForCausalLM's (float32, within 1e-4), with and without a KV cache.
    """
    _checks.instance("model", model, nn.Module, "a ModernGPT (tok_emb, blocks, ln_f, lm_head)")
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict of tensors, got {type(state_dict).__name__}")
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList):
        raise ValueError("model has no ModuleList `blocks`: load_llama_weights needs ModernGPT's module names")
    keys = {k if k.startswith(("model.", "lm_head.")) else f"model.{k}": k for k in state_dict}  # full name -> given
    tied = model.lm_head.weight is model.tok_emb.weight
    names = weight_names(len(blocks), tied)
    expected = {theirs for _, theirs, _ in names}
    unexpected = sorted(k for k in keys if k not in expected and k != "lm_head.weight" and "rotary_emb" not in k)
    if unexpected:
        raise ValueError(f"state_dict holds weights a Llama block does not have: {unexpected[:5]}")
    missing = next((theirs for _, theirs, _ in names if theirs not in keys), None)
    if missing is not None:
        raise KeyError(f"state_dict has no {missing}")
    pairs = []  # (source, target): every shape is checked before anything is written
    for ours, theirs, how in names:
        key, source = keys[theirs], state_dict[keys[theirs]]
        target, heads = _target(model, blocks, ours)
        if source.shape != target.shape:
            raise ValueError(f"{key} has shape {tuple(source.shape)} but must be {tuple(target.shape)} (for {ours})")
        if how == "pairs":  # a query or key projection: its rows from rotate-half to interleaved pairs
            source = rotate_half_to_pairs(source, heads)
        pairs.append((source, target))
    head = keys.get("lm_head.weight")
    if head is not None and tied and not torch.equal(state_dict[head], state_dict[keys["model.embed_tokens.weight"]]):
        raise ValueError(f"{head} differs from the token table; the model's head is tied to it (tie_word_embeddings)")
    for source, target in pairs:
        target.copy_(source)
    return model


def pretrained_if_available(name: str = SMALL_LLAMA, timeout: float = 3.0) -> tuple[Any | None, str]:
    """Hugging Face's LlamaForCausalLM `name` (eval mode, float32) and how it was had, or (None, why not), without
    hanging: the local Hugging Face cache first; then a download, but only when huggingface.co accepts a connection
    within `timeout` seconds and HF_HUB_OFFLINE is not set. Lesson 12 (which runs offline too)."""
    _checks.string("name", name)
    _checks.positive_number("timeout", timeout)
    from transformers import LlamaForCausalLM

    return from_hub(LlamaForCausalLM, name, timeout, dtype=torch.float32)
