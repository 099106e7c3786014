"""course_lib: the companion package of the course "Transformers from Scratch".

Reference implementations of everything the lessons teach (one module per unit), data helpers, plotting and
the grading helpers that nbgrader's test cells call. Modules are imported on demand, e.g.
`from course_lib import tokenization`.
"""

__version__ = "0.1.0"
