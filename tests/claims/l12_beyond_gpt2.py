"""Claims of lesson 12_beyond_gpt2: what its text says its code cells show.

The ladder's claims are only those that held for every seed of tests/benchmarks/bench_ladder_seeds.py (the lesson's
sizes, 300 steps, seeds 0-7), read in pairs as the lesson's table reads them: no timing, and no ranking that luck
could reverse. The token ladder runs one seed, and its table must say so."""

from __future__ import annotations

import math
import re
import statistics

from tests.claims.common import FLOAT, Break, Claim, Family, number, output, require, rows, tensors

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

SAME = "same_keys = list(theirs.state_dict())"
NORMS = "by_layer_norm = F.layer_norm("
RMS_REF = "ref.rms_norm vs F.rms_norm"
SHIFT = "at_hundred = torch.softmax("
WIDTH = "h = ref.swiglu_hidden(d)"
MLP = "gelu_mlp = modern_gpt.SwitchBlock("
CACHE = "for shape in (ref.GPT2_SMALL, ref.LLAMA2_7B, ref.LLAMA3_8B):"
GROUPED = "grouped, full = modern_gpt.SwitchAttention(config)"
QK = "for qk_norm in (False, True):"
HEAD = "block = modern_gpt.SwitchBlock(ModernConfig(50257"
BUG = "def one_step(layer, new, cache, position):"
YOUR_BLOCKS = "blocks = with_your_answers(yours"
LOADED = "loaders = with_your_answers(blocks"
ONLINE = "real, how = (None,"
MUON = "after = torch.linalg.svdvals(optimizers.newton_schulz(G))"
TABLE_CELL = "print(ladder.ladder_table(results, floor))"
LADDER_CELL = "mine = with_your_answers(yours"
TOKENS = "token_ids, kept = ladder.compact_ids(gpt2_ids)"
TOKEN_TABLE = "print(ladder.ladder_table(tok_results))"


def cg_same_model(nb):
    text = output(nb, SAME)
    require("same state-dict keys: True; same initial weights from seed 0: True" in text, f"not the same: {text}")
    gap = number(text, rf"two models' logits: {FLOAT}$", "logit difference")
    require(gap < 1e-5, f"the same logits: {gap}")


def cg_norms_differ(nb):
    text = output(nb, NORMS)
    by_layer, by_rms = tensors(text)[:2]
    require(-2.5 < min(by_layer) < -1 and 1 < max(by_layer) < 2.5, f"LayerNorm: about -2 to +2: {by_layer}")
    require(all(abs(v - 1) < 0.05 for v in by_rms), f"RMSNorm: every entry close to 1: {by_rms}")
    require("LayerNorm = RMSNorm of the centred vector: True" in text, f"LN(x) = RMS(x - mean): {text}")


def cg_rms_reference(nb):
    text = output(nb, RMS_REF)
    for who in ("F.rms_norm", "nn.RMSNorm"):
        gap = number(text, rf"vs {re.escape(who)}, largest difference: {FLOAT}$", who)
        require(gap < 1e-5, f"ref.rms_norm matches {who}: {gap}")
    require("bf16 in, dtype out: torch.bfloat16" in text, f"bf16 stays bf16: {text}")
    layer = number(text, rf"LayerNorm {FLOAT} \|", "LayerNorm parameters")
    rms = number(text, rf"RMSNorm {FLOAT}$", "RMSNorm parameters")
    require(rms * 2 == layer, f"half the parameters: {rms} vs {layer}")


def cg_shift(nb):
    text = output(nb, SHIFT)
    gap = number(text, rf"largest difference in the output {FLOAT}$", "difference after the shift")
    require(gap < 1e-5, f"RoPE: the same output at positions 100..111: {gap}")
    learned = number(text, rf"with a position table {FLOAT},", "parameters with the table")
    rope = number(text, rf"with RoPE {FLOAT} ", "parameters with RoPE")
    table = number(text, rf"= {FLOAT}\)$", "the table's size")
    require(learned - rope == table, f"RoPE has the table's parameters fewer: {learned} - {rope} vs {table}")


