"""The from-scratch guard: is, subclasses, wraps or calls the reference or a listed shortcut."""

from __future__ import annotations

import functools
import sys

import pytest
import torch
import torch.nn.functional as F

from course_lib import attention, manifest, tokenization
from course_lib.grading import GradingError, call_answer, check_definition
from course_lib.grading.kit import guard
from course_lib.grading.kit.exercise import Graded, resolve
from course_lib.grading.kit.guard import Forbidden, forbidden, refusals, watch_calls, watching
from tests.answers import define

Q = torch.randn(2, 3, 4, generator=torch.Generator().manual_seed(0))
GOOD_SDPA = """
import torch
def sdpa(q, k, v, mask=None):
    w = torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1)
    return w @ v, w
"""


def test_every_reference_and_shortcut_in_the_manifest_resolves():
    seen: dict[int, str] = {}
    for lesson in manifest.LESSONS:
        for exercise in lesson.exercises:
            for name, path in exercise.paths.items():
                reference = resolve(path)
                assert reference is not None and reference.__name__ == name, path
                assert id(reference) not in seen, f"{path} is also the reference of {seen[id(reference)]}"
                seen[id(reference)] = path
                graded = Graded(reference)
                assert (graded.entry, graded.name, graded.path) == (exercise, name, path)
                found = forbidden(graded)
                assert found.objects[0][0] is reference, name
                objects = [p for p in exercise.shortcuts if not p.startswith("module:")]
                packages = [p for p in exercise.shortcuts if p.startswith("module:")]
                assert len(found.objects) == 1 + len(objects), name  # every dotted shortcut exists
                assert len(found.packages) <= len(packages), name  # a library that is not installed cannot be used


def test_an_exercise_is_named_by_its_reference_object_and_never_by_a_string():
    graded = Graded(attention.causal_mask)
    assert not isinstance(graded, str) and str(graded) == "causal_mask" and f"[{graded}]" == "[causal_mask]"
    assert graded.path == "course_lib.attention.causal_mask"
    assert graded.entry.shortcuts == ("torch.nn.Transformer.generate_square_subsequent_mask",)
    answer = define("import torch\ndef f(T):\n    return torch.ones(T, T).tril().bool()", "f")
    with pytest.raises(TypeError, match="reference object itself"):
        Graded("causal_mask")
    for refused in (
        lambda: call_answer("causal_mask", answer, 3),
        lambda: check_definition(answer, "causal_mask"),
        lambda: check_definition(answer, attention.causal_mask),  # the reference alone carries no manifest entry
        lambda: forbidden("causal_mask"),
    ):
        with pytest.raises(TypeError, match=r"Graded\(ref\.<name>\)"):
            refused()
    with pytest.raises(TypeError, match=r"Graded\(ref\.<name>\)"), watch_calls("causal_mask"):
        pass
    assert torch.equal(call_answer(graded, answer, 3), torch.ones(3, 3).tril().bool())  # the object works


def test_the_guard_finds_shortcuts_by_the_reference_not_by_its_name():
    from course_lib import char_lm, generate

    # Two functions called sample_next_token: lesson 09's exercise, and lesson 10's sampler that is its shortcut.
    assert "course_lib.generate.sample_next_token" in Graded(char_lm.sample_next_token).entry.shortcuts
    with pytest.raises(ValueError, match="course_lib.generate.sample_next_token is the reference of no exercise"):
        Graded(generate.sample_next_token)
    # A reference defined in one module and named by the manifest in another (lesson 11's rank_batch).
    from course_lib import train, train_data

    assert train.rank_batch is train_data.rank_batch
    assert Graded(train.rank_batch).path == "course_lib.train_data.rank_batch"


SDPA = Graded(attention.scaled_dot_product_attention)


def test_an_honest_answer_passes():
    out, weights = call_answer(SDPA, define(GOOD_SDPA, "sdpa"), Q, Q, Q)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, Q, Q))
    check_definition(define(GOOD_SDPA, "sdpa"), Graded(attention.scaled_dot_product_attention))


@pytest.mark.parametrize(
    "answer, how",
    [
        (attention.scaled_dot_product_attention, "is"),
        (functools.partial(attention.scaled_dot_product_attention), "wraps"),
        (functools.wraps(attention.scaled_dot_product_attention)(lambda *a: None), "wraps"),
        (
            define(
                "from course_lib.attention import scaled_dot_product_attention as r\ndef f(q, k, v):\n"
                "    return r(q, k, v)",
                "f",
            ),
            "uses",
        ),
        (
            define(
                "def make(r):\n    def f(q, k, v):\n        return r(q, k, v)\n    return f\nf = make(reference)",
                "f",
                reference=attention.scaled_dot_product_attention,
            ),
            "wraps",
        ),
    ],
)
def test_definition_time_shortcuts_are_caught(answer, how):
    with pytest.raises(GradingError, match=f"your answer {how}"):
        check_definition(answer, Graded(attention.scaled_dot_product_attention))


