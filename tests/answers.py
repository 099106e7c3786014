"""Write learner answers the way a notebook defines them, so the from-scratch guard sees notebook code.

Also the pieces the grader tests (tests/test_grading_*.py, through tests/grader_kit.py) build on: editing a right
answer into a buggy one, asserting that a check fails with a message that names the mistake, reading the hidden
cases a lesson's test cells pass, and running a lesson's answer and test cells in order.
"""

from __future__ import annotations

import copy
import functools
import itertools
import re
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from course_lib.grading import GradingError
from course_lib.grading.kit.guard import remember_cell
from tests.nbtools import grade_id, read, source_path

_CELLS = itertools.count(1)


def run_cell(code: str, **globals_) -> dict:
    """Execute `code` as a notebook cell would (module `__main__`, the cell's text kept where IPython keeps it, so
    that a visible check reads the cell as it does in a notebook) and return the namespace it fills."""
    namespace = {"__name__": "__main__", **globals_}
    code = textwrap.dedent(code)
    exec(compile(code, remember_cell(code, f"<notebook-cell-{next(_CELLS)}>"), "exec"), namespace)
    return namespace


def define(code: str, name: str, **globals_):
    """Execute `code` as a notebook cell would (module `__main__`) and return the object called `name`."""
    return run_cell(code, **globals_)[name]


def edit(code: str, old: str, new: str) -> str:
    """`code` with `old` replaced by `new` (a buggy answer as an edit of a right one); `old` must be there."""
    assert old in code, old
    return code.replace(old, new)


def failure_message(run: Callable[[], Any], *words: str) -> str:
    """Run a check that must fail; assert that its message contains each of `words` as written and return it."""
    with pytest.raises(GradingError) as info:
        run()
    message = info.value.message
    for word in words:
        assert word in message, f"{word!r} not in message: {message}"
    return message


# The call in a hidden test cell: check_<exercise>(<answers>, cases=[...]) just before the end marker.
_HIDDEN_CALL = re.compile(
    r"check_(?P<check>\w+)\((?P<answers>[\w\s,]*?)cases=(?P<cases>\[.*\]),?\s*\)\s*### END HIDDEN TESTS", re.S
)


@functools.cache
def _read_hidden_cases(lesson: str) -> dict[str, list]:
    found = {}
    for cell in read(source_path(lesson)).cells:
        cell_id = grade_id(cell) or ""
        if not (cell_id.startswith("test_") and cell_id.endswith("_hidden")):
            continue
        name = cell_id.removeprefix("test_").removesuffix("_hidden")
        match = _HIDDEN_CALL.search(cell.source)
        assert match and match["check"] == name, f"hidden cell of {name} does not call check_{name}(..., cases=[...])"
        answers = re.findall(r"\w+", match["answers"])
        assert answers == [name] or len(answers) > 1, f"hidden cell of {name} does not pass `{name}` to its check"
        found[name] = eval(match["cases"], {})  # literal cases written in the notebook
    return found


def hidden_cases(lesson: str) -> dict[str, list]:
    """{exercise: the `cases` its hidden test cell passes}, read from the lesson's instructor source."""
    return copy.deepcopy(_read_hidden_cases(lesson))


def run_graded_cells(lesson: str, namespace: dict) -> list[str]:
    """Run the lesson's answer and test cells (hidden tests included) in order in `namespace`, as nbgrader
    would with the instructor's solutions; return the grade ids of the test cells, which raise if a check fails."""
    markers = re.compile(r"^\s*### (BEGIN|END) (SOLUTION|HIDDEN TESTS)\s*$", re.M)
    graded = []
    for cell in read(source_path(lesson)).cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and (meta.get("solution") or meta.get("grade")):
            exec(compile(markers.sub("", cell.source) + "\n", "<cell>", "exec"), namespace)
            if meta.get("grade"):
                graded.append(meta["grade_id"])
    return graded


# A correct lesson 04 `CausalSelfAttention` written with ordinary dynamic Python (setattr, vars, getattr): graded
# like any other code, full marks and no flag (tests/test_trusted.py, tests/test_nbgrader_roundtrip.py).
SETATTR_CAUSAL = (
    "import torch\nfrom torch import nn\n\n\n"
    "class CausalSelfAttention(nn.Module):\n"
    "    def __init__(self, d_in, d_out, context_length, dropout=0.0, qkv_bias=False):\n"
    "        super().__init__()\n"
    "        for name in ('W_query', 'W_key', 'W_value'):\n"
    "            setattr(self, name, nn.Linear(d_in, d_out, bias=qkv_bias))\n"
    "        self.dropout = nn.Dropout(dropout)\n"
    "        vars(self)['context_length'] = context_length\n\n"
    "    def forward(self, x):\n"
    "        T = x.shape[1]\n"
    "        if T > self.context_length:\n"
    "            raise ValueError(f'{T} positions, more than context_length={self.context_length}')\n"
    "        q, k, v = (getattr(self, f'W_{part}')(x) for part in ('query', 'key', 'value'))\n"
    "        scores = q @ k.transpose(1, 2) / k.shape[-1] ** 0.5\n"
    "        future = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)\n"
    "        weights = torch.softmax(scores.masked_fill(future, float('-inf')), dim=-1)\n"
    "        return self.dropout(weights) @ v\n"
)
