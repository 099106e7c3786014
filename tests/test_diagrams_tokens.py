"""What lessons 01-02's diagrams say (course_lib.diagrams.tokens): the ids match the vocabulary drawn, every
target window is its input window moved one on, the picked row is one_hot(id) @ the matrix drawn, and a GPT's input
is nn.Embedding's token rows plus the position rows, the same position rows for every sequence."""

from __future__ import annotations

import re

import numpy as np
import torch
from matplotlib.text import Text

from course_lib.diagrams import DIAGRAMS, tokens


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    for name in ("tokenization_pipeline", "sliding_window", "embedding_row_pick", "token_plus_position"):
        assert name in DIAGRAMS


def test_pipeline_ids_are_places_in_the_vocabulary_drawn():
    texts = _texts(tokens.tokenization_pipeline())
    vocab_line = next(t for t in texts if t.startswith("vocabulary"))
    vocab = dict(re.findall(r"(\S+):(\d+)", vocab_line.removeprefix("vocabulary")))
    pieces = ["the", "cat", "sat", "on", "the", "mat", "."]
    for piece in pieces:
        assert piece in texts
    ids = [t for t in texts if t.isdigit()]
    assert ids == [vocab[p] for p in pieces]


def test_sliding_window_targets_are_inputs_moved_one_on():
    fig = tokens.sliding_window(n_tokens=13, context=4, stride=4)
    texts = _texts(fig)
    windows = tokens.sliding_window_rows(13, 4, 4)
    assert [s for s, _ in windows] == [0, 4, 8]
    assert all(t == s + 1 for s, t in windows)
    # Every window's boxes are drawn: 13 ids on top, then 4 input + 4 target boxes per window.
    boxes = [t for t in texts if re.fullmatch(r"t\d+", t)]
    assert len(boxes) == 13 + 3 * 8
    assert boxes[13:21] == [f"t{i}" for i in (0, 1, 1, 2, 2, 3, 3, 4)]
    assert "context = 4, stride = 4" in texts


def test_embedding_row_pick_is_one_hot_times_matrix_and_nn_embedding():
    texts = _texts(tokens.embedding_row_pick())
    table = tokens.EMBEDDING_TABLE
    cells = [float(t) for t in texts if re.fullmatch(r"[+-]\d\.\d", t)]
    assert np.allclose(np.array(cells).reshape(table.shape), table)
    picked = [float(v) for v in next(t for t in texts if "  " in t and t[0] in "+-").split()]
    one_hot = np.eye(table.shape[0])[tokens.EMBEDDING_ID]
    assert np.allclose(picked, one_hot @ table)
    emb = torch.nn.Embedding(*table.shape)
    with torch.no_grad():
        emb.weight.copy_(torch.tensor(table))
    assert np.allclose(picked, emb(torch.tensor(tokens.EMBEDDING_ID)).detach().numpy())
    assert not np.allclose(picked, table[tokens.EMBEDDING_ID - 1])


def test_token_plus_position_is_nn_embedding_lookups_added_with_broadcasting():
    fig = tokens.token_plus_position()
    texts = [t for t in fig.findobj(Text) if re.fullmatch(r"[+-]\d\.\d\n[+-]\d\.\d", t.get_text())]
    ids = torch.tensor(tokens.GPT_INPUT_IDS)  # (B, T)
    B, T = ids.shape
    drawn = torch.tensor([[float(v) for v in t.get_text().split()] for t in texts]).reshape(B, T, 3, 2)
    token_embedding, position_embedding = torch.nn.Embedding(5, 2), torch.nn.Embedding(T, 2)
    with torch.no_grad():
        token_embedding.weight.copy_(torch.tensor(tokens.TOKEN_TABLE))
        position_embedding.weight.copy_(torch.tensor(tokens.POSITION_TABLE))
        token_vectors = token_embedding(ids)  # (B, T, C)
        position_vectors = position_embedding(torch.arange(T))  # (T, C)
    torch.testing.assert_close(drawn[:, :, 0], token_vectors, atol=1e-6, rtol=0)
    torch.testing.assert_close(drawn[:, :, 1], position_vectors.expand(B, T, 2), atol=1e-6, rtol=0)
    torch.testing.assert_close(drawn[:, :, 2], token_vectors + position_vectors, atol=0.051, rtol=0)  # one decimal
    assert not torch.allclose(drawn[1, 0, 2], drawn[1, 1, 2])  # the same id (2) at t = 0 and 1: different inputs
    assert ids[1, 0] == ids[1, 1]
    faded = [t.get_alpha() is not None and t.get_alpha() < 1 for t in texts]
    assert faded == [False] * (3 * T) + [False, True, False] * T  # only the second sequence's position rows
