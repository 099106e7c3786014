"""What lesson 13's diagram says (course_lib.diagrams.induction), checked against the code it pictures: the key its
induction head reads is the one `induction_scores` scores, and that key holds the token that comes next."""

from __future__ import annotations

import torch
from matplotlib.text import Text

from course_lib import induction
from course_lib.diagrams import DIAGRAMS
from course_lib.diagrams import induction as drawing


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_text())


def test_registered():
    assert DIAGRAMS["induction_circuit"] is drawing.induction_circuit


def test_the_sequence_repeats_with_the_period_drawn():
    tokens, period = drawing.CIRCUIT_TOKENS, drawing.PERIOD
    assert all(tokens[t] == tokens[t - period] for t in range(period, len(tokens)))
    assert len(set(tokens[:period])) == period  # each token once per copy: the earlier copy is unique


def test_the_induction_arrow_ends_where_induction_scores_looks_and_that_key_holds_the_next_token():
    tokens, period, query = drawing.CIRCUIT_TOKENS, drawing.PERIOD, drawing.CIRCUIT_QUERY
    key = drawing.induction_key(query)
    T = len(tokens)
    pattern = torch.zeros(1, T, T)
    pattern[0, query, key] = 1.0  # a head that reads only that key, from that query
    assert induction.induction_scores(pattern, period) == 1 / (T - period)  # one query of T - period counts
    assert tokens[key] == tokens[query + 1]  # what the head copies is what comes next
    texts = _texts(drawing.induction_circuit())
    assert f"t − period + 1 = {key}" in texts and f"t={query} predicts" in texts
    assert "previous-token head" in texts and "induction head" in texts
