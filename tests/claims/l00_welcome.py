"""Claims of lesson 00_welcome: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import (
    Break,
    Claim,
    Family,
    close,
    falling,
    literal,
    number,
    output,
    require,
    rows,
    tensors,
)

VERSIONS = "platform.python_version()"
ROW_SUMS = 'print("row sums:"'
DTYPES = 'print("ids / 2  ->"'
INDEXING = 'print("x[0]      "'
BROADCAST = 'print("column + row:"'
SILENT = 'print("row sums of wrong:"'
BATCHED = 'print("q @ W:"'
DISTANCES = "print(ref.pairwise_distances(a, b))"
MODULE = 'print("parameters:", [name for name, _ in layer.named_parameters()])'
LINEAR = "linear = nn.Linear(4, 3)"
GRADIENT = 'print("w.grad:", w.grad)'
TWICE = 'print("w.grad after a second backward():"'
STEP = 'print("w after one step:"'
DESCENT = "fitted, losses = ref.gradient_descent("


def welcome_versions(nb):
    text = output(nb, VERSIONS)
    for label in ("Python", "PyTorch", "course_lib", "GPU"):
        require(re.search(rf"^{label}\s+\S", text, re.M), f"no '{label} <version>' line in:\n{text}")


def welcome_row_sums(nb):
    text = output(nb, ROW_SUMS)
    sums = tensors(text.split("row sums:")[-1])[0]
    require(len(sums) == 3 and all(close(s, 1.0, 1e-3) for s in sums), f"row sums are {sums}, not all 1")


def _line(text: str, pattern: str, what: str) -> str:
    (found,) = rows(text, pattern, what)[0]
    return found


def primer_dtypes(nb):
    text = output(nb, DTYPES)
    divided = _line(text, r"^ids / 2  -> torch\.(\w+)$", "dtype of ids / 2")
    floored = _line(text, r"^ids // 2 -> torch\.(\w+)$", "dtype of ids // 2")
    count = number(text, r"^numbers in vectors: (\d+)$", "numel")
    require(divided == "float32", f"ids / 2 is {divided}, the text says float32")
    require(floored == "int64", f"ids // 2 is {floored}, the text says int64")
    require(count == 24, f"vectors holds {count} numbers, the text says 2 · 3 · 4 = 24")


def primer_indexing(nb):
    text = output(nb, INDEXING)
    stated = {
        r"x\[0\]": (3, 4),
        r"x\[:, -1\]": (2, 4),
        r"x\[\.\.\., 0\]": (2, 3),
        r"x\[:, None\]": (2, 1, 3, 4),
        r"x\.transpose\(-2, -1\):": (2, 4, 3),
    }
    for label, shape in stated.items():
        got = literal(text, rf"^{label}\s+(\([\d, ]+\))$", label)
        require(got == shape, f"{label} has shape {got}, the text says {shape}")
    entries = tensors(text.split("x[1, 2] =")[-1])[0]
    require(entries == [20, 21, 22, 23], f"x[1, 2] is {entries}, the text says 20, 21, 22, 23")


def primer_broadcast(nb):
    text = output(nb, BROADCAST)
    shape = literal(text, r"^column \+ row: (\([\d, ]+\))$", "shape of column + row")
    require(shape == (3, 4), f"column + row has shape {shape}, the text says (3, 4)")
    grid = tensors(text)[0]
    require(grid == [[c + r for r in (0.0, 1.0, 2.0, 3.0)] for c in (0.0, 10.0, 20.0)], f"the grid is {grid}")
    require(
        re.search(r"^column \+ row\[:, None\]: RuntimeError: .*size of tensor a \(3\).*tensor b \(4\)", text, re.M),
        f"the second sum (3, 1) + (4, 1) should fail on 3 against 4:\n{text}",
    )


def primer_silent(nb):
    text = output(nb, SILENT)
    wrong = tensors(text.split("row sums of wrong:")[-1])[0]
    right = tensors(text.split("row sums of right:")[-1])[0]
    require(len(right) == 4 and all(close(s, 1.0, 1e-4) for s in right), f"rows of right sum to {right}, not 1")
    require(len(wrong) == 4 and not any(close(s, 1.0, 0.02) for s in wrong), f"rows of wrong sum to {wrong}; none is 1")


def primer_batched(nb):
    text = output(nb, BATCHED)
    by_w = literal(text, r"^q @ W: (\([\d, ]+\))$", "q @ W")
    scores = literal(text, r"^q @ k\.transpose\(-2, -1\): (\([\d, ]+\))$", "scores")
    require(by_w == (2, 5, 3), f"q @ W is {by_w}, the text says (2, 5, 3)")
    require(scores == (2, 5, 5), f"the scores are {scores}, the text says (2, 5, 5)")
    same = _line(text, r"^entry 1 equals q\[1\] @ k\[1\]\.T: (\w+)$", "entry 1")
    require(same == "True", f"entry 1 equals q[1] @ k[1].T: {same}")


def primer_distances(nb):
    text = output(nb, DISTANCES)
    example = tensors(text)[0]
    stated = [[0.0, 1.0, 10.0], [5.0, 4.2426, 5.0]]
    shaped = len(example) == 2 and all(len(r) == 3 for r in example)
    require(shaped, f"the example's result is not 2 x 3: {example}")
    pairs = [(g, e) for gr, er in zip(example, stated, strict=True) for g, e in zip(gr, er, strict=True)]
    require(all(close(g, e, 1e-3) for g, e in pairs), f"the example gives {example}, the exercise text says {stated}")
    shape = literal(text, r"^shape: (\([\d, ]+\))$", "shape")
    require(shape == (4, 20, 20), f"the batched distances are {shape}, expected (4, 20, 20)")
    same = _line(text, r"^equals torch\.cdist: (\w+)$", "cdist")
    require(same == "True", f"equals torch.cdist: {same}")


def primer_module(nb):
    text = output(nb, MODULE)
    parameters = literal(text, r"^parameters: (\[.*\])$", "parameters")
    buffers = literal(text, r"^buffers:\s+(\[.*\])$", "buffers")
    state = literal(text, r"^state dict: (\[.*\])$", "state dict")
    require(parameters == ["scale"], f"parameters are {parameters}, the text says ['scale']")
    require(buffers == ["shift"], f"buffers are {buffers}, the text says ['shift']")
    require(state == ["scale", "shift"], f"the state dict holds {state}, the text says scale and shift only")
    flags = re.search(r"^requires grad: scale (\w+) \| shift (\w+)$", text, re.M)
    require(flags and flags.groups() == ("True", "False"), "only scale should require gradients")
    out = tensors(text.split("shift False")[-1])[0]
    require(all(close(v, 0.5, 1e-6) for r in out for v in r), f"layer(zeros) gives {out}, the text says 0.5")
    require("grad_fn=<AddBackward0>" in text, "the output's grad_fn=<AddBackward0> is not shown")


def primer_linear(nb):
    text = output(nb, LINEAR)
    shapes = literal(text, r"^(\{'weight'.*\})$", "parameter shapes")
    require(shapes == {"weight": (3, 4), "bias": (3,)}, f"nn.Linear(4, 3) holds {shapes}")
    count = number(text, r"^numbers learned: (\d+)$", "parameter count")
    require(count == 15, f"nn.Linear(4, 3) learns {count} numbers, the text says 15")
    shape = literal(text, r"^output: (\([\d, ]+\))$", "output shape")
    require(shape == (2, 5, 3), f"the output is {shape}, the text says (2, 5, 3)")
    same = _line(text, r"^equals inputs @ weight\.T \+ bias: (\w+)$", "x @ W.T + b")
    require(same == "True", f"equals inputs @ weight.T + bias: {same}")


def primer_gradient(nb):
    text = output(nb, GRADIENT)
    loss = number(text, r"^loss: " + r"(-?\d+(?:\.\d*)?)$", "loss")
    require(close(loss, 25.0, 1e-4), f"the loss is {loss}, the text says 25")
    grad = tensors(text.split("w.grad:")[-1])[0]
    require(grad == [-30.0, -40.0], f"w.grad is {grad}, the text says [-30, -40]")


def primer_twice(nb):
    grad = tensors(output(nb, TWICE))[0]
    require(grad == [-60.0, -80.0], f"after a second backward w.grad is {grad}, the text says [-60, -80]")


def primer_step(nb):
    text = output(nb, STEP)
    w = tensors(text)[0]
    require(close(w[0], 1.3, 1e-4) and close(w[1], -1.6, 1e-4), f"w after one step is {w}, the text says [1.3, -1.6]")
    before = number(text, r"loss before: (\S+) \|", "loss before")
    after = number(text, r"\| loss after: (\S+)$", "loss after")
    require(close(before, 25.0, 1e-3) and close(after, 6.25, 1e-3), f"the loss went {before} -> {after}, not 25, 6.25")


def primer_descent(nb):
    text = output(nb, DESCENT)
    example = re.search(r"^\(tensor\(\[(\S+), (\S+)\]\), \[(\S+), (\S+)\]\)$", text, re.M)
    require(example, f"the exercise's example output is not shown:\n{text}")
    values = [float(v) for v in example.groups()]
    require(
        all(close(g, e, 1e-4) for g, e in zip(values, [0.75, 1.5, 2.5, 0.625], strict=True)),
        f"the example gives {values}, the exercise text says w = [0.75, 1.5], losses [2.5, 0.625]",
    )
    fitted = literal(text, r"^fitted w: (\[.*\])", "fitted w")
    require(close(fitted[0], 2.0, 0.1) and close(fitted[1], 3.0, 0.1), f"fitted w is {fitted}, not close to 2 and 3")
    losses = [float(v) for (v,) in rows(text, r"^step\s+\d+\s+loss (\S+)$", "losses", at_least=8)]
    require(falling(losses), f"the loss does not fall at every printed step: {losses}")
    require(0.005 <= losses[-1] <= 0.02, f"the last loss {losses[-1]} is not near the noise variance 0.01")


CLAIMS = [
    Claim(
        "The next cell shows the versions you are running and whether a GPU is visible",
        welcome_versions,
        [Break(Family.SHOWN, VERSIONS, r"^GPU\s.*\n", "")],
    ),
    Claim(
        "normalize_rows: divide each row by its sum so that every row sums to 1",
        welcome_row_sums,
        [Break(Family.TENSOR, ROW_SUMS, r"(?<=row sums: tensor\(\[)[^,]*", "0.75")],
    ),
    Claim(
        "`/` gives float32 even for integers, `//` keeps int64; vectors holds 2 · 3 · 4 = 24 numbers",
        primer_dtypes,
        [
            Break(Family.EXACT, DTYPES, r"(?<=ids / 2  -> torch\.)float32", "int64"),
            Break(Family.EXACT, DTYPES, r"(?<=ids // 2 -> torch\.)int64", "float32"),
            Break(Family.EXACT, DTYPES, r"(?<=numbers in vectors: )24", "9"),
        ],
    ),
    Claim(
        "x[0] (3, 4); x[:, -1] (2, 4); x[..., 0] (2, 3); x[:, None] (2, 1, 3, 4); x[1, 2] is 20..23; (2, 4, 3)",
        primer_indexing,
        [
            Break(Family.SHOWN, INDEXING, r"(?<=x\[:, None\] )\(2, 1, 3, 4\)", "(2, 3, 4, 1)"),
            Break(Family.SHOWN, INDEXING, r"(?<=x\[\.\.\., 0\]  )\(2, 3\)", "(3, 4)"),
            Break(Family.TENSOR, INDEXING, r"\[20, 21, 22, 23\]", "[11, 15, 19, 23]"),
            Break(Family.SHOWN, INDEXING, r"(?<=transpose\(-2, -1\): )\(2, 4, 3\)", "(4, 3, 2)"),
        ],
    ),
    Claim(
        "column (3, 1) + row (4,) is (3, 4), as drawn; (3, 1) + (4, 1) fails on 3 against 4",
        primer_broadcast,
        [
            Break(Family.SHOWN, BROADCAST, r"(?<=column \+ row: )\(3, 4\)", "(4, 3)"),
            Break(Family.TENSOR, BROADCAST, r"\[10\., 11\., 12\., 13\.\]", "[10., 10., 10., 10.]"),
            Break(Family.SHOWN, BROADCAST, r"^column \+ row\[:, None\]: RuntimeError.*\n", ""),
        ],
    ),
    Claim(
        "Only the rows of `right` sum to 1; `wrong` divided entry (i, j) by the sum of row j",
        primer_silent,
        [
            Break(Family.TENSOR, SILENT, r"(?<=row sums of wrong: tensor\(\[)[^\]]*", "1., 1., 1., 1."),
            Break(Family.TENSOR, SILENT, r"(?<=row sums of right: tensor\(\[)[^,]*", "0.3173"),
        ],
    ),
    Claim(
        "q @ W is (2, 5, 3); the scores are (2, 5, 5); entry 1 is the product of sequence 1's matrices",
        primer_batched,
        [
            Break(Family.SHOWN, BATCHED, r"(?<=q @ W: )\(2, 5, 3\)", "(2, 5, 8)"),
            Break(Family.SHOWN, BATCHED, r"(?<=transpose\(-2, -1\): )\(2, 5, 5\)", "(2, 8, 8)"),
            Break(Family.EXACT, BATCHED, r"(?<=k\[1\]\.T: )True", "False"),
        ],
    ),
    Claim(
        "pairwise_distances(a, b) on the example gives [[0, 1, 10], [5, 4.2426, 5]] and equals torch.cdist",
        primer_distances,
        [
            Break(Family.TENSOR, DISTANCES, r"4\.2426", "3.0000"),
            Break(Family.EXACT, DISTANCES, r"(?<=equals torch\.cdist: )True", "False"),
            Break(Family.SHOWN, DISTANCES, r"(?<=shape: )\(4, 20, 20\)", "(4, 20)"),
        ],
    ),
    Claim(
        "scale is the one parameter, shift the one buffer; the state dict holds both; output 0.5 with a grad_fn",
        primer_module,
        [
            Break(Family.MEMBERS, MODULE, r"(?<=^parameters: )\['scale'\]", "['scale', 'shift']"),
            Break(Family.MEMBERS, MODULE, r"(?<=^state dict: )\['scale', 'shift'\]", "['scale']"),
            Break(Family.EXACT, MODULE, r"(?<=\| shift )False", "True"),
            Break(Family.TENSOR, MODULE, r"0\.5000, 0\.5000, 0\.5000\],\n", "0.5000, 0.5000, 0.0000],\n"),
            Break(Family.SHOWN, MODULE, r", grad_fn=<AddBackward0>", ""),
        ],
    ),
    Claim(
        "nn.Linear(4, 3): 12 weights and 3 biases, 15 numbers; (2, 5, 4) in gives (2, 5, 3)",
        primer_linear,
        [
            Break(Family.EXACT, LINEAR, r"(?<=numbers learned: )15", "12"),
            Break(Family.SHOWN, LINEAR, r"(?<=^output: )\(2, 5, 3\)", "(2, 5, 4)"),
            Break(Family.SHOWN, LINEAR, r"'weight': \(3, 4\)", "'weight': (4, 3)"),
        ],
    ),
    Claim(
        "the loss is 25 and w.grad = 2 (w · x) x = [-30, -40]",
        primer_gradient,
        [
            Break(Family.TENSOR, GRADIENT, r"-30\.", "30."),
            Break(Family.MARGIN, GRADIENT, r"(?<=^loss: )25\.0", "5.0"),
        ],
    ),
    Claim(
        "Twice the gradient, [-60, -80]: the second gradient was added to the first",
        primer_twice,
        [Break(Family.TENSOR, TWICE, r"-60\., -80\.", "-30., -40.")],
    ),
    Claim(
        "The weights moved to [1.3, -1.6] and the loss fell from 25 to 6.25 in one step",
        primer_step,
        [
            Break(Family.MARGIN, STEP, r"(?<=loss after: )6\.25", "12.5"),
            Break(Family.TENSOR, STEP, r"1\.3000", "1.6000"),
        ],
    ),
    Claim(
        "gradient_descent's example gives ([0.75, 1.5], [2.5, 0.625]); the line's fit is close to 2 and 3, the "
        "loss falls at every step and ends near the noise variance 0.01",
        primer_descent,
        [
            Break(Family.TENSOR, DESCENT, r"0\.625\]\)", "1.25])"),
            Break(Family.MARGIN, DESCENT, r"(?<=fitted w: \[)[\d.]+", "1.5"),
            Break(Family.ORDER, DESCENT, r"(?<=step 50  loss )\S+", "0.0100"),
            Break(Family.MARGIN, DESCENT, r"(?<=step 99  loss )\S+", "0.0500"),
        ],
    ),
]
