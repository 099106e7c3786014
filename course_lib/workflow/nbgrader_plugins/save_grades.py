"""`SaveAutoGradesInOneCommit`, in autograde (in place of nbgrader's SaveAutoGrades): nbgrader's step commits the
gradebook once per graded cell and once per answer cell, and on a disk other jobs are writing to, each commit can wait
milliseconds for the disk (on the course's shared 2-core machine the 443 commits of one worker's 10 submissions took
3.1 s in one run and under a quarter of a second in another). This one writes the same rows, with the same values,
in one transaction per notebook (tests/test_nbgrader_fast.py; what it saves: tests/benchmarks/RESULTS_class.md).
"""

from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import SaveAutoGrades

__all__ = ["SaveAutoGradesInOneCommit"]


class _CommitAtTheEnd:
    """The gradebook's session, except that `commit` only flushes: the changes go to the database within one open
    transaction, which `SaveAutoGradesInOneCommit` commits once."""

    def __init__(self, session):
        self._session = session

    def commit(self) -> None:
        self._session.flush()

    def __getattr__(self, name):
        return getattr(self._session, name)


class SaveAutoGradesInOneCommit(SaveAutoGrades):
    """nbgrader's SaveAutoGrades (every graded cell's score, every answer cell's comment), in one commit."""

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        self.notebook_id, self.assignment_id = info["notebook"], info["assignment"]
        self.student_id, self.db_url = info["student"], info["db_url"]
        self.gradebook = Gradebook(self.db_url)
        with self.gradebook:
            session = self.gradebook.db
            self.gradebook.db = _CommitAtTheEnd(session)  # what nbgrader's per-cell steps commit, only flushed
            # Each cell as nbgrader's SaveAutoGrades does it (its preprocess_cell, _add_score and _add_comment).
            nb, resources = super(SaveAutoGrades, self).preprocess(nb, resources)
            session.commit()
            self.gradebook.db = session
        return nb, resources
