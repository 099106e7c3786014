"""Trusted grading (course_lib.workflow.trusted): verdicts reached outside the notebook's kernel.

The hostile answers below are what a learner who wants marks without the work would try. Each is graded the
way nbgrader's autograde grades it (the lesson's test cells, run by `TrustedGrader.grade`), and each must earn 0
for its exercise while the other exercises keep their points. A hostile answer that runs into a limit is given
limits it reaches by the resource it exhausts: a small memory limit and a generous time limit for the memory
bombs, a short time limit only for the answers that would run for ever. `test_nbgrader_roundtrip.py` runs the
same defence through real nbgrader runs, with a hostile student graded before the others.
"""

from __future__ import annotations

import math

import nbformat
import pytest
import torch

from course_lib import manifest
from course_lib.grading.kit import codec, confine, core
from course_lib.grading.kit.codec import Handle, RemoteFailure
from course_lib.grading.kit.sandbox import Limits
from course_lib.workflow import trusted
from tests.answers import SETATTR_CAUSAL
from tests.nbtools import grade_id, read, with_answer, with_hidden_tests
from tests.nbtools import solved as _solved

LESSON = "04_attention"
EXERCISE = "causal_mask"
WRONG = "import torch\n\ndef causal_mask(T, device=None):\n    return torch.ones(T, T, dtype=torch.bool).triu()\n"

SANDBOX_MEMORY = 2**30  # what a sandbox may allocate here, on top of the test process's memory
# What an honest answer is graded under here: the usual 4 GiB and a time no machine, however loaded, needs.
HONEST = Limits(time=120.0)
# Limits for each kind of hostile answer. Generous unless a limit is what the answer is meant to run into:
ROOMY = Limits(time=60.0, memory=SANDBOX_MEMORY, grace=30.0)
# a loop without end reaches any time limit, so a short one costs no certainty; it still gets time to report back
ENDLESS = Limits(time=3.0, memory=SANDBOX_MEMORY, grace=30.0)
# a call into C that the alarm cannot stop never reports back: a short grace
UNSTOPPABLE = Limits(time=3.0, memory=SANDBOX_MEMORY, grace=2.0)
# a memory bomb meets a small memory limit long before a generous time limit (64 MiB per step: 4 steps)
HOARDING = Limits(time=120.0, memory=2**28, grace=30.0)

# Names built while the answer runs, which no source check can read: `SYS` is the `sys` module, `BUILTINS` the
# builtins, both reached through `vars` on a module every answer may use.
SYS = "vars(torch)['s' + 'ys']"
BUILTINS = "vars(torch)['__built' + 'ins__']"
REF_MASK = "def causal_mask(T, device=None):\n    return ref.causal_mask(T)\n"

