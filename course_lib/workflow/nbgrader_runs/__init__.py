"""Starting nbgrader for a class: the grading workers (`worker.py`, one nbgrader process each, grading its share one
submission at a time), the pool that starts them and replaces one that dies or hangs (`pool.py`), the records each
submission's outcome comes back as (`records.py`), and the feedback processes (`feedback.py`). What runs inside those
processes, plugged in by nbgrader_config.py, is `course_lib.workflow.nbgrader_plugins`; who is graded when, and what
the instructor is told, is the class command's (`course_lib.workflow.class_command`).
"""
