"""Grader of lesson 07's `EncoderDecoderTransformer` exercise, re-exported by `course_lib.grading.encoder_decoder`.

The learner's model is assembled from the layer classes it is given (by default the `EncoderLayer`, `DecoderLayer`
and `PositionEncoding` the lesson binds: in the learner's kernel theirs where they passed their checks, when graded
the course's). The contract fixes every module name, so the state dicts of the answer and of the reference
`course_lib.encoder_decoder.EncoderDecoderTransformer` have the same keys: random values are loaded into both, and
each method is compared on seeded batches whose sources end in padding (the padding id is not always 0):
`source_mask`; `encode`, the memory, with the padding mask found from the source and with one it is given; `decode`
on a memory of its own, its logits and, with `need_weights`, the cross-attention weights of every layer; and
`forward`. On a mismatch the known mistakes are recomputed with the same weights and named
(`course_lib.grading.encoder_decoder_mistakes`): the embedding not scaled by √d_model, or scaled after the positions
were added; no positions; the padding mask not passed to the encoder, or to cross-attention, or passed as the
decoder's own padding mask; the layers' outputs dropped; the encoder skipped or fed the target in `forward` (the
memory taken from the wrong place); the logits softmaxed. A wrong module name, a final LayerNorm, a head with a
bias or the layers' widths are named from the state dict's keys and shapes.

Besides: the configuration is kept (`greedy_decode` and the training loop read `config.pad_id` and
`config.context_length`); the embedding table starts small (std d_model**-0.5); the head is tied exactly when the
configuration says so (checked by behaviour, as lesson 09's GPT); the layer classes given are the ones built; a
source longer than context_length raises ValueError; and with dropout, `encode` and `decode` in training mode draw
exactly the reference's masks.

Shape legend: B batch, S source positions, T target positions, L layers, H heads, C d_model, V vocab_size.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from course_lib import encoder_decoder as ref
from course_lib.blocks import DecoderLayer, EncoderLayer
from course_lib.grading import encoder_decoder_mistakes as mistakes
from course_lib.grading.attention_common import (
    build_module,
    call_without_grad,
    keeps_rng,
    same_values,
)
from course_lib.grading.kit import core
from course_lib.grading.kit.core import Graded, GradingError, Passed, describe, tagged_cases
from course_lib.grading.kit.diagnose import Variant, find_mistake
from course_lib.grading.kit.guard import check_definition

__all__ = ["check_EncoderDecoderTransformer", "given_layers", "layer_class_names", "seq2seq_config"]

# (vocab_size, d_model, n_heads, n_layers, d_hidden, context_length, pad_id, tie_embeddings, B, S, T, seed).
# S != T in most cases (a mask or a memory in the wrong place then fails loudly), S == T in one (the source mask
# given as the decoder's own padding mask then runs, and is named); pad_id is not always 0; one model is untied.
CASES: list = [
    (13, 16, 2, 2, 24, 12, 0, True, 3, 7, 5, 0),
    (9, 12, 3, 1, 20, 8, 4, True, 3, 6, 6, 1),
    (11, 8, 4, 3, 16, 10, 2, False, 4, 5, 8, 2),
]
_DROPOUT = 0.5

_NAMES = (
    "The contract's modules are self.config = config, self.tok_emb = nn.Embedding(vocab_size, d_model), self.pos = "
    "PositionEncoding(d_model, context_length), self.dropout = nn.Dropout(dropout), self.encoder = nn.ModuleList of "
    "n_layers encoder_layer(d_model, n_heads, d_hidden, dropout), self.decoder = nn.ModuleList of n_layers "
    "decoder_layer(d_model, n_heads, d_hidden, dropout) and self.lm_head = nn.Linear(d_model, vocab_size, bias=False)."
)
_KEY_HINTS = {
    "lm_head.bias": "lm_head has a bias: the contract's head is nn.Linear(d_model, vocab_size, bias=False).",
    "lm_head.weight": "there is no lm_head.weight: the output layer is self.lm_head = nn.Linear(d_model, vocab_size, "
    "bias=False).",
    "tok_emb.weight": "there is no tok_emb.weight: one table, self.tok_emb = nn.Embedding(vocab_size, d_model), "
    "embeds the source and the target alike (they share a vocabulary).",
}
_STACK_HINT = (
    "the layers live directly in two nn.ModuleLists, self.encoder = nn.ModuleList([encoder_layer(...) for _ in "
    "range(n_layers)]) and self.decoder likewise (keys encoder.0...., decoder.0....): write the loops over them "
    "yourself, in encode and decode."
)
_FINAL_NORM_HINT = (
    "there is a LayerNorm after the stacks ({keys}); the 2017 layers are post-LN, each ends with its own LayerNorm, "
    "so the model has none of its own."
)
_CALL_HINTS = [
    (
        lambda message: "must match the size of tensor" in message or "size of tensor a" in message,
        "is the source's padding mask given to the decoder layers as their padding_mask, the third argument (the "
        "target's own padding)? It is their memory_padding_mask, the fourth: layer(x, memory, None, src_mask).",
    ),
    (
        lambda message: "memory_mask" in message and "does not broadcast" in message,
        "cross-attention got a mask that does not fit its memory: the memory is the encoded source and the mask "
        "the source's, decode(tgt, self.encode(src, src_mask), src_mask).",
    ),
]


# ------------------------------------------------------------------------------------------------------------
# Built where the answer lives (course_lib.grading.kit.core.make)


def seq2seq_config(fields: dict[str, Any]) -> ref.Seq2SeqConfig:
    """The configuration a case describes, built where the answer lives (a config is not plain data)."""
    return ref.Seq2SeqConfig(**fields)


class MarkedEncoderLayer(EncoderLayer):
    """The course's encoder layer under another name: a model built from it shows that it used the class given."""


