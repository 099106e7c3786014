"""Real nbgrader runs on temporary copies of the course (docs/ARCHITECTURE.md, "Trusted grading").

Every lesson's class goes through generate_assignment → autograde → generate_feedback: the BATTERY lessons' in a
course each, the other lessons' together in one course, each command run once for all of them (`"*"`). Every
lesson's class has these students: full (reference answers pasted in) and mixed (the lesson's known mistake in one
exercise, another exercise left as released, the reference answers elsewhere). The grading machinery that does not
depend on the lesson — restoring tampered cells, containing a hostile answer, time limits, broken files — is
exercised in full on the BATTERY lessons, whose classes also have: a_hostile (graded first: a wrong answer that also
tries to rewrite the grader on disk, switch the from-scratch watcher off and patch the checks in its process, by
names built at run time), dynamic (correct answers written with getattr, setattr and vars), blank (the student
version untouched), tampered (one locked test cell rewritten to `pass`, another deleted, the set-up cell deleted),
loop (an answer cell that never finishes), malformed (not JSON) and wrong_lesson (another lesson's notebook).
(tests/test_trusted.py grades hostile answers of every lesson, and every lesson's reference answers, the trusted way
without nbgrader.) The self-grading command is checked on its own too. Each course runs on one xdist worker (one
gradebook each). The class imports its own copy of course_lib (PYTHONPATH), as a class installed with
`pip install -e .` would import the instructor's checkout, so the hostile student's write lands in a copy, never in
this checkout (with Landlock the sandbox's write is refused; without, the grader puts the file back). By default
nbgrader_config.py runs no cell in a kernel: the hostile answer runs only in its sandbox, where what it tries is
stopped.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from course_lib.grading.kit import confine
from course_lib.workflow.course import run_nbgrader
from course_lib.workflow.nbgrader_plugins import FLAG_MARKER
from course_lib.workflow.selfgrade import grade_notebook
from tests.answers import SETATTR_CAUSAL
from tests.nbtools import (
    LESSONS,
    ROOT,
    answer_names,
    grade_id,
    hidden_lines,
    read,
    release_path,
    solved,
    with_answer,
)

pytestmark = pytest.mark.slow

# A known mistake per lesson: (exercise, wrong answer code, words its feedback must contain).
ONE_WRONG = {
    "00_welcome": (
        "normalize_rows",
        "import torch\n\ndef normalize_rows(x):\n    return x / x.sum(dim=0, keepdim=True)\n",
        "columns sum to 1",
    ),
    "01_tokenization": (
        "merge_pair",
        "def merge_pair(ids, pair, new_id):\n"
        "    out = []\n"
        "    for i, token in enumerate(ids):\n"
        "        if i + 1 < len(ids) and (token, ids[i + 1]) == pair:\n"
        "            out.append(new_id)\n"
        "        elif i > 0 and (ids[i - 1], token) == pair:\n"
        "            continue\n"
        "        else:\n"
        "            out.append(token)\n"
        "    return out\n",
        "overlap",
    ),
    "02_embeddings": (
        "most_similar",
        "import torch\n\n\ndef most_similar(query, matrix, k):\n"
        "    scores = matrix @ query  # (V,)\n"
        "    return torch.topk(scores, k).indices\n",
        "ranked the rows by their dot product",
    ),
    "03_position_encoding": (
        "sinusoidal_position_encoding",
        "import torch\n\n\ndef sinusoidal_position_encoding(max_len, d_model, base=10000.0):\n"
        "    if d_model % 2:\n"
        '        raise ValueError(f"d_model must be even, got {d_model}")\n'
        "    position = torch.arange(max_len, dtype=torch.float32)[:, None]\n"
        "    angle = position / base ** (torch.arange(0, d_model, 2, dtype=torch.float32) / d_model)\n"
        "    pe = torch.zeros(max_len, d_model)\n"
        "    pe[:, 0::2] = torch.cos(angle)\n"
        "    pe[:, 1::2] = torch.sin(angle)\n"
        "    return pe\n",
        "sine and cosine are swapped",
    ),
    "04_attention": (
        "scaled_dot_product_attention",
        "import math\n\nimport torch\n\n\n"
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
        "    weights = torch.softmax(scores, dim=-1)\n"
        "    if mask is not None:\n"
        "        weights = weights.masked_fill(~mask, 0.0)\n"
        "    return weights @ v, weights\n",
        "after the softmax",
    ),
    "05_multi_head_attention": (
        "MultiHeadAttention",
        "import math\n\nimport torch\nfrom torch import nn\n\n\n"
        "class MultiHeadAttention(nn.Module):\n"
        "    def __init__(self, d_model, n_heads, dropout=0.0, causal=False, bias=True):\n"
        "        super().__init__()\n"
        "        self.n_heads, self.causal = n_heads, causal\n"
        "        self.qkv = nn.Linear(d_model, 3 * d_model, bias=bias)\n"
        "        self.out_proj = nn.Linear(d_model, d_model, bias=bias)\n"
        "        self.dropout = nn.Dropout(dropout)\n\n"
        "    def forward(self, x, mask=None, need_weights=False):\n"
        "        B, T, C = x.shape\n"
        "        H = self.n_heads\n"
        "        q, k, v = (t.reshape(B, H, T, C // H) for t in self.qkv(x).split(C, dim=-1))\n"
        "        scores = q @ k.transpose(-2, -1) / math.sqrt(C // H)\n"
        "        allowed = mask\n"
        "        if self.causal:\n"
        "            lower = torch.ones(T, T, dtype=torch.bool).tril()\n"
        "            allowed = lower if mask is None else lower & mask\n"
        "        if allowed is not None:\n"
        "            scores = scores.masked_fill(~allowed, float('-inf'))\n"
        "        weights = self.dropout(torch.softmax(scores, dim=-1))\n"
        "        out = self.out_proj((weights @ v).transpose(1, 2).reshape(B, T, C))\n"
        "        return (out, weights) if need_weights else out\n",
        "split with a bare view",
    ),
    "06_transformer_blocks": (
        "FeedForward",
        "import torch.nn.functional as F\nfrom torch import nn\n\n\n"
        "class FeedForward(nn.Module):\n"
        "    def __init__(self, d_model, d_hidden, dropout=0.0):\n"
        "        super().__init__()\n"
        "        self.fc1 = nn.Linear(d_model, d_hidden)\n"
        "        self.fc2 = nn.Linear(d_hidden, d_model)\n"
        "        self.dropout = nn.Dropout(dropout)\n\n"
        "    def forward(self, x):\n"
        "        return self.dropout(self.fc2(F.gelu(self.fc1(x))))\n",
        "exact (erf) GELU",
    ),
    "07_encoder_decoder": (
        "EncoderDecoderTransformer",
        "class EncoderDecoderTransformer(nn.Module):\n"
        "    def __init__(self, config, encoder_layer=EncoderLayer, decoder_layer=DecoderLayer):\n"
        "        super().__init__()\n"
        "        self.config = c = config\n"
        "        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)\n"
        "        nn.init.normal_(self.tok_emb.weight, std=c.d_model**-0.5)\n"
        "        self.pos = PositionEncoding(c.d_model, c.context_length)\n"
        "        self.dropout = nn.Dropout(c.dropout)\n"
        "        sizes = (c.d_model, c.n_heads, c.d_hidden, c.dropout)\n"
        "        self.encoder = nn.ModuleList([encoder_layer(*sizes) for _ in range(c.n_layers)])\n"
        "        self.decoder = nn.ModuleList([decoder_layer(*sizes) for _ in range(c.n_layers)])\n"
        "        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)\n"
        "        if c.tie_embeddings:\n"
        "            self.lm_head.weight = self.tok_emb.weight\n\n"
        "    def embed(self, ids):\n"
        "        return self.dropout(self.pos(self.tok_emb(ids) * math.sqrt(self.config.d_model)))\n\n"
        "    def source_mask(self, src):\n"
        "        return src != self.config.pad_id\n\n"
        "    def encode(self, src, src_mask=None):\n"
        "        x = self.embed(src)\n"
        "        for layer in self.encoder:\n"
        "            x = layer(x)  # the padding mask is not passed\n"
        "        return x\n\n"
        "    def decode(self, tgt, memory, src_mask=None, need_weights=False):\n"
        "        x, cross = self.embed(tgt), []\n"
        "        for layer in self.decoder:\n"
        "            x, _, weights = layer(x, memory, None, src_mask, need_weights=True)\n"
        "            cross.append(weights)\n"
        "        logits = self.lm_head(x)\n"
        "        return (logits, torch.stack(cross)) if need_weights else logits\n\n"
        "    def forward(self, src, tgt):\n"
        "        src_mask = self.source_mask(src)\n"
        "        return self.decode(tgt, self.encode(src, src_mask), src_mask)\n",
        "the encoder layers got no padding mask",
    ),
    "08_statquest_decoder": (
        "statquest_dataset",
        "import torch\n\n\ndef statquest_dataset():\n"
        "    inputs = torch.tensor([[0, 1, 2, 4, 3], [2, 1, 0, 4, 3]])\n"
        "    return inputs, inputs.clone()\n",
        "labels are not shifted",
    ),
    "09_char_gpt": (
        "get_batch",
        "import torch\n\n\n"
        "def get_batch(data, block_size, batch_size, generator):\n"
        "    ix = torch.randint(len(data) - block_size - 1, (batch_size,), generator=generator)\n"
        "    x = torch.stack([data[i : i + block_size] for i in ix])\n"
        "    y = torch.stack([data[i + 1 : i + block_size + 1] for i in ix])\n"
        "    return x, y\n",
        "off by one",
    ),
    "10_gpt2": (
        "top_p_filter",
        "import torch\n\n\n"
        "def top_p_filter(logits, p):\n"
        "    probs = torch.softmax(logits, dim=-1)\n"
        "    sorted_probs, order = torch.sort(probs, dim=-1, descending=True)\n"
        "    drop_sorted = torch.cumsum(sorted_probs, dim=-1) > p\n"
        "    drop = drop_sorted.scatter(-1, order, drop_sorted)\n"
        "    return logits.masked_fill(drop, float('-inf'))\n",
        "carries the running total across p was dropped",
    ),
    "11_gpt2_training_gpu": (
        "estimate_mfu",
        "def estimate_mfu(n_params, n_layers, n_heads, d_head, seq_len, tokens_per_second, peak_flops):\n"
        "    flops_per_token = 2 * n_params + 12 * n_layers * n_heads * d_head * seq_len\n"
        "    return flops_per_token * tokens_per_second / peak_flops\n",
        "counts the forward pass only",
    ),
    "12_beyond_gpt2": (
        "repeat_kv",
        "import torch\n\n\n"
        "def repeat_kv(x, n_rep):\n"
        "    if n_rep == 1:\n"
        "        return x\n"
        "    return x.repeat(1, n_rep, 1, 1)\n",
        "interleaved",
    ),
    "13_what_attention_learned": (
        "induction_scores",
        "import torch\n\n\n"
        "def induction_scores(attn, period):\n"
        "    T = attn.shape[-1]\n"
        "    if not 1 <= period < T:\n"
        "        raise ValueError(f'period must be in 1..{T - 1}, got {period}')\n"
        "    queries = torch.arange(period, T)\n"
        "    return attn[..., queries, queries - period].mean(dim=-1)\n",
        "earlier copy of the current token itself",
    ),
}
# What a hostile answer appends to the grader's package on disk: every check passes in every later kernel.
HOSTILE_PAYLOAD = """
import importlib as _il
from course_lib.grading.kit.errors import Passed as _P
for _m in ("welcome", "tokenization", "embeddings", "position", "attention", "multihead", "blocks", "encoder_decoder",
           "statquest", "char_lm", "gpt2", "train", "modern", "induction"):
    _mod = _il.import_module("course_lib.grading." + _m)
    for _n in [n for n in dir(_mod) if n.startswith("check_")]:
        setattr(_mod, _n, lambda *a, _n=_n, **k: _P(_n, 1))
