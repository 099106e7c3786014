"""Data files of the course: a registry of public files, the small ones committed, a verified cache, mirrors.

Used from lesson 00 (environment check) on; lesson 01 builds GPT-2's tokenizer from two of these files.
``data/registry.json`` lists each file's public URL, sha256 and size, and whether the file is committed in
``data/`` (the small files the CPU lessons need are, so a clone works offline). ``data_path(name)`` returns a
local copy whose sha256 has been checked, looking in this order:

1. the committed copy, ``<repo>/data/<name>`` (checked once per process, again only if the file changes);
2. the cache, ``<repo>/data/cache`` (or the folder in ``$COURSE_DATA_CACHE``);
3. mirror folders: those in ``$COURSE_DATA_MIRROR`` (separated by ``os.pathsep``);
4. a download from the file's URL.

A committed copy whose sha256 is wrong is an error that says how to restore it; it is never replaced or
deleted. A file only enters the cache after its sha256 matched, through a temporary file that is renamed into
place, so the cache never holds a partial or corrupt copy.

Shape legend (for symmetry with the other modules; nothing here has tensor shapes): B batch, T time,
H heads, D head size, C/d_model channels, V vocabulary.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import stat
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]  # course_lib is installed editable from a clone
DATA_DIR = REPO_ROOT / "data"  # the committed data files and their registry
REGISTRY_PATH = DATA_DIR / "registry.json"
CACHE_ENV = "COURSE_DATA_CACHE"
MIRROR_ENV = "COURSE_DATA_MIRROR"
DOWNLOAD_TIMEOUT_S = 60.0
GPT2_SPECIAL_TOKENS = {"<|endoftext|>": 50256}
GPT2_VOCAB_SIZE = 50257

Downloader = Callable[[str, Path], None]  # (url, destination file) -> None; raises on failure


class DataError(RuntimeError):
    """A data file could not be found, fetched or verified; the message says how to fix it."""


@dataclass(frozen=True)
class DataFile:
    """One entry of ``data/registry.json``."""

    name: str  # file name in the cache and in mirror folders
    url: str  # public location it is downloaded from
    sha256: str  # hex digest every local copy must match
    size: int  # bytes
    description: str  # one line for people
    committed: bool = False  # whether the file is committed in data/ (else it is cached, mirrored or downloaded)


def load_registry(path: str | os.PathLike | None = None) -> dict[str, DataFile]:
    """Read the registry (default ``<repo>/data/registry.json``) as ``{name: DataFile}``."""
    path = REGISTRY_PATH if path is None else Path(path)
    with open(path, encoding="utf-8") as file:
        raw = json.load(file)
    return {name: DataFile(name=name, **fields) for name, fields in raw.items()}


def cache_dir() -> Path:
    """The cache folder: ``$COURSE_DATA_CACHE`` if set, else ``<repo>/data/cache``."""
    override = os.environ.get(CACHE_ENV)
    return Path(override).expanduser() if override else REPO_ROOT / "data" / "cache"


def mirror_dirs() -> list[Path]:
    """Folders searched after the cache and before downloading: those in ``$COURSE_DATA_MIRROR``."""
    return [Path(entry).expanduser() for entry in os.environ.get(MIRROR_ENV, "").split(os.pathsep) if entry]


def sha256_of(path: str | os.PathLike) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def urllib_download(url: str, destination: Path, timeout: float = DOWNLOAD_TIMEOUT_S) -> None:
    """Write the bytes at ``url`` (https, or http/file for local tests) to ``destination``."""
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("https", "http", "file"):
        raise ValueError(f"url must be https://, http:// or file://, got {url!r}")
    with urllib.request.urlopen(url, timeout=timeout) as response, open(destination, "wb") as out:
        shutil.copyfileobj(response, out, length=1 << 20)


# Committed copies whose sha256 matched in this process, with the (sha256, inode, size, mtime) they had then:
# while those stay the same the file is not read again.
_verified: dict[Path, tuple[str, int, int, int]] = {}


def _committed_copy(entry: DataFile) -> Path | None:
    """The committed ``data/<name>`` after checking its sha256; None if the entry is not committed or absent.

    Raises ``DataError`` when the copy is there but its sha256 differs: it is left untouched, for the
    learner to restore from git (a download must not hide a damaged checkout).
    """
    if not entry.committed:
        return None
    path = DATA_DIR / entry.name
    try:
        info = path.stat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    seen = (entry.sha256, info.st_ino, info.st_size, info.st_mtime_ns)
    if _verified.get(path) == seen:
        return path
    found = sha256_of(path)
    if found != entry.sha256:
        _verified.pop(path, None)
        raise DataError(
            f"the committed data file {entry.name!r} is damaged: {path} has sha256 {found} "
            f"({info.st_size:,} bytes), but data/registry.json expects sha256 {entry.sha256} "
            f"({entry.size:,} bytes). It was left as it is.\n"
            f"To fix it: restore it from git with `git checkout HEAD -- data/{entry.name}` (run in the "
            f"repository folder {DATA_DIR.parent}), or download it again from {entry.url} into {path}."
        )
    _verified[path] = seen
    return path


class _HashMismatch(Exception):
    def __init__(self, found: str):
        super().__init__(found)
        self.found = found


def _install(entry: DataFile, target: Path, write: Callable[[Path], None]) -> None:
    """Let ``write`` fill a temporary file next to ``target``; rename it to ``target`` only if it verifies."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # a unique hidden name in the same folder (so the final rename is atomic); created by ``write`` with
    # the usual permissions
    temporary = target.with_name(f".{entry.name}.{uuid.uuid4().hex}.part")
    try:
        write(temporary)
        found = sha256_of(temporary)
        if found != entry.sha256:
            raise _HashMismatch(found)
        os.replace(temporary, target)  # atomic: readers see the old state or the verified file
    finally:
        temporary.unlink(missing_ok=True)


