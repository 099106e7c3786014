"""Tests of course_lib.embeddings (Lesson 02) against PyTorch built-ins, numpy and planted structure."""

from __future__ import annotations

import os
import pickle
import socket
import subprocess
import sys
import urllib.error

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.embeddings import (
    analogy,
    cosine_similarity,
    keyed_vectors_to_tensor,
    load_pretrained_vectors,
    most_similar,
    one_hot_embed,
    tiny_shakespeare_sentences,
    train_word2vec,
)


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ------------------------------------------------------------------------------------------------------------
# one_hot_embed
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("id_shape", [(), (5,), (2, 7), (3, 2, 4)])
def test_one_hot_embed_equals_embedding_lookup(id_shape: tuple[int, ...]) -> None:
    V, C = 11, 6
    embedding = torch.nn.Embedding(V, C)
    torch.nn.init.normal_(embedding.weight, generator=torch.Generator().manual_seed(0))
    ids = torch.randint(V, id_shape, generator=torch.Generator().manual_seed(1))
    out = one_hot_embed(ids, embedding.weight)
    assert out.shape == (*id_shape, C)
    torch.testing.assert_close(out, embedding(ids))
    torch.testing.assert_close(out, embedding.weight[ids])


def test_one_hot_embed_gradient_reaches_only_used_rows() -> None:
    weight = _randn(5, 3).requires_grad_()
    one_hot_embed(torch.tensor([[0, 2], [2, 2]]), weight).sum().backward()
    expected = torch.tensor([1.0, 0.0, 3.0, 0.0, 0.0])[:, None].expand(5, 3)  # row 2 used three times
    torch.testing.assert_close(weight.grad, expected)


def test_one_hot_embed_rejects_bad_input() -> None:
    weight = _randn(4, 3)
    with pytest.raises(TypeError, match="integer"):
        one_hot_embed(torch.tensor([0.0, 1.0]), weight)
    with pytest.raises(ValueError, match=r"0\.\.3"):
        one_hot_embed(torch.tensor([0, 4]), weight)
    with pytest.raises(ValueError, match=r"0\.\.3"):
        one_hot_embed(torch.tensor([-1]), weight)
    with pytest.raises(ValueError, match="2-D"):
        one_hot_embed(torch.tensor([0]), _randn(4))


# ------------------------------------------------------------------------------------------------------------
# cosine_similarity
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape_a", "shape_b"), [((8,), (8,)), ((8,), (5, 8)), ((3, 1, 8), (4, 8)), ((2, 3, 8), (2, 3, 8))]
)
def test_cosine_similarity_matches_torch_and_numpy(shape_a: tuple, shape_b: tuple) -> None:
    a, b = _randn(*shape_a, seed=1), _randn(*shape_b, seed=2)
    out = cosine_similarity(a, b)
    torch.testing.assert_close(out, F.cosine_similarity(a, b, dim=-1))
    na, nb = np.broadcast_arrays(a.numpy().astype(np.float64), b.numpy().astype(np.float64))
    expected = (na * nb).sum(-1) / (np.linalg.norm(na, axis=-1) * np.linalg.norm(nb, axis=-1))
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), C=st.integers(1, 16), scale=st.floats(1e-3, 1e3))
def test_cosine_similarity_properties(seed: int, C: int, scale: float) -> None:
    a, b = _randn(C, seed=seed).double(), _randn(C, seed=seed + 1).double()
    s = cosine_similarity(a, b).item()
    assert -1 - 1e-12 <= s <= 1 + 1e-12
    assert cosine_similarity(scale * a, b).item() == pytest.approx(s, abs=1e-9)  # ignores length
    assert cosine_similarity(b, a).item() == pytest.approx(s, abs=1e-12)  # symmetric
    assert cosine_similarity(a, a).item() == pytest.approx(1.0, abs=1e-9)
    assert cosine_similarity(a, -a).item() == pytest.approx(-1.0, abs=1e-9)


def test_cosine_similarity_zero_vector_gives_zero() -> None:
    zero, b = torch.zeros(4), _randn(4)
    assert cosine_similarity(zero, b).item() == 0.0
    assert cosine_similarity(zero, zero).item() == 0.0
    assert F.cosine_similarity(zero, b, dim=-1).item() == 0.0  # the same convention as PyTorch


