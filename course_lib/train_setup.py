"""Lesson 11 — the training loop's settings, and the choices it makes from the hardware: device, precision,
optimizer, processes.

    pick_device()                         "cuda" if a GPU is present, else "mps" on Apple silicon, else "cpu"
    choose_precision("cuda", (8, 0))      bf16 from Ampere on (A100, L4, H100); fp16 on older GPUs (T4 is 7.5),
                                          with a GradScaler; fp32 on the CPU
    configure_optimizer(model, ...)       AdamW, weight decay on matrices only, fused kernel on CUDA
    distributed_from_env()                the process's rank and world size, as torchrun sets them
    PEAK_FLOPS, gpu_model, peak_flops     dense tensor-core peaks of common GPUs, from NVIDIA's datasheets
    measure_matmul_peak(device, precision)  a peak measured in a few seconds: large matmuls, timed
    find_peak(device, precision)          the datasheet's peak if the GPU is in the table, else a measured one
    plan_steps(budget_s, spent_s, step_s, ...)   how many steps fit a time budget, from measured times
    step_memory(model, micro_batch_size, ...)     a training step's peak GPU memory, measured
    fit_micro_batch(measure, start, limit_bytes)  the largest micro-batch (halving) whose measured peak fits
    TrainConfig                           a run's settings, all of them: the model preset (and its dropout) and
                                          everything the loop (course_lib.train.train) needs besides the model
    build_model(name, vocab_size, seq_len, dropout, gpt=None)   the GPT-2 of a preset: "tiny" (CPU smoke runs),
                                          "gpt2", ...: the course's GPT2, or a GPT class of lesson 09's (yours)

Why the precision rule: bf16 keeps fp32's exponent range, so gradients neither overflow nor underflow and no
loss scaling is needed, but only GPUs of compute capability 8.0 and newer have bf16 tensor cores. On a T4,
fp16 tensor cores are the fast path; fp16's small range makes small gradients underflow to zero, so the loss
is multiplied by a large scale before backward and the gradients divided by it before the step (GradScaler).
On the CPU autocast brings little for these models, and fp32 keeps runs bit-for-bit reproducible.

Shape legend: none here (configuration only).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from course_lib import _checks
from course_lib.gpt import init_gpt2
from course_lib.gpt2 import GPT2, GPT2Config

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def pick_device() -> str:
    """The best device present: "cuda", "mps" (Apple silicon) or "cpu"."""
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def device_capability(device: str) -> tuple[int, int] | None:
    """The CUDA compute capability (major, minor) of `device`, or None for a non-CUDA device."""
    if torch.device(device).type != "cuda":
        return None
    return torch.cuda.get_device_capability(torch.device(device))


def device_name(device: str) -> str:
    """The GPU's marketing name ("Tesla T4", "NVIDIA A100-SXM4-40GB", ...) or the device type ("cpu")."""
    if torch.device(device).type == "cuda":
        return torch.cuda.get_device_name(torch.device(device))
    return torch.device(device).type


def choose_precision(device_type: str, capability: tuple[int, int] | None = None) -> str:
    """ "bf16", "fp16" or "fp32" for autocast on this device.

    `capability` is the CUDA compute capability (major, minor), a fact of the hardware. Not
    `torch.cuda.is_bf16_supported()`, which by default also counts emulated bf16 (no bf16 tensor cores).
    """
    _checks.one_of("device_type", device_type, ("cpu", "cuda", "mps"))
    if device_type != "cuda":
        return "fp32"
    if capability is None:
        raise ValueError("`capability` (the GPU's compute capability, e.g. (7, 5)) is needed for device_type='cuda'")
    return "bf16" if tuple(capability) >= (8, 0) else "fp16"


def resolve_precision(precision: str, device: str) -> str:
    """ "auto" -> choose_precision for `device`; otherwise `precision`, checked to be possible there."""
    _checks.one_of("precision", precision, ("auto", *PRECISIONS))
    device_type = torch.device(device).type
    if precision == "auto":
        return choose_precision(device_type, device_capability(device))
    if precision == "fp16" and device_type == "cpu":
        raise ValueError("precision='fp16' needs a GPU (fp16 matmuls on the CPU are slow); use 'bf16' or 'fp32'")
    return precision