class MarkedDecoderLayer(DecoderLayer):
    """The course's decoder layer under another name (see MarkedEncoderLayer)."""


def given_layers() -> tuple[type[nn.Module], type[nn.Module]]:
    """The two layer classes a check passes as `encoder_layer` and `decoder_layer`."""
    return MarkedEncoderLayer, MarkedDecoderLayer


def layer_class_names(model: Any) -> dict[str, list[str]] | None:
    """{"encoder": [class name of each layer], "decoder": [...]} of a model (asked where it lives); None when its
    `encoder` or `decoder` is not a sequence of layers."""
    try:
        return {part: [type(layer).__name__ for layer in getattr(model, part)] for part in ("encoder", "decoder")}
    except Exception:  # noqa: BLE001 - a learner's model may hold anything there
        return None


# ------------------------------------------------------------------------------------------------------------
# The check


def _fields(case: tuple, dropout: float = 0.0) -> dict[str, Any]:
    V, C, H, N, F, L, pad, tie, *_ = case
    return dict(
        vocab_size=V, d_model=C, n_heads=H, n_layers=N, d_hidden=F, dropout=dropout, context_length=L,
        tie_embeddings=tie, pad_id=pad,
    )  # fmt: skip


@keeps_rng
def check_EncoderDecoderTransformer(answer: Any, cases: list | None = None) -> Passed:
    """Check `EncoderDecoderTransformer(config, encoder_layer=EncoderLayer, decoder_layer=DecoderLayer)`: its
    modules, initial embeddings and tie, then `source_mask`, `encode`, `decode` (with and without need_weights) and
    `forward` against the reference with the same weights, and the ValueError past context_length; every run also
    checks that the layer classes given are the ones built, and dropout. A case is `(vocab_size, d_model, n_heads,
    n_layers, d_hidden, context_length, pad_id, tie_embeddings, B, S, T, seed)`."""
    name = Graded(ref.EncoderDecoderTransformer)
    check_definition(answer, name)
    run = tagged_cases(cases, CASES)
    for tag, case in run:
        _one_case(name, answer, tag, case)
    _uses_the_layers_given(name, answer)
    _draws_the_references_dropout(name, answer)
    return Passed(name, len(run) + 2, hidden=cases is not None)


