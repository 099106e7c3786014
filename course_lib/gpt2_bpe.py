"""Lesson 01 — GPT-2's byte-level BPE tokenizer, written from scratch.

The lesson first builds a toy byte-level BPE (``course_lib.tokenization``); this module is the real thing,
reading OpenAI's released files and giving exactly tiktoken's ``gpt2`` ids. It adds three ideas to the toy:

1. **Pre-splitting.** A regex cuts the text into pieces (words with their leading space, numbers,
   punctuation runs, whitespace) and BPE runs inside each piece, so merges never cross a word boundary.
2. **A printable byte alphabet.** ``vocab.bpe`` and ``encoder.json`` store tokens as text, so each of the
   256 bytes is shown as one visible unicode character (a space is ``Ġ``, a newline ``Ċ``).
3. **Ranked merges.** ``vocab.bpe`` lists 50,000 merges, most important first; inside a piece we keep
   merging the adjacent pair with the best (lowest) rank, like ``bpe_encode`` does with merge ids.

Shape legend (no tensors here; for symmetry with the other modules): B batch, T time, H heads,
D head size, C/d_model channels, V vocabulary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterable
from itertools import pairwise
from typing import Literal, NamedTuple

import regex

from course_lib import _checks

# GPT-2's pre-split pattern, as in OpenAI's encoder.py (tiktoken's r50k pattern is an equivalent form):
#   's 't 're 've 'm 'll 'd    common English contractions (lowercase only, as in GPT-2)
#   ' ?\p{L}+'                 a run of letters, with at most one leading space
#   ' ?\p{N}+'                 a run of digits/numerals, with at most one leading space
#   ' ?[^\s\p{L}\p{N}]+'       a run of other symbols (punctuation, emoji ...), with one leading space
#   '\s+(?!\S)'                whitespace, leaving its last space to start the next word
#   '\s+'                      any whitespace that is left
GPT2_SPLIT_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
END_OF_TEXT = "<|endoftext|>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's table from each byte 0..255 to one printable unicode character.

    Bytes that are already visible characters (``!`` to ``~``, ``¡`` to ``¬``, ``®`` to ``ÿ``) map to
    themselves; the other 68 (control characters, space, ...) map to ``chr(256)``, ``chr(257)``, ...
    in byte order. So a space (byte 32) becomes ``Ġ`` (U+0120) and a newline (10) becomes ``Ċ``.
    """
    visible = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table = {byte: chr(byte) for byte in visible}
    shifted = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + shifted)
            shifted += 1
    return dict(sorted(table.items()))


class MergeStep(NamedTuple):
    """One merge of ``GPT2Tokenizer.encode_steps``: the pair, its rank in vocab.bpe, the parts after."""

    pair: tuple[str, str]
    rank: int
    parts: tuple[str, ...]