def data_path(
    name: str,
    *,
    registry: Mapping[str, DataFile] | None = None,
    download: Downloader | None = None,
) -> Path:
    """Path of a verified local copy of the registered file ``name`` (committed → cache → mirrors → download).

    ``registry`` and ``download`` (default ``urllib_download``) exist so tests can point at local files;
    learners never need them. Raises ``ValueError`` for an unknown name, and ``DataError`` when a committed
    copy is damaged or no verified copy can be obtained.
    """
    download = urllib_download if download is None else download
    files = load_registry() if registry is None else registry
    if not isinstance(name, str):
        raise TypeError(f"name must be a str such as 'the-verdict.txt', got {type(name).__name__}")
    if name not in files:
        raise ValueError(f"unknown data file {name!r}; known files: {', '.join(sorted(files))}")
    entry = files[name]
    committed = _committed_copy(entry)
    if committed is not None:
        return committed
    target = cache_dir() / name
    problems: list[str] = []
    if entry.committed:
        problems.append(
            f"the committed copy {DATA_DIR / name} is missing (restore it with `git checkout HEAD -- data/{name}`)"
        )

    if target.is_file():
        found = sha256_of(target)
        if found == entry.sha256:
            return target
        target.unlink(missing_ok=True)  # never keep a corrupt copy around
        problems.append(f"the cached copy {target} had sha256 {found}; it was deleted")

    for folder in mirror_dirs():
        candidate = folder / name
        if not candidate.is_file():
            continue
        found = sha256_of(candidate)
        if found != entry.sha256:
            problems.append(f"the mirror copy {candidate} has sha256 {found}")
            continue
        try:
            _install(entry, target, lambda temporary, source=candidate: shutil.copyfile(source, temporary))
        except OSError:
            return candidate  # verified, but the cache is not writable: read the mirror in place
        except _HashMismatch as mismatch:  # the mirror changed while we copied it
            problems.append(f"the copy of {candidate} had sha256 {mismatch.found}")
            continue
        return target

    try:
        _install(entry, target, lambda temporary: download(entry.url, temporary))
        return target
    except _HashMismatch as mismatch:
        problems.append(f"the download from {entry.url} had sha256 {mismatch.found}; it was discarded")
        cause: BaseException = mismatch
    except Exception as error:  # an offline machine, a timeout, an HTTP error, an unwritable cache ...
        problems.append(f"the download from {entry.url} failed: {type(error).__name__}: {error}")
        cause = error

    details = "\n".join(f"  - {problem}" for problem in problems)
    raise DataError(
        f"could not get a verified copy of the data file {name!r} from {entry.url}\n"
        f"expected sha256 {entry.sha256} ({entry.size:,} bytes). What happened:\n{details}\n"
        "To fix it: connect to the internet and run again; or download the file yourself and set "
        f"{MIRROR_ENV} to the folder holding it; or delete the cached copy {target} if it is there."
    ) from cause


def load_text(name: str, **kwargs) -> str:
    """Contents of the registered text file ``name`` (utf-8); keyword arguments go to ``data_path``."""
    return data_path(name, **kwargs).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def gpt2_encoding():
    """tiktoken's ``gpt2`` encoding built offline from the registry's ``encoder.json`` and ``vocab.bpe``.

    Lesson 01, section "GPT-2's tokenizer". Equal to ``tiktoken.get_encoding("gpt2")`` but needs no network
    (the two files are committed in ``data/``). Returns a ``tiktoken.Encoding`` (cached: built once).
    """
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str

    files = load_registry()
    mergeable_ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(data_path("vocab.bpe")),
        encoder_json_file=str(data_path("encoder.json")),
        # tiktoken keeps its own copy in a temporary cache; the hashes make it check that copy too
        vocab_bpe_hash=files["vocab.bpe"].sha256,
        encoder_json_hash=files["encoder.json"].sha256,
    )
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=r50k_pat_str,
        mergeable_ranks=mergeable_ranks,
        special_tokens=dict(GPT2_SPECIAL_TOKENS),
        explicit_n_vocab=GPT2_VOCAB_SIZE,
    )