def _random_state(reference: nn.Module, seed: int) -> dict[str, Tensor]:
    """Random values for every parameter (LayerNorm's 1s and 0s would hide a missing norm); the tied pair shares
    one; the position table stays what it is."""
    g = core.generator(seed)
    state = {
        key: value if key == "pos.pe" else value + 0.3 * torch.randn(value.shape, generator=g)
        for key, value in reference.state_dict().items()
    }
    if reference.config.tie_embeddings:
        state["lm_head.weight"] = state["tok_emb.weight"]
    reference.load_state_dict(state)
    return state


def _batch(case: tuple) -> tuple[Tensor, Tensor]:
    """src (B, S): tokens that are not padding, the rows after the first ending in 1, 2, ... <pad>; tgt (B, T)."""
    V, _, _, _, _, _, pad, _, B, S, T, seed = case
    g = core.generator(seed + 100)
    ordinary = torch.tensor([v for v in range(V) if v != pad])
    src = ordinary[torch.randint(len(ordinary), (B, S), generator=g)]  # (B, S)
    for b in range(1, B):
        src[b, S - min(b, S - 1) :] = pad  # every row keeps at least one real token
    tgt = ordinary[torch.randint(len(ordinary), (B, T), generator=g)]  # (B, T)
    return src, tgt


def _one_case(name: Graded, answer: Any, tag: str | None, case: tuple) -> None:
    """One case: build the answer's model from the case's configuration and compare it with the reference."""
    V, C, H, N, F, L, pad, tie, B, S, T, seed = case
    fields = _fields(case)
    what = core.call_label(name, "Seq2SeqConfig(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")", tag)
    config = core.make(answer, seq2seq_config, fields)
    module = build_module(name, answer, config, what=what, seed=seed)
    reference = ref.EncoderDecoderTransformer(ref.Seq2SeqConfig(**fields)).eval()
    _expect_config(name, module, what, pad, L)
    _expect_modules(name, module, reference, what)
    _expect_small_embeddings(name, module, what, C)
    state = _random_state(reference, seed)
    call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
    _expect_tie(name, module, reference, what, seed)
    call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
    src, tgt = _batch(case)
    shown = f"src of shape {(B, S)}" if tag is None else "src"
    _expect_source_mask(name, module, src, pad, what)
    _expect_encode(name, module, reference, src, what, shown)
    memory = core.random_tensor(B, S, C, seed=seed + 300)  # decode is checked on a memory of its own
    _expect_decode(name, module, reference, tgt, memory, src != pad, what)
    _expect_forward(name, module, reference, src, tgt, what)
    _expect_too_long(name, module, V, L, pad, what, hidden=tag is not None)


def _expect_config(name: Graded, module: Any, what: str, pad_id: int, context_length: int) -> None:
    try:
        kept = (module.config.pad_id, module.config.context_length)
    except AttributeError:
        kept = None
    if kept != (pad_id, context_length):
        raise GradingError(
            name,
            f"{what}: the model does not keep its configuration as self.config (its config.pad_id and "
            "config.context_length are what greedy decoding and the training loop read): self.config = config.",
        )