# (what the learner tries, answer cell, words the verdict must contain, whether the submission is flagged (the
#  answer reached into the grading while it ran), the limits it is graded under). An answer refused for what its
#  source names never runs, so it touches nothing and flags nothing: it scores 0 for its exercise, with the message
#  the visible check in the notebook gives it too.
HOSTILE = [
    (
        "replace the grader's check functions in the kernel",
        WRONG + "import sys\nfor m in list(sys.modules.values()):\n"
        "    if getattr(m, '__name__', '').startswith('course_lib.grading'):\n"
        "        for n in dir(m):\n            if n.startswith('check_'):\n"
        "                setattr(m, n, lambda *a, **k: None)\n",
        "`sys`",
        False,
        ROOMY,
    ),
    (
        "replace the grader's check functions, with names built at run time",
        WRONG + f"for m in list(getattr({SYS}, 'mod' + 'ules').values()):\n"
        "    if getattr(m, '__name__', '').startswith('course_lib.grading'):\n"
        "        for n in dir(m):\n            if n.startswith('check_'):\n"
        "                setattr(m, n, lambda *a, **k: None)\n",
        "causal_mask(",  # the checks it replaced are the sandbox's copies: the grader's own still judge it
        False,
        ROOMY,
    ),
    (
        "put a fake grading module into sys.modules",
        WRONG + "import sys, types\nfake = types.ModuleType('course_lib.grading.attention')\n"
        "fake.check_causal_mask = lambda *a, **k: None\nsys.modules['course_lib.grading.attention'] = fake\n",
        "`sys`",
        False,
        ROOMY,
    ),
    (
        "replace torch's comparison functions",
        WRONG + "torch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "torch.Tensor.__eq__ = lambda *a, **k: True\n",
        "causal_mask(",
        False,
        ROOMY,
    ),
    (
        "return an object that compares equal to anything",
        "class Anything:\n    def __eq__(self, other):\n        return True\n    shape = None\n\n"
        "def causal_mask(T, device=None):\n    return Anything()\n",
        "causal_mask(",
        False,
        ROOMY,
    ),
    (
        "switch the from-scratch watcher off, then use the reference",
        "import sys\nsys.setprofile(None)\n\n" + REF_MASK,
        "`sys`",
        False,
        ROOMY,
    ),
    (
        "switch the watcher off with names built at run time, then use the reference",
        f"getattr({SYS}, 'setpro' + 'file')(None)\n\n" + REF_MASK,
        "switched the from-scratch watcher off",
        True,
        ROOMY,
    ),
    (
        "switch the watcher off when called, catching the refusal, then use the reference",
        "def causal_mask(T, device=None):\n    try:\n"
        f"        list(map(getattr({SYS}, 'setpro' + 'file'), [None]))\n"
        "    except BaseException:\n        pass\n    return ref.causal_mask(T)\n",
        "switched the from-scratch watcher off",
        True,
        ROOMY,
    ),
    (
        "walk from a traceback to the grader's frames, with names built at run time",
        "try:\n    1 / 0\nexcept ZeroDivisionError as error:\n"
        "    frame = getattr(error.__traceback__, 'tb_' + 'frame')\n\n" + REF_MASK,
        "read `.tb_frame`",
        True,
        ROOMY,
    ),
    (
        "run code hidden in a string",
        f"{BUILTINS}['ex' + 'ec']('import sy' + 's')\n\n" + REF_MASK,
        "ran code it wrote while it ran",
        True,
        ROOMY,
    ),
    (
        "write to the grader's connection by its descriptor number",
        WRONG + "for fd in range(3, 12):\n    try:\n        open(fd, 'wb', closefd=False).write(b'{}')\n"
        "    except OSError:\n        pass\n",
        "opened a file descriptor by its number",
        True,
        ROOMY,
    ),
    (
        "reach the reference through __import__",
        "def causal_mask(T, device=None):\n    return __import__('course_lib.attention').attention.causal_mask(T)\n",
        "`__import__`",
        False,
        ROOMY,
    ),
    (
        "reach the reference through __import__, by a name built at run time",
        "def causal_mask(T, device=None):\n"
        f"    return {BUILTINS}['__imp' + 'ort__']('course_lib.attention').attention.causal_mask(T)\n",
        "your answer calls the course's reference",  # the watcher sees the call, however the answer reached it
        False,
        ROOMY,
    ),
    (
        "call the reference through the lesson's `ref`",
        "def causal_mask(T, device=None):\n    return ref.causal_mask(T, device)\n",
        "your answer calls the course's reference",
        False,
        ROOMY,
    ),
    (
        "use the forbidden shortcut",
        "import torch\nfrom torch import nn\n\ndef causal_mask(T, device=None):\n"
        "    return nn.Transformer.generate_square_subsequent_mask(T) == 0\n",
        "calls `torch.nn.Transformer.generate_square_subsequent_mask`",
        False,
        ROOMY,
    ),
    (
        "replace the reference inside the sandbox with the wrong answer",
        WRONG + "ref.causal_mask = causal_mask\n",
        "causal_mask(",
        False,
        ROOMY,
    ),
    (
        "end the process that grades it",
        "def causal_mask(T, device=None):\n    raise SystemExit(0)\n",
        "ended unexpectedly",
        False,
        ROOMY,
    ),
    (
        "never finish defining the answer",
        "while True:\n    pass\n",
        "did not finish",
        False,
        ENDLESS,
    ),
    (
        "hold the grader in a call into C that the alarm cannot stop",
        "sum(range(10**15))\n",
        "did not answer when stopped",
        False,
        UNSTOPPABLE,
    ),
    (
        "allocate without bound while the answer cell runs",
        "hoard = []\nwhile True:\n    hoard.append(b'x' * 2**26)  # 64 MiB more, every page written\n",
        "running the answer cell ran out of memory (MemoryError)",
        False,
        HOARDING,
    ),
    (
        "allocate without bound when called",
        "def causal_mask(T, device=None):\n    hoard = []\n    while True:\n        hoard.append([0] * 2**24)\n",
        "ran out of memory (MemoryError)",
        False,
        HOARDING,
    ),
]


def solved(lesson: str):
    """Reference answers, with test cells as nbgrader's autograde sees them (hidden tests put back)."""
    return with_hidden_tests(_solved(lesson), lesson)


def _tests_of(nb, exercise: str) -> list[str]:
    return [grade_id(c) for c in nb.cells if (grade_id(c) or "").startswith(f"test_{exercise}")]


@pytest.fixture(autouse=True)
def _roomy_calls(monkeypatch):
    """A check's calls of an answer get the same generous time (the kit's default is 20 s a call)."""
    monkeypatch.setattr(core, "DEFAULT_CALL_TIMEOUT", HONEST.time)


