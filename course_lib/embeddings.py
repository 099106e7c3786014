"""Embeddings: from token ids to vectors, and what the geometry of those vectors means (Lesson 02).

    one_hot_embed              nn.Embedding spelled out: one-hot rows times the weight matrix
    cosine_similarity          the angle between vectors, the usual measure of "close in meaning"
    most_similar, analogy      nearest neighbours and king - man + woman
    train_word2vec             word2vec (Mikolov et al., 2013) trained with gensim, reproducibly
    tiny_shakespeare_sentences an offline corpus for it
    load_pretrained_vectors    GloVe vectors through gensim.downloader (needs the internet the first time)

Shape legend: B batch, T time, H heads, D head size, C / d_model channels, V vocabulary.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import Tensor

from course_lib import _checks

if TYPE_CHECKING:  # gensim is imported only by the functions that need it
    from gensim.models import KeyedVectors

__all__ = [
    "one_hot_embed",
    "cosine_similarity",
    "most_similar",
    "analogy",
    "keyed_vectors_to_tensor",
    "train_word2vec",
    "tiny_shakespeare_sentences",
    "load_pretrained_vectors",
]

# ------------------------------------------------------------------------------------------------------------
# Lookup = one-hot x matrix
# ------------------------------------------------------------------------------------------------------------


def one_hot_embed(token_ids: Tensor, weight: Tensor) -> Tensor:
    """Embed ids by multiplying their one-hot rows with `weight`; equals weight[token_ids] and nn.Embedding.

    Lesson 02, exercise `one_hot_embed`. token_ids (...) integer, weight (V, C) -> (..., C).
    The product only shows *why* a lookup is a linear layer; nn.Embedding does the cheap indexing instead.
    """
    _checks.tensor("token_ids", token_ids, integer=True)
    _checks.tensor("weight", weight, "V, C")
    V = weight.shape[0]
    _checks.indices("token_ids", token_ids, V, "the rows of `weight`")
    one_hot = F.one_hot(token_ids.long(), num_classes=V).to(weight.dtype)  # (..., V)
    return one_hot @ weight  # (..., V) @ (V, C) -> (..., C)


# ------------------------------------------------------------------------------------------------------------
# Similarity, neighbours, analogies
# ------------------------------------------------------------------------------------------------------------


def cosine_similarity(a: Tensor, b: Tensor, eps: float = 1e-8) -> Tensor:
    """a . b / (max(|a|, eps) * max(|b|, eps)) over the last dimension, broadcasting the others.

    Lesson 02, exercise `cosine_similarity`. a (..., C), b (..., C) -> (...). Each norm is clamped at `eps`,
    as in torch.nn.functional.cosine_similarity, so a zero vector has similarity 0 with everything.
    """
    _checks.tensors(a=(a, "..., C"), b=(b, "..., C"))
    dot = (a * b).sum(-1)  # (...)
    return dot / (a.norm(dim=-1).clamp_min(eps) * b.norm(dim=-1).clamp_min(eps))  # (...)


def most_similar(query: Tensor, matrix: Tensor, k: int, exclude: Iterable[int] = ()) -> Tensor:
    """Indices of the k rows of `matrix` with the highest cosine similarity to `query`, best first.

    Lesson 02, exercise `most_similar`. query (C,), matrix (V, C) -> LongTensor (k,). Ties go to the lower
    row index. Rows listed in `exclude` (e.g. the query word itself) are skipped.
    """
    _checks.tensors(query=(query, "C"), matrix=(matrix, "V, C"))
    excluded = sorted(set(int(i) for i in exclude))
    _checks.int_between("k", k, 1, matrix.shape[0] - len(excluded), note="rows left to rank")
    scores = cosine_similarity(query, matrix)  # (V,)
    if excluded:
        scores = scores.index_fill(0, torch.tensor(excluded, device=scores.device), float("-inf"))
    # A stable sort keeps equal scores in row order, so ties are broken the same way on every machine.
    order = torch.sort(scores, descending=True, stable=True).indices  # (V,)
    return order[:k]


def analogy(a: str, b: str, c: str, vectors: Tensor, vocab: Sequence[str] | Mapping[str, int], k: int = 1) -> list[str]:
    """Solve "a is to b as c is to ?": the k words nearest to b - a + c, leaving out a, b and c.

    Lesson 02. vectors (V, C); vocab lists the word of each row (or maps word -> row). The rows are scaled to
    unit length first (the 3CosAdd rule of Mikolov et al., 2013, also used by gensim), so frequent words with
    long vectors do not dominate. With good vectors, analogy("man", "king", "woman", ...) -> ["queen"].
    """
    _checks.tensor("vectors", vectors, "V, C")
    index = dict(vocab) if isinstance(vocab, Mapping) else {word: i for i, word in enumerate(vocab)}
    words = {i: word for word, i in index.items()}
    if len(words) != vectors.shape[0]:
        raise ValueError(f"`vocab` names {len(words)} rows but `vectors` has {vectors.shape[0]}")
    for name, word in (("a", a), ("b", b), ("c", c)):
        if word not in index:
            raise ValueError(f"`{name}`={word!r} is not in the vocabulary")
    unit = vectors / vectors.norm(dim=-1, keepdim=True).clamp_min(1e-8)  # (V, C)
    query = unit[index[b]] - unit[index[a]] + unit[index[c]]  # (C,)
    rows = most_similar(query, unit, k, exclude=(index[a], index[b], index[c]))
    return [words[i] for i in rows.tolist()]


def keyed_vectors_to_tensor(kv: KeyedVectors, words: Sequence[str] | None = None) -> tuple[Tensor, list[str]]:
    """gensim KeyedVectors -> (float32 Tensor (V, C), the V words), optionally only `words`. Lesson 02."""
    words = list(kv.index_to_key) if words is None else list(words)
    missing = [w for w in words if w not in kv.key_to_index]
    if missing:
        raise ValueError(f"`words` contains words that have no vector: {missing[:10]}")
    rows = [kv.key_to_index[w] for w in words]
    return torch.tensor(kv.vectors[rows], dtype=torch.float32), words  # (V, C)


# ------------------------------------------------------------------------------------------------------------
# word2vec with gensim
# ------------------------------------------------------------------------------------------------------------


def _stable_hash(text: str) -> int:
    """A hash that does not change between runs (Python's own `hash` of a str does, unless PYTHONHASHSEED)."""
    return zlib.crc32(text.encode("utf-8"))


def train_word2vec(
    sentences: Iterable[Sequence[str]],
    vector_size: int = 50,
    window: int = 5,
    min_count: int = 5,
    epochs: int = 10,
    seed: int = 0,
    workers: int = 1,
    sg: int = 1,
) -> KeyedVectors:
    """Train word2vec with gensim and return its word vectors (gensim KeyedVectors).

    Lesson 02. `sentences` is a list of word lists. sg=1 is skip-gram (predict the neighbours of a word),
    sg=0 is CBOW. With workers=1 a corpus and a seed give the same vectors every time: several threads
    interleave their updates in a different order on every run. We also pass a hash that does not depend on
    PYTHONHASHSEED (older gensim versions seeded each word's initial vector with Python's `hash`).
    """
    from gensim.models import Word2Vec

    if isinstance(sentences, (str, bytes)):
        raise TypeError("`sentences` must be a list of word lists, got a single string")
    checked = []  # a list, because gensim passes over the corpus several times (a generator would run dry)
    for sentence in sentences:
        if isinstance(sentence, str):  # gensim would silently train on its characters
            raise TypeError(f"each sentence must be a list of words, e.g. 'to be'.split(), got {sentence!r}")
        words = list(sentence)
        if not all(isinstance(w, str) for w in words):
            raise TypeError(f"each sentence must be a list of str words, got {words[:5]!r}")
        checked.append(words)
    _checks.positive_ints(vector_size=vector_size, window=window, epochs=epochs, workers=workers)
    model = Word2Vec(
        sentences=checked,
        vector_size=vector_size,
        window=window,
        min_count=min_count,
        epochs=epochs,
        seed=seed,
        workers=workers,
        sg=sg,
        hashfxn=_stable_hash,
    )
    return model.wv


_SPEAKER = re.compile(r"^[A-Za-z][A-Za-z' ]*:$")  # "First Citizen:" alone on its line
_SENTENCE_END = re.compile(r"[.!?]+")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")  # keeps o'er, king's; drops punctuation and digits


def tiny_shakespeare_sentences(
    text: str | None = None, drop_speakers: bool = True, max_sentences: int | None = None
) -> list[list[str]]:
    """Tiny Shakespeare as lower-cased word lists, one per sentence (split at . ! ?). Lesson 02.

    `text` defaults to the course's copy (course_lib.data.load_text("tinyshakespeare.txt")). Speaker lines
    such as "First Citizen:" are dropped unless `drop_speakers=False`. About 12.5k sentences, 189k words.
    """
    if text is None:
        from course_lib.data import load_text  # imported here: the data module is only needed for the default

        text = load_text("tinyshakespeare.txt")
    _checks.instance("text", text, str, "a str")
    if max_sentences is not None:
        _checks.positive_int("max_sentences", max_sentences)
    lines = [line for line in text.splitlines() if not (drop_speakers and _SPEAKER.match(line.strip()))]
    sentences = []
    for chunk in _SENTENCE_END.split("\n".join(lines).lower()):
        words = _WORD.findall(chunk)
        if words:
            sentences.append(words)
            if max_sentences is not None and len(sentences) == max_sentences:
                break
    return sentences


def load_pretrained_vectors(name: str = "glove-wiki-gigaword-50") -> KeyedVectors:
    """Pretrained word vectors from gensim.downloader (default GloVe 50-d, ~66 MB, cached in ~/gensim-data).

    Lesson 02, when online. Raises ConnectionError with what to do instead when the download is impossible.
    """
    import gensim.downloader

    try:
        return gensim.downloader.load(name)
    except ValueError as exc:
        if "Incorrect model" in str(exc):
            raise ValueError(f"`name`={name!r} is not a gensim-data model (see gensim.downloader.info())") from exc
        raise ConnectionError(_offline_message(name, exc)) from exc
    except OSError as exc:  # URLError, socket errors, timeouts
        raise ConnectionError(_offline_message(name, exc)) from exc


def _offline_message(name: str, exc: Exception) -> str:
    return (
        f"could not download the pretrained vectors {name!r} with gensim.downloader ({exc}). This needs the "
        "internet the first time; offline, train your own vectors with "
        "train_word2vec(tiny_shakespeare_sentences()) instead."
    )
