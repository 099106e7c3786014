"""Lesson 11 — the command line of the training loop, ``python -m course_lib.train``: this module reads it (the
parser, the --smoke preset, the data folder) into one TrainConfig (course_lib.train_setup), the model preset and its
dropout included, with one --flag per setting; course_lib.train's `main`, which this module does not import, runs
the TrainConfig it returns.

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
import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from course_lib.data import cache_dir
from course_lib.train_data import hub_documents, prepare_documents, prepare_tiny_shakespeare
from course_lib.train_setup import TrainConfig

HUB_DATASETS = {  # name -> (Hugging Face path, configuration)
    "fineweb-edu": ("HuggingFaceFW/fineweb-edu", "sample-10BT"),
    "tinystories": ("roneneldan/TinyStories", None),
}
SMOKE = {"micro_batch_size": 4, "seq_len": 64, "max_steps": 20, "warmup_steps": 4, "max_lr": 1e-3}
SMOKE |= {"eval_interval": 10, "eval_batches": 2, "sample_interval": 10, "sample_tokens": 16, "precision": "fp32"}


def default_data_dir(dataset: str) -> Path:
    return cache_dir() / "shards" / dataset


@dataclass(frozen=True)
class Command:
    """What a `run` command line asks for: the run's settings, all in one TrainConfig, and how to start it."""

    config: TrainConfig
    resume: bool = False  # continue from config.checkpoint_path if it exists
    log: Path | None = None  # also append the JSON log records to this file


def read_command_line(argv: list[str] | None = None) -> Command | None:
    """``prepare | run [flags]``: `prepare` prepares the data here and returns None; `run` returns the Command, its
    data folder prepared first when it is Tiny Shakespeare's (offline, a few seconds)."""
    args = parse_args(argv)
    if args.command == "prepare":
        print(f"prepared {prepare(args)}")
        return None
    config = TrainConfig(data_dir=str(data_dir_for(args)), **settings(args))
    return Command(config, resume=args.resume, log=args.log)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The parsed command line: one --flag per TrainConfig setting."""
    return _parser().parse_args(argv)


def _parser() -> argparse.ArgumentParser:
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
    run.add_argument("--resume", action="store_true", help="continue from --checkpoint if it exists")
    run.add_argument("--log", type=Path, help="also append the JSON log records to this file")
    for fld in dataclasses.fields(TrainConfig):  # one --flag per setting, model and dropout included
        if fld.name in ("data_dir", "betas"):
            continue
        flag = "--" + fld.name.replace("_", "-")
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


def settings(args: argparse.Namespace) -> dict:
    """TrainConfig's keyword arguments from the flags given (after the --smoke preset, if asked for)."""
    chosen = dict(SMOKE) if args.smoke else {}
    names = {fld.name for fld in dataclasses.fields(TrainConfig)} - {"data_dir"}
    return chosen | {k: v for k, v in vars(args).items() if k in names and v is not None}


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