@pytest.fixture(scope="module")
def grader():
    """The trusted grader, made once, as nbgrader makes it before the first submission runs."""
    return trusted.TrustedGrader()


@pytest.fixture(scope="module")
def full_verdicts():
    nb = solved(LESSON)
    return nb, None


def test_reference_answers_pass_every_test_cell_of_every_lesson(grader):
    from tests.nbtools import LESSONS

    for lesson in LESSONS:
        grading = grader.grade(solved(lesson), lesson, limits=HONEST)
        failed = {k: v.message for k, v in grading.verdicts.items() if not v.passed}
        assert grading.verdicts and not failed, (lesson, failed)
        assert not grading.notes


@pytest.mark.parametrize("what, code, words, reported, limits", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_answer_earns_nothing(what, code, words, reported, limits, full_verdicts, grader):
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, code)
    grading = grader.grade(nb, LESSON, only=(EXERCISE,), limits=limits)
    ours = _tests_of(nb, EXERCISE)
    assert len(ours) == 2 and set(grading.verdicts) == set(ours)
    for test_id in ours:
        verdict = grading.verdicts[test_id]
        assert not verdict.passed, what
        assert words in verdict.message, (what, verdict.message)
    assert bool(grading.notes) == reported, (what, grading.notes)


def test_one_hostile_answer_leaves_the_other_exercises_their_points(full_verdicts, grader):
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, HOSTILE[0][1])
    grading = grader.grade(nb, LESSON, limits=HONEST)
    others = {k: v for k, v in grading.verdicts.items() if k not in _tests_of(nb, EXERCISE)}
    assert len(others) == 2 * (len(manifest.lesson(LESSON).exercises) - 1) and all(v.passed for v in others.values())


def test_an_ordinary_wrong_answer_is_named_after_a_hostile_one(full_verdicts, grader):
    full, _ = full_verdicts
    grader.grade(with_answer(full, EXERCISE, HOSTILE[0][1]), LESSON, only=(EXERCISE,), limits=HONEST)
    grading = grader.grade(with_answer(full, EXERCISE, WRONG), LESSON, only=(EXERCISE,), limits=HONEST)
    message = grading.verdicts[f"test_{EXERCISE}"].message
    assert not grading.verdicts[f"test_{EXERCISE}"].passed
    assert "diagonal" in message or "above" in message or "below" in message, message


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="this Linux kernel offers no Landlock")
def test_a_sandbox_writes_nowhere(full_verdicts, tmp_path, grader):
    """torch.save is no name the source check looks for; the sandbox itself refuses the write."""
    full, _ = full_verdicts
    target = tmp_path / "written_by_an_answer.pt"
    nb = with_answer(full, EXERCISE, f"import torch\n\ntorch.save(torch.ones(1), {str(target)!r})\n" + WRONG)
    verdict = grader.grade(nb, LESSON, only=(EXERCISE,), limits=HONEST).verdicts[f"test_{EXERCISE}"]
    assert not verdict.passed and "Permission denied" in verdict.message, verdict.message
    assert not target.exists()
    nb = with_answer(full, EXERCISE, f"import torch\n\ntorch.save(torch.ones(1), {str(target)!r})\n")
    grader.grade(nb, LESSON, only=(EXERCISE,), limits=Limits(time=HONEST.time, memory=None))  # not the kernel's limits
    assert not target.exists()


@pytest.mark.skipif(confine.landlock_abi() < 1, reason="this Linux kernel offers no Landlock")
def test_an_answer_that_writes_to_the_graders_files_is_stopped_by_the_sandbox(full_verdicts, grader):
    """Writing files is no name the source check looks for (`pathlib` is ordinary Python): the sandbox refuses the
    write, the answer cell fails there, and nothing was touched, so nothing is flagged."""
    full, _ = full_verdicts
    target = trusted.PACKAGE_DIR / "grading" / "__init__.py"
    before = target.read_bytes()
    code = f"import pathlib\n\npathlib.Path({str(target)!r}).open('a').write('\\n')\n" + WRONG
    grading = grader.grade(with_answer(full, EXERCISE, code), LESSON, only=(EXERCISE,), limits=HONEST)
    verdict = grading.verdicts[f"test_{EXERCISE}"]
    assert not verdict.passed and "Permission denied" in verdict.message, verdict.message
    assert target.read_bytes() == before and not grading.notes


def test_an_answer_that_needs_another_cell_is_told_so(full_verdicts, grader):
    full, _ = full_verdicts
    nb = with_answer(full, EXERCISE, "def causal_mask(T, device=None):\n    return helper(T)\n")
    message = grader.grade(nb, LESSON, limits=HONEST).verdicts[f"test_{EXERCISE}"].message
    assert "NameError" in message and "helper" in message


