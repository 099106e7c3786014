"""The grading kit: what every lesson's graders are built from (COURSE_SPEC §5).

- `core`: `GradingError`, guarded calls of learner code (`call_answer`), comparisons whose failure message is the
  hint, seeded inputs.
- `guard`: the from-scratch guard (the answer is, wraps or calls the reference or a forbidden shortcut).
- `diagnose`: naming the known mistake a wrong answer matches.
- `remote`: answers that live in another process. When a notebook is graded, each exercise's answer runs in a
  sandbox process of its own and the checks reach it through these stand-ins (see `course_lib.workflow.trusted`).
"""
