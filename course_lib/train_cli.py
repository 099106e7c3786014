"""Lesson 11 — the pieces of the command line of the training loop, ``python -m course_lib.train``
(its ``main`` lives in course_lib.train, which this module does not import).

    python -m course_lib.train prepare                    Tiny Shakespeare -> shards (offline)
    python -m course_lib.train prepare --dataset fineweb-edu --max-documents 100000     (online)
    python -m course_lib.train run --smoke                a tiny model on the CPU, under a minute
    python -m course_lib.train run --model gpt2 --total-batch-tokens 524288 --compile   a GPU run
    torchrun --nproc_per_node=2 -m course_lib.train run ...                             several GPUs (DDP)

A run prints one JSON line per log record (``--log FILE`` also appends them to a file) and resumes from its
checkpoint with ``--resume``, so after a disconnect the same command plus ``--resume`` continues the run.

Shape legend: none here (argument parsing).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

from torch import nn

from course_lib.data import cache_dir
from course_lib.train_data import hub_documents, prepare_documents, prepare_tiny_shakespeare

HUB_DATASETS = {  # name -> (Hugging Face path, configuration)
    "fineweb-edu": ("HuggingFaceFW/fineweb-edu", "sample-10BT"),
    "tinystories": ("roneneldan/TinyStories", None),
}
SMOKE = {"micro_batch_size": 4, "seq_len": 64, "max_steps": 20, "warmup_steps": 4, "max_lr": 1e-3}
SMOKE |= {"eval_interval": 10, "eval_batches": 2, "sample_interval": 10, "sample_tokens": 16, "precision": "fp32"}


def default_data_dir(dataset: str) -> Path:
    return cache_dir() / "shards" / dataset


GPT2_PRESETS = {"gpt2": "small", "gpt2-small": "small", "gpt2-medium": "medium", "gpt2-large": "large"}
GPT2_PRESETS["gpt2-xl"] = "xl"


def build_model(name: str, vocab_size: int, seq_len: int, dropout: float = 0.0) -> nn.Module:
    """A GPT2 by preset name: "tiny" (2 layers, d_model 64, for CPU smoke runs) or one of OpenAI's sizes
    ("gpt2" = 124M, "gpt2-medium", "gpt2-large", "gpt2-xl"). Attention runs through
    F.scaled_dot_product_attention (flash attention on a GPU); the vocabulary is padded to a multiple of 64."""
    from course_lib.gpt2 import GPT2, GPT2Config

    options = {"vocab_size": vocab_size, "dropout": dropout, "pad_vocab_multiple": 64, "use_sdpa": True}
    if name == "tiny":
        return GPT2(GPT2Config(context_length=seq_len, n_layers=2, n_heads=4, d_model=64, **options))
    if name not in GPT2_PRESETS:
        raise ValueError(f"`--model` must be 'tiny' or one of {sorted(GPT2_PRESETS)}, got {name!r}")
    config = getattr(GPT2Config, GPT2_PRESETS[name])(**options)
    if seq_len > config.context_length:
        raise ValueError(f"`--seq-len`={seq_len} is longer than {name}'s context of {config.context_length}")
    return GPT2(config)


def parse_args(argv: list[str] | None, config_class: type) -> argparse.Namespace:
    """The parsed command line; `config_class` (TrainConfig) gives one --flag per setting."""
    return _parser(config_class).parse_args(argv)


def _parser(config_class: type) -> argparse.ArgumentParser:
    what = "Train a GPT on token shards (lesson 11): `prepare` the data once, then `run` (resumable)."
    parser = argparse.ArgumentParser(prog="python -m course_lib.train", description=what)
    commands = parser.add_subparsers(dest="command", required=True)
    prep = commands.add_parser("prepare", help="tokenize a corpus into uint16 shards")
    prep.add_argument("--dataset", default="tinyshakespeare", choices=["tinyshakespeare", *HUB_DATASETS])
    prep.add_argument("--out", type=Path, help="output folder (default: the data cache)")
    prep.add_argument("--max-documents", type=int, help="stop after this many documents (hub datasets)")
    prep.add_argument("--val-tokens", type=int, default=1_000_000, help="tokens of the val split (hub datasets)")
    prep.add_argument("--shard-tokens", type=int, default=100_000_000)

    run = commands.add_parser("run", help="train (resumable; under torchrun on several GPUs)")
    run.add_argument("--smoke", action="store_true", help="a tiny CPU configuration that runs in under a minute")
    run.add_argument("--dataset", default="tinyshakespeare", help="prepared automatically if it is Tiny Shakespeare")
    run.add_argument("--data-dir", type=Path, help="a prepared shard folder (default: the dataset's in the cache)")
    run.add_argument("--model", default="tiny")
    run.add_argument("--dropout", type=float, default=0.0)
    run.add_argument("--resume", action="store_true", help="continue from --checkpoint if it exists")
    run.add_argument("--log", type=Path, help="also append the JSON log records to this file")
    for name, fld in config_class.__dataclass_fields__.items():
        if name in ("data_dir", "extra", "betas"):
            continue
        flag = "--" + name.replace("_", "-")
        if fld.type == "bool":
            run.add_argument(flag, action="store_true", default=None)
        else:
            kind = {"int": int, "float": float}.get(fld.type.split(" ")[0], str)
            run.add_argument(flag, type=kind, default=None, help=f"default: {fld.default}")
    return parser


def prepare(args: argparse.Namespace) -> Path:
    out = args.out or default_data_dir(args.dataset)
    if args.dataset == "tinyshakespeare":
        prepare_tiny_shakespeare(out, shard_tokens=args.shard_tokens)
    else:
        documents = hub_documents(*HUB_DATASETS[args.dataset], limit=args.max_documents)
        prepare_documents(documents, out, val_tokens=args.val_tokens, shard_tokens=args.shard_tokens)
    return out


def data_dir_for(args: argparse.Namespace) -> Path:
    """The shard folder of a run; Tiny Shakespeare is prepared on first use (offline, a few seconds)."""
    data_dir = args.data_dir or default_data_dir(args.dataset)
    if not (data_dir / "shards.json").exists() and args.dataset == "tinyshakespeare" and args.data_dir is None:
        prepare_tiny_shakespeare(data_dir)
    return data_dir


def settings(args: argparse.Namespace, config_class: type) -> dict:
    """TrainConfig's keyword arguments from the flags given (after the --smoke preset, if asked for)."""
    chosen = dict(SMOKE) if args.smoke else {}
    fields = config_class.__dataclass_fields__
    chosen |= {k: v for k, v in vars(args).items() if k in fields and k != "data_dir" and v is not None}
    return chosen | {"extra": {"model": args.model, "dropout": args.dropout}}


@contextlib.contextmanager
def json_log(path: Path | None) -> Iterator[Callable[[dict], None]]:
    """An on_log callback that prints each record as one JSON line and appends it to `path` (if given)."""
    if path:
        path.parent.mkdir(parents=True, exist_ok=True)  # `--log runs/log.jsonl` in a fresh folder
    file = open(path, "a") if path else None  # noqa: SIM115 (closed below)

    def on_log(record: dict) -> None:
        line = json.dumps(record)
        print(line, flush=True)
        if file:
            file.write(line + "\n")
            file.flush()

    try:
        yield on_log
    finally:
        if file:
            file.close()
