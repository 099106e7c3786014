"""Claims of lesson 00_welcome: what its text says its code cells show."""

from __future__ import annotations

import re

from tests.claims.common import Break, Claim, Family, close, output, require, tensors

VERSIONS = "platform.python_version()"
ROW_SUMS = 'print("row sums:"'


def welcome_versions(nb):
    text = output(nb, VERSIONS)
    for label in ("Python", "PyTorch", "course_lib", "GPU"):
        require(re.search(rf"^{label}\s+\S", text, re.M), f"no '{label} <version>' line in:\n{text}")


def welcome_row_sums(nb):
    text = output(nb, ROW_SUMS)
    sums = tensors(text.split("row sums:")[-1])[0]
    require(len(sums) == 3 and all(close(s, 1.0, 1e-3) for s in sums), f"row sums are {sums}, not all 1")


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
]
