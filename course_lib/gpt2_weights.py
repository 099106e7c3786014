"""OpenAI's GPT-2 weights in the course's GPT (lesson 09's, yours too) or GPT2, and back (Lesson 10).

    config_from_hf        our GPT2Config from a Hugging Face `transformers.GPT2Config` (refuses variants we lack)
    hf_config_from        the Hugging Face config for one of our models
    load_gpt2_weights     copy a Hugging Face GPT-2 state dict into a GPT of lesson 09's names, in place (Lesson 10,
                          exercise): the course's GPT, yours, or a GPT2
    to_hf_state_dict      our model's weights under Hugging Face's names and layouts
    from_hf_model         a Hugging Face GPT2LMHeadModel -> our GPT2 computing the same logits
    to_hf_model           our GPT2 -> a Hugging Face GPT2LMHeadModel computing the same logits
    from_pretrained       download ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl") and convert
    pretrained_if_available   Hugging Face's model from the local cache, or downloaded if the Hub answers quickly;
                          otherwise None and why (lesson 10 runs offline too)
    weight_names          the name table: ours, Hugging Face's (= nanoGPT's), and which are stored transposed

The one trap: Hugging Face keeps OpenAI's original TensorFlow layout, a `Conv1D` module whose weight is
(in_features, out_features) and computes x @ W + b; nn.Linear stores (out_features, in_features) and computes
x @ Wᵀ + b. So the four matrices of every block (c_attn, c_proj, c_fc, mlp.c_proj) are transposed on the way in
and on the way out; embeddings, LayerNorms and biases are copied as they are. The name table is in
`course_lib.gpt2`'s docstring. `transformers` is imported only by the functions that need a Hugging Face model.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.gpt2 import GPT2, GPT2Config

__all__ = [
    "config_from_hf",
    "hf_config_from",
    "load_gpt2_weights",
    "to_hf_state_dict",
    "from_hf_model",
    "to_hf_model",
    "from_pretrained",
    "pretrained_if_available",
    "weight_names",
    "PRETRAINED",
]

PRETRAINED = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")  # OpenAI's four sizes on the Hugging Face Hub

# (our name in block i, Hugging Face's name in block i, stored transposed by Conv1D)
_BLOCK_NAMES = (
    ("ln1.weight", "ln_1.weight", False),
    ("ln1.bias", "ln_1.bias", False),
    ("attn.qkv.weight", "attn.c_attn.weight", True),
    ("attn.qkv.bias", "attn.c_attn.bias", False),
    ("attn.out_proj.weight", "attn.c_proj.weight", True),
    ("attn.out_proj.bias", "attn.c_proj.bias", False),
    ("ln2.weight", "ln_2.weight", False),
    ("ln2.bias", "ln_2.bias", False),
    ("mlp.fc1.weight", "mlp.c_fc.weight", True),
    ("mlp.fc1.bias", "mlp.c_fc.bias", False),
    ("mlp.fc2.weight", "mlp.c_proj.weight", True),
    ("mlp.fc2.bias", "mlp.c_proj.bias", False),
)
# Buffers of older Hugging Face checkpoints (the causal mask, stored as a tensor): not weights, skipped.
_IGNORED = re.compile(r"^h\.\d+\.attn\.(bias|masked_bias)$")


def _name_map(n_layers: int) -> list[tuple[str, str, bool]]:
    """(ours, Hugging Face's without the 'transformer.' prefix, transposed) for every weight except the head."""
    names = [("tok_emb.weight", "wte.weight", False), ("pos_emb.weight", "wpe.weight", False)]
    for i in range(n_layers):
        names += [(f"blocks.{i}.{ours}", f"h.{i}.{theirs}", t) for ours, theirs, t in _BLOCK_NAMES]
    return names + [("ln_f.weight", "ln_f.weight", False), ("ln_f.bias", "ln_f.bias", False)]


def weight_names(n_layers: int) -> list[tuple[str, str, bool]]:
    """(our name, GPT2LMHeadModel's name, stored transposed there) for every weight of an n_layers GPT-2.

    Lesson 10's name table. nanoGPT uses Hugging Face's names too, with nn.Linear layers, so it transposes the
    same four matrices of every block when it loads OpenAI's weights. The tied head comes last.
    """
    _checks.positive_int("n_layers", n_layers)
    names = [(ours, f"transformer.{theirs}", t) for ours, theirs, t in _name_map(n_layers)]
    return names + [("lm_head.weight", "lm_head.weight", False)]


def config_from_hf(hf_config: Any, **overrides: object) -> GPT2Config:
    """Our GPT2Config for a Hugging Face GPT2Config, refusing options our model does not implement."""
    unsupported = {
        "activation_function": ("gelu_new", "gelu_pytorch_tanh"),  # both are GELU's tanh approximation
        "scale_attn_weights": (True,),
        "scale_attn_by_inverse_layer_idx": (False,),
        "reorder_and_upcast_attn": (False,),
        "layer_norm_epsilon": (1e-5,),  # nn.LayerNorm's default, which lesson 06's blocks use
        "tie_word_embeddings": (True,),
    }
    for field, allowed in unsupported.items():
        value = getattr(hf_config, field, allowed[0])
        if value not in allowed:
            raise ValueError(f"hf_config.{field} is {value!r}; the course's GPT2 supports only {allowed}")
    if getattr(hf_config, "n_inner", None) not in (None, 4 * hf_config.n_embd):
        raise ValueError(f"hf_config.n_inner is {hf_config.n_inner}; the course's GPT2 uses 4 * n_embd")
    sizes = dict(
        vocab_size=hf_config.vocab_size,
        context_length=hf_config.n_positions,
        n_layers=hf_config.n_layer,
        n_heads=hf_config.n_head,
        d_model=hf_config.n_embd,
    )
    return GPT2Config(**{**sizes, **overrides})


def hf_config_from(config: GPT2Config) -> Any:
    """A `transformers.GPT2Config` with our sizes and dropout (Hugging Face's three dropouts all set to it)."""
    _checks.instance("config", config, GPT2Config, "a GPT2Config")
    from transformers import GPT2Config as HFConfig

    p = config.dropout
    return HFConfig(
        vocab_size=config.vocab_size,
        n_positions=config.context_length,
        n_embd=config.d_model,
        n_layer=config.n_layers,
        n_head=config.n_heads,
        activation_function="gelu_new",
        resid_pdrop=p,
        embd_pdrop=p,
        attn_pdrop=p,
        layer_norm_epsilon=1e-5,
        bos_token_id=config.vocab_size - 1,  # GPT-2's <|endoftext|> is its last id
        eos_token_id=config.vocab_size - 1,
    )


@torch.no_grad()
def load_gpt2_weights(model: nn.Module, state_dict: dict[str, Tensor]) -> nn.Module:
    """Copy a Hugging Face GPT-2 state dict into `model`, in place, and return `model`.

    Lesson 10, exercise `load_gpt2_weights`. `model` is a GPT of lesson 09's contract (`course_lib.gpt.GPT`, your
    own, or a `course_lib.gpt2.GPT2`): tok_emb, pos_emb, blocks.i.{ln1, attn.qkv, attn.out_proj, ln2, mlp.fc1,
    mlp.fc2}, ln_f, and lm_head tied to tok_emb. `state_dict` is a `GPT2LMHeadModel`'s (or a `GPT2Model`'s, whose
    keys lack the "transformer." prefix). The rules:
    - names follow `weight_names`; the four Conv1D matrices of each block are stored (in, out) and are transposed;
    - the `attn.bias` / `attn.masked_bias` buffers of older checkpoints (the causal mask) are skipped;
    - `lm_head.weight` may be absent; present, it must equal `transformer.wte.weight`. It is never copied on its
      own: the head stays tied to the token table, which gets `wte`;
    - every weight must be there, and nothing else: ValueError listing what is missing and what is not a weight;
    - ValueError naming the first key whose shape does not fit, before anything is written;
    - a GPT2 with vocabulary padding gets `wte` in the first vocab_size rows of its token table.
    Afterwards `model(idx)[0]` equals the Hugging Face model's logits (up to float32 rounding).
    """
    _checks.instance("model", model, nn.Module, "a GPT (lesson 09's names: tok_emb, pos_emb, blocks, ln_f, lm_head)")
    if not isinstance(state_dict, dict):
        raise TypeError(f"state_dict must be a dict of tensors, got {type(state_dict).__name__}")
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, nn.ModuleList):
        raise ValueError("model has no ModuleList `blocks`: load_gpt2_weights needs lesson 09's GPT module names")
    keys = {k.removeprefix("transformer."): k for k in state_dict}  # Hugging Face's short name -> the key as given
    head_key = keys.pop("lm_head.weight", None)
    names = _name_map(len(blocks))
    expected = {hf for _, hf, _ in names}
    missing = sorted(expected - keys.keys())
    unexpected = sorted(k for k in keys.keys() - expected if not _IGNORED.match(k))
    if missing or unexpected:
        raise ValueError(
            f"state_dict does not fit a {len(blocks)}-layer GPT-2: missing {missing[:5]}"
            f"{' ...' if len(missing) > 5 else ''}, unexpected {unexpected[:5]}{' ...' if len(unexpected) > 5 else ''}"
        )
    ours = model.state_dict()  # tensors that share the parameters' storage: copying into them loads the model
    absent = [ours_name for ours_name, _, _ in names if ours_name not in ours]
    if absent:
        raise ValueError(f"model has no {absent[0]}: load_gpt2_weights needs lesson 09's GPT module names")
    rows = model.config.vocab_size if isinstance(model, GPT2) else None  # None: the whole table
    pairs = []  # (source, target): every shape is checked before anything is written
    for our_name, hf_name, transposed in names:
        key = keys[hf_name]
        source = state_dict[key].t() if transposed else state_dict[key]  # Conv1D (in, out) -> Linear (out, in)
        target = ours[our_name][:rows] if our_name == "tok_emb.weight" else ours[our_name]
        if source.shape != target.shape:
            wanted = tuple(target.shape)[::-1] if transposed else tuple(target.shape)
            why = f"Conv1D: the transpose of {our_name}'s {tuple(target.shape)}" if transposed else f"for {our_name}"
            raise ValueError(f"{key} has shape {tuple(state_dict[key].shape)} but must be {wanted} ({why})")
        pairs.append((source, target))
    if head_key is not None and not torch.equal(state_dict[head_key], state_dict[keys["wte.weight"]]):
        raise ValueError(f"{head_key} differs from {keys['wte.weight']}; the model's head is tied to its token table")
    for source, target in pairs:
        target.copy_(source)
    return model