def test_a_deleted_answer_cell_scores_zero(full_verdicts, grader):
    full, _ = full_verdicts
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(full), as_version=4))
    nb.cells = [c for c in nb.cells if grade_id(c) != EXERCISE]
    verdict = grader.grade(nb, LESSON, limits=HONEST).verdicts[f"test_{EXERCISE}"]
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
    from course_lib.grading.kit.sandbox import Sandbox

    source = (
        "class Box(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.lin = nn.Linear(2, 2)\n\n"
        "def scale(state):\n    state['lin.weight'] = state['lin.weight'] * 2\n"
    )
    preamble = "import torch\nfrom torch import nn\n"
    names = ("Box", "scale")
    sandbox, ready = Sandbox.start(
        preamble=preamble, bindings={}, source=source, names=names, exercises=(), limits=HONEST
    )
    try:
        box, scale = (Remote(sandbox, ready.names[name], HONEST.time) for name in ("Box", "scale"))
        module = box()
        state = {"lin.weight": torch.ones(2, 2), "lin.bias": torch.zeros(2)}
        module.load_state_dict(state)
        assert torch.equal(module.state_dict()["lin.weight"], torch.ones(2, 2))
        scale(state)  # changed in place by the answer: the grader's dict follows
        assert torch.equal(state["lin.weight"], 2 * torch.ones(2, 2)) and torch.equal(state["lin.bias"], torch.zeros(2))
    finally:
        sandbox.close()


def test_files_a_submission_changes_are_put_back(tmp_path):
    package = tmp_path / "course_lib"
    (package / "grading").mkdir(parents=True)
    init = package / "grading" / "__init__.py"
    init.write_text("CHECKS = 'honest'\n")
    config = tmp_path / "nbgrader_config.py"
    config.write_text("c = get_config()\n")
    files = trusted.CourseFiles(package, also=(config,))
    assert files.restore() == []
    init.write_text("CHECKS = 'always pass'\n")
    config.write_text("c = get_config()\nc.Execute.timeout = 1\n")
    (package / "grading" / "evil.py").write_text("x = 1\n")
    changed = files.restore()
    assert init.read_text() == "CHECKS = 'honest'\n" and config.read_text() == "c = get_config()\n"
    assert not (package / "grading" / "evil.py").exists()
    assert len(changed) == 3 and any("evil.py" in c for c in changed)
    cache = package / "grading" / "__pycache__" / "attention.cpython-311.pyc"
    cache.parent.mkdir()
    cache.write_bytes(b"compiled by an honest kernel, or not")
    assert files.restore() == [] and not cache.exists()  # removed, and no honest submission is flagged


def test_a_grader_restores_the_files_it_remembered(tmp_path, grader):
    files = trusted.CourseFiles(tmp_path)
    (tmp_path / "added.py").write_text("x = 1\n")
    made = trusted.TrustedGrader(files=files)
    assert made.restore_files() == [f"{tmp_path.name}/added.py (added; removed)"]  # shown from the package's parent
    assert grader.files.package_dir == trusted.PACKAGE_DIR


# Lesson 04's exercises 4-6 and lesson 05's MultiHeadAttention may build on the lesson's earlier answers. While
# grading, those names are bound to the course's references, so a broken earlier answer costs only its own points.
_BROKEN_SDPA = (
    "import torch\n\ndef scaled_dot_product_attention(q, k, v, mask=None):\n"
    "    weights = torch.softmax(q @ k.transpose(-2, -1), dim=0)\n    return weights @ v, weights\n"
)
_BROKEN_MASK = (
    "import torch\n\ndef causal_mask(T, device=None):\n    return torch.ones(T, T, dtype=torch.bool).triu()\n"
)
_COMPOSED = {
    "SelfAttention": (
        "class SelfAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)\n\n"
        "    def forward(self, x):\n"
        "        return scaled_dot_product_attention(self.W_query(x), self.W_key(x), self.W_value(x))[0]\n"
    ),
    "CausalSelfAttention": (
        "class CausalSelfAttention(nn.Module):\n"
        "    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        self.context_length = context_length\n"
        "        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)\n"
        "        self.dropout = nn.Dropout(dropout)\n\n"
        "    def forward(self, x):\n"
        "        if x.shape[1] > self.context_length:\n"
        "            raise ValueError('too long')\n"
        "        q, k, v = self.W_query(x), self.W_key(x), self.W_value(x)\n"
        "        _, weights = scaled_dot_product_attention(q, k, v, causal_mask(x.shape[1], device=x.device))\n"
        "        return self.dropout(weights) @ v\n"
    ),
    "CrossAttention": (
        "class CrossAttention(nn.Module):\n"
        "    def __init__(self, d_model, d_memory=None, qkv_bias=False):\n"
        "        super().__init__()\n"
        "        d_memory = d_memory or d_model\n"
        "        self.W_query = nn.Linear(d_model, d_model, bias=qkv_bias)\n"
        "        self.W_key = nn.Linear(d_memory, d_model, bias=qkv_bias)\n"
        "        self.W_value = nn.Linear(d_memory, d_model, bias=qkv_bias)\n\n"
        "    def forward(self, x, memory, memory_mask=None):\n"
        "        q, k, v = self.W_query(x), self.W_key(memory), self.W_value(memory)\n"
        "        return scaled_dot_product_attention(q, k, v, memory_mask)[0]\n"
    ),
}