class GPT2Tokenizer:
    """GPT-2's tokenizer from ``encoder.json`` (token → id) and ``vocab.bpe`` (ranked merges).

    Lesson 01, section "GPT-2's tokenizer, from scratch". ``encode(text) -> list[int]`` gives the same ids as
    ``tiktoken.get_encoding("gpt2")``; ``decode(ids) -> str``.
    """

    def __init__(
        self,
        encoder: dict[str, int],
        merges: list[tuple[str, str]],
        special_tokens: dict[str, int] | None = None,
    ):
        self.encoder = dict(encoder)  # token (in the printable byte alphabet) -> id
        self.decoder = {index: token for token, index in self.encoder.items()}
        self.merge_ranks = {pair: rank for rank, pair in enumerate(merges)}  # lower rank = merge earlier
        self.special_tokens = {END_OF_TEXT: 50256} if special_tokens is None else dict(special_tokens)
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {char: byte for byte, char in self.byte_encoder.items()}
        self.split_regex = regex.compile(GPT2_SPLIT_PATTERN)
        self._cache: dict[str, tuple[int, ...]] = {}  # piece -> ids; text repeats words a lot
        for token, index in self.special_tokens.items():
            if self.encoder.get(token, index) != index:
                raise ValueError(f"special token {token!r} has id {index} but encoder.json says {self.encoder[token]}")
            self.decoder[index] = token

    @classmethod
    def from_files(cls, encoder_json: str | os.PathLike, vocab_bpe: str | os.PathLike) -> GPT2Tokenizer:
        """Load OpenAI's ``encoder.json`` and ``vocab.bpe``."""
        with open(encoder_json, encoding="utf-8") as file:
            encoder = json.load(file)
        with open(vocab_bpe, encoding="utf-8") as file:
            lines = file.read().split("\n")
        # line 0 is a "#version" header; each other line is "left right"; the file ends with a newline
        merges = [tuple(line.split(" ")) for line in lines[1:] if line]
        bad = [line for line in merges if len(line) != 2]
        if bad:
            raise ValueError(f"vocab_bpe {vocab_bpe!s} has a line that is not 'left right': {' '.join(bad[0])!r}")
        return cls(encoder, merges)

    @classmethod
    def from_registry(cls) -> GPT2Tokenizer:
        """Load the two files through ``course_lib.data`` (cache, mirror or download, all verified)."""
        from course_lib.data import data_path

        return cls.from_files(data_path("encoder.json"), data_path("vocab.bpe"))

    # ------------------------------------------------------------------------------------------
    # Encoding

    def pre_split(self, text: str) -> list[str]:
        """Cut ``text`` into the pieces BPE works on; ``"Hello world"`` → ``["Hello", " world"]``."""
        _checks.string("text", text)
        return self.split_regex.findall(text)

    def _to_symbols(self, piece: str) -> list[str]:
        """The piece's utf-8 bytes, each written as its printable character."""
        return [self.byte_encoder[byte] for byte in piece.encode("utf-8")]

    def _best_pair(self, parts: list[str]) -> tuple[str, str] | None:
        """The adjacent pair with the lowest merge rank, or None when no pair can merge."""
        pairs = [pair for pair in pairwise(parts) if pair in self.merge_ranks]
        return min(pairs, key=self.merge_ranks.__getitem__) if pairs else None

    @staticmethod
    def _merge(parts: list[str], pair: tuple[str, str]) -> list[str]:
        """Join every non-overlapping occurrence of ``pair``, scanning left to right."""
        merged, i = [], 0
        while i < len(parts):
            if i < len(parts) - 1 and (parts[i], parts[i + 1]) == pair:
                merged.append(parts[i] + parts[i + 1])
                i += 2
            else:
                merged.append(parts[i])
                i += 1
        return merged

    def _bpe(self, piece: str) -> tuple[int, ...]:
        """Ids of one pre-split piece (memoized: the same words come back again and again)."""
        if piece in self._cache:
            return self._cache[piece]
        parts = self._to_symbols(piece)
        while (pair := self._best_pair(parts)) is not None:
            parts = self._merge(parts, pair)
        ids = tuple(self.encoder[part] for part in parts)
        self._cache[piece] = ids
        return ids

    def encode_ordinary(self, text: str) -> list[int]:
        """Encode ``text``, treating special-token text such as ``<|endoftext|>`` as plain text."""
        _checks.string("text", text)
        ids: list[int] = []
        for piece in self.pre_split(_replace_lone_surrogates(text)):
            ids.extend(self._bpe(piece))
        return ids

    def encode(
        self,
        text: str,
        allowed_special: Collection[str] | Literal["all"] = frozenset(),
        disallowed_special: Collection[str] | Literal["all"] = "all",
    ) -> list[int]:
        """Encode ``text``; special tokens follow tiktoken's rules.

        Text matching an ``allowed_special`` token becomes that token's id; text matching a disallowed one
        (by default every special token that is not allowed) raises ValueError, because it usually means
        untrusted text is trying to inject a control token. Use ``encode_ordinary`` to treat it as text.
        """
        _checks.string("text", text)
        allowed = self._special_set("allowed_special", allowed_special)
        if disallowed_special == "all":
            disallowed = set(self.special_tokens) - allowed
        else:
            disallowed = self._special_set("disallowed_special", disallowed_special)
        present = [token for token in disallowed if token in text]
        if present:
            token = min(present, key=text.find)  # report the first one in the text
            raise ValueError(
                f"text contains the special token {token!r}, which is not allowed here. To encode it as "
                f"the special token, pass allowed_special={{{token!r}}}; to encode it as plain text, "
                "use encode_ordinary(text) or disallowed_special=()."
            )
        if not allowed:
            return self.encode_ordinary(text)
        # split around the allowed special tokens (the capturing group keeps them), encode the rest
        alternatives = "|".join(regex.escape(token) for token in sorted(allowed, key=len, reverse=True))
        ids: list[int] = []
        for chunk in regex.split(f"({alternatives})", text):
            if chunk in allowed:
                ids.append(self.special_tokens[chunk])
            else:
                ids.extend(self.encode_ordinary(chunk))
        return ids

    def _special_set(self, name: str, value: Collection[str] | Literal["all"]) -> set[str]:
        if value == "all":
            return set(self.special_tokens)
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise TypeError(f"{name} must be 'all' or a set of special tokens, got {value!r}")
        unknown = set(value) - set(self.special_tokens)
        if unknown:
            raise ValueError(
                f"{name} contains {sorted(unknown)!r}, which are not special tokens of this tokenizer "
                f"(it has {sorted(self.special_tokens)!r})"
            )
        return set(value)

    def encode_steps(self, word: str) -> list[MergeStep]:
        """Show-your-work BPE of one pre-split piece: every merge applied, in order.

        ``encode_steps(" tokenization")`` starts from ``['Ġ', 't', 'o', ...]``; the last step's parts are
        the final tokens. Raises ValueError if ``word`` is not exactly one piece of ``pre_split``.
        """
        pieces = self.pre_split(word)
        if pieces != [word]:
            raise ValueError(f"word must be one pre-split piece, but {word!r} splits into {pieces!r}")
        parts = self._to_symbols(word)
        steps = []
        while (pair := self._best_pair(parts)) is not None:
            parts = self._merge(parts, pair)
            steps.append(MergeStep(pair, self.merge_ranks[pair], tuple(parts)))
        return steps

    def clear_cache(self) -> None:
        """Forget the memoized pieces (to time a cold start)."""
        self._cache.clear()

    # ------------------------------------------------------------------------------------------
    # Decoding

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        """The raw bytes of ``ids`` (one token may hold only part of a multi-byte character)."""
        chunks = []
        for index in _checks.int_list("ids", ids):
            token = self.decoder.get(index)
            if token is None:
                raise ValueError(f"id {index} is not in the vocabulary (valid ids: 0..{max(self.decoder)})")
            if token in self.special_tokens:
                chunks.append(token.encode("utf-8"))
            else:
                chunks.append(bytes(self.byte_decoder[char] for char in token))
        return b"".join(chunks)

    def decode(self, ids: Iterable[int]) -> str:
        """Text of ``ids``; bytes that are not valid utf-8 become U+FFFD, as in tiktoken."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")

    @property
    def n_vocab(self) -> int:
        return max(self.decoder) + 1


def _replace_lone_surrogates(text: str) -> str:
    """Replace unpaired UTF-16 surrogates (which have no utf-8 form) by U+FFFD, as tiktoken does."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # a valid high+low surrogate pair becomes its character; a lone one becomes U+FFFD
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text
