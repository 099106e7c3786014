"""Lesson 11 — one training loop for GPT models: the lesson calls it, the command line calls it, torchrun runs it.

    cosine_lr(step, ...)           learning rate: linear warm-up, then a cosine decay to min_lr (lesson 10)
    grad_accum_steps(...)          how many micro-batches add up to the batch size we want (lesson 11)
    training_step(model, micro_batches, optimizer, ...)   one optimizer step, the loop's (lesson 11)
    estimate_mfu(...)              model FLOPs utilisation: the fraction of the GPU's peak we use (lesson 11)
    rank_batch(...)                the block of tokens one of several processes trains on (lesson 11; defined in
                                   train_data, by the loader that uses it, re-exported for the lesson's `ref`)
    PEAK_FLOPS, peak_flops(...)    dense bf16/fp16 tensor-core peaks of common GPUs (train_setup, re-exported)
    TrainConfig, train(model, config, on_log=...)      the loop itself (TrainConfig: train_setup, re-exported)
    time_the_loop(model, config)   a few steps of the loop, timed, and the model put back: what plans a run

`train` takes any module with ``forward(idx, targets) -> (logits, loss)`` (lesson 09's GPT, GPT-2).
One optimizer step is `training_step`: `grad_accum_steps` micro-batches, each forward under autocast (bf16 /
fp16 / fp32 chosen from the device, see train_setup), loss / accum backward (through a GradScaler for fp16),
gradient clipping, AdamW at the schedule's learning rate. Every step is logged with tokens/s and MFU;
evaluation, samples and checkpoints come at intervals; a time budget stops the run cleanly (with a checkpoint)
before Colab would.

Several GPUs: start the same command under ``torchrun --nproc_per_node=N``. Each process reads its own
block of every batch (ShardLoader), PyTorch's DistributedDataParallel averages the gradients during the last
micro-batch's backward (``no_sync`` skips the all-reduce on the others), rank 0 logs and saves.

Shape legend: B micro-batch rows, T time (seq_len), V vocabulary.
"""

from __future__ import annotations

import contextlib
import functools
import math
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from course_lib import _checks, train_setup
from course_lib.checkpoint import load_checkpoint, rng_state, save_checkpoint, set_rng_state
from course_lib.generate import sample_next_token
from course_lib.train_data import ShardLoader, rank_batch, read_header
from course_lib.train_setup import PEAK_FLOPS, TrainConfig, gpu_model, peak_flops  # re-exported

# rank_batch is lesson 11's third exercise, re-exported from train_data (see the docstring).
__all__ = ["PEAK_FLOPS", "TrainConfig", "cosine_lr", "estimate_mfu", "grad_accum_steps", "peak_flops", "rank_batch"]
__all__ += ["evaluate", "gpu_model", "main", "sample", "time_the_loop", "train", "training_step"]

# ------------------------------------------------------------------------------------------------------------
# The three formulas of the lessons
# ------------------------------------------------------------------------------------------------------------


def cosine_lr(step: int, max_lr: float, min_lr: float, warmup_steps: int, max_steps: int) -> float:
    """Lesson 10, exercise `cosine_lr`: linear warm-up to max_lr, cosine decay to min_lr at max_steps.

    Warm-up starts at max_lr/warmup_steps, not 0 (a step with lr 0 would be wasted); after max_steps the
    rate stays at min_lr.
    """
    _checks.int_between("step", step, 0)
    _checks.int_between("warmup_steps", warmup_steps, 0)
    _checks.positive_int("max_steps", max_steps)
    if warmup_steps >= max_steps:
        raise ValueError(f"`warmup_steps`={warmup_steps} must be smaller than `max_steps`={max_steps}")
    if step < warmup_steps:
        return max_lr * (step + 1) / warmup_steps
    if step > max_steps:
        return min_lr
    ratio = (step - warmup_steps) / (max_steps - warmup_steps)  # 0 -> 1 over the decay
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (max_lr - min_lr)