def _verdicts(grading, nb, exercise: str) -> list[bool]:
    return [grading.verdicts[t].passed for t in _tests_of(nb, exercise)]


def test_composed_answers_earn_full_marks_even_when_the_answers_they_build_on_are_wrong(full_verdicts, grader):
    full, _ = full_verdicts
    nb = with_answer(with_answer(full, "scaled_dot_product_attention", _BROKEN_SDPA), "causal_mask", _BROKEN_MASK)
    for name, code in _COMPOSED.items():
        nb = with_answer(nb, name, code)
    grading = grader.grade(nb, LESSON, limits=HONEST)
    assert _verdicts(grading, nb, "scaled_dot_product_attention") == [False, False]
    assert _verdicts(grading, nb, "causal_mask") == [False, False]
    for name in _COMPOSED:
        assert _verdicts(grading, nb, name) == [True, True], {
            t: grading.verdicts[t].message for t in _tests_of(nb, name)
        }


@pytest.mark.parametrize(
    "name, code",
    [
        (
            "SelfAttention",
            _COMPOSED["SelfAttention"].replace(
                "return scaled_dot_product_attention(self.W_query(x), self.W_key(x), self.W_value(x))[0]",
                "return ref.SelfAttention.forward(self, x)",
            ),
        ),
        (
            "CausalSelfAttention",
            "class CausalSelfAttention(ref.CausalSelfAttention):\n    pass\n",
        ),
    ],
    ids=["calls-its-own-reference", "subclasses-its-own-reference"],
)
def test_building_on_the_same_exercises_reference_still_earns_nothing(name, code, full_verdicts, grader):
    full, _ = full_verdicts
    nb = with_answer(full, name, code)
    grading = grader.grade(nb, LESSON, only=(name,), limits=HONEST)
    for test_id in _tests_of(nb, name):
        assert not grading.verdicts[test_id].passed
        assert "course's reference" in grading.verdicts[test_id].message


_MHA = (
    "class MultiHeadAttention(nn.Module):\n"
    "    def __init__(self, d_model, n_heads, dropout=0.0, causal=False, bias=True):\n"
    "        super().__init__()\n"
    "        self.n_heads, self.causal = n_heads, causal\n"
    "        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)\n"
    "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n"
    "        self.dropout = nn.Dropout(dropout)\n\n"
    "    def forward(self, x, mask=None, need_weights=False):\n"
    "        B, T, C = x.shape\n"
    "        q, k, v = (SPLIT(t, self.n_heads) for t in self.qkv(x).split(C, dim=-1))\n"
    "        allowed = mask\n"
    "        if self.causal:\n"
    "            allowed = causal_mask(T) if mask is None else causal_mask(T) & mask\n"
    "        _, weights = scaled_dot_product_attention(q, k, v, allowed)\n"
    "        weights = self.dropout(weights)\n"
    "        out = self.out_proj(MERGE(weights @ v))\n"
    "        return (out, weights) if need_weights else out\n"
)
_LESSON_04 = "from course_lib.attention import causal_mask, scaled_dot_product_attention\n\n"
_BROKEN_SPLIT = (
    "def split_heads(x, n_heads):\n    B, T, C = x.shape\n    return x.reshape(B, n_heads, T, C // n_heads)\n\n"
    "def merge_heads(x):\n    B, H, T, D = x.shape\n    return x.reshape(B, T, H * D)\n"
)