@torch.no_grad()
def to_hf_state_dict(model: GPT2) -> dict[str, Tensor]:
    """Our weights under GPT2LMHeadModel's names, Conv1D matrices transposed back, padding rows dropped.
    New tensors (contiguous copies), so changing them leaves `model` alone."""
    _checks.instance("model", model, GPT2, "a course_lib.gpt2.GPT2")
    ours = model.state_dict()
    V = model.config.vocab_size
    out: dict[str, Tensor] = {}
    for our_name, hf_name, transposed in _name_map(model.config.n_layers):
        tensor = ours[our_name][:V] if our_name == "tok_emb.weight" else ours[our_name]
        out[f"transformer.{hf_name}"] = (tensor.t() if transposed else tensor).contiguous().clone()
    out["lm_head.weight"] = out["transformer.wte.weight"]  # tied, as in Hugging Face's model
    return out


def from_hf_model(hf_model: Any, **overrides: object) -> GPT2:
    """Our GPT2 with the weights of a Hugging Face GPT2LMHeadModel (overrides: e.g. use_sdpa=True, dropout)."""
    model = GPT2(config_from_hf(hf_model.config, **overrides))
    return load_gpt2_weights(model, hf_model.state_dict())


def to_hf_model(model: GPT2) -> Any:
    """A Hugging Face GPT2LMHeadModel (in eval mode) with our model's weights."""
    from transformers import GPT2LMHeadModel

    hf_model = GPT2LMHeadModel(hf_config_from(model.config))
    result = hf_model.load_state_dict(to_hf_state_dict(model), strict=False)
    # Only the non-persistent causal-mask buffers of some versions may be left out.
    missing = [k for k in result.missing_keys if not k.endswith((".attn.bias", ".attn.masked_bias"))]
    if missing or result.unexpected_keys:
        unexpected = result.unexpected_keys
        raise RuntimeError(f"export did not fit GPT2LMHeadModel: missing {missing}, unexpected {unexpected}")
    return hf_model.eval()


