"""Small, learnable token shards and a tiny model, shared by the tests of the training loop."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from course_lib.gpt import init_gpt2
from course_lib.gpt2 import GPT2, GPT2Config
from course_lib.train import TrainConfig
from course_lib.train_data import write_shards
from tests.char_gpt import CharGPT
from tests.learner_gpt import LearnerGPT

VOCAB = 32


def markov_tokens(n: int, seed: int = 0) -> np.ndarray:
    """n tokens of a Markov chain whose next token is one of two per current token: a model can learn it
    (loss falls from ln 32 = 3.47 toward ln 2 = 0.69), so training visibly works."""
    rng = np.random.default_rng(seed)
    table = rng.integers(0, VOCAB, size=(VOCAB, 2))
    out = np.empty(n, dtype=np.int64)
    out[0] = 0
    choices = rng.integers(0, 2, size=n)
    for i in range(1, n):
        out[i] = table[out[i - 1], choices[i]]
    return out


def make_shards(data_dir: Path, train_tokens: int = 6000, val_tokens: int = 1200, shard_tokens: int = 2000) -> Path:
    """Markov tokens in uint16 shards: "train" split over several shards, "val" from another stretch."""
    tokens = markov_tokens(train_tokens + val_tokens)
    write_shards(
        {"train": [tokens[:train_tokens]], "val": [tokens[train_tokens:]]},
        data_dir,
        VOCAB,
        shard_tokens=shard_tokens,
        tokenizer="markov",
    )
    return data_dir


def tiny_model(seed: int = 0, dropout: float = 0.0, block_size: int = 16, kind: str = "char") -> torch.nn.Module:
    """The tests' CharGPT (tests/char_gpt.py: untied head), or (kind="gpt2") lesson 10's GPT2 with its tied head, or
    (kind="learner") a learner's GPT written without course_lib (tests/learner_gpt.py) with GPT-2's initialisation,
    as lesson 11 trains it; all about 30k parameters."""
    torch.manual_seed(seed)
    if kind == "gpt2":
        gpt2_config = GPT2Config(VOCAB, block_size, n_layers=2, n_heads=4, d_model=32, dropout=dropout)
        return GPT2(gpt2_config)
    if kind == "learner":
        return init_gpt2(LearnerGPT(VOCAB, block_size, 32, 4, 2, dropout))
    return CharGPT(VOCAB, block_size, d_model=32, n_layers=2, n_heads=4, dropout=dropout)


def config(data_dir: Path, **changes) -> TrainConfig:
    settings = {"micro_batch_size": 4, "seq_len": 16, "max_steps": 8, "warmup_steps": 2, "max_lr": 3e-3}
    settings |= {"min_lr": 3e-4, "eval_interval": 0, "precision": "fp32", "device": "cpu"}
    return TrainConfig(data_dir=str(data_dir), **(settings | changes))


def train_losses(records: list[dict]) -> list[float]:
    return [r["loss"] for r in records if r["kind"] == "train"]