def _expect_modules(name: Graded, module: Any, reference: nn.Module, what: str) -> None:
    """The state dict's keys and shapes are the reference's (the position table may be a non-persistent buffer,
    and a layer of the learner's may keep a buffer of its own)."""
    state = module.state_dict()
    shapes = {key: tuple(value.shape) for key, value in reference.state_dict().items()}
    missing = sorted(set(shapes) - set(state) - {"pos.pe"})
    extra = sorted(k for k in set(state) - set(shapes) if not k.startswith(("encoder.", "decoder.", "pos.")))
    if any(k.startswith(("encoder.layers.", "decoder.layers.")) for k in state):
        raise GradingError(name, f"{what}: {_STACK_HINT}")
    for key in missing + extra:
        if key in _KEY_HINTS:
            raise GradingError(name, f"{what}: {_KEY_HINTS[key]}")
    norms = [k for k in extra if k.endswith(".weight") and len(state[k].shape) == 1]
    if norms:
        raise GradingError(name, f"{what}: {_FINAL_NORM_HINT.format(keys=', '.join(norms))}")
    if missing or extra:
        detail = "; ".join(p for p in (f"missing {missing}" if missing else "", f"extra {extra}" if extra else "") if p)
        raise GradingError(name, f"{what}: wrong parameter names ({detail}). {_NAMES}")
    for key, shape in shapes.items():
        if key in state and tuple(state[key].shape) != shape:
            hint = ""
            if key.endswith("mlp.fc1.weight") and state[key].shape[0] == 4 * shape[1]:
                hint = " The layers' feed-forward width is config.d_hidden: encoder_layer(d_model, n_heads, d_hidden, "
                hint += "dropout)."
            raise GradingError(
                name, f"{what}: {key} has shape {tuple(state[key].shape)}, expected {shape}.{hint or ' ' + _NAMES}"
            )
    try:
        getattr(module, "pos")  # noqa: B009 - asked of the answer only to say what is missing
    except AttributeError:
        raise GradingError(
            name, f"{what}: there is no self.pos: the positions come from PositionEncoding(d_model, context_length)."
        ) from None
    names = core.make(module, layer_class_names, module)
    if names is None or len(names["encoder"]) != len(names["decoder"]):
        raise GradingError(name, f"{what}: self.encoder and self.decoder should be nn.ModuleLists. {_NAMES}")


def _expect_small_embeddings(name: Graded, module: Any, what: str, C: int) -> None:
    """The table starts with std d_model**-0.5 (nn.Embedding's own start is std 1)."""
    std = float(module.tok_emb.weight.detach().double().std())
    target = C**-0.5
    if not 0.5 * target < std < 2 * target:
        start = "nn.Embedding's default, std 1" if 0.5 < std < 2 else f"std {std:.3f}"
        raise GradingError(
            name,
            f"{what}: tok_emb.weight starts with {start}; the contract's is std d_model**-0.5 = {target:.3f}, "
            "nn.init.normal_(self.tok_emb.weight, std=d_model**-0.5), so that sqrt(d_model) x embedding has "
            "unit-sized entries and the tied output layer's first logits are small.",
        )


def _expect_tie(name: Graded, module: Any, reference: nn.Module, what: str, seed: int) -> None:
    """Tied exactly when config.tie_embeddings: then lm_head.weight *is* tok_emb.weight (one tensor, one
    Parameter); otherwise it is a matrix of its own."""
    probe = core.random_tensor(*reference.tok_emb.weight.shape, seed=seed + 200)
    call_without_grad(name, module.load_state_dict, {"tok_emb.weight": probe}, strict=False, what=f"{what}.load")
    follows = torch.equal(module.lm_head.weight, probe)
    tied = reference.config.tie_embeddings
    if tied and not follows:
        raise GradingError(
            name,
            f"{what}: lm_head.weight is a matrix of its own: new values loaded into tok_emb.weight did not reach it. "
            "With config.tie_embeddings, tie them after creating both: self.lm_head.weight = self.tok_emb.weight.",
        )
    if not tied and follows:
        raise GradingError(
            name,
            f"{what}: config.tie_embeddings is False, yet lm_head.weight follows tok_emb.weight: tie them only "
            "when the configuration says so (if config.tie_embeddings: ...).",
        )
    if tied:
        params = list(call_without_grad(name, module.parameters, what=f"{what}.parameters()"))
        count, expected = sum(p.numel() for p in params), sum(p.numel() for p in reference.parameters())
        if count == expected + reference.tok_emb.weight.numel():
            raise GradingError(
                name,
                f"{what}: lm_head.weight shares its values with tok_emb.weight but is another Parameter, so the "
                f"model counts the matrix twice ({count:,} parameters instead of {expected:,}). Assign the Parameter "
                "itself: self.lm_head.weight = self.tok_emb.weight (not .data, not nn.Parameter(...)).",
            )


