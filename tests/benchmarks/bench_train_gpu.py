"""GPT-2 124M training throughput on a GPU: tokens/s and MFU at T = 1024, without and with torch.compile (a script).

    .venv/bin/python tests/benchmarks/bench_train_gpu.py                          # on a CUDA machine
    .venv/bin/python tests/benchmarks/bench_train_gpu.py --micro-batch-size 32     # more rows, if memory allows
    .venv/bin/python tests/benchmarks/bench_train_gpu.py --device cpu --model tiny --seq-len 64 --micro-batch-size 2
                                                  # the timing code path on the CPU, at toy size (not a benchmark)

Each variant trains GPT-2 small as lesson 11 does (`train_cli.build_model("gpt2")`: attention through
F.scaled_dot_product_attention, the vocabulary padded to 50,304 rows), with AdamW (fused on CUDA) and the precision
`train_setup` chooses from the GPU: bf16 from compute capability 8.0 on, fp16 with a GradScaler on older GPUs (a
T4). A step is forward under autocast, backward, gradient clipping and the optimizer step, on random token
batches of B x T (the speed does not depend on what the tokens say). Warm-up steps come first and are timed on
their own: for torch.compile they include the compilation, which is reported and left out of the figures. Each
timed step ends with torch.cuda.synchronize(), so its time is the GPU's, not the time to queue the work.

    tokens/s = B * T / median step time
    MFU      = estimate_mfu(N, 12, 12, 64, T, tokens/s, peak) = FLOPs per token * tokens/s / peak

with N the parameters a token is multiplied by (all but the position table) and `peak` the GPU's dense bf16/fp16
peak from `course_lib.train.PEAK_FLOPS`. The course's target for GPT-2 124M on an H100 is an MFU of 50 % or more.

Without a CUDA GPU the script says so and prints the FLOPs per token and the arithmetic with which a tokens/s
measured on any GPU becomes an MFU; it times nothing and invents no number.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

import torch

from course_lib import train_setup
from course_lib.gpt2 import gpt2_flops_per_token, gpt2_parameter_count
from course_lib.train import PEAK_FLOPS, attention_shape, estimate_mfu, peak_flops
from course_lib.train_cli import build_model

VOCAB = 50257  # GPT-2's tokenizer; build_model pads the embedding to 50,304 rows


def multiplied_parameters(model: torch.nn.Module) -> int:
    """N of the MFU formula: every parameter but the position table (a lookup, not a matmul)."""
    return model.num_parameters(exclude_positions=True)


def no_gpu(seq_len: int) -> None:
    """What can be said without a GPU: the FLOPs per token, and how a measured tokens/s becomes an MFU."""
    print("No CUDA GPU could be used here: nothing was timed, and no tokens/s or MFU is reported.")
    with torch.device("meta"):  # the real sizes without allocating 124M parameters
        model = build_model("gpt2", VOCAB, seq_len)
    n = multiplied_parameters(model)
    c = model.config
    assert n == gpt2_parameter_count(12, 12, 768, c.padded_vocab_size, c.context_length) - c.context_length * 768
    flops = gpt2_flops_per_token(c, seq_len)
    attention = 12 * c.n_layers * c.n_heads * c.d_head * seq_len
    print(f"\nGPT-2 124M (vocabulary padded to {c.padded_vocab_size:,}), T = {seq_len}, one training step per token:")
    print(f"  N = {n:,} multiplied parameters (all but the {c.context_length} x {c.d_model} position table)")
    print(f"  6·N = {6 * n:,} FLOPs  +  12·L·H·D·T = 12·{c.n_layers}·{c.n_heads}·{c.d_head}·{seq_len} = {attention:,}")
    print(f"  = {flops:,} FLOPs per token (forward + backward; one multiply-add = 2 FLOPs)")
    print("\nMFU of your measurement = measured tokens/s x FLOPs per token / peak FLOP/s of your GPU:")
    for gpu, peaks in PEAK_FLOPS.items():
        precision = "fp16" if "bf16" not in peaks else "bf16"
        peak = peaks[precision]
        print(
            f"  {gpu:<9} ({precision}, {peak / 1e12:,.1f} TFLOP/s): MFU = tokens/s x {flops:,} / {peak:.4g}"
            f"; 50 % MFU would be {0.5 * peak / flops:,.0f} tokens/s"
        )
    print("\nRun this script on a CUDA machine to measure tokens/s and MFU with and without torch.compile.")


def run_variant(args: argparse.Namespace, compiled: bool, device: str, precision: str) -> dict:
    """Warm up (compiling, if asked), then time args.steps training steps; returns the measurements."""
    torch.manual_seed(0)
    model = build_model(args.model, VOCAB, args.seq_len).to(device)
    optimizer = train_setup.configure_optimizer(model, 6e-4, 0.1, (0.9, 0.95), torch.device(device).type)
    scaler = train_setup.grad_scaler(device, precision)
    forward = torch.compile(model) if compiled else model
    generator = torch.Generator().manual_seed(1)
    batches = [torch.randint(VOCAB, (args.micro_batch_size, args.seq_len + 1), generator=generator) for _ in range(4)]
    batches = [(b[:, :-1].to(device), b[:, 1:].to(device)) for b in batches]  # (B, T) inputs and targets

    def sync() -> None:
        if device.startswith("cuda"):
            torch.cuda.synchronize()

    def step(i: int) -> float:
        x, y = batches[i % len(batches)]
        sync()
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with train_setup.autocast(device, precision):
            _, loss = forward(x, y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        sync()  # the step's time is the GPU's, not the time to queue its kernels
        return time.perf_counter() - started

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    warmup = [step(i) for i in range(args.warmup)]  # the first one compiles (torch.compile) or warms caches
    times = [step(i) for i in range(args.steps)]
    memory = torch.cuda.max_memory_allocated() / 2**30 if device.startswith("cuda") else float("nan")
    sizes = {"n": multiplied_parameters(model), "shape": attention_shape(model)}  # N; (layers, heads, head size)
    median = statistics.median(times)
    tokens_per_s = args.micro_batch_size * args.seq_len / median
    return {"first_s": warmup[0], "median_s": median, "tokens_per_s": tokens_per_s, "memory_gib": memory} | sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (the code path at toy size)")
    parser.add_argument("--model", default="gpt2", help="gpt2 (124M); tiny only to try the code path")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--micro-batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=5, help="steps before timing (compilation included)")
    parser.add_argument("--variants", default="eager,compile", help="comma-separated: eager, compile")
    args = parser.parse_args()
    torch.set_num_threads(1)

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        no_gpu(args.seq_len)
        return
    device = args.device
    if device.startswith("cuda"):
        torch.set_float32_matmul_precision("high")  # fp32 matmuls outside autocast may use TF32
        name, capability = torch.cuda.get_device_name(device), torch.cuda.get_device_capability(device)
        precision = train_setup.choose_precision("cuda", capability)
        peak = peak_flops(name, precision)
        print(f"{name}, compute capability {capability[0]}.{capability[1]}, {precision}; torch {torch.__version__}")
        print(f"peak: {peak / 1e12:,.1f} TFLOP/s (PEAK_FLOPS)" if peak else "peak: not in PEAK_FLOPS, so no MFU")
    else:
        precision, peak = "fp32", None
        print(f"device {device} (fp32, one thread): this only checks the script's code path; it is not a benchmark")
    sizes = f"B = {args.micro_batch_size}, T = {args.seq_len}"
    print(f"model {args.model}, {sizes}, {args.warmup} warm-up + {args.steps} timed steps per variant")

    print(f"\n{'variant':<8} {'first step s':>12} {'median ms':>10} {'tokens/s':>10} {'MFU':>6} {'peak GiB':>9}")
    for variant in args.variants.split(","):
        result = run_variant(args, variant == "compile", device, precision)
        if device.startswith("cuda"):
            gc.collect()  # the variant's model and optimizer are gone: give their memory back before the next
            torch.cuda.empty_cache()
        mfu = estimate_mfu(result["n"], *result["shape"], args.seq_len, result["tokens_per_s"], peak) if peak else None
        shown = f"{mfu:.1%}" if mfu is not None else "-"
        print(
            f"{variant:<8} {result['first_s']:>12.1f} {result['median_s'] * 1000:>10.1f} "
            f"{result['tokens_per_s']:>10,.0f} {shown:>6} {result['memory_gib']:>9.1f}"
        )
    print("\nfirst step: includes torch.compile's compilation for 'compile'; it is left out of the median and MFU")


if __name__ == "__main__":
    main()
