"""course_lib.lesson.your_answers: the running lesson's own answers where they pass their visible checks."""

from __future__ import annotations

from course_lib import gpt2_weights
from course_lib.lesson import your_answers
from tests.answers import define

RIGHT = """
def load_gpt2_weights(model, state_dict):
    import torch

    params = dict(model.named_parameters())
    names = {"tok_emb.weight": "wte.weight", "pos_emb.weight": "wpe.weight", "ln_f.weight": "ln_f.weight",
             "ln_f.bias": "ln_f.bias"}
    parts = {"ln1": "ln_1", "attn.qkv": "attn.c_attn", "attn.out_proj": "attn.c_proj", "ln2": "ln_2",
             "mlp.fc1": "mlp.c_fc", "mlp.fc2": "mlp.c_proj"}
    for i in range(len(model.blocks)):
        for ours, theirs in parts.items():
            for kind in ("weight", "bias"):
                names[f"blocks.{i}.{ours}.{kind}"] = f"h.{i}.{theirs}.{kind}"
    copies = []
    for ours, theirs in names.items():
        key = "transformer." + theirs
        t = state_dict[key]
        if theirs.endswith(("c_attn.weight", "c_proj.weight", "c_fc.weight")):
            t = t.t()
        if t.shape != params[ours].shape:
            raise ValueError(f"{key} does not fit")
        copies.append((params[ours], t))
    with torch.no_grad():
        for p, t in copies:
            p.copy_(t)
    return model
"""

UNWRITTEN = "def load_gpt2_weights(model, state_dict):\n    raise NotImplementedError()\n"
NO_TRANSPOSE = RIGHT.replace("            t = t.t()\n", "            pass\n")


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
