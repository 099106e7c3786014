"""Claims of lesson 05_multi_head_attention: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import FLOAT, Break, Claim, Family, literal, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

WRAPPER = "wrapper = ref.MultiHeadAttentionWrapper("
BARE = "bare = tiny.view(1, H, 2, D)"
BATCHED = "BatchedMultiHeadAttention.from_wrapper"
FUSED = "fused = ref.MultiHeadAttention.from_batched"
SDPA = "use_sdpa=True"
TORCH_MHA = "theirs = ref.to_torch_mha(ours)"
PARAMETERS = '"nn.MultiheadAttention": ref.count_parameters'
PER_LAYER = "per_layer = ref.multihead_parameter_count(768)"
MEDIANS = "median_ms.round(2)"
SPEEDUPS = 'values="speedup_vs_wrapper"'


def mha_wrapper(nb):
    text = output(nb, WRAPPER)
    require(literal(text, r"heads: (\[.*\])", "heads") == ["CausalSelfAttention(8 -> 4)"] * 2, f"heads:\n{text}")
    require("output (2, 6, 8) weights (2, 2, 6, 6) = (B, H, T, T)" in text, f"shapes:\n{text}")


def mha_bare_view(nb):
    right, bare = tensors(output(nb, BARE))[:2]
    require(right == [[0, 1], [10, 11]], f"the right split gives head 0 channels 0-1 of both tokens, got {right}")
    require(bare == [[0, 1], [2, 3]], f"the bare view gives head 0 channels 0-3 of token 0, got {bare}")


def _small(nb, marker, pattern, what):
    value = number(output(nb, marker), pattern, what)
    require(value < 1e-5, f"{what}: {value} is not float32 rounding")


def mha_versions_agree(nb):
    _small(nb, BATCHED, rf"from the wrapper: {FLOAT}", "batched vs wrapper")
    text = output(nb, FUSED)
    require("rows 0..7 of qkv.weight are W_query? True" in text, f"qkv layout:\n{text}")
    _small(nb, FUSED, rf"from the wrapper: {FLOAT}", "fused vs wrapper")
    _small(nb, SDPA, rf"from the wrapper: {FLOAT}", "SDPA vs wrapper")
    _small(nb, SDPA, rf"PyTorch's kernel: {FLOAT}", "lesson 04 vs kernel")


def mha_torch_module(nb):
    text = output(nb, TORCH_MHA)
    require("same weights in both: True" in text, f"weights not copied:\n{text}")
    _small(nb, TORCH_MHA, rf"output difference:\s+{FLOAT}", "outputs")
    _small(nb, TORCH_MHA, rf"weights difference:\s+{FLOAT}", "weights")


def mha_parameters(nb):
    table = rows(output(nb, PARAMETERS), r"^(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s*$", "parameter table", 6)
    expected = 4 * 768**2 + 4 * 768
    for heads, d_head, ours, theirs in table:
        require(
            int(heads) * int(d_head) == 768 and int(ours) == int(theirs) == expected,
            f"with {heads} heads: {ours} / {theirs} parameters, expected {expected:,} whatever the heads",
        )
    text = output(nb, PER_LAYER)
    require(f"{expected:,} parameters" in text and "equals the module's count: True" in text, f"count:\n{text}")


def mha_benchmark(nb):
    text = output(nb, MEDIANS)
    _small(nb, MEDIANS, rf"from the list of heads: {FLOAT}", "benchmark outputs")
    seq_lens = [int(t) for t in literal(text, r"'seq_lens': (\([\d, ]+\))", "settings")]
    names = ["wrapper of heads", "batched heads", "fused QKV", "fused QKV + SDPA", "nn.MultiheadAttention"]
    speedups = output(nb, SPEEDUPS)
    for table, what in ((text, "median times"), (speedups, "speed-ups")):
        require(all(name in table for name in names), f"{what}: not every version is in the table:\n{table}")
        for t in seq_lens:
            values = [float(v) for line in re.findall(rf"^{t}\s+(.+?)\s*$", table, re.M) for v in line.split()]
            require(len(values) == len(names) and all(v > 0 for v in values), f"{what} at T = {t}: {values}")
            require(what != "speed-ups" or values[0] == 1.0, f"the list of heads is the reference (1.0): {values}")


CLAIMS = [
    Claim(
        "H heads, each a CausalSelfAttention with head size D = d_out / H; weights (B, H, T, T)",
        mha_wrapper,
        [
            Break(EXACT, WRAPPER, r"(?<=', 'CausalSelfAttention\(8 -> )4", "8"),
            Break(SHOWN, WRAPPER, r"weights \(2, 2, 6, 6\)", "weights (2, 6, 6)"),
        ],
    ),
    Claim(
        "With the bare view, head 0 gets channels 0–3 of token 0 and no channel of token 1",
        mha_bare_view,
        [
            Break(TENSOR, BARE, r"\[10, 11\]", "[ 2,  3]"),
            Break(TENSOR, BARE, r"\[2, 3\]\]", "[10, 11]]"),
        ],
    ),
    Claim(
        "the batched, fused and SDPA versions compute the same function as the list of heads",
        mha_versions_agree,
        [
            Break(MARGIN, BATCHED, r"(?<=from the wrapper: )\S+", "0.01"),
            Break(SHOWN, FUSED, r"(?<=are W_query\? )True", "False"),
            Break(MARGIN, FUSED, r"(?<=from the wrapper: )\S+", "0.01"),
            Break(MARGIN, SDPA, r"(?<=PyTorch's kernel: )\S+", "1.0e-03"),
        ],
    ),
    Claim(
        "ref.to_torch_mha copies our weights into a PyTorch module; the two then agree, outputs and weights",
        mha_torch_module,
        [
            Break(SHOWN, TORCH_MHA, r"(?<=same weights in both: )True", "False"),
            Break(MARGIN, TORCH_MHA, r"(output difference:\s+)\S+", r"\g<1>0.5"),
            Break(MARGIN, TORCH_MHA, r"(weights difference:\s+)\S+", r"\g<1>0.5"),
        ],
    ),
    Claim(
        "4·d_model² + 4·d_model parameters, whatever the number of heads",
        mha_parameters,
        [
            Break(TABLE, PARAMETERS, r"^(8\s+96\s+)\d+", r"\g<1>2359296"),
            Break(TABLE, PARAMETERS, r"^16\s.*\n", ""),
            Break(EXACT, PER_LAYER, r"[\d,]+(?= parameters;)", "2,359,296"),
            Break(SHOWN, PER_LAYER, r"(?<=equals the module's count: )True", "False"),
        ],
    ),
    Claim(
        "All versions compute the same function; a table of medians and speed-ups for every version and length "
        "(timings themselves are not asserted)",
        mha_benchmark,
        [
            Break(MARGIN, MEDIANS, r"(?<=from the list of heads: )\S+", "1.8e-03"),
            Break(SHOWN, MEDIANS, r"nn\.MultiheadAttention", "torch MHA"),
            Break(TABLE, SPEEDUPS, r"^512\s.*\n", ""),
            Break(TABLE, SPEEDUPS, r"^(64\s+)1\.0\b", r"\g<1>1.1"),
        ],
    ),
]
