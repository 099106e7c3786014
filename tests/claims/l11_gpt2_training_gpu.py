"""Claims of lesson 11_gpt2_training_gpu: what its text says its code cells show.

The lesson executes in its CPU smoke mode here (no GPU): the claims are those of that run. Numbers the text calls
arithmetic (expected tokens/s, plans) are checked for their arithmetic; timings are never asserted. Executed as the
instructor source, the lesson finds the instructor's answers of lessons 05, 06 and 09 in the folders beside it
(`course_lib.workflow.your_code` looks there), so that run trains "your" GPT and compares it with the course's GPT2;
the claims about the model hold on either path (tests/test_lesson_11_your_gpt.py runs both).
"""

from __future__ import annotations

import math
import re

from tests.claims.common import FLOAT, Break, Claim, Family, number, output, require, rows

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

MODE = "SMALL = autograding()"
YOUR_MODEL = 'yours = your_code("05_multi_head_attention"'
GPUS = "GPUS = {"
DATA = "header = prepare_data(DATA_DIR)"
ACCUM = "for world_size in (1, 2, 8):"
SAME_GRADIENT = "def accumulated_gradient("
COUNTER = "with FlopCounterMode(display=False) as counter:"
EXPECTED = "ASSUMED_MFU = 0.40"
FP16 = "gradient = torch.tensor(1e-8)"
CLIP = "loss = ref.training_step(tiny, micro_batches"
CHOICE = "check_training_step(training_step)  # the visible checks, quietly"
PLANS = "def gpu_plan("
READS = "SMOKE_BUDGET_S = 30"
RUN = "on_log, finish = live_log("
RESUME = "resumed = ref.train(fresh"
ATOMIC = 'broken = {"step": 99'
EVALS = 'evals = [(r["step"], r["val_loss"])'
MFU = "median_mfu = statistics.median("
RANKS = "ranks = [ref.rank_batch(stream"


def c_mode(nb):
    text = output(nb, MODE)
    require("No CUDA GPU here: this run is the CPU SMOKE configuration" in text, f"the mode is said first:\n{text}")
    require("do not run on this machine" in text, f"the GPU paths are said not to run here:\n{text}")


# The smoke model's parameters: lesson 09's GPT at the tiny sizes with GPT-2's 50,257 tokens, and the course's GPT2,
# whose token table is padded to 50,304 rows (47 x 64 more).
SMOKE_PARAMETERS = {"YOUR GPT (lesson 09)": 3_320_640, "the course's GPT2 (course_lib.gpt2)": 3_323_648}
SMOKE_STEP_TOKENS = 2 * 64  # micro_batch_size x seq_len, one micro-batch a step


def c_model(nb):
    text = output(nb, YOUR_MODEL)
    require(re.search(r"^Running (your|the course's) `", text, re.M), f"a line says whose classes run:\n{text}")
    found = re.search(
        r"^The training runs below train (.+), configured as a tiny GPT-2 \(the CPU smoke run\)\.$", text, re.M
    )
    require(found and found.group(1) in SMOKE_PARAMETERS, f"and which model trains, at the smoke run's size:\n{text}")
    whose = found.group(1)
    yours = whose.startswith("YOUR")
    require(
        yours == bool(re.search(r"your `GPT` \(lesson 09\)", text)), f"the run trains the GPT the banner names:\n{text}"
    )
    count = number(output(nb, READS), rf"^{re.escape(whose)}: {FLOAT} parameters$", "parameters")
    require(count == SMOKE_PARAMETERS[whose], f"{whose} at the tiny sizes, GPT-2's vocabulary: {count}")


