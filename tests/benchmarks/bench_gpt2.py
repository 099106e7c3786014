"""The course's GPT-2 against Hugging Face's GPT2LMHeadModel on the CPU, and what the KV cache buys (a script).

    .venv/bin/python tests/benchmarks/bench_gpt2.py                      # 4 layers, d_model 256, GPT-2's vocab
    .venv/bin/python tests/benchmarks/bench_gpt2.py --threads 2 --rounds 20

Training: every model holds the same weights (Hugging Face's random init, copied into ours) and dropout 0, so
they compute the same function; each runs forward, cross-entropy on the next tokens, backward and an AdamW
step on its own copy. Rounds interleave the variants, so a change in the machine's load hits all of them alike.
tokens/s = B * T / the median step time; "vs HF" divides ours by Hugging Face's with the same attention path
(explicit = HF "eager", SDPA = HF "sdpa"), both measured in this run. The loss column is the first step's.

Generation: greedy continuation of a prompt, new tokens per second (median over repeats) for our generate
with the KV cache, without it (every step recomputes the whole sequence), and Hugging Face's generate (with its
cache); the ids of all three must agree, or the script stops.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import torch
import torch.nn.functional as F
from transformers import GPT2Config as HFConfig
from transformers import GPT2LMHeadModel

from course_lib.generate import generate
from course_lib.gpt2 import gpt2_flops_per_token
from course_lib.gpt2_weights import from_hf_model


def _hf(args: argparse.Namespace, attn: str) -> GPT2LMHeadModel:
    config = HFConfig(
        vocab_size=args.vocab,
        n_positions=args.context,
        n_embd=args.d_model,
        n_layer=args.layers,
        n_head=args.heads,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=args.vocab - 1,
        eos_token_id=args.vocab - 1,
    )
    torch.manual_seed(args.seed)  # the same initial weights for every variant
    return GPT2LMHeadModel._from_config(config, attn_implementation=attn)


def _train_step(model, optimizer, x, y, ours: bool) -> float:
    optimizer.zero_grad(set_to_none=True)
    logits = model(x)[0] if ours else model(input_ids=x).logits  # (B, T, V)
    loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))  # the same loss for both
    loss.backward()
    optimizer.step()
    return loss.item()


def bench_training(args: argparse.Namespace) -> None:
    variants = {}
    for attn, label in (("eager", "explicit"), ("sdpa", "SDPA")):
        hf = _hf(args, attn).train()
        ours = from_hf_model(hf, use_sdpa=attn == "sdpa").train()
        variants[f"HF {attn}"] = (hf, False)
        variants[f"ours {label}"] = (ours, True)
    optimizers = {name: torch.optim.AdamW(m.parameters(), lr=1e-4) for name, (m, _) in variants.items()}
    gen = torch.Generator().manual_seed(args.seed)
    data = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=gen)
    x, y = data[:, :-1], data[:, 1:]  # (B, T) each: next-token targets

    first_loss = {name: _train_step(m, optimizers[name], x, y, o) for name, (m, o) in variants.items()}
    for _ in range(args.warmup - 1):
        for name, (m, o) in variants.items():
            _train_step(m, optimizers[name], x, y, o)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, (m, o) in variants.items():
            start = time.perf_counter()
            _train_step(m, optimizers[name], x, y, o)
            times[name].append(time.perf_counter() - start)

    tokens = args.batch * args.seq
    median = {name: statistics.median(t) for name, t in times.items()}
    n_params = variants["ours explicit"][0].num_parameters()
    flops = gpt2_flops_per_token(variants["ours explicit"][0].config, args.seq)
    print(f"\n## Training step, B={args.batch}, T={args.seq}, {n_params:,} parameters, {flops / 1e6:.1f} MFLOPs/token")
    print(f"median of {args.rounds} interleaved rounds after {args.warmup} warm-up steps\n")
    print("| variant | median ms/step | tokens/s | vs HF (same attention) | GFLOP/s | first-step loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for name in variants:
        twin = {"ours explicit": "HF eager", "ours SDPA": "HF sdpa"}.get(name)
        ratio = f"{median[twin] / median[name]:.2f}x" if twin else ""
        rate = tokens / median[name]
        print(
            f"| {name} | {1e3 * median[name]:.1f} | {rate:,.0f} | {ratio} | {rate * flops / 1e9:.1f} "
            f"| {first_loss[name]:.6f} |"
        )


def bench_generation(args: argparse.Namespace) -> None:
    hf = _hf(args, "sdpa").eval()
    ours = from_hf_model(hf, use_sdpa=True).eval()
    prompt = torch.randint(0, args.vocab - 1, (1, args.prompt), generator=torch.Generator().manual_seed(args.seed))

    def hf_generate():
        return hf.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=args.new,
            do_sample=False,
            eos_token_id=None,
            pad_token_id=args.vocab - 1,
        )

    runs = {
        "ours, KV cache": lambda: generate(ours, prompt, args.new, greedy=True),
        "ours, recompute": lambda: generate(ours, prompt, args.new, greedy=True, use_cache=False),
        "HF generate (cache)": hf_generate,
    }
    outputs = {name: fn() for name, fn in runs.items()}  # also the warm-up
    reference = outputs["ours, KV cache"]
    for name, out in outputs.items():
        if not torch.equal(out, reference):
            raise SystemExit(f"{name} generated other ids than ours with the cache")
    times: dict[str, list[float]] = {name: [] for name in runs}
    with torch.no_grad():
        for _ in range(args.gen_repeats):
            for name, fn in runs.items():
                start = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) for name, t in times.items()}
    print(f"\n## Greedy generation, prompt {args.prompt} tokens, {args.new} new, batch 1")
    print(f"median of {args.gen_repeats} interleaved repeats after a warm-up; identical ids in all three\n")
    print("| variant | median s | new tokens/s | speed-up vs recompute |")
    print("|---|---:|---:|---:|")
    for name in runs:
        rate = args.new / median[name]
        print(f"| {name} | {median[name]:.3f} | {rate:.1f} | {median['ours, recompute'] / median[name]:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--d-model", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=50257)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256, help="training sequence length")
    parser.add_argument("--warmup", type=int, default=2, help="untimed training steps per variant (>= 1)")
    parser.add_argument("--rounds", type=int, default=10, help="timed training steps per variant")
    parser.add_argument("--prompt", type=int, default=32, help="prompt length for generation")
    parser.add_argument("--new", type=int, default=128, help="new tokens to generate")
    parser.add_argument("--gen-repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads for the run")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--skip", choices=["training", "generation"], default=None)
    args = parser.parse_args()
    if args.warmup < 1 or args.prompt + args.new > args.context or args.seq > args.context:
        parser.error("need --warmup >= 1, --seq <= --context and --prompt + --new <= --context")
    torch.set_num_threads(args.threads)

    import transformers

    cpu = platform.processor() or platform.machine()
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}"
    print(f"{versions}, {cpu}, {os.cpu_count()} cores, ", end="")
    print(f"{args.threads} thread(s), load average at start {load}")
    print(f"config: {args.layers} layers, {args.heads} heads, d_model {args.d_model}, vocab {args.vocab}, ", end="")
    print(f"context {args.context}, fp32")
    if args.skip != "training":
        bench_training(args)
    if args.skip != "generation":
        bench_generation(args)
    print(f"\nload average at end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
