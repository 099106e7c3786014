"""A training process started by tests/test_train_processes.py (directly, under torchrun, or by Lightning).

    python tests/train_driver.py loop DATA OUT [--pause-at STEP] [--resume]   our loop; JSON records on stdout;
                                  at --pause-at it prints PAUSED and waits to be killed
    python tests/train_driver.py lightning DATA OUT DEVICES                   the same run through Lightning

Every process writes its gradients, parameters and losses to OUT/rank<r>.pt at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # `tests` importable when run as a script

from course_lib.train import train  # noqa: E402
from tests.train_helpers import config, tiny_model, train_losses  # noqa: E402

# The settings of the process tests: 12 steps, dropout (so the RNG state matters), a checkpoint every 4.
SETTINGS = {"max_steps": 12, "checkpoint_interval": 4, "grad_clip": 0.0}


def _save(out: Path, model: torch.nn.Module, losses: list[float]) -> None:
    rank = int(os.environ.get("RANK", os.environ.get("LOCAL_RANK", "0")))
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    params = {n: p.detach().clone() for n, p in model.named_parameters()}
    torch.save({"grads": grads, "params": params, "losses": losses}, out / f"rank{rank}.pt")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["loop", "lightning"])
    parser.add_argument("data", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("devices", type=int, nargs="?", default=1)
    parser.add_argument("--pause-at", type=int, default=-1)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--total-tokens", type=int)
    parser.add_argument("--max-steps", type=int, default=SETTINGS["max_steps"])
    parser.add_argument("--clip", type=float, default=SETTINGS["grad_clip"])
    args = parser.parse_args()
    torch.set_num_threads(1)
    settings = SETTINGS | {"micro_batch_size": args.batch, "total_batch_tokens": args.total_tokens}
    settings |= {"max_steps": args.max_steps, "grad_clip": args.clip}
    cfg = config(args.data, checkpoint_path=str(args.out / "ck.pt"), **settings)
    model = tiny_model(dropout=args.dropout)

    if args.mode == "loop":

        def on_log(record: dict) -> None:
            print(json.dumps(record), flush=True)
            if record["kind"] == "train" and record["step"] == args.pause_at:
                print("PAUSED", flush=True)
                time.sleep(600)  # the test kills us here, mid-run, with unsaved steps after the checkpoint

        records = train(model, cfg, on_log=on_log, resume=args.resume)
        _save(args.out, model, train_losses(records))
        return

    from course_lib.train_lightning import GPTLightningModule, lightning_trainer, shard_dataloader

    module = GPTLightningModule(model, cfg)
    strategy = "ddp" if args.devices > 1 else "auto"
    trainer = lightning_trainer(cfg, devices=args.devices, strategy=strategy, accelerator="cpu")
    trainer.fit(module, train_dataloaders=shard_dataloader(cfg, cfg.max_steps, world_size=args.devices))
    _save(args.out, model, module.losses)


if __name__ == "__main__":
    main()