def _expect_source_mask(name: Graded, module: Any, src: Tensor, pad_id: int, what: str) -> None:
    call = f"{what}.source_mask(src)"
    got = call_without_grad(name, module.source_mask, src.clone(), what=call)
    expected = src != pad_id
    if isinstance(got, Tensor) and got.shape == expected.shape and got.dtype == torch.bool:
        if torch.equal(got, expected):
            return
        if torch.equal(got, ~expected):
            raise GradingError(name, f"{call} is True at padding; True marks the real tokens: src != config.pad_id.")
        if pad_id != 0 and torch.equal(got, src != 0):
            raise GradingError(name, f"{call} took padding to be id 0; here it is {pad_id}: src != config.pad_id.")
    raise GradingError(
        name, f"{call} should be the ({src.shape[0]}, {src.shape[1]}) bool mask src != config.pad_id, got "
        f"{describe(got)}."
    )  # fmt: skip


def _expect_tensor(name: Graded, got: Any, shape: tuple[int, ...], call: str, what: str) -> Tensor:
    if not isinstance(got, Tensor):
        raise GradingError(name, f"{call} should return {what} of shape {shape}, got {describe(got)}.")
    if tuple(got.shape) != shape:
        raise GradingError(name, f"{call} returned a tensor of shape {tuple(got.shape)}; {what} has shape {shape}.")
    return got


def _differs(name: Graded, call: str, got: Tensor, expected: Tensor, variants: list[Variant], what: str) -> None:
    """Fail naming the known mistake `got` equals, else saying where it differs (nothing when it is right)."""
    if same_values(got, expected):
        return
    with torch.no_grad():
        mistake = find_mistake(variants, lambda value: same_values(got, value), lambda v: same_values(v, expected))
    if mistake is not None:
        raise GradingError(name, f"{call}: {mistake}")
    core.expect_close(name, got, expected, f"{call}: {what}", atol=1e-4, rtol=1e-3)


def _expect_encode(name: Graded, module: Any, reference: Any, src: Tensor, what: str, shown: str) -> None:
    B, S = src.shape
    C = reference.config.d_model
    call = f"{what}.encode({shown})"
    with torch.no_grad():
        expected = reference.encode(src)
    got = call_without_grad(name, module.encode, src.clone(), what=call)
    got = _expect_tensor(name, got, (B, S, C), call, "the memory")
    _differs(name, call, got, expected, mistakes.encode_variants(reference, src, reference.config.pad_id), "the memory")
    # A mask it is given is the one it uses (greedy decoding passes the one it computed once).
    given = reference.source_mask(src)
    given[:, 0] = False  # hides a real token as well; every row keeps one (S >= 2, or the row's only real token)
    given[given.sum(-1) == 0, 0] = True
    call = f"{what}.encode(src, src_mask)"
    with torch.no_grad():
        expected = reference.encode(src, given)
    got = call_without_grad(name, module.encode, src.clone(), given.clone(), what=call)
    got = _expect_tensor(name, got, (B, S, C), call, "the memory")
    variants = [
        (
            lambda: reference.encode(src),
            "the src_mask it was given was ignored (recomputed from src): use it when it is not None, "
            "src_mask = self.source_mask(src) if src_mask is None else src_mask.",
        )
    ]
    _differs(name, call, got, expected, variants, "the memory")


