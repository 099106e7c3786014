"""The course machinery, apart from what the lessons teach; it reads the course's facts from `course_lib.manifest`.

- `course`: regenerates the student versions (`make release`) and checks that they are fresh.
- `selfgrade`: grades one notebook with nbgrader in a throw-away course (`make grade`, the last cell of a lesson).
- Grading a class, in four rooms, each importing only the ones after it:
  - `class_command`: the instructor's class command (`python -m course_lib class`, `make class`): its settings,
    its steps from collecting to feedback, `class_grades.csv` and the "what the class got wrong" report;
  - `nbgrader_runs`: the processes that run nbgrader for it: workers that grade one submission at a time and
    report each as a record, the pool that replaces a worker that dies or hangs, the feedback processes;
  - `nbgrader_plugins`: what runs inside nbgrader, plugged in by `notebooks/nbgrader_config.py`, one per file;
  - `submissions`: what students send: each file read however it was saved and its clear damage repaired in a
    copy, and the class's files collected (new, unchanged, resubmitted with the earlier one kept in `history/`,
    late).
  `similarity`: answers that read like the course's code with other names, flagged for the instructor.
- `instructor`: `make nbgrader` with the commands that would do harm in the course folder refused and explained,
  and `make feedback` (each student's feedback in a folder of their own); `handout`: what students get
  (`make handout`), without instructor sources or hidden tests.
- `startup`: seconds of unused imports cut from every nbgrader process and kernel that grading starts, and from
  a lesson's set-up cell (`slow_imports`: the switch, without nbgrader, which a lesson's runtime does not install).
- `trusted`: verdicts a learner's code cannot touch — each answer runs in a process of its own (the sandbox of
  `course_lib.grading.kit`), only plain data comes back, and the checks compare on the grader's side.
- `kernels`: the kernels that run a submission's code are confined (`course_lib.grading.kit.confine`: a memory
  limit, and with Linux's Landlock writes only in the submission's own folder) and what a cell prints is capped.
"""