def cg_swiglu_width(nb):
    text = output(nb, WIDTH)
    for gelu, swiglu in rows(text, r"= +([\d,]+) weights \| SwiGLU hidden .*= +([\d,]+)$", "widths", 3):
        gelu, swiglu = (int(v.replace(",", "")) for v in (gelu, swiglu))
        require(abs(swiglu - gelu) / gelu < 0.01, f"the same parameters within 1 %: {gelu} vs {swiglu}")
    llama = number(text, rf"multiple of 256: {FLOAT}$", "Llama's width")
    require(llama == 11008, f"11,008 for d = 4,096: {llama}")


def cg_swiglu_model(nb):
    text = output(nb, MLP)
    gelu = number(text, rf"GELU MLP {FLOAT} weights", "GELU weights")
    swiglu = number(text, rf"SwiGLU {FLOAT} \(", "SwiGLU weights")
    require(abs(swiglu - gelu) / gelu < 0.01, f"almost exactly the same weights: {gelu} vs {swiglu}")


def _cache(text: str, name: str) -> tuple[float, float, float]:
    line = rf"^{re.escape(name)} .*: +{FLOAT} KiB a token; .* tokens +{FLOAT} MiB; 4,096 tokens +{FLOAT} MiB$"
    found = rows(text, line, name)
    return tuple(float(v.replace(",", "")) for v in found[0])


def cg_cache(nb):
    text = output(nb, CACHE)
    llama2 = _cache(text, "Llama-2-7B")
    require(llama2[0] == 512 and llama2[2] == 2048, f"Llama 2 7B: 512 KiB a token, 2 GiB at 4,096: {llama2}")
    llama3 = _cache(text, "Llama-3-8B")
    require(llama3[0] == 128 and llama3[2] == 512, f"Llama 3 8B: 128 KiB a token, 512 MiB at 4,096: {llama3}")
    gpt2 = _cache(text, "GPT-2 small")
    require(gpt2[1] == 36, f"GPT-2 small's 1,024-token cache: 36 MiB: {gpt2}")
    require(number(text, rf"heads: {FLOAT}% less cache", "saving") == 75, f"75 % less: {text}")
    require(number(text, rf"4,096 tokens: {FLOAT} GiB$", "a batch of 32") == 64, f"64 GiB for 32 sequences: {text}")


def cg_grouped(nb):
    text = output(nb, GROUPED)
    gap = number(text, rf"copied per group: largest difference {FLOAT}$", "grouped vs multi-head")
    require(gap < 1e-5, f"the same function: {gap}")
    full = number(text, rf"multi-head {FLOAT},", "multi-head qkv weights")
    grouped = number(text, rf"grouped {FLOAT}$", "grouped qkv weights")
    require(grouped < full, f"fewer weights: {grouped} vs {full}")


def _logits(text: str, qk_norm: bool) -> list[float]:
    line = rows(text, rf"^QK-norm {qk_norm!s:<5}: .*x16: (.*)$", f"QK-norm {qk_norm}")[0][0]
    return [float(v) for v in line.split(", ")]


def cg_qk_norm(nb):
    text = output(nb, QK)
    plain, normed = _logits(text, False), _logits(text, True)
    require(all(abs(b / a - 16) < 0.1 for a, b in zip(plain, plain[1:], strict=False)), f"x16 per x4: {plain}")
    require(max(normed) - min(normed) < 0.01, f"with QK-norm the largest logit does not move: {normed}")
    require(max(normed) <= math.sqrt(8) + 0.005, f"bounded by sqrt(D) = 2.83: {normed}")


def cg_output_head(nb):
    text = output(nb, HEAD)
    biases = number(text, rf"biases in a GPT-2 small block: {FLOAT} of", "biases")
    block = number(text, rf"of {FLOAT} parameters$", "block parameters")
    require(biases / block < 0.002, f"a tiny share: {biases} of {block}")
    gpt2 = number(text, rf"^GPT-2 small .* weights, +{FLOAT}% of", "GPT-2's share")
    require(30 < gpt2 < 33.4 and round(gpt2) == 31, f"almost a third, 31 % more for a second one: {gpt2}")
    llama = number(text, rf"^Llama 3 8B .* weights, +{FLOAT}% of", "Llama's share")
    require(abs(llama - 6.5) < 0.05, f"6.5 %: {llama}")
    total = number(text, rf"^Llama 3 8B .* of its {FLOAT} M$", "Llama's total")
    require(7950 < total < 8100, f"8 billion: {total}")


