"""Trusted grading (course_lib.workflow.trusted): verdicts reached outside the notebook's kernel.

The hostile answers below are what a learner who wants marks without the work would try. Each is graded the
way nbgrader's autograde grades it (the lesson's test cells, run by `trusted.grade`), and each must earn 0 for
its exercise while the other exercises keep their points. `test_nbgrader_roundtrip.py` runs the same defence
through real nbgrader runs, with a hostile student graded before the others.
"""

from __future__ import annotations

import math

import nbformat
import pytest
import torch

from course_lib.grading.kit import codec
from course_lib.grading.kit.codec import Handle, RemoteFailure
from course_lib.workflow import confine, sandbox, trusted
from tests.nbtools import grade_id, read, source_path, with_answer
from tests.nbtools import solved as _solved

LESSON = "04_attention"
EXERCISE = "causal_mask"
WRONG = "import torch\n\ndef causal_mask(T, device=None):\n    return torch.ones(T, T, dtype=torch.bool).triu()\n"

# (what the learner tries, answer cell, words the verdict must contain, whether the grader reports interference)
HOSTILE = [
    (
        "replace the grader's check functions in the kernel",
        WRONG + "import sys\nfor m in list(sys.modules.values()):\n"
        "    if getattr(m, '__name__', '').startswith('course_lib.grading'):\n"
        "        for n in dir(m):\n            if n.startswith('check_'):\n"
        "                setattr(m, n, lambda *a, **k: None)\n",
        "reach into the grading machinery",
        True,
    ),
    (
        "put a fake grading module into sys.modules",
        WRONG + "import sys, types\nfake = types.ModuleType('course_lib.grading.attention')\n"
        "fake.check_causal_mask = lambda *a, **k: None\nsys.modules['course_lib.grading.attention'] = fake\n",
        "reach into the grading machinery",
        True,
    ),
    (
        "replace torch's comparison functions",
        WRONG + "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda *a, **k: True\n",
        "causal_mask(",
        False,
    ),
    (
        "return an object that compares equal to anything",
        "class Anything:\n    def __eq__(self, other):\n        return True\n    shape = None\n\n"
        "def causal_mask(T, device=None):\n    return Anything()\n",
        "causal_mask(",
        False,
    ),
    (
        "append code to the grader's files on disk",
        WRONG + "with open(ref.__file__.replace('attention.py', 'grading/__init__.py'), 'a') as f:\n"
        "    f.write('\\n')\n",
        "`open`",
        True,
    ),
    (
        "switch the from-scratch watcher off, then use the reference",
        "import sys\nsys.setprofile(None)\n\ndef causal_mask(T, device=None):\n    return ref.causal_mask(T)\n",
        "`sys`",
        True,
    ),
    (
        "reach the reference through __import__",
        "def causal_mask(T, device=None):\n    return __import__('course_lib.attention').attention.causal_mask(T)\n",
        "`__import__`",
        True,
    ),
    (
        "call the reference through the lesson's `ref`",
        "def causal_mask(T, device=None):\n    return ref.causal_mask(T, device)\n",
        "your answer calls the course's reference",
        False,
    ),
    (
        "use the forbidden shortcut",
        "import torch\nfrom torch import nn\n\ndef causal_mask(T, device=None):\n"
        "    return nn.Transformer.generate_square_subsequent_mask(T) == 0\n",
        "forbids",
        False,
    ),
    (
        "replace the reference inside the sandbox with the wrong answer",
        WRONG + "ref.causal_mask = causal_mask\n",
        "causal_mask(",
        False,
    ),
    (
        "end the process that grades it",
        "def causal_mask(T, device=None):\n    raise SystemExit(0)\n",
        "ended unexpectedly",
        False,
    ),
    (
        "never finish defining the answer",
        "while True:\n    pass\n",
        "did not finish",
        False,
    ),
    (
        "hold the grader in a call into C that the alarm cannot stop",
        "sum(range(10**15))\n",
        "did not answer when stopped",
        False,
    ),
    (
        "allocate without bound while the answer cell runs",
        "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**26)  # 64 MiB more, every page written\n",
        "running the answer cell ran out of memory (MemoryError)",
        False,
    ),
    (
        "allocate without bound when called",
        "def causal_mask(T, device=None):\n    hoard = []\n    while True:\n        hoard.append([0] * 2**24)\n",
        "ran out of memory (MemoryError)",
        False,
    ),
]
SANDBOX_MEMORY = 2**30  # what a sandbox may allocate here, on top of the test process's memory


