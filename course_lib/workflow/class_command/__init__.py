"""The instructor's class command, `python -m course_lib class` (`make class`): its settings (`settings.py`), its
steps from collecting a class's files to the report (`steps.py`), and the files it writes for the instructor,
`class_grades.csv` and `class_report.md` (`report.py`). It reads what students send with
`course_lib.workflow.submissions` and grades with the processes of `course_lib.workflow.nbgrader_runs`.
"""

from course_lib.workflow.class_command.report import GRADES_FILE, REPORT_FILE
from course_lib.workflow.class_command.settings import ClassSettings
from course_lib.workflow.class_command.steps import ClassResult, grade_class

__all__ = ["GRADES_FILE", "REPORT_FILE", "ClassResult", "ClassSettings", "grade_class"]
