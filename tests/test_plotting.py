"""Tests of course_lib.plotting: the chart specs and figure contents, compared with the input data."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import altair as alt  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from matplotlib.colorbar import Colorbar  # noqa: E402

from course_lib import loss_plots, plotting  # noqa: E402
from course_lib.plotting import (  # noqa: E402
    attention_heatmap,
    pca_2d,
    position_encoding_heatmap,
    word_vectors_scatter,
)

TOKENS = ["the", "cat", "sat", "on", "the", "mat"]  # "the" twice: labels must not merge


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _weights(*shape: int, seed: int = 0) -> torch.Tensor:
    scores = torch.randn(*shape, generator=torch.Generator().manual_seed(seed))
    return torch.softmax(scores, dim=-1)


def _records(spec: dict) -> list[dict]:
    """The inline data rows of a chart spec, wherever altair put them."""
    values = spec.get("data", {}).get("values")
    if values is None:
        (values,) = spec["datasets"].values()
    return values


def _tooltip_fields(spec: dict) -> set[str]:
    found = set()

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if "tooltip" in node:
                found.update(t["field"] for t in node["tooltip"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


def _colorbars(fig) -> list:
    return [ax for ax in fig.axes if isinstance(getattr(ax, "_colorbar", None), Colorbar)]


def _tick_texts(labels) -> list[str]:
    return [label.get_text() for label in labels]


# ------------------------------------------------------------------------------------------------------------
# attention_heatmap: altair
# ------------------------------------------------------------------------------------------------------------


def test_attention_altair_2d_data_labels_and_tooltips() -> None:
    w = _weights(6, 6)
    keys = ["k0", "k1", "k2", "k3", "k4", "k5"]
    chart = attention_heatmap(w, x_labels=keys, y_labels=TOKENS, title="six tokens")
    assert isinstance(chart, alt.TopLevelMixin)
    spec = chart.to_dict()
    rows = _records(spec)
    assert len(rows) == 36
    for row in rows:
        i, j = row["query_pos"], row["key_pos"]
        assert row["query"] == TOKENS[i] and row["key"] == keys[j]
        assert row["weight"] == pytest.approx(w[i, j].item(), abs=1e-6)
    assert {(r["query_pos"], r["key_pos"]) for r in rows} == {(i, j) for i in range(6) for j in range(6)}
    assert {"query", "key", "weight"} <= _tooltip_fields(spec)
    assert spec["title"] == "six tokens"
    # the axes show the tokens by position, so the two "the" rows stay apart
    encoding = spec["layer"][0]["encoding"]
    assert encoding["y"]["field"] == "query_pos" and '"the", "cat"' in encoding["y"]["axis"]["labelExpr"]


def test_attention_altair_4d_selector() -> None:
    w = _weights(2, 3, 4, 5)
    chart = attention_heatmap(w, x_labels=list("abcde"), y_labels=list("wxyz"), layout="select")
    spec = chart.to_dict()
    params = {p["name"]: p for p in spec["params"]}
    assert params["select_layer"]["bind"]["options"] == [0, 1]
    assert params["select_head"]["bind"]["options"] == [0, 1, 2]
    filters = [t["filter"] for t in spec["transform"]]
    assert any("select_layer" in f for f in filters) and any("select_head" in f for f in filters)
    rows = _records(spec)
    assert len(rows) == w.numel()
    for row in rows:
        expected = w[row["layer"], row["head"], row["query_pos"], row["key_pos"]].item()
        assert row["weight"] == pytest.approx(expected, abs=1e-6)
    assert {"layer", "head", "query", "key", "weight"} <= _tooltip_fields(spec)


def test_attention_altair_grid_layouts() -> None:
    spec = attention_heatmap(_weights(2, 2, 3, 3), layout="auto", panel_names=("batch", "head")).to_dict()
    assert spec["facet"]["row"]["field"] == "batch" and spec["facet"]["column"]["field"] == "head"
    assert "params" not in spec
    heads = attention_heatmap(_weights(5, 3, 3)).to_dict()  # (heads, q, k): wrapped facet over heads
    assert heads["facet"]["field"] == "head" and heads["columns"] == 4
    assert sorted({r["head"] for r in _records(heads)}) == [0, 1, 2, 3, 4]
    assert "layer" not in _records(heads)[0]
    many = attention_heatmap(_weights(5, 5, 3, 3)).to_dict()  # 25 panels: auto switches to dropdowns
    assert {p["name"] for p in many["params"]} == {"select_layer", "select_head"}


def test_attention_altair_masked_cells_and_size_limit() -> None:
    scores = torch.randn(4, 4, generator=torch.Generator().manual_seed(0))
    scores = scores.masked_fill(~torch.ones(4, 4, dtype=torch.bool).tril(), float("-inf"))
    spec = attention_heatmap(scores, show_values=True).to_dict()
    rows = _records(spec)
    assert sum(r["weight"] is None for r in rows) == 6  # the masked upper triangle is left blank
    marks = [layer["mark"]["type"] for layer in spec["layer"]]
    assert marks == ["rect", "text"] and spec["layer"][1]["encoding"]["text"]["field"] == "weight"
    with pytest.raises(ValueError, match="max_cells=10000"):
        attention_heatmap(np.zeros((3, 4, 30, 30)))  # 10,800 values
    with pytest.raises(ValueError, match="max_cells=100"):
        attention_heatmap(np.zeros((2, 2, 6, 6)), max_cells=100)
    assert len(_records(attention_heatmap(np.zeros((2, 2, 6, 6)), max_cells=144).to_dict())) == 144


# ------------------------------------------------------------------------------------------------------------
# attention_heatmap: matplotlib
# ------------------------------------------------------------------------------------------------------------


def test_attention_matplotlib_2d() -> None:
    w = _weights(6, 6)
    fig, ax = attention_heatmap(w, TOKENS, TOKENS, title="one head", backend="matplotlib", show_values=True)
    assert len(fig.axes) == 2 and len(_colorbars(fig)) == 1
    np.testing.assert_allclose(ax.images[0].get_array(), w.double().numpy())
    assert _tick_texts(ax.get_xticklabels()) == TOKENS
    assert _tick_texts(ax.get_yticklabels()) == TOKENS
    assert ax.get_title() == "one head"
    assert len(ax.texts) == 36 and ax.texts[1].get_text() == f"{w[0, 1].item():.2f}"


def test_attention_matplotlib_4d_grid_shares_one_colour_bar() -> None:
    w = _weights(2, 3, 4, 4)
    w[1, 2, 0, 0] = 2.0  # one outlier: every panel must use its range
    fig, axes = attention_heatmap(w, list("abcd"), list("efgh"), title="grid", backend="matplotlib")
    assert axes.shape == (2, 3)
    assert len(fig.axes) == 2 * 3 + 1 and len(_colorbars(fig)) == 1
    for r in range(2):
        for c in range(3):
            image = axes[r, c].images[0]
            np.testing.assert_allclose(image.get_array(), w[r, c].double().numpy())
            assert image.get_clim() == pytest.approx((w.min().item(), 2.0))
            assert axes[r, c].get_title() == f"layer {r}, head {c}"
    assert _tick_texts(axes[1, 0].get_xticklabels()) == list("abcd")
    assert _tick_texts(axes[1, 0].get_yticklabels()) == list("efgh")
    assert fig._suptitle.get_text() == "grid"


def test_attention_matplotlib_3d_wraps_heads() -> None:
    w = _weights(6, 3, 3)
    fig, axes = attention_heatmap(w, backend="matplotlib")
    assert axes.shape == (6,)
    assert len(fig.axes) == 6 + 1 and len(_colorbars(fig)) == 1  # the two unused grid cells are removed
    for h in range(6):
        np.testing.assert_allclose(axes[h].images[0].get_array(), w[h].double().numpy())
        assert axes[h].get_title() == f"head {h}"


def test_attention_heatmap_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError, match="x_labels"):
        attention_heatmap(_weights(3, 4), x_labels=["a", "b", "c"])
    with pytest.raises(ValueError, match="y_labels"):
        attention_heatmap(_weights(3, 4), y_labels="abc")
    with pytest.raises(ValueError, match="shape"):
        attention_heatmap(_weights(4))
    with pytest.raises(ValueError, match="backend"):
        attention_heatmap(_weights(3, 3), backend="plotly")
    with pytest.raises(ValueError, match="layout"):
        attention_heatmap(_weights(2, 3, 3), layout="tiles")
    with pytest.raises(TypeError, match="weights"):
        attention_heatmap([[0.5, 0.5]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finite"):
        attention_heatmap(torch.full((2, 2), float("nan")))


# ------------------------------------------------------------------------------------------------------------
# position_encoding_heatmap
# ------------------------------------------------------------------------------------------------------------


def test_position_encoding_heatmap_both_backends() -> None:
    pe = torch.randn(12, 8, generator=torch.Generator().manual_seed(0))
    spec = position_encoding_heatmap(pe, title="table").to_dict()
    rows = _records(spec)
    assert len(rows) == 96
    for row in rows:
        assert row["value"] == pytest.approx(pe[row["position"], row["dimension"]].item(), abs=1e-6)
    assert {"position", "dimension", "value"} <= _tooltip_fields(spec)
    assert spec["encoding"]["x"]["field"] == "dimension" and spec["encoding"]["y"]["field"] == "position"
    m = pe.abs().max().item()
    assert spec["encoding"]["color"]["scale"]["domain"] == pytest.approx([-m, m])  # centred on zero

    fig, ax = position_encoding_heatmap(pe.numpy(), backend="matplotlib", title="table")
    np.testing.assert_allclose(ax.images[0].get_array(), pe.double().numpy())
    assert len(_colorbars(fig)) == 1
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("dimension", "position", "table")

    with pytest.raises(ValueError, match="max_cells"):
        position_encoding_heatmap(torch.zeros(200, 64))
    with pytest.raises(ValueError, match="2-D"):
        position_encoding_heatmap(torch.zeros(2, 3, 4))


# ------------------------------------------------------------------------------------------------------------
# word vectors
# ------------------------------------------------------------------------------------------------------------


def _numpy_pca(x: np.ndarray) -> np.ndarray:
    centred = x - x.mean(axis=0)
    _, _, vt = np.linalg.svd(centred, full_matrices=False)
    return centred @ vt[:2].T


def _assert_equal_up_to_sign(actual: np.ndarray, expected: np.ndarray) -> None:
    for k in range(2):
        sign = np.sign(actual[:, k] @ expected[:, k])
        np.testing.assert_allclose(actual[:, k], sign * expected[:, k], atol=1e-5)


def test_pca_2d_matches_numpy_svd() -> None:
    x = np.random.default_rng(0).normal(size=(30, 7)) * np.array([5, 3, 1, 1, 1, 1, 1])
    xy = pca_2d(torch.from_numpy(x)).numpy()
    _assert_equal_up_to_sign(xy, _numpy_pca(x))
    # the first component carries at least as much variance as the second, and they are uncorrelated
    assert xy[:, 0].var() >= xy[:, 1].var()
    assert abs(np.corrcoef(xy.T)[0, 1]) < 1e-8
    # the sign convention: the largest entry of each principal direction is positive
    centred = x - x.mean(axis=0)
    vt = np.linalg.svd(centred, full_matrices=False)[2][:2]
    vt *= np.sign(vt[np.arange(2), np.abs(vt).argmax(axis=1)])[:, None]
    np.testing.assert_allclose(xy, centred @ vt.T, atol=1e-10)


def test_word_vectors_scatter_points_are_the_projection() -> None:
    x = np.random.default_rng(1).normal(size=(9, 5))
    words = [f"w{i}" for i in range(9)]
    expected = _numpy_pca(x)

    fig, ax = word_vectors_scatter(x, words, backend="matplotlib", title="words")
    _assert_equal_up_to_sign(np.asarray(ax.collections[0].get_offsets()), expected)
    assert [t.get_text() for t in ax.texts] == words
    assert "of variance" in ax.get_xlabel() and ax.get_title() == "words"

    spec = word_vectors_scatter(torch.from_numpy(x).float(), words, groups=["a"] * 4 + ["b"] * 5).to_dict()
    rows = _records(spec)
    assert [r["word"] for r in rows] == words and [r["group"] for r in rows][3:5] == ["a", "b"]
    points = np.array([[r["x"], r["y"]] for r in rows])
    _assert_equal_up_to_sign(points, expected)
    assert {"word", "x", "y"} <= _tooltip_fields(spec)
    assert any(layer["mark"]["type"] == "text" for layer in spec["layer"])

    with pytest.raises(ValueError, match="method"):
        word_vectors_scatter(x, words, method="tsne")
    with pytest.raises(ValueError, match="labels"):
        word_vectors_scatter(x, words[:-1])


# ------------------------------------------------------------------------------------------------------------
# the module's names
# ------------------------------------------------------------------------------------------------------------


def test_plotting_still_offers_the_loss_curves_of_loss_plots() -> None:
    """The loss curves moved to course_lib.loss_plots; lessons keep importing them from course_lib.plotting."""
    assert plotting.loss_curve is loss_plots.loss_curve
    assert plotting.LossPlot is loss_plots.LossPlot
    assert all(callable(getattr(plotting, name)) for name in plotting.__all__)


def test_attention_weights_use_the_whole_probability_scale_and_scores_their_own_range() -> None:
    """Near-uniform weights (an untrained layer: 0.16-0.18) are not stretched over the colour map; scores are."""
    near_uniform = torch.full((6, 6), 1 / 6) + 0.01 * torch.rand(6, 6, generator=torch.Generator().manual_seed(0))
    spec = plotting.attention_heatmap(near_uniform).to_dict()
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [0.0, 1.0]
    fig, ax = plotting.attention_heatmap(near_uniform, backend="matplotlib")
    assert ax.images[0].get_clim() == (0.0, 1.0)
    plt.close(fig)
    scores = torch.tensor([[-2.0, 3.0], [0.5, float("-inf")]])
    spec = plotting.attention_heatmap(scores).to_dict()
    assert spec["layer"][0]["encoding"]["color"]["scale"]["domain"] == [-2.0, 3.0]
