"""Text generation from a GPT: choosing the next token, and a loop that reuses a KV cache (Lesson 10).

    top_k_filter        keep the k largest logits of each row (ties with the k-th stay), the rest -> -inf
    top_p_filter        keep the smallest set of most probable tokens reaching probability p (Lesson 10, exercise)
    sample_next_token   temperature, then top-k, then top-p, then one draw from the softmax -> ids (B, 1)
    generate            greedy or sampled continuation of a batch of prompts; KV cache, stop tokens, a seeded
                        torch.Generator; equal ids with and without the cache
    complete            one prompt as a list of ints -> the new ids as a list of Python ints

Why a cache: without one, every step feeds the whole sequence again and recomputes the keys, values and MLP
outputs of positions that have not changed. With one, the prompt is processed once ("prefill") and each later
step feeds only the newest token; its query still reads every stored key and value, so a step's attention grows
with the sequence, while its projections and MLP cost one position's work. GPT-2's positions are learned rows of a
table of `context_length`, so once the sequence outgrows the context the window slides, every position shifts,
and the cache has to be rebuilt from the cropped window (the results still equal recomputation's). The course's
GPT takes the cache in its forward; a GPT whose classes take none (yours, lesson 09) uses it through a function
that runs its parts with the cache (`forward_with_cache`, lesson 10's exercise), and without one recomputes.

Shape legend: B batch, T time, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.gpt import KVCache

__all__ = ["top_k_filter", "top_p_filter", "sample_next_token", "generate", "complete"]


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Logits below the k-th largest of their row become -inf (ties with the k-th are kept). (..., V) -> (..., V)."""
    _checks.tensor("logits", logits, "..., V")
    _checks.int_between("top_k", k, 1, logits.shape[-1])
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]  # (..., 1), the k-th largest of each row
    return logits.masked_fill(logits < kth, float("-inf"))


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Nucleus filtering: keep the smallest set of highest-probability tokens whose total probability is >= p.

    Lesson 10, exercise `top_p_filter`. The token whose probability carries the running total across p is kept,
    and so is the top token always; every other logit becomes -inf. A token below the top one is dropped exactly
    when the tokens ranked above it already total >= p. 0 <= p <= 1: p = 0 keeps only the top token (as Hugging
    Face's top-p does), p = 1 keeps everything. logits (..., V) -> (..., V), a new tensor.
    """
    _checks.tensor("logits", logits, "..., V")
    p = _checks.number("p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    if p == 1.0:
        return logits.clone()  # even tokens whose rounded running total reaches 1 early stay
    sorted_logits, order = torch.sort(logits, dim=-1, descending=True)  # (..., V), most probable first
    probs = F.softmax(sorted_logits, dim=-1)  # (..., V)
    before = torch.cumsum(probs, dim=-1) - probs  # (..., V): total probability of the tokens ranked above
    drop_sorted = before >= p
    drop_sorted[..., 0] = False  # the top token stays, also when p = 0 (0 above it is not less than 0)
    drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)  # back to vocabulary order
    return logits.masked_fill(drop, float("-inf"))


def sample_next_token(
    logits: Tensor,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One sampled id per row: logits (B, V) -> LongTensor (B, 1).

    Lesson 10 (lesson 09's sampler with top_p added). Divide by `temperature` (> 0; < 1 sharpens), keep the
    `top_k` largest, then the top-p nucleus of what is left, softmax, and one torch.multinomial draw with
    `generator` (seed it for repeatable samples).
    """
    _checks.tensor("logits", logits, "B, V")
    _checks.positive_number("temperature", temperature)
    logits = logits / temperature  # a new tensor: the caller's logits stay as they were
    if top_k is not None:
        logits = top_k_filter(logits, top_k)
    if top_p is not None:
        logits = top_p_filter(logits, top_p)
    probs = F.softmax(logits, dim=-1)  # (B, V)
    return torch.multinomial(probs, 1, generator=generator)  # (B, 1)


def _stop_ids(stop_tokens: Sequence[int] | int | None) -> list[int]:
    if stop_tokens is None:
        return []
    if isinstance(stop_tokens, int) and not isinstance(stop_tokens, bool):
        return [stop_tokens]
    return _checks.int_list("stop_tokens", stop_tokens, minimum=0)


@torch.no_grad()
def generate(
    model: nn.Module,
    idx: Tensor,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    stop_tokens: Sequence[int] | int | None = None,
    pad_id: int | None = None,
    generator: torch.Generator | None = None,
    use_cache: bool | None = None,
    forward_with_cache: Callable[[nn.Module, Tensor, KVCache], Tensor] | None = None,
) -> Tensor:
    """Continue each row of `idx` (B, T0) by up to `max_new_tokens` ids -> (B, T0 + n), n <= max_new_tokens.

    Lesson 10. `model` is a GPT of lesson 09's contract (forward(idx) -> (logits, loss); its position table
    `pos_emb` has one row per position of the context, or, with RoPE and no table, `context_length` says how many)
    — the course's, yours, a course_lib GPT2 or lesson 12's ModernGPT, whose forward also takes `cache=` and which
    has `new_cache`. It runs in eval mode and is put back in its former mode
    afterwards. `greedy` takes the most probable id; otherwise `sample_next_token` draws with temperature / top_k /
    top_p and `generator`. A row that produces one of `stop_tokens` is finished: later positions get `pad_id`
    (default: the first stop token), and the loop ends when every row is finished. `use_cache`: None uses a KV
    cache when the model has one (`new_cache`) or `forward_with_cache` is given; False recomputes the whole
    (cropped) sequence at every step, the reference the cache is tested against; True insists on the cache.
    `forward_with_cache(model, idx, cache) -> logits` runs a step with the cache (lesson 10's exercise: yours, for a
    GPT whose forward takes no cache); None: the model's own, `model(idx, cache=cache)`.
    """
    _checks.tensor("idx", idx, "B, T", integer=True)
    _checks.int_between("max_new_tokens", max_new_tokens, 0)
    if not greedy:
        _checks.positive_number("temperature", temperature)
    stops = _stop_ids(stop_tokens)
    if pad_id is None:
        pad_id = stops[0] if stops else 0
    _checks.integer("pad_id", pad_id, minimum=0)
    own_cache = callable(getattr(model, "new_cache", None))
    if use_cache is None:
        use_cache = own_cache or forward_with_cache is not None
    elif use_cache and not (own_cache or forward_with_cache is not None):
        raise TypeError(
            f"use_cache=True needs a model with a KV cache (new_cache) or a `forward_with_cache`; "
            f"{type(model).__name__} has none"
        )
    new_cache = model.new_cache if own_cache else lambda batch_size: KVCache.for_model(model, batch_size)
    step = forward_with_cache or (lambda model, ids, cache: model(ids, cache=cache)[0])  # the model's own
    table = getattr(model, "pos_emb", None)  # learned positions: the context is the rows of the position table;
    context = model.context_length if table is None else table.num_embeddings  # RoPE (lesson 12): the config's
    B = idx.shape[0]
    stop_tensor = torch.tensor(stops, dtype=idx.dtype, device=idx.device)  # (n_stops,)
    finished = torch.zeros(B, dtype=torch.bool, device=idx.device)  # (B,)
    was_training = model.training
    model.eval()
    cache = None
    try:
        for _ in range(max_new_tokens):
            if not use_cache:
                logits, _ = model(idx[:, -context:])  # (B, T, V), the whole window again
            elif cache is None or cache.length >= context:  # first step, or the window has to slide
                cache = new_cache(B)
                logits = step(model, idx[:, -context:], cache)  # prefill
            else:
                logits = step(model, idx[:, -1:], cache)  # (B, 1, V): only the newest token
            last = logits[:, -1, :]  # (B, V)
            if greedy:
                next_id = last.argmax(dim=-1, keepdim=True)  # (B, 1)
            else:
                next_id = sample_next_token(last, temperature, top_k, top_p, generator)  # (B, 1)
            next_id = next_id.masked_fill(finished[:, None], pad_id)  # finished rows only pad
            idx = torch.cat([idx, next_id], dim=1)  # (B, T + 1)
            finished |= torch.isin(next_id[:, 0], stop_tensor)
            if stops and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return idx


def complete(model: nn.Module, prompt: Sequence[int], max_new_tokens: int, **options: object) -> list[int]:
    """The ids generated after one prompt, as Python ints, without the stop token that ended it (if any).

    Lesson 10. `prompt` is a non-empty list of ids (e.g. from tiktoken's GPT-2 encoding); `options` are
    generate's (temperature, top_k, top_p, greedy, stop_tokens, generator, use_cache).
    """
    ids = _checks.int_list("prompt", prompt, minimum=0, non_empty=True)
    device = next(model.parameters()).device
    out = generate(model, torch.tensor([ids], device=device), max_new_tokens, **options)  # (1, T0 + n)
    new = [int(i) for i in out[0, len(ids) :].tolist()]
    stops = set(_stop_ids(options.get("stop_tokens")))
    for position, token in enumerate(new):
        if token in stops:
            return new[:position]
    return new
