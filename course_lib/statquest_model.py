"""StatQuest's toy decoder-only transformer as a Lightning `LightningModule`, and its training (Lesson 08).

    DecoderOnlyTransformer  embedding + sinusoidal position + attention + residual + output layer, with
                            `training_step` and `configure_optimizers`
    train_lightning         Lightning's `Trainer`: seeded, deterministic, no checkpoints, no log files, no
                            advertising tips in the output
    train_plain             the same module trained by a plain PyTorch loop: the same steps, the same result
    answers                 what a trained model says after each prompt, as words
    answer_attention        the attention row of the position that writes the answer (the prompt's <EOS>)
    seed_table              train one model per seed (plain loop) and record what each answers and attends to
    SEEDS                   the seeds of the lesson's seed table

The tensor parts (vocabulary, dataset, attention, `decoder_only_forward`, `greedy_generate`) are in
`course_lib.statquest`.

Shape legend: B batch, T time, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import contextlib
import logging
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
from course_lib.statquest import EOS_ID, PROMPTS, Attention, decode, encode, greedy_generate, statquest_dataset

__all__ = [
    "SEEDS",
    "DecoderOnlyTransformer",
    "train_lightning",
    "train_plain",
    "answers",
    "answer_attention",
    "seed_table",
]

SEEDS: tuple[int, ...] = tuple(range(30))  # the seeds of the lesson's seed table, every one tested


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


# Lightning logs its messages through these loggers (lightning_utilities' rank_zero helpers, re-pointed by fabric and
# then by lightning.pytorch). Among them are tips that advertise Lightning's cloud services ("💡 Tip: For seamless
# cloud logging ... try installing litlogger", "... litmodels"), printed under every Trainer of the lesson.
_LIGHTNING_LOGGERS = ("lightning.pytorch.utilities.rank_zero", "lightning.fabric.utilities.rank_zero")
ADVERTISEMENT = "💡 Tip:"  # how each of those tips begins


class _NoAdvertisement(logging.Filter):
    """Drop Lightning's "💡 Tip: ... try installing ..." records; every other message and warning passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(ADVERTISEMENT)


@contextlib.contextmanager
def _without_advertisements() -> Iterator[None]:
    """Filter Lightning's advertising tips out of its log for the duration (the filter is removed afterwards)."""
    loggers, no_tips = [logging.getLogger(name) for name in _LIGHTNING_LOGGERS], _NoAdvertisement()
    for logger in loggers:
        logger.addFilter(no_tips)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(no_tips)


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
    shown in the progress bar and kept in `model.loss_history`. Lightning's tips advertising its cloud services
    are filtered out of its log; its other messages and warnings are not.
    """
    _checks.positive_int("epochs", epochs)
    L.seed_everything(seed, verbose=False)
    model = DecoderOnlyTransformer(lr=lr)
    with (
        tempfile.TemporaryDirectory() as root,
        _deterministic_restored(),
        _without_advertisements(),
        warnings.catch_warnings(),
    ):
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