def cg_muon(nb):
    text = output(nb, MUON)
    ratio = number(text, rf"\(ratio {FLOAT}\)", "spread before")
    low = number(text, rf"after newton_schulz: from {FLOAT} to", "smallest after")
    high = number(text, rf"after newton_schulz: from .* to {FLOAT}$", "largest after")
    require(ratio > 10 and 0.6 < low <= high < 1.25, f"spread {ratio} becomes {low} .. {high}, all near 1")


def cg_muon_step(nb):
    text = output(nb, MUON)
    require("Running your `newton_schulz` (lesson 12)." in text, f"the solved lesson's Muon runs its answer: {text}")
    low = number(text, rf"learning rate: singular values from {FLOAT} to", "smallest of the step")
    high = number(text, rf"learning rate: singular values from .* to {FLOAT}$", "largest of the step")
    require(0.6 < low <= high < 1.25, f"Muon's step has the orthogonalised singular values: {low} .. {high}")


def cg_cache_bug(nb):
    text = output(nb, BUG)
    require("keys (1, 2, 8, 8), 2 key/value heads" in text, f"the cache keeps the 2 key/value heads: {text}")
    through = number(text, rf"all 8 at once: largest difference {FLOAT}$", "cached step vs whole")
    right = number(text, rf"rotated at position 7: {FLOAT}$", "rotated at 7")
    bug = number(text, rf"\(the classic bug\): {FLOAT},", "rotated at 0")
    size = number(text, rf"outputs of size {FLOAT}$", "output size")
    require(through < 1e-5 and right < 1e-5, f"the same function, to float rounding: {through}, {right}")
    require(bug > 0.2 * size and bug > 1e-3, f"rotated at 0 the output moves by about its size: {bug} vs {size}")


def cg_your_blocks(nb):
    text = output(nb, YOUR_BLOCKS)
    require(text.startswith("Running your `ModernBlock`, `ModernAttention`"), f"the solved lesson's blocks: {text}")
    require("blocks: __main__.ModernBlock;" in text, f"the model is built from the notebook's class: {text}")
    gap = number(text, rf"largest difference in the logits: {FLOAT}$", "logit difference")
    require(gap < 1e-5, f"the same logits as the course's blocks: {gap}")
    require("recomputed without it: True" in text, f"generation through the cache is recomputation's: {text}")


def cg_llama_loaded(nb):
    text = output(nb, LOADED)
    require(text.startswith("Running your `load_llama_weights`"), f"the solved lesson's loader runs: {text}")
    found = rows(text, rf"^tie_word_embeddings=(True|False): largest logit difference {FLOAT}; .* KV cache {FLOAT}; "
                 r".*generate: (True|False)$", "the two checkpoints", 2)  # fmt: skip
    require([row[0] for row in found] == ["True", "False"], f"tied, then untied: {found}")
    for tied, gap, cached, same in found:
        gap, cached = float(gap), float(cached)
        require(gap < 1e-4 and cached < 1e-4, f"Hugging Face's logits within 1e-4 (tied={tied}): {gap}, {cached}")
        require(same == "True", f"the same greedy ids as Hugging Face's generate (tied={tied})")


def cg_online(nb):
    text = output(nb, ONLINE)
    skipped = text.startswith("SmolLM2-135M not loaded: ") and "Online, this cell prints" in text
    require(skipped or "the same 30 greedy ids: True" in text, f"skipped with its reason, or the same ids: {text}")


# rung, params, CPU ms/step (median and range) | each seed's loss, mean, paired change, lower in | equal seconds
RUNG = r"^(GPT-2|\+ \S+(?: biases)?) +[\d,]+ +[\d.]+ \([\d-]+\) *\| +([\d. ]+?) +[\d.]+(?: +[+-][\d.]+ +\d of \d)? +\|"
LABELS = ["GPT-2", "+ RMSNorm", "+ RoPE", "+ SwiGLU", "+ GQA", "+ no biases", "+ QK-norm", "+ Muon"]
SMALL_CHANGES = ["+ SwiGLU", "+ GQA", "+ no biases", "+ QK-norm"]
PAIRED = r"^(\+ \S+(?: biases)?) .*\| +[\d. ]+? +[\d.]+ +([+-][\d.]+) +(\d) of (\d) +\|"


