"""A tiny decoder-only transformer in the style of StatQuest's toy model, trained with Lightning (Lesson 08).

    VOCAB, TOKENS, EOS_ID   the five-token vocabulary {what, is, statquest, awesome, <EOS>}
    statquest_dataset       the two training sequences: inputs and labels (the inputs shifted left by one)
    encode, decode          tokens <-> ids
    blocked_mask            the original tutorial's mask (True = blocked), next to `attention.causal_mask`
    Attention               single-head self-attention, batch-first, the course's mask (True = may attend)
    DecoderOnlyTransformer  embedding + sinusoidal position + attention + residual + output layer, as a
                            Lightning `LightningModule` (`training_step`, `configure_optimizers`)
    decoder_only_forward    the same forward pass written with tensors only, from the model's state dict
    greedy_generate         append the most likely next id (a Python int) until <EOS> or the budget ends
    train_lightning         Lightning's `Trainer`: seeded, deterministic, no checkpoints, no log files
    train_plain             the same module trained by a plain PyTorch loop: the same steps, the same result
    answers                 what a trained model says after each prompt, as words
    answer_attention        the attention row of the position that writes the answer (the prompt's <EOS>)
    seed_table              train one model per seed (plain loop) and record what each answers and attends to

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import warnings
from collections.abc import Iterator, Sequence

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from course_lib import _checks
from course_lib.attention import causal_mask
from course_lib.position import PositionEncoding

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
    "DecoderOnlyTransformer",
    "decoder_only_forward",
    "greedy_generate",
    "train_lightning",
    "train_plain",
    "answers",
    "answer_attention",
    "seed_table",
    "SEEDS",
]

SEEDS: tuple[int, ...] = tuple(range(30))  # the seeds of the lesson's seed table, every one tested

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


class DecoderOnlyTransformer(L.LightningModule):
    """StatQuest's decoder-only transformer: one attention layer, a residual connection, an output layer.

    Lesson 08. token ids (B, T) -> logits (B, T, V): word embedding + sinusoidal position (`we`, `pe`), causal
    self-attention (`self_attention`), its output added back to its input, then `fc_layer` (C -> V). As a
    `LightningModule` it also says how to train itself: `training_step` returns the loss of a batch (and logs
    it), `configure_optimizers` returns Adam. A plain loop can use `loss` and `configure_optimizers` directly.
    """

    def __init__(self, vocab_size: int = 5, d_model: int = 2, max_len: int = 6, lr: float = 0.1) -> None:
        super().__init__()
        _checks.positive_ints(vocab_size=vocab_size, max_len=max_len)
        _checks.positive_even("d_model", d_model, "sin/cos position pairs")
        _checks.positive_number("lr", lr)
        self.lr = lr
        self.we = nn.Embedding(vocab_size, d_model)
        self.pe = PositionEncoding(d_model, max_len)
        self.self_attention = Attention(d_model)
        self.fc_layer = nn.Linear(d_model, vocab_size)
        self.loss_history: list[float] = []  # one entry per training step, whichever loop trained it

    def forward(self, token_ids: Tensor, need_weights: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        _checks.tensor("token_ids", token_ids, "B, T<=max_len", integer=True, max_len=self.pe.max_len)
        x = self.pe(self.we(token_ids))  # (B, T) -> (B, T, C)
        mask = causal_mask(token_ids.shape[1], device=token_ids.device)  # (T, T), from the actual length
        attended, weights = self.self_attention(x, x, x, mask, need_weights=True)  # (B, T, C), (B, T, T)
        logits = self.fc_layer(x + attended)  # residual, then (B, T, C) -> (B, T, V)
        return (logits, weights) if need_weights else logits

    def loss(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        """Mean cross-entropy of the next-token predictions at every position of the batch."""
        inputs, labels = batch  # (B, T) each
        logits = self(inputs)  # (B, T, V)
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())  # (B*T, V) vs (B*T,)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss = self.loss(batch)
        self.loss_history.append(loss.item())
        self.log("train_loss", loss, prog_bar=True)  # shown in the progress bar
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


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


def answers(model: DecoderOnlyTransformer, prompts: Sequence[Sequence[str]] = PROMPTS) -> list[list[str]]:
    """What the model writes after each prompt (greedy, at most until the position table is full), as words."""
    params = {name: value.detach() for name, value in model.state_dict().items()}
    room = model.pe.max_len
    return [decode(greedy_generate(params, encode(p), EOS_ID, room - len(p) + 1)) for p in prompts]


# ------------------------------------------------------------------------------------------------------------
# Training: Lightning's Trainer, and the same steps in a plain loop
# ------------------------------------------------------------------------------------------------------------


def _loader() -> DataLoader:
    """The two sequences, one per step, always in the same order (StatQuest's DataLoader: batch size 1)."""
    return DataLoader(TensorDataset(*statquest_dataset()), batch_size=1, shuffle=False)


@contextlib.contextmanager
def _deterministic_restored() -> Iterator[None]:
    """Lightning's `deterministic=True` switches PyTorch's deterministic algorithms on for the process: undo it."""
    before = torch.are_deterministic_algorithms_enabled()
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(before)


def train_lightning(
    seed: int = 42, epochs: int = 30, lr: float = 0.1, progress_bar: bool = True
) -> DecoderOnlyTransformer:
    """Train a fresh model with Lightning's `Trainer` on CPU and return it.

    Seeded by `L.seed_everything(seed)` before the model is built; `deterministic=True`; no checkpoints and no
    logger, so nothing is written next to the notebook (the Trainer's root is a temporary folder). The loss is
    shown in the progress bar and kept in `model.loss_history`.
    """
    _checks.positive_int("epochs", epochs)
    L.seed_everything(seed, verbose=False)
    model = DecoderOnlyTransformer(lr=lr)
    with tempfile.TemporaryDirectory() as root, _deterministic_restored(), warnings.catch_warnings():
        warnings.filterwarnings("ignore", ".*does not have many workers.*")  # two sequences need no workers
        warnings.filterwarnings("ignore", ".*LeafSpec.*is deprecated.*")  # Lightning's own, not ours
        trainer = L.Trainer(
            max_epochs=epochs,
            accelerator="cpu",
            devices=1,
            deterministic=True,
            logger=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            enable_progress_bar=progress_bar,
            log_every_n_steps=1,
            default_root_dir=root,
        )
        trainer.fit(model, train_dataloaders=_loader())
    return model.eval()


def train_plain(seed: int = 42, epochs: int = 30, lr: float = 0.1) -> DecoderOnlyTransformer:
    """The same training without Lightning: seed, build, then zero_grad / backward / step over the same batches.

    Gives the same parameters as `train_lightning(seed, epochs, lr)`: the same seed before the model is built,
    the same batches in the same order, the same optimizer.
    """
    _checks.positive_int("epochs", epochs)
    L.seed_everything(seed, verbose=False)
    model = DecoderOnlyTransformer(lr=lr)
    optimizer = model.configure_optimizers()
    model.train()
    for _ in range(epochs):
        for batch in _loader():
            loss = model.loss(batch)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            model.loss_history.append(loss.item())
    return model.eval()


@torch.no_grad()
def answer_attention(model: DecoderOnlyTransformer, prompt: Sequence[str]) -> Tensor:
    """Attention weights (T,) of the prompt's last position (its <EOS>), the position whose output is the answer's
    first word: how much it takes from each prompt token."""
    ids = torch.tensor([encode(prompt)])  # (1, T)
    _, weights = model(ids, need_weights=True)  # (1, T, T)
    return weights[0, -1]  # the last query's row: (T,)


def seed_table(seeds: Sequence[int] = SEEDS, epochs: int = 30, lr: float = 0.1) -> list[dict[str, object]]:
    """One row per seed: train with `train_plain`, then record the final loss, both answers and, for each prompt,
    the token its <EOS> position attends to most."""
    rows = []
    for seed in seeds:
        model = train_plain(seed, epochs, lr)
        said = answers(model)
        row: dict[str, object] = {"seed": seed, "final loss": round(model.loss_history[-1], 4)}
        for prompt, words in zip(PROMPTS, said, strict=True):
            row[" ".join(prompt[:-1])] = " ".join(words)
        for prompt in PROMPTS:
            row[f"<EOS> of '{' '.join(prompt[:-1])}' attends to"] = prompt[
                int(answer_attention(model, prompt).argmax())
            ]
        rows.append(row)
    return rows
