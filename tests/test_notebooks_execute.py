"""Every lesson's instructor source executes top to bottom, headless, with no error (nbclient), and its outputs
show what its text says they show (tests/claims/): each claim holds on the real outputs, and fails on them once
altered by each of its breaks. Each lesson executes once; its tests share the result (one xdist group).

The lessons that run the learner's classes of earlier lessons (06, 07, 09, 10, 11, 12, 13) execute on the stand-in
for Colab (tests/colab.py), as a learner who opened them from their badges runs them: the set-up cell mounts the
learner's Google Drive (faked), which holds their solved copies of the earlier lessons under Colab's names, and each
banner names the learner's classes, read from there. So the numbers the lesson's text is checked against are those
of the learner's own classes, and the run on Colab is the lesson's one full run. The others run in this checkout's
kernel beside their source, as an instructor runs them.
"""

from __future__ import annotations

import shutil

import nbformat
import pytest

from course_lib import manifest
from course_lib.workflow.course import SETUP_ID, grade_id
from tests import (
    test_lesson_07_your_layers,
    test_lesson_09_your_classes,
    test_lesson_10_your_classes,
    test_lesson_11_your_gpt,
    test_lesson_13_your_classes,
)
from tests.claims import check_breaks, check_claims
from tests.colab import KERNEL, YOURS, colab_environment, make_content, new_session, on_colab
from tests.nbtools import LESSONS, execute, printed, read, release_path, solved_earlier, source_path

pytestmark = pytest.mark.slow
ON_COLAB = {entry.id: entry.your_lessons for entry in manifest.LESSONS if entry.your_lessons}
LESSON_05 = "05_multi_head_attention"  # every lesson of ON_COLAB runs the learner's attention
# glibc hands a freed block over 32 MiB back to the system, and the next one is faulted in and zeroed again: logits
# over thousands of tokens pay that at every step and evaluation (lesson 12's token ladder: 28 s of its kernel's
# 227 s of CPU in the system, 1 s with this setting, the same user time). These kernels keep blocks up to 512 MiB for
# reuse; the arithmetic does not change. Only here: kept memory counts against a memory limit (RLIMIT_DATA), so the
# kernels that run under one — grading's, and tests/test_kernels.py's — run as a learner's do.
REUSE_MEMORY = "glibc.malloc.mmap_threshold=536870912:glibc.malloc.trim_threshold=1073741824"
# What else a lesson's run on Colab shows of the learner's classes (banners further down, what their model did).
LEARNERS_CLASSES_RAN = {
    "07_encoder_decoder": test_lesson_07_your_layers.learners_classes_ran,
    "09_char_gpt": test_lesson_09_your_classes.learners_classes_ran,
    "10_gpt2": test_lesson_10_your_classes.learners_classes_ran,
    "11_gpt2_training_gpu": test_lesson_11_your_gpt.learners_classes_ran,
    "13_what_attention_learned": test_lesson_13_your_classes.learners_classes_ran,
}


