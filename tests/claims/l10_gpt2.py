"""Claims of lesson 10_gpt2: what its text says its code cells show.

The cells that use OpenAI's weights print either their results or a line saying why they were skipped; offline
(as here and in CI) the claims check the skip, online they check the printed numbers.
"""

from __future__ import annotations

import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, literal, number, output, require, rows

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

BUILD = "gpt2 = GPT2(config if not SMALL"
INIT = 'weights = [("tok_emb", gpt2.tok_emb.weight)'
STREAM = "def stream_std(model, idx)"
GROUPS = "groups = {}"
COUNT = "count = ref.gpt2_parameter_count(12, 12, 768, 50257, 1024)"
FLOPS = "forward = gpt2_flops_per_token(config, T, training=False)"
NAMES = "hf = hf_config_from(config)"
WEIGHTS = "ours_shapes = dict(meta_model.named_parameters"
TRANSPOSE = "stored = torch.randn(64, 64)"
YOURS = 'yours = your_code("05_multi_head_attention"'
LOGITS = "hf_random = GPT2LMHeadModel(HFConfig(n_layer=2"
ONLINE = 'pretrained, why = pretrained_if_available("gpt2")'
COSINE = "max_lr, min_lr, warmup, max_steps = 6e-4, 6e-5, 715, 19073"
SMALL_MODEL = "small_config = GPT2Config.tiny("
TRAIN = "train_steps, warmup_steps, peak ="
EXPORT = "small_state = to_hf_state_dict(small)"
PICTURES = "table = openai_gpt2.pos_emb.weight"
HEADS = "xs, _ = char_lm.get_batch(val_data, 32"
NUCLEUS = "nucleus = ((top.cumsum(-1) - top) < 0.9)"
SAMPLES = "strategies = {"
WORDS = "words_in_training = set("
GPT2_SAMPLES = "gpt2_prompt = torch.tensor"
STEPWISE = "k_cache, v_cache, rows = torch.empty"
KV = 'mine_cached = your_answers("10_gpt2", forward_with_cache'

SMALL_COUNT = 124_439_808
STEPS = 2500  # the small model's training steps, as the text says


def _int(text: str, pattern: str, what: str) -> int:
    return int(number(text, pattern, what))


def cg_build(nb):
    text = output(nb, BUILD)
    require(_int(text, rf"^{FLOAT} parameters$", "parameters") == SMALL_COUNT, "124,439,808 parameters")
    require(re.search(r"^head tied to the token embedding: True$", text, re.M), "the head is tied")


def cg_init(nb):
    text = output(nb, INIT)
    stds = {name: float(v) for name, v in re.findall(rf"^(\S+)\s+std {FLOAT}$", text, re.M)}
    names = {"tok_emb", "pos_emb", "attn.qkv", "attn.out_proj", "mlp.fc1", "mlp.fc2"}
    require(set(stds) == names, f"six weights: {stds}")
    scaled = 0.02 / math.sqrt(24)
    require(all(abs(stds[n] - scaled) < 0.05 * scaled for n in ("attn.out_proj", "mlp.fc2")), f"scaled: {stds}")
    unscaled = ("tok_emb", "pos_emb", "attn.qkv", "mlp.fc1")
    require(all(abs(stds[n] - 0.02) < 0.05 * 0.02 for n in unscaled), f"0.02, both tables too: {stds}")
    require(re.search(r"^all 48 linear biases are 0: True$", text, re.M), "every bias at 0 (4 linears x 12 blocks)")
    require(re.search(r"^all 25 LayerNorms have gain 1 and bias 0: True$", text, re.M), "LayerNorms at (1, 0)")


def cg_stream(nb):
    text = output(nb, STREAM)
    scaled = literal(text, r"^GPT-2's initialisation: (\[.*\])$", "scaled stream")
    unscaled = literal(text, r"^all projections at 0\.02: (\[.*\])$", "unscaled stream")
    require(len(scaled) == len(unscaled) == 13, f"13 values each: {scaled}, {unscaled}")
    require(all(s < u for s, u in zip(scaled[1:], unscaled[1:], strict=True)), "the scaled stream grows more slowly")
    require(unscaled[-1] > 3 * scaled[-1], f"ends several times smaller: {scaled[-1]} vs {unscaled[-1]}")


