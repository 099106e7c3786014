"""Tests of course_lib.data: the registry, the committed files, the verified cache, mirrors, downloads and
GPT-2's encoding.

Every test that touches the cache points ``COURSE_DATA_CACHE`` at a temporary folder, so the real cache
is never modified; tests that damage a committed file do it in a temporary copy of ``data/``.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import threading
from pathlib import Path

import pytest

from course_lib import data
from course_lib.data import DataError, DataFile, data_path, gpt2_encoding, load_registry, load_text

COMMITTED = ["tinyshakespeare.txt", "the-verdict.txt", "encoder.json", "vocab.bpe"]
CONTENT = b"To be, or not to be, that is the question.\n" * 50


def sha256_hex(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


@pytest.fixture
def env(tmp_path, monkeypatch):
    """Empty cache and mirror folders; the mirror env var names a missing folder first, then ours."""
    cache, mirror, server = tmp_path / "cache", tmp_path / "mirror", tmp_path / "server"
    mirror.mkdir()
    server.mkdir()
    monkeypatch.setenv(data.CACHE_ENV, str(cache))
    monkeypatch.setenv(data.MIRROR_ENV, f"{tmp_path / 'missing'}{os.pathsep}{mirror}")
    return cache, mirror, server


def tiny_registry(url: str, name: str = "tiny-course-test.txt") -> dict[str, DataFile]:
    """A registry with one small file that no real mirror holds."""
    entry = DataFile(name=name, url=url, sha256=sha256_hex(CONTENT), size=len(CONTENT), description="test")
    return {name: entry}


@pytest.fixture
def no_network(monkeypatch):
    """Any download or socket connection fails the test."""

    def blocked(*args, **kwargs):
        raise AssertionError(f"no network use expected, but it was attempted: {args}")

    monkeypatch.setattr(data, "urllib_download", blocked)
    monkeypatch.setattr(socket.socket, "connect", blocked)
    monkeypatch.setattr(socket, "create_connection", blocked)


@pytest.fixture
def data_copy(tmp_path, monkeypatch):
    """A temporary copy of the committed data folder (no cache), used by data_path instead of the real one."""
    copy = tmp_path / "data-copy"
    shutil.copytree(data.DATA_DIR, copy, ignore=shutil.ignore_patterns("cache"))
    monkeypatch.setattr(data, "DATA_DIR", copy)
    return copy


def refuse_download(url, destination):
    raise AssertionError(f"no download expected, but one was attempted for {url}")


def offline(url, destination):
    raise OSError("network is unreachable (simulated offline machine)")


def files_in(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


# ----------------------------------------------------------------------------------------------
# The registry


def test_registry_matches_the_committed_files():
    registry = load_registry()
    assert set(registry) == set(COMMITTED)
    for name, entry in registry.items():
        assert entry.committed, name
        content = (data.DATA_DIR / name).read_bytes()
        assert entry.name == name
        assert entry.size == len(content), name
        assert entry.sha256 == sha256_hex(content), name
        assert entry.url.startswith("https://"), name
        assert entry.description.strip() and "\n" not in entry.description


def test_registry_json_is_valid_and_complete():
    raw = json.loads((data.REPO_ROOT / "data" / "registry.json").read_text(encoding="utf-8"))
    for name, fields in raw.items():
        assert set(fields) == {"url", "sha256", "size", "committed", "description"}, name
        assert len(fields["sha256"]) == 64 and int(fields["sha256"], 16) >= 0
        assert isinstance(fields["size"], int) and fields["size"] > 0
        assert isinstance(fields["committed"], bool)
        assert (data.DATA_DIR / name).is_file() == fields["committed"], name  # committed means here, and only then


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown data file 'nope.txt'.*the-verdict\.txt"):
        data_path("nope.txt")
    with pytest.raises(TypeError, match="name must be a str"):
        data_path(Path("the-verdict.txt"))


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.skipif(not (data.REPO_ROOT / ".git").exists(), reason="needs a git checkout of the course")
def test_committed_files_are_in_git_and_the_cache_is_ignored():
    def git(*args):
        return subprocess.run(["git", *args], cwd=data.REPO_ROOT, capture_output=True, text=True)

    tracked = set(git("ls-files", "data").stdout.split())
    assert {f"data/{name}" for name in COMMITTED} <= tracked
    assert {"data/registry.json", "data/README.md", "data/LICENSE-gpt2.txt"} <= tracked
    for name in COMMITTED:
        assert git("check-ignore", "-q", f"data/{name}").returncode == 1, f"data/{name} must not be ignored"
        # git must not convert line endings: that would change the sha256
        assert git("check-attr", "text", f"data/{name}").stdout.strip().endswith("text: unset"), name
    assert git("check-ignore", "-q", "data/cache/encoder.json").returncode == 0, "data/cache/ must stay ignored"


def test_the_data_readme_names_every_committed_file_with_its_source_and_hash():
    readme = (data.DATA_DIR / "README.md").read_text(encoding="utf-8")
    for entry in load_registry().values():
        assert entry.name in readme and entry.url in readme and entry.sha256 in readme, entry.name
        assert f"{entry.size:,}" in readme, entry.name
    assert "public domain" in readme and "Modified MIT" in readme
    notice = (data.DATA_DIR / "LICENSE-gpt2.txt").read_text(encoding="utf-8")
    assert notice.startswith("Modified MIT License\n") and "Copyright (c) 2019 OpenAI" in notice


# ----------------------------------------------------------------------------------------------
# The committed files


@pytest.mark.parametrize("name", COMMITTED)
def test_committed_file_is_found_offline_without_cache_or_mirror(env, no_network, tmp_path, monkeypatch, name):
    cache, _, _ = env
    empty = tmp_path / "empty-mirror"
    empty.mkdir()
    monkeypatch.setenv(data.MIRROR_ENV, str(empty))
    monkeypatch.setattr(data, "_verified", {})  # as in a fresh process: the file is hashed
    path = data_path(name)
    assert path == data.DATA_DIR / name
    assert data.sha256_of(path) == load_registry()[name].sha256
    assert not cache.exists()  # nothing was copied or fetched


def test_committed_file_is_hashed_once_while_it_is_unchanged(env, data_copy, monkeypatch):
    hashed = []
    real_sha256_of = data.sha256_of
    monkeypatch.setattr(data, "sha256_of", lambda path: hashed.append(Path(path).name) or real_sha256_of(path))
    assert data_path("the-verdict.txt", download=refuse_download) == data_copy / "the-verdict.txt"
    assert data_path("the-verdict.txt", download=refuse_download) == data_copy / "the-verdict.txt"
    assert hashed == ["the-verdict.txt"]

    with open(data_copy / "the-verdict.txt", "ab") as file:  # changed later in the same process: seen
        file.write(b"\n")
    with pytest.raises(DataError, match="damaged"):
        data_path("the-verdict.txt", download=refuse_download)


def test_damaged_committed_file_is_a_clear_error_and_is_left_alone(env, data_copy):
    _, mirror, server = env
    entry = load_registry()["the-verdict.txt"]
    good = (data_copy / entry.name).read_bytes()
    damaged = good.replace(b"Gisburn", b"Gisborn", 1)
    (data_copy / entry.name).write_bytes(damaged)
    (mirror / entry.name).write_bytes(good)  # a good copy elsewhere must not silently take over
    (server / entry.name).write_bytes(good)

    def good_download(url, destination):
        destination.write_bytes(good)

    with pytest.raises(DataError) as info:
        data_path(entry.name, download=good_download)
    message = str(info.value)
    assert repr(entry.name) in message and str(data_copy / entry.name) in message
    assert entry.sha256 in message and sha256_hex(damaged) in message  # expected and actual
    assert f"git checkout HEAD -- data/{entry.name}" in message and entry.url in message  # the fix
    assert (data_copy / entry.name).read_bytes() == damaged  # neither replaced nor deleted
    cache, _, _ = env
    assert files_in(cache) == []


def test_missing_committed_file_falls_back_to_mirror_and_says_so_when_all_fails(env, data_copy):
    cache, mirror, _ = env
    good = (data_copy / "the-verdict.txt").read_bytes()
    (data_copy / "the-verdict.txt").unlink()
    with pytest.raises(DataError) as info:
        data_path("the-verdict.txt", download=offline)
    assert "git checkout HEAD -- data/the-verdict.txt" in str(info.value)
    (mirror / "the-verdict.txt").write_bytes(good)
    assert data_path("the-verdict.txt", download=refuse_download) == cache / "the-verdict.txt"
    assert not (data_copy / "the-verdict.txt").exists()  # the committed folder is never written


def test_nothing_in_the_product_or_tests_points_outside_the_repository():
    old_folder = "shar" + "ed"  # spelt in two pieces, so that this file does not match its own pattern
    path_like = re.compile(rf"""(?i)(["']){old_folder}\1|[_/\\]{old_folder}\b|\b{old_folder}(_data\b|[/\\])""")
    root = data.REPO_ROOT
    files = [*root.glob("course_lib/**/*.py"), *root.glob("tests/**/*.py"), root / "Makefile", root / "pyproject.toml"]
    files += [*root.glob("notebooks/*/*/*.ipynb"), root / "README.md", root / "notebooks" / "AUTHORING.md"]
    files += [*root.glob("docs/*.md")]

    def lines(path):  # a notebook's cell text, not its JSON (where "\\n" ends each line with a backslash)
        if path.suffix != ".ipynb":
            return path.read_text(encoding="utf-8").splitlines()
        return [line for cell in json.loads(path.read_text(encoding="utf-8"))["cells"] for line in cell["source"]]

    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in files
        for number, line in enumerate(lines(path), 1)
        if path_like.search(line)
    ]
    assert len(files) > 40 and found == []