def from_pretrained(name: str = "gpt2", **overrides: object) -> GPT2:
    """OpenAI's GPT-2 `name` (one of PRETRAINED) from the Hugging Face Hub, as our GPT2 in eval mode.

    Needs `transformers` and the internet (or a filled Hugging Face cache); the download of "gpt2" is ~550 MB.
    """
    _checks.one_of("name", name, PRETRAINED)
    from transformers import GPT2LMHeadModel

    hf_model = GPT2LMHeadModel.from_pretrained(name)
    return from_hf_model(hf_model, **overrides).eval()


def pretrained_if_available(name: str = "gpt2", timeout: float = 3.0) -> tuple[Any | None, str]:
    """Hugging Face's GPT2LMHeadModel `name` (eval mode) and how it was had, or (None, why not), without hanging.

    Lesson 10. The local Hugging Face cache first (no network needed); then a download, but only when
    huggingface.co accepts a connection within `timeout` seconds and HF_HUB_OFFLINE is not set.
    """
    _checks.one_of("name", name, PRETRAINED)
    _checks.positive_number("timeout", timeout)
    from transformers import GPT2LMHeadModel

    return from_hub(GPT2LMHeadModel, name, timeout)


def from_hub(model_class: Any, name: str, timeout: float, **options: Any) -> tuple[Any | None, str]:
    """`model_class.from_pretrained(name, **options)` in eval mode and how it was had, or (None, why not), without
    hanging: the local Hugging Face cache first; then a download, but only when huggingface.co accepts a connection
    within `timeout` seconds and HF_HUB_OFFLINE is not set (lessons 10, 12 and 13 run offline too)."""
    try:
        return model_class.from_pretrained(name, local_files_only=True, **options).eval(), "from the Hugging Face cache"
    except OSError:
        pass  # not cached here
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() not in ("0", "", "false", "no", "off"):
        return None, f"{name} is not in the Hugging Face cache and HF_HUB_OFFLINE is set"
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
    except OSError as error:
        return None, f"{name} is not in the Hugging Face cache and huggingface.co cannot be reached ({error})"
    try:
        return model_class.from_pretrained(name, **options).eval(), "downloaded from the Hugging Face Hub"
    except OSError as error:  # e.g. a proxy that lets the connection through but not the download
        return None, f"the download of {name} failed ({error})"