def autocast(device: str, precision: str) -> contextlib.AbstractContextManager:
    """The mixed-precision context of a forward pass: torch.autocast, or nothing for fp32."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=PRECISIONS[precision])


def grad_scaler(device: str, precision: str) -> torch.amp.GradScaler:
    """A GradScaler that scales the loss for fp16 and does nothing (enabled=False) otherwise."""
    return torch.amp.GradScaler(torch.device(device).type, enabled=precision == "fp16")


def parameter_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two AdamW groups: matrices (linear and embedding weights, dim >= 2) decay; biases and norms do not.

    Decay pulls weights toward zero to regularise; a bias or a LayerNorm gain is a single scale per channel,
    and shrinking it only fights the model (GPT-2 and nanoGPT decay matrices only).
    """
    params = [p for p in model.parameters() if p.requires_grad]  # tied weights appear once
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def configure_optimizer(
    model: nn.Module,
    lr: float,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    device_type: str = "cpu",
) -> torch.optim.AdamW:
    """AdamW over `parameter_groups`; the fused CUDA kernel (one launch for all parameters) on a GPU."""
    fused = device_type == "cuda" and "fused" in inspect.signature(torch.optim.AdamW).parameters
    kwargs = {"fused": True} if fused else {}
    return torch.optim.AdamW(parameter_groups(model, weight_decay), lr=lr, betas=betas, eps=1e-8, **kwargs)


