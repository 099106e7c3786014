"""The course's nbgrader steps and settings one at a time, without an nbgrader run
(course_lib/workflow/nbgrader_plugins/, notebooks/nbgrader_config.py). Whole runs: tests/test_nbgrader_roundtrip.py
and tests/test_class_command.py.
"""

from __future__ import annotations

import runpy
import subprocess
import sys

import pytest
from nbgrader.converters import GenerateAssignment
from nbgrader.preprocessors import Execute

from course_lib.workflow.nbgrader_plugins import (
    FORMGRADER_RELEASE,
    InlineImages,
    KeepGradingWhenKernelDies,
    TrustedVerdicts,
    common,
)
from course_lib.workflow.nbgrader_plugins.common import KERNEL_RAN
from course_lib.workflow.trusted import CourseFiles, Grading, TrustedGrader
from tests.nbtools import ROOT, grade_id, read, solved, source_path, with_answer, with_hidden_tests
from tests.test_course import _Config
from tests.test_nbgrader_roundtrip import ONE_WRONG

LESSON = "00_welcome"


def _config():
    return runpy.run_path(str(ROOT / "nbgrader_config.py"), init_globals={"get_config": _Config})["c"]


def _header(path) -> str:
    """The comment block at the top of a Python file."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines[: next(i for i, x in enumerate(lines) if not x.startswith("#"))])


def test_the_config_header_sends_instructors_to_the_courses_commands():
    header = _header(ROOT / "nbgrader_config.py")
    assert "generate_assignment" not in header  # it replaced the committed student versions
    assert "make release" in header and "make class" in header


def test_lessons_are_graded_without_a_kernel_by_default():
    config = _config()
    assert config["KeepGradingWhenKernelDies"]["run_cells"] == "when-needed"
    assert KeepGradingWhenKernelDies().run_cells == "when-needed"  # also without the course's configuration


def test_every_generate_assignment_inlines_the_diagrams_and_runs_nbgraders_own_steps():
    names = [p.__name__ for p in _config()["GenerateAssignment"]["preprocessors"]]
    nbgraders = [p.__name__ for p in GenerateAssignment.class_traits()["preprocessors"].default()]
    assert names == ["InlineImages", *nbgraders]


def test_inline_images_puts_the_diagram_in_and_leaves_a_missing_one_as_a_link(tmp_path, caplog):
    nb = read(source_path("07_encoder_decoder"))
    linked = [c.source for c in nb.cells if "](../../../images/" in c.get("source", "")]
    assert linked
    inlined, _ = InlineImages().preprocess(
        read(source_path("07_encoder_decoder")), _at(source_path("07_encoder_decoder"))
    )
    assert not any("](../../../images/" in c.source for c in inlined.cells)
    assert any("](data:image/png;base64," in c.source for c in inlined.cells)
    kept, _ = InlineImages().preprocess(nb, {"metadata": {"path": str(tmp_path)}})  # a course copied without images/
    assert [c.source for c in kept.cells if "](../../../images/" in c.source] == linked


def _at(path):
    return {"metadata": {"path": str(path.parent)}}


SERVER_CONFIG = f"""
import sys
sys.path.insert(0, {str(ROOT.parent)!r})
if sys.argv[1] == "server":
    from jupyter_server.serverapp import ServerApp
    ServerApp.instance()
from traitlets.config.loader import PyFileConfigLoader
config = PyFileConfigLoader("nbgrader_config.py", path={str(ROOT)!r}).load_config()
print(config.CourseDirectory.get("release_directory", "release (nbgrader's default)"))
"""


@pytest.mark.parametrize(
    "where, release", [("server", FORMGRADER_RELEASE), ("command", "release (nbgrader's default)")]
)
def test_only_formgrader_writes_its_student_versions_elsewhere(where, release):
    """Read inside a running Jupyter server (formgrader), the configuration sends generated student versions to a
    git-ignored folder; read by a command, it leaves nbgrader's release/ (tests/test_lab_instructor.py clicks)."""
    shown = subprocess.run(
        [sys.executable, "-c", SERVER_CONFIG, where], capture_output=True, text=True, timeout=120, check=True
    )
    assert shown.stdout.strip() == release
    ignored = subprocess.run(["git", "check-ignore", "-q", f"notebooks/{FORMGRADER_RELEASE}/x"], cwd=ROOT.parent)
    assert ignored.returncode == 0


