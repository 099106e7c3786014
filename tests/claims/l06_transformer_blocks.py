"""Claims of lesson 06_transformer_blocks: what its text says its code cells show."""

from __future__ import annotations

import math

from tests.claims.common import FLOAT, Break, Claim, Family, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

BY_HAND = "normalised = (token - mean) / torch.sqrt(variance + 1e-5)"
SLIPS = "difference = (ref.layer_norm(x, weight, bias)"
BATCH = "ln_change = "
GELU = "gap = (F.gelu(grid)"
POSITION_WISE = "one_at_a_time = torch.stack"
RESIDUAL = "residual_rows = deep_stacks.residual_gradient_norms(depths)"
GPT2_BLOCK = "gpt2_block = ref.TransformerBlock("
GPT2_SHARES = "gpt2_small = GPT2(GPT2Config.small())"
GLOROT = "glorot = nn.init.xavier_uniform_("
WARMUP = "runs[label] = deep_stacks.train_stack("
ORDERS = "stats = {"
DEPTHS = "stack_depths = "
CROSS = "cross = multihead_cross.MultiHeadCrossAttention("
PYTORCH = "blocked = torch_layers.blocked_mask"
CONVENTIONS = "allowed = causal_mask(4)"
UNCONVERTED = "mha = nn.MultiheadAttention(8, 2, batch_first=True)"


def layer_norm_by_hand(nb):
    text = output(nb, BY_HAND)
    mean = number(text, rf"its mean and standard deviation: {FLOAT}", "mean")
    std = number(text, rf"its mean and standard deviation: \S+ {FLOAT}", "std")
    require(abs(mean) < 1e-5 and abs(std - 1) < 1e-3, f"normalised mean {mean}, std {std}: not 0 and 1")
    require("nn.LayerNorm gives the same: True" in text, f"nn.LayerNorm disagrees:\n{text}")


def layer_norm_slips(nb):
    text = output(nb, SLIPS)
    same = number(text, rf"F\.layer_norm, largest difference: {FLOAT}", "reference vs F.layer_norm")
    require(same < 1e-5, f"ref.layer_norm differs from F.layer_norm by {same}: not float precision")
    for slip in ("unbiased variance instead", "eps outside the square root"):
        value = number(text, rf"{slip}:\s+largest difference {FLOAT}", slip)
        require(value > 1e-2, f"{slip}: a difference of {value} is not 'plain to see'")


def batch_dependence(nb):
    text = output(nb, BATCH)
    ln = number(text, rf"LayerNorm: same sentence, alone vs in a batch, largest difference {FLOAT}", "LayerNorm")
    bn = number(text, rf"BatchNorm: same sentence, alone vs in a batch, largest difference {FLOAT}", "BatchNorm")
    require(ln < 1e-6, f"LayerNorm's output changed with the batch by {ln}")
    require(1.5 <= bn < 1.7, f"BatchNorm's output changed with the batch by {bn}, not the 1.6 the text quotes")


def gelu_gap(nb):
    text = output(nb, GELU)
    gap = number(text, rf"tanh approximation: {FLOAT}", "gap")
    require(1e-5 < gap < 1e-3, f"the two GELUs differ by {gap}: the text says less than 1e-3, but not equal")
    lowest = number(text, rf"GELU's lowest value: {FLOAT}", "lowest value")
    where = number(text, rf"GELU's lowest value: \S+ at z = {FLOAT}", "where")
    require(abs(lowest + 0.17) < 0.005 and abs(where + 0.75) < 0.05, f"GELU's minimum {lowest} at {where}")


def position_wise(nb):
    text = output(nb, POSITION_WISE)
    require("whole sequence = each position alone: True" in text, f"not position-wise:\n{text}")


def _residual_rows(nb):
    pattern = (
        rf"^depth\s+(\d+)\s+(plain|residual)\s+gradient at the input\s+{FLOAT}\s+first layer\s+{FLOAT}"
        rf"\s+last layer\s+{FLOAT}\s*$"
    )
    found = rows(output(nb, RESIDUAL), pattern, "residual table", 6)
    table = {(int(d), kind): (float(g), float(first), float(last)) for d, kind, g, first, last in found}
    require(len(table) == 6 and {d for d, _ in table} == {2, 8, 32}, f"depths 2, 8, 32 both ways: {sorted(table)}")
    return table