def test_cosine_similarity_rejects_mismatched_shapes() -> None:
    with pytest.raises(ValueError, match="same dimension C|end in the same"):
        cosine_similarity(torch.zeros(3, 4), torch.zeros(3, 5))
    with pytest.raises(ValueError, match="broadcast"):
        cosine_similarity(torch.zeros(3, 4), torch.zeros(2, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        cosine_similarity([1.0, 0.0], torch.zeros(2))  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------------------
# most_similar and analogy
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("V", "C", "k"), [(10, 4, 1), (50, 8, 5), (7, 3, 7)])
def test_most_similar_matches_numpy_argsort(V: int, C: int, k: int) -> None:
    matrix, query = _randn(V, C, seed=V), _randn(C, seed=V + 1)
    out = most_similar(query, matrix, k)
    assert out.dtype == torch.long and out.shape == (k,)
    m, q = matrix.numpy().astype(np.float64), query.numpy().astype(np.float64)
    sims = m @ q / (np.linalg.norm(m, axis=1) * np.linalg.norm(q))
    assert out.tolist() == np.argsort(-sims, kind="stable")[:k].tolist()


def test_most_similar_ties_go_to_the_lower_index_and_exclude_works() -> None:
    # rows 1, 3 and 4 point the same way as the query (different lengths), row 0 the opposite way
    matrix = torch.tensor([[-1.0, 0.0], [2.0, 0.0], [0.0, 1.0], [1.0, 0.0], [5.0, 0.0]])
    query = torch.tensor([3.0, 0.0])
    assert most_similar(query, matrix, 4).tolist() == [1, 3, 4, 2]
    assert most_similar(query, matrix, 3, exclude=[3]).tolist() == [1, 4, 2]
    with pytest.raises(ValueError, match="k"):
        most_similar(query, matrix, 5, exclude=[3])
    with pytest.raises(ValueError, match="k"):
        most_similar(query, matrix, 0)
    with pytest.raises(ValueError, match="matrix"):
        most_similar(torch.zeros(3), matrix, 1)


def test_analogy_on_planted_vectors() -> None:
    # axis 0 = royalty, axis 1 = gender, axis 2 = unrelated noise direction
    vocab = ["man", "woman", "king", "queen", "apple", "prince", "princess"]
    vectors = torch.tensor(
        [
            [0.0, 1.0, 0.1],
            [0.0, -1.0, 0.1],
            [1.0, 1.0, 0.0],
            [1.0, -1.0, 0.0],
            [0.0, 0.0, 1.0],
            [0.8, 1.0, 0.3],
            [0.8, -1.0, 0.3],
        ]
    )
    assert analogy("man", "king", "woman", vectors, vocab) == ["queen"]
    assert analogy("king", "queen", "prince", vectors, vocab, k=1) == ["princess"]
    mapping = {word: i for i, word in enumerate(vocab)}
    assert analogy("man", "king", "woman", vectors, mapping, k=2) == ["queen", "princess"]
    with pytest.raises(ValueError, match="'emperor'"):
        analogy("man", "emperor", "woman", vectors, vocab)


# ------------------------------------------------------------------------------------------------------------
# word2vec
# ------------------------------------------------------------------------------------------------------------

ANIMALS = ["cat", "dog", "cow", "horse", "sheep"]
VEHICLES = ["car", "bus", "truck", "train", "tram"]


def _planted_corpus(n: int = 1500, seed: int = 0) -> list[list[str]]:
    """Animals share one set of contexts, vehicles another; nothing else tells them apart."""
    rng = np.random.default_rng(seed)
    animal_words = ["eats", "grass", "barn", "sleeps", "farm", "feeds", "hay"]
    vehicle_words = ["drives", "road", "fuel", "parks", "engine", "station", "wheels"]
    sentences = []
    for _ in range(n):
        nouns, contexts = (ANIMALS, animal_words) if rng.random() < 0.5 else (VEHICLES, vehicle_words)
        words = ["the", str(rng.choice(nouns))] + [str(w) for w in rng.choice(contexts, 3)]
        sentences.append(words + ["and", "the", str(rng.choice(nouns))])
    return sentences


def test_word2vec_finds_the_planted_groups() -> None:
    kv = train_word2vec(_planted_corpus(), vector_size=16, window=3, min_count=1, epochs=5)
    for group in (ANIMALS, VEHICLES):
        for word in group:
            neighbours = [w for w, _ in kv.most_similar(word, topn=4) if w in ANIMALS + VEHICLES]
            assert set(neighbours) <= set(group), (word, neighbours)
    # and through our own torch helpers
    matrix, words = keyed_vectors_to_tensor(kv, ANIMALS + VEHICLES)
    assert matrix.shape == (10, 16) and words == ANIMALS + VEHICLES
    top = most_similar(matrix[0], matrix, 4, exclude=[0]).tolist()  # nearest to "cat" among the ten
    assert set(top) == {1, 2, 3, 4}


def test_word2vec_is_deterministic_for_a_seed() -> None:
    corpus = _planted_corpus(400)
    a = train_word2vec(corpus, vector_size=8, min_count=1, epochs=2, seed=3)
    b = train_word2vec(corpus, vector_size=8, min_count=1, epochs=2, seed=3)
    c = train_word2vec(corpus, vector_size=8, min_count=1, epochs=2, seed=4)
    assert a.index_to_key == b.index_to_key
    np.testing.assert_array_equal(a.vectors, b.vectors)
    assert not np.allclose(a.vectors, c.vectors)


def test_word2vec_does_not_depend_on_pythonhashseed() -> None:
    """Train in two fresh interpreters with different string hashing and compare the vectors."""
    code = (
        "import pickle, sys\n"
        "from course_lib.embeddings import train_word2vec\n"
        "corpus = pickle.loads(sys.stdin.buffer.read())\n"
        "kv = train_word2vec(corpus, vector_size=8, min_count=1, epochs=1, seed=0)\n"
        "sys.stdout.buffer.write(pickle.dumps((kv.index_to_key, kv.vectors)))\n"
    )
    corpus = pickle.dumps(_planted_corpus(200))
    results = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run([sys.executable, "-c", code], input=corpus, capture_output=True, env=env, check=True)
        results.append(pickle.loads(done.stdout))
    assert results[0][0] == results[1][0]
    np.testing.assert_array_equal(results[0][1], results[1][1])


def test_train_word2vec_rejects_strings_as_sentences() -> None:
    with pytest.raises(TypeError, match="list of words"):
        train_word2vec(["to be or not to be"], min_count=1)
    with pytest.raises(TypeError, match="single string"):
        train_word2vec("to be or not to be", min_count=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="vector_size"):
        train_word2vec([["to", "be"]], vector_size=0, min_count=1)


# ------------------------------------------------------------------------------------------------------------
# corpora and pretrained vectors
# ------------------------------------------------------------------------------------------------------------


def test_tiny_shakespeare_sentences_from_text() -> None:
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak!\nO'er the King's hill"
    assert tiny_shakespeare_sentences(text) == [
        ["before", "we", "proceed", "any", "further", "hear", "me", "speak"],
        ["speak", "speak"],
        ["o'er", "the", "king's", "hill"],
    ]
    with_speakers = tiny_shakespeare_sentences(text, drop_speakers=False, max_sentences=1)
    assert with_speakers == [["first", "citizen", "before", "we", "proceed", "any", "further", "hear", "me", "speak"]]


@pytest.fixture(scope="module")
def shakespeare() -> str:
    from course_lib.data import load_text

    return load_text("tinyshakespeare.txt")  # committed in data/: a missing or damaged copy is a failure


def test_tiny_shakespeare_sentences_on_the_real_file(shakespeare: str) -> None:
    sentences = tiny_shakespeare_sentences(shakespeare)
    assert sentences[0] == ["before", "we", "proceed", "any", "further", "hear", "me", "speak"]
    assert 10_000 < len(sentences) < 15_000
    words = [w for s in sentences for w in s]
    assert all(w == w.lower() and w for w in words)
    assert "citizen" not in words[:50]  # the speaker line "First Citizen:" is gone
    assert words.count("king") > 300


def test_tiny_shakespeare_sentences_default_source(shakespeare: str) -> None:
    assert tiny_shakespeare_sentences(max_sentences=500) == tiny_shakespeare_sentences(shakespeare)[:500]


def test_load_pretrained_vectors_offline_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import gensim.downloader

    def offline(name: str) -> None:
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(gensim.downloader, "load", offline)
    with pytest.raises(ConnectionError, match="train_word2vec"):
        load_pretrained_vectors()

    def wrong_name(name: str) -> None:
        raise ValueError("Incorrect model/corpus name")

    monkeypatch.setattr(gensim.downloader, "load", wrong_name)
    with pytest.raises(ValueError, match="'glove-nonsense'"):
        load_pretrained_vectors("glove-nonsense")


def _online(host: str = "github.com") -> bool:
    try:
        socket.create_connection((host, 443), timeout=3).close()
    except OSError:
        return False
    return True


@pytest.mark.network
def test_load_pretrained_vectors_online() -> None:
    if not _online():
        pytest.skip("no internet: gensim-data is downloaded from GitHub")
    try:
        kv = load_pretrained_vectors("glove-wiki-gigaword-50")
    except ConnectionError as exc:  # e.g. a proxy that lets the connection through but not the download
        pytest.skip(f"gensim-data could not be downloaded: {exc}")
    assert kv.vector_size == 50
    vectors, vocab = keyed_vectors_to_tensor(kv, ["king", "queen", "man", "woman", "apple", "banana"])
    assert cosine_similarity(vectors[0], vectors[1]) > cosine_similarity(vectors[0], vectors[4])
    full, words = keyed_vectors_to_tensor(kv)
    assert "queen" in analogy("man", "king", "woman", full, words, k=3)
