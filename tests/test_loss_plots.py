"""Tests of course_lib.loss_plots: the points drawn, the recorded history and the live display handle."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from course_lib import loss_plots  # noqa: E402
from course_lib.loss_plots import LossPlot, loss_curve  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_loss_curve_draws_the_given_points() -> None:
    fig, ax = loss_curve([3.0, 2.0, 1.5, 1.2], [3.1, 1.9], val_steps=[0, 3], title="run 1")
    train, val = ax.lines
    np.testing.assert_allclose(train.get_xydata(), [[0, 3.0], [1, 2.0], [2, 1.5], [3, 1.2]])
    np.testing.assert_allclose(val.get_xydata(), [[0, 3.1], [3, 1.9]])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["train", "val"]
    assert ax.get_title() == "run 1"
    with pytest.raises(ValueError, match="val_steps"):
        loss_curve([1.0], [1.0, 2.0], val_steps=[0])


def test_loss_plot_records_and_redraws_without_a_notebook() -> None:
    plot = LossPlot(title="training")
    assert plot._live is False  # pytest is not a Jupyter kernel: nothing is displayed
    for step in range(5):
        plot.update(step, train_loss=torch.tensor(4.0 - step), val_loss=4.5 - step if step % 2 == 0 else None)
    assert plot.history["train"] == ([0, 1, 2, 3, 4], [4.0, 3.0, 2.0, 1.0, 0.0])
    assert plot.history["val"] == ([0, 2, 4], [4.5, 2.5, 0.5])
    fig, ax = plot.figure()
    assert len(ax.lines) == 2  # redrawn, not stacked up
    np.testing.assert_allclose(ax.lines[1].get_xydata(), [[0, 4.5], [2, 2.5], [4, 0.5]])
    assert ax.get_title() == "training"
    assert plt.get_fignums() == []  # not registered with pyplot
    assert plot._repr_png_()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="at least one"):
        plot.update(5)
    with pytest.raises(TypeError, match="step"):
        plot.update(1.5, train_loss=1.0)  # type: ignore[arg-type]


def test_loss_plot_updates_one_display_handle_in_a_notebook(monkeypatch: pytest.MonkeyPatch) -> None:
    import IPython.display

    calls = []

    class Handle:
        def update(self, obj: object) -> None:
            calls.append(("update", obj))

    def fake_display(obj: object, display_id: bool = False) -> Handle:
        calls.append(("display", obj))
        return Handle()

    monkeypatch.setattr(loss_plots, "_in_notebook", lambda: True)
    monkeypatch.setattr(IPython.display, "display", fake_display)
    plot = LossPlot()
    plot.update(0, train_loss=2.0).update(1, train_loss=1.0).update(2, val_loss=1.5)
    assert [kind for kind, _ in calls] == ["display", "update", "update"]
    assert all(obj is plot for _, obj in calls)
    assert LossPlot(live=False).update(0, train_loss=1.0) is not None and len(calls) == 3


def test_loss_plot_redraws_at_most_every_redraw_every_seconds(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [100.0]
    monkeypatch.setattr(loss_plots.time, "monotonic", lambda: clock[0])
    shown = []
    plot = LossPlot(live=False, redraw_every=1.0)
    monkeypatch.setattr(loss_plots, "_draw_losses", lambda ax, history, *rest: shown.append(len(history["train"][0])))
    for step in range(6):
        plot.update(step, train_loss=1.0 / (step + 1))
        clock[0] += 0.4  # updates at 0, 0.4, ..., 2.0 s: redraws at 0 and 1.2 s
    assert shown == [1, 4] and plot.history["train"][0] == [0, 1, 2, 3, 4, 5]  # every point recorded
    plot.show()
    assert shown == [1, 4, 6]
    with pytest.raises(ValueError, match="redraw_every"):
        LossPlot(redraw_every=-1)
