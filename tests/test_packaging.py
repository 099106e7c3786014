"""Packaging: pyproject and environment.yml agree; the URL is written once; the Makefile and CI agree."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}


def _name(requirement: str) -> tuple[str, str]:
    match = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)", requirement)
    return match.group(1).lower(), match.group(2).split("#")[0].strip()


def test_environment_yml_has_the_same_dependencies_as_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    wanted = dict(_name(r) for r in project["dependencies"])
    extras = project["optional-dependencies"]
    wanted |= dict(_name(r) for r in extras["lab"] + extras["test"] if not r.startswith("course_lib"))
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(
        _name(d.replace("=", "==", 1) if re.match(r"^[\w\-]+=[^=<>]", d) else d)
        for d in env["dependencies"]
        if isinstance(d, str)
    )
    for name, spec in wanted.items():
        conda_name = CONDA_NAMES.get(name, name)
        assert conda_name in conda, f"{conda_name} missing from environment.yml"
        assert conda[conda_name].replace(" ", "") == spec.replace(" ", ""), f"{name}: {conda[conda_name]} != {spec}"


def test_the_repository_url_is_written_once():
    url = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]
    tracked = [
        p
        for p in ROOT.rglob("*")
        if p.is_file()
        and ".venv" not in p.parts
        and ".git" not in p.parts
        and p.suffix in {".py", ".md", ".toml", ".yml", ".cfg"}
    ]
    assert [p.name for p in tracked if url in p.read_text(errors="ignore")] == ["pyproject.toml"]


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in readme and re.search(r"^make test$", ci, re.M)
    assert "make lab" in readme
    makefile = (ROOT / "Makefile").read_text()
    # torch is pinned for a fresh venv, so pip never picks a multi-GB CUDA build on a CPU machine by default.
    assert re.search(r"^TORCH \?= torch==\d", makefile, re.M)


GROUPED = """
import os
import pytest

@pytest.fixture(scope="module", params=[pytest.param(x, marks=pytest.mark.xdist_group(f"g-{x}")) for x in "ab"])
def built_once(request):
    with open(os.environ["SETUPS"], "a") as f:
        f.write(f"{request.param} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    return request.param

@pytest.mark.parametrize("n", range(4))
def test_uses_the_group(built_once, n):
    pass
"""


def test_xdist_groups_hold(tmp_path):
    """`make test` uses `--dist loadgroup` so that each lesson's graded class is built once, on one worker.

    With pytest 9.2 and pytest-xdist 3.8 the groups were silently ignored and every class was built on both
    workers, costing CI minutes; this runs a small session the way `make test` does and counts the set-ups.
    """
    import os
    import subprocess
    import sys

    (tmp_path / "test_grouped.py").write_text(GROUPED)
    setups = tmp_path / "setups.txt"
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q"],
        cwd=tmp_path,
        env=dict(os.environ, SETUPS=str(setups)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    lines = sorted(setups.read_text().split("\n")[:-1])
    assert [line.split()[0] for line in lines] == ["a", "b"], f"each group's fixture must be built once: {lines}"
