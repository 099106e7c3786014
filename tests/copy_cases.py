"""A labelled set for the copy detector (course_lib/workflow/similarity.py), used by tests/test_similarity.py.

INDEPENDENT: correct answers written for this set without looking at the course's code for the exercise, each built
differently from the others (loops against vectorised code, other algorithms, other library calls). Every one
passes the exercise's check (the test runs them), so they are real answers, and none may be flagged.

REORDERED: the course's solution retyped by someone hiding it: names changed, statements that do not depend on
each other swapped, comments changed. With the renamed copies the test makes of every reference and solution
(`tests/test_similarity.py`), every one must be flagged.
"""

from __future__ import annotations

LESSONS = {
    "count_characters": "00_welcome",
    "gradient_descent": "00_welcome",
    "merge_pair": "01_tokenization",
    "train_bpe": "01_tokenization",
    "most_similar": "02_embeddings",
    "sinusoidal_position_encoding": "03_position_encoding",
    "scaled_dot_product_attention": "04_attention",
    "CausalSelfAttention": "04_attention",
    "layer_norm": "06_transformer_blocks",
    "get_batch": "09_char_gpt",
    "top_p_filter": "10_gpt2",
}

INDEPENDENT: dict[str, list[str]] = {
    "count_characters": [
        """
from collections import Counter


def count_characters(text):
    return dict(Counter(text))
""",
        """
def count_characters(text):
    result = {}
    for symbol in text:
        if symbol in result:
            result[symbol] += 1
        else:
            result[symbol] = 1
    return result
""",
        """
def count_characters(text):
    order = []
    for symbol in text:
        if symbol not in order:
            order.append(symbol)
    return {symbol: text.count(symbol) for symbol in order}
""",
    ],
    "gradient_descent": [
        """
import torch


def gradient_descent(w, x, y, lr, steps):
    params = w.clone().detach()
    history = []
    for step in range(steps):
        params.requires_grad_(True)
        residual = x @ params - y
        loss = residual.pow(2).mean()
        (grad,) = torch.autograd.grad(loss, params)
        history.append(float(loss))
        params = (params - lr * grad).detach()
    return params, history
""",
        """
import torch


def gradient_descent(w, x, y, lr, steps):
    # the gradient of mean((xw - y)^2) is 2/N x^T (xw - y): no autograd needed
    n = x.shape[0]
    current = w.detach().clone()
    recorded = []
    for _ in range(steps):
        error = torch.mv(x, current) - y
        recorded.append(torch.dot(error, error).item() / n)
        current = current - lr * (2.0 / n) * torch.mv(x.T, error)
    return current, recorded
""",
        """
import torch


def gradient_descent(w, x, y, lr, steps):
    w_now = w.detach().clone()
    losses = []
    with torch.enable_grad():
        for _ in range(steps):
            w_now.requires_grad_()
            prediction = torch.einsum("nc,c->n", x, w_now)
            mse = torch.nn.functional.mse_loss(prediction, y)
            mse.backward()
            losses.append(mse.item())
            w_now = w_now.detach() - lr * w_now.grad
    return w_now, losses
""",
    ],
    "merge_pair": [
        """
def merge_pair(ids, pair, new_id):
    out = []
    skip = False
    for a, b in zip(ids, list(ids[1:]) + [None]):
        if skip:
            skip = False
            continue
        if (a, b) == tuple(pair):
            out.append(new_id)
            skip = True
        else:
            out.append(a)
    return out
""",
        """
from collections import deque


def merge_pair(ids, pair, new_id):
    queue = deque(ids)
    result = []
    while queue:
        first = queue.popleft()
        if queue and first == pair[0] and queue[0] == pair[1]:
            queue.popleft()
            result.append(new_id)
        else:
            result.append(first)
    return result
""",
        """
def merge_pair(ids, pair, new_id):
    result = []
    skip_until = -1
    for index, token in enumerate(ids):
        if index <= skip_until:
            continue
        if tuple(ids[index : index + 2]) == tuple(pair):
            result.append(new_id)
            skip_until = index + 1
        else:
            result.append(token)
    return result
""",
    ],
    "train_bpe": [
        """
def train_bpe(text, vocab_size):
    if vocab_size < 256:
        raise ValueError("vocab_size below 256")
    tokens = list(text.encode("utf-8"))
    merges = {}
    next_id = 256
    while next_id < vocab_size and len(tokens) >= 2:
        freq = {}
        for pair in zip(tokens, tokens[1:]):
            freq[pair] = freq.get(pair, 0) + 1
        top = max(freq.values())
        chosen = next(p for p in freq if freq[p] == top)
        new = []
        i = 0
        while i < len(tokens):
            if i < len(tokens) - 1 and (tokens[i], tokens[i + 1]) == chosen:
                new.append(next_id)
                i += 2
            else:
                new.append(tokens[i])
                i += 1
        tokens = new
        merges[chosen] = next_id
        next_id += 1
    return merges
""",
        """
def train_bpe(text, vocab_size):
    if vocab_size < 256:
        raise ValueError(f"need at least 256 ids, got {vocab_size}")
    data = list(text.encode())
    merges = {}
    for new_id in range(256, vocab_size):
        if len(data) < 2:
            break
        first_seen = {}
        counts = {}
        for position in range(len(data) - 1):
            pair = (data[position], data[position + 1])
            counts[pair] = counts.get(pair, 0) + 1
            first_seen.setdefault(pair, position)
        best = min(counts, key=lambda pr: (-counts[pr], first_seen[pr]))
        merges[best] = new_id
        merged = []
        skip = False
        for a, b in zip(data, data[1:] + [None]):
            if skip:
                skip = False
                continue
            if (a, b) == best:
                merged.append(new_id)
                skip = True
            else:
                merged.append(a)
        data = merged
    return merges
""",
        """
from collections import Counter


def train_bpe(text, vocab_size):
    if vocab_size < 256:
        raise ValueError("too small")
    seq = list(text.encode("utf-8"))
    table = {}
    for k in range(vocab_size - 256):
        if len(seq) < 2:
            break
        pair, _ = Counter(zip(seq, seq[1:])).most_common(1)[0]
        table[pair] = 256 + k
        seq = merge_pair(seq, pair, 256 + k)
    return table
""",
    ],
    "most_similar": [
        """
import torch


def most_similar(query, matrix, k):
    q = query / query.norm()
    rows = matrix / matrix.norm(dim=1, keepdim=True)
    sims = rows @ q
    ranked = sorted(range(len(sims)), key=lambda i: (-sims[i].item(), i))
    return torch.tensor(ranked[:k], dtype=torch.long)
""",
        """
import torch
import torch.nn.functional as F


def most_similar(query, matrix, k):
    cos = F.cosine_similarity(matrix, query.unsqueeze(0).expand_as(matrix), dim=1)
    return torch.sort(cos, descending=True, stable=True).indices[:k]
""",
        """
import torch


def most_similar(query, matrix, k):
    scores = []
    for row in matrix:
        scores.append(float(torch.dot(row, query) / (torch.linalg.norm(row) * torch.linalg.norm(query))))
    picked = []
    for _ in range(k):
        best = None
        for index, value in enumerate(scores):
            if index in picked:
                continue
            if best is None or value > scores[best]:
                best = index
        picked.append(best)
    return torch.tensor(picked)
""",
    ],
    "sinusoidal_position_encoding": [
        """
import math

import torch


def sinusoidal_position_encoding(max_len, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    table = [[0.0] * d_model for _ in range(max_len)]
    for pos in range(max_len):
        for i in range(d_model // 2):
            freq = pos / base ** (2 * i / d_model)
            table[pos][2 * i] = math.sin(freq)
            table[pos][2 * i + 1] = math.cos(freq)
    return torch.tensor(table, dtype=torch.float32)
""",
        """
import torch


def sinusoidal_position_encoding(max_len, d_model, base=10000.0):
    if d_model % 2:
        raise ValueError(f"odd d_model {d_model}")
    inv_freq = 1.0 / base ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
    phases = torch.outer(torch.arange(max_len, dtype=torch.float64), inv_freq)
    return torch.stack([phases.sin(), phases.cos()], dim=-1).reshape(max_len, d_model).float()
""",
        """
import math

import torch


def sinusoidal_position_encoding(max_len, d_model, base=10000.0):
    if d_model % 2 == 1:
        raise ValueError("need an even d_model")
    half = torch.exp(torch.arange(d_model // 2, dtype=torch.float64) * (-2.0 * math.log(base) / d_model))
    out = torch.zeros(max_len, d_model, dtype=torch.float64)
    for pos in range(max_len):
        out[pos, ::2] = torch.sin(pos * half)
        out[pos, 1::2] = torch.cos(pos * half)
    return out.to(torch.float32)
""",
    ],
    "scaled_dot_product_attention": [
        """
import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    logits = torch.einsum("...qd,...kd->...qk", q, k) * q.size(-1) ** -0.5
    if mask is not None:
        logits = torch.where(mask, logits, torch.tensor(float("-inf")))
    attn = logits.softmax(dim=-1)
    return torch.einsum("...qk,...kd->...qd", attn, v), attn
""",
        """
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.shape[-1]
    raw = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
    if mask is None:
        mask = torch.ones_like(raw, dtype=torch.bool)
    raw = raw.masked_fill(mask.logical_not(), -math.inf)
    top = raw.amax(dim=-1, keepdim=True)
    e = torch.exp(raw - top)
    p = e / e.sum(dim=-1, keepdim=True)
    return torch.matmul(p, v), p
""",
        """
import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    scale = 1.0 / (q.shape[-1] ** 0.5)
    sims = (q * scale) @ k.mT
    if mask is not None:
        sims = sims + torch.zeros_like(sims).masked_fill(~mask, float("-inf"))
    probabilities = torch.nn.functional.softmax(sims, dim=-1)
    mixed = probabilities @ v
    return mixed, probabilities
""",
    ],
    "CausalSelfAttention": [
        """
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.drop = nn.Dropout(dropout)
        future = torch.triu(torch.ones(context_length, context_length), 1).bool()
        self.register_buffer("future", future, persistent=False)

    def forward(self, x):
        n = x.size(1)
        if n > self.future.size(0):
            raise ValueError("sequence longer than the context")
        att = torch.einsum("btd,bsd->bts", self.W_query(x), self.W_key(x)) * self.W_key.out_features ** -0.5
        att = att.masked_fill(self.future[:n, :n], float("-inf")).softmax(-1)
        return torch.einsum("bts,bsd->btd", self.drop(att), self.W_value(x))
""",
        """
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.limit = context_length
        self.W_query, self.W_key, self.W_value = (nn.Linear(d_in, d_out, bias=qkv_bias) for _ in range(3))
        self.p = dropout

    def forward(self, x):
        steps = x.shape[-2]
        if steps > self.limit:
            raise ValueError(f"at most {self.limit} positions")
        queries, keys, values = self.W_query(x), self.W_key(x), self.W_value(x)
        rows = []
        for t in range(steps):
            seen = keys[:, : t + 1]  # (B, t+1, D)
            logits = (seen @ queries[:, t].unsqueeze(-1)).squeeze(-1) / math.sqrt(keys.shape[-1])
            probs = torch.nn.functional.dropout(torch.softmax(logits, dim=-1), self.p, self.training)
            padded = torch.zeros(x.shape[0], steps, dtype=probs.dtype, device=x.device)
            padded[:, : t + 1] = probs
            rows.append(padded)
        return torch.stack(rows, dim=1) @ values
""",
        """
import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.ctx = context_length
        for role in ("query", "key", "value"):
            setattr(self, f"W_{role}", nn.Linear(d_in, d_out, bias=qkv_bias))
        self.attn_drop = nn.Dropout(p=dropout)

    def forward(self, x):
        length = x.shape[1]
        if length > self.ctx:
            raise ValueError(f"{length} > context length {self.ctx}")
        q = self.W_query(x) / self.W_query.out_features ** 0.5
        sim = torch.bmm(q, self.W_key(x).transpose(1, 2))
        bias = torch.full((length, length), float("-inf"), device=x.device).triu(diagonal=1)
        w = torch.softmax(sim + bias, dim=2)
        return torch.bmm(self.attn_drop(w), self.W_value(x))
""",
    ],
    "layer_norm": [
        """
import torch


def layer_norm(x, weight, bias, eps=1e-5):
    var = x.var(dim=-1, unbiased=False, keepdim=True)
    normed = (x - x.mean(-1, keepdim=True)) * torch.rsqrt(var + eps)
    return normed * weight + bias
""",
        """
def layer_norm(x, weight, bias, eps=1e-5):
    width = x.shape[-1]
    mu = x.sum(-1, keepdim=True) / width
    centered = x - mu
    sigma2 = (centered * centered).sum(-1, keepdim=True) / width
    return weight * centered / (sigma2 + eps).sqrt() + bias
""",
        """
import torch


def layer_norm(x, weight, bias, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, unbiased=False, keepdim=True)
    return torch.addcmul(bias, (x - mean).div(torch.sqrt(var.add(eps))), weight)
""",
    ],
    "get_batch": [
        """
import torch


def get_batch(data, block_size, batch_size, generator):
    starts = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    offsets = torch.arange(block_size)
    idx = starts[:, None] + offsets[None, :]
    return data[idx], data[idx + 1]
""",
        """
import torch


def get_batch(data, block_size, batch_size, generator):
    windows = data.unfold(0, block_size + 1, 1)
    picks = torch.randint(len(data) - block_size, (batch_size,), generator=generator)
    chosen = windows[picks]
    return chosen[:, :-1].clone(), chosen[:, 1:].clone()
""",
        """
import torch


def get_batch(data, block_size, batch_size, generator):
    ix = torch.randint(len(data) - block_size, (batch_size,), generator=generator).tolist()
    inputs, targets = [], []
    for start in ix:
        chunk = data[start : start + block_size + 1].tolist()
        inputs.append(chunk[:-1])
        targets.append(chunk[1:])
    return torch.tensor(inputs, dtype=data.dtype), torch.tensor(targets, dtype=data.dtype)
""",
    ],
    "top_p_filter": [
        """
import torch


def top_p_filter(logits, p):
    flat = logits.reshape(-1, logits.shape[-1])
    out = flat.clone()
    for r in range(flat.shape[0]):
        probs = torch.softmax(flat[r], dim=-1)
        ranked = sorted(range(flat.shape[1]), key=lambda i: -probs[i].item())
        total = 0.0
        for i in ranked:
            if total >= p and i != ranked[0]:
                out[r, i] = float("-inf")
            total += probs[i].item()
    return out.reshape(logits.shape)
""",
        """
import torch


def top_p_filter(logits, p):
    values, idx = logits.sort(dim=-1, descending=True)
    mass = values.softmax(dim=-1)
    keep_sorted = (mass.cumsum(dim=-1) - mass) < p
    keep_sorted[..., 0] = True
    inverse = idx.argsort(dim=-1)
    keep = torch.gather(keep_sorted, -1, inverse)
    return torch.where(keep, logits, torch.full_like(logits, float("-inf")))
""",
        """
import torch


def top_p_filter(logits, p):
    probs = torch.softmax(logits, dim=-1)
    # a token stays when the tokens strictly more likely than it hold less than p in total
    ahead = (probs.unsqueeze(-2) > probs.unsqueeze(-1)).to(probs.dtype)
    mass_ahead = (ahead * probs.unsqueeze(-2)).sum(dim=-1)
    return logits.masked_fill((mass_ahead >= p) & (mass_ahead > 0), float("-inf"))
""",
    ],
}