@pytest.mark.parametrize(
    "helpers",
    [("split_heads", "merge_heads"), ("ref.split_heads", "ref.merge_heads")],
    ids=["its-own-exercise-1", "the-reference-helpers"],
)
def test_lesson_05_multihead_may_use_the_helpers_the_lesson_allows(helpers, grader):
    lesson = "05_multi_head_attention"
    code = _LESSON_04 + _MHA.replace("SPLIT", helpers[0]).replace("MERGE", helpers[1])
    nb = with_answer(with_answer(solved(lesson), "split_merge_heads", _BROKEN_SPLIT), "MultiHeadAttention", code)
    grading = grader.grade(nb, lesson, only=("split_merge_heads", "MultiHeadAttention"), limits=HONEST)
    assert _verdicts(grading, nb, "split_merge_heads") == [False, False]
    tests = _tests_of(nb, "MultiHeadAttention")
    assert all(grading.verdicts[t].passed for t in tests), {t: grading.verdicts[t].message for t in tests}


def test_lesson_05_multihead_built_on_the_reference_module_earns_nothing(grader):
    lesson = "05_multi_head_attention"
    code = "class MultiHeadAttention(ref.MultiHeadAttention):\n    pass\n"
    nb = with_answer(solved(lesson), "MultiHeadAttention", code)
    grading = grader.grade(nb, lesson, only=("MultiHeadAttention",), limits=HONEST)
    assert not any(v.passed for v in grading.verdicts.values())


def test_a_check_can_build_only_the_graders_objects_in_the_sandbox():
    """`core.make` builds what a check hands an answer (lesson 04's model and optimizer) inside the sandbox, and
    only from a function of course_lib.grading: anything else is refused there."""
    from course_lib.grading import attention_training
    from course_lib.grading.kit import remote
    from course_lib.grading.kit.remote import Remote
    from course_lib.grading.kit.sandbox import Sandbox

    source = "def f(x):\n    return x\n"
    sandbox, ready = Sandbox.start(
        preamble="import torch\n", bindings={}, source=source, names=("f",), exercises=(), limits=HONEST
    )
    try:
        answer = Remote(sandbox, ready.names["f"], HONEST.time)
        model, optimizer = core.make(answer, attention_training.training_problem, 2, 3, 5, 0)
        assert remote.is_remote(model) and core.type_name(model) == "ToyAttentionModel"
        assert core.is_instance(model, torch.nn.Module) and not core.is_instance(model, torch.nn.Linear)
        assert core.type_name(optimizer) == "SGD"
        here, _ = attention_training.training_problem(2, 3, 5, 0)
        there = model.state_dict()
        assert there.keys() == here.state_dict().keys()
        assert all(torch.equal(there[k], v) for k, v in here.state_dict().items())
        with pytest.raises(LookupError, match="not a function of the course's graders"):
            core.make(answer, torch.zeros, 3)
    finally:
        sandbox.close()


def test_the_kits_dispatch_acts_here_on_an_answer_that_lives_here():
    from course_lib.grading import attention_training

    state = torch.get_rng_state()
    model, optimizer = core.make(lambda: None, attention_training.training_problem, 2, 3, 5, 0)
    assert torch.equal(torch.get_rng_state(), state)  # built with the grader's random state, which it leaves as it was
    assert core.type_name(model) == "ToyAttentionModel" and core.type_name(optimizer) == "SGD"
    assert core.is_instance(model, torch.nn.Module) and not core.is_instance(model, torch.nn.Linear)


def test_lesson_10_load_gpt2_weights_is_graded_in_a_sandbox_with_a_gpt(grader):
    # The check hands the answer a GPT built in its sandbox (the preamble's `GPT`, the course's) and a
    # GPT2LMHeadModel's state dict, which crosses as plain data; a known wrong mapping is named from there too.
    lesson, exercise = "10_gpt2", "load_gpt2_weights"
    full = solved(lesson)
    right = grader.grade(full, lesson, only=(exercise,), limits=HONEST)
    assert set(right.verdicts) == set(_tests_of(full, exercise))
    assert all(v.passed for v in right.verdicts.values()), {k: v.message for k, v in right.verdicts.items()}
    answer = next(c.source for c in full.cells if grade_id(c) == exercise)
    square = 'conv1d = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")'
    assert square in answer
    untransposed = answer.replace(square, 'conv1d = ("attn.c_attn.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")')
    wrong = grader.grade(with_answer(full, exercise, untransposed), lesson, only=(exercise,), limits=HONEST)
    message = wrong.verdicts[f"test_{exercise}"].message
    assert not wrong.verdicts[f"test_{exercise}"].passed and "`attn.c_proj.weight` was copied without" in message
    uses_gpt = (
        "def load_gpt2_weights(model, state_dict):\n    assert isinstance(model, GPT)\n"
        + answer.split("def load_gpt2_weights(model, state_dict):\n", 1)[1]
    )
    typed = grader.grade(with_answer(full, exercise, "import torch\n\n\n" + uses_gpt), lesson, limits=HONEST)
    # The whole lesson, graded: every reference answer (and this one, which names the preamble's GPT) passes.
    assert len(typed.verdicts) == 2 * len(manifest.lesson(lesson).exercises)
    assert all(v.passed for v in typed.verdicts.values()), {k: v.message for k, v in typed.verdicts.items()}


