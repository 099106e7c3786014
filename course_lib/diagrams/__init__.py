"""Diagrams the lessons show but do not compute: pictures drawn with matplotlib, one module per group of lessons.

    draw          the shared pieces (colours, boxes, arrows, residual adds)
    architecture  transformer blocks, the residual stream, the encoder-decoder, lesson 08's toy decoder
    batches       lesson 09's get_batch windows
    char_gpt      lesson 09: the GPT a learner assembles, each class labelled with the lesson that wrote it
    tokens        lessons 01-02: the tokenization pipeline, the sliding window, an embedding row pick, a GPT's input
                  as token vectors plus position vectors
    position      lesson 03: how the sinusoidal table is built, RoPE as a rotation of channel pairs
    attention     lessons 04-05: attention's data flow with numbers, the causal mask, cross-attention's wiring,
                  the split of the channels into heads and their merge, the fused qkv output's layout
    decoding      lessons 07-08: teacher forcing's shifted decoder input, the two conventions for a causal mask
    tensors       lesson 00's PyTorch primer: broadcasting a column against a row, one gradient step
    gpt2          lesson 10: GPT-2's stack with its sizes, one step of generation with a KV cache
    training      lesson 11: the tokens' path through one training step, a checkpoint's save-and-resume cycle
    modern        lesson 12: GPT-2's block beside a modern one, multi-head, grouped-query and multi-query attention
    induction     lesson 13: a previous-token head and an induction head on a repeated sequence

Each drawing function returns a matplotlib Figure and changes no global settings. `DIAGRAMS` names every one; the
committed PNGs in `images/` are written by `make images` (`python -m course_lib.diagrams`); a test fails when one
of them is stale, and `make release` inlines them into the student notebooks (see course_lib/workflow/images.py).
To add a diagram: draw it in a module here (or a new one), add it to `DIAGRAMS`, run `make images`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from matplotlib.figure import Figure

from course_lib.diagrams.architecture import (
    encoder_decoder_data_flow,
    residual_stream,
    statquest_decoder,
    transformer_block_post_ln_vs_pre_ln,
)
from course_lib.diagrams.attention import (
    attention_data_flow,
    causal_mask_grid,
    cross_attention_wiring,
    fused_qkv_layout,
    head_split_merge,
)
from course_lib.diagrams.batches import get_batch_windows
from course_lib.diagrams.char_gpt import your_gpt_stack
from course_lib.diagrams.decoding import mask_conventions, teacher_forcing
from course_lib.diagrams.draw import COLOURS, DPI
from course_lib.diagrams.gpt2 import gpt2_architecture, kv_cache_step
from course_lib.diagrams.induction import induction_circuit
from course_lib.diagrams.modern import gpt2_vs_modern_block, grouped_query_attention
from course_lib.diagrams.position import rope_rotation, sinusoidal_table
from course_lib.diagrams.tensors import broadcasting, gradient_step
from course_lib.diagrams.tokens import embedding_row_pick, sliding_window, token_plus_position, tokenization_pipeline
from course_lib.diagrams.training import checkpoint_resume_cycle, training_step_data_path

__all__ = [
    "COLOURS",
    "DIAGRAMS",
    "save_png",
    "write_all",
    "main",
    "transformer_block_post_ln_vs_pre_ln",
    "residual_stream",
    "encoder_decoder_data_flow",
    "statquest_decoder",
    "get_batch_windows",
    "your_gpt_stack",
    "tokenization_pipeline",
    "sliding_window",
    "embedding_row_pick",
    "attention_data_flow",
    "causal_mask_grid",
    "cross_attention_wiring",
    "head_split_merge",
    "fused_qkv_layout",
    "broadcasting",
    "gradient_step",
    "token_plus_position",
    "sinusoidal_table",
    "rope_rotation",
    "teacher_forcing",
    "mask_conventions",
    "gpt2_architecture",
    "kv_cache_step",
    "training_step_data_path",
    "checkpoint_resume_cycle",
    "gpt2_vs_modern_block",
    "grouped_query_attention",
    "induction_circuit",
]

DIAGRAMS: dict[str, Callable[[], Figure]] = {
    "transformer_block_post_ln_vs_pre_ln": transformer_block_post_ln_vs_pre_ln,
    "residual_stream": residual_stream,
    "encoder_decoder_data_flow": encoder_decoder_data_flow,
    "statquest_decoder": statquest_decoder,
    "get_batch_windows": get_batch_windows,
    "your_gpt_stack": your_gpt_stack,
    "tokenization_pipeline": tokenization_pipeline,
    "sliding_window": sliding_window,
    "embedding_row_pick": embedding_row_pick,
    "attention_data_flow": attention_data_flow,
    "causal_mask_grid": causal_mask_grid,
    "cross_attention_wiring": cross_attention_wiring,
    "head_split_merge": head_split_merge,
    "fused_qkv_layout": fused_qkv_layout,
    "broadcasting": broadcasting,
    "gradient_step": gradient_step,
    "token_plus_position": token_plus_position,
    "sinusoidal_table": sinusoidal_table,
    "rope_rotation": rope_rotation,
    "teacher_forcing": teacher_forcing,
    "mask_conventions": mask_conventions,
    "gpt2_architecture": gpt2_architecture,
    "kv_cache_step": kv_cache_step,
    "training_step_data_path": training_step_data_path,
    "checkpoint_resume_cycle": checkpoint_resume_cycle,
    "gpt2_vs_modern_block": gpt2_vs_modern_block,
    "grouped_query_attention": grouped_query_attention,
    "induction_circuit": induction_circuit,
}


def save_png(fig: Figure, path: Path) -> None:
    """Write `fig` as the committed images are written: fixed dpi, white background, no software name."""
    fig.savefig(path, dpi=DPI, facecolor="white", metadata={"Software": None})


def write_all(folder: Path) -> list[Path]:
    """Draw every diagram into `folder/<name>.png`: the same bytes for the same matplotlib (no date, no version)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, draw in DIAGRAMS.items():
        save_png(draw(), folder / f"{name}.png")
        paths.append(folder / f"{name}.png")
    return paths


def main(argv: list[str] | None = None) -> int:
    """`python -m course_lib.diagrams [FOLDER]`: write every diagram (default: the repository's images/)."""
    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else Path(__file__).resolve().parents[2] / "images"
    for path in write_all(folder):
        print(f"wrote {path}")
    return 0