def c_cost(nb):
    """With the learner's GPT, what its attention costs against the course's fused one, per step and in the budget
    (measured: only the arithmetic is checked); with the course's GPT2, no comparison."""
    text = output(nb, READS)
    yours = "YOUR GPT (lesson 09):" in text
    timed = "(the timing and the plan are skipped" not in text
    per_step = re.search(
        rf"^per step: your GPT {FLOAT} s, the course's GPT2 \(fused attention\) {FLOAT} s: yours takes {FLOAT}x",
        text,
        re.M,
    )
    require(bool(per_step) == (yours and timed), f"a comparison exactly when your GPT trains and is timed:\n{text}")
    if not per_step:
        return
    ratio = float(per_step.group(1)) / float(per_step.group(2))
    require(
        abs(ratio - float(per_step.group(3))) < 0.01 + 0.01 * ratio,
        f"the ratio is of the two times: {per_step.groups()}",
    )
    budget = re.search(
        rf"^in a budget of 30 s: your GPT {FLOAT} steps \({FLOAT} tokens\), "
        rf"the course's GPT2 {FLOAT} \({FLOAT} tokens\): {FLOAT} steps and {FLOAT} tokens (fewer|more) with yours$",
        text,
        re.M,
    )
    require(budget, f"what it costs in the budget:\n{text}")
    ours, our_tokens, theirs, their_tokens, steps, tokens = (int(v.replace(",", "")) for v in budget.groups()[:6])
    require(our_tokens == ours * SMOKE_STEP_TOKENS and their_tokens == theirs * SMOKE_STEP_TOKENS, budget.group(0))
    require(steps == abs(theirs - ours) and tokens == steps * SMOKE_STEP_TOKENS, budget.group(0))
    require((budget.group(7) == "fewer") == (theirs >= ours), budget.group(0))


def _gpu_rows(nb) -> dict[str, tuple[str, str, float]]:
    found = rows(
        output(nb, GPUS),
        rf"^(T4|L4|A100|H100 SXM)\s+\d\.\d\s+\d+ GB\s+(\w+)\s+(\S+)\s+{FLOAT}\s*$",
        "GPU table",
        4,
    )
    return {gpu: (precision, scaling, float(peak.replace(",", ""))) for gpu, precision, scaling, peak in found}


def c_gpus(nb):
    table = _gpu_rows(nb)
    require(table["T4"][:2] == ("fp16", "GradScaler"), f"the T4: fp16 with a loss scaler: {table['T4']}")
    for gpu in ("L4", "A100", "H100 SXM"):
        require(table[gpu][:2] == ("bf16", "none"), f"{gpu}: bf16, no scaler: {table[gpu]}")
    a100_vs_t4 = table["A100"][2] / table["T4"][2]
    h100_vs_a100 = table["H100 SXM"][2] / table["A100"][2]
    require(4.5 < a100_vs_t4 < 5.0, f"an A100 almost five times a T4 on paper: {a100_vs_t4:.2f}")
    require(2.8 < h100_vs_a100 < 3.3, f"an H100 about three times an A100: {h100_vs_a100:.2f}")
    text = output(nb, GPUS)
    measured = number(text, rf"peak MEASURED: {FLOAT} GFLOP/s \(fp32 matmuls on cpu", "measured peak")
    require(measured > 0, f"the CPU's peak is measured, and said to be: {measured}")


def c_data(nb):
    text = output(nb, DATA)
    per_token = rows(text, rf"^(train|val): .* bytes = {FLOAT} bytes per token$", "bytes per token", 2)
    require(all(float(b) == 2 for _, b in per_token), f"two bytes per token: {per_token}")
    first = number(text, r"^the first ids of the train split: \[(\d+),", "first id")
    require(first == 50256, f"the first id is <|endoftext|> = 50256: {first}")
    require("decoded: '<|endoftext|>" in text, "the ids decode back to the text, <|endoftext|> first")


def c_accum(nb):
    text = output(nb, ACCUM)
    found = {int(w): int(a) for w, a in rows(text, r"^(\d+) GPU\(s\): (\d+) micro-batches", "accumulation", 3)}
    require(found == {1: 32, 2: 16, 8: 4}, f"GPT-2's 2**19 tokens in micro-batches of 16 x 1024: {found}")
    require(re.search(r"^3 GPUs: ValueError", text, re.M), f"3 GPUs do not divide the batch:\n{text}")


def c_same_gradient(nb):
    text = output(nb, SAME_GRADIENT)
    difference = number(text, rf"largest difference {FLOAT} ", "difference")
    largest = number(text, rf"largest gradient entry is {FLOAT}\)", "largest entry")
    ratio = number(text, rf"the gradient is {FLOAT} times as long", "ratio")
    require(difference < 1e-5 * largest, f"the same gradient, to float rounding: {difference} vs {largest}")
    require(abs(ratio - 2) < 1e-3, f"without the division, twice as long: {ratio}")