def cg_groups(nb):
    text = output(nb, GROUPS)
    tok = _int(text, rf"^tok_emb\s+{FLOAT}", "tok_emb")
    pos = _int(text, rf"^pos_emb\s+{FLOAT}", "pos_emb")
    total = _int(text, rf"^total\s+{FLOAT}$", "total")
    block = _int(text, rf"^one block: {FLOAT} =", "one block")
    require(total == SMALL_COUNT and 0.30 < (tok + pos) / total < 0.34, f"embeddings almost a third: {tok + pos}")
    require(round(tok / 1e6, 1) == 38.6 and round(pos / 1e6, 1) == 0.8, f"38.6 M and 0.8 M: {tok}, {pos}")
    require(round(block / 1e6, 1) == 7.1 and block == 12 * 768**2 + 13 * 768, f"7.1 M = 12C² + 13C: {block}")
    share = number(text, r"^tok_emb\s+[\d,]+\s+([\d.]+)%$", "tok_emb share") / 100
    require(abs(share - tok / total) < 0.001, f"the printed share is the count's: {share}")


def cg_count(nb):
    text = output(nb, COUNT)
    counts = [_int(text, rf"^{label}:\s+{FLOAT}$", label) for label in ("formula", r"our GPT2\.num_parameters\(\)")]
    counts.append(_int(text, rf"^Hugging Face GPT2LMHeadModel:\s+{FLOAT}$", "Hugging Face"))
    require(counts == [SMALL_COUNT] * 3, f"all three agree: {counts}")
    untied = _int(text, rf"^untied head \(tied=False\):\s+{FLOAT}$", "untied")
    extra = untied - SMALL_COUNT
    require(round(extra / 1e6, 1) == 38.6 and 0.29 < extra / SMALL_COUNT < 0.34, f"38.6 M, almost a third: {extra}")
    sizes = {
        name: int(n.replace(",", "")) for name, n in re.findall(r"^GPT-2 (\w+) .*:\s+([\d,]+) parameters$", text, re.M)
    }
    require(list(sizes) == ["small", "medium", "large", "xl"], f"four sizes: {sizes}")
    require(sizes["small"] == SMALL_COUNT and 1.5e9 <= sizes["xl"] < 1.6e9, f"124 M to 1.5 B: {sizes}")


def cg_flops(nb):
    text = output(nb, FLOPS)
    forward = number(text, rf"^forward:\s+{FLOAT} GFLOPs", "forward")
    training = number(text, rf"^training:\s+{FLOAT} GFLOPs", "training")
    ratio = number(text, rf"formula / measured = {FLOAT}$", "ratio")
    total = number(text, rf"tokens: {FLOAT} FLOPs$", "total")
    require(abs(training - 3 * forward) < 0.002, f"training = 3 x forward: {training}, {forward}")
    require(abs(ratio - 1) < 0.005, f"formula and FlopCounterMode within 0.5 %: {ratio}")
    require(8.5e18 <= total < 8.65e18, f"about 8.6e18 FLOPs for ten billion tokens: {total}")


def cg_names(nb):
    text = output(nb, NAMES)
    table = rows(text, r"^(\w+(?: \([^)]*\))?)\s+(\S+)\s{3}.*?\s(\S+)$", "name table", 8)
    values = {name: (ours, theirs) for name, ours, theirs in table[1:]}  # the first row is the header
    require(len(values) == 8 and all(float(a) == float(b) for a, b in values.values()), f"equal values: {values}")