# ------------------------------------------------------------------------------------------------------------
# Grading a lesson without a kernel


def _submission(tmp_path):
    """Lesson 00 with its known mistake, its hidden tests back in (as RestoreAndFlag puts them), and nbgrader's
    resources for it."""
    name, code, words = ONE_WRONG[LESSON]
    nb = with_hidden_tests(with_answer(solved(LESSON), name, code), LESSON)
    info = {"assignment": LESSON, "notebook": LESSON, "student": "s", "db_url": f"sqlite:///{tmp_path / 'gb.db'}"}
    return nb, {"nbgrader": info, "metadata": {"path": str(tmp_path)}}, name, words


@pytest.fixture
def grader(tmp_path, monkeypatch):
    """The process's grader, remembering a folder of its own instead of the course's files."""
    made = TrustedGrader(files=CourseFiles(tmp_path / "nothing"))
    monkeypatch.setattr(common, "trusted_grader", lambda: made)
    return made


def test_a_lesson_runs_in_no_kernel_and_is_graded_by_its_verdicts_alone(tmp_path, grader, monkeypatch):
    def no_kernel(*args, **kwargs):
        raise AssertionError("a kernel was started")

    monkeypatch.setattr(Execute, "preprocess", no_kernel)
    nb, resources, name, words = _submission(tmp_path)
    nb, resources = KeepGradingWhenKernelDies().preprocess(nb, resources)
    assert KERNEL_RAN not in resources
    nb, resources = TrustedVerdicts().preprocess(nb, resources)
    tests = {grade_id(c): c.outputs for c in nb.cells if (grade_id(c) or "").startswith("test_")}
    for test, outputs in tests.items():
        (output,) = outputs
        if test.startswith(f"test_{name}"):
            assert output["output_type"] == "error" and words in output["evalue"]
            # The notebook was not run, so nothing may claim the check passed there.
            assert "In your notebook this check passed" not in output["evalue"]
        else:
            assert output["output_type"] == "stream" and output["text"].startswith("✓")


def test_a_test_cell_the_grader_gave_no_verdict_fails(tmp_path, grader, monkeypatch):
    """nbgrader scores a test cell without an error output as passed: without a kernel, a cell the grader left
    without a verdict would have had no output at all."""
    monkeypatch.setattr(grader, "grade", lambda *a, **k: Grading())
    nb, resources, _, _ = _submission(tmp_path)
    nb, _ = TrustedVerdicts().preprocess(nb, resources)
    tests = [c for c in nb.cells if (grade_id(c) or "").startswith("test_")]
    assert tests
    for cell in tests:
        (output,) = cell.outputs
        assert output["output_type"] == "error" and "reached no verdict" in output["evalue"]


def test_a_notebook_that_is_not_a_lesson_still_runs_in_a_kernel(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(Execute, "preprocess", lambda self, nb, resources, km=None: ran.append(1) or (nb, resources))
    nb, resources, _, _ = _submission(tmp_path)
    resources["nbgrader"]["assignment"] = "homework_1"
    _, resources = KeepGradingWhenKernelDies().preprocess(nb, resources)
    assert ran and resources[KERNEL_RAN]
    _, resources, _, _ = _submission(tmp_path)
    _, resources = KeepGradingWhenKernelDies(run_cells="always").preprocess(nb, resources)
    assert len(ran) == 2 and resources[KERNEL_RAN]