def c_counter(nb):
    text = output(nb, COUNTER)
    measured = number(text, rf"^torch's FLOP counter, forward \+ backward:\s+{FLOAT} FLOPs", "counted")
    formula = number(text, rf"^6·N \+ 12·L·H·D·T:\s+{FLOAT} FLOPs", "formula")
    require(0 < formula / measured - 1 < 1e-3, f"within a tenth of a percent (more: biases): {formula} vs {measured}")


def c_expected(nb):
    text = output(nb, EXPECTED)
    share = number(text, rf"\+ attention \S+ \({FLOAT}%\)", "attention share")
    require(11 < share < 15, f"attention is about an eighth of the work at T = 1024: {share}%")
    per_gpu = rows(text, rf"^\s+(T4|L4|A100|H100 SXM)\s+{FLOAT} tokens/s.*gives back {FLOAT}%\)$", "rows", 4)
    require(all(float(back) == 40.0 for _, _, back in per_gpu), f"estimate_mfu gives back the assumed 40%: {per_gpu}")


def c_fp16(nb):
    text = output(nb, FP16)
    fp16 = number(text, rf"^in fp16: {FLOAT}\s", "fp16")
    bf16 = number(text, rf"in bf16: {FLOAT}$", "bf16")
    back = number(text, rf"divided back in fp32: {FLOAT}$", "unscaled")
    require(fp16 == 0, f"in fp16 the gradient 1e-8 underflows to 0: {fp16}")
    require(abs(bf16 - 1e-8) < 1e-10 and abs(back - 1e-8) < 1e-10, f"bf16 and the scaled fp16 keep it: {bf16}, {back}")
    scaled = number(text, rf"^scaled by 65,536 in fp16: {FLOAT};", "scaled")
    require(6.5e-4 < scaled < 6.6e-4, f"scaled, it is 6.6e-4 (65,536e-8), well inside fp16's range: {scaled}")


def c_clip(nb):
    text = output(nb, CLIP)
    before = number(text, rf"^gradient norm before clipping: {FLOAT}$", "norm before")
    after = number(text, rf"^gradient norm after clipping:\s+{FLOAT} \(clip_norm = 1\.0\)", "norm after")
    require(before > 2, f"the untrained model's gradient is more than twice too long: {before}")
    require(after == 1.0, f"the optimizer stepped with a gradient of norm 1.000, clip_norm: {after}")


def c_choice(nb):
    text = output(nb, CHOICE)
    require(text.strip() == "The training runs below use YOUR training_step (it passed its visible checks).",
            f"the lesson's own answer passes its checks, so the run uses it:\n{text}")  # fmt: skip
    run = output(nb, RUN)
    said = re.search(r"^training with YOUR training_step", run, re.M)
    require(said, f"and section 8's run says it runs on it:\n{run}")


def c_plans(nb):
    found = rows(output(nb, PLANS), r"micro-batch\s+(\d+) x 1024,\s+(\d+) micro-batches per step", "plans", 4)
    require(all(int(b) * int(a) * 1024 == 2**17 for b, a in found), f"accumulation x micro-batch = 2**17: {found}")


def c_reads(nb):
    passes = number(output(nb, READS), rf"whole steps can read [\d,]+: {FLOAT} passes$", "passes")
    require(0 < passes <= 0.015, f"the smoke run reads about 1 % of the train split, no token twice: {passes}")


def c_run(nb):
    text = output(nb, RUN)
    require("device cpu, fp32, fused AdamW False, compile False" in text, f"the CPU run's choices:\n{text}")
    first = number(text, rf"training loss: step 0: {FLOAT},", "first loss")
    last = number(text, rf"step \d+: {FLOAT}$", "last loss")
    require(abs(first - math.log(50257)) < 0.3, f"the loss starts at about ln 50,257 = 10.8: {first}")
    require(last < first - 1.0, f"and falls: {first} -> {last}")


def c_resume(nb):
    text = output(nb, RESUME)
    table = rows(text, rf"^\s*(\d+)\s+{FLOAT}\s+{FLOAT}$", "losses", 3)
    require(all(a == b for _, a, b in table), f"each resumed loss equals the uninterrupted one: {table}")
    require(re.search(r"equal the uninterrupted run's: True \(largest difference 0\.0\)", text), f"equal:\n{text}")


