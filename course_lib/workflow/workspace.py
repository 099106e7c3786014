"""The learner's own folder, `work/`: where `make lab` opens the course and where a learner's edits live.

The student versions in notebooks/release/ belong to the course: `make release` rewrites them, nbgrader's
`generate_assignment --force` deletes and regenerates their folder, and git tracks them (a `git pull` of an
updated lesson conflicts with a learner's edits there). So `make lab` first runs `copy_new_lessons`: each
student version is copied into the git-ignored work/<lesson>/ folder once, when it is not there yet, and an
existing file is never written, whatever changed upstream. A lesson that arrives with an update appears in
work/ the next time; an updated lesson a learner already has stays as the learner left it (the new version is
in notebooks/release/).

A copy's notebook metadata names the kernel `make lab` starts as JupyterLab will write it (`kernel_metadata`):
JupyterLab writes the running kernel's `kernelspec` and `language_info` (the Python version included) into a
notebook it opens, and a notebook whose metadata changes that way opens already marked as modified.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["WORK_DIR", "Copied", "copy_new_lessons", "kernel_metadata"]

REPO_ROOT = Path(__file__).resolve().parents[2]
WORK_DIR = REPO_ROOT / "work"
RELEASE_DIR = REPO_ROOT / "notebooks" / "release"


@dataclass
class Copied:
    work: Path
    new: list[Path] = field(default_factory=list)  # copied now
    kept: list[Path] = field(default_factory=list)  # already there: left untouched

    def __str__(self) -> str:
        lines = [f"new in work/: {p.parent.name}/{p.name}" for p in self.new]
        lines.append(f"your lessons are in {self.work}/ ({len(self.kept)} already there, left as they are)")
        return "\n".join(lines)


def kernel_metadata() -> dict:
    """The `kernelspec` and `language_info` JupyterLab writes into a notebook when this environment's `python3`
    kernel starts in it (empty when ipykernel or jupyter_client is not installed here)."""
    try:
        from ipykernel.ipkernel import IPythonKernel
        from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
    except ImportError:
        return {}
    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
    except NoSuchKernel:
        return {}
    kernelspec = {"display_name": spec.display_name, "language": spec.language, "name": "python3"}
    return {"kernelspec": kernelspec, "language_info": json.loads(json.dumps(IPythonKernel.language_info))}


def _as_opened(data: bytes, metadata: dict) -> bytes:
    """A notebook's bytes with `metadata` in its notebook metadata, written as nbformat writes notebooks."""
    try:
        nb = json.loads(data)
        nb.setdefault("metadata", {}).update(metadata)
    except (ValueError, AttributeError):  # not a notebook: copied as it is
        return data
    if not metadata:
        return data
    return (json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n").encode("utf-8")


def copy_new_lessons(release: Path = RELEASE_DIR, work: Path = WORK_DIR) -> Copied:
    """Copy each file of release/<lesson>/ to work/<lesson>/ unless a file of that name is already there (notebooks
    with this environment's kernel metadata, `kernel_metadata`)."""
    if not release.is_dir():
        raise FileNotFoundError(f"no student versions at {release}: is this a checkout of the course?")
    result = Copied(work)
    metadata = kernel_metadata()
    for source in sorted(release.glob("*/*")):
        if not source.is_file():
            continue
        target = work / source.parent.name / source.name
        if target.exists():
            result.kept.append(target)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "xb") as out:  # "x": never replaces a file, even one that appeared a moment ago
            data = source.read_bytes()
            out.write(_as_opened(data, metadata) if source.suffix == ".ipynb" else data)
        shutil.copymode(source, target)
        result.new.append(target)
    return result


if __name__ == "__main__":  # `make lab` runs this before starting JupyterLab in work/
    try:
        print(copy_new_lessons(work=Path(sys.argv[1]) if len(sys.argv) > 1 else WORK_DIR))
    except FileNotFoundError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
