"""Claims of lesson 05_multi_head_attention: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import FLOAT, Break, Claim, Family, close, literal, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

WRAPPER = "wrapper = ref.MultiHeadAttentionWrapper("
BARE = "bare = tiny.view(1, H, 2, D)"
BATCHED = "BatchedMultiHeadAttention.from_wrapper"
FUSED = "fused = ref.MultiHeadAttention.from_batched"
SDPA = "use_sdpa=True"
KERNELS = "with sdpa_kernel(SDPBackend.FLASH_ATTENTION)"
TORCH_MHA = "theirs = ref.to_torch_mha(ours)"
PARAMETERS = '"nn.MultiheadAttention": ref.count_parameters'
PER_LAYER = "per_layer = ref.multihead_parameter_count(768)"
MEDIANS = "median_ms.round(2)"
SPEEDUPS = 'values="speedup_vs_wrapper"'
UNTRAINED = "_, untrained = two_heads(probe"
TRAINING = "losses = toys.train_toy(two_heads"
TRAINED = "_, learned = two_heads(probe"
ONE_HEAD = "one_head = toys.build_toy("


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


def mha_fused_kernel_and_dropout(nb):
    text = output(nb, KERNELS)
    require("causal: the fused kernel ran" in text, f"the causal call should run in the fused kernel:\n{text}")
    refused = re.search(r"^causal, dropout 0\.1: no fused kernel accepts it \((.*)\)$", text, re.M)
    require(refused, f"the call with dropout should find no fused kernel (so it runs the math path):\n{text}")
    require("dropout" in refused.group(1), f"PyTorch's reason should name the dropout: {refused.group(1)!r}")


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


def _head_shares(text: str, when: str) -> dict[int, tuple[float, float]]:
    pattern = rf"^{when} head (\d): weight on the left neighbour {FLOAT}, on the right neighbour {FLOAT}$"
    return {int(h): (float(a), float(b)) for h, a, b in rows(text, pattern, f"{when} heads", 2)}


def mha_untrained_heads(nb):
    shares = _head_shares(output(nb, UNTRAINED), "untrained")
    require(
        all(0.06 < share < 0.2 for pair in shares.values() for share in pair),
        f"before training every head should put about 1/8 on each neighbour: {shares}",
    )


def mha_training(nb):
    text = output(nb, TRAINING)
    first = number(text, rf"first step: {FLOAT}", "first loss")
    last = number(text, rf"last step: {FLOAT}", "last loss")
    require(close(first, 4.159, 0.2), f"the first loss should be about ln 64 = 4.159, got {first}")
    require(last < first / 100, f"the loss should fall by orders of magnitude: {first} -> {last}")
    require(number(text, rf"new sequences: {FLOAT}", "accuracy") >= 0.99, f"accuracy:\n{text}")


def mha_trained_heads(nb):
    shares = _head_shares(output(nb, TRAINED), "trained")
    (left0, right0), (left1, right1) = shares[0], shares[1]
    require(left0 > 0.95 and right0 < 0.05, f"head 0 should look left: {shares[0]}")
    require(right1 > 0.95 and left1 < 0.05, f"head 1 should look right: {shares[1]}")


def mha_one_head(nb):
    text = output(nb, ONE_HEAD)
    require(number(text, rf"one head: accuracy {FLOAT}", "accuracy") >= 0.99, f"one head should manage:\n{text}")
    left = number(text, rf"left neighbour {FLOAT}", "left")
    right = number(text, rf"right neighbour {FLOAT}", "right")
    low, high = sorted((left, right))
    require(
        0.2 < low < 0.45 and 0.55 < high < 0.8,
        f"one head should split unevenly, about a third and two thirds: {left}, {right}",
    )


CLAIMS = [
    Claim(
        "Allowed only the fused kernel, the causal call runs ... No: the fused kernel does not implement dropout, so "
        "with dropout_p > 0 it runs the math path",
        mha_fused_kernel_and_dropout,
        [
            Break(SHOWN, KERNELS, r"^causal: the fused kernel ran", "causal: no fused kernel accepts it (none)"),
            Break(SHOWN, KERNELS, r"(?<=dropout 0\.1: )no fused kernel accepts it \(.*\)", "the fused kernel ran"),
            Break(SHOWN, KERNELS, r"non-zero dropout", "this input"),
        ],
    ),
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
    Claim(
        "before training, each head puts about 1/8 of its weight on each neighbour: no head has a job yet",
        mha_untrained_heads,
        [Break(MARGIN, UNTRAINED, r"(?<=untrained head 1: weight on the left neighbour )\S+(?=,)", "0.700")],
    ),
    Claim(
        "the first loss is about ln 64; it falls by orders of magnitude; the model names the neighbours of new "
        "sequences",
        mha_training,
        [
            Break(MARGIN, TRAINING, r"(?<=loss of the first step: )\S+", "2.500"),
            Break(MARGIN, TRAINING, r"(?<=loss of the last step: )[\d.]+", "0.9000"),
            Break(MARGIN, TRAINING, r"(?<=new sequences: )\S+", "0.700"),
        ],
    ),
    Claim(
        "Head 0 looks left, head 1 looks right",
        mha_trained_heads,
        [
            Break(ORDER, TRAINED, r"(?<=trained head 0: weight on the left neighbour )\S+(?=,)", "0.300"),
            Break(ORDER, TRAINED, r"(?<=trained head 1: weight on the left neighbour )\S+(?=,)", "0.400"),
        ],
    ),
    Claim(
        "one head manages too, splitting its attention roughly one third to one side and two thirds to the other",
        mha_one_head,
        [
            Break(MARGIN, ONE_HEAD, r"(?<=one head: accuracy )\S+(?=;)", "0.600"),
            Break(MARGIN, ONE_HEAD, r"(?<=on the right neighbour )\S+", "0.990"),
        ],
    ),
]
