"""Tests of course_lib.data: the registry, the verified cache, mirrors, downloads and GPT-2's encoding.

Every test that touches the cache points ``COURSE_DATA_CACHE`` at a temporary folder, so the real cache
is never modified.
"""

from __future__ import annotations

import functools
import hashlib
import http.server
import json
import os
import stat
import threading
from pathlib import Path

import pytest

from course_lib import data
from course_lib.data import DataError, DataFile, data_path, gpt2_encoding, load_registry, load_text

SHARED_DATA = Path(data.__file__).resolve().parents[1].parent / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED_DATA.is_dir(), reason="the shared offline data folder is absent")
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


def refuse_download(url, destination):
    raise AssertionError(f"no download expected, but one was attempted for {url}")


def offline(url, destination):
    raise OSError("network is unreachable (simulated offline machine)")


def files_in(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.iterdir()) if folder.exists() else []


# ----------------------------------------------------------------------------------------------
# The registry


@needs_shared
def test_registry_matches_the_shared_files():
    registry = load_registry()
    assert set(registry) == {"tinyshakespeare.txt", "the-verdict.txt", "encoder.json", "vocab.bpe"}
    for name, entry in registry.items():
        content = (SHARED_DATA / name).read_bytes()
        assert entry.name == name
        assert entry.size == len(content), name
        assert entry.sha256 == sha256_hex(content), name
        assert entry.url.startswith("https://"), name
        assert entry.description.strip() and "\n" not in entry.description


def test_registry_json_is_valid_and_complete():
    raw = json.loads((data.REPO_ROOT / "data" / "registry.json").read_text(encoding="utf-8"))
    for name, fields in raw.items():
        assert set(fields) == {"url", "sha256", "size", "description"}, name
        assert len(fields["sha256"]) == 64 and int(fields["sha256"], 16) >= 0
        assert isinstance(fields["size"], int) and fields["size"] > 0


def test_unknown_name_lists_known_names():
    with pytest.raises(ValueError, match=r"unknown data file 'nope.txt'.*the-verdict\.txt"):
        data_path("nope.txt")
    with pytest.raises(TypeError, match="name must be a str"):
        data_path(Path("the-verdict.txt"))


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


@needs_shared
def test_real_file_comes_from_the_shared_mirror_into_a_fresh_cache(env):
    cache, _, _ = env
    text = load_text("the-verdict.txt", download=refuse_download)
    assert (cache / "the-verdict.txt").is_file()
    assert text == (SHARED_DATA / "the-verdict.txt").read_text(encoding="utf-8")
    assert len(text) == 20479  # all ascii


# ----------------------------------------------------------------------------------------------
# GPT-2's encoding, built offline


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """The memoized encoding and the two texts, fetched into a temporary cache (the real one is untouched)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(data.CACHE_ENV, str(tmp_path_factory.mktemp("gpt2-cache")))
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


def test_gpt2_encoding_builds_from_a_fresh_cache(env):
    cache, _, _ = env
    if not (SHARED_DATA / "encoder.json").is_file():
        pytest.skip("needs the shared offline data folder to build without a network")
    # __wrapped__ is the function behind the memo: it really builds the encoding again
    encoding = gpt2_encoding.__wrapped__()
    assert sorted(files_in(cache)) == ["encoder.json", "vocab.bpe"]
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