def c_atomic(nb):
    text = output(nb, ATOMIC)
    in_place = re.search(r"^torch\.save in place: .*\n\s+the file .* (is damaged|still loads)", text, re.M)
    atomic = re.search(r"^save_checkpoint: .*\n\s+the file .* (is damaged|still loads): step (\d+)", text, re.M)
    require(in_place and in_place.group(1) == "is damaged", f"the in-place save destroyed the checkpoint:\n{text}")
    require(atomic and atomic.group(1) == "still loads", f"the atomic save left the old one whole:\n{text}")


def c_evals(nb):
    found = [float(v) for _, v in rows(output(nb, EVALS), rf"step (\d+): {FLOAT}", "evaluations", 3)]
    require(found[-1] < found[0] - 1.0, f"the validation loss falls with the training loss: {found}")


def c_mfu(nb):
    text = output(nb, MFU)
    logged = number(text, rf"median MFU {FLOAT}%", "logged MFU")
    again = number(text, rf"\) = {FLOAT}%$", "estimate_mfu")
    require(logged == again > 0, f"the logged MFU is estimate_mfu of the logged tokens/s: {logged} vs {again}")


def c_ranks(nb):
    text = output(nb, RANKS)
    require(re.search(r"twice the rows: True$", text, re.M), f"two ranks together = one process:\n{text}")
    per_gpu = number(text, rf"MFU {FLOAT}% per GPU", "per GPU")
    total = number(text, rf"by mistake {FLOAT}%", "total")
    require(per_gpu == 40 and total == 8 * per_gpu > 100, f"the total gives an impossible MFU: {per_gpu}, {total}")


