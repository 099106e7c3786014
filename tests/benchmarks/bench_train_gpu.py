"""GPT-2 124M training throughput against its peers, on one GPU (a script, not a test).

    python tests/benchmarks/bench_train_gpu.py                                  # course vs Hugging Face, on CUDA
    python tests/benchmarks/bench_train_gpu.py --nanogpt /tmp/nanoGPT           # + nanoGPT's model.py
    python tests/benchmarks/bench_train_gpu.py --ablation                       # one change at a time (minutes)
    python tests/benchmarks/bench_train_gpu.py --device cpu --tiny --variants eager   # the code path on a CPU

**Models**, each in this process with the same settings: the course's GPT-2 (`train_setup.build_model("gpt2")`:
attention through F.scaled_dot_product_attention, vocabulary padded to 50,304 rows); Hugging Face's
`GPT2LMHeadModel` with attn_implementation="sdpa", always; and, with `--nanogpt PATH`, nanoGPT's `GPT` from
PATH/model.py, imported from that checkout (nothing of it is copied here). All three are GPT-2 small with biases,
tied embeddings, dropout 0 and the same padded vocabulary, so they have the same parameters and the same FLOPs per
token (checked). Each gets its loss as `F.cross_entropy` of its logits over all T positions.

**A step** is what lesson 11's loop does: zero_grad, forward under autocast (bf16 from compute capability 8.0 on,
fp16 with a GradScaler before), backward, unscale, gradient clipping at 1.0, AdamW (`train_setup.configure_optimizer`:
fused on CUDA), on random token batches of B x T (the speed does not depend on what the tokens say). Warm-up
steps come first and are timed apart: with torch.compile they include the compilation. Each timed step ends with
torch.cuda.synchronize(), so its time is the GPU's.

    tokens/s = B * T / median step time;   MFU = (6 N + 12 L H D T) * tokens/s / peak
    peak     = train_setup.find_peak: the GPU's datasheet figure (PEAK_FLOPS), or a measured matmul peak
    memory   = torch.cuda.max_memory_allocated() during the variant
    ratio    = course tokens/s / peer tokens/s (above 1: the course's model is faster)

`--ablation` starts from the course's model, compiled, at `--micro-batch-size`, and changes one thing at a time:
the SDPA backend (flash, cuDNN, memory-efficient, math; torch.nn.attention.sdpa_kernel), the micro-batch (half,
double), torch.compile's mode ("max-autotune-no-cudagraphs", "reduce-overhead" and "max-autotune", which use CUDA
graphs), and AdamW without the fused kernel. None of them edits `course_lib/gpt2.py`. A change that fails (a
backend this GPU lacks, out of memory) is reported as such.

Without a CUDA GPU (and without `--device cpu`) the script prints the FLOPs per token and the arithmetic that
turns a measured tokens/s into an MFU, and times nothing. `--json FILE` also writes the rows as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from course_lib import train_setup
from course_lib.gpt2 import gpt2_flops_per_token, gpt2_parameter_count
from course_lib.train import attention_shape, estimate_mfu
from course_lib.train_setup import build_model

VOCAB = 50257  # GPT-2's tokenizer; every model pads its embedding to 50,304 rows
TINY = {"n_layer": 2, "n_head": 4, "n_embd": 64}  # the course's "tiny" preset


class PeerLM(nn.Module):
    """A peer's model with the course's interface: forward(idx, targets) -> (logits, loss over all T)."""

    def __init__(self, model: nn.Module, kind: str):
        super().__init__()
        self.model, self.kind = model, kind

    def forward(self, idx, targets):
        if self.kind == "hf":
            logits = self.model(input_ids=idx).logits  # (B, T, V)
        else:  # nanoGPT returns (logits, loss) for targets given; the loss is the same mean cross-entropy
            logits, _ = self.model(idx, targets)
        return logits, F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


def hf_model(dims: dict, seq_len: int, padded_vocab: int) -> nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        vocab_size=padded_vocab, n_positions=seq_len if dims == TINY else 1024, **dims,
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, attn_implementation="sdpa",
        bos_token_id=min(50256, padded_vocab - 1), eos_token_id=min(50256, padded_vocab - 1),
    )  # fmt: skip
    model = GPT2LMHeadModel(config)
    assert model.config._attn_implementation == "sdpa", model.config._attn_implementation
    return PeerLM(model, "hf")


def nanogpt_model(checkout: Path, dims: dict, seq_len: int, padded_vocab: int) -> nn.Module:
    """nanoGPT's GPT from checkout/model.py, imported under its own module name (never copied)."""
    spec = importlib.util.spec_from_file_location("nanogpt_model", checkout / "model.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["nanogpt_model"] = module  # its dataclass needs to find its module
    spec.loader.exec_module(module)
    block = seq_len if dims == TINY else 1024
    config = module.GPTConfig(block_size=block, vocab_size=padded_vocab, dropout=0.0, bias=True, **dims)
    with contextlib.redirect_stdout(sys.stderr):  # it prints its parameter count
        return PeerLM(module.GPT(config), "nanogpt")


def build(name: str, args: argparse.Namespace) -> nn.Module:
    torch.manual_seed(0)
    course = build_model("tiny" if args.tiny else "gpt2", VOCAB, args.seq_len)
    if name == "course":
        return course
    dims = TINY if args.tiny else {"n_layer": 12, "n_head": 12, "n_embd": 768}
    padded = course.config.padded_vocab_size
    return (
        hf_model(dims, args.seq_len, padded)
        if name == "hf"
        else nanogpt_model(args.nanogpt, dims, args.seq_len, padded)
    )


def multiplied_parameters(model: nn.Module) -> int:
    """N of the MFU formula: the unique parameters but the position table (looked up, not multiplied)."""
    unique = {id(p): p for p in model.parameters()}  # tied weights once
    positions = [
        m.weight for n, m in model.named_modules() if n.split(".")[-1] in ("pos_emb", "position_embedding", "wpe")
    ]
    return sum(p.numel() for p in unique.values()) - sum(p.numel() for p in positions)


def run_variant(name: str, args, device: str, precision: str, *, compile_mode=None, micro=None, fused=True,
                backend=None) -> dict:  # fmt: skip
    """Warm up (compiling, if asked), then time args.steps training steps of model `name`."""
    micro = micro or args.micro_batch_size
    model = build(name, args).to(device)
    kind = torch.device(device).type
    optimizer = train_setup.configure_optimizer(model, 6e-4, 0.1, (0.9, 0.95), kind if fused else "cpu")
    scaler = train_setup.grad_scaler(device, precision)
    forward = (
        model
        if compile_mode is None
        else torch.compile(model, mode=None if compile_mode == "default" else compile_mode)
    )
    generator = torch.Generator().manual_seed(1)
    batches = [torch.randint(VOCAB, (micro, args.seq_len + 1), generator=generator) for _ in range(4)]
    batches = [(b[:, :-1].contiguous().to(device), b[:, 1:].contiguous().to(device)) for b in batches]  # (B, T) x, y

    def sync() -> None:
        if kind == "cuda":
            torch.cuda.synchronize()

    def step(i: int) -> tuple[float, float]:
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
        sync()
        return time.perf_counter() - started, loss.item()

    if kind == "cuda":
        torch.cuda.reset_peak_memory_stats()
    attention = contextlib.nullcontext()
    if backend is not None:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        attention = sdpa_kernel(getattr(SDPBackend, backend))
    with attention:
        warmup = [step(i) for i in range(args.warmup)]
        timed = [step(i) for i in range(args.steps)]
    memory = torch.cuda.max_memory_allocated() / 2**30 if kind == "cuda" else float("nan")
    median = statistics.median(t for t, _ in timed)
    return {
        "first_s": warmup[0][0] if warmup else float("nan"),
        "median_s": median,
        "tokens_per_s": micro * args.seq_len / median,
        "memory_gib": memory,
        "first_loss": (warmup or timed)[0][1],
        "n": multiplied_parameters(model),
        "shape": attention_shape(model) or _peer_shape(args),
        "micro": micro,
    }


def _peer_shape(args) -> tuple[int, int, int]:
    return (2, 4, 16) if args.tiny else (12, 12, 64)  # (layers, heads, head size)


def _free(device: str) -> None:
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    torch._dynamo.reset()  # each variant compiles afresh; nothing carries over to the next one


def measure(label: str, model: str, mode: str, args, device, precision, peak, **options) -> dict:
    row = {"label": label, "model": model, "mode": mode}
    try:
        result = run_variant(model, args, device, precision, **options)
    except Exception as error:  # out of memory, a backend this GPU lacks: say so and go on
        _free(device)
        return row | {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:100]}"}
    _free(device)
    mfu = estimate_mfu(result["n"], *result["shape"], args.seq_len, result["tokens_per_s"], peak.flops)
    return row | result | {"mfu": mfu}