def cg_weights(nb):
    text = output(nb, WEIGHTS)
    table = rows(text, r"^(\S+?)\s*(\([\d, ]*\))\s+(\S+)\s+(\([\d, ]*\))\s*(yes)?\s*$", "weight table", 17)
    transposed = {ours: (literal(a, r"(.*)", "shape"), literal(b, r"(.*)", "shape")) for ours, a, _, b, t in table if t}
    require(len(transposed) == 4, f"four transposed matrices in a block: {sorted(transposed)}")
    require(all(b == a[::-1] for a, b in transposed.values()), f"stored as the transpose: {transposed}")
    out_proj = transposed.get("blocks.0.attn.out_proj.weight")
    require(out_proj is not None and out_proj[0] == out_proj[1] == (768, 768), "attn.out_proj is square")


def cg_transpose(nb):
    text = output(nb, TRANSPOSE)
    untransposed = number(text, rf"^copied as stored:\s+max \|difference\| from x @ W = {FLOAT} ", "untransposed")
    size = number(text, rf"outputs are about {FLOAT} in size", "output size")
    transposed = number(text, rf"^copied transposed: max \|difference\| from x @ W = {FLOAT}$", "transposed")
    require(untransposed > size, f"wrong by as much as the outputs themselves: {untransposed} vs {size}")
    require(transposed < 1e-4, f"transposed, the same: {transposed}")


def cg_yours(nb):
    text = output(nb, YOURS)
    require(re.search(r"^Running (your|the course's) `", text, re.M), f"one line says whose classes run: {text!r}")


def cg_logits(nb):
    text = output(nb, LOGITS)
    require(re.search(r"^Running (your|the course's) `load_gpt2_weights` \(lesson 10", text, re.M), "whose loader")
    difference = number(text, rf"max \|logit difference\| = {FLOAT}$", "logit difference")
    require(difference < 1e-4, f"float32 rounding only: {difference}")
    require(re.search(r"^head still tied to the token embedding: True$", text, re.M), "the head stays tied")


def cg_export(nb):
    difference = number(output(nb, EXPORT), rf"from the trained GPT2 = {FLOAT}$", "logit difference")
    require(difference < 1e-4, f"your GPT computes the trained model's logits: {difference}")


def cg_words(nb):
    text = output(nb, WORDS)
    real = _int(text, rf"^temperature 0\.8: {FLOAT} of", "real words")
    total = _int(text, rf"of {FLOAT} sampled words", "sampled words")
    require(total >= 150, f"enough words to count: {total}")
    require(real / total > 0.8, f"more than four in five are words of the training text: {real} of {total}")


def _skipped_or(nb, marker: str, online) -> None:
    """Offline the cell must say what it skipped; online `online(text)` checks what it printed."""
    text = output(nb, marker)
    if "not available here" in text:
        require(re.search(r"^Skipped: ", text, re.M), f"the cell says what it skipped:\n{text}")
    else:
        online(text)


def cg_online(nb):
    def online(text):
        difference = number(text, rf"max \|logit difference\| = {FLOAT}$", "OpenAI's logits")
        require(difference < 1e-4, f"OpenAI's GPT-2: the same logits: {difference}")

    _skipped_or(nb, ONLINE, online)


def cg_cosine(nb):
    text = output(nb, COSINE)
    first = literal(text, r"^steps 0, 1, 714, 715: (\[.*\])$", "schedule values")
    require(math.isclose(first[0], 6e-4 / 715) and math.isclose(first[1], 2 * 6e-4 / 715), f"warm-up: {first}")
    require(math.isclose(first[2], 6e-4) and math.isclose(first[3], 6e-4), f"max_lr at 714 and 715: {first}")
    worst = number(text, rf"CosineAnnealingLR: {FLOAT}$", "difference from torch")
    require(worst < 1e-12, f"the same as CosineAnnealingLR after warm-up: {worst}")


def cg_small_model(nb):
    text = output(nb, SMALL_MODEL)
    sizes = dict(re.findall(r"(vocab_size|context_length|n_layers|n_heads|d_model)=(\d+)", text))
    expected = {"vocab_size": "65", "context_length": "64", "n_layers": "2", "n_heads": "4", "d_model": "64"}
    require(sizes == expected, f"2 layers, 4 heads, 64 channels, context 64, 65 characters: {sizes}")
    require("use_sdpa=True" in text, "attention through F.scaled_dot_product_attention")
    require("(tied head: True)" in text, "tied, as GPT-2")