# ----------------------------------------------------------------------------------------------
# Cache, mirrors, downloads (on a tiny registry of our own)


def test_cache_hit_needs_no_mirror_and_no_download(env):
    cache, _, _ = env
    cache.mkdir()
    (cache / "tiny-course-test.txt").write_bytes(CONTENT)
    before = (cache / "tiny-course-test.txt").stat()
    registry = tiny_registry("https://example.invalid/tiny.txt")
    path = data_path("tiny-course-test.txt", registry=registry, download=refuse_download)
    assert path == cache / "tiny-course-test.txt"
    assert path.stat().st_ino == before.st_ino and path.stat().st_mtime_ns == before.st_mtime_ns


def test_mirror_copy_goes_into_the_cache(env):
    cache, mirror, _ = env
    (mirror / "tiny-course-test.txt").write_bytes(CONTENT)
    registry = tiny_registry("https://example.invalid/tiny.txt")
    path = data_path("tiny-course-test.txt", registry=registry, download=refuse_download)
    assert path == cache / "tiny-course-test.txt"
    assert path.read_bytes() == CONTENT
    assert files_in(cache) == ["tiny-course-test.txt"]  # no temporary files left behind
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~umask  # ordinary permissions, like any new file
    assert load_text("tiny-course-test.txt", registry=registry, download=refuse_download) == CONTENT.decode()