@pytest.mark.parametrize(
    "code",
    [
        "import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v), None",
        "import torch\ndef f(q, k, v):\n    m = torch.nn.MultiheadAttention(4, 1, batch_first=True)\n"
        "    return m(q, k, v)",
        "import course_lib.attention\ndef f(q, k, v):\n"
        "    return getattr(course_lib.attention, 'scaled_dot_' + 'product_attention')(q, k, v)",
    ],
)
def test_call_time_shortcuts_are_caught(code):
    with pytest.raises(GradingError, match="your answer calls"):
        call_answer(SDPA, define(code, "f"), Q, Q, Q)


def test_subclassing_a_reference_class_is_caught():
    sub = define("from course_lib.tokenization import SimpleTokenizer as S\nclass T(S):\n    pass", "T")
    with pytest.raises(GradingError, match="subclasses"):
        check_definition(sub, Graded(tokenization.SimpleTokenizer))


def test_tokenizer_libraries_are_forbidden_for_tokenizer_exercises():
    code = (
        "import tiktoken\nfrom course_lib.data import gpt2_encoding\ndef f(text, merges):\n"
        "    return gpt2_encoding().encode(text)"
    )
    with pytest.raises(GradingError, match="tiktoken"):
        call_answer(Graded(tokenization.bpe_encode), define(code, "f"), "hello", {})
    # ...but allowed where the contract does not forbid it (the reference computes expected values freely).
    assert call_answer(Graded(tokenization.sliding_window_pairs), define(code, "f"), "hello", {}) == [31373]


def test_a_forbidden_librarys_import_hook_is_not_a_call_of_it(tmp_path, monkeypatch):
    # A package may put a finder on sys.meta_path (transformers does): every later import passes through its code,
    # and on into more of its own. An answer that imports something new has not used that package; an answer that
    # calls into it has.
    (tmp_path / "hookpkg").mkdir()
    (tmp_path / "hookpkg" / "__init__.py").write_text(
        "import sys\n\nclass Finder:\n    @staticmethod\n    def find_spec(name, path=None, target=None):\n"
        "        return helper(None)\n\nsys.meta_path.insert(0, Finder)\n\ndef helper(x):\n    return x\n"
    )
    (tmp_path / "fresh_module_for_the_guard.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import hookpkg

    forbidden_ = Forbidden()
    forbidden_.packages["hookpkg"] = str(tmp_path / "hookpkg")
    try:
        importing = define("def f():\n    import fresh_module_for_the_guard\n    return 1", "f")
        hits: list[str] = []
        with watching(forbidden_, hits):
            importing()
        assert hits == []
        with watching(forbidden_, hits):
            define("import hookpkg\ndef g():\n    return hookpkg.helper(2)", "g")()
        assert hits == ["the `hookpkg` library"]
    finally:
        sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "hookpkg" and f is not hookpkg.Finder]
        sys.modules.pop("fresh_module_for_the_guard", None)


def test_learner_exceptions_and_loops_become_messages():
    with pytest.raises(GradingError, match=r"f\(\.\.\.\) raised KeyError: 'x'"):
        call_answer(Graded(tokenization.merge_pair), define("def f():\n    return {}['x']", "f"))
    with pytest.raises(GradingError, match="did not finish within 0.5 s"):
        call_answer(
            Graded(tokenization.merge_pair), define("def f():\n    while True:\n        pass", "f"), timeout=0.5
        )
    with pytest.raises(GradingError, match=r"f\(\.\.\.\) ran out of memory \(MemoryError\)"):
        call_answer(Graded(tokenization.merge_pair), define("def f():\n    raise MemoryError", "f"))


def test_the_guard_restores_the_previous_profiler():
    import sys

    calls = []
    sys.setprofile(lambda *a: calls.append(1))
    try:
        call_answer(
            Graded(attention.causal_mask),
            define("import torch\ndef f(T):\n    return torch.ones(T, T).tril().bool()", "f"),
            3,
        )
        assert sys.getprofile() is not None
    finally:
        sys.setprofile(None)
    assert tokenization is not None