CLAIMS = [
    Claim(
        "without a GPU, the first output says the run is the CPU smoke configuration",
        c_mode,
        [Break(SHOWN, MODE, r"the CPU SMOKE configuration", "the GPU configuration")],
    ),
    Claim(
        "a line says whose classes run and which model trains: the learner's GPT, or the course's GPT2 (padded)",
        c_model,
        [
            Break(EXACT, YOUR_MODEL, r"configured as a tiny GPT-2", "configured as GPT-2 124M"),
            Break(EXACT, READS, r"(?m)^(.*): 3,32\d,\d{3} parameters$", r"\g<1>: 3,000,000 parameters"),
        ],
    ),
    Claim(
        "when the learner's GPT trains, its cost against the fused attention: per step and in the budget",
        c_cost,
        [
            Break(MARGIN, READS, r"yours takes [\d.]+x", "yours takes 9.99x"),
            Break(EXACT, READS, r"(\d+) steps and [\d,]+ tokens", r"\g<1> steps and 7 tokens"),
        ],
    ),
    Claim(
        "T4: fp16 with a GradScaler, the others bf16; an A100 almost 5x a T4, an H100 about 3x an A100",
        c_gpus,
        [
            Break(TABLE, GPUS, r"(?m)^(T4\s+\S+\s+\S+ GB\s+)fp16", r"\g<1>bf16"),
            Break(MARGIN, GPUS, r"(?m)^(A100 .*\s)312\.0$", r"\g<1>130.0"),
            Break(MARGIN, GPUS, r"(?<=peak MEASURED: )[\d,]+", "0"),
        ],
    ),
    Claim(
        "two bytes per token, and the first id is <|endoftext|>",
        c_data,
        [
            Break(EXACT, DATA, r"= 2 bytes per token", "= 4 bytes per token"),
            Break(EXACT, DATA, r"\[50256,", "[464,"),
        ],
    ),
    Claim(
        "GPT-2's batch: 32, 16 and 4 micro-batches on 1, 2 and 8 GPUs; 3 GPUs raise ValueError",
        c_accum,
        [Break(TABLE, ACCUM, r"8 GPU\(s\): 4 ", "8 GPU(s): 32 ")],
    ),
    Claim(
        "accumulated micro-batches give the big batch's gradient; without the division it is twice as long",
        c_same_gradient,
        [
            Break(MARGIN, SAME_GRADIENT, r"(?<=largest difference )\S+", "3.0e-02"),
            Break(MARGIN, SAME_GRADIENT, r"(?<=the gradient is )\S+", "1.0000"),
        ],
    ),
    Claim(
        "6·N + 12·L·H·D·T is within a tenth of a percent of torch's FLOP counter",
        c_counter,
        [Break(MARGIN, COUNTER, r"(?<=forward \+ backward:)(\s+)20,004,864", r"\g<1>18,004,864")],
    ),
    Claim(
        "attention is about an eighth of GPT-2 small's work at T = 1024; estimate_mfu gives the assumed MFU back",
        c_expected,
        [
            Break(MARGIN, EXPECTED, r"\(13\.\d%\)", "(31.0%)"),
            Break(TABLE, EXPECTED, r"(?m)^(\s+A100 .*gives back )40\.0%", r"\g<1>20.0%"),
        ],
    ),
    Claim(
        "a gradient of 1e-8 is 0 in fp16, kept in bf16, and kept by fp16 when scaled (6.6e-4)",
        c_fp16,
        [
            Break(MARGIN, FP16, r"in fp16: 0 ", "in fp16: 1e-08 "),
            Break(MARGIN, FP16, r"divided back in fp32: \S+$", "divided back in fp32: 0"),
            Break(MARGIN, FP16, r"(?<=in fp16: )0\.000655", "0.0655"),
        ],
    ),
    Claim(
        "one step of the smoke model: a gradient norm above 2 before clipping, 1.000 after (clip_norm = 1.0)",
        c_clip,
        [
            Break(MARGIN, CLIP, r"(?<=before clipping: )\S+", "1.732"),
            Break(MARGIN, CLIP, r"(?<=after clipping:  )\S+", "2.451"),
        ],
    ),
    Claim(
        "the run uses the learner's training_step when it passes its visible checks, and says so",
        c_choice,
        [Break(SHOWN, CHOICE, r"YOUR training_step \(it passed", "the reference (it passed")],
    ),
    Claim(
        "each GPU plan's micro-batches add up to 2**17 tokens a step",
        c_plans,
        [Break(TABLE, PLANS, r"(?m)(micro-batch\s+16 x 1024,\s+)8 micro", r"\g<1>12 micro")],
    ),
    Claim(
        "the smoke run reads about 1 % of Tiny Shakespeare's train split: no token twice",
        c_reads,
        [Break(MARGIN, READS, r"\S+ passes$", "1.40 passes")],
    ),
    Claim(
        "fp32 on the CPU without fused AdamW; the loss falls from about ln 50,257 = 10.8",
        c_run,
        [
            Break(SHOWN, RUN, r"fused AdamW False", "fused AdamW True"),
            Break(ORDER, RUN, r"(?m)(step \d+: )\S+$", r"\g<1>10.790"),
            Break(MARGIN, RUN, r"(?<=training loss: step 0: )\S+,", "9.100,"),
        ],
    ),
    Claim(
        "the resumed run's losses equal the uninterrupted run's, bit for bit",
        c_resume,
        [
            Break(EXACT, RESUME, r"run's: True \(largest difference 0\.0\)", "run's: False (largest difference 0.01)"),
            Break(TABLE, RESUME, r"(?m)^(\s*\d+\s+\S+\s+\S+)\d$", r"\g<1>9"),
        ],
    ),
    Claim(
        "a failed in-place save damages the checkpoint; save_checkpoint leaves the old one whole",
        c_atomic,
        [
            Break(
                EXACT,
                ATOMIC,
                r"is damaged: load_checkpoint raises CheckpointError \(truncated or corrupt\)",
                "still loads: step 24",
            ),
            Break(EXACT, ATOMIC, r"still loads: step \d+", "is damaged: step 0"),
        ],
    ),
    Claim(
        "the validation loss falls with the training loss",
        c_evals,
        [Break(ORDER, EVALS, r"(?<=step )(\d+): [\d.]+$", r"\g<1>: 11.000")],
    ),
    Claim(
        "the logged MFU is estimate_mfu of the logged tokens per second",
        c_mfu,
        [Break(EXACT, MFU, r"\) = \S+%$", ") = 31.00%")],
    ),
    Claim(
        "two ranks together read one process's batch; the total tokens/s would give an MFU above 100 %",
        c_ranks,
        [
            Break(EXACT, RANKS, r"twice the rows: True", "twice the rows: False"),
            Break(MARGIN, RANKS, r"by mistake \d+%", "by mistake 40%"),
        ],
    ),
]