def vanishing_without_residuals(nb):
    table = _residual_rows(nb)
    g2, g8, g32 = (table[d, "plain"][0] for d in (2, 8, 32))
    for (shallow, deep), (a, b) in {(2, 8): (g2, g8), (8, 32): (g8, g32)}.items():
        factor = (a / b) ** (1 / (deep - shallow)) if b > 0 else math.inf
        require(4 < factor < 8, f"plain stack: the gradient shrinks by {factor:.2f} per layer from {shallow} to {deep}")
    require(1e-26 < g32 < 1e-22, f"plain, 32 layers: gradient at the input {g32}, not around 1e-24")
    require(table[32, "plain"][1] < 1e-15, f"plain, 32 layers: the first layer still gets {table[32, 'plain'][1]}")


def residuals_keep_the_gradient(nb):
    table = _residual_rows(nb)
    for depth in (2, 8, 32):
        gradient, first, last = table[depth, "residual"]
        require(3 < gradient < 20, f"residual, {depth} layers: gradient at the input {gradient}, not around 5 to 15")
        require(0.5 < first / last < 2, f"residual, {depth} layers: first layer {first} vs last {last}")


def gpt2_block(nb):
    text = output(nb, GPT2_BLOCK)
    require("earlier positions unchanged: True" in text, f"the block is not causal:\n{text}")
    total = number(text, rf"GPT-2 small block: {FLOAT} parameters", "parameters")
    require(total == 12 * 768**2 + 13 * 768, f"a GPT-2 small block has 7,087,872 parameters, not {total:,.0f}")
    share = number(text, r"\((\d+)%\)", "feed-forward share")
    require(64 <= share <= 69, f"the feed-forward holds {share}% of the block, not about two thirds")


def gpt2_shares(nb):
    text = output(nb, GPT2_SHARES)
    total = number(text, rf"GPT-2 small: {FLOAT} parameters", "total")
    require(total == 124_439_808, f"GPT-2 small has 124,439,808 parameters, not {total:,.0f}")
    share = {
        part: number(text, rf"^\s+{part}[^\n]*?\s{FLOAT}\s+{FLOAT}%\s*$", part) / total
        for part in ("feed-forward", "attention", "embeddings")
    }
    require(0.45 <= share["feed-forward"] <= 0.465, f"the MLPs hold {share['feed-forward']:.1%}, not about 46 %")
    require(0.3 <= share["embeddings"] < 1 / 3, f"the embeddings hold {share['embeddings']:.1%}, not almost a third")
    embeddings = number(text, rf"^\s+embeddings[^\n]*?\s{FLOAT}\s+{FLOAT}%\s*$", "embeddings")
    require(
        embeddings == 50257 * 768 + 1024 * 768, f"the embeddings hold {embeddings:,.0f}, not 50,257 x 768 + positions"
    )
    require(share["feed-forward"] < 2 / 3 - 0.1, "the MLPs' share of the model is not well below two thirds")
    require("the parts add up to the total: True" in text, f"the parts do not add up:\n{text}")
    pattern = rf"^GPT-2 (medium|large|xl)\s*:\s+{FLOAT} parameters, feed-forward {FLOAT}%\s*$"
    larger = {size: float(value) / 100 for size, _, value in rows(text, pattern, "larger sizes", 3)}
    require(list(larger) == ["medium", "large", "xl"], f"the three larger sizes in order: {list(larger)}")
    shares = [share["feed-forward"], *larger.values()]
    require(all(b > a for a, b in zip(shares, shares[1:], strict=False)), f"the MLP share does not rise: {shares}")
    require(abs(larger["medium"] - 0.57) < 0.006 and abs(larger["xl"] - 0.63) < 0.006, f"shares {larger}")
    require(larger["xl"] < 2 / 3, f"GPT-2 XL's MLP share {larger['xl']} is not below two thirds")


def glorot_spread(nb):
    pattern = (
        rf"^\s*(\d+) -> (\d+)\s+default std {FLOAT} \(1/sqrt\(3 n_in\) = {FLOAT}\)\s+"
        rf"Glorot std {FLOAT} \(sqrt\(2 / \(n_in \+ n_out\)\) = {FLOAT}\)\s*$"
    )
    found = {
        (int(a), int(b)): [float(v) for v in values] for a, b, *values in rows(output(nb, GLOROT), pattern, "std", 2)
    }
    require(set(found) == {(64, 256), (256, 64)}, f"both layers: {sorted(found)}")
    for (n_in, n_out), (default, default_formula, glorot, glorot_formula) in found.items():
        require(abs(default_formula - 1 / math.sqrt(3 * n_in)) < 1e-4, f"{n_in}->{n_out}: formula {default_formula}")
        require(abs(glorot_formula - math.sqrt(2 / (n_in + n_out))) < 1e-4, f"{n_in}->{n_out}: {glorot_formula}")
        require(abs(default / default_formula - 1) < 0.03, f"{n_in}->{n_out}: default std {default} vs formula")
        require(abs(glorot / glorot_formula - 1) < 0.03, f"{n_in}->{n_out}: Glorot std {glorot} vs formula")
        require(round(glorot, 3) in (0.078, 0.079, 0.080), f"{n_in}->{n_out}: Glorot std {glorot} is not about 0.079")
    wide, narrow = found[64, 256][0], found[256, 64][0]
    require(abs(wide - 0.072) < 0.002 and abs(narrow / wide - 0.5) < 0.03, f"default std {wide}, {narrow}")