@pytest.fixture(
    scope="module",
    params=[pytest.param(lesson, marks=pytest.mark.xdist_group(f"execute-{lesson}")) for lesson in LESSONS],
)
def executed(request, tmp_path_factory):
    """(lesson, its instructor source executed by nbclient: on the Colab stand-in for a lesson of `ON_COLAB`)."""
    lesson = request.param
    path = source_path(lesson)
    nb = nbformat.read(path, as_version=4)
    # 600 s a cell: a backstop that a pass never depends on. The slowest cell, lesson 12's ladder, is a few minutes
    # of one core's work and longer on a loaded machine; the limit stops a hung cell, not a slow one. The watchful
    # client stops the stall fresh clones hit now and then, where a finished cell's reply was read only once this
    # whole limit had run out. A run raises CellExecutionError naming the cell on the first error.
    with pytest.MonkeyPatch.context() as env:
        env.setenv("GLIBC_TUNABLES", REUSE_MEMORY)  # read by each kernel's glibc when it starts; ignored elsewhere
        if lesson in ON_COLAB:
            content = make_content(tmp_path_factory.mktemp(f"colab-{lesson}"))
            # Lesson 05 saved twice: first a copy with nothing written in it, later the solved one (the one read).
            saved = {f"Copy of {LESSON_05}.ipynb": read(release_path(LESSON_05))}
            saved |= {f"Copy of {e}.ipynb": solved_earlier(e) for e in ON_COLAB[lesson] if e != LESSON_05}
            saved[f"Copy of {LESSON_05} (1).ipynb"] = solved_earlier(LESSON_05)
            fake = new_session(content, content.parent / "google-drive", saved)
            at = next(i for i, c in enumerate(nb.cells) if grade_id(c) == SETUP_ID)
            setup, nb.cells[at] = nb.cells[at], on_colab(nb.cells[at], content)
            nb.cells.insert(0, fake)
            colab_environment(env, content)  # the kernel's environment: self-grading off, no course settings
            execute(nb, timeout=600, folder=content, kernel_name=KERNEL)
            nb.cells.pop(0)
            nb.cells[at].source = setup.source
            shutil.rmtree(content.parent)  # a copy of the course and a virtual environment
        else:
            # The kernel inherits this environment: no self-grading run inside the test, and no autograder settings.
            env.setenv("COURSE_SELF_GRADE", "off")
            env.delenv("NBGRADER_EXECUTION", raising=False)
            execute(nb, timeout=600, folder=path.parent)
    return lesson, nb


def _shown(nb, name: str) -> str:
    cells = [c for c in nb.cells if grade_id(c) == name]
    assert len(cells) == 1, f"expected one cell with grade_id {name!r}, found {len(cells)}"
    return "".join(o.get("data", {}).get("text/plain", "") for o in cells[0].outputs)


def test_instructor_source_executes(executed):
    lesson, nb = executed
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert errors == []
    shown = _shown(nb, "setup")
    assert "ready" in shown, f"the set-up cell reported a problem: {shown}"
    # The kernel did inherit COURSE_SELF_GRADE=off: the self-grading cell says so instead of grading the notebook.
    shown = _shown(nb, "self_grade")
    assert "Self-grading is switched off here" in shown, f"{lesson}: the self-grading cell shows {shown!r}"


def test_outputs_show_what_the_text_says(executed):
    # The lesson's claims about computed results ("far closer to village than to city") against these outputs.
    check_claims(*executed)


def test_each_claim_fails_when_its_output_is_altered(executed):
    # Each claim's breaks (a value changed in the output it reads) must make its check fail: a check that cannot
    # fail on these very outputs shows nothing.
    check_breaks(*executed)


def test_on_colab_each_banner_names_the_learners_classes_read_from_drive(executed):
    """A lesson that runs earlier lessons' answers, on the Colab stand-in with the learner's copies in Drive: the
    set-up cell mounted the Drive, the banner names every class of the learner's that runs and where each lesson was
    read; a lesson that runs none has no banner."""
    lesson, nb = executed
    chooses = [c for c in nb.cells if c.cell_type == "code" and "your_code(" in c.source]
    if lesson not in ON_COLAB:
        assert chooses == []
        return
    (setup,) = [c for c in nb.cells if grade_id(c) == SETUP_ID]
    shown = "".join(o.get("data", {}).get("text/markdown", "") for o in setup.outputs)
    assert "**Google Drive:** mounted; your copies of earlier lessons are read from" in shown, shown
    lines = printed(nb, "your_code(").strip().splitlines()
    assert lines[0] == YOURS[lesson], lines
    read_from = f"Lesson 05 read from Copy of {LESSON_05} (1).ipynb, the most recently saved of 2 copies in "
    assert lines[1].startswith(read_from) and lines[1].endswith("/drive/MyDrive/Colab Notebooks."), lines
    assert not [line for line in lines if line.startswith(("Not running", "To run yours"))], lines
    if lesson in LEARNERS_CLASSES_RAN:
        LEARNERS_CLASSES_RAN[lesson](nb)