@pytest.mark.parametrize(
    "source, found",
    [
        ("import sys\nsys.setprofile(None)", "`sys`"),
        ("f = __import__('course_lib.grading.kit.core')", "`__import__`"),
        ("def f(q, k, v):\n    return f.__globals__['x']", "`.__globals__`"),
        ("from course_lib.grading.kit import core", "course_lib.grading"),
        ("import course_lib.workflow.trusted as t", "course_lib.workflow"),
        ("import course_lib\nx = course_lib.attention", "`import course_lib`"),
        ("from course_lib import lesson", "course_lib.lesson"),
        ("x = torch.os.getpid()", "`.os`"),
        ("import threading\nthreading.Thread(target=print).start()", "`threading`"),
        ("from concurrent.futures import ThreadPoolExecutor", "`concurrent`"),
        ("x = eval('1')", "`eval`"),
        ("import pickle", "`pickle`"),
        (
            "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
            "        return e.__traceback__.tb_frame",
            "`.tb_frame`",
        ),
        ("x = object.__subclasses__()", "`.__subclasses__`"),
    ],
)
def test_the_source_check_names_what_no_answer_may_use(source, found):
    found_here = refusals(source)
    assert any(found in r.what for r in found_here), found_here


# Ordinary Python that grading used to refuse: an answer may use all of it.
HONEST = [
    "class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
    "        for name in ('q', 'k', 'v'):\n            setattr(self, name, nn.Linear(2, 2))\n"
    "    def forward(self, x):\n        return sum(getattr(self, n)(x) for n in ('q', 'k', 'v'))",
    "def f(obj):\n    return {k: v for k, v in vars(obj).items() if hasattr(obj, k)}",
    "def f(obj):\n    delattr(obj, 'x')\n    return obj.__dict__, type(obj).__mro__, obj.__class__.__bases__",
    "import io, types, pathlib, functools, operator, itertools, collections, copy, dataclasses, typing, re, math\n"
    "ns = types.SimpleNamespace(a=1)\nbuf = io.StringIO()\nget = operator.attrgetter('a')",
    "def f(model):\n    return [m for m in model.modules()] + list(model.named_parameters())",
    "def f(x):\n    return torch.compile, re.compile(r'\\s+'), globals(), locals(), dir(x)",
    "from course_lib import attention as ref\nimport course_lib.attention\nfrom course_lib.blocks import layer_norm",
    "def f(s):\n    return input, breakpoint, open",
]


@pytest.mark.parametrize("source", HONEST, ids=range(len(HONEST)))
def test_ordinary_python_is_not_refused(source):
    assert refusals(source) == []


def test_every_refused_name_is_refused_in_each_form_it_can_be_written():
    for name in guard.REFUSED_NAMES:
        forms = [f"x = {name}"]
        if name.isidentifier() and not name.startswith("__") and name not in ("exec", "eval", "compile"):
            forms += [f"import {name}", f"from {name} import y", f"import {name}.y as z", f"x = torch.{name}"]
        for source in forms:
            assert refusals(source), source
    for attribute in guard.REFUSED_ATTRIBUTES:
        assert refusals(f"x = y.{attribute}"), attribute
    for part in guard.MACHINERY_MODULES:
        for source in (
            f"import course_lib.{part}",
            f"from course_lib import {part}",
            f"from course_lib.{part} import x",
        ):
            assert refusals(source), source


def test_a_visible_check_refuses_an_answer_cell_as_the_grader_does():
    """A cell the grader would not run is refused by the visible check in the notebook, in the same words, before
    the answer is called; the same function in a cell without the refused name passes."""
    exercise = Graded(attention.scaled_dot_product_attention)
    refused = "import sys\n" + GOOD_SDPA
    with pytest.raises(GradingError) as info:
        check_definition(define(refused, "sdpa"), exercise)
    assert info.value.message == guard.refusal_message(exercise, refusals(refused))
    assert "`sys`" in info.value.message and "docs/GRADING.md" in info.value.message
    check_definition(define(GOOD_SDPA, "sdpa"), exercise)
    # a function from a file (a library, the course's own code) has no cell to read: only the object is judged
    assert (
        guard.answer_source(torch.nn.functional.softmax) is None and guard.answer_source(attention.causal_mask) is None
    )


