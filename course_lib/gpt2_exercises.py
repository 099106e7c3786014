"""Lesson 10's four exercises in one place: the module the lesson binds as `ref` (and the grader checks against).

    gpt2_parameter_count   parameters of a GPT-2 from its sizes              (defined in course_lib.gpt2)
    cosine_lr              linear warm-up, then cosine decay to min_lr       (defined in course_lib.train)
    top_p_filter           nucleus filtering of logits                       (defined in course_lib.generate)
    attend_with_cache      one causal attention step over a growing KV cache (defined in course_lib.multihead)

Why a module of its own: the grader binds one reference module per lesson, and these four live where they are
used — the model, its attention, generation, the training loop of lesson 11. Each is imported here, not copied,
so `gpt2_exercises.top_p_filter is generate.top_p_filter`: one definition, and the from-scratch guard forbids it
under either name. Nothing imports this module but the lesson and its grader, so it adds no import cycle.

Shape legend (of the functions re-exported): B batch, H heads, T new positions, P cached positions, D head
size, V vocabulary.
"""

from __future__ import annotations

from course_lib.generate import top_p_filter
from course_lib.gpt2 import attend_with_cache, gpt2_parameter_count
from course_lib.train import cosine_lr

__all__ = ["gpt2_parameter_count", "cosine_lr", "top_p_filter", "attend_with_cache"]
