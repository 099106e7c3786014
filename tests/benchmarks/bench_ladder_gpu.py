"""Lesson 12's ladder at GPT-2 small's size, on one GPU (a script, not a test): tokens/s and validation loss after
the same number of training tokens, for every rung.

    python tests/benchmarks/bench_ladder_gpu.py --tokens 20_000_000                  # on CUDA, Tiny Shakespeare
    python tests/benchmarks/bench_ladder_gpu.py --data DIR --tokens 200_000_000      # lesson 11's shards in DIR
    python tests/benchmarks/bench_ladder_gpu.py --device cpu --tiny --tokens 2048   # the code path on a CPU

**Rungs**: `ladder.modern_ladder`, as in the lesson (GPT-2, + RMSNorm, + RoPE, + SwiGLU, + GQA with 6 key/value
heads for 12 query heads, + no biases, + QK-norm, + Muon), each a `ModernGPT` with GPT-2 small's sizes (12 layers
of 768, 12 heads, context `--seq-len`, the vocabulary padded to 50,304 rows; from "+ no biases" on, where every switch
is modern, its blocks are `modern.ModernBlock`s), attention through F.scaled_dot_product_attention, initialised with
`gpt.init_gpt2` after `torch.manual_seed(--seed)`.

**Data**: lesson 11's token shards (`--data DIR`, written by `python -m course_lib.train prepare`), or, without
it, Tiny Shakespeare in GPT-2's tokens (`train_data.prepare_tiny_shakespeare`, offline: about 300 thousand training
tokens, so a run of millions of tokens repeats them many times, and the printed epochs say how many). Every rung
reads the same batches in the same order and is evaluated on the same first `--val-batches` batches of "val".

**A step**: forward under autocast (bf16 from compute capability 8.0, fp16 with a GradScaler before, fp32 on a
CPU), backward, gradient clipping at 1.0, the rung's optimizers (`ladder.rung_optimizers`: AdamW at 6e-4 with
betas (0.9, 0.95) and decay 0.1 on matrices, or Muon at 0.02 for the blocks' matrices and that AdamW for the
rest), the lesson's schedule (`ladder.lr_factor`: a linear warm-up over the first 10 % of the steps, then
1/sqrt(step)). No torch.compile unless `--compile` (eager is what the lesson runs).

    tokens/s   = B * T * timed steps / their seconds (the first `--warmup` steps are not timed; each timed step
                 ends with torch.cuda.synchronize(), so its time is the GPU's)
    val loss   = mean cross-entropy over the validation batches, after `--tokens` training tokens

Measured figures depend on the GPU, its clocks, the software and the data: this script prints them, nothing in the
course asserts them. `--json FILE` also writes the rows.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # course_lib from this checkout (it need not be installed)

import torch  # noqa: E402

from course_lib import ladder, train_data, train_setup  # noqa: E402
from course_lib.gpt import init_gpt2  # noqa: E402
from course_lib.modern_gpt import ModernConfig, ModernGPT  # noqa: E402

PADDED_VOCAB = 50304  # GPT-2's 50,257 ids, padded to a multiple of 64 (as lesson 11's model)
SIZES = {"small": dict(d_model=768, n_heads=12, n_layers=12), "tiny": dict(d_model=64, n_heads=4, n_layers=2)}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=20_000_000, help="training tokens per rung")
    parser.add_argument("--data", type=Path, help="lesson 11's shards (default: Tiny Shakespeare, prepared here)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--tiny", action="store_true", help="2 layers of 64, contexts of 64: checks the script")
    parser.add_argument("--batch-size", type=int, help="rows a step (default 16; tiny 4)")
    parser.add_argument("--seq-len", type=int, help="tokens a row (default 1024; tiny 64)")
    parser.add_argument("--val-batches", type=int, help="validation batches (default 20; tiny 2)")
    parser.add_argument("--warmup", type=int, help="steps not timed (default 5; tiny 1)")
    parser.add_argument("--seed", type=int, default=0, help="draws every rung's initial weights")
    parser.add_argument("--compile", action="store_true", help="torch.compile each model")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    defaults = (4, 64, 2, 1) if args.tiny else (16, 1024, 20, 5)
    for name, value in zip(("batch_size", "seq_len", "val_batches", "warmup"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, value)
    return args


def run_rung(rung: ladder.Rung, args, device: str, precision: str, data: Path, steps: int) -> dict:
    """Train one rung for `steps` steps on the shards in `data`; its tokens/s and validation loss."""
    torch.manual_seed(args.seed)
    model = init_gpt2(ModernGPT(rung.config)).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    settings = ladder.LadderSettings(
        steps=steps, batch_size=args.batch_size, lr=6e-4, betas=(0.9, 0.95), warmup_steps=max(1, steps // 10)
    )
    optimizers = ladder.rung_optimizers(model, rung, settings)
    peaks = [[group["lr"] for group in opt.param_groups] for opt in optimizers]
    forward = torch.compile(model) if args.compile else model
    scaler = train_setup.grad_scaler(device, precision)  # scales the loss for fp16 only
    loader = train_data.ShardLoader(data, "train", args.batch_size, args.seq_len)
    on_gpu = torch.device(device).type == "cuda"
    if on_gpu:
        torch.cuda.reset_peak_memory_stats()
    timed, train_loss = [], float("nan")
    model.train()
    for step in range(steps):
        started = time.perf_counter()
        for opt, peak in zip(optimizers, peaks, strict=True):
            for group, lr in zip(opt.param_groups, peak, strict=True):
                group["lr"] = lr * ladder.lr_factor(step, settings.warmup_steps)
        x, y = (t.to(device, non_blocking=True) for t in loader.next_batch())  # (B, T) each
        with train_setup.autocast(device, precision):
            _, loss = forward(x, y)
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        for opt in optimizers:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for opt in optimizers:
            scaler.step(opt)
        scaler.update()
        if on_gpu:
            torch.cuda.synchronize()
        if step >= args.warmup:
            timed.append(time.perf_counter() - started)
        if step == steps - 1:
            train_loss = loss.item()
    val = train_data.ShardLoader(data, "val", args.batch_size, args.seq_len)
    model.eval()
    losses = []
    with torch.no_grad():
        for _ in range(args.val_batches):
            x, y = (t.to(device) for t in val.next_batch())
            with train_setup.autocast(device, precision):
                losses.append(forward(x, y)[1].item())
    tokens_per_step = args.batch_size * args.seq_len
    return {
        "rung": rung.label,
        "params": n_params,
        "steps": steps,
        "tokens": steps * tokens_per_step,
        "epochs": loader.epoch,
        "tokens_per_s": tokens_per_step * len(timed) / sum(timed) if timed else float("nan"),
        "median_step_ms": 1000 * statistics.median(timed) if timed else float("nan"),
        "train_loss": train_loss,
        "val_loss": statistics.fmean(losses),
        "peak_memory_gib": torch.cuda.max_memory_allocated() / 2**30 if on_gpu else float("nan"),
    }


def main(argv: list[str] | None = None) -> list[dict]:
    args = parse(argv)
    device = args.device
    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA GPU here: pass --device cpu --tiny to check the script on a CPU")
    precision = train_setup.resolve_precision("auto", device)
    steps = args.tokens // (args.batch_size * args.seq_len)
    if steps < 2 or steps <= args.warmup:
        raise SystemExit(f"--tokens {args.tokens} gives {steps} steps of {args.batch_size} x {args.seq_len}: "
                         f"more than --warmup {args.warmup} (and at least 2) are needed")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="ladder-shards-") as scratch:
        data = args.data
        if data is None:
            data = Path(scratch)
            train_data.prepare_tiny_shakespeare(data)
        sizes = SIZES["tiny" if args.tiny else "small"]
        gpt2 = ModernConfig(PADDED_VOCAB, args.seq_len, **sizes, use_sdpa=True)
        print(f"{train_setup.device_name(device)}, {precision}, torch {torch.__version__}; {sizes}, "
              f"{steps} steps of {args.batch_size} x {args.seq_len} = {steps * args.batch_size * args.seq_len:,} "
              f"tokens a rung; data {args.data or 'Tiny Shakespeare (GPT-2 tokens)'}", flush=True)  # fmt: skip
        rows = []
        for rung in ladder.modern_ladder(gpt2):
            row = run_rung(rung, args, device, precision, data, steps)
            rows.append(row)
            print(f"{row['rung']:<12} {row['params']:>12,} params  {row['tokens_per_s']:>10,.0f} tokens/s  "
                  f"val loss {row['val_loss']:.3f}  (train {row['train_loss']:.3f}, {row['epochs']} epochs, "
                  f"{row['peak_memory_gib']:.1f} GiB)", flush=True)  # fmt: skip
    first = rows[0]
    print("\n| rung | parameters | tokens/s | vs GPT-2 | val loss | change |\n|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['rung']} | {row['params']:,} | {row['tokens_per_s']:,.0f} | "
              f"{row['tokens_per_s'] / first['tokens_per_s']:.2f} | {row['val_loss']:.3f} | "
              f"{row['val_loss'] - first['val_loss']:+.3f} |")  # fmt: skip
    if args.json:
        settings = {k: str(v) for k, v in vars(args).items()}
        report = {"device": train_setup.device_name(device), "precision": precision, "args": settings, "rows": rows}
        args.json.write_text(json.dumps(report, indent=1))
    return rows


if __name__ == "__main__":
    main()