def solved(lesson: str):
    """Reference answers, with test cells as nbgrader's autograde sees them (hidden tests put back)."""
    nb = _solved(lesson)
    tests = {grade_id(c): c.source for c in read(source_path(lesson)).cells if (grade_id(c) or "").startswith("test_")}
    for cell in nb.cells:
        if grade_id(cell) in tests:
            cell.source = tests[grade_id(cell)]
    return nb


def _tests_of(nb, exercise: str) -> list[str]:
    return [grade_id(c) for c in nb.cells if (grade_id(c) or "").startswith(f"test_{exercise}")]


@pytest.fixture(scope="module")
def full_verdicts():
    nb = solved(LESSON)
    return nb, None


def test_reference_answers_pass_every_test_cell_of_every_lesson():
    from tests.nbtools import LESSONS

    for lesson in LESSONS:
        grading = trusted.grade(solved(lesson), lesson)
        failed = {k: v.message for k, v in grading.verdicts.items() if not v.passed}
        assert grading.verdicts and not failed, (lesson, failed)
        assert not grading.notes


@pytest.mark.parametrize("what, code, words, reported", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_answer_earns_nothing(what, code, words, reported, full_verdicts, monkeypatch):
    monkeypatch.setattr(trusted, "DEFAULT_CALL_TIMEOUT", 3.0)  # the loop need not take the full 20 s here
    monkeypatch.setattr(sandbox, "START_GRACE", 2.0)
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, code)
    grading = trusted.grade(nb, LESSON, only=(EXERCISE,), memory=SANDBOX_MEMORY)
    ours = _tests_of(nb, EXERCISE)
    assert len(ours) == 2 and set(grading.verdicts) == set(ours)
    for test_id in ours:
        verdict = grading.verdicts[test_id]
        assert not verdict.passed, what
        assert words in verdict.message, (what, verdict.message)
    assert bool(grading.notes) == reported, (what, grading.notes)


def test_one_hostile_answer_leaves_the_other_exercises_their_points(full_verdicts):
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, HOSTILE[0][1])
    grading = trusted.grade(nb, LESSON)
    others = {k: v for k, v in grading.verdicts.items() if k not in _tests_of(nb, EXERCISE)}
    assert len(others) == 10 and all(v.passed for v in others.values())


def test_an_ordinary_wrong_answer_is_named_after_a_hostile_one(full_verdicts):
    full, _ = full_verdicts
    trusted.grade(with_answer(full, EXERCISE, HOSTILE[0][1]), LESSON, only=(EXERCISE,))
    grading = trusted.grade(with_answer(full, EXERCISE, WRONG), LESSON, only=(EXERCISE,))
    message = grading.verdicts[f"test_{EXERCISE}"].message
    assert not grading.verdicts[f"test_{EXERCISE}"].passed
    assert "diagonal" in message or "above" in message or "below" in message, message


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="this Linux kernel offers no Landlock")
def test_a_sandbox_writes_nowhere(full_verdicts, tmp_path):
    """torch.save is no name the source check looks for; the sandbox itself refuses the write."""
    full, _ = full_verdicts
    target = tmp_path / "written_by_an_answer.pt"
    nb = with_answer(full, EXERCISE, f"import torch\n\ntorch.save(torch.ones(1), {str(target)!r})\n" + WRONG)
    verdict = trusted.grade(nb, LESSON, only=(EXERCISE,)).verdicts[f"test_{EXERCISE}"]
    assert not verdict.passed and "Permission denied" in verdict.message, verdict.message
    assert not target.exists()
    nb = with_answer(full, EXERCISE, f"import torch\n\ntorch.save(torch.ones(1), {str(target)!r})\n")
    trusted.grade(nb, LESSON, only=(EXERCISE,), memory=None)  # the sandbox's limits are not the kernel's
    assert not target.exists()


def test_an_answer_that_needs_another_cell_is_told_so(full_verdicts):
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, "def causal_mask(T, device=None):\n    return helper(T)\n")
    message = trusted.grade(nb, LESSON).verdicts[f"test_{EXERCISE}"].message
    assert "NameError" in message and "helper" in message


def test_a_deleted_answer_cell_scores_zero(full_verdicts):
    full, _ = full_verdicts
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(full), as_version=4))
    nb.cells = [c for c in nb.cells if grade_id(c) != EXERCISE]
    verdict = trusted.grade(nb, LESSON).verdicts[f"test_{EXERCISE}"]
    assert not verdict.passed and "deleted" in verdict.message


@pytest.mark.parametrize(
    "source",
    [
        "import os\nos.system('true')",
        "from course_lib.grading.attention import check_causal_mask\ncheck_causal_mask(causal_mask)\nx = 1",
        "from course_lib.grading.attention import check_causal_mask\ncheck_causal_mask(__import__('os'))",
        "from course_lib.grading.attention import check_causal_mask\ncheck_causal_mask(causal_mask, cases=[f()])",
        "from os import system\nsystem('true')",
    ],
)
def test_test_cells_are_read_as_data_never_run(source):
    with pytest.raises(ValueError):
        trusted.parse_test_cell(source)


