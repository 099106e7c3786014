"""The course machinery, apart from what the lessons teach; it reads the course's facts from `course_lib.manifest`.

- `course`: regenerates the student versions (`make release`) and checks that they are fresh.
- `selfgrade`: grades one notebook with nbgrader in a throw-away course (`make grade`, the last cell of a lesson).
- `nbgrader_ext`: the preprocessors `notebooks/nbgrader_config.py` plugs into nbgrader.
- `classroom`, `class_report`: grade a class (`python -m course_lib class`): collect, autograde in parallel
  workers, feedback, `class_grades.csv` and the "what the class got wrong" report; `submissions`: what is new,
  resubmitted (graded again, the earlier one kept in `history/`) or late; `similarity`: answers that read like
  the course's code with other names, flagged for the instructor.
- `instructor`: `make nbgrader` with the commands that would do harm in the course folder refused and explained,
  and `make feedback` (each student's feedback in a folder of their own); `handout`: what students get
  (`make handout`), without instructor sources or hidden tests.
- `startup`: seconds of unused imports cut from every nbgrader process and kernel that grading starts.
- `trusted`: verdicts a learner's code cannot touch — each answer runs in a process of its own (the sandbox of
  `course_lib.grading.kit`), only plain data comes back, and the checks compare on the grader's side.
- `kernels`: the kernels that run a submission's code are confined (`course_lib.grading.kit.confine`: a memory
  limit, and with Linux's Landlock writes only in the submission's own folder) and what a cell prints is capped.
"""