def grad_accum_steps(total_batch_tokens: int, micro_batch_size: int, seq_len: int, world_size: int = 1) -> int:
    """Lesson 11, exercise `grad_accum_steps`: micro-batches per optimizer step, per process.

    One micro-batch of all processes together holds micro_batch_size * seq_len * world_size tokens.
    """
    _checks.positive_ints(
        total_batch_tokens=total_batch_tokens, micro_batch_size=micro_batch_size, seq_len=seq_len, world_size=world_size
    )
    per_micro_step = micro_batch_size * seq_len * world_size
    if total_batch_tokens % per_micro_step:
        raise ValueError(
            f"`total_batch_tokens`={total_batch_tokens} must be a multiple of micro_batch_size * seq_len * "
            f"world_size = {micro_batch_size} * {seq_len} * {world_size} = {per_micro_step}"
        )
    return total_batch_tokens // per_micro_step


def estimate_mfu(
    n_params: int, n_layers: int, n_heads: int, d_head: int, seq_len: int, tokens_per_second: float, peak_flops: float
) -> float:
    """Lesson 11, exercise `estimate_mfu`: achieved FLOP/s over the hardware's peak.

    Per token, the forward and backward passes through the weights cost 6 FLOPs per parameter (2 forward,
    4 backward), and attention adds 12 * n_layers * n_heads * d_head * seq_len (scores and weighted sum,
    forward and backward) — the estimate of the PaLM paper, appendix B, as nanoGPT uses it.
    """
    _checks.positive_number("peak_flops", peak_flops)
    flops_per_token = 6 * n_params + 12 * n_layers * n_heads * d_head * seq_len
    return flops_per_token * tokens_per_second / peak_flops


def training_step(
    model: nn.Module,
    micro_batches: list[tuple[torch.Tensor, torch.Tensor]],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None = None,
    autocast: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext,
    clip_norm: float = 1.0,
    *,
    no_sync: Callable[[], contextlib.AbstractContextManager] | None = None,
    stats: dict | None = None,
) -> float:
    """Lesson 11, exercise `training_step`: one optimizer step over `micro_batches` (x, y pairs, each (B, T));
    returns their mean loss, a float read with one `.item()` at the end (each `.item()` waits for the GPU).

    `optimizer.zero_grad(set_to_none=True)` once; per micro-batch `with autocast(): _, loss = model(x, y)`, the
    loss divided by `len(micro_batches)` (gradients add up across backward calls: to the mean's), backward
    (through `scaler.scale(loss)` with a scaler, for fp16). Then `scaler.unscale_(optimizer)` if a scaler,
    `clip_grad_norm_(model.parameters(), clip_norm)`, and `scaler.step(optimizer); scaler.update()` (the step
    is skipped if the gradients overflowed) or `optimizer.step()`. The course's loop also passes `no_sync` (DDP
    averages across processes in the last micro-batch's backward only) and `stats` ("grad_norm": before clipping).
    """
    if not micro_batches:
        raise ValueError("`micro_batches` is empty: a step needs at least one (x, y) pair")
    optimizer.zero_grad(set_to_none=True)  # once: the micro-batches' gradients add up from here
    losses = []  # each micro-batch's share of the mean loss, kept as tensors: no wait for the GPU in the loop
    for i, (x, y) in enumerate(micro_batches):
        last = i == len(micro_batches) - 1
        with no_sync() if no_sync is not None and not last else contextlib.nullcontext():
            with autocast():
                _, loss = model(x, y)
            loss = loss / len(micro_batches)  # the gradients of the micro-batches add up to the mean's
            losses.append(loss.detach().float())
            (scaler.scale(loss) if scaler is not None else loss).backward()
    if scaler is not None:
        scaler.unscale_(optimizer)  # clip the true gradients, not the scaled ones
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)  # the norm before clipping
    if scaler is not None:
        scaler.step(optimizer)  # skipped when the gradients overflowed; the scale is then lowered
        scaler.update()
    else:
        optimizer.step()
    if stats is not None:
        stats["grad_norm"] = grad_norm
    return sum(losses).item()  # the shares add up to the mean; .item() waits for the GPU, once


def attention_shape(model: nn.Module) -> tuple[int, int, int] | None:
    """(n_layers, n_heads, d_head) for the MFU formula, from the attention modules: those with an int `n_heads` and
    an `out_proj` (lesson 05's names: the course's attention and yours), whose D is `out_proj.in_features //
    n_heads`. None for a model without them."""
    layers = [m for m in model.modules() if isinstance(getattr(m, "n_heads", None), int) and hasattr(m, "out_proj")]
    if not layers:
        return None
    first = layers[0]
    return len(layers), first.n_heads, first.out_proj.in_features // first.n_heads


