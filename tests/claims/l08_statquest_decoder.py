"""Claims of lesson 08_statquest_decoder: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import FLOAT, Break, Claim, Family, literal, number, output, require

SHOWN, MARGIN, ORDER, MEMBERS, TENSOR, TABLE, EXACT = Family

DATA = "inputs, labels = ref.statquest_dataset()\nprint("
MODEL = "untrained = toy.DecoderOnlyTransformer()"
MASKS = "blocked = ref.blocked_mask(T)"
INVERTED = 'wrong = scores.masked_fill(~blocked, float("-inf"))'
AXES = "row_dim, col_dim = 0, 1"
FORWARD = "difference = (ref.decoder_only_forward(params, inputs) - untrained(inputs))"
TRAIN = "model = toy.train_lightning(seed=42, epochs=30)"
PLAIN = "plain = toy.train_plain(seed=42, epochs=30)"
ANSWERS = "trained = {name: value.detach()"
SEEDS = "table = pd.DataFrame(toy.seed_table(seeds))"
ROWS = "row = toy.answer_attention(model, prompt)"
COUNTS = "column = \"<EOS> of 'what is statquest' attends to\""
BUG = "def buggy_generate("
FIXED = "def fixed_generate("


def sq_data(nb):
    text = output(nb, DATA)
    inputs = literal(text, r"^inputs = (\[.*\])$", "inputs")
    labels = literal(text, r"^labels = (\[.*\])$", "labels")
    require(inputs == [[0, 1, 2, 4, 3], [2, 1, 0, 4, 3]], f"inputs: {inputs}")
    require(all(lab == row[1:] + [4] for row, lab in zip(inputs, labels, strict=True)), f"labels: {labels}")


def sq_model(nb):
    count = number(output(nb, MODEL), rf"parameters: {FLOAT}", "parameters")
    require(count == 37, f"thirty-seven trainable numbers, printed {count}")


def sq_masks(nb):
    text = output(nb, MASKS)
    require("blocked == ~allowed: True" in text, f"the masks are negations of each other:\n{text}")
    gap = number(text, rf"two weight matrices: {FLOAT}", "difference of the weights")
    require(gap < 1e-6, f"the two conventions give the same weights: {gap}")


def sq_inverted(nb):
    lines = [line for line in output(nb, INVERTED).splitlines() if line.strip()]
    require(lines[-1].count("nan") == 4, f"the last row is NaN:\n{lines[-1]}")
    require("nan" not in "".join(lines[:-1]), f"only the last row is NaN:\n{lines}")


def _tiny(marker: str, pattern: str, what: str):
    def check(nb):
        value = number(output(nb, marker), pattern, what)
        require(abs(value) < 1e-6, f"{what}: {value}")

    return check


def sq_train(nb):
    text = output(nb, TRAIN)
    steps = number(text, rf"steps: {FLOAT};", "steps")
    first = number(text, rf"first step {FLOAT},", "first loss")
    last = number(text, rf"of the last {FLOAT}$", "last loss")
    require(steps == 60, f"60 optimizer steps: {steps}")
    require(last < first / 3, f"the loss falls: {first} -> {last}")


def sq_no_advertisement(nb):
    shown = []
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            text = out.get("text", "") + "".join(str(v) for v in out.get("data", {}).values())
            shown += [
                line for line in text.splitlines() if "💡 Tip" in line or re.search(r"\blit(models|logger)\b", line)
            ]
    require(not shown, f"Lightning's advertising tip is shown in the lesson:\n{shown}")
    require("steps: 60" in output(nb, TRAIN), "the Lightning training cell shows no output: nothing was checked")


def sq_plain(nb):
    gap = number(output(nb, PLAIN), rf"plain-loop weights: {FLOAT}", "Lightning vs plain loop")
    require(gap == 0.0, f"exactly the same weights: {gap}")


def sq_answers(nb):
    text = output(nb, ANSWERS)
    for prompt in ("what is statquest <EOS>", "statquest is what <EOS>"):
        require(f"{prompt} -> awesome <EOS>\n" in text + "\n", f"{prompt!r} should answer 'awesome <EOS>':\n{text}")


def sq_seeds(nb):
    text = output(nb, SEEDS)
    right = number(text, rf"both prompts: {FLOAT} of", "seeds answering right")
    total = number(text, rf"of {FLOAT}$", "seeds")
    require(total == 30 and right == 30, f"all 30 seeds answer 'awesome <EOS>': {right:.0f} of {total:.0f}")


def sq_rows(nb):
    text = output(nb, ROWS)
    found = re.findall(r"attends to: (\S+) (\S+),", text)
    require(len(found) == 2, f"two prompts' rows:\n{text}")
    for (word, weight), first in zip(found, ("what", "statquest"), strict=True):
        require(word == first and float(weight) > 0.9, f"almost all weight on the first word {first!r}: {text}")


def sq_counts(nb):
    text = output(nb, COUNTS)
    counts = {word: int(n) for word, n in re.findall(r"(?m)^(\S+)\s+(\d+)$", text)}
    require(sum(counts.values()) == 30, f"30 seeds counted: {counts}")
    require(set(counts) == {"what", "is", "statquest", "<EOS>"}, f"every word of the question is chosen: {counts}")
    rest = max(counts["what"], counts["statquest"])
    require(counts["is"] > counts["<EOS>"] > rest, f"'is' most often, then <EOS>, then a few each: {counts}")


def sq_bug(nb):
    text = output(nb, BUG)
    written = re.search(r"written: \[(.*)\]", text)
    require(written is not None and written.group(1).count("tensor(") == 3, f"three tensors written:\n{text}")
    require("decoding failed: KeyError tensor(" in text, f"decoding fails with a KeyError:\n{text}")
    require("written: [3, 4] -> ['awesome', '<EOS>']" in output(nb, FIXED), "the fixed loop stops after <EOS>")


CLAIMS = [
    Claim(
        "without the tips Lightning prints to advertise its cloud services (its other messages and warnings "
        "still show)",
        sq_no_advertisement,
        [
            Break(
                SHOWN,
                TRAIN,
                r"^steps:",
                "💡 Tip: For seamless cloud logging and experiment tracking, try installing [litlogger](...)\nsteps:",
            ),
            Break(SHOWN, TRAIN, r"^steps:", "try installing litmodels to enable LitModelCheckpoint\nsteps:"),
        ],
    ),
    Claim(
        "the labels are the inputs moved one step to the left, with a final <EOS>",
        sq_data,
        [Break(TENSOR, DATA, r"(?m)^(labels = \[\[1, 2, 4, 3, )4", r"\g<1>3")],
    ),
    Claim("thirty-seven trainable numbers", sq_model, [Break(EXACT, MODEL, r"parameters: 37", "parameters: 34")]),
    Claim(
        "one mask is the negation of the other; the softmax then gives the same weights",
        sq_masks,
        [
            Break(SHOWN, MASKS, r"~allowed: True", "~allowed: False"),
            Break(MARGIN, MASKS, r"(?<=matrices: )\S+", "0.25"),
        ],
    ),
    Claim(
        "the mask read the wrong way: the last position has no key left and its softmax is NaN",
        sq_inverted,
        [Break(SHOWN, INVERTED, r"\[  nan,   nan,   nan,   nan\]", "[0.250, 0.250, 0.250, 0.250]")],
    ),
    Claim(
        "one sentence through the unbatched and the batch-first code gives the same numbers",
        _tiny(AXES, rf"largest difference: {FLOAT}", "unbatched vs batched"),
        [Break(MARGIN, AXES, r"(?<=largest difference: )\S+", "0.31")],
    ),
    Claim(
        "ref.decoder_only_forward computes what the module computes",
        _tiny(FORWARD, rf"from the module: {FLOAT}", "forward vs module"),
        [Break(MARGIN, FORWARD, r"(?<=from the module: )\S+", "0.5")],
    ),
    Claim(
        "60 optimizer steps; the loss falls",
        sq_train,
        [
            Break(EXACT, TRAIN, r"steps: 60", "steps: 30"),
            Break(MARGIN, TRAIN, r"(?<=of the last )\S+", "1.2000"),
        ],
    ),
    Claim(
        "the plain loop ends with exactly the same weights as Lightning",
        sq_plain,
        [Break(MARGIN, PLAIN, r"(?<=plain-loop weights: )\S+", "1e-07")],
    ),
    Claim(
        "the trained model answers both prompts 'awesome <EOS>'",
        sq_answers,
        [Break(SHOWN, ANSWERS, r"(?m)^(statquest is what <EOS> -> )awesome", r"\g<1>what")],
    ),
    Claim(
        "all 30 seeds answer 'awesome <EOS>' to both prompts",
        sq_seeds,
        [Break(EXACT, SEEDS, r"both prompts: 30", "both prompts: 29")],
    ),
    Claim(
        "the seed-42 model's answering position puts almost all its weight on the first word of the prompt",
        sq_rows,
        [
            Break(MARGIN, ROWS, r"(attends to: what )\S+,", r"\g<1>0.40,"),
            Break(MEMBERS, ROWS, r"attends to: statquest", "attends to: is"),
        ],
    ),
    Claim(
        "over the 30 seeds the most common choice is 'is'; next comes the <EOS> itself, and a few seeds each read "
        "'what' or 'statquest': every word of the question is some seed's choice",
        sq_counts,
        [
            Break(ORDER, COUNTS, r"(?m)^is(\s+)\d+$", r"is\g<1>2"),
            Break(ORDER, COUNTS, r"(?m)^(is\s+)(\d+)\n(<EOS>\s+)(\d+)$", r"\g<1>\g<4>\n\g<3>\g<2>"),
            Break(MEMBERS, COUNTS, r"(?m)^<EOS>(\s+\d+)$", r"statquest\g<1>"),
            Break(MEMBERS, COUNTS, r"(?m)^what(\s+\d+)$", r"awesome\g<1>"),
        ],
    ),
    Claim(
        "the buggy loop never sees its <EOS> (a third token) and decoding fails; the fix stops after <EOS>",
        sq_bug,
        [
            Break(SHOWN, BUG, r"decoding failed: KeyError", "decoded:"),
            Break(EXACT, BUG, r", tensor\(3\)\]", "]"),
        ],
    ),
]