"""
# A wrong answer that also tries, while it runs, to switch the from-scratch watcher off (by names built at run time,
# which no source check can read), to append HOSTILE_PAYLOAD to the grader's package on disk and to replace the
# checks in its process; it catches every refusal and goes on.
HOSTILE_CODE = (
    "import pathlib\n"
    "_sys = vars(torch)['s' + 'ys']\n"
    "try:\n"
    "    getattr(_sys, 'setpro' + 'file')(None)\n"
    "except BaseException:\n"
    "    pass\n"
    "_init = pathlib.Path(ref.__file__).parent / 'grading' / '__init__.py'\n"
    "try:\n"
    f"    _init.write_text(_init.read_text() + {HOSTILE_PAYLOAD!r})\n"
    "except OSError:\n"
    "    pass\n"
    "for _name, _module in list(getattr(_sys, 'mod' + 'ules').items()):\n"
    "    if _name.startswith('course_lib.grading.'):\n"
    "        for _n in [n for n in dir(_module) if n.startswith('check_')]:\n"
    "            setattr(_module, _n, lambda *a, **k: None)\n"
)
# Correct answers written with getattr, setattr, vars, hasattr and types: ordinary Python, graded as any other.
DYNAMIC = {
    "00_welcome": (
        "count_characters",
        "import types\n\n\n"
        "def count_characters(text):\n"
        "    counts = types.SimpleNamespace()\n"
        "    order = []\n"
        "    for symbol in text:\n"
        "        key = f'c{ord(symbol)}'\n"
        "        if not hasattr(counts, key):\n"
        "            setattr(counts, key, 0)\n"
        "            order.append(symbol)\n"
        "        setattr(counts, key, getattr(counts, key) + 1)\n"
        "    return {symbol: vars(counts)[f'c{ord(symbol)}'] for symbol in order}\n",
    ),
    "04_attention": ("CausalSelfAttention", SETATTR_CAUSAL),
}


def _nbgrader(args, cwd, env=None):
    return run_nbgrader(args, cwd, timeout=900, env=env)


def _submit(course: Path, student: str, lesson: str, nb=None, raw: str | None = None) -> None:
    folder = course / "submitted" / student / lesson
    folder.mkdir(parents=True)
    path = folder / f"{lesson}.ipynb"
    if raw is not None:
        path.write_text(raw, encoding="utf-8")
    else:
        nbformat.write(nb, path)


def _other_lesson(lesson: str) -> str:
    return next((other for other in LESSONS if other != lesson), "00_welcome")


# Lessons whose classes get every hostile and broken submission (the machinery is the same for every lesson); each
# has a class of its own. The other lessons share one course, each nbgrader command run once for all of them
# (`generate_assignment "*"`, `autograde "*"`, `generate_feedback "*"`), as an instructor may run them.
BATTERY = ("00_welcome", "04_attention")
OTHERS = "others"  # the course of the lessons without the battery
_classes: dict[str, tuple] = {}


def _build_class(lesson: str, tmp_path_factory) -> tuple:
    """Grade the lesson's class once per worker (the others' course once for all its lessons); both fixtures below
    share it."""
    key = lesson if lesson in BATTERY else OTHERS
    if key not in _classes:
        lessons = [lesson] if lesson in BATTERY else [x for x in LESSONS if x not in BATTERY]
        _classes[key] = _grade(key, lessons, tmp_path_factory)
    return (lesson, *_classes[key])


def _grade(key: str, lessons: list[str], tmp_path_factory) -> tuple:
    course = tmp_path_factory.mktemp(f"class-{key}")
    library = course.parent / f"lib-{key}"
    shutil.copytree(ROOT.parent / "course_lib", library / "course_lib", ignore=shutil.ignore_patterns("__pycache__"))
    (library / "data").symlink_to(ROOT.parent / "data")
    env = {"PYTHONPATH": str(library)}
    shutil.copy(ROOT / "nbgrader_config.py", course)
    for lesson in lessons:
        shutil.copytree(ROOT / "source" / lesson, course / "source" / lesson)
    assignment = lessons[0] if len(lessons) == 1 else "*"
    result = _nbgrader(["generate_assignment", assignment, "--force"], course, env)
    assert result.returncode == 0, result.stderr

    for lesson in lessons:
        _submit_class(course, lesson)
    # The course's own per-cell limit (nbgrader_config.py, 60 s) stops the loop. A shorter one would save the loop's
    # wait but hold every honest cell of every student to it: the set-up cell's imports alone took 10 s at load 8.
    autograde = _nbgrader(["autograde", assignment], course, env)
    feedback = _nbgrader(["generate_feedback", assignment], course, env)
    return course, autograde, feedback, library


def _submit_class(course: Path, lesson: str) -> None:
    blank = read(release_path(lesson))
    full = solved(lesson)
    wrong_name, wrong_code, _ = ONE_WRONG[lesson]
    unwritten = _unwritten(lesson)
    mixed = with_answer(full, wrong_name, wrong_code)
    mixed = with_answer(mixed, unwritten, next(c.source for c in blank.cells if grade_id(c) == unwritten))
    _submit(course, "full", lesson, full)
    _submit(course, "mixed", lesson, mixed)
    if lesson in BATTERY:
        first, second = answer_names(full)[:2]
        tampered = nbformat.from_dict(json.loads(nbformat.writes(full)))
        test_cell = next(c for c in tampered.cells if grade_id(c) == f"test_{first}")
        test_cell.source = "pass  # the checks were removed"
        tampered.cells = [c for c in tampered.cells if grade_id(c) not in (f"test_{second}", "setup")]
        _submit(course, "a_hostile", lesson, with_answer(full, wrong_name, wrong_code + "\n" + HOSTILE_CODE))
        _submit(course, "dynamic", lesson, with_answer(full, *DYNAMIC[lesson]))
        _submit(course, "blank", lesson, blank)
        _submit(course, "tampered", lesson, tampered)
        _submit(course, "loop", lesson, with_answer(full, first, "while True:\n    pass\n"))
        _submit(course, "malformed", lesson, raw="{ this is not a notebook")
        _submit(course, "wrong_lesson", lesson, read(release_path(_other_lesson(lesson))))


def _unwritten(lesson: str) -> str:
    """The exercise the mixed student leaves as released: the first one that is not the known mistake's."""
    return next(name for name in answer_names(read(release_path(lesson))) if name != ONE_WRONG[lesson][0])