# ------------------------------------------------------------------------------------------------------------
# The loop
# ------------------------------------------------------------------------------------------------------------


def _all_mean(value: torch.Tensor, dist: train_setup.Distributed) -> torch.Tensor:
    if dist.enabled:
        torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.SUM)
        value = value / dist.world_size
    return value


@torch.no_grad()
def evaluate(model: nn.Module, loader: ShardLoader, batches: int, device: str, precision: str) -> torch.Tensor:
    """Mean loss over the first `batches` micro-batches of `loader` (always the same ones), in eval mode."""
    model.eval()
    loader.reset()
    total = torch.zeros((), device=device)
    for _ in range(batches):
        x, y = (t.to(device) for t in loader.next_batch())
        with train_setup.autocast(device, precision):
            _, loss = model(x, y)
        total += loss.float()
    model.train()
    return total / batches


@torch.no_grad()
def sample(model: nn.Module, prompt_ids: list[int], n_tokens: int, context: int, generator: torch.Generator):
    """Sample `n_tokens` ids after `prompt_ids` (top-50, temperature 1; lesson 10's sample_next_token) with
    its own generator, so sampling never moves the training RNG (a resumed run must draw the same dropout
    masks). Any model with forward(idx) -> (logits, _) works: no KV cache, the window is recomputed."""
    model.eval()
    idx = torch.tensor([prompt_ids], device=generator.device)  # (1, T)
    for _ in range(n_tokens):
        logits, _ = model(idx[:, -context:])  # (1, T, V)
        last = logits[:, -1, :].float()  # (1, V)
        next_id = sample_next_token(last, top_k=min(50, last.shape[-1]), generator=generator)  # (1, 1)
        idx = torch.cat([idx, next_id], dim=1)  # (1, T+1)
    model.train()
    return idx[0, len(prompt_ids) :].tolist()


