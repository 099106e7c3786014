"""The grading kit: what every lesson's graders are built from (docs/ARCHITECTURE.md, Rooms and imports).

- `exercise`: `Graded`, an exercise as a check names it — the course's reference object and its manifest entry.
- `core`: `GradingError`, guarded calls of learner code (`call_answer`), comparisons whose failure message is the
  hint, seeded inputs, and what a check asks of an answer that may live in a sandbox (`is_instance`, `type_name`,
  `make`).
- `guard`: the from-scratch guard (the answer is, wraps or calls the reference or a forbidden shortcut).
- `diagnose`: naming the known mistake a wrong answer matches.
- `remote`, `sandbox`, `codec`: answers that live in another process. When a notebook is graded, each exercise's
  answer runs in a sandbox process of its own (`sandbox`, the server), and the checks reach it through stand-ins
  (`remote`, the client); only plain data crosses between them (`codec`). `course_lib.workflow.trusted` drives it.
- `confine`: the limits on a process that runs a learner's code (memory, and with Landlock no writes, no
  connections, no signals outside), for the sandboxes and for the kernels nbgrader starts.
"""