# Ways of reaching into the grading while the answer runs that the source check cannot read (names built at run
# time), each with what the learner is told.
RUN_TIME = [
    ("def f(q, k, v):\n    getattr(vars(torch)['s' + 'ys'], 'setpro' + 'file')(None)\n    return q, q", "watcher off"),
    ("def f(q, k, v):\n    list(map(getattr(vars(torch)['s' + 'ys'], 'setpro' + 'file'), [None]))\n    return q, q",
     "watcher off"),
    ("def f(q, k, v):\n    getattr(vars(torch)['s' + 'ys'], '_get' + 'frame')(0)\n    return q, q", "frames"),
    ("def f(q, k, v):\n    vars(torch)['__built' + 'ins__']['ex' + 'ec']('1')\n    return q, q", "`exec`"),
    ("def f(q, k, v):\n    getattr(f, '__co' + 'de__')\n    return q, q", "`.__code__`"),
    ("def f(q, k, v):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
     "        getattr(e.__traceback__, 'tb_fr' + 'ame')\n    return q, q", "`.tb_frame`"),
    ("def f(q, k, v):\n    open(0)\n    return q, q", "file descriptor"),
]  # fmt: skip


@pytest.mark.parametrize("code, words", RUN_TIME, ids=range(len(RUN_TIME)))
def test_reaching_into_the_grading_at_run_time_is_refused_while_the_answer_runs(code, words):
    previous = sys.getprofile()
    with pytest.raises(GradingError) as info:
        call_answer(SDPA, define("import torch\n" + code, "f"), Q, Q, Q)
    assert "while it ran, your answer" in info.value.message and words in info.value.message, info.value.message
    assert sys.getprofile() is previous  # the watcher was neither switched off nor left on


def test_an_answer_that_catches_the_refusal_is_refused_all_the_same():
    code = (
        "def f(q, k, v):\n    try:\n        getattr(vars(torch)['s' + 'ys'], 'setpro' + 'file')(None)\n"
        "    except BaseException:\n        pass\n    return ref_sdpa(q, k, v)"
    )
    answer = define("import torch\n" + code, "f", ref_sdpa=attention.scaled_dot_product_attention)
    with pytest.raises(GradingError, match="watcher off"):
        call_answer(SDPA, answer, Q, Q, Q)


def test_libraries_doing_the_same_for_their_own_reasons_are_not_the_answers_doing():
    """namedtuple reads its caller's frame, dataclasses compile code, inspect reads `__code__`: called from an
    answer, these are the library's own events, not the answer's."""
    code = (
        "import collections, dataclasses, inspect, torch\n"
        "def f(q, k, v):\n    P = collections.namedtuple('P', 'a b')\n"
        "    D = dataclasses.make_dataclass('D', ['x'])\n    inspect.signature(f)\n"
        "    w = torch.softmax(q @ k.transpose(-2, -1) / k.shape[-1] ** 0.5, dim=-1)\n    return w @ v, w"
    )
    # `inspect` is refused by name, so this answer is called here without its cell's text
    answer = define(code.replace("inspect.signature(f)", "sig(f)"), "f", sig=__import__("inspect").signature)
    out, _ = call_answer(SDPA, answer, Q, Q, Q)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(Q, Q, Q))


def test_the_audit_hook_does_nothing_outside_a_watch():
    guard._start_auditing()
    define("def f():\n    return 1", "f").__code__  # noqa: B018 (a watch is what makes this read the answer's)
    assert guard._AUDIT.watch is None


def test_shortcuts_are_judged_on_what_the_answer_is_and_calls_not_on_its_text():
    """The source check names no exercise's shortcuts: those are judged on the answer's objects and its calls, in
    the notebook and in the grader's sandbox alike, and the message names them where they are defined."""
    plain = GOOD_SDPA + "\nfrom course_lib import attention as ref\nimport math\nfrom torch import nn\n"
    assert refusals(plain) == []
    shortcut = "import torch.nn.functional as F\ndef f(q, k, v):\n    return F.scaled_dot_product_attention(q, k, v), 0"
    assert refusals(shortcut) == []
    with pytest.raises(GradingError, match="calls `torch.nn.functional.scaled_dot_product_attention`"):
        call_answer(SDPA, define(shortcut, "f"), Q, Q, Q)


def test_what_no_answer_may_use_is_listed_in_the_docs_and_in_lesson_00():
    from tests.nbtools import ROOT, read, source_path

    docs = (ROOT.parent / "docs" / "GRADING.md").read_text(encoding="utf-8")
    lesson = "\n".join(c.source for c in read(source_path("00_welcome")).cells if c.cell_type == "markdown")
    for name in guard.REFUSED_NAMES:
        assert f"`{name}`" in docs and f"`{name}`" in lesson, name
    for name in guard.REFUSED_ATTRIBUTES:
        assert f"`{name}`" in docs, name
    for part in guard.MACHINERY_MODULES:
        assert f"`course_lib.{part}`" in docs, part
    for allowed in ("getattr", "setattr", "vars"):
        assert f"`{allowed}`" in docs and f"`{allowed}`" in lesson
