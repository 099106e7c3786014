"""Whether torch.compile traces a model's forward as one graph (used by tests/test_gpt.py, test_gpt2.py).

A compiled forward should hold the model and nothing else: a Python-side check that branches on tensor values
breaks the graph (an error under fullgraph=True), and a call of a functools.lru_cache-wrapped function makes
Dynamo warn and trace through the cache. Either fails `assert_one_graph`.
"""

from __future__ import annotations

import warnings

import torch
from torch import nn


def assert_one_graph(model: nn.Module, *args: object) -> None:
    """torch.compile(model, fullgraph=True) traces model(*args) without a graph break or a Dynamo warning, and
    computes what the model computes. backend="eager" runs the captured graph as it is: the trace is what is
    tested, in about a second on a CPU."""
    torch._dynamo.reset()  # a fresh trace, not one cached by an earlier test
    getattr(torch._dynamo.utils, "warn_once_cache", set()).clear()  # Dynamo gives each warning once per process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compiled = torch.compile(model, fullgraph=True, backend="eager")(*args)
    assert [str(w.message) for w in caught] == []
    for got, expected in zip(compiled, model(*args), strict=True):
        torch.testing.assert_close(got, expected)