def _expect_decode(
    name: Graded, module: Any, reference: Any, tgt: Tensor, memory: Tensor, src_mask: Tensor, what: str
) -> None:
    (B, T), S = tgt.shape, memory.shape[1]
    V, N, H = reference.config.vocab_size, reference.config.n_layers, reference.config.n_heads
    call = f"{what}.decode(tgt, memory, src_mask)"
    with torch.no_grad():
        expected, weights = reference.decode(tgt, memory, src_mask, need_weights=True)
    got = call_without_grad(name, module.decode, tgt.clone(), memory.clone(), src_mask.clone(), what=call,
                            hints=_CALL_HINTS)  # fmt: skip
    if isinstance(got, tuple | list):
        raise GradingError(name, f"{call} returned a {type(got).__name__}; without need_weights it returns the logits.")
    got = _expect_tensor(name, got, (B, T, V), call, "the logits")
    _differs(name, call, got, expected, mistakes.decode_variants(reference, tgt, memory, src_mask), "the logits")
    call = f"{what}.decode(tgt, memory, src_mask, need_weights=True)"
    pair = call_without_grad(name, module.decode, tgt.clone(), memory.clone(), src_mask.clone(), need_weights=True,
                             what=call)  # fmt: skip
    if not (isinstance(pair, tuple | list) and len(pair) == 2):
        raise GradingError(
            name, f"{call} should return a pair (logits, cross-attention weights), got {describe(pair)}."
        )
    logits, got_weights = pair
    if not same_values(logits, expected):
        raise GradingError(name, f"{call}: the logits differ from those without need_weights; they should not.")
    if isinstance(got_weights, list | tuple):
        raise GradingError(
            name, f"{call}: the weights came back as a {type(got_weights).__name__} of {len(got_weights)}; stack "
            "them into one tensor (L, B, H, T, S): torch.stack(cross)."
        )  # fmt: skip
    shape = (N, B, H, T, S)
    if isinstance(got_weights, Tensor) and tuple(got_weights.shape) == (N, B, H, T, T) and S != T:
        raise GradingError(
            name, f"{call}: the weights have shape {(N, B, H, T, T)}, target by target: those are the decoder's "
            "self-attention weights. Return the cross-attention weights, the third value a decoder layer returns "
            "with need_weights=True: (out, self_weights, cross_weights)."
        )  # fmt: skip
    if isinstance(got_weights, Tensor) and tuple(got_weights.shape) == (B, H, T, S) and N > 1:
        raise GradingError(
            name, f"{call}: the weights have shape {(B, H, T, S)}, one layer's; return every layer's, stacked: "
            f"{shape} = (layers, B, heads, T, S)."
        )  # fmt: skip
    got_weights = _expect_tensor(name, got_weights, shape, call, "the cross-attention weights (L, B, H, T, S)")
    core.expect_close(name, got_weights, weights, f"{call}: the cross-attention weights", atol=1e-4, rtol=1e-3)


def _expect_forward(name: Graded, module: Any, reference: Any, src: Tensor, tgt: Tensor, what: str) -> None:
    (B, S), T, V = src.shape, tgt.shape[1], reference.config.vocab_size
    call = f"{what}(src, tgt)"
    with torch.no_grad():
        expected = reference(src, tgt)
    got = call_without_grad(name, module, src.clone(), tgt.clone(), what=call, hints=_CALL_HINTS)
    if isinstance(got, Tensor) and tuple(got.shape) == (B, S, V) and S != T:
        raise GradingError(
            name, f"{call}: the logits have one row per source position; they are the decoder's, one per target "
            "position: self.decode(tgt, self.encode(src, src_mask), src_mask)."
        )  # fmt: skip
    got = _expect_tensor(name, got, (B, T, V), call, "the logits")
    _differs(name, call, got, expected, mistakes.forward_variants(reference, src, tgt), "the logits")


def _expect_too_long(name: Graded, module: Any, V: int, L: int, pad: int, what: str, hidden: bool) -> None:
    longer = "S > context_length" if hidden else f"S = {L + 1} > context_length = {L}"
    call = f"{what}.encode(src) with {longer}"
    src = torch.full((1, L + 1), (pad + 1) % V)
    raised = call_without_grad(name, core.catching(module.encode), src, what=call)
    if raised is None or not issubclass(type(raised), ValueError):
        got = "returned without an error" if raised is None else f"raised {type(raised).__name__}: {raised}"
        raise GradingError(
            name,
            f"{call} {got}. A sequence longer than context_length must raise ValueError: the position table has no "
            "row for it (PositionEncoding(d_model, context_length) raises it for you).",
        )