def _warmup_runs(nb):
    text = output(nb, WARMUP)
    guess = number(text, rf"ln 16 = {FLOAT}", "ln 16")
    require(abs(guess - math.log(16)) < 1e-3, f"ln 16 printed as {guess}")
    pattern = rf"^((?:post|pre)-LN, (?:no )?warm-up)\s+final loss {FLOAT}\s+lowest after step \d+: {FLOAT}\s*$"
    found = {label: (float(final), float(lowest)) for label, final, lowest in rows(text, pattern, "runs", 4)}
    labels = {f"{o}, {w}" for o in ("post-LN", "pre-LN") for w in ("warm-up", "no warm-up")}
    require(set(found) == labels, f"the four runs: {sorted(found)}")
    return found


def post_ln_needs_warmup(nb):
    runs = _warmup_runs(nb)
    final, lowest = runs["post-LN, no warm-up"]
    require(abs(final - math.log(16)) < 0.1, f"post-LN without warm-up ends at {final}, not at guessing (2.77)")
    require(
        lowest > math.log(16) - 0.25, f"post-LN without warm-up got down to {lowest}: it did get away from guessing"
    )
    final, _ = runs["post-LN, warm-up"]
    require(final < 1.0, f"post-LN with warm-up ends at {final}: it did not learn to copy")


def pre_ln_learns_either_way(nb):
    runs = _warmup_runs(nb)
    for label in ("pre-LN, no warm-up", "pre-LN, warm-up"):
        final, _ = runs[label]
        require(final < 0.1, f"{label} ends at {final}: it did not learn to copy")


def _orders(nb):
    text = output(nb, ORDERS)
    pattern = (
        rf"^(post-LN|pre-LN)\s+stream std: block 1 {FLOAT}, block (\d+) {FLOAT}\s+"
        rf"gradient: block 1 {FLOAT}, block \d+ {FLOAT}\s*$"
    )
    found = {kind: [float(v) for v in values] for kind, *values in rows(text, pattern, "post/pre table", 2)}
    require(set(found) == {"post-LN", "pre-LN"}, f"both orders: {sorted(found)}")
    return text, found


def stream_size(nb):
    _, found = _orders(nb)
    std_first, _, std_last, _, _ = found["post-LN"]
    require(abs(std_first - 1) < 0.01 and abs(std_last - 1) < 0.01, f"post-LN stream std {std_first}, {std_last}")
    std_first, _, std_last, _, _ = found["pre-LN"]
    require(std_last > 1.5 * std_first, f"pre-LN stream std {std_first} -> {std_last}: it does not keep growing")


def gradients_per_block(nb):
    text, found = _orders(nb)
    *_, first, last = found["pre-LN"]
    require(last < first / 2, f"pre-LN gradient {first} -> {last}: it does not get smaller towards the top")
    larger = number(text, r"the post-LN gradient is the larger one at (\d+) of", "blocks")
    n_layers = number(text, r"the post-LN gradient is the larger one at \d+ of (\d+) blocks", "blocks")
    require(larger == n_layers, f"post-LN's gradient is the larger one at only {larger:.0f} of {n_layers:.0f} blocks")