def test_lesson_07_model_is_graded_in_a_sandbox_with_its_configuration_and_layer_classes(grader):
    # The check builds the model's Seq2SeqConfig and the layer classes it passes where the answer lives (neither is
    # plain data), and reads back the classes of the layers the answer built.
    lesson, exercise = "07_encoder_decoder", "EncoderDecoderTransformer"
    full = solved(lesson)
    right = grader.grade(full, lesson, only=(exercise,), limits=HONEST)
    assert set(right.verdicts) == set(_tests_of(full, exercise))
    assert all(v.passed for v in right.verdicts.values()), {k: v.message for k, v in right.verdicts.items()}
    answer = next(c.source for c in full.cells if grade_id(c) == exercise)
    wrongs = {
        # a known mistake, named from the sandbox as in the notebook
        "cross-attention reads the memory's padding": answer.replace(
            "layer(x, memory, None, src_mask, need_weights=True)", "layer(x, memory, need_weights=True)"
        ),
        # the layer classes given are not the ones built
        "not the encoder_layer class it was given": answer.replace(
            "[encoder_layer(c.d_model", "[EncoderLayer(c.d_model"
        ).replace("[decoder_layer(c.d_model", "[DecoderLayer(c.d_model"),
        # the course's model itself, under the answer's name
        "course's reference": "class EncoderDecoderTransformer(ref.EncoderDecoderTransformer):\n    pass\n",
    }
    for words, code in wrongs.items():
        assert code != answer
        wrong = grader.grade(with_answer(full, exercise, code), lesson, only=(exercise,), limits=HONEST)
        for test_id, verdict in wrong.verdicts.items():
            assert not verdict.passed and words in verdict.message, (words, test_id, verdict.message)


# Correct answers written with ordinary dynamic Python (getattr, setattr, vars, hasattr, io, types): graded like any
# other code, full marks and no flag.
_DYNAMIC_MASK = (
    "import io\nimport types\n\nimport torch\n\n"
    "_made = types.SimpleNamespace(calls=0)\n\n\n"
    "def causal_mask(T, device=None):\n"
    "    _made.calls += 1\n"
    "    log = io.StringIO()\n"
    "    print(T, file=log)\n"
    "    lower = getattr(torch, 'tril') if hasattr(torch, 'tril') else None\n"
    "    return lower(torch.ones(int(log.getvalue()), T, dtype=torch.bool, device=device))\n"
)


def _with_getattr(answer: str) -> str:
    """Lesson 10's solution changed only to look the model's parameters up with `getattr`."""
    old = "    params = dict(model.named_parameters())  # the tied head is listed once, as tok_emb.weight\n"
    assert old in answer
    new = (
        "    params = {}\n"
        "    for ours, _ in names:\n"
        "        owner = model\n"
        "        for part in ours.split('.')[:-1]:\n"
        "            owner = owner[int(part)] if part.isdigit() else getattr(owner, part)\n"
        "        params[ours] = getattr(owner, ours.split('.')[-1])\n"
    )
    return answer.replace(old, new)


@pytest.mark.parametrize(
    "lesson, exercise, code",
    [
        ("04_attention", "CausalSelfAttention", SETATTR_CAUSAL),
        ("04_attention", "causal_mask", _DYNAMIC_MASK),
        ("10_gpt2", "load_gpt2_weights", None),
    ],
    ids=["setattr-CausalSelfAttention", "getattr-io-types-causal_mask", "getattr-load_gpt2_weights"],
)
def test_correct_answers_using_getattr_setattr_and_vars_earn_full_marks(lesson, exercise, code, grader):
    full = solved(lesson)
    if code is None:
        code = _with_getattr(next(c.source for c in full.cells if grade_id(c) == exercise))
    nb = with_answer(full, exercise, code)
    grading = grader.grade(nb, lesson, only=(exercise,), limits=HONEST)
    tests = _tests_of(nb, exercise)
    assert len(tests) == 2 and all(grading.verdicts[t].passed for t in tests), {
        t: grading.verdicts[t].message for t in tests
    }
    assert not grading.notes