REORDERED: dict[str, str] = {
    "count_characters": """
def count_characters(s):
    tally = {}
    for ch in s:
        tally[ch] = 1 + tally.get(ch, 0)
    return tally
""",
    "gradient_descent": """
def gradient_descent(weights, inputs, targets, step_size, n_steps):
    history = []
    weights = weights.detach().clone().requires_grad_(True)
    for _ in range(n_steps):
        objective = ((inputs @ weights - targets) ** 2).mean()
        objective.backward()
        history.append(objective.item())
        with torch.no_grad():
            weights -= step_size * weights.grad
        weights.grad = None
    return weights.detach(), history
""",
    "merge_pair": """
def merge_pair(tokens, target, replacement):
    j = 0
    result = []
    while j < len(tokens):
        if tokens[j] == target[0] and j + 1 < len(tokens) and tokens[j + 1] == target[1]:
            result.append(replacement)
            j += 2
        else:
            result.append(tokens[j])
            j += 1
    return result
""",
    "train_bpe": """
def train_bpe(corpus, size):
    if size < 256:
        raise ValueError("size must be at least 256")
    table = {}
    seq = list(corpus.encode("utf-8"))
    for token_id in range(256, size):
        if len(seq) < 2:
            break
        stats = ref.get_pair_counts(seq)
        top = max(stats, key=stats.get)
        table[top] = token_id
        seq = ref.merge_pair(seq, top, token_id)
    return table
""",
    "most_similar": """
def most_similar(vec, table, n):
    sims = (table @ vec) / (vec.norm() * table.norm(dim=-1))
    ranking = torch.argsort(sims, descending=True, stable=True)
    return ranking[:n]
""",
    "sinusoidal_position_encoding": """
def sinusoidal_position_encoding(length, dim, base=10000.0):
    if dim % 2:
        raise ValueError("dim must be even")
    freqs = torch.arange(0, dim, 2, dtype=torch.float32)
    pos = torch.arange(length, dtype=torch.float32)[:, None]
    table = torch.zeros(length, dim)
    arg = pos / base ** (freqs / dim)
    table[:, 1::2] = torch.cos(arg)
    table[:, 0::2] = torch.sin(arg)
    return table
""",
    "scaled_dot_product_attention": """
def scaled_dot_product_attention(query, key, value, mask=None):
    s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    a = torch.softmax(s, dim=-1)
    out = a @ value
    return out, a
""",
    "CausalSelfAttention": """
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.drop = nn.Dropout(dropout)
        self.max_len = context_length

    def forward(self, inputs):
        if inputs.shape[1] > self.max_len:
            raise ValueError(f"inputs has {inputs.shape[1]} positions, more than context_length={self.max_len}")
        vals, keys, qs = self.W_value(inputs), self.W_key(inputs), self.W_query(inputs)
        keep = causal_mask(inputs.shape[1], device=inputs.device)
        _, att = scaled_dot_product_attention(qs, keys, vals, keep)
        return self.drop(att) @ vals
""",
    "layer_norm": """
def layer_norm(inp, gamma, beta, eps=1e-5):
    mu = inp.mean(dim=-1, keepdim=True)
    var = ((inp - mu) ** 2).mean(dim=-1, keepdim=True)
    normalised = (inp - mu) / torch.sqrt(var + eps)
    return normalised * gamma + beta
""",
    "get_batch": """
def get_batch(ids, ctx, bs, gen):
    starts = torch.randint(len(ids) - ctx, (bs,), generator=gen)
    ys = torch.stack([ids[s + 1 : s + ctx + 1] for s in starts])
    xs = torch.stack([ids[s : s + ctx] for s in starts])
    return xs, ys
""",
    "top_p_filter": """
def top_p_filter(scores, threshold):
    prob = torch.softmax(scores, dim=-1)
    ranked, perm = torch.sort(prob, dim=-1, descending=True)
    prior = torch.cumsum(ranked, dim=-1) - ranked
    remove = prior >= threshold
    remove = remove.scatter(-1, perm, remove)
    return scores.masked_fill(remove, float("-inf"))
""",
}

