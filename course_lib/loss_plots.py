"""Loss curves: a finished one, and one that redraws itself in the notebook while training runs (Lessons 07-11).

    loss_curve   train (and validation) loss against step, drawn once; returns (fig, ax)
    LossPlot     call update(step, train_loss=..., val_loss=...) as you log; one picture, replaced in place
                 (at most every `redraw_every` seconds: drawing a PNG can cost more than a small model's step)

Both draw with matplotlib and nothing else: no files, no prints, no changes to global settings.
`course_lib.plotting` re-exports both, so `from course_lib.plotting import loss_curve` works too.

Shape legend (no tensors here; for symmetry with the other modules): B batch, T time, H heads, D head size,
C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from course_lib import _checks

__all__ = ["loss_curve", "LossPlot"]


def _draw_losses(ax: Axes, series: dict[str, tuple[list, list]], title: str, log_y: bool) -> None:
    ax.clear()
    styles = {"train": {"linewidth": 1.2}, "val": {"marker": "o", "markersize": 3, "linewidth": 1.5}}
    for name, (steps, losses) in series.items():
        if steps:
            ax.plot(steps, losses, label=name, **styles.get(name, {}))
    ax.set(xlabel="step", ylabel="loss", title=title)
    if log_y:
        ax.set_yscale("log")
    if any(steps for steps, _ in series.values()):
        ax.legend()
    ax.grid(alpha=0.3)


def loss_curve(
    train_losses: Sequence[float],
    val_losses: Sequence[float] | None = None,
    *,
    train_steps: Sequence[int] | None = None,
    val_steps: Sequence[int] | None = None,
    title: str = "Loss",
    log_y: bool = False,
) -> tuple[Figure, Axes]:
    """A finished loss curve: train (and validation) loss against step. Lessons 07-11. Returns (fig, ax).

    Steps default to 0, 1, 2, ...; pass `val_steps` when validation ran only every few steps.
    """
    series = {}
    for name, losses, steps in (("train", train_losses, train_steps), ("val", val_losses, val_steps)):
        if losses is None:
            continue
        values = [_checks.number(f"{name}_losses", v) for v in losses]
        steps = list(range(len(values))) if steps is None else [int(s) for s in steps]
        if len(steps) != len(values):
            raise ValueError(f"`{name}_steps` has {len(steps)} entries but `{name}_losses` has {len(values)}")
        series[name] = (steps, values)
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    _draw_losses(ax, series, title, log_y)
    return fig, ax


def _in_notebook() -> bool:
    """True inside a Jupyter kernel (where a display handle can be updated in place)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class LossPlot:
    """A loss curve that redraws itself in the notebook while training runs. Lessons 09 and 11.

    Call `update(step, train_loss=..., val_loss=...)` as often as you log; in a Jupyter kernel the picture
    under the cell is replaced in place (one display handle), elsewhere nothing is shown. `live=False`
    turns the display off; `figure()` returns (fig, ax) at any time. The figure is not registered with
    pyplot, so it never shows up twice or lingers in pyplot's list of open figures.

    Every update is recorded, but the picture is redrawn at most every `redraw_every` seconds (0: at every
    update); call `show()` after the last update to draw everything recorded.
    """

    def __init__(
        self, title: str = "Loss", log_y: bool = False, live: bool | None = None, redraw_every: float = 0.0
    ) -> None:
        if isinstance(redraw_every, bool) or not isinstance(redraw_every, int | float) or redraw_every < 0:
            raise ValueError(f"`redraw_every` must be a number of seconds >= 0, got {redraw_every!r}")
        self.title = title
        self.log_y = log_y
        self.redraw_every = float(redraw_every)
        self.history: dict[str, tuple[list[int], list[float]]] = {"train": ([], []), "val": ([], [])}
        self._fig = Figure(figsize=(6.5, 3.8), layout="constrained")
        self._ax = self._fig.add_subplot()
        self._live = _in_notebook() if live is None else bool(live)
        self._handle = None
        self._drawn_at: float | None = None  # time.monotonic() of the last redraw

    def update(self, step: int, train_loss: float | None = None, val_loss: float | None = None) -> LossPlot:
        """Record the losses of one step (either may be None) and redraw."""
        _checks.integer("step", step)
        if train_loss is None and val_loss is None:
            raise ValueError("give at least one of `train_loss` and `val_loss`")
        new = {
            name: _checks.number(f"{name}_loss", loss)
            for name, loss in (("train", train_loss), ("val", val_loss))
            if loss is not None
        }  # all checked before anything is recorded
        for name, loss in new.items():
            self.history[name][0].append(int(step))
            self.history[name][1].append(loss)
        now = time.monotonic()
        if self._drawn_at is None or now - self._drawn_at >= self.redraw_every:
            self.show()
        return self

    def show(self) -> LossPlot:
        """Redraw now, from everything recorded (in a notebook: replace the picture under the cell)."""
        self._drawn_at = time.monotonic()
        _draw_losses(self._ax, self.history, self.title, self.log_y)
        if self._live:
            from IPython.display import display

            if self._handle is None:
                self._handle = display(self, display_id=True)
            else:
                self._handle.update(self)
        return self

    def figure(self) -> tuple[Figure, Axes]:
        """The current (fig, ax), drawn from everything recorded so far."""
        _draw_losses(self._ax, self.history, self.title, self.log_y)
        return self._fig, self._ax

    def _repr_png_(self) -> bytes:
        from IPython.core.pylabtools import print_figure  # the same renderer as the inline backend

        return print_figure(self._fig, "png")
