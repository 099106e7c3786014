"""Lesson 11's pictures: the path of the tokens through one training step, and a checkpoint's save-and-resume cycle.

training_step_data_path   token shards -> micro-batches -> forward under autocast, loss / n, backward (the
                          gradients add up) -> unscale_, clip, one optimizer step: course_lib.train.training_step
checkpoint_resume_cycle   what a checkpoint holds, how it is written (a temporary file, fsync, os.replace) and
                          how a new runtime continues from it (course_lib.checkpoint, train(..., resume=True))
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from course_lib.diagrams.draw import FONT, INK, STREAM, arrow, box, canvas

__all__ = ["CHECKPOINT_PIECES", "checkpoint_resume_cycle", "training_step_data_path"]

# What the picture says a checkpoint holds -> the key of the state dict course_lib.train saves it under
CHECKPOINT_PIECES = {
    "weights": "model",
    "AdamW's moments": "optimizer",
    "the scaler's scale": "scaler",
    "the step": "step",
    "the data position": "data",
    "the RNG states": "rng",
}


def _frame(ax, x0: float, y0: float, x1: float, y1: float) -> None:
    ax.add_patch(
        FancyBboxPatch(
            (x0, y0), x1 - x0, y1 - y0, boxstyle="round,pad=0,rounding_size=0.2",
            facecolor="#f7f7f7", edgecolor="#999999", linewidth=1.3, linestyle="--", zorder=0,
        )
    )  # fmt: skip


def training_step_data_path() -> Figure:
    """Lesson 11: one optimizer step. The loader cuts n micro-batches of B × T tokens from the uint16 shards;
    each runs forward under autocast(), its loss is divided by n and backward adds its gradients to .grad; after
    the last one the gradients (unscaled first, with an fp16 scaler) are clipped to clip_norm and the optimizer
    steps once. Everything in the frame is `training_step(model, micro_batches, optimizer, scaler, autocast,
    clip_norm)`."""
    fig, ax = canvas(11.6, 5.4, (-0.3, 15.3), (-0.55, 6.6))
    small = FONT - 1
    box(ax, 1.25, 3.0, 2.5, 1.5, "token shards\nuint16 files\non disk (memmap)", "embed", size=small)
    _frame(ax, 5.75, -0.35, 15.1, 5.75)
    ax.text(10.4, 6.05, "training_step(model, micro_batches, optimizer, scaler, autocast, clip_norm)",
            ha="center", va="center", fontsize=small, color=INK, family="monospace")  # fmt: skip
    ax.text(6.0, 5.45, "zero_grad once, then for each micro-batch:", ha="left", va="center", fontsize=9, color=INK)
    lanes = [(4.5, "micro-batch 1"), (3.0, "micro-batch 2"), (1.1, "micro-batch n")]
    for y, label in lanes:
        arrow(ax, [(2.5, 3.0), (2.9, 3.0), (2.9, y), (3.35, y)])
        box(ax, 4.4, y, 2.0, 0.8, f"{label}\nx, y: (B, T)", "token", size=small)
        arrow(ax, [(5.4, y), (6.25, y)])
        box(ax, 7.85, y, 3.1, 0.95, "forward under autocast()\nloss / n, backward", "attention", size=small)
        arrow(ax, [(9.4, y), (9.75, y), (9.75, 3.0), (10.1, 3.0)])
    ax.text(4.4, 2.1, "⋮", ha="center", va="center", fontsize=FONT + 4, color=INK)
    ax.text(7.85, 2.1, "⋮", ha="center", va="center", fontsize=FONT + 4, color=INK)
    ax.text(4.4, 0.05, "ShardLoader: this process's\nblock (rank_batch)", ha="center", va="center", fontsize=8)
    box(ax, 11.2, 3.0, 2.1, 1.5, "gradients\nadd up\nin .grad", "norm", size=small)
    steps = [(4.5, "scaler.unscale_\n(fp16 only)"), (3.0, "clip_grad_norm_\nto clip_norm")]
    steps.append((1.1, "one optimizer step\n(scaler.step, update)"))
    arrow(ax, [(12.25, 3.0), (12.5, 3.0), (12.5, 4.5), (12.75, 4.5)])
    for (y, label), (next_y, _) in zip(steps, [*steps[1:], (None, "")], strict=True):
        box(ax, 13.85, y, 2.2, 0.95, label, "ffn", size=small)
        if next_y is not None:
            arrow(ax, [(13.85, y - 0.48), (13.85, next_y + 0.48)])
    ax.text(13.85, 0.05, "returns the mean loss:\none .item()", ha="center", va="center", fontsize=8)
    return fig


def checkpoint_resume_cycle() -> Figure:
    """Lesson 11: a checkpoint's cycle. Every checkpoint_interval steps the state the next step depends on is
    written to a temporary file in the checkpoint's folder, flushed to disk, and renamed over the old file with
    os.replace (atomic within one file system), so the file is always a complete checkpoint. After a disconnect a
    new runtime loads it (weights_only=True), restores every piece, and continues with the same losses."""
    fig, ax = canvas(11.6, 5.2, (-0.3, 14.9), (-0.2, 6.4))
    small = FONT - 1
    top, bottom = 4.6, 1.3
    box(ax, 1.5, top, 2.8, 1.1, "training steps\n…, k − 1, k", "attention", size=small)
    lines = ["the state:", "weights, AdamW's moments,", "the scaler's scale, the step,", "the data position,",
             "the RNG states"]  # fmt: skip
    box(ax, 5.45, top, 3.5, 1.7, "\n".join(lines), "embed", size=small)
    box(ax, 9.35, top, 3.1, 1.4, "write a temporary file\nin the same folder;\nflush, os.fsync", "norm", size=small)
    box(ax, 12.95, top, 3.1, 1.4, "os.replace(tmp, path):\natomic within one\nfile system", "norm", size=small)
    box(ax, 12.95, bottom, 3.1, 1.4, "the checkpoint file\n(a folder, or Drive):\nold or new, never half", "output",
        size=small)  # fmt: skip
    box(ax, 9.35, bottom, 3.1, 1.4, "load_checkpoint\n(weights_only=True)", "norm", size=small)
    box(ax, 5.45, bottom, 3.5, 1.4, "restore every piece:\nthe next step computes\nwhat it would have", "embed",
        size=small)  # fmt: skip
    arrow(ax, [(2.9, top), (3.7, top)])
    ax.text(3.3, top - 0.95, "every\ncheckpoint_interval\nsteps", ha="center", va="center", fontsize=8)
    arrow(ax, [(7.2, top), (7.8, top)])
    arrow(ax, [(10.9, top), (11.4, top)])
    arrow(ax, [(12.95, top - 0.7), (12.95, bottom + 0.7)])
    arrow(ax, [(11.4, bottom), (10.9, bottom)])
    arrow(ax, [(7.8, bottom), (7.2, bottom)])
    arrow(ax, [(3.7, bottom), (1.5, bottom), (1.5, top - 0.55)], color=STREAM)
    ax.text(1.7, 2.75, "after a disconnect,\na new runtime:\ntrain(..., resume=True)", ha="left", va="center",
            fontsize=8, color=STREAM)  # fmt: skip
    return fig
