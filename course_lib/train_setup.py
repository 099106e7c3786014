"""Lesson 11 — choices the training loop makes from the hardware: device, precision, optimizer, processes.

    pick_device()                         "cuda" if a GPU is present, else "mps" on Apple silicon, else "cpu"
    choose_precision("cuda", (8, 0))      bf16 from Ampere on (A100, L4, H100); fp16 on older GPUs (T4 is 7.5),
                                          with a GradScaler; fp32 on the CPU
    configure_optimizer(model, ...)       AdamW, weight decay on matrices only, fused kernel on CUDA
    distributed_from_env()                the process's rank and world size, as torchrun sets them

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
import os
from dataclasses import dataclass

import torch
from torch import nn

from course_lib import _checks

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
