"""What lesson 00's pictures say (course_lib.diagrams.tensors): the broadcasting picture's shapes are the ones
PyTorch computes, its result grid is what `column + row` gives, and the faded boxes are the stretched copies; the
gradient step shows autograd's gradient and the step it gives, drawn from w to the new w."""

from __future__ import annotations

import re

import numpy as np
import torch
from matplotlib.text import Annotation, Text

from course_lib.diagrams import DIAGRAMS, tensors


def _texts(fig) -> list[Text]:
    return [t for t in fig.findobj(Text) if t.get_text()]


def test_registered():
    assert DIAGRAMS["broadcasting"] is tensors.broadcasting
    assert DIAGRAMS["gradient_step"] is tensors.gradient_step


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


def test_gradient_step_shows_the_primers_step_computed_by_autograd():
    numbers = tensors.step_numbers()
    w, x = torch.tensor(tensors.STEP_W), torch.tensor(tensors.STEP_X)
    grad = 2 * (w @ x) * x  # d/dw (w · x)² by hand: the picture's numbers must be autograd's and this
    new = w - tensors.STEP_LR * grad
    torch.testing.assert_close(torch.tensor(numbers["grad"]), grad)
    torch.testing.assert_close(torch.tensor(numbers["new"]), new)
    assert numbers["loss"] == 25.0 and abs(numbers["new_loss"] - 6.25) < 1e-4  # lesson 00 quotes 25 and 6.25
    fig = tensors.gradient_step()
    words = [t.get_text() for t in _texts(fig)]
    assert "gradient = 2 (w · x) x = (-30, -40)" in words
    assert "    = (1, -2) − (-0.3, -0.4) = (1.3, -1.6)" in words and "new loss = 6.25" in words
    arrows = [a for a in fig.findobj(Annotation) if not a.get_text()]
    step = next(a for a in arrows if np.allclose(a.xy, new.numpy()))
    assert np.allclose(step.xyann, w.numpy())  # the step's arrow goes from w to the new w
    gradient = next(a for a in arrows if a is not step)
    direction = np.subtract(gradient.xy, gradient.xyann)
    assert np.allclose(direction / np.linalg.norm(direction), grad.numpy() / grad.norm().item())  # uphill