def _ladder(nb) -> dict[str, list[float]]:
    """Each rung's equal-steps validation loss, one per seed, from the printed table."""
    found = rows(output(nb, TABLE_CELL), RUNG, "the ladder's rows", len(LABELS))
    losses = {label: [float(v) for v in values.split()] for label, values in found}
    require(list(losses) == LABELS, f"one row per rung, in order: {list(losses)}")
    require(len({len(v) for v in losses.values()}) == 1 and len(losses["GPT-2"]) >= 2, f"two seeds: {losses}")
    return losses


def _steps(losses, label: str, above: str) -> list[float]:
    return [b - a for a, b in zip(losses[above], losses[label], strict=True)]


def cg_rope_and_muon(nb):
    losses = _ladder(nb)
    rope, muon = _steps(losses, "+ RoPE", "+ RMSNorm"), _steps(losses, "+ Muon", "+ QK-norm")
    require(all(d < -0.1 for d in rope), f"RoPE: about 0.2 lower than the rung above, every seed: {rope}")
    require(all(d < -0.05 for d in muon), f"Muon: lower than the same model with AdamW, every seed: {muon}")


def cg_floor(nb):
    text = output(nb, TABLE_CELL)
    floor = number(text, rf"on these windows\): {FLOAT};", "the bigram floor")
    gap = number(text, rf"GPT-2's mean minus the floor: {FLOAT}$", "GPT-2 against the floor")
    first = statistics.fmean(_ladder(nb)["GPT-2"])
    require(2.4 < floor < 2.6, f"the bigram table of Tiny Shakespeare: about 2.5 nats: {floor}")
    require(-0.15 < gap < 0 and abs(first - floor - gap) < 0.002, f"GPT-2 only a little below the floor: {gap}")


def cg_paired(nb):
    """The table's paired column is what its seeds give: the mean of the per-seed differences, and the count."""
    text = output(nb, TABLE_CELL)
    losses = _ladder(nb)
    found = rows(text, PAIRED, "the paired columns", len(LABELS) - 1)
    for label, mean, lower, n in found:
        diffs = _steps(losses, label, LABELS[LABELS.index(label) - 1])
        require(abs(float(mean) - statistics.fmean(diffs)) < 0.0015, f"{label}: the mean of {diffs} is not {mean}")
        require(int(lower) == sum(d < 0 for d in diffs) and int(n) == len(diffs), f"{label}: {lower} of {n}: {diffs}")


def cg_rms_norm_no_change(nb):
    change = _steps(_ladder(nb), "+ RMSNorm", "GPT-2")
    require(all(abs(d) < 0.04 for d in change), f"RMSNorm: nothing measurable, every seed: {change}")


def cg_small_changes(nb):
    losses = _ladder(nb)
    labels = LABELS[LABELS.index("+ RoPE") :]
    below = {label: _steps(losses, label, "GPT-2") for label in labels}
    require(all(d < -0.05 for ds in below.values() for d in ds), f"every rung from RoPE on below GPT-2: {below}")
    for label in SMALL_CHANGES:
        change = _steps(losses, label, LABELS[LABELS.index(label) - 1])
        require(all(abs(d) < 0.2 for d in change), f"{label}: less than luck moves it: {change}")


def cg_your_parts(nb):
    first = output(nb, LADDER_CELL).splitlines()[0]
    require(
        first.startswith(
            "Running your `GPT` (lesson 09); your `rms_norm`, `rope_attention`, `SwiGLU`, `repeat_kv`, `ModernBlock`, "
            "`newton_schulz`, `ModernAttention` (lesson 12)"
        ),
        f"the solved lesson runs the ladder on its own answers: {first}",
    )


