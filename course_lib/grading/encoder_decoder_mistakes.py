"""The known mistakes of lesson 07's `EncoderDecoderTransformer`: the reference with one part changed.

Each function here recomputes, with the reference's weights, what a model with one mistake returns on the same input,
for `course_lib.grading.encoder_decoder_model` to name the mistake an answer's output equals
(`course_lib.grading.kit.diagnose.find_mistake`): the embeddings unscaled, scaled after the positions, without
positions or with the dropout before them; the encoder without its padding mask (or padding taken to be id 0); the
decoder's cross-attention without the source's mask, or that mask given as the target's own; a stack whose layers'
outputs are dropped; the memory taken from the embedded source or from the target; the logits softmaxed; dropout
missing after the embeddings or in the layers.

Shape legend: B batch, S source positions, T target positions, C d_model, V vocab_size.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from course_lib import encoder_decoder as ref
from course_lib.grading.kit.diagnose import Variant

__all__ = ["decode_variants", "dropout_variants", "embed", "encode_variants", "forward_variants", "in_training"]


def embed(model: ref.EncoderDecoderTransformer, ids: Tensor, how: str = "right") -> Tensor:
    """The reference's embedding of ids (B, T) -> (B, T, C), `how`: "right", "unscaled", "no positions", "scaled
    after positions" or "dropout before positions"."""
    scale = math.sqrt(model.config.d_model)
    tokens = model.tok_emb(ids)  # (B, T, C)
    if how == "unscaled":
        return model.dropout(model.pos(tokens))
    if how == "no positions":
        return model.dropout(tokens * scale)
    if how == "scaled after positions":
        return model.dropout(model.pos(tokens) * scale)
    if how == "dropout before positions":
        return model.pos(model.dropout(tokens * scale))
    return model.embed(ids)


def _encode(model: ref.EncoderDecoderTransformer, src: Tensor, mask: Any = "padding", how: str = "right") -> Tensor:
    """The reference's memory with one part changed; `mask` "padding" (right), None, or a (B, S) mask."""
    x = embed(model, src, how)
    keep = model.source_mask(src) if isinstance(mask, str) else mask
    for layer in model.encoder:
        x = layer(x, keep)
    return x


def _decode(
    model: ref.EncoderDecoderTransformer,
    tgt: Tensor,
    memory: Tensor,
    src_mask: Tensor | None,
    *,
    how: str = "right",
    cross_mask: bool = True,
    as_own_padding: bool = False,
    chained: bool = True,
) -> Tensor:
    """The reference's logits with one part changed (the defaults are right)."""
    x = embed(model, tgt, how)
    start = x
    for layer in model.decoder:
        own = src_mask if as_own_padding else None
        out = layer(x if chained else start, memory, own, src_mask if cross_mask and not as_own_padding else None)
        x = out
    return model.lm_head(x)  # (B, T, V)


def encode_variants(model: ref.EncoderDecoderTransformer, src: Tensor, pad_id: int) -> list[Variant]:
    return [
        (
            lambda: _encode(model, src, how="unscaled"),
            "the token embeddings were not multiplied by sqrt(d_model) before the positions were added: "
            "self.pos(self.tok_emb(ids) * math.sqrt(d_model)).",
        ),
        (
            lambda: _encode(model, src, how="scaled after positions"),
            "the positions were scaled by sqrt(d_model) too: multiply the token embeddings first, then add the "
            "positions, self.pos(self.tok_emb(ids) * math.sqrt(d_model)).",
        ),
        (
            lambda: _encode(model, src, how="no positions"),
            "no positions were added: every position of the source looks alike to attention. Add them with "
            "self.pos (PositionEncoding(d_model, context_length)).",
        ),
        (
            lambda: _encode(model, src, mask=None),
            "the encoder layers got no padding mask, so real tokens attend to <pad>: pass the source's mask to "
            "each of them, x = layer(x, src_mask).",
        ),
        (
            lambda: _encode(model, src, mask=src != 0) if pad_id != 0 else None,
            f"padding was taken to be id 0; this model's pad_id is {pad_id}. The mask is src != config.pad_id.",
        ),
        (
            lambda: embed(model, src),
            "the memory is the embedded source: the encoder layers' outputs were dropped. Keep each one, "
            "x = layer(x, src_mask), and return the last.",
        ),
    ]