def _show(rows: list[dict], reference: dict | None = None) -> None:
    print(f"{'variant':<44} {'B':>3} {'first s':>8} {'ms/step':>8} {'tokens/s':>10} {'MFU':>7} {'GiB':>6} {'ratio':>6}")
    for row in rows:
        if "error" in row:
            print(f"{row['label']:<44} failed: {row['error']}")
            continue
        ratio = f"{row['tokens_per_s'] / reference[row['mode']]['tokens_per_s']:.2f}" if reference else ""
        print(
            f"{row['label']:<44} {row['micro']:>3} {row['first_s']:>8.1f} {row['median_s'] * 1000:>8.1f} "
            f"{row['tokens_per_s']:>10,.0f} {row['mfu']:>7.1%} {row['memory_gib']:>6.1f} {ratio:>6}"
        )


def peers(args, device, precision, peak) -> list[dict]:
    names = ["course", "hf"] + (["nanogpt"] if args.nanogpt else [])
    titles = {"course": "course GPT2 (use_sdpa)", "hf": "Hugging Face GPT2LMHeadModel (sdpa)", "nanogpt": "nanoGPT GPT"}
    rows = []
    for mode in args.variants.split(","):
        for name in names:
            rows.append(measure(f"{titles[name]}, {mode}", name, mode, args, device, precision, peak,
                                compile_mode="default" if mode == "compile" else None))  # fmt: skip
    ok = [r for r in rows if "error" not in r]
    if len({r["n"] for r in ok}) > 1:
        print(f"WARNING: the models differ in size: {sorted({(r['model'], r['n']) for r in ok})}")
    print(f"\nN = {ok[0]['n']:,} multiplied parameters each" if ok else "")
    _show(rows)
    print("\nratio = course tokens/s / peer tokens/s, same mode (above 1: the course's model is faster):")
    for mode in args.variants.split(","):
        course = next((r for r in ok if r["model"] == "course" and r["mode"] == mode), None)
        for r in (r for r in ok if r["mode"] == mode and r["model"] != "course"):
            if course:
                memory = f"; memory {course['memory_gib']:.1f} vs {r['memory_gib']:.1f} GiB" if device != "cpu" else ""
                print(f"  {mode:<8} course / {r['model']:<8} {course['tokens_per_s'] / r['tokens_per_s']:.3f}{memory}")
    return rows