# INLINED: the course's reference copied with the helper it calls (a function of the same module) written out
# inline, names changed and the argument checks left out, as someone hiding a copy would: the answer is one
# function (or class) where the reference is two or three. Five of the eleven exercises' references call one.
INLINED: dict[str, str] = {
    "merge_pair": """
def merge_pair(ids, pair, new_id):
    left, right = pair
    result = []
    pos = 0
    size = len(ids)
    while pos < size:
        if pos < size - 1 and ids[pos] == left and ids[pos + 1] == right:
            result.append(new_id)
            pos += 2
        else:
            result.append(ids[pos])
            pos += 1
    return result
""",
    "train_bpe": """
from collections import Counter
from itertools import pairwise


def train_bpe(text, vocab_size):
    tokens = list(text.encode("utf-8"))
    table = {}
    for fresh in range(256, vocab_size):
        if len(tokens) < 2:
            break
        freq = Counter(pairwise(tokens))
        top = max(freq, key=freq.__getitem__)
        left, right = top
        merged = []
        j = 0
        size = len(tokens)
        while j < size:
            if j < size - 1 and tokens[j] == left and tokens[j + 1] == right:
                merged.append(fresh)
                j += 2
            else:
                merged.append(tokens[j])
                j += 1
        tokens = merged
        table[top] = fresh
    return table
""",
    "most_similar": """
import torch


def most_similar(query, matrix, k):
    dots = (query * matrix).sum(-1)
    sims = dots / (query.norm(dim=-1).clamp_min(1e-8) * matrix.norm(dim=-1).clamp_min(1e-8))
    ranked = torch.sort(sims, descending=True, stable=True).indices
    return ranked[:k]
""",
    "scaled_dot_product_attention": """
import math

import torch


def scaled_dot_product_attention(q, k, v, mask=None):
    s = q @ k.transpose(-2, -1)
    s = s / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf"))
    w = torch.softmax(s, dim=-1)
    return w @ v, w
""",
    "CausalSelfAttention": """
import math

import torch
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):
        super().__init__()
        self.d_in, self.d_out, self.context_length = d_in, d_out, context_length
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        n = x.shape[1]
        if self.context_length < n:
            raise ValueError(f"x has T={n}, more than context_length={self.context_length}")
        keep = torch.ones(n, n, dtype=torch.bool, device=x.device).tril()
        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)
        s = q @ k.transpose(-2, -1)
        s = s / math.sqrt(q.shape[-1])
        s = s.masked_fill(~keep, float("-inf"))
        w = torch.softmax(s, dim=-1)
        w = self.dropout(w)
        return w @ v
""",
}
