"""Lesson 11 — the same training, driven by Lightning's ``Trainer`` instead of our loop.

Lightning writes the loop (accumulation, clipping, mixed precision, DDP across processes) and we supply the
pieces of ours: the model's forward and loss, `configure_optimizer` (AdamW, decay on matrices only), the
`cosine_lr` schedule, and the token shards. With the same settings, a Lightning run computes the same losses
as `course_lib.train.train` (tests/test_train_ddp.py checks it).

    module = GPTLightningModule(model, config)
    trainer = lightning_trainer(config)                 # devices=2, strategy="ddp" for two processes
    trainer.fit(module, train_dataloaders=shard_dataloader(config, steps=config.max_steps))

Shape legend: B micro-batch rows, T time (seq_len), V vocabulary.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn

from course_lib import train_setup
from course_lib.train import TrainConfig, cosine_lr, grad_accum_steps
from course_lib.train_data import ShardLoader

LIGHTNING_PRECISION = {"fp32": "32-true", "bf16": "bf16-mixed", "fp16": "16-mixed"}


class ShardDataset(torch.utils.data.IterableDataset):
    """`n_batches` micro-batches (x, y) from a ShardLoader; under DDP each process reads its own block."""

    def __init__(self, data_dir: str, split: str, batch_size: int, seq_len: int, n_batches: int):
        super().__init__()
        self.args, self.n_batches = (data_dir, split, batch_size, seq_len), n_batches

    def __iter__(self):
        distributed = torch.distributed.is_available() and torch.distributed.is_initialized()
        rank = torch.distributed.get_rank() if distributed else 0
        world_size = torch.distributed.get_world_size() if distributed else 1
        loader = ShardLoader(*self.args, rank=rank, world_size=world_size)
        for _ in range(self.n_batches):
            yield loader.next_batch()


class GPTLightningModule(L.LightningModule):
    """Wraps a model with ``forward(idx, targets) -> (logits, loss)`` for Lightning; `losses` keeps each
    micro-batch's loss (for plots and tests)."""

    def __init__(self, model: nn.Module, config: TrainConfig):
        super().__init__()
        self.model, self.config = model, config
        self.losses: list[float] = []

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch  # (B, T), (B, T)
        _, loss = self.model(x, y)
        self.losses.append(loss.item())
        self.log("train_loss", loss, prog_bar=True)
        return loss  # Lightning divides it by accumulate_grad_batches before backward, as our loop does

    def configure_optimizers(self) -> torch.optim.Optimizer:
        cfg = self.config
        return train_setup.configure_optimizer(self.model, cfg.max_lr, cfg.weight_decay, cfg.betas, self.device.type)

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None) -> None:
        # The rate is set directly from cosine_lr (not a LambdaLR factor times max_lr), so it is the same
        # number our loop uses, to the last bit. global_step counts the optimizer steps done so far.
        cfg = self.config
        lr = cosine_lr(self.global_step, cfg.max_lr, cfg.min_lr, cfg.warmup_steps, cfg.max_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.step(closure=optimizer_closure)


def shard_dataloader(config: TrainConfig, steps: int, world_size: int = 1) -> torch.utils.data.DataLoader:
    """The training micro-batches of `steps` optimizer steps (batch_size=None: the dataset yields batches)."""
    per_step = _accum(config, world_size)
    dataset = ShardDataset(config.data_dir, "train", config.micro_batch_size, config.seq_len, steps * per_step)
    return torch.utils.data.DataLoader(dataset, batch_size=None)


def _accum(config: TrainConfig, world_size: int) -> int:
    total = config.total_batch_tokens or config.micro_batch_size * config.seq_len * world_size
    return grad_accum_steps(total, config.micro_batch_size, config.seq_len, world_size)


def lightning_trainer(
    config: TrainConfig, devices: int = 1, strategy: str = "auto", accelerator: str = "auto", **kwargs
) -> L.Trainer:
    """A Trainer with our run's settings: steps, accumulation, clipping, precision chosen from the device."""
    device = train_setup.pick_device() if accelerator == "auto" else accelerator
    precision = train_setup.resolve_precision(config.precision, "cuda:0" if device in ("cuda", "gpu") else device)
    settings = {"logger": False, "enable_checkpointing": False, "enable_progress_bar": False}
    settings |= {"enable_model_summary": False} | kwargs
    return L.Trainer(
        max_steps=config.max_steps,
        accumulate_grad_batches=_accum(config, devices),
        gradient_clip_val=config.grad_clip or None,
        gradient_clip_algorithm="norm",
        precision=LIGHTNING_PRECISION[precision],
        accelerator=accelerator,
        devices=devices,
        strategy=strategy,
        **settings,
    )