@dataclass(frozen=True)
class Distributed:
    """Where this process stands among the processes of one run (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK)."""

    rank: int = 0  # this process's index, 0..world_size-1
    local_rank: int = 0  # its index on this machine: which GPU it uses
    world_size: int = 1  # how many processes train together

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0 logs, samples and writes checkpoints; the others only compute."""
        return self.rank == 0


def distributed_from_env() -> Distributed:
    """The Distributed of this process from torchrun's environment variables (a single process without them)."""
    if "RANK" not in os.environ:
        return Distributed()
    return Distributed(int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"]), int(os.environ["WORLD_SIZE"]))


def init_distributed(dist: Distributed, device_type: str) -> str:
    """Join the process group (NCCL between GPUs, gloo on CPUs) and return this process's device."""
    if not dist.enabled:
        return pick_device() if device_type == "auto" else device_type
    if device_type == "auto":
        device_type = "cuda" if torch.cuda.is_available() else "cpu"
    backend = "nccl" if device_type == "cuda" else "gloo"
    if not torch.distributed.is_initialized():
        torch.distributed.init_process_group(backend=backend, rank=dist.rank, world_size=dist.world_size)
    if device_type == "cuda":
        torch.cuda.set_device(dist.local_rank)
        return f"cuda:{dist.local_rank}"
    return device_type


# ------------------------------------------------------------------------------------------------------------
# The run's settings
# ------------------------------------------------------------------------------------------------------------

# Settings a resumed run may change: they do not alter what the next training steps compute (data_dir: the
# same shards may have moved, e.g. to Google Drive; the header and shard sizes are checked again on resume).
RESUMABLE_CHANGES = {"data_dir", "device", "compile", "checkpoint_path", "checkpoint_interval", "max_time_s"}
RESUMABLE_CHANGES |= {"eval_interval", "eval_batches", "sample_interval", "sample_tokens", "sample_prompt"}
RESUMABLE_CHANGES |= {"peak_flops"}


# The GPT-2s a run can train, by name: "tiny" (2 layers, d_model 64, for CPU smoke runs) and OpenAI's four sizes.
GPT2_PRESETS = {"tiny": "tiny", "gpt2": "small", "gpt2-small": "small", "gpt2-medium": "medium", "gpt2-large": "large"}
GPT2_PRESETS["gpt2-xl"] = "xl"


@dataclass(frozen=True)
class TrainConfig:
    """A run's settings (lesson 11): which model to build, and everything `course_lib.train.train` needs besides
    the model. Saved with every checkpoint; a resumed run must agree with it (`check_resumable`)."""

    data_dir: str  # a folder prepared by train_data (shards.json + .bin shards)
    model: str = "tiny"  # the model preset (build_model): "tiny", or "gpt2" (124M), "gpt2-medium", ...
    dropout: float = 0.0  # the model's dropout (embeddings, attention weights, sublayer outputs)
    micro_batch_size: int = 8  # B: rows per forward pass and process
    seq_len: int = 256  # T: tokens per row
    total_batch_tokens: int | None = None  # tokens per optimizer step, all processes; None: one micro-batch
    max_steps: int = 100  # optimizer steps of the whole run
    warmup_steps: int = 10  # linear warm-up of the learning rate
    max_lr: float = 6e-4
    min_lr: float = 6e-5  # the cosine decays to this at max_steps
    weight_decay: float = 0.1  # on matrices only
    betas: tuple[float, float] = (0.9, 0.95)
    grad_clip: float = 1.0  # max global gradient norm; 0 = no clipping
    eval_interval: int = 50  # evaluate every this many steps (and after the last); 0 = never
    eval_batches: int = 10  # micro-batches of "val" per evaluation
    sample_interval: int = 0  # print a sample every this many steps; 0 = never
    sample_tokens: int = 32
    sample_prompt: str = "\n"
    checkpoint_path: str | None = None  # None: no checkpoints
    checkpoint_interval: int = 0  # save every this many steps; 0 = only at the end (or when the budget runs out)
    max_time_s: float | None = None  # time budget: stop cleanly after this many seconds
    precision: str = "auto"  # "auto" (from the device), "bf16", "fp16", "fp32"
    compile: bool = False  # torch.compile the model (GPU; the first steps are slow while it compiles)
    peak_flops: float | None = None  # FLOP/s that MFU is measured against; None: the GPU's, from PEAK_FLOPS
    device: str = "auto"
    seed: int = 1337

    def __post_init__(self):
        _checks.one_of("model", self.model, tuple(GPT2_PRESETS))
        _checks.probability("dropout", self.dropout)
        _checks.positive_ints(micro_batch_size=self.micro_batch_size, seq_len=self.seq_len, max_steps=self.max_steps)
        if self.warmup_steps >= self.max_steps:
            raise ValueError(f"`warmup_steps`={self.warmup_steps} must be smaller than `max_steps`={self.max_steps}")
        for name in ("eval_interval", "sample_interval", "checkpoint_interval"):
            _checks.int_between(name, getattr(self, name), 0, note="0 = never")
        _checks.one_of("precision", self.precision, ("auto", *PRECISIONS))
        if self.peak_flops is not None:
            _checks.positive_number("peak_flops", self.peak_flops)


def build_model(
    name: str, vocab_size: int, seq_len: int, dropout: float = 0.0, gpt: Callable[..., nn.Module] | None = None
) -> nn.Module:
    """The GPT-2 of a preset (`GPT2_PRESETS`, a run's `TrainConfig.model`): "tiny" (2 layers, 4 heads, d_model 64,
    context `seq_len`, for CPU smoke runs) or one of OpenAI's sizes ("gpt2" = 124M: 12 layers x 12 heads x 768,
    context 1024; "gpt2-medium", "gpt2-large", "gpt2-xl").

    `gpt` None: the course's GPT2, its attention through F.scaled_dot_product_attention (flash attention on a GPU)
    and its vocabulary padded to a multiple of 64. Otherwise a class with lesson 09's GPT contract, built as
    `gpt(vocab_size, context_length, d_model, n_heads, n_layers, dropout)` at the preset's sizes and initialised
    as GPT-2 (`course_lib.gpt.init_gpt2`, which goes by the contract's module names): lesson 11 passes yours."""
    _checks.one_of("name", name, tuple(GPT2_PRESETS))
    options = {"vocab_size": vocab_size, "dropout": dropout, "pad_vocab_multiple": 64, "use_sdpa": True}
    if name == "tiny":
        config = GPT2Config(context_length=seq_len, n_layers=2, n_heads=4, d_model=64, **options)
    else:
        config = getattr(GPT2Config, GPT2_PRESETS[name])(**options)
        if seq_len > config.context_length:
            raise ValueError(f"`seq_len`={seq_len} is longer than {name}'s context of {config.context_length}")
    if gpt is None:
        return GPT2(config)
    c = config
    return init_gpt2(gpt(c.vocab_size, c.context_length, c.d_model, c.n_heads, c.n_layers, c.dropout), c.n_layers)


def plain_config(cfg: TrainConfig) -> dict:
    """The config as plain data (lists for tuples), so it loads with weights_only=True and compares after."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(cfg).items()}


def check_resumable(saved: dict, cfg: TrainConfig, saved_world: int, world: int) -> None:
    """ValueError naming each setting of `cfg` that differs from the checkpoint's (`saved`) and would change
    what the next steps compute (the world size too); RESUMABLE_CHANGES may change."""
    now = plain_config(cfg)
    changed = {k: (saved.get(k), v) for k, v in now.items() if k not in RESUMABLE_CHANGES and saved.get(k) != v}
    if saved_world != world:
        changed["world_size"] = (saved_world, world)
    if changed:
        what = ", ".join(f"{k}: {old!r} -> {new!r}" for k, (old, new) in changed.items())
        raise ValueError(f"cannot resume exactly: the checkpoint was made with other settings ({what})")


# ------------------------------------------------------------------------------------------------------------
# Peak FLOP/s: from the datasheet, or measured
# ------------------------------------------------------------------------------------------------------------

# Dense tensor-core peaks in FLOP/s, in the precision the course trains in: bf16 from compute capability 8.0 on
# (fp16 is as fast there), fp16 on the T4 and V100, which have no bf16 tensor cores. Where a datasheet quotes a
# figure "with sparsity" (2:4 structured sparsity doubles it), the dense figure is half of it: training is
# dense. autocast's matmuls accumulate in fp32, so for GeForce cards the "with FP32 accumulate" figure applies.
_SPARSE = 2  # datasheet figure with sparsity / dense figure
PEAK_FLOPS: dict[str, dict[str, float]] = {
    "T4": {"fp16": 65e12},  # NVIDIA T4 datasheet: 65 TFLOPS mixed precision (FP16/FP32)
    "V100 SXM2": {"fp16": 125e12},  # NVIDIA V100 datasheet: 125 TFLOPS deep learning (tensor), SXM2
    "V100 PCIe": {"fp16": 112e12},  # NVIDIA V100 datasheet: 112 TFLOPS, PCIe
    "V100S PCIe": {"fp16": 130e12},  # NVIDIA V100 datasheet: 130 TFLOPS, V100S PCIe
    # NVIDIA A10 datasheet: BF16 Tensor Core 125 TFLOPS (250 with sparsity). NVIDIA publishes no datasheet for
    # the A10G (AWS's variant of the same GA102 chip, "up to 250 TOPS" on AWS's G5 page): the A10's is used.
    "A10": {"bf16": 125e12, "fp16": 125e12},
    "A10G": {"bf16": 125e12, "fp16": 125e12},
    "L4": {"bf16": 242e12 / _SPARSE, "fp16": 242e12 / _SPARSE},  # NVIDIA L4 datasheet: 242 TFLOPS with sparsity
    "L40S": {"bf16": 362.05e12, "fp16": 362.05e12},  # NVIDIA L40S datasheet: 362.05 TFLOPS (733 with sparsity)
    # NVIDIA Ampere GA102 architecture whitepaper: RTX 3090, FP16/BF16 tensor with FP32 accumulate 71 TFLOPS
    "RTX 3090": {"bf16": 71e12, "fp16": 71e12},
    # NVIDIA Ada GPU architecture whitepaper: RTX 4090, FP16/BF16 tensor with FP32 accumulate 165.2 TFLOPS
    "RTX 4090": {"bf16": 165.2e12, "fp16": 165.2e12},
    "A100": {"bf16": 312e12, "fp16": 312e12},  # NVIDIA A100 datasheet: 312 TFLOPS, 40 GB and 80 GB, SXM and PCIe
    "H100 SXM": {"bf16": 1979e12 / _SPARSE, "fp16": 1979e12 / _SPARSE},  # NVIDIA H100 datasheet: 1,979 sparse
    "H100 NVL": {"bf16": 1671e12 / _SPARSE, "fp16": 1671e12 / _SPARSE},  # H100 datasheet: 1,671 with sparsity
    "H100 PCIe": {"bf16": 1513e12 / _SPARSE, "fp16": 1513e12 / _SPARSE},  # H100 datasheet: 1,513 with sparsity
    "H200": {"bf16": 1979e12 / _SPARSE, "fp16": 1979e12 / _SPARSE},  # NVIDIA H200 datasheet: SXM, 1,979 sparse
    "H200 NVL": {"bf16": 1671e12 / _SPARSE, "fp16": 1671e12 / _SPARSE},  # H200 datasheet: NVL, 1,671 sparse
}

# torch.cuda.get_device_name() -> PEAK_FLOPS key, first match wins ("Tesla T4", "NVIDIA A100-SXM4-80GB",
# "NVIDIA H100 80GB HBM3" = SXM, "NVIDIA H100 PCIe", "NVIDIA GeForce RTX 4090"). Case is ignored.
_NAMES: tuple[tuple[str, str], ...] = (
    (r"\bT4\b", "T4"),
    (r"\bV100S\b", "V100S PCIe"),
    (r"\bV100\b.*\bPCIE\b", "V100 PCIe"),
    (r"\bV100\b", "V100 SXM2"),  # "Tesla V100-SXM2-16GB", "Tesla V100-DGXS-32GB"
    (r"\bA10G\b", "A10G"),
    (r"\bA10\b", "A10"),
    (r"\bL40S\b", "L40S"),
    (r"\bL4\b", "L4"),
    (r"\bRTX 3090\b(?! Ti)", "RTX 3090"),
    (r"\bRTX 4090\b(?! D\b)", "RTX 4090"),
    (r"\bA100\b", "A100"),
    (r"\bH100\b.*\bNVL\b", "H100 NVL"),
    (r"\bH100\b.*\bPCIE\b", "H100 PCIe"),
    (r"\bH100\b", "H100 SXM"),  # "NVIDIA H100 80GB HBM3"
    (r"\bH200\b.*\bNVL\b", "H200 NVL"),
    (r"\bH200\b", "H200"),
)


def gpu_model(name: str) -> str | None:
    """The PEAK_FLOPS key of a CUDA device name ("Tesla T4" -> "T4", "NVIDIA H100 80GB HBM3" -> "H100 SXM")."""
    return next((key for pattern, key in _NAMES if re.search(pattern, name, re.IGNORECASE)), None)


def peak_flops(name: str, precision: str) -> float | None:
    """Datasheet peak FLOP/s of the GPU called `name` in `precision`; None if the table has no entry."""
    model = gpu_model(name)
    return PEAK_FLOPS[model].get(precision) if model else None


def measure_matmul_peak(
    device: str,
    precision: str,
    *,
    size: int | None = None,
    repeats: int = 10,
    rounds: int = 3,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    """FLOP/s of `size` x `size` matrix products in `precision` on `device`: the best of `rounds` timings of
    `repeats` products (2 * size**3 FLOPs each), after a warm-up. Lesson 11: the peak of a GPU that is not in
    PEAK_FLOPS, and of a CPU (with its current thread count). A few seconds at most on a GPU."""
    _checks.one_of("precision", precision, tuple(PRECISIONS))
    _checks.positive_ints(repeats=repeats, rounds=rounds)
    on_gpu = torch.device(device).type == "cuda"
    size = size or (8192 if on_gpu else 512)
    _checks.positive_int("size", size)
    generator = torch.Generator(device=device).manual_seed(0)
    a, b = (torch.randn(size, size, generator=generator, device=device).to(PRECISIONS[precision]) for _ in range(2))

    def sync() -> None:
        if on_gpu:
            torch.cuda.synchronize(device)

    for _ in range(2):  # warm-up: kernel selection, caches, clocks
        a @ b
    sync()
    best = math.inf
    for _ in range(rounds):
        start = clock()
        for _ in range(repeats):
            a @ b
        sync()
        best = min(best, clock() - start)
    return 2 * size**3 * repeats / best


@dataclass(frozen=True)
class Peak:
    """The FLOP/s that MFU is measured against, and where the figure comes from."""

    flops: float
    source: str  # "datasheet" (PEAK_FLOPS) or "measured" (measure_matmul_peak)
    name: str  # the PEAK_FLOPS key, or what was measured

    @property
    def label(self) -> str:
        """How to name the MFU: "against the H100 SXM's datasheet peak" / "against a measured peak"."""
        return f"against the {self.name}'s datasheet peak" if self.source == "datasheet" else "against a measured peak"


def find_peak(device: str, precision: str) -> Peak:
    """The datasheet peak of a GPU in PEAK_FLOPS; for any other device (an unknown GPU, a CPU) a measured one."""
    name = device_name(device)
    peak = peak_flops(name, precision)
    if peak is not None:
        return Peak(peak, "datasheet", gpu_model(name))
    what = f"{precision} matmuls on {name}"
    if torch.device(device).type == "cpu":
        what += f", {torch.get_num_threads()} thread(s)"
    return Peak(measure_matmul_peak(device, precision), "measured", what)


# ------------------------------------------------------------------------------------------------------------
# A run planned from measured times
# ------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepPlan:
    """How many optimizer steps fit a time budget, and the arithmetic behind it (lesson 11)."""

    max_steps: int  # the steps to run
    budget_s: float  # the whole budget: compilation, warm-up and the timing steps included
    spent_s: float  # already used before the first step of the run (compiling, warming up, timing)
    step_s: float  # measured seconds per optimizer step
    extra_s: float  # the run's evaluations, samples and checkpoints, from their measured times
    fits: bool  # False: not even `min_steps` fit, and the run will overrun its budget

    @property
    def expected_s(self) -> float:
        """Seconds from the start of the budget to the end of the run, if the steps keep their measured pace."""
        return self.spent_s + self.max_steps * self.step_s + self.extra_s


def plan_steps(budget_s: float, spent_s: float, step_s: float, extra_s: float = 0.0, min_steps: int = 1) -> StepPlan:
    """The most optimizer steps that end the run within `budget_s`: what the budget leaves after `spent_s` (the
    compilation, the warm-up and the timing already done) and `extra_s` (evaluations, samples, checkpoints),
    divided by the measured `step_s`, rounded down, so the run ends at most one step's time before its budget.
    When that is fewer than `min_steps` (compilation alone may eat a short budget), the plan runs `min_steps`
    anyway and says it does not fit (`fits=False`), so the caller can say by how much it will overrun."""
    _checks.positive_number("budget_s", budget_s)
    _checks.positive_number("step_s", step_s)
    for name, value in (("spent_s", spent_s), ("extra_s", extra_s)):
        if _checks.number(name, value) < 0:
            raise ValueError(f"`{name}` must be a number of seconds >= 0, got {value!r}")
    _checks.positive_int("min_steps", min_steps)
    left = budget_s - spent_s - extra_s  # seconds the steps themselves may take
    steps = math.floor(left / step_s) if left > 0 else 0
    return StepPlan(max(steps, min_steps), budget_s, spent_s, step_s, extra_s, fits=steps >= min_steps)


# ------------------------------------------------------------------------------------------------------------
# A micro-batch that fits the GPU's memory, from measurement
# ------------------------------------------------------------------------------------------------------------


def step_memory(model: nn.Module, micro_batch_size: int, seq_len: int, device: str, precision: str) -> int | None:
    """Peak bytes of GPU memory while `model` runs one forward and backward pass of `micro_batch_size` rows of
    `seq_len` tokens in `precision` (weights and gradients included; the optimizer's state comes on top), measured
    with torch.cuda's allocator statistics; None on a device that keeps none (a CPU). The model is moved to
    `device` and left there, in training mode, its gradients cleared. Eager: torch.compile usually needs less.
    Raises torch.cuda.OutOfMemoryError when the pass does not fit."""
    _checks.positive_ints(micro_batch_size=micro_batch_size, seq_len=seq_len)
    if torch.device(device).type != "cuda":
        return None
    model.to(device).train()
    model.zero_grad(set_to_none=True)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(device)
    ids = torch.zeros(micro_batch_size, seq_len, dtype=torch.long, device=device)  # any ids: memory is the same
    try:
        with autocast(device, precision):
            _, loss = model(ids, ids)
        loss.backward()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device)
    finally:
        model.zero_grad(set_to_none=True)


@dataclass(frozen=True)
class MicroBatchFit:
    """The micro-batch a run uses, and what was measured on the way (lesson 11)."""

    micro_batch_size: int
    tried: tuple[tuple[int, int | None], ...]  # (micro-batch, peak bytes; None: not measured or out of memory)
    out_of_memory: tuple[int, ...] = ()  # the micro-batches that ran out of memory


def fit_micro_batch(
    measure: Callable[[int], int | None], start: int, limit_bytes: float, minimum: int = 1
) -> MicroBatchFit:
    """The largest of `start`, `start` / 2, `start` / 4, ... (not below `minimum`) whose measured peak memory,
    `measure(micro_batch) -> bytes`, is at most `limit_bytes`. A `measure` that raises torch.cuda.OutOfMemoryError
    says that size does not fit; one that returns None measured nothing (no GPU): `start` is kept. Halving keeps a
    power-of-two micro-batch dividing the tokens of a step. ValueError when not even `minimum` fits."""
    _checks.positive_ints(start=start, minimum=minimum)
    _checks.positive_number("limit_bytes", limit_bytes)
    tried: list[tuple[int, int | None]] = []
    failed: list[int] = []
    size = start
    while size >= minimum:
        try:
            peak = measure(size)
        except torch.cuda.OutOfMemoryError:
            peak = None
            failed.append(size)
        tried.append((size, peak))
        if size not in failed and (peak is None or peak <= limit_bytes):
            return MicroBatchFit(size, tuple(tried), tuple(failed))
        size //= 2
    sizes = ", ".join(f"{b} ({'out of memory' if p is None else f'{p / 2**30:.1f} GiB'})" for b, p in tried)
    raise ValueError(f"no micro-batch fits {limit_bytes / 2**30:.1f} GiB: tried {sizes}; use a shorter seq_len")