def decode_variants(
    model: ref.EncoderDecoderTransformer, tgt: Tensor, memory: Tensor, src_mask: Tensor
) -> list[Variant]:
    return [
        (
            lambda: _decode(model, tgt, memory, src_mask, how="unscaled"),
            "the target's token embeddings were not multiplied by sqrt(d_model): both sides are embedded the same "
            "way, self.pos(self.tok_emb(ids) * math.sqrt(d_model)), then dropout.",
        ),
        (
            lambda: _decode(model, tgt, memory, src_mask, how="scaled after positions"),
            "the target's positions were scaled by sqrt(d_model) too: multiply the token embeddings first, then "
            "add the positions.",
        ),
        (
            lambda: _decode(model, tgt, memory, src_mask, how="no positions"),
            "the target got no positions: the decoder cannot tell which output position it writes. Embed it as "
            "the source, with self.pos.",
        ),
        (
            lambda: _decode(model, tgt, memory, src_mask, cross_mask=False),
            "cross-attention reads the memory's padding: pass src_mask to each decoder layer as its "
            "memory_padding_mask, layer(x, memory, None, src_mask).",
        ),
        (
            lambda: _decode(model, tgt, memory, src_mask, as_own_padding=True),
            "src_mask went to the decoder layers' third argument, padding_mask (the target's own padding), and "
            "cross-attention got none. It is their memory_padding_mask, the fourth: layer(x, memory, None, src_mask).",
        ),
        (
            lambda: _decode(model, tgt, memory, src_mask, chained=False),
            "every decoder layer read the embedded target and only the last one's output was kept: chain them, "
            "x = layer(x, memory, None, src_mask).",
        ),
        (
            lambda: model.lm_head(embed(model, tgt)),
            "the logits come straight from the embedded target: the decoder layers' outputs were dropped. Keep "
            "each one, x = layer(x, memory, None, src_mask).",
        ),
        (
            lambda: model.decode(tgt, memory, src_mask).softmax(-1),
            "the logits went through a softmax: return lm_head's raw outputs (the loss applies log-softmax itself).",
        ),
    ]


def forward_variants(model: ref.EncoderDecoderTransformer, src: Tensor, tgt: Tensor) -> list[Variant]:
    keep = model.source_mask(src)
    return [
        (
            lambda: model.decode(tgt, embed(model, src), keep),
            "the memory is the embedded source: forward skipped the encoder. memory = self.encode(src, src_mask).",
        ),
        (
            lambda: model.decode(tgt, model.encode(tgt)),
            "the memory was made from the target: the encoder reads the source, memory = self.encode(src, "
            "src_mask), and the decoder reads tgt.",
        ),
        (
            lambda: model.decode(tgt, model.encode(src, keep), None),
            "forward gave decode no source mask, so cross-attention reads the padding: "
            "self.decode(tgt, self.encode(src, src_mask), src_mask) with src_mask = self.source_mask(src).",
        ),
        (
            lambda: model.decode(tgt, model.encode(src, torch.ones_like(keep)), keep),
            "forward encoded the source without its padding mask: self.encode(src, src_mask).",
        ),
    ]


def dropout_variants(reference: ref.EncoderDecoderTransformer, method: str, args: tuple, seed: int) -> list[Variant]:
    """The reference's `method` ("encode" or "decode") on `args` in training mode with `seed`, each with one
    dropout missing or misplaced."""
    no_embedding_dropout = _with_dropout(reference, embeddings=0.0)
    no_layer_dropout = _with_dropout(reference, layers=0.0)
    return [
        (
            lambda: in_training(lambda: getattr(no_embedding_dropout, method)(*args), no_embedding_dropout, seed),
            "self.dropout is never applied to the embeddings: self.dropout(self.pos(self.tok_emb(ids) * "
            "math.sqrt(d_model))).",
        ),
        (
            lambda: in_training(lambda: getattr(no_layer_dropout, method)(*args), no_layer_dropout, seed),
            "the layers got no dropout: build them with the configuration's, layer(d_model, n_heads, d_hidden, "
            "dropout).",
        ),
        (
            lambda: in_training(lambda: _after_positions(reference, method, args), reference, seed),
            "the dropout acts before the positions are added; it acts on their sum: "
            "self.dropout(self.pos(self.tok_emb(ids) * math.sqrt(d_model))).",
        ),
    ]


def in_training(run: Any, reference: nn.Module, seed: int) -> Tensor:
    """`run()` with `reference` in training mode and the global random state seeded with `seed` (then restored)."""
    reference.train(True)
    with torch.random.fork_rng(devices=[]), torch.no_grad():
        torch.manual_seed(seed)
        out = run()
    reference.train(False)
    return out


def _with_dropout(
    reference: ref.EncoderDecoderTransformer, *, embeddings: float | None = None, layers: float | None = None
) -> ref.EncoderDecoderTransformer:
    """A copy of the reference with the embedding dropout or the layers' dropout set to another p (built before a
    seeded run: building draws random numbers)."""
    fields = dict(vars(reference.config))
    p = fields["dropout"]
    with torch.random.fork_rng(devices=[]):
        twin = ref.EncoderDecoderTransformer(
            ref.Seq2SeqConfig(**{**fields, "dropout": p if layers is None else layers})
        )
    twin.load_state_dict(reference.state_dict())
    twin.dropout.p = p if embeddings is None else embeddings
    return twin.eval()


def _after_positions(reference: ref.EncoderDecoderTransformer, method: str, args: tuple) -> Tensor:
    """encode or decode with the embeddings' dropout before the positions are added."""
    x = embed(reference, args[0], "dropout before positions")
    if method == "encode":
        for layer in reference.encoder:
            x = layer(x, reference.source_mask(args[0]))
        return x
    _, memory, keep = args
    for layer in reference.decoder:
        x = layer(x, memory, None, keep)
    return reference.lm_head(x)
