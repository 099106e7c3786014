"""What lesson 00's broadcasting picture says (course_lib.diagrams.tensors): the shapes in its titles are the ones
PyTorch computes, the result grid is what `column + row` gives, and the faded boxes are the stretched copies."""

from __future__ import annotations

import re

import torch
from matplotlib.text import Text

from course_lib.diagrams import DIAGRAMS, tensors


def _texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    assert DIAGRAMS["broadcasting"] is tensors.broadcasting


def test_titles_and_result_grid_match_torch():
    column, row = torch.tensor(tensors.BROADCAST_COLUMN).float(), torch.tensor(tensors.BROADCAST_ROW).float()
    result = column + row
    texts = _texts(tensors.broadcasting())
    words = [t.get_text() for t in texts]
    assert f"column + row ({result.shape[0]}, {result.shape[1]})" in words
    assert tuple(torch.broadcast_shapes(column.shape, row.shape)) == tuple(result.shape) == (3, 4)
    numbers = [t for t in texts if re.fullmatch(r"-?\d+(\.\d+)?", t.get_text())]
    assert len(numbers) == 3 * 12  # three grids of 3 x 4 boxes
    grids = [
        torch.tensor([float(t.get_text()) for t in numbers[k * 12 : (k + 1) * 12]]).reshape(3, 4) for k in range(3)
    ]
    torch.testing.assert_close(grids[0], column.expand(3, 4))
    torch.testing.assert_close(grids[1], row.expand(3, 4))
    torch.testing.assert_close(grids[2], result)


def test_only_the_stretched_copies_are_faded():
    texts = [t for t in _texts(tensors.broadcasting()) if re.fullmatch(r"-?\d+(\.\d+)?", t.get_text())]
    faded = torch.tensor([t.get_alpha() is not None and t.get_alpha() < 1 for t in texts]).reshape(3, 3, 4)
    assert faded[0].tolist() == [[False, True, True, True]] * 3  # the column is real in its first column only
    assert faded[1].tolist() == [[False] * 4] + [[True] * 4] * 2  # the row is real in its first row only
    assert not faded[2].any()  # the result is a real (3, 4) tensor