def cg_tokens(nb):
    text = output(nb, TOKENS)
    tokens = number(text, rf"^{FLOAT} tokens,", "tokens")
    per_token = number(text, rf"tokens, {FLOAT} characters a token", "characters a token")
    kept = number(text, rf"a token; {FLOAT} of GPT-2's", "tokens that occur")
    require(3 < per_token < 3.5, f"a little over three characters a token: {per_token}")
    require(kept == 11706 and tokens > 300_000, f"11,706 of GPT-2's tokens occur: {kept} ({tokens} tokens)")


TOKEN_RUNG = (
    r"^(GPT-2|\+ RoPE|modern block|\+ Muon) +[\d,]+ +[\d.]+ \([\d-]+\) *\| +([\d. ]+?) +[\d.]+(?: +[+-][\d.]+)? +\|"
)
TOKEN_LABELS = ["GPT-2", "+ RoPE", "modern block", "+ Muon"]


def cg_token_one_seed(nb):
    text = output(nb, TOKEN_TABLE)
    require("one seed (0): vs above is that seed's difference" in text, f"the token table says one seed: {text}")
    require(
        " of 1 " not in text and "largest difference between the seeds" not in text, f"no spread of one seed: {text}"
    )


def _token_ladder(nb) -> dict[str, list[float]]:
    found = rows(output(nb, TOKEN_TABLE), TOKEN_RUNG, "the token ladder's rows", len(TOKEN_LABELS))
    losses = {label: [float(v) for v in values.split()] for label, values in found}
    require(list(losses) == TOKEN_LABELS, f"one row per rung, in order: {list(losses)}")
    return losses


def cg_token_ladder(nb):
    losses = _token_ladder(nb)
    rope, block = _steps(losses, "+ RoPE", "GPT-2"), _steps(losses, "modern block", "+ RoPE")
    muon, total = _steps(losses, "+ Muon", "modern block"), _steps(losses, "+ Muon", "GPT-2")
    require(all(d < -0.1 for d in rope), f"RoPE pays again, every seed: {rope}")
    require(all(d > 0.15 for d in block), f"the rest of the modern block costs about what RoPE gained: {block}")
    require(all(d < -0.2 for d in muon) and all(d < -0.2 for d in total), f"Muon pays again: {muon}, {total}")


def _raise(label: str, by: float, cell: str = TABLE_CELL):
    """The equal-steps losses of rung `label` (every seed) raised by `by`."""

    def alter(match: re.Match[str]) -> str:
        values = " ".join(f"{float(v) + by:>7.3f}" for v in match.group(2).split())
        return match.group(0).replace(match.group(2), values, 1)

    row = rf"^({re.escape(label)} +[\d,]+ +[\d.]+ \([\d-]+\) *\| +)([\d. ]+?)(?= +[\d.]+ +(?:[+-]|\|))"
    return Break(MARGIN, cell, row, alter)