def ablation(args, device, precision, peak) -> list[dict]:
    base = {"compile_mode": "default"}
    changes = [
        ("course, compiled (baseline)", base),
        ("eager (no torch.compile)", {}),
        ("SDPA backend: flash attention", base | {"backend": "FLASH_ATTENTION"}),
        ("SDPA backend: cuDNN attention", base | {"backend": "CUDNN_ATTENTION"}),
        ("SDPA backend: memory-efficient", base | {"backend": "EFFICIENT_ATTENTION"}),
        ("SDPA backend: math (no fused kernel)", base | {"backend": "MATH"}),
        (f"micro-batch {args.micro_batch_size // 2}", base | {"micro": max(1, args.micro_batch_size // 2)}),
        (f"micro-batch {args.micro_batch_size * 2}", base | {"micro": args.micro_batch_size * 2}),
        ("compile mode max-autotune-no-cudagraphs", {"compile_mode": "max-autotune-no-cudagraphs"}),
        ("compile mode reduce-overhead (CUDA graphs)", {"compile_mode": "reduce-overhead"}),
        ("compile mode max-autotune (CUDA graphs)", {"compile_mode": "max-autotune"}),
        ("AdamW without the fused kernel", base | {"fused": False}),
    ]
    rows = [measure(label, "course", "compile", args, device, precision, peak, **opts) for label, opts in changes]
    print("\nablation: the course's model, one change at a time (ratio: tokens/s over the baseline's)")
    baseline = rows[0] if "error" not in rows[0] else None
    _show(rows, {"compile": baseline} if baseline else None)
    return rows


def no_gpu(seq_len: int) -> None:
    """What can be said without a GPU: the FLOPs per token, and how a measured tokens/s becomes an MFU."""
    print("No CUDA GPU could be used here: nothing was timed, and no tokens/s or MFU is reported.")
    with torch.device("meta"):  # the real sizes without allocating 124M parameters
        model = build_model("gpt2", VOCAB, seq_len)
    n = multiplied_parameters(model)
    c = model.config
    assert n == gpt2_parameter_count(12, 12, 768, c.padded_vocab_size, c.context_length) - c.context_length * 768
    flops = gpt2_flops_per_token(c, seq_len)
    print(f"GPT-2 124M, T = {seq_len}: N = {n:,}; 6·N + 12·L·H·D·T = {flops:,} FLOPs per token")
    for gpu, peaks in train_setup.PEAK_FLOPS.items():
        precision = "bf16" if "bf16" in peaks else "fp16"
        print(f"  {gpu:<10} ({precision}, {peaks[precision] / 1e12:,.1f} TFLOP/s): 50 % MFU = "
              f"{0.5 * peaks[precision] / flops:,.0f} tokens/s")  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda", help="cuda (the benchmark) or cpu (the code path)")
    parser.add_argument("--tiny", action="store_true", help="a 2-layer model of width 64 (to try the code path)")
    parser.add_argument("--nanogpt", type=Path, help="a nanoGPT checkout: add its model.py's GPT as a peer")
    parser.add_argument("--seq-len", type=int, default=None, help="T (default 1024; 64 with --tiny)")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="B (default 16; 2 with --tiny)")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--warmup", type=int, default=5, help="steps before timing (compilation included)")
    parser.add_argument("--variants", default="compile,eager", help="comma-separated: compile, eager")
    parser.add_argument("--ablation", action="store_true", help="one change at a time, instead of the peers")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    args = parser.parse_args(argv)
    args.seq_len = args.seq_len or (64 if args.tiny else 1024)
    args.micro_batch_size = args.micro_batch_size or (2 if args.tiny else 16)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        no_gpu(args.seq_len)
        return []
    device = args.device
    if device.startswith("cuda"):
        torch.set_float32_matmul_precision("high")  # fp32 matmuls outside autocast may use TF32
        capability = torch.cuda.get_device_capability(device)
        precision = train_setup.choose_precision("cuda", capability)
    else:
        precision = "fp32"
    peak = train_setup.find_peak(device, precision)
    print(f"{train_setup.device_name(device)}, {precision}, torch {torch.__version__}; MFU {peak.label}: "
          f"{peak.flops / 1e9:,.0f} GFLOP/s")  # fmt: skip
    print(
        f"T = {args.seq_len}, B = {args.micro_batch_size}, {args.warmup} warm-up + {args.steps} timed steps per variant"
    )
    if peak.source == "datasheet":  # how much of the datasheet's peak plain matrix products reach here
        matmul = train_setup.measure_matmul_peak(device, precision)
        print(f"8192 x 8192 {precision} matmuls measured: {matmul / 1e12:,.1f} TFLOP/s ({matmul / peak.flops:.0%})")
    if device == "cpu":
        print("(on a CPU this checks the script's code path; it is not a benchmark)")
    rows = ablation(args, device, precision, peak) if args.ablation else peers(args, device, precision, peak)
    print("\nfirst s: the warm-up's first step (compilation included); left out of ms/step, tokens/s and MFU")
    if args.json:
        args.json.write_text(
            json.dumps({"device": train_setup.device_name(device), "peak": peak.__dict__, "rows": rows})
        )
    return rows


if __name__ == "__main__":
    main()