def _uses_the_layers_given(name: Graded, answer: Any) -> None:
    """The model is built from the layer classes given, not from ones it names itself."""
    case = CASES[0]
    fields = _fields(case)
    what = f"{name}(config, encoder_layer=..., decoder_layer=...)"
    config = core.make(answer, seq2seq_config, fields)
    encoder_layer, decoder_layer = core.make(answer, given_layers)
    module = build_module(name, answer, config, encoder_layer=encoder_layer, decoder_layer=decoder_layer, what=what)
    names = core.make(module, layer_class_names, module)
    for part, cls in (("encoder", MarkedEncoderLayer), ("decoder", MarkedDecoderLayer)):
        if names is None or any(n != cls.__name__ for n in names[part]):
            built = "?" if names is None else ", ".join(names[part])
            raise GradingError(
                name,
                f"{what}: {part} holds {built}, not the {part}_layer class it was given. Build the layers from the "
                f"arguments, {part}_layer(d_model, n_heads, d_hidden, dropout): lesson 07 passes a decoder layer of "
                "its own this way.",
            )


def _draws_the_references_dropout(name: Graded, answer: Any) -> None:
    """With dropout, encode and decode in training mode draw the reference's masks: after the embeddings, then in
    each layer."""
    case, seed = (9, 8, 2, 2, 16, 8, 0, True, 2, 6, 5, 5), 5
    fields = _fields(case, dropout=_DROPOUT)
    what = f"{name}(config with dropout={_DROPOUT})"
    config = core.make(answer, seq2seq_config, fields)
    module = build_module(name, answer, config, what=what, seed=seed)
    reference = ref.EncoderDecoderTransformer(ref.Seq2SeqConfig(**fields)).eval()
    state = _random_state(reference, seed)
    call_without_grad(name, module.load_state_dict, state, strict=False, what=f"{what}.load_state_dict(...)")
    src, tgt = _batch(case)
    memory = core.random_tensor(src.shape[0], src.shape[1], reference.config.d_model, seed=seed)
    _same_dropout(name, module, reference, "encode", (src,), f"{what}.encode(src) in training mode", seed)
    keep = reference.source_mask(src)
    args = (tgt, memory, keep)
    _same_dropout(
        name, module, reference, "decode", args, f"{what}.decode(tgt, memory, src_mask) in training mode", seed
    )


def _same_dropout(name: Graded, module: Any, reference: Any, method: str, args: tuple, call: str, seed: int) -> None:
    module.train(True)  # encode or decode of the model in training mode, with a fixed seed
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        got = call_without_grad(name, getattr(module, method), *(a.clone() for a in args), what=call)
    module.train(False)
    run = getattr(reference, method)
    expected = mistakes.in_training(lambda: run(*args), reference, seed)
    if same_values(got, expected):
        return
    with torch.no_grad():
        clean = run(*args)
    if same_values(got, clean):
        raise GradingError(
            name,
            f"{call}: nothing was dropped. Apply self.dropout to the embeddings and build the layers with the "
            "configuration's dropout, encoder_layer(d_model, n_heads, d_hidden, dropout).",
        )
    variants = mistakes.dropout_variants(reference, method, args, seed)
    mistake = find_mistake(variants, lambda v: same_values(got, v), lambda v: same_values(v, expected))
    raise GradingError(
        name,
        f"{call}: {mistake}"
        if mistake
        else f"{call}: the output differs from the reference's with the same seed. Dropout belongs after the "
        "embeddings (self.dropout, on their sum with the positions) and inside the layers (their dropout argument), "
        "nowhere else.",
    )