def train(
    model: nn.Module,
    config: TrainConfig,
    *,
    on_log: Callable[[dict], None] | None = None,
    resume: bool = False,
    step_fn: Callable[..., float] | None = None,
) -> list[dict]:
    """Train `model` as `config` says; returns the log records (rank 0) and passes each to `on_log` as it comes.

    Records: {"kind": "start", "model" (the model's class, module and name), "device", ...},
    {"kind": "train", "step", "loss", "lr", "grad_norm", "dt_s", "tokens_per_s", "mfu"},
    {"kind": "eval", "step", "val_loss"}, {"kind": "sample", "step", "text"}, {"kind": "checkpoint", ...}; each
    also has "elapsed_s", the seconds since `train` was called, taken when the record was made.
    With `resume`, training continues from `config.checkpoint_path` (if it exists) exactly where it stopped.
    Each optimizer step is `training_step`, or `step_fn` (lesson 11 runs the loop on the learner's own
    `training_step`): it is called with the exercise's arguments only, so its records have no "grad_norm" (None)
    and, with several processes, every micro-batch's gradients are averaged (correct, but slower than no_sync).
    """
    cfg, started, records = config, time.perf_counter(), []
    dist = train_setup.distributed_from_env()
    device = train_setup.init_distributed(dist, cfg.device)
    precision = train_setup.resolve_precision(cfg.precision, device)
    total_tokens = cfg.total_batch_tokens or cfg.micro_batch_size * cfg.seq_len * dist.world_size
    accum = grad_accum_steps(total_tokens, cfg.micro_batch_size, cfg.seq_len, dist.world_size)
    torch.manual_seed(cfg.seed + dist.rank)  # dropout differs between ranks, as batches do

    def log(record: dict) -> None:
        if dist.is_main:
            record["elapsed_s"] = time.perf_counter() - started
            records.append(record)
            if on_log:
                on_log(record)

    raw_model = model.to(device)
    optimizer = train_setup.configure_optimizer(
        raw_model, cfg.max_lr, cfg.weight_decay, cfg.betas, torch.device(device).type
    )
    scaler = train_setup.grad_scaler(device, precision)
    loader = ShardLoader(cfg.data_dir, "train", cfg.micro_batch_size, cfg.seq_len, **_ranks(dist))
    val_loader = ShardLoader(cfg.data_dir, "val", cfg.micro_batch_size, cfg.seq_len, **_ranks(dist))
    start_step = 0
    if resume and cfg.checkpoint_path and Path(cfg.checkpoint_path).exists():
        state = load_checkpoint(cfg.checkpoint_path)  # on the CPU: RNG states must stay there
        train_setup.check_resumable(state["config"], cfg, state["world_size"], dist.world_size)
        raw_model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        loader.load_state_dict(state["data"])
        set_rng_state(state["rng"][dist.rank])
        start_step = state["step"]
        log({"kind": "resume", "step": start_step, "path": str(cfg.checkpoint_path)})
    fused = bool(optimizer.defaults.get("fused"))
    log(
        {"kind": "start", "step": start_step, "model": f"{type(raw_model).__module__}.{type(raw_model).__qualname__}"}
        | {"device": device, "precision": precision, "fused_adamw": fused}
        | {"compile": cfg.compile, "grad_accum_steps": accum, "world_size": dist.world_size}
    )
    model = torch.compile(raw_model) if cfg.compile else raw_model
    if dist.enabled:
        device_ids = [dist.local_rank] if device.startswith("cuda") else None
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=device_ids)

    def save(next_step: int) -> None:
        rngs = [rng_state()]
        if dist.enabled:  # every rank's dropout generator, so each resumes its own stream
            rngs = [None] * dist.world_size
            torch.distributed.all_gather_object(rngs, rng_state())
        if dist.is_main and cfg.checkpoint_path:
            state = {"model": raw_model.state_dict(), "optimizer": optimizer.state_dict(), "step": next_step}
            state |= {"scaler": scaler.state_dict(), "data": loader.state_dict(), "rng": rngs}
            state |= {"config": train_setup.plain_config(cfg), "world_size": dist.world_size}
            save_checkpoint(cfg.checkpoint_path, state)
            log({"kind": "checkpoint", "step": next_step, "path": str(cfg.checkpoint_path)})

    n_params = sum(p.numel() for p in raw_model.parameters())
    shape = attention_shape(raw_model)
    peak = cfg.peak_flops or peak_flops(train_setup.device_name(device), precision)  # None: no MFU (a CPU)
    step_args = {  # the step's settings besides model, micro-batches and optimizer; no scaler unless fp16
        "scaler": scaler if scaler.is_enabled() else None,
        "autocast": functools.partial(train_setup.autocast, device, precision),
        "clip_norm": cfg.grad_clip if cfg.grad_clip > 0 else math.inf,  # 0 = no clipping
    }
    encoding = _encoding(loader.header) if cfg.sample_interval else None
    for step in range(start_step, cfg.max_steps):
        out_of_time = torch.tensor(float(cfg.max_time_s is not None and time.perf_counter() - started > cfg.max_time_s))
        if _all_mean(out_of_time.to(device), dist).item() > 0:  # all ranks stop together
            log({"kind": "stop", "step": step, "reason": f"time budget of {cfg.max_time_s} s used up"})
            if cfg.checkpoint_path:
                save(step)
            return records
        if cfg.eval_interval and step % cfg.eval_interval == 0:
            val_loss = _all_mean(evaluate(model, val_loader, cfg.eval_batches, device, precision), dist)
            log({"kind": "eval", "step": step, "val_loss": val_loss.item()})
        if encoding is not None and dist.is_main and step % cfg.sample_interval == 0:
            generator = torch.Generator(device=device).manual_seed(cfg.seed + step)
            prompt = encoding.encode_ordinary(cfg.sample_prompt)
            ids = sample(raw_model, prompt, cfg.sample_tokens, cfg.seq_len, generator)
            log({"kind": "sample", "step": step, "text": encoding.decode(ids)})

        t0 = time.perf_counter()
        model.train()
        lr = cosine_lr(step, cfg.max_lr, cfg.min_lr, cfg.warmup_steps, cfg.max_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        micro_batches = [tuple(t.to(device, non_blocking=True) for t in loader.next_batch()) for _ in range(accum)]
        stats = {}
        if step_fn is None:  # the course's step, with DDP's no_sync and the gradient norm for the log
            no_sync = model.no_sync if dist.enabled else None
            loss_value = training_step(model, micro_batches, optimizer, **step_args, no_sync=no_sync, stats=stats)
        else:  # another training_step (the learner's), called exactly as the exercise's contract says
            loss_value = step_fn(model, micro_batches, optimizer, **step_args)
        if dist.enabled:  # the mean over all processes' micro-batches
            loss_value = _all_mean(torch.tensor(float(loss_value), device=device), dist).item()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        tokens_per_s = total_tokens / dt
        mfu = None
        if peak and shape:
            mfu = estimate_mfu(n_params, *shape, cfg.seq_len, tokens_per_s / dist.world_size, peak)
        grad_norm = stats["grad_norm"].item() if "grad_norm" in stats else None
        record = {"kind": "train", "step": step, "loss": loss_value, "lr": lr, "grad_norm": grad_norm}
        log(record | {"dt_s": dt, "tokens_per_s": tokens_per_s, "mfu": mfu})
        if cfg.checkpoint_interval and (step + 1) % cfg.checkpoint_interval == 0 and step + 1 < cfg.max_steps:
            save(step + 1)
    if cfg.eval_interval:
        val_loss = _all_mean(evaluate(model, val_loader, cfg.eval_batches, device, precision), dist)
        log({"kind": "eval", "step": cfg.max_steps, "val_loss": val_loss.item()})
    if cfg.checkpoint_path:
        save(cfg.max_steps)
    return records


def time_the_loop(model: nn.Module, config: TrainConfig, steps: int = 5) -> dict:
    """Lesson 11: what one step of `config`'s run costs, measured before the run is planned.

    Runs `steps` optimizer steps of the loop on `model` (compiling it first if `config.compile`), with an
    evaluation before and after them, a sample and a checkpoint (in a temporary folder), then puts the model's
    weights back, so the run itself starts from the same weights. The compiled code stays cached for the run.
    Returns seconds: "first_step_s" (compilation included), "step_s" (median of the other steps), "eval_s",
    "sample_s", "checkpoint_s" (each the last one, when nothing compiles any more) and "total_s"."""
    _checks.int_between("steps", steps, 2, note="the first step compiles; the others are timed")
    weights = {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}
    with tempfile.TemporaryDirectory(prefix="time-the-loop-") as folder:
        probe = replace(
            config, max_steps=steps, warmup_steps=min(config.warmup_steps, steps - 1), checkpoint_interval=0,
            eval_interval=steps if config.eval_interval else 0, sample_interval=steps if config.sample_interval else 0,
            checkpoint_path=str(Path(folder) / "probe.pt"), max_time_s=None,
        )  # fmt: skip
        records = train(model, probe)
    model.load_state_dict(weights)

    def last(kind: str) -> float:  # the last record of a kind: the seconds from the record before it to it
        at = [i for i, r in enumerate(records) if r["kind"] == kind]
        return records[at[-1]]["elapsed_s"] - records[at[-1] - 1]["elapsed_s"] if at else 0.0

    times = [r["dt_s"] for r in records if r["kind"] == "train"]
    timed = {"first_step_s": times[0], "step_s": statistics.median(times[1:]), "eval_s": last("eval")}
    return timed | {"sample_s": last("sample"), "checkpoint_s": last("checkpoint"), "total_s": records[-1]["elapsed_s"]}


def _ranks(dist: train_setup.Distributed) -> dict:
    return {"rank": dist.rank, "world_size": dist.world_size}


def _encoding(header: dict):
    if header.get("tokenizer") != "gpt2":
        return None
    from course_lib.data import gpt2_encoding

    return gpt2_encoding()


def main(argv: list[str] | None = None, gpt: Callable[..., nn.Module] | None = None) -> list[dict] | None:
    """``python -m course_lib.train prepare | run [flags]``: course_lib.train_cli reads the command line into one
    TrainConfig; this builds its model (seeded: the same initial weights every time, so runs can be compared) and
    trains it. `gpt`: a GPT class of lesson 09's contract to build at the preset's sizes instead of the course's
    GPT2 (`train_setup.build_model`; ``python -m course_lib train ...`` passes the learner's, where it passes its
    checks). Returns the records (None after `prepare`)."""
    from course_lib import train_cli

    command = train_cli.read_command_line(argv)
    if command is None:
        return None
    config = command.config
    torch.manual_seed(config.seed)
    vocab_size = read_header(config.data_dir)["vocab_size"]
    model = train_setup.build_model(config.model, vocab_size, config.seq_len, config.dropout, gpt=gpt)
    with train_cli.json_log(command.log) as on_log:
        return train(model, config, on_log=on_log, resume=command.resume)


if __name__ == "__main__":
    main()