def test_hidden_cases_are_read_with_their_data():
    test = trusted.parse_test_cell(
        "# Hidden checks\n### BEGIN HIDDEN TESTS\nfrom course_lib.grading.tokenization import check_get_pair_counts\n"
        "check_get_pair_counts(get_pair_counts, cases=[[4, -4], list(b'ab'), list(range(3)), {(1, 2): 3}])\n"
        "### END HIDDEN TESTS\n"
    )
    assert (test.module, test.function, test.names) == (
        "course_lib.grading.tokenization",
        "check_get_pair_counts",
        ("get_pair_counts",),
    )
    assert test.kwargs == {"cases": [[4, -4], [97, 98], [0, 1, 2], {(1, 2): 3}]}


def test_plain_data_round_trips_and_nothing_else_crosses():
    value = {
        "ints": [1, -2, 2**70],
        "floats": (0.5, math.inf, -math.inf),
        (3, 4): torch.arange(6, dtype=torch.float32).reshape(2, 3),
        "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 3),
        "bool": torch.tensor([True, False]),
        "bytes": b"\x00\xff",
        "handle": Handle(3, "SelfAttention", ("__main__.SelfAttention", "torch.nn.modules.module.Module"), True),
        "failure": RemoteFailure("ValueError", ("builtins.ValueError",), "bad"),
    }
    back = codec.decode(codec.encode(value))
    assert back.keys() == value.keys()
    for key in value:
        if isinstance(value[key], torch.Tensor):
            assert torch.equal(back[key], value[key]) and back[key].dtype == value[key].dtype
        else:
            assert back[key] == value[key]
    nan = codec.decode(codec.encode(float("nan")))
    assert math.isnan(nan)

    class Sneaky:
        def __eq__(self, other):
            return True

    with pytest.raises(codec.CodecError):
        codec.encode(Sneaky())
    for message in [b'{"tensor": "object", "shape": [1], "data": ""}', b'{"pickle": "x"}', b"[1, {}]"]:
        with pytest.raises(codec.CodecError):
            codec.decode(message)


def test_dicts_of_tensors_cross_as_arguments_and_come_back_as_the_answer_left_them():
    """A check may hand an answer's module a state dict (lesson 06 loads random weights this way); comparing the
    dict before and after the call must not ask a tensor for its truth value."""
    from course_lib.grading.kit.remote import Remote
    from course_lib.workflow.sandbox import Sandbox

    source = (
        "class Box(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(2, 2)\n\n"
        "def scale(state):\n    state['lin.weight'] = state['lin.weight'] * 2\n"
    )
    preamble = "import torch\nfrom torch import nn\n"
    names = ("Box", "scale")
    sandbox, ready = Sandbox.start(
        preamble=preamble, bindings={}, source=source, names=names, references=(), timeout=20
    )
    try:
        box, scale = (Remote(sandbox, ready.names[name]) for name in ("Box", "scale"))
        module = box()
        state = {"lin.weight": torch.ones(2, 2), "lin.bias": torch.zeros(2)}
        module.load_state_dict(state)
        assert torch.equal(module.state_dict()["lin.weight"], torch.ones(2, 2))
        scale(state)  # changed in place by the answer: the grader's dict follows
        assert torch.equal(state["lin.weight"], 2 * torch.ones(2, 2)) and torch.equal(state["lin.bias"], torch.zeros(2))
    finally:
        sandbox.close()


def test_files_a_submission_changes_are_put_back(tmp_path, monkeypatch):
    package = tmp_path / "course_lib"
    (package / "grading").mkdir(parents=True)
    init = package / "grading" / "__init__.py"
    init.write_text("CHECKS = 'honest'\n")
    monkeypatch.setattr(trusted, "_snapshot", {init: init.read_bytes()})
    monkeypatch.setattr(trusted, "_watched_dirs", [package])
    monkeypatch.setattr(trusted, "PACKAGE_DIR", package)
    assert trusted.restore_files() == []
    init.write_text("CHECKS = 'always pass'\n")
    (package / "grading" / "evil.py").write_text("x = 1\n")
    changed = trusted.restore_files()
    assert init.read_text() == "CHECKS = 'honest'\n"
    assert not (package / "grading" / "evil.py").exists()
    assert len(changed) == 2 and any("evil.py" in c for c in changed)
    cache = package / "grading" / "__pycache__" / "attention.cpython-311.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"compiled by an honest kernel, or not")
    assert trusted.restore_files() == [] and not cache.exists()  # removed, and no honest submission is flagged
