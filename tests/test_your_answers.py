"""course_lib.lesson.your_answers: the running lesson's own answers where they pass their visible checks."""

from __future__ import annotations

from course_lib import gpt2_weights
from course_lib.lesson import your_answers
from tests.answers import define
from tests.test_grading_gpt2 import LOAD_GPT2_WEIGHTS as RIGHT  # written independently of course_lib

UNWRITTEN = "def load_gpt2_weights(model, state_dict):\n    raise NotImplementedError()\n"
NO_TRANSPOSE = RIGHT.replace("            source = source.t()\n", "            pass\n")


def test_an_answer_that_passes_its_visible_checks_is_used(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    answer = define(RIGHT, "load_gpt2_weights")
    yours = your_answers("10_gpt2", load_gpt2_weights=answer)
    assert yours.load_gpt2_weights is answer and yours.yours("load_gpt2_weights")
    assert yours.banner() == "Running your `load_gpt2_weights` (lesson 10)."


def test_an_unwritten_or_wrong_answer_gives_way_to_the_reference_and_says_why(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    yours = your_answers("10_gpt2", load_gpt2_weights=define(UNWRITTEN, "load_gpt2_weights"))
    assert yours.load_gpt2_weights is gpt2_weights.load_gpt2_weights
    assert yours.banner() == "Running the course's `load_gpt2_weights` (lesson 10: not written yet)."
    wrong = your_answers("10_gpt2", load_gpt2_weights=define(NO_TRANSPOSE, "load_gpt2_weights"))
    assert wrong.load_gpt2_weights is gpt2_weights.load_gpt2_weights and not wrong.yours("load_gpt2_weights")
    assert "its visible check says:" in wrong.banner() and "does not fit" in wrong.banner()


def test_graded_runs_use_the_reference(monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    yours = your_answers("10_gpt2", load_gpt2_weights=define(RIGHT, "load_gpt2_weights"))
    assert yours.load_gpt2_weights is gpt2_weights.load_gpt2_weights
    assert "graded runs use the course's references" in yours.banner()


# Lesson 12: the ladder's models are built from the learner's four answers that pass their checks.
REPEAT_KV_INTERLEAVED = """
def repeat_kv(x, n_rep):
    return x if n_rep == 1 else x.repeat(1, n_rep, 1, 1)
"""
UNWRITTEN_ROPE = "def rope_attention(q, k, v, base=10000.0):\n    raise NotImplementedError()\n"


def test_lesson_12s_ladder_is_built_from_the_answers_that_pass(monkeypatch):
    import torch

    from course_lib import gpt, modern, modern_gpt
    from course_lib.lesson import with_your_answers
    from course_lib.workflow.your_code import YourCode
    from tests.test_grading_modern import RMS_NORM, SWIGLU_ANSWER

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    answers = dict(
        rms_norm=define(RMS_NORM, "rms_norm"),  # answers written independently of the course's (the grader's tests)
        rope_attention=define(UNWRITTEN_ROPE, "rope_attention"),
        SwiGLU=define(SWIGLU_ANSWER, "SwiGLU"),
        repeat_kv=define(REPEAT_KV_INTERLEAVED, "repeat_kv"),
    )
    mine = with_your_answers(YourCode(), "12_beyond_gpt2", **answers)
    assert [name for name in answers if mine.yours(name)] == ["rms_norm", "SwiGLU"]
    assert mine.repeat_kv is modern.repeat_kv and mine.rope_attention is modern.rope_attention
    banner = mine.banner()
    assert banner.startswith("Running your `rms_norm`, `SwiGLU` (lesson 12); the course's `rope_attention` (lesson 12:")
    assert "`repeat_kv` (lesson 12: its visible check says:" in banner
    # the lesson's own line: the parts that are yours, the course's for the rest
    parts = modern_gpt.ModernParts(**{name: mine[name] for name in answers if mine.yours(name)})
    config = modern_gpt.ModernConfig(11, 8, d_model=16, n_heads=4, n_layers=1, norm="rms", position="rope",
                                     mlp="swiglu", n_kv_heads=2)  # fmt: skip
    model = modern_gpt.ModernGPT(config, parts)
    assert model.ln_f.norm is answers["rms_norm"] and isinstance(model.blocks[0].mlp, answers["SwiGLU"])
    assert model.blocks[0].attn.repeat_kv is modern.repeat_kv and model.blocks[0].attn.rope_attention is None
    ours = gpt.init_gpt2(modern_gpt.ModernGPT(config))
    theirs = model
    theirs.load_state_dict(ours.state_dict())  # the same names (their SwiGLU makes its linears in another order)
    idx = torch.randint(11, (2, 8), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        torch.testing.assert_close(theirs(idx)[0], ours(idx)[0], rtol=1e-5, atol=1e-5)


def test_lesson_12s_top_rungs_are_built_from_the_learners_block_and_muon_runs_their_newton_schulz(monkeypatch):
    from course_lib import ladder, modern, modern_gpt, optimizers
    from course_lib.lesson import with_your_answers
    from course_lib.workflow.your_code import YourCode
    from tests.test_grading_modern import MODERN_ATTENTION, MODERN_BLOCK, NEWTON_SCHULZ

    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    cubic = NEWTON_SCHULZ.replace(
        "X = a * X + b * (XXt @ X) + c * (XXt @ (XXt @ X))", "X = 1.5 * X - 0.5 * (XXt @ X)"
    )  # the classic step, not Muon's: its visible check names it, and the course's stands in
    answers = dict(
        ModernAttention=define(MODERN_ATTENTION, "ModernAttention"),
        ModernBlock=define(MODERN_BLOCK, "ModernBlock"),
        newton_schulz=define(cubic, "newton_schulz"),
    )
    mine = with_your_answers(YourCode(), "12_beyond_gpt2", **answers)
    assert mine.yours("ModernBlock") and mine.yours("ModernAttention") and not mine.yours("newton_schulz")
    assert mine.newton_schulz is optimizers.newton_schulz and "cubic" in mine.banner()
    parts = modern_gpt.ModernParts(ModernBlock=mine.ModernBlock, newton_schulz=mine.newton_schulz)
    config = modern_gpt.ModernConfig(11, 8, d_model=16, n_heads=4, n_layers=1, norm="rms", position="rope",
                                     mlp="swiglu", n_kv_heads=2, bias=False)  # fmt: skip
    rung = ladder.modern_ladder(config)[-1]  # "+ Muon": every switch modern
    model = ladder.build_rung(rung, 0, parts=parts)
    assert type(model.blocks[0]) is answers["ModernBlock"] and type(model.blocks[0]) is not modern.ModernBlock
    muon, _ = ladder.rung_optimizers(model, rung, ladder.LadderSettings(), parts)
    assert muon.orthogonalise is optimizers.newton_schulz
    theirs = modern_gpt.ModernParts(newton_schulz=define(NEWTON_SCHULZ, "newton_schulz"))
    assert ladder.rung_optimizers(model, rung, ladder.LadderSettings(), theirs)[0].orthogonalise is theirs.newton_schulz
