"""StatQuest's toy decoder-only transformer, the tensor parts (Lesson 08); the trained model is in
`course_lib.statquest_model`.

    VOCAB, TOKENS, EOS_ID   the five-token vocabulary {what, is, statquest, awesome, <EOS>}
    PROMPTS                 the two questions, each ending in <EOS>
    statquest_dataset       the two training sequences: inputs and labels (the inputs shifted left by one)
    encode, decode          tokens <-> ids
    blocked_mask            the original tutorial's mask (True = blocked), next to `attention.causal_mask`
    Attention               single-head self-attention, batch-first, the course's mask (True = may attend)
    decoder_only_forward    the toy model's forward pass with tensors only, from its state dict
    greedy_generate         append the most likely next id (a Python int) until <EOS> or the budget ends

This module does not import Lightning (graded answers import it; Lightning takes seconds to load).

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor, nn

from course_lib import _checks
from course_lib.attention import causal_mask

__all__ = [
    "VOCAB",
    "TOKENS",
    "EOS_ID",
    "PROMPTS",
    "statquest_dataset",
    "encode",
    "decode",
    "blocked_mask",
    "Attention",
    "decoder_only_forward",
    "greedy_generate",
]

VOCAB: dict[str, int] = {"what": 0, "is": 1, "statquest": 2, "awesome": 3, "<EOS>": 4}
TOKENS: list[str] = list(VOCAB)  # id -> token
EOS_ID = VOCAB["<EOS>"]
PROMPTS: tuple[tuple[str, ...], ...] = (("what", "is", "statquest", "<EOS>"), ("statquest", "is", "what", "<EOS>"))


def encode(tokens: Sequence[str]) -> list[int]:
    """Token strings -> ids; a KeyError names a word outside the five."""
    unknown = [t for t in tokens if t not in VOCAB]
    if unknown:
        raise KeyError(f"{unknown[0]!r} is not in the vocabulary {TOKENS}")
    return [VOCAB[t] for t in tokens]


def decode(ids: Sequence[int]) -> list[str]:
    """Ids (Python ints) -> token strings. A tensor id is refused: it is the bug the lesson's "spot the bug" shows."""
    for i in ids:
        if not isinstance(i, int) or isinstance(i, bool):
            raise TypeError(f"ids must be Python ints, got {type(i).__name__} {i!r}: append int(next_id)")
    return [TOKENS[i] for i in ids]


def statquest_dataset() -> tuple[Tensor, Tensor]:
    """The two training sequences: (inputs, labels), both LongTensor[2, 5].

    Lesson 08, exercise `statquest_dataset`. Each row is a prompt, its <EOS> and the answer "awesome"; the labels
    are the inputs moved one step left with a final <EOS>, so position t is trained to predict token t + 1 —
    the prompt's own next words included (teacher forcing over the whole sequence).
    """
    rows = [PROMPTS[0] + ("awesome",), PROMPTS[1] + ("awesome",)]
    inputs = torch.tensor([encode(row) for row in rows])  # (2, 5)
    labels = torch.tensor([encode(row[1:] + ("<EOS>",)) for row in rows])  # (2, 5): next token at each position
    return inputs, labels


def blocked_mask(T: int) -> Tensor:
    """The original tutorial's mask: True where a query may NOT look (above the diagonal). (T, T) bool.

    It is filled with a large negative number there; the course's `causal_mask` is its negation, True = may
    attend, and masked scores become -inf. `blocked_mask(T) == ~causal_mask(T)`.
    """
    return ~causal_mask(T)


class Attention(nn.Module):
    """Single-head attention with separate query, key and value inputs (StatQuest's `Attention`), batch-first.

    The original works on one unbatched (T, C) sequence and names its axes `row_dim=0`, `col_dim=1`; here the
    last two axes play those parts for any batch: q, k, v (B, T, C) -> (B, T, C), with `need_weights` also the
    weights (B, T, T). `mask` is bool, broadcastable to (B, T, T), True = may attend.
    """

    def __init__(self, d_model: int = 2) -> None:
        super().__init__()
        _checks.positive_int("d_model", d_model)
        self.W_q = nn.Linear(d_model, d_model, bias=False)
        self.W_k = nn.Linear(d_model, d_model, bias=False)
        self.W_v = nn.Linear(d_model, d_model, bias=False)

    def forward(
        self, x_q: Tensor, x_k: Tensor, x_v: Tensor, mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        q, k, v = self.W_q(x_q), self.W_k(x_k), self.W_v(x_v)  # (B, T, C) each
        scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])  # (B, T, C) @ (B, C, T) -> (B, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))  # True = may attend; the rest get no weight
        weights = scores.softmax(dim=-1)  # each query's row sums to 1 over the keys
        out = weights @ v  # (B, T, T) @ (B, T, C) -> (B, T, C)
        return (out, weights) if need_weights else out


def decoder_only_forward(params: dict[str, Tensor], token_ids: Tensor) -> Tensor:
    """`DecoderOnlyTransformer`'s forward pass with tensors only: its state dict and ids (B, T) -> logits (B, T, V).

    Lesson 08, exercise `decoder_only_forward`. Keys: `we.weight` (V, C), `pe.pe` (max_len, C),
    `self_attention.W_q.weight`, `...W_k.weight`, `...W_v.weight` (C, C), `fc_layer.weight` (V, C),
    `fc_layer.bias` (V,). An `nn.Linear` computes x @ W.T (+ b).
    """
    _checks.tensor("token_ids", token_ids, "B, T", integer=True)
    pe = params["pe.pe"]  # (max_len, C)
    T = token_ids.shape[1]
    if pe.shape[0] < T:
        raise ValueError(f"`token_ids` has {T} positions; the position table has only {pe.shape[0]}")
    x = params["we.weight"][token_ids] + pe[:T]  # (B, T, C) + (T, C)
    q = x @ params["self_attention.W_q.weight"].T  # (B, T, C)
    k = x @ params["self_attention.W_k.weight"].T  # (B, T, C)
    v = x @ params["self_attention.W_v.weight"].T  # (B, T, C)
    scores = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])  # (B, T, T)
    scores = scores.masked_fill(~causal_mask(T, device=scores.device), float("-inf"))  # True = may attend
    x = x + scores.softmax(dim=-1) @ v  # residual: (B, T, C)
    return x @ params["fc_layer.weight"].T + params["fc_layer.bias"]  # (B, T, V)


def greedy_generate(params: dict[str, Tensor], prompt_ids: list[int], eos_id: int, max_new_tokens: int) -> list[int]:
    """The ids the model writes after the prompt, most likely first: a list of Python ints.

    Lesson 08, exercise `greedy_generate`. Each step runs the whole sequence so far (prompt + ids written) through
    `decoder_only_forward` and appends the argmax at the last position as an int. Stops after writing `eos_id`
    (which is kept) or after `max_new_tokens` ids. The prompt is not part of the result.
    """
    sequence = _checks.int_list("prompt_ids", prompt_ids, minimum=0, non_empty=True)
    _checks.integer("eos_id", eos_id, minimum=0)
    _checks.positive_int("max_new_tokens", max_new_tokens)
    written: list[int] = []
    while len(written) < max_new_tokens:
        logits = decoder_only_forward(params, torch.tensor([sequence + written]))  # (1, t, V)
        next_id = int(logits[0, -1].argmax())  # an int: a tensor here breaks decode() and `in` tests later
        written.append(next_id)
        if next_id == eos_id:
            break
    return written