def cg_train(nb):
    text = output(nb, TRAIN)
    require(re.search(rf"^{STEPS} steps in ", text, re.M), f"{STEPS} steps: {text!r}")
    val = number(text, rf"val loss {FLOAT} \(", "val loss")
    uniform = number(text, rf"= {FLOAT}\)$", "uniform guess")
    require(val < 2.0, f"well below a bigram table's 2.5: {val}")
    require(val < uniform - 1.5, f"far below the uniform guess: {val} vs {uniform}")


def cg_pictures(nb):
    def online(text):
        near = number(text, rf"neighbouring positions' rows: {FLOAT};", "near")
        far = number(text, rf"100 or more apart: {FLOAT}$", "far")
        require(near > far + 0.2, f"neighbours far more similar than distant positions: {near} vs {far}")

    _skipped_or(nb, PICTURES, online)


def cg_heads(nb):
    text = output(nb, HEADS)
    previous = literal(text, r"^layer 0: previous (\[[^]]*\])", "layer 0, previous")
    uniform = number(text, rf"^uniform: {FLOAT}$", "uniform")
    require(0.05 < uniform < 0.15, f"an even spread over up to 32 positions: {uniform}")
    require(sum(p > 2 * uniform for p in previous) >= 2, f"some first-layer heads: {previous} vs {uniform}")


def cg_nucleus(nb):
    text = output(nb, NUCLEUS)
    low = number(text, rf"nucleus sizes from {FLOAT} to", "smallest")
    high = number(text, rf"to {FLOAT}$", "largest")
    top = literal(text, r"^most probable next character's probability: (\[.*\])$", "top probabilities")
    sizes = literal(text, r"^tokens in the 0\.9-nucleus:\s+(\[.*\])$", "nucleus sizes")
    require(low <= 2 and high >= 10, f"one or two tokens when sure, many when not: {low}..{high}")
    require(min(sizes) == low and max(sizes) == high, f"the summary is the list's: {sizes}")
    require(all(n == 1 for p, n in zip(top, sizes, strict=True) if p >= 0.91), "a token above 0.9 is alone")


def cg_samples(nb):
    text = output(nb, SAMPLES)
    shares = {name: int(v) / 100 for name, v in re.findall(r"^--- (.+) \(distinct 4-grams: (\d+)%\)$", text, re.M)}
    require(len(shares) == 5, f"five strategies: {shares}")
    greedy = shares.pop("greedy")
    require(greedy < 0.5 and all(v > greedy + 0.3 for v in shares.values()), f"greedy loops: {greedy}, {shares}")
    require(re.search(r"^the same seed gives the same text: True$", text, re.M), "seeded: the same text")


def cg_gpt2_samples(nb):
    _skipped_or(nb, GPT2_SAMPLES, lambda text: require(text.count("--- ") == 5, "five strategies"))


def cg_stepwise(nb):
    text = output(nb, STEPWISE)
    require("cache: (1, 2, 12, 8)" in text, "the cache holds all 12 positions")
    difference = number(text, rf"max \|difference\| = {FLOAT}$", "difference")
    require(difference < 1e-5, f"step by step = all at once: {difference}")


def cg_kv(nb):
    text = output(nb, KV)
    require(re.search(r"^Running (your|the course's) `forward_with_cache` \(lesson 10", text, re.M), "whose cache")
    require(re.search(r"^Cached runs: (your GPT|the course's GPT2) ", text, re.M), "which model runs with it")
    require(re.search(r"give the same ids: True$", text, re.M), "the small model: the same ids")
    require(re.search(r"^the same ids either way: True$", text, re.M), "the timed model: the same ids")
    require(re.search(rf"the cache was {FLOAT}x faster here$", text, re.M), "the measured ratio is printed")


