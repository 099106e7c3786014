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