# The same answer cells through the grader and through the visible check as a notebook runs it (the cell's text
# kept where IPython keeps it, the lesson's other exercises bound as the grader binds them). Every refusal the
# grader makes before running an answer, or while the answer's calls run, the visible check makes too, in the same
# words; what both let through, both grade alike.
_MASK_BODY = "    return torch.ones(T, T, dtype=torch.bool, device=device).tril()\n"
PARITY = [
    ("causal_mask", "import torch\n\ndef causal_mask(T, device=None):\n" + _MASK_BODY),
    ("causal_mask", _DYNAMIC_MASK),
    ("causal_mask", "import sys\nimport torch\n\ndef causal_mask(T, device=None):\n" + _MASK_BODY),
    ("causal_mask", "import torch\nimport inspect\n\ndef causal_mask(T, device=None):\n" + _MASK_BODY),
    ("causal_mask", "import torch\n\ndef causal_mask(T, device=None):\n    return eval('torch.ones(T, T).tril()')\n"),
    ("causal_mask", "import threading\nimport torch\n\ndef causal_mask(T, device=None):\n" + _MASK_BODY),
    ("causal_mask", "import torch\nfrom course_lib.grading.kit import core\n\ndef causal_mask(T, device=None):\n"
     + _MASK_BODY),
    ("causal_mask", "import torch\nfrom torch import nn\n\ndef causal_mask(T, device=None):\n"
     "    return nn.Transformer.generate_square_subsequent_mask(T) == 0\n"),
    ("causal_mask", "import torch\n\ndef causal_mask(T, device=None):\n"
     f"    getattr({SYS}, 'setpro' + 'file')(None)\n" + _MASK_BODY),
    ("causal_mask", "import torch\n\ndef causal_mask(T, device=None):\n"
     f"    {BUILTINS}['ev' + 'al']('1')\n" + _MASK_BODY),
    ("causal_mask", "def causal_mask(T, device=None):\n    return ref.causal_mask(T)\n"),
    ("causal_mask", WRONG),
    ("CausalSelfAttention", SETATTR_CAUSAL),
    ("CausalSelfAttention", "import os\n" + SETATTR_CAUSAL),
]  # fmt: skip


def _visible_verdict(lesson: str, exercise: str, code: str) -> tuple[bool, str]:
    from course_lib.grading.kit.errors import GradingError
    from tests.answers import run_cell

    entry = manifest.lesson(lesson)
    bindings = {}
    exec(compile(entry.sandbox_preamble, "<lesson imports>", "exec"), bindings)
    for other in entry.exercises:
        if other.name != exercise:
            for name, path in other.paths.items():
                bindings[name] = trusted.resolve(path)
    namespace = run_cell(code, **bindings)
    check = getattr(__import__(entry.grader, fromlist=["x"]), f"check_{exercise}")
    try:
        check(namespace[exercise])
    except GradingError as exc:
        return False, exc.message
    return True, ""


@pytest.mark.parametrize("exercise, code", PARITY, ids=range(len(PARITY)))
def test_the_visible_check_and_the_grader_agree_on_every_refusal(exercise, code, full_verdicts, grader):
    full, _ = full_verdicts
    grading = grader.grade(with_answer(full, exercise, code), LESSON, only=(exercise,), limits=HONEST)
    graded = grading.verdicts[f"test_{exercise}"]
    passed, message = _visible_verdict(LESSON, exercise, code)
    assert passed == graded.passed, (message, graded.message)
    assert message == ("" if passed else graded.message)


@pytest.mark.slow
def test_in_a_kernel_the_visible_check_shows_the_tick_or_the_graders_refusal(full_verdicts, grader, tmp_path):
    """In a real Jupyter kernel (the lesson's set-up cell first, as a learner runs it): the setattr answer gets the
    green tick, and the same answer with `import sys` gets the grader's refusal, word for word, before it is
    submitted."""
    import nbformat

    from tests.nbtools import execute, release_path

    refused = "import sys\n" + SETATTR_CAUSAL
    released = read(release_path(LESSON))
    setup = next(c for c in released.cells if grade_id(c) == "setup")
    test_cell = next(c for c in released.cells if grade_id(c) == "test_CausalSelfAttention")
    nb = nbformat.v4.new_notebook()
    nb.cells = [setup]
    for code in (SETATTR_CAUSAL, refused):
        nb.cells += [nbformat.v4.new_code_cell(code), nbformat.v4.new_code_cell(test_cell.source)]
    execute(nb, timeout=300, folder=tmp_path)
    tick, cross = nb.cells[2].outputs, nb.cells[4].outputs
    shown = [o.get("data", {}).get("text/plain", "") for o in tick]
    assert len(shown) == 1 and shown[0].startswith("✓ CausalSelfAttention: all "), tick
    full, _ = full_verdicts
    graded = grader.grade(with_answer(full, "CausalSelfAttention", refused), LESSON, only=("CausalSelfAttention",))
    message = graded.verdicts["test_CausalSelfAttention"].message
    assert "`sys`" in message
    assert [o.get("evalue") for o in cross if o.get("output_type") == "error"] == [f"[CausalSelfAttention] {message}"]
