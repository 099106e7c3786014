"""What lesson 12's diagrams say (course_lib.diagrams.modern), checked against the code they picture: the wiring of
grouped-query attention is `repeat_kv`'s, and every change the modern block names is a switch of `ModernConfig`."""

from __future__ import annotations

import torch
from matplotlib.lines import Line2D
from matplotlib.text import Text

from course_lib import modern
from course_lib.diagrams import DIAGRAMS
from course_lib.diagrams import modern as drawings


def _texts(fig) -> str:
    return "\n".join(t.get_text() for t in fig.findobj(Text) if t.get_text())


def test_registered():
    assert {"gpt2_vs_modern_block", "grouped_query_attention"} <= set(DIAGRAMS)


def test_the_blocks_name_every_change_of_the_ladder():
    texts = _texts(drawings.gpt2_vs_modern_block())
    for words in ("LayerNorm", "RMSNorm", "learned position table", "RoPE on q and k", "SwiGLU", "8 key/value heads",
                  "no biases", "QK-norm", "tied to the token embedding"):  # fmt: skip
        assert words in texts, words


def test_the_grouped_query_wiring_is_repeat_kvs():
    """Each query head's line ends above the key/value head that repeat_kv hands it (output head h reads h // n_rep)."""
    fig = drawings.grouped_query_attention()
    wires = [line for line in fig.findobj(Line2D) if len(line.get_xdata()) == 2 and line.get_ydata()[0] > 2]
    assert len(wires) == 3 * 8  # 8 query heads in each of the three panels
    for panel, n_kv in enumerate((8, 2, 1)):
        ends = [line.get_xdata()[1] for line in wires[8 * panel : 8 * panel + 8]]
        distinct = sorted(set(ends))
        assert len(distinct) == n_kv
        read = [distinct.index(end) for end in ends]  # which key/value head each query head reads in the picture
        heads = torch.arange(n_kv).view(1, n_kv, 1, 1).float()
        by_repeat_kv = modern.repeat_kv(heads, 8 // n_kv).flatten().long().tolist()
        assert read == by_repeat_kv
    assert "KV cache: 2/8 of multi-head's" in _texts(fig)