def top_block_by_depth(nb):
    pattern = rf"^\s*(\d+) blocks: gradient of the top block\s+post-LN {FLOAT}\s+pre-LN {FLOAT}\s+ratio {FLOAT}\s*$"
    found = [(int(d), float(a), float(b), float(r)) for d, a, b, r in rows(output(nb, DEPTHS), pattern, "depths", 3)]
    require([d for d, *_ in found] == [6, 12, 24], f"depths 6, 12, 24: {[d for d, *_ in found]}")
    post, pre, ratio = ([row[i] for row in found] for i in (1, 2, 3))
    require(max(post) < 1.5 * min(post), f"post-LN's top gradient does not stay about the same: {post}")
    require(all(b < a for a, b in zip(pre, pre[1:], strict=False)), f"pre-LN's top gradient does not shrink: {pre}")
    require(1.5 < pre[0] / pre[-1] < 2.5, f"from 6 to 24 blocks pre-LN's top gradient does not about halve: {pre}")
    scaled = [g * math.sqrt(d) for (d, *_), g in zip(found, pre, strict=True)]
    require(max(scaled) < 1.3 * min(scaled), f"pre-LN's top gradient is not roughly 1/sqrt(depth): {scaled}")
    require(all(b > a > 1 for a, b in zip(ratio, ratio[1:], strict=False)), f"the gap does not grow: {ratio}")


def cross_attention(nb):
    text = output(nb, CROSS)
    require("output (2, 4, 16)   weights (2, 4, 4, 6) = (B, H, T, S)" in text, f"shapes:\n{text}")
    padded = number(text, rf"attention on the padded source positions: {FLOAT}", "padded")
    require(padded == 0, f"padded source positions got {padded} of the attention")
    require("each query's weights sum to 1: True" in text, f"weights do not sum to 1:\n{text}")
    require("cross-attention (2, 4, 4, 6)" in text, f"decoder layer's cross weights:\n{text}")


def same_as_pytorch(nb):
    text = output(nb, PYTORCH)
    found = rows(text, rf"vs nn\.Transformer(\w+)\s+largest difference {FLOAT}", "differences", 6)
    kinds = sorted(kind for kind, _ in found)
    require(kinds == sorted(["EncoderLayer"] * 2 + ["DecoderLayer"] * 2 + ["Encoder", "Decoder"]), f"{kinds}")
    for kind, value in found:
        require(float(value) < 1e-5, f"{kind}: {value} is more than float32 rounding")


def conventions(nb):
    text = output(nb, CONVENTIONS)
    ours, theirs, additive = tensors(text)[:3]
    lower = [[int(k <= q) for k in range(4)] for q in range(4)]
    require(ours == lower, f"our causal mask: {ours}")
    require(theirs == [[1 - v for v in row] for row in lower], f"nn.Transformer's: {theirs}")
    pairs = [(a, b) for row_a, row_b in zip(additive, lower, strict=True) for a, b in zip(row_a, row_b, strict=True)]
    require(all((a == 0) == bool(b) for a, b in pairs), f"float mask: 0 exactly where allowed, got {additive}")
    require(all(a < -1e300 for a, b in pairs if not b), f"blocked float entries must be -inf: {additive}")
    require("SDPA with the bool mask = SDPA with the float mask: True" in text, f"SDPA disagrees:\n{text}")


def unconverted_mask(nb):
    text = output(nb, UNCONVERTED)
    right = number(text, rf"converted \(~keep\)\s+share of the attention on padding: {FLOAT}", "converted")
    wrong = number(text, rf"passed as it is\s+share of the attention on padding: {FLOAT}", "as it is")
    require(right == 0 and wrong > 0.99, f"padding share: converted {right}, as it is {wrong}")