def test_corrupt_cached_file_is_replaced(env):
    cache, mirror, _ = env
    cache.mkdir()
    (cache / "tiny-course-test.txt").write_bytes(CONTENT[:-1] + b"?")
    (mirror / "tiny-course-test.txt").write_bytes(CONTENT)
    registry = tiny_registry("https://example.invalid/tiny.txt")
    path = data_path("tiny-course-test.txt", registry=registry, download=refuse_download)
    assert path.read_bytes() == CONTENT
    assert files_in(cache) == ["tiny-course-test.txt"]


def test_corrupt_mirror_file_is_reported_with_name_url_and_hashes(env):
    cache, mirror, _ = env
    bad = CONTENT.replace(b"question", b"answer!!")
    (mirror / "tiny-course-test.txt").write_bytes(bad)
    registry = tiny_registry("https://example.invalid/tiny.txt")
    with pytest.raises(DataError) as info:
        data_path("tiny-course-test.txt", registry=registry, download=offline)
    message = str(info.value)
    assert "tiny-course-test.txt" in message and "https://example.invalid/tiny.txt" in message
    assert sha256_hex(CONTENT) in message and sha256_hex(bad) in message  # expected vs found
    assert data.MIRROR_ENV in message and "internet" in message  # how to fix it
    assert "simulated offline" in message
    assert files_in(cache) == []
    assert isinstance(info.value, RuntimeError)


def test_download_from_file_url_is_verified_and_cached(env):
    cache, _, server = env
    (server / "tiny.txt").write_bytes(CONTENT)
    registry = tiny_registry((server / "tiny.txt").as_uri())
    path = data_path("tiny-course-test.txt", registry=registry)  # the real urllib downloader
    assert path == cache / "tiny-course-test.txt" and path.read_bytes() == CONTENT
    assert files_in(cache) == ["tiny-course-test.txt"]


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # keep test output clean
        pass


