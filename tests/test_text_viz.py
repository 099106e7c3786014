"""Tests of course_lib.text_viz (lesson 01 pictures)."""

from __future__ import annotations

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from IPython.display import HTML  # noqa: E402

from course_lib.text_viz import (  # noqa: E402
    PALETTE,
    compression_curve,
    compression_table,
    token_boundaries_html,
)
from course_lib.tokenization import bpe_encode, train_bpe  # noqa: E402

TEXT = (
    "It had always been his fate to have women say such things of him: the fact should be set down in "
    "extenuation. What struck me now was that, for the first time, he resented the tone. "
) * 4


def boxes(markup: str) -> list[str]:
    return re.findall(r'<span class="token"[^>]*>(.*?)</span>', markup)


def test_one_box_per_token_with_ids_in_tooltips():
    pieces = ["Hello", " world", "\n", "!"]
    result = token_boundaries_html(pieces, ids=[15496, 995, 198, 0])
    assert isinstance(result, HTML)
    assert boxes(result.data) == ["Hello", "·world", "↵", "!"]
    assert 'title="id 995: &#x27; world&#x27;"' in result.data
    assert result.data.count("<br>") == 1  # line break after the newline token
    colours = re.findall(r"background:(#[0-9a-f]+)", result.data)
    assert colours == [PALETTE[i % len(PALETTE)] for i in range(4)]
    assert token_boundaries_html(pieces, ids=[15496, 995, 198, 0]).data == result.data  # deterministic


def test_html_is_escaped():
    pieces = ["<script>", "alert('x')", "</script>", '"&"']
    markup = token_boundaries_html(pieces).data
    assert "<script>" not in markup and "</script>" not in markup
    assert "&lt;script&gt;" in markup and "&quot;&amp;&quot;" in markup
    assert len(boxes(markup)) == 4


def test_bytes_pieces_and_invisible_characters():
    euro = "€".encode()
    markup = token_boundaries_html([euro[:2], euro[2:], b"a\tb", "\x00", "\u2028"]).data
    assert boxes(markup) == ["⟨e2 82⟩", "⟨ac⟩", "a→b", "⟨U+0000⟩", "⟨U+2028⟩"]
    assert token_boundaries_html([]).data.count('class="token"') == 0


def test_token_boundaries_errors():
    with pytest.raises(TypeError, match="pieces"):
        token_boundaries_html("Hello")
    with pytest.raises(TypeError, match="item 1"):
        token_boundaries_html(["a", 3])
    with pytest.raises(ValueError, match="2 ids for 3 pieces"):
        token_boundaries_html(["a", "b", "c"], ids=[1, 2])
    with pytest.raises(TypeError, match="ids"):
        token_boundaries_html(["a"], ids=["1"])


def test_smaller_vocabulary_merges_are_a_prefix_of_larger_ones():
    large = list(train_bpe(TEXT, 256 + 60).items())
    for n_merges in (0, 1, 10, 35, 59):
        assert list(train_bpe(TEXT, 256 + n_merges).items()) == large[:n_merges]


def test_compression_table_matches_separate_encodings():
    sizes = [256, 270, 300, 316]
    table = compression_table(TEXT, sizes)
    assert [size for size, _ in table] == sizes
    merges = train_bpe(TEXT, 316)
    for size, ratio in table:
        prefix = dict(list(merges.items())[: size - 256])
        assert ratio == len(bpe_encode(TEXT, prefix)) / len(TEXT)
    ratios = [ratio for _, ratio in table]
    assert ratios[0] == 1.0  # ascii text: one byte per character before any merge
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < ratios[0]


def test_compression_table_after_early_stop():
    # "aaaa" is one token after 2 merges; bigger vocabularies cannot shorten it further
    assert compression_table("aaaa", [256, 257, 258, 400]) == [
        (256, 1.0),
        (257, 0.5),
        (258, 0.25),
        (400, 0.25),
    ]


def test_compression_table_errors():
    with pytest.raises(ValueError, match="non-empty"):
        compression_table("", [300])
    with pytest.raises(ValueError, match=">= 256"):
        compression_table("abc", [100])
    with pytest.raises(ValueError, match="empty"):
        compression_table("abc", [])
    with pytest.raises(TypeError, match="vocab_sizes"):
        compression_table("abc", 300)


def test_compression_curve_plots_the_table():
    sizes = [300, 256, 280]
    table = sorted(compression_table(TEXT, sizes))
    fig, ax = compression_curve(TEXT, sizes)
    try:
        line = ax.lines[0]
        assert list(line.get_xdata()) == [size for size, _ in table]
        assert list(line.get_ydata()) == [ratio for _, ratio in table]
        assert ax.get_xlabel() == "vocabulary size" and ax.get_ylabel() == "tokens per character"
        assert fig is ax.figure
    finally:
        plt.close(fig)
    fig2, ax2 = plt.subplots()
    try:
        assert compression_curve(TEXT, [256, 300], ax=ax2) == (fig2, ax2)
    finally:
        plt.close(fig2)