CLAIMS = [
    Claim(
        "the normalised vector has mean 0 and standard deviation 1; nn.LayerNorm gives the same",
        layer_norm_by_hand,
        [
            Break(MARGIN, BY_HAND, r"(?<=deviation: 0\.0 )1\.0", "0.866"),
            Break(SHOWN, BY_HAND, r"(?<=gives the same: )True", "False"),
        ],
    ),
    Claim(
        "ref.layer_norm matches PyTorch's to float precision; the unbiased variance and ε outside the root are plain "
        "to see on a short vector with a tiny variance",
        layer_norm_slips,
        [
            Break(MARGIN, SLIPS, r"(?<=largest difference: )\S+", "2.4e-02"),
            Break(MARGIN, SLIPS, r"(?<=instead:  largest difference )\S+", "0.003"),
            Break(MARGIN, SLIPS, r"(?<=root: largest difference )\S+", "0.000"),
        ],
    ),
    Claim(
        "a sentence's LayerNorm output does not depend on the rest of the batch; its BatchNorm output changes by up "
        "to 1.6",
        batch_dependence,
        [
            Break(MARGIN, BATCH, r"(?<=LayerNorm: same sentence, alone vs in a batch, largest difference )\S+", "0.42"),
            Break(MARGIN, BATCH, r"(?<=BatchNorm: same sentence, alone vs in a batch, largest difference )\S+", "0"),
            Break(MARGIN, BATCH, r"(?<=BatchNorm: same sentence, alone vs in a batch, largest difference )\S+", "2.4"),
        ],
    ),
    Claim(
        "the two GELUs differ by less than 1e-3 everywhere, but not equal; GELU's lowest value is about -0.17 near "
        "z = -0.75",
        gelu_gap,
        [
            Break(MARGIN, GELU, r"(?<=tanh approximation: )\S+", "2.3e-03"),
            Break(MARGIN, GELU, r"(?<=tanh approximation: )\S+", "0.0e+00"),
            Break(MARGIN, GELU, r"(?<=lowest value: )\S+", "-0.250"),
        ],
    ),
    Claim(
        "running the whole sequence at once gives what running every position alone gives",
        position_wise,
        [Break(SHOWN, POSITION_WISE, r"(?<=each position alone: )True", "False")],
    ),
    Claim(
        "without residuals the gradient falls by a roughly constant factor per layer (about 6), to around 1e-24 at "
        "32 layers; the first layers get almost nothing",
        vanishing_without_residuals,
        [
            Break(MARGIN, RESIDUAL, r"(?<=depth 32  plain     gradient at the input )\s*\S+", " 1.35e-12"),
            Break(MARGIN, RESIDUAL, r"(?<=depth  8  plain     gradient at the input )\s*\S+", " 1.90e-02"),
            Break(TABLE, RESIDUAL, r"^depth 32  plain .*\n", ""),
        ],
    ),
    Claim(
        "with residuals the gradient at the input stays around 5 to 15 at every depth, and the first layer gets "
        "about as much as the last",
        residuals_keep_the_gradient,
        [
            Break(MARGIN, RESIDUAL, r"(?<=depth 32  residual  gradient at the input )\s*\S+", " 1.24e-03"),
            Break(
                MARGIN,
                RESIDUAL,
                r"(?<=depth 32  residual  gradient at the input )(.*first layer )\s*\S+",
                r"\g<1> 3.52e-03",
            ),
        ],
    ),
    Claim(
        "a causal block leaves earlier positions alone; a GPT-2 small block has 7,087,872 parameters, about two "
        "thirds of them in the feed-forward",
        gpt2_block,
        [
            Break(SHOWN, GPT2_BLOCK, r"(?<=earlier positions unchanged: )True", "False"),
            Break(EXACT, GPT2_BLOCK, r"7,087,872", "7,079,424"),
            Break(MARGIN, GPT2_BLOCK, r"\(67%\)", "(50%)"),
        ],
    ),
    Claim(
        "GPT-2 small has 124,439,808 parameters; its MLPs hold about 46 % (less than two thirds), its embeddings "
        "(50,257 x 768 tokens and the positions) almost a third; the MLP share rises with size, 57 % of medium, 63 % "
        "of XL, still below two thirds",
        gpt2_shares,
        [
            Break(MARGIN, GPT2_SHARES, r"(?<=feed-forward \(12 mlp\))(\s+)56,669,184", r"\g<1>86,669,184"),
            Break(MARGIN, GPT2_SHARES, r"(?<=embeddings \(tokens, positions\))(\s+)39,383,808", r"\g<1>19,383,808"),
            Break(EXACT, GPT2_SHARES, r"124,439,808", "163,037,184"),
            Break(SHOWN, GPT2_SHARES, r"(?<=add up to the total: )True", "False"),
            Break(ORDER, GPT2_SHARES, r"(?<=GPT-2 large : )(.*feed-forward )\S+%", r"\g<1>55.0%"),
            Break(MARGIN, GPT2_SHARES, r"(?<=GPT-2 xl    : )(.*feed-forward )\S+%", r"\g<1>68.0%"),
        ],
    ),
    Claim(
        "Glorot gives the 64->256 and 256->64 layers the same std, 0.079; PyTorch's default gives the first 0.072 "
        "and the second half of that, 0.036 (each measured std close to its formula)",
        glorot_spread,
        [
            Break(MARGIN, GLOROT, r"(?<=256 -> 64   default std )\S+", "0.0722"),
            Break(
                MARGIN,
                GLOROT,
                r"(?<= 64 -> 256  default std 0\.0722 \(1/sqrt\(3 n_in\) = 0\.0722\)   Glorot std )\S+",
                "0.0500",
            ),
            Break(TABLE, GLOROT, r"^256 -> 64.*\n", ""),
        ],
    ),
    Claim(
        "post-LN without warm-up stays at the loss of guessing, ln 16, for all 200 steps; with the 50-step warm-up "
        "the same stack learns to copy",
        post_ln_needs_warmup,
        [
            Break(MARGIN, WARMUP, r"(?<=post-LN, no warm-up final loss )\S+", "0.412"),
            Break(
                MARGIN, WARMUP, r"(?<=post-LN, no warm-up final loss )(\S+   lowest after step \d+: )\S+", r"\g<1>1.204"
            ),
            Break(MARGIN, WARMUP, r"(?<=post-LN, warm-up    final loss )\S+", "2.779"),
            Break(TABLE, WARMUP, r"^post-LN, warm-up .*\n", ""),
        ],
    ),
    Claim(
        "the pre-LN stack learns to copy with the warm-up and without it",
        pre_ln_learns_either_way,
        [
            Break(MARGIN, WARMUP, r"(?<=pre-LN, no warm-up  final loss )\S+", "2.780"),
            Break(MARGIN, WARMUP, r"(?<=pre-LN, warm-up     final loss )\S+", "0.350"),
        ],
    ),
    Claim(
        "post-LN's stream has a standard deviation of 1 after every block; pre-LN's keeps growing",
        stream_size,
        [
            Break(MARGIN, ORDERS, r"(?<=post-LN  stream std: block 1 1\.00, block )(\d+) 1\.00", r"\g<1> 1.40"),
            Break(
                ORDER, ORDERS, r"(?<=pre-LN   stream std: block 1 )(\S+), block (\d+) \S+", r"\g<1>, block \g<2> 1.20"
            ),
        ],
    ),
    Claim(
        "in the pre-LN stack the gradient gets smaller towards the top; post-LN's is larger at every block",
        gradients_per_block,
        [
            Break(ORDER, ORDERS, r"(?<=pre-LN   stream std: )(.*gradient: block 1 \S+ block \d+ )\S+", r"\g<1>0.900"),
            Break(EXACT, ORDERS, r"(?<=the larger one at )\d+", "20"),
        ],
    ),
    Claim(
        "post-LN's top gradient stays about the same however deep; pre-LN's shrinks roughly like 1/sqrt(depth), "
        "about halving from 6 to 24 blocks; the gap grows with depth",
        top_block_by_depth,
        [
            Break(ORDER, DEPTHS, r"(?<=24 blocks: gradient of the top block  post-LN \S{5}  pre-LN )\S+", "0.400"),
            Break(MARGIN, DEPTHS, r"(?<=24 blocks: gradient of the top block  post-LN )\S+", "1.500"),
            Break(TABLE, DEPTHS, r"^12 blocks.*\n", ""),
        ],
    ),
    Claim(
        "cross-attention weights are (B, H, T, S), padded source positions get no attention, rows sum to 1",
        cross_attention,
        [
            Break(MARGIN, CROSS, r"(?<=padded source positions: )\S+", "0.25"),
            Break(SHOWN, CROSS, r"(?<=weights sum to 1: )True", "False"),
            Break(SHOWN, CROSS, r"weights \(2, 4, 4, 6\) =", "weights (2, 4, 6) ="),
        ],
    ),
    Claim(
        "with copied weights, our layers and stacks compute what PyTorch's compute, to float32 rounding",
        same_as_pytorch,
        [
            Break(MARGIN, PYTORCH, r"(?<=DecoderLayer, post-LN)(.*largest difference )\S+", r"\g<1>3.1e-02"),
            Break(TABLE, PYTORCH, r"^Decoder, 3 layers.*\n", ""),
        ],
    ),
    Claim(
        "the same causal mask in the three conventions; SDPA gives the same attention with the bool and float forms",
        conventions,
        [
            Break(TENSOR, CONVENTIONS, r"\[1, 1, 0, 0\]", "[1, 0, 0, 0]"),
            Break(TENSOR, CONVENTIONS, r"\[0\., 0\., -inf, -inf\]", "[0., 0., 0., -inf]"),
            Break(SHOWN, CONVENTIONS, r"(?<=with the float mask: )True", "False"),
        ],
    ),
    Claim(
        "an unconverted padding mask silently does the opposite: all the attention goes to the padding",
        unconverted_mask,
        [
            Break(MARGIN, UNCONVERTED, r"(?<=passed as it is    share of the attention on padding: )\S+", "0.40"),
            Break(MARGIN, UNCONVERTED, r"(?<=converted \(~keep\)  share of the attention on padding: )\S+", "0.30"),
        ],
    ),
]