CLAIMS = [
    Claim(
        "GPT-2 small: 124,439,808 parameters, the head tied to the token embedding",
        cg_build,
        [
            Break(EXACT, BUILD, r"124,439,808", "124,439,809"),
            Break(SHOWN, BUILD, r"embedding: True", "embedding: False"),
        ],
    ),
    Claim(
        "out_proj and fc2 start with 0.02 / sqrt(2 n_layers), the other weights and both tables with 0.02, biases "
        "at 0, LayerNorms at (1, 0)",
        cg_init,
        [
            Break(MARGIN, INIT, r"(attn\.out_proj\s+std )\S+", r"\g<1>0.02000"),
            Break(MARGIN, INIT, r"(pos_emb\s+std )\S+", r"\g<1>0.01000"),
            Break(SHOWN, INIT, r"biases are 0: True", "biases are 0: False"),
            Break(SHOWN, INIT, r"gain 1 and bias 0: True", "gain 1 and bias 0: False"),
        ],
    ),
    Claim(
        "with the scaling the stream grows more slowly and ends several times smaller",
        cg_stream,
        [
            Break(ORDER, STREAM, r"(?m)(^GPT-2's initialisation: \[.*, )[\d.]+\]$", r"\g<1>1.800]"),
            Break(MARGIN, STREAM, r"(?m)(^all projections at 0\.02: \[.*, )[\d.]+\]$", r"\g<1>0.500]"),
        ],
    ),
    Claim(
        "the embeddings hold almost a third; 38.6 M token table, 0.8 M positions, 7.1 M = 12C² + 13C per block",
        cg_groups,
        [
            Break(MARGIN, GROUPS, r"(?m)^(tok_emb\s+)38,597,376(\s+)31\.0%", r"\g<1>68,597,376\g<2>45.0%"),
            Break(EXACT, GROUPS, r"one block: 7,087,872", "one block: 7,087,000"),
        ],
    ),
    Claim(
        "formula, our model and Hugging Face's agree; untied adds 38.6 M; four sizes from 124 M to 1.5 B",
        cg_count,
        [
            Break(EXACT, COUNT, r"(GPT2LMHeadModel:\s+)124,439,808", r"\g<1>124,439,807"),
            Break(MARGIN, COUNT, r"163,037,184", "124,439,908"),
        ],
    ),
    Claim(
        "the FLOP formula and PyTorch's counter agree within 0.5 %; 10 billion tokens cost about 8.6e18 FLOPs",
        cg_flops,
        [
            Break(MARGIN, FLOPS, r"formula / measured = \S+", "formula / measured = 1.0200"),
            Break(MARGIN, FLOPS, r"8\.55e\+18", "8.55e+19"),
        ],
    ),
    Claim(
        "the course's sizes and Hugging Face's have the same values",
        cg_names,
        [Break(TABLE, NAMES, r"(?m)^(d_model .*\s)768$", r"\g<1>769")],
    ),
    Claim(
        "four matrices per block are stored transposed, attn.out_proj among them although it is square",
        cg_weights,
        [Break(TABLE, WEIGHTS, r"(?m)^(blocks\.0\.attn\.out_proj\.weight.*?)yes", r"\g<1>   ")],
    ),
    Claim(
        "a square Conv1D weight copied without the transpose fits and is wrong by as much as the outputs",
        cg_transpose,
        [
            Break(MARGIN, TRANSPOSE, r"(copied as stored:\s+max \|difference\| from x @ W = )\S+", r"\g<1>0.01"),
            Break(MARGIN, TRANSPOSE, r"(copied transposed: max \|difference\| from x @ W = )\S+", r"\g<1>2.3e+00"),
        ],
    ),
    Claim(
        "a line says whose classes the lesson runs",
        cg_yours,
        [Break(SHOWN, YOURS, r"^Running ", "Using ")],
    ),
    Claim(
        "random Hugging Face weights in your GPT: the logits differ by float rounding only; the head stays tied",
        cg_logits,
        [
            Break(MARGIN, LOGITS, r"difference\| = \S+$", "difference| = 3.2e-02"),
            Break(SHOWN, LOGITS, r"embedding: True", "embedding: False"),
        ],
    ),
    Claim(
        "OpenAI's weights: the logit match online, or a line saying it was skipped and why",
        cg_online,
        [Break(SHOWN, ONLINE, r"Skipped: the logit match", "Matched: the logit match")],
    ),
    Claim(
        "warm-up from max_lr / 715, max_lr at steps 714 and 715; CosineAnnealingLR's values after warm-up",
        cg_cosine,
        [
            Break(MARGIN, COSINE, r"CosineAnnealingLR: \S+", "CosineAnnealingLR: 3.0e-05"),
            Break(EXACT, COSINE, r"\[8\.39\d*e-07", "[0.0"),
        ],
    ),
    Claim(
        "the small model: 2 layers, 4 heads, 64 channels, a context of 64, 65 characters, tied",
        cg_small_model,
        [Break(EXACT, SMALL_MODEL, r"n_layers=2", "n_layers=3")],
    ),
    Claim(
        "after 2,500 steps the validation loss is far below the uniform guess and well below a bigram table's 2.5",
        cg_train,
        [
            Break(MARGIN, TRAIN, r"val loss \S+ \(", "val loss 2.600 ("),
            Break(EXACT, TRAIN, r"^\d+ steps in", "1000 steps in"),
        ],
    ),
    Claim(
        "your GPT with the small model's weights (Hugging Face's layout, your loader) computes its logits",
        cg_export,
        [Break(MARGIN, EXPORT, r"GPT2 = \S+$", "GPT2 = 4.1e-01")],
    ),
    Claim(
        "OpenAI's position table and heads online, or a line saying they were skipped",
        cg_pictures,
        [Break(SHOWN, PICTURES, r"Skipped: OpenAI's GPT-2", "Shown: OpenAI's GPT-2")],
    ),
    Claim(
        "some first-layer heads put far more weight on the previous character than an even spread",
        cg_heads,
        [Break(MARGIN, HEADS, r"(?m)^layer 0: previous \[[^]]*\]", "layer 0: previous [0.1, 0.1, 0.15, 0.3]")],
    ),
    Claim(
        "the 0.9-nucleus is one or two tokens where the model is sure, many where it is not",
        cg_nucleus,
        [Break(MARGIN, NUCLEUS, r"nucleus sizes from \d+ to \d+", "nucleus sizes from 5 to 8")],
    ),
    Claim(
        "greedy decoding loops (by far the fewest distinct 4-grams); the same seed gives the same text",
        cg_samples,
        [
            Break(ORDER, SAMPLES, r"--- greedy \(distinct 4-grams: \d+%\)", "--- greedy (distinct 4-grams: 95%)"),
            Break(SHOWN, SAMPLES, r"same text: True", "same text: False"),
        ],
    ),
    Claim(
        "at temperature 0.8 more than four in five sampled words occur in the training text",
        cg_words,
        [Break(MARGIN, WORDS, r"0\.8: \d+ of", "0.8: 100 of")],
    ),
    Claim(
        "OpenAI's GPT-2 samples online, or a line saying they were skipped",
        cg_gpt2_samples,
        [Break(SHOWN, GPT2_SAMPLES, r"Skipped: OpenAI's GPT-2", "Shown: OpenAI's GPT-2")],
    ),
    Claim(
        "attend_with_cache step by step gives the rows of causal attention over the whole sequence",
        cg_stepwise,
        [Break(MARGIN, STEPWISE, r"difference\| = \S+$", "difference| = 1.3e-01")],
    ),
    Claim(
        "with and without the cache (yours where it passes) generate gives the same ids; the measured ratio is printed",
        cg_kv,
        [
            Break(SHOWN, KV, r"give the same ids: True", "give the same ids: False"),
            Break(SHOWN, KV, r"the same ids either way: True", "the same ids either way: False"),
        ],
    ),
]
