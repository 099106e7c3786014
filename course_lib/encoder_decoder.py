"""The original transformer (Vaswani et al., 2017): an encoder-decoder, trained and decoded (Lesson 07).

    shift_right             labels -> the decoder's input for teacher forcing: <bos> first, last label dropped
    masked_cross_entropy    the loss over real target tokens only (padding ignored)
    greedy_step             one step of greedy decoding: the next token of every sequence, <eos> stops each
    Seq2SeqConfig           the model's sizes (presets: tiny, small, paper_base)
    EncoderDecoderTransformer
                            token embeddings x sqrt(d_model) + sinusoidal positions, a stack of post-LN encoder
                            layers and one of decoder layers (course_lib.blocks) of the classes given, an output
                            layer tied to the embeddings: the lesson's exercise, which the learner assembles
                            from their lesson 06 EncoderLayer
    greedy_decode           encode once, then append the most likely token until every sequence has its <eos>
    past_only_predictions   each position predicted from the tokens before it only (a test of causality)
    TrainConfig, train      Adam with warm-up, a progress bar and an optional live loss curve
    evaluate                exact match per length on a task's held-out strings

The task the lesson trains on (reversing digit strings) lives in `course_lib.reversal_task`.

Shape legend: B batch, S source positions, T target positions, H heads, L layers, C / d_model channels,
V vocabulary.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib import _checks
from course_lib.blocks import DecoderLayer, EncoderLayer
from course_lib.loss_plots import LossPlot
from course_lib.position import PositionEncoding
from course_lib.reversal_task import BOS_ID, EOS_ID, PAD_ID, VOCAB_SIZE, ReversalTask, exact_match, reversal_batch
from course_lib.train import cosine_lr

__all__ = [
    "shift_right",
    "masked_cross_entropy",
    "greedy_step",
    "Seq2SeqConfig",
    "EncoderDecoderTransformer",
    "greedy_decode",
    "past_only_predictions",
    "TrainConfig",
    "train",
    "evaluate",
]


# ------------------------------------------------------------------------------------------------------------
# Teacher forcing, the loss and one greedy step: the lesson's exercises
# ------------------------------------------------------------------------------------------------------------


def shift_right(labels: Tensor, bos_id: int) -> Tensor:
    """The decoder's input for teacher forcing: <bos>, then the labels without their last token.

    Lesson 07, exercise `shift_right`. Position t of the input holds label t-1, so the decoder predicts label t
    having seen only the labels before it. labels: (B, T) -> (B, T), a new tensor.
    """
    _checks.tensor("labels", labels, "B, T", integer=True)
    _checks.integer("bos_id", bos_id, minimum=0)
    bos = torch.full_like(labels[:, :1], bos_id)  # (B, 1)
    return torch.cat([bos, labels[:, :-1]], dim=1)  # (B, 1) + (B, T-1) -> (B, T)


def masked_cross_entropy(logits: Tensor, targets: Tensor, pad_id: int) -> Tensor:
    """Mean cross-entropy over the target tokens that are not padding: a 0-dim tensor.

    Lesson 07, exercise `masked_cross_entropy`. Every real token weighs the same, whichever sequence it is in.
    logits: (B, T, V), targets: (B, T) -> ().
    """
    _checks.tensors(logits=(logits, "B, T, V"), targets=(targets, "B, T"))
    _checks.tensor("targets", targets, integer=True)
    V = logits.shape[-1]
    # F.cross_entropy wants the classes in dimension 1: flatten (B, T) into one axis of B*T predictions.
    return F.cross_entropy(logits.reshape(-1, V), targets.reshape(-1), ignore_index=pad_id)  # (B*T, V) -> ()


def greedy_step(logits: Tensor, finished: Tensor, eos_id: int, pad_id: int) -> tuple[Tensor, Tensor]:
    """Pick every sequence's next token from the decoder's logits at its last position.

    Lesson 07, exercise `greedy_step`. A sequence that has already finished gets <pad>; one whose new token is
    <eos> is finished from now on. `finished` is not changed in place.
    logits: (B, T, V), finished: (B,) bool -> (next_ids (B,) long, finished (B,) bool).
    """
    _checks.tensors(logits=(logits, "B, T, V"), finished=(finished, "B"))
    _checks.mask("finished", finished, finished.shape)  # bool
    next_ids = logits[:, -1, :].argmax(dim=-1)  # the last position predicts what comes next: (B, V) -> (B,)
    next_ids = torch.where(finished, torch.full_like(next_ids, pad_id), next_ids)  # done: only padding
    return next_ids, finished | (next_ids == eos_id)


# ------------------------------------------------------------------------------------------------------------
# The model
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seq2SeqConfig:
    vocab_size: int = VOCAB_SIZE  # one vocabulary for source and target (as the paper's shared BPE)
    d_model: int = 64  # width of every token vector
    n_heads: int = 4  # attention heads per attention sublayer
    n_layers: int = 2  # encoder layers, and as many decoder layers
    d_hidden: int = 128  # width inside each feed-forward network (the paper: 4 * d_model)
    dropout: float = 0.0  # the paper: 0.1; the reversal task has unlimited data and needs none
    context_length: int = 64  # longest source or target sequence (rows of the position table)
    tie_embeddings: bool = True  # output layer shares the embedding matrix (`is` the same Parameter)
    pad_id: int = PAD_ID  # source positions holding it are never attended to

    def __post_init__(self) -> None:
        _checks.divisible("d_model", self.d_model, "n_heads", self.n_heads)
        _checks.positive_even("d_model", self.d_model, "sin/cos position pairs")
        _checks.positive_ints(
            vocab_size=self.vocab_size,
            n_layers=self.n_layers,
            d_hidden=self.d_hidden,
            context_length=self.context_length,
        )
        _checks.probability("dropout", self.dropout)
        _checks.int_between("pad_id", self.pad_id, 0, self.vocab_size - 1)

    @classmethod
    def tiny(cls) -> Seq2SeqConfig:
        """A model that learns short reversals in seconds (the lesson's autograding run)."""
        return cls(d_model=32, n_heads=2, n_layers=2, d_hidden=64)

    @classmethod
    def small(cls) -> Seq2SeqConfig:
        """The lesson's model: 2 + 2 layers of width 64, about 0.17 M parameters."""
        return cls()

    @classmethod
    def paper_base(cls, vocab_size: int = 37_000) -> Seq2SeqConfig:
        """The 2017 paper's base model (6 + 6 layers, d_model 512, 8 heads, d_ff 2048, dropout 0.1); its
        English-German vocabulary had about 37 000 shared BPE tokens."""
        return cls(vocab_size, 512, 8, 6, 2048, 0.1, 512)


class EncoderDecoderTransformer(nn.Module):
    """The 2017 transformer: an encoder reads the source, a decoder writes the target one token at a time.

    Lesson 07, exercise `EncoderDecoderTransformer`, assembled from lesson 06's layers. The contract:

    - `__init__(config, encoder_layer=EncoderLayer, decoder_layer=DecoderLayer)` keeps `config` and builds
      `tok_emb = nn.Embedding(vocab_size, d_model)`, initialised with std d_model**-0.5 (so that sqrt(d_model) x
      embedding has unit-sized entries and, with the output layer tied to the same matrix, the first logits are
      O(1)); `pos = PositionEncoding(d_model, context_length)` (lesson 03); `dropout = nn.Dropout(dropout)`;
      `encoder`, an nn.ModuleList of n_layers `encoder_layer(d_model, n_heads, d_hidden, dropout)`, and `decoder`,
      one of n_layers `decoder_layer(d_model, n_heads, d_hidden, dropout)` (post-LN and ReLU, the layers'
      defaults, as lesson 06's `EncoderLayer` and `DecoderLayer` are called); `lm_head = nn.Linear(d_model,
      vocab_size, bias=False)`, whose weight *is* `tok_emb.weight` when `config.tie_embeddings`. The layer classes
      are the ones given: lesson 07 passes the learner's `EncoderLayer`, and a broken decoder layer for its
      "spot the bug".
    - Both sides embed with the one shared table: dropout(pos(tok_emb(ids) * sqrt(d_model))).
    - `source_mask(src)`: (B, S) bool, True at real tokens (`src != config.pad_id`).
    - `encode(src, src_mask=None)` -> the memory (B, S, d_model): the embedded source through every encoder layer,
      each given the padding mask (`source_mask(src)` when None).
    - `decode(tgt, memory, src_mask=None, need_weights=False)` -> logits (B, T, V): the embedded target through
      every decoder layer, each reading the same memory with `src_mask` on its cross-attention (None: every source
      position is real), then `lm_head`; with need_weights, (logits, cross-attention weights (L, B, H, T, S)).
    - `forward(src, tgt)` -> logits (B, T, V): teacher forcing, `decode(tgt, encode(src, mask), mask)` with the
      source's padding mask.
    - S or T longer than context_length raises ValueError (the position table has no row for them).
    """

    def __init__(
        self,
        config: Seq2SeqConfig,
        encoder_layer: type[nn.Module] = EncoderLayer,
        decoder_layer: type[nn.Module] = DecoderLayer,
    ) -> None:
        super().__init__()
        _checks.instance("config", config, Seq2SeqConfig, "a Seq2SeqConfig")
        self.config = c = config
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        nn.init.normal_(self.tok_emb.weight, std=c.d_model**-0.5)
        self.pos = PositionEncoding(c.d_model, c.context_length)
        self.dropout = nn.Dropout(c.dropout)
        # Post-LN layers (the 2017 order) end with their own LayerNorm: the stacks need no final one.
        sizes = (c.d_model, c.n_heads, c.d_hidden, c.dropout)
        self.encoder = nn.ModuleList(encoder_layer(*sizes) for _ in range(c.n_layers))
        self.decoder = nn.ModuleList(decoder_layer(*sizes) for _ in range(c.n_layers))
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight  # one Parameter, two uses: (V, C) either way

    def embed(self, ids: Tensor) -> Tensor:
        """(B, T) ids -> (B, T, d_model): embedding x sqrt(d_model) + position, then dropout."""
        _checks.tensor("ids", ids, "B, T<=context_length", integer=True, context_length=self.config.context_length)
        return self.dropout(self.pos(self.tok_emb(ids) * math.sqrt(self.config.d_model)))

    def source_mask(self, src: Tensor) -> Tensor:
        """(B, S) bool, True at real tokens: the keys attention may use (padding never)."""
        return src != self.config.pad_id

    def encode(self, src: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The memory: one vector per source position. src: (B, S), src_mask: (B, S) bool -> (B, S, d_model)."""
        src_mask = self.source_mask(src) if src_mask is None else src_mask
        x = self.embed(src)  # (B, S, C)
        for layer in self.encoder:
            x = layer(x, src_mask)  # every position reads every real source position
        return x

    def decode(
        self, tgt: Tensor, memory: Tensor, src_mask: Tensor | None = None, need_weights: bool = False
    ) -> Tensor | tuple[Tensor, Tensor]:
        """Logits for the next token at every target position.

        tgt: (B, T) decoder input, memory: (B, S, d_model), src_mask: (B, S) bool (None: every position is
        real) -> (B, T, V), or with need_weights (logits, cross-attention weights (L, B, H, T, S)).
        The decoder's self-attention is causal; it needs no padding mask of its own: padding sits after <eos>,
        later than every real position, so the causal mask already hides it from them.
        """
        x = self.embed(tgt)  # (B, T, C)
        cross = []
        for layer in self.decoder:
            # No target padding mask (None); the source's padding blocks the memory's keys in cross-attention.
            x, _, weights = layer(x, memory, None, src_mask, need_weights=True)  # weights (B, H, T, S)
            cross.append(weights)
        logits = self.lm_head(x)  # (B, T, C) -> (B, T, V)
        return (logits, torch.stack(cross)) if need_weights else logits  # weights: L x (B, H, T, S) -> (L, ...)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        """Teacher forcing: src (B, S), tgt = shift_right(labels) (B, T) -> logits (B, T, V)."""
        src_mask = self.source_mask(src)
        return self.decode(tgt, self.encode(src, src_mask), src_mask)


@torch.no_grad()
def greedy_decode(
    model: EncoderDecoderTransformer,
    src: Tensor,
    max_new_tokens: int | None = None,
    bos_id: int = BOS_ID,
    eos_id: int = EOS_ID,
) -> Tensor:
    """Generate the target: encode once, then repeatedly append each sequence's most likely next token.

    Lesson 07. Stops when every sequence has produced <eos> or after `max_new_tokens` (default: the source
    length + 1); after its <eos> a sequence gets <pad>. src: (B, S) -> (B, t) token ids, without the <bos>.
    """
    # Yours or the course's: any module with the exercise's `config`, `source_mask`, `encode` and `decode`.
    _checks.instance("model", model, nn.Module, "an encoder-decoder model (lesson 07's EncoderDecoderTransformer)")
    _checks.tensor("src", src, "B, S", integer=True)
    limit = src.shape[1] + 1 if max_new_tokens is None else max_new_tokens
    _checks.positive_int("max_new_tokens", limit)
    limit = min(limit, model.config.context_length - 1)  # the <bos> takes one position
    was_training = model.training
    model.eval()
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)  # (B, S, C): computed once, read at every step
    out = torch.full((src.shape[0], 1), bos_id, dtype=torch.long, device=src.device)  # (B, 1)
    finished = torch.zeros(src.shape[0], dtype=torch.bool, device=src.device)  # (B,)
    for _ in range(limit):
        logits = model.decode(out, memory, src_mask)  # (B, t, V): the whole prefix again (no KV cache)
        next_ids, finished = greedy_step(logits, finished, eos_id, model.config.pad_id)
        out = torch.cat([out, next_ids[:, None]], dim=1)  # (B, t+1)
        if finished.all():
            break
    model.train(was_training)
    return out[:, 1:]


@torch.no_grad()
def past_only_predictions(
    model: EncoderDecoderTransformer, src: Tensor, labels: Tensor, bos_id: int = BOS_ID
) -> Tensor:
    """What the model predicts at each position t when its input holds only <bos> + labels[:t] (the later
    positions are padding): the situation of greedy decoding, with the right prefix given.

    Lesson 07, "spot the bug". For a decoder that respects causality this equals the teacher-forced argmax; a
    decoder that peeks at later inputs loses what it copied from them. The input keeps the labels' length T.
    src: (B, S), labels: (B, T) -> (B, T) predicted ids.
    """
    _checks.tensors(src=(src, "B, S"), labels=(labels, "B, T"))
    tgt = shift_right(labels, bos_id)  # (B, T)
    src_mask = model.source_mask(src)
    memory = model.encode(src, src_mask)  # (B, S, C)
    predictions = torch.empty_like(labels)
    for t in range(labels.shape[1]):
        prefix = tgt.clone()
        prefix[:, t + 1 :] = model.config.pad_id  # hide everything after position t
        predictions[:, t] = model.decode(prefix, memory, src_mask)[:, t].argmax(dim=-1)  # (B, V) -> (B,)
    return predictions


# ------------------------------------------------------------------------------------------------------------
# Training and evaluation
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 600  # optimizer steps, one fresh batch each
    batch_size: int = 64  # sequences per batch
    lr: float = 3e-3  # peak learning rate, reached after the warm-up
    warmup: int = 100  # steps of linear warm-up; post-LN transformers diverge without one
    log_every: int = 10  # steps between two points of the loss curve

    def __post_init__(self) -> None:
        _checks.positive_ints(steps=self.steps, batch_size=self.batch_size, log_every=self.log_every)
        _checks.int_between("warmup", self.warmup, 0, self.steps - 1, note="the cosine needs steps after it")
        _checks.positive_number("lr", self.lr)

    @classmethod
    def tiny(cls) -> TrainConfig:
        """A few seconds on a laptop CPU: enough to see the loss fall and short strings come out reversed."""
        return cls(steps=250, batch_size=32, lr=5e-3, warmup=30, log_every=5)

    def lr_at(self, step: int) -> float:
        """Linear warm-up to `lr`, then a cosine decay to 0 at the last step: lesson 10's `train.cosine_lr`."""
        return cosine_lr(step, self.lr, 0.0, self.warmup, self.steps)


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """Use n intra-op threads inside the block and restore the previous number after (None: unchanged)."""
    if n is None:
        yield
        return
    _checks.positive_int("num_threads", n)
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train(
    model: EncoderDecoderTransformer,
    task: ReversalTask,
    config: TrainConfig = TrainConfig(),  # noqa: B008 (frozen, so one shared default is safe)
    seed: int = 0,
    *,
    progress: bool = True,
    plot: LossPlot | None = None,
    num_threads: int | None = None,
) -> dict:
    """Train `model` with teacher forcing on fresh batches of `task`; Adam (betas 0.9, 0.98 as in the paper).

    Lesson 07. `seed` fixes the batches (and dropout). `progress` shows a tqdm bar; `plot` gets the mean loss
    every `log_every` steps (make it with `redraw_every` of a second or two: drawing a PNG can cost more than a
    step) and is shown complete at the end. `num_threads`: torch's intra-op threads during training, restored
    after (None: unchanged). Returns {"steps": [...], "losses": [...], "seconds": wall time}. The model is left in
    eval mode.
    """
    from tqdm.auto import tqdm  # imported here: the library's other users need no progress bars

    _checks.instance("config", config, TrainConfig, "a TrainConfig")
    if plot is not None:
        _checks.instance("plot", plot, LossPlot, "a course_lib.loss_plots.LossPlot")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr, betas=(0.9, 0.98), eps=1e-9, foreach=True)
    pad_id = model.config.pad_id
    history: dict = {"steps": [], "losses": []}
    window: list[float] = []
    start = time.perf_counter()
    with _threads(num_threads), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)  # dropout's randomness, without touching the caller's random state
        model.train()
        bar = tqdm(range(config.steps), disable=not progress, desc="training", mininterval=0.5)
        for step in bar:
            for group in optimizer.param_groups:
                group["lr"] = config.lr_at(step)
            src, labels = task.sample(config.batch_size, generator)  # (B, S), (B, S)
            logits = model(src, shift_right(labels, BOS_ID))  # (B, S, V)
            loss = masked_cross_entropy(logits, labels, pad_id)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            window.append(loss.item())
            if len(window) == config.log_every or step == config.steps - 1:
                history["steps"].append(step)
                history["losses"].append(sum(window) / len(window))
                window.clear()
                bar.set_postfix(loss=f"{history['losses'][-1]:.4f}", refresh=False)
                if plot is not None:
                    plot.update(step, train_loss=history["losses"][-1])
        bar.close()
    if plot is not None:
        plot.show()
    model.eval()
    history["seconds"] = time.perf_counter() - start
    return history


@torch.no_grad()
def evaluate(
    model: EncoderDecoderTransformer, task: ReversalTask, batch_size: int = 500, num_threads: int | None = None
) -> dict[int, float]:
    """{length: fraction of the held-out strings of that length reversed exactly (greedy decoding)}. Lesson 07.

    `num_threads` as in `train`.
    """
    with _threads(num_threads):
        return {n: _exact_match_rate(model, strings, batch_size) for n, strings in task.held_out.items()}


def _exact_match_rate(model: EncoderDecoderTransformer, strings: list[str], batch_size: int) -> float:
    right = 0
    for i in range(0, len(strings), batch_size):
        src, labels = reversal_batch(strings[i : i + batch_size])
        right += int(exact_match(greedy_decode(model, src), labels, model.config.pad_id).sum())
    return right / len(strings)