CLAIMS = [
    Claim(
        "with every switch at GPT-2's, ModernGPT is lesson 09's GPT: same keys, same initial weights, same logits",
        cg_same_model,
        [
            Break(EXACT, SAME, r"from seed 0: True", "from seed 0: False"),
            Break(MARGIN, SAME, r"(?<=logits: )\S+", "3.1e-02"),
        ],
    ),
    Claim(
        "LayerNorm: entries about -2 to +2; RMSNorm keeps the 5, every entry close to 1; LN(x) = RMS(x - mean)",
        cg_norms_differ,
        [
            Break(TENSOR, NORMS, r"(RMSNorm:\s+tensor\(\[)\s*[\d.]+", r"\g<1>5.0000"),
            Break(EXACT, NORMS, r"centred vector: True", "centred vector: False"),
        ],
    ),
    Claim(
        "ref.rms_norm matches F.rms_norm and nn.RMSNorm, keeps bf16, and has half a LayerNorm's parameters",
        cg_rms_reference,
        [
            Break(MARGIN, RMS_REF, r"(?<=nn.RMSNorm, largest difference: )\S+", "2.0e-01"),
            Break(EXACT, RMS_REF, r"torch.bfloat16", "torch.float32"),
            Break(EXACT, RMS_REF, r"RMSNorm 64", "RMSNorm 128"),
        ],
    ),
    Claim(
        "positions 100..111 instead of 0..11: not at all (float rounding); the table's parameters disappear",
        cg_shift,
        [
            Break(MARGIN, SHIFT, r"(?<=in the output )\S+", "4.2e-02"),
            Break(EXACT, SHIFT, r"(?<=with RoPE )[\d,]+", "1"),
        ],
    ),
    Claim(
        "a hidden width of 2/3 of 4 d keeps the parameters; Llama's rule gives 11,008 for d = 4,096",
        cg_swiglu_width,
        [
            Break(MARGIN, WIDTH, r"(?m)(SwiGLU hidden .*= +)[\d,]+$", r"\g<1>1,000"),
            Break(EXACT, WIDTH, r"(?<=multiple of 256: )\d+", "11264"),
        ],
    ),
    Claim(
        "SwiGLU holds almost exactly the weights of the 4x GELU MLP",
        cg_swiglu_model,
        [Break(MARGIN, MLP, r"(?<=SwiGLU )[\d,]+", "49,152")],
    ),  # fmt: skip
    Claim(
        "KV cache: Llama 2 7B 512 KiB a token, 2 GiB at 4,096; Llama 3 8B a quarter; GPT-2 small 36 MiB; 64 GiB",
        cg_cache,
        [
            Break(EXACT, CACHE, r"(?m)(^Llama-2-7B .*4,096 tokens +)[\d,]+", r"\g<1>1,024"),
            Break(EXACT, CACHE, r"(?m)(^Llama-3-8B .*: +)128", r"\g<1>512"),
            Break(EXACT, CACHE, r"(?m)(^GPT-2 small .*1024 tokens +)36", r"\g<1>72"),
            Break(EXACT, CACHE, r"\d+(?=% less cache)", "50"),
            Break(EXACT, CACHE, r"\d+(?= GiB$)", "16"),
        ],
    ),
    Claim(
        "grouped-query attention is multi-head attention with keys and values copied per group, with fewer weights",
        cg_grouped,
        [
            Break(MARGIN, GROUPED, r"(?<=largest difference )\S+", "1.3e-01"),
            Break(ORDER, GROUPED, r"(?<=grouped )[\d,]+", "4,096"),
        ],
    ),
    Claim(
        "without QK-norm the largest logit grows 16 times per 4x; with it, it does not move, bounded by sqrt(D)",
        cg_qk_norm,
        [
            Break(MARGIN, QK, r"(?m)(^QK-norm False.*x16: [\d.]+, )([\d.]+)", r"\g<1>1.00"),
            Break(MARGIN, QK, r"(?m)(^QK-norm True .*x16: [\d.]+, [\d.]+, )([\d.]+)", r"\g<1>9.00"),
        ],
    ),
    Claim(
        "biases are a tiny share; GPT-2 small's embedding is almost a third (31 %), Llama 3 8B's 6.5 % of 8 billion",
        cg_output_head,
        [
            Break(MARGIN, HEAD, r"(?m)(^GPT-2 small .* weights, +)[\d.]+", r"\g<1>12.0"),
            Break(MARGIN, HEAD, r"(?m)(^Llama 3 8B .* weights, +)[\d.]+", r"\g<1>3.2"),
        ],
    ),
    Claim(
        "five Newton-Schulz iterations bring singular values that spread widely close to 1",
        cg_muon,
        [Break(MARGIN, MUON, r"(after newton_schulz: from )\S+", r"\g<1>0.010")],
    ),
    Claim(
        "Muon's step, with the learner's newton_schulz, has singular values near 1",
        cg_muon_step,
        [
            Break(MARGIN, MUON, r"(learning rate: singular values from )\S+", r"\g<1>0.010"),
            Break(EXACT, MUON, r"Running your `newton_schulz`", "Running the course's `newton_schulz`"),
        ],
    ),
    Claim(
        "through the cache the step is the whole sequence's; rotated at 0 (the classic bug) it moves by about its size",
        cg_cache_bug,
        [
            Break(MARGIN, BUG, r"(?<=\(the classic bug\): )[\d.]+", "0.000"),
            Break(MARGIN, BUG, r"(?<=rotated at position 7: )\S+", "3.1e-02"),
            Break(EXACT, BUG, r"keys \(1, 2, 8, 8\)", "keys (1, 4, 8, 8)"),
        ],
    ),
    Claim(
        "a ModernGPT of the learner's blocks computes the course's logits; its KV cache generates recomputation's ids",
        cg_your_blocks,
        [
            Break(MARGIN, YOUR_BLOCKS, r"(?<=largest difference in the logits: )\S+", "2.0e-01"),
            Break(EXACT, YOUR_BLOCKS, r"recomputed without it: True", "recomputed without it: False"),
        ],
    ),
    Claim(
        "a random LlamaForCausalLM in the learner's classes: its logits, cached too, and its greedy ids, tied and not",
        cg_llama_loaded,
        [
            Break(MARGIN, LOADED, r"(?m)(^tie_word_embeddings=True: largest logit difference )\S+;", r"\g<1>3.0e-02;"),
            Break(MARGIN, LOADED, r"(?m)(^tie_word_embeddings=False: .*KV cache )\S+;", r"\g<1>2.0e-01;"),
            Break(EXACT, LOADED, r"(?m)(^tie_word_embeddings=False: .*generate: )True", r"\g<1>False"),
        ],
    ),
    Claim(
        "offline the SmolLM2 cell says why it did not run; online it gives Hugging Face's ids",
        cg_online,
        [Break(EXACT, ONLINE, r"^SmolLM2-135M not loaded: ", "SmolLM2-135M loaded: ")],
    ),
    Claim(
        "the table reads the seeds in pairs: the mean per-seed difference and in how many seeds a rung is lower",
        cg_paired,
        [Break(TABLE, TABLE_CELL, r"(?m)(^\+ RoPE .*[+-][\d.]+ +)2( of 2)", r"\g<1>0\2")],
    ),
    Claim(
        "GPT-2's rung at 300 steps is only a little below the bigram floor (about 2.5)",
        cg_floor,
        [
            Break(MARGIN, TABLE_CELL, r"(?<=GPT-2's mean minus the floor: )\S+", "-0.400"),
            Break(MARGIN, TABLE_CELL, r"(?<=on these windows\): )[\d.]+", "3.100"),
        ],
    ),
    Claim(
        "RoPE is the one large step (about 0.2 lower, every seed); Muon the second (lower than AdamW, every seed)",
        cg_rope_and_muon,
        [_raise("+ RoPE", 0.2), _raise("+ Muon", 0.15)],
    ),
    Claim("RMSNorm changes nothing measurable", cg_rms_norm_no_change, [_raise("+ RMSNorm", 0.1)]),
    Claim(
        "SwiGLU, GQA, no biases and QK-norm each move the loss by a few hundredths; every rung from RoPE on is below "
        "GPT-2",
        cg_small_changes,
        [_raise("+ GQA", 0.3), _raise("+ QK-norm", 0.4)],
    ),
    Claim(
        "the ladder's rungs after GPT-2 are built from the learner's answers when they pass their checks",
        cg_your_parts,
        [Break(EXACT, LADDER_CELL, r"your `rms_norm`", "the course's `rms_norm`")],
    ),
    Claim(
        "Tiny Shakespeare in GPT-2's tokens: a little over three characters a token; 11,706 of GPT-2's tokens occur",
        cg_tokens,
        [
            Break(MARGIN, TOKENS, r"[\d.]+(?= characters a token)", "4.10"),
            Break(EXACT, TOKENS, r"11,706(?= of GPT-2's)", "50,257"),
        ],
    ),
    Claim(
        "the token ladder runs one seed, and its table says so instead of a spread between seeds",
        cg_token_one_seed,
        [Break(EXACT, TOKEN_TABLE, r"one seed \(0\)", "two seeds (0)")],
    ),
    Claim(
        "on tokens, RoPE and Muon pay again; the rest of the modern block costs about what RoPE gained",
        cg_token_ladder,
        [
            _raise("+ RoPE", 0.3, TOKEN_TABLE),
            _raise("modern block", -0.2, TOKEN_TABLE),
            _raise("+ Muon", 0.3, TOKEN_TABLE),
        ],
    ),
]