def _class_params(lessons):
    groups = {lesson: f"class-{lesson if lesson in BATTERY else OTHERS}" for lesson in lessons}
    return [pytest.param(lesson, marks=pytest.mark.xdist_group(groups[lesson])) for lesson in lessons]


@pytest.fixture(scope="module", params=_class_params(LESSONS))
def graded_class(request, tmp_path_factory):
    return _build_class(request.param, tmp_path_factory)


@pytest.fixture(scope="module", params=_class_params(BATTERY))
def battery_class(request, tmp_path_factory):
    return _build_class(request.param, tmp_path_factory)


def _scores(course: Path, lesson: str, student: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        nb = gb.find_submission_notebook(lesson, lesson, student)
        return {g.name: g.score for g in nb.grades} | {"__flagged__": nb.flagged}


def _log_of(autograde, student: str) -> str:
    """The autograde log's lines about one student and every error line: what a failed assertion shows."""
    lines = (autograde.stdout + autograde.stderr).splitlines()
    return "\n".join(line for line in lines if student in line or "ERROR" in line or "Error" in line)[-6000:]


def _max_scores(course: Path, lesson: str) -> dict[str, float]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        return {c.name: c.max_score for c in gb.find_notebook(lesson, lesson).grade_cells}


def _feedback(course: Path, lesson: str, student: str) -> str:
    return html.unescape((course / "feedback" / student / lesson / f"{lesson}.html").read_text(encoding="utf-8"))


def test_reference_answers_get_full_marks(graded_class):
    lesson, course, _, _, _ = graded_class
    scores, maxima = _scores(course, lesson, "full"), _max_scores(course, lesson)
    assert {k: scores[k] for k in maxima} == maxima
    assert not scores["__flagged__"]


def test_untouched_student_version_scores_zero(battery_class):
    lesson, course, _, _, _ = battery_class
    scores = _scores(course, lesson, "blank")
    assert sum(v for k, v in scores.items() if k != "__flagged__") == 0
    assert "not written yet" in _feedback(course, lesson, "blank")


def test_one_wrong_and_one_unwritten_exercise_lose_exactly_their_points(graded_class):
    lesson, course, autograde, _, _ = graded_class
    name, _, words = ONE_WRONG[lesson]
    unwritten = _unwritten(lesson)
    scores, maxima = _scores(course, lesson, "mixed"), _max_scores(course, lesson)
    for cell, max_score in maxima.items():
        owner = any(cell in (f"test_{n}", f"test_{n}_hidden") for n in (name, unwritten))
        assert scores[cell] == (0 if owner else max_score), (cell, _log_of(autograde, "mixed"))
    assert not scores["__flagged__"]
    feedback = _feedback(course, lesson, "mixed")
    assert words in feedback and "not written yet" in feedback


def test_a_hostile_submission_earns_nothing_and_changes_no_later_grade(battery_class):
    lesson, course, autograde, _, library = battery_class
    name, _, words = ONE_WRONG[lesson]
    scores = _scores(course, lesson, "a_hostile")
    assert scores[f"test_{name}"] == 0 and scores[f"test_{name}_hidden"] == 0
    assert scores["__flagged__"], _log_of(autograde, "a_hostile")
    graded = read(course / "autograded" / "a_hostile" / lesson / f"{lesson}.ipynb")
    note = graded.cells[0].source
    # It ran in its sandbox (no kernel ran the notebook): switching the watcher off was stopped there, and that,
    # not a name in its text, is what flags it.
    assert FLAG_MARKER in note and "switched the from-scratch watcher off" in note, note
    answer = next(c for c in graded.cells if grade_id(c) == name)
    assert answer.outputs == []
    if confine.landlock_abi():  # the sandbox could not write (without Landlock the grader puts the file back)
        assert "was changed on disk" not in note
    # The grader's files are as they were, so the students graded after it (mixed) were judged honestly.
    original = (ROOT.parent / "course_lib" / "grading" / "__init__.py").read_text()
    assert (library / "course_lib" / "grading" / "__init__.py").read_text() == original
    assert _scores(course, lesson, "mixed")[f"test_{name}"] == 0
    assert words in _feedback(course, lesson, "mixed")


def test_correct_answers_using_getattr_setattr_and_vars_get_full_marks(battery_class):
    lesson, course, autograde, _, _ = battery_class
    scores, maxima = _scores(course, lesson, "dynamic"), _max_scores(course, lesson)
    assert {k: scores[k] for k in maxima} == maxima, _log_of(autograde, "dynamic")
    assert not scores["__flagged__"]


def test_tampered_locked_cells_are_restored_and_flagged(battery_class):
    lesson, course, _, _, _ = battery_class
    first, second = answer_names(solved(lesson))[:2]
    scores, maxima = _scores(course, lesson, "tampered"), _max_scores(course, lesson)
    assert scores["__flagged__"]
    assert {k: scores[k] for k in maxima} == maxima  # the restored checks ran and passed
    graded = read(course / "autograded" / "tampered" / lesson / f"{lesson}.ipynb")
    note = graded.cells[0].source
    assert FLAG_MARKER in note
    assert f"`test_{first}` was edited" in note and f"`test_{second}` was deleted" in note
    assert "`setup` was deleted" in note
    assert "pass  # the checks were removed" not in nbformat.writes(graded)
    assert [grade_id(c) for c in graded.cells].count("setup") == 1


def test_infinite_loop_times_out_and_the_class_is_still_graded(battery_class):
    lesson, course, autograde, _, _ = battery_class
    first = answer_names(solved(lesson))[0]
    scores, maxima = _scores(course, lesson, "loop"), _max_scores(course, lesson)
    assert scores[f"test_{first}"] == 0
    others = [c for c in maxima if not c.startswith(f"test_{first}")]
    assert others and all(scores[c] == maxima[c] for c in others)
    for student in ["full", "blank", "mixed", "tampered"]:
        assert (course / "autograded" / student / lesson / f"{lesson}.ipynb").is_file()


def test_malformed_and_wrong_lesson_submissions_are_reported(battery_class):
    lesson, course, autograde, _, _ = battery_class
    log = autograde.stdout + autograde.stderr
    assert "malformed" in log and "not appear to be JSON" in log
    assert not (course / "autograded" / "malformed" / lesson / f"{lesson}.ipynb").exists()
    assert "it is probably another lesson's notebook" in log
    assert not (course / "autograded" / "wrong_lesson" / lesson / f"{lesson}.ipynb").exists()


def test_the_log_does_not_cry_wolf(graded_class):
    """A test cell released without its hidden tests is not a change; trusted verdicts are not partial credit."""
    _, _, autograde, _, _ = graded_class
    log = autograde.stdout + autograde.stderr
    assert not re.search(r"Attribute 'checksum' for cell \w+_hidden has changed", log)
    assert "cannot be converted to" not in log


def test_feedback_never_shows_hidden_tests(graded_class):
    lesson, course, _, feedback, _ = graded_class
    assert feedback.returncode == 0, feedback.stderr
    lines = hidden_lines(lesson)
    assert lines
    files = list((course / "feedback").glob(f"*/{lesson}/*.html"))
    assert len(files) >= (5 if lesson in BATTERY else 2)
    for path in files:
        text = html.unescape(path.read_text(encoding="utf-8"))
        assert "BEGIN HIDDEN TESTS" not in text
        for line in lines:
            assert line not in text, f"{path.parent.parent.name}: hidden line leaked: {line}"


@pytest.mark.parametrize("lesson", ["00_welcome"])
def test_self_grade_reports_each_exercise(lesson, tmp_path):
    path = tmp_path / f"{lesson}.ipynb"
    name, code, words = ONE_WRONG[lesson]
    nbformat.write(with_answer(solved(lesson), name, code), path)
    report = grade_notebook(path)
    rows = report.by_name()
    assert set(rows) == set(answer_names(read(release_path(lesson))))
    assert rows[name].score == 0 and any(words in m for m in rows[name].messages)
    assert all(r.score == r.max_score for n, r in rows.items() if n != name)
    assert f"{report.score:g} / {report.max_score:g}" in str(report)
    nbformat.write(read(release_path(_other_lesson(lesson))), path)
    from course_lib.workflow.course import CourseError

    with pytest.raises(CourseError, match="cannot be graded as"):
        grade_notebook(path)