@pytest.fixture
def http_server(env):
    _, _, server_dir = env
    handler = functools.partial(QuietHandler, directory=str(server_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", server_dir
    server.shutdown()
    server.server_close()
    thread.join()


def test_download_over_local_http_server(env, http_server):
    cache, _, _ = env
    base_url, server_dir = http_server
    (server_dir / "tiny.txt").write_bytes(CONTENT)
    registry = tiny_registry(f"{base_url}/tiny.txt")
    path = data_path("tiny-course-test.txt", registry=registry)
    assert path.read_bytes() == CONTENT
    # a second call is a cache hit: no download attempted
    assert data_path("tiny-course-test.txt", registry=registry, download=refuse_download) == path


def test_download_with_wrong_content_is_rejected_and_leaves_nothing(env, http_server):
    cache, _, _ = env
    base_url, server_dir = http_server
    (server_dir / "tiny.txt").write_bytes(CONTENT + b"tampered")
    registry = tiny_registry(f"{base_url}/tiny.txt")
    with pytest.raises(DataError, match=sha256_hex(CONTENT + b"tampered")):
        data_path("tiny-course-test.txt", registry=registry)
    assert files_in(cache) == []


def test_download_http_error_and_partial_write_leave_nothing(env, http_server):
    cache, _, _ = env
    base_url, _ = http_server
    registry = tiny_registry(f"{base_url}/missing.txt")
    with pytest.raises(DataError, match="HTTPError"):
        data_path("tiny-course-test.txt", registry=registry)

    def dies_halfway(url, destination):
        destination.write_bytes(CONTENT[:100])
        raise TimeoutError("connection dropped")

    with pytest.raises(DataError, match="connection dropped"):
        data_path("tiny-course-test.txt", registry=registry, download=dies_halfway)
    assert files_in(cache) == []


def test_unwritable_cache_falls_back_to_the_verified_mirror(env, monkeypatch, tmp_path):
    _, mirror, _ = env
    (mirror / "tiny-course-test.txt").write_bytes(CONTENT)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(data.CACHE_ENV, str(blocker / "cache"))  # mkdir will fail
    registry = tiny_registry("https://example.invalid/tiny.txt")
    path = data_path("tiny-course-test.txt", registry=registry, download=refuse_download)
    assert path == mirror / "tiny-course-test.txt"


def test_downloader_rejects_other_schemes(tmp_path):
    with pytest.raises(ValueError, match="ftp://"):
        data.urllib_download("ftp://example.invalid/x", tmp_path / "x")


def test_real_file_not_committed_comes_from_a_mirror_into_a_fresh_cache(env, monkeypatch, tmp_path):
    cache, mirror, _ = env
    shutil.copyfile(data.DATA_DIR / "the-verdict.txt", mirror / "the-verdict.txt")
    monkeypatch.setattr(data, "DATA_DIR", tmp_path / "no-committed-files")  # as if it were an optional file
    text = load_text("the-verdict.txt", download=refuse_download)
    assert (cache / "the-verdict.txt").is_file()
    assert text == (mirror / "the-verdict.txt").read_text(encoding="utf-8")
    assert len(text) == 20479  # all ascii


# ----------------------------------------------------------------------------------------------
# GPT-2's encoding, built offline


@pytest.fixture(scope="module")
def gpt2():
    """The memoized encoding and the two committed texts."""
    texts = {name: load_text(name) for name in ("tinyshakespeare.txt", "the-verdict.txt")}
    return gpt2_encoding(), texts


def test_gpt2_encoding_known_facts(gpt2):
    gpt2, _ = gpt2
    assert gpt2.name == "gpt2" and gpt2.n_vocab == 50257
    assert gpt2.encode("Hello world") == [15496, 995]
    assert gpt2.encode("<|endoftext|>", allowed_special="all") == [50256]
    assert gpt2.decode([15496, 995]) == "Hello world"
    assert gpt2_encoding() is gpt2  # built once


def test_gpt2_token_counts_of_the_course_texts(gpt2):
    gpt2, texts = gpt2
    assert len(gpt2.encode_ordinary(texts["tinyshakespeare.txt"])) == 338_025
    assert len(gpt2.encode_ordinary(texts["the-verdict.txt"])) == 5_145


def test_gpt2_encoding_builds_offline_from_the_committed_files(env, no_network, tmp_path, monkeypatch):
    cache, _, _ = env
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))  # tiktoken's own copy, fresh
    # __wrapped__ is the function behind the memo: it really builds the encoding again
    encoding = gpt2_encoding.__wrapped__()
    assert files_in(cache) == []  # read from data/, nothing cached or fetched
    assert encoding.encode("Hello world") == [15496, 995]


@pytest.mark.network
@pytest.mark.parametrize("name", ["the-verdict.txt", "tinyshakespeare.txt", "encoder.json", "vocab.bpe"])
def test_registry_urls_serve_the_registered_files(tmp_path, name):
    entry = load_registry()[name]
    destination = tmp_path / name
    try:
        data.urllib_download(entry.url, destination, timeout=15)
    except OSError as error:
        pytest.skip(f"no network to reach {entry.url}: {error}")
    assert destination.stat().st_size == entry.size
    assert data.sha256_of(destination) == entry.sha256
