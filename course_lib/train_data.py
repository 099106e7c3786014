"""Lesson 11 — training data as token shards: tokenize once, then read batches straight from disk.

A corpus is tokenized with GPT-2's BPE (tiktoken) once and written as *shards*: flat files of uint16 token ids
(GPT-2's 50,257 ids fit in 16 bits, half the size of int32), plus one small JSON header, ``shards.json``, that
lists every shard of each split ("train", "val") with its token count. Training then reads the shards through
``np.memmap``: the operating system pages in only the bytes a batch touches, so a corpus larger than memory
trains as easily as Tiny Shakespeare.

    prepare_tiny_shakespeare(out_dir)      offline: the committed text, first 90% train, last 10% val
    prepare_documents(documents, out_dir)  any stream of documents, each starting with <|endoftext|>
    extend_documents(documents, out_dir, train_tokens)   more train shards, when a run needs more tokens
    hub_documents("HuggingFaceFW/fineweb-edu", "sample-10BT")   online: a Hugging Face dataset, streamed
    steps_available(header, B, T, accum)   optimizer steps the train split holds without repeating a token
    rank_batch(tokens, micro_step, B, T, rank, world_size)      the (x, y) one process trains on (lesson 11)
    ShardLoader(out_dir, "train", B, T, rank, world_size)       (x, y) batches in order, resumable

``ShardLoader`` walks the shards in order, like nanoGPT's loader: each micro-step takes the next
``B*T*world_size`` tokens (+1 for the shifted targets), rank ``r`` the ``r``-th block of them (`rank_batch`).
Its whole state is two integers (shard, position), saved in every checkpoint, so a resumed run reads exactly
the batches it would have read.

Shape legend: B batch, T time (seq_len), V vocabulary.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from course_lib import _checks

HEADER = "shards.json"
FORMAT = "course_lib token shards v1"
DTYPE = np.uint16  # GPT-2 ids are < 2**16


def _write_atomically(path: Path, data: bytes) -> None:
    """Write to a temporary file and rename it into place: a crash never leaves a half-written file."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class _SplitWriter:
    """Collects token ids of one split and writes a shard every `shard_tokens` tokens."""

    def __init__(self, out_dir: Path, split: str, shard_tokens: int, first: int = 0):
        self.out_dir, self.split, self.shard_tokens = out_dir, split, shard_tokens
        self.buffer: list[np.ndarray] = []
        self.buffered = 0
        self.shards: list[dict] = []
        self.first = first  # the number of the first shard written (more shards for a prepared folder)

    def add(self, ids: np.ndarray) -> None:
        self.buffer.append(ids)
        self.buffered += len(ids)
        while self.buffered >= self.shard_tokens:
            self._flush(self.shard_tokens)

    def _flush(self, n: int) -> None:
        tokens = np.concatenate(self.buffer) if self.buffer else np.zeros(0, DTYPE)
        shard, rest = tokens[:n], tokens[n:]
        name = f"{self.split}_{self.first + len(self.shards):06d}.bin"
        _write_atomically(self.out_dir / name, shard.astype(DTYPE).tobytes())
        self.shards.append({"file": name, "tokens": int(len(shard))})
        self.buffer, self.buffered = [rest], len(rest)

    def close(self) -> list[dict]:
        if self.buffered:
            self._flush(self.buffered)
        return self.shards


def _to_ids(ids: Iterable[int], vocab_size: int) -> np.ndarray:
    array = np.asarray(list(ids) if not isinstance(ids, np.ndarray) else ids, dtype=np.int64)
    if array.size and (array.min() < 0 or array.max() >= min(vocab_size, 2**16)):
        raise ValueError(f"token ids must lie in 0..{vocab_size - 1} to be stored as uint16, got {array.max()}")
    return array.astype(DTYPE)


def write_shards(
    splits: dict[str, Iterable[Iterable[int]]],
    out_dir: str | os.PathLike,
    vocab_size: int,
    *,
    eot_token: int | None = None,
    shard_tokens: int = 100_000_000,
    tokenizer: str = "gpt2",
    notes: dict | None = None,
) -> dict:
    """Write each split's chunks of token ids as uint16 shards of `shard_tokens` tokens, then the header.

    `splits` maps a split name to an iterable of chunks (lists or arrays of ids). The header is written last
    and atomically, so a directory whose preparation was interrupted has no header and is not mistaken for
    a complete one. `notes` (plain data, e.g. how many documents were read) go into the header. Returns it.
    """
    _checks.positive_ints(vocab_size=vocab_size, shard_tokens=shard_tokens)
    if vocab_size > 2**16:
        raise ValueError(f"`vocab_size`={vocab_size} does not fit uint16 shards (at most 65536 ids)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / HEADER).unlink(missing_ok=True)  # incomplete until the new header is written
    written = {}
    for split, chunks in splits.items():
        writer = _SplitWriter(out, split, shard_tokens)
        for chunk in chunks:
            writer.add(_to_ids(chunk, vocab_size))
        written[split] = writer.close()
    header = {
        "format": FORMAT,
        "dtype": "uint16",
        "tokenizer": tokenizer,
        "vocab_size": vocab_size,
        "eot_token": eot_token,
        "splits": written,
    } | (notes or {})
    _write_atomically(out / HEADER, json.dumps(header, indent=1).encode())
    return header


def _encoded(documents: Iterable[str], encoding, batch: int = 256) -> Iterator[list[int]]:
    """Each document's ids with <|endoftext|> first, tokenized `batch` documents at a time on all cores
    (tiktoken releases the GIL while it encodes)."""
    eot, pending = encoding.eot_token, []
    for text in documents:
        pending.append(text)
        if len(pending) == batch:
            yield from ([eot, *ids] for ids in encoding.encode_ordinary_batch(pending, num_threads=os.cpu_count()))
            pending = []
    yield from ([eot, *ids] for ids in encoding.encode_ordinary_batch(pending, num_threads=os.cpu_count()))


def _counted(chunks: Iterable[list[int]], notes: dict, start: int, tokens: int | None) -> Iterator[list[int]]:
    """The chunks (one per document) until they hold at least `tokens` tokens (all for None), counting in
    notes["documents"] the documents written so far, from `start` on."""
    total, notes["documents"] = 0, start
    for chunk in chunks:
        if tokens is not None and total >= tokens:
            return
        total += len(chunk)
        notes["documents"] += 1
        yield chunk


def prepare_documents(
    documents: Iterable[str],
    out_dir: str | os.PathLike,
    *,
    val_tokens: int,
    train_tokens: int | None = None,
    shard_tokens: int = 100_000_000,
    encoding=None,
) -> dict:
    """Tokenize a stream of documents into shards: the first `val_tokens` tokens are "val", the rest "train".

    Every document starts with <|endoftext|>, which tells the model where one text ends and the next begins
    (GPT-2's convention). With `train_tokens`, reading stops after the document that brings "train" to at
    least that many tokens. The header records how many documents the shards hold ("documents"), so that
    `extend_documents` can go on from the next one. `encoding` is a tiktoken Encoding (default: GPT-2's).
    """
    from course_lib.data import gpt2_encoding

    encoding = encoding or gpt2_encoding()
    _checks.positive_int("val_tokens", val_tokens)
    if train_tokens is not None:
        _checks.positive_int("train_tokens", train_tokens)
    stream = _encoded(documents, encoding)
    pending: list[list[int]] = []  # "val" needs its chunks before "train" starts: split the stream here
    taken = 0
    for ids in stream:
        if taken + len(ids) <= val_tokens:
            pending.append(ids)
            taken += len(ids)
            continue
        cut = val_tokens - taken
        pending.append(ids[:cut])
        first_train = ids[cut:]  # the rest of the document that "val" ends in
        break
    else:
        raise ValueError(f"the documents hold only {taken} tokens, not more than val_tokens={val_tokens}")

    def train_chunks() -> Iterator[list[int]]:
        yield first_train
        yield from stream

    notes: dict = {}  # the header's "documents": counted while the train split is written
    train = _counted(train_chunks(), notes, len(pending) - 1, train_tokens)
    return write_shards(
        {"val": pending, "train": train}, out_dir, encoding.n_vocab, eot_token=encoding.eot_token,
        shard_tokens=shard_tokens, notes=notes,
    )  # fmt: skip


def extend_documents(
    documents: Iterable[str], data_dir: str | os.PathLike, train_tokens: int, *, shard_tokens: int = 100_000_000
) -> dict:
    """Add "train" shards of at least `train_tokens` more tokens to a prepared folder (lesson 11: when the run
    needs more than was prepared). `documents` must continue the stream the folder was prepared from, from
    document number header["documents"] on (`hub_documents(..., skip=header["documents"])`). The new header
    is written last, atomically: an interrupted extension leaves the old, complete header in place."""
    from course_lib.data import gpt2_encoding

    _checks.positive_ints(train_tokens=train_tokens, shard_tokens=shard_tokens)
    data_dir = Path(data_dir)
    header = read_header(data_dir)
    if header.get("tokenizer") != "gpt2" or "documents" not in header:
        raise ValueError(f"{data_dir} was not prepared by prepare_documents from a document stream: it cannot grow")
    encoding = gpt2_encoding()
    notes: dict = {}
    writer = _SplitWriter(data_dir, "train", shard_tokens, first=len(header["splits"]["train"]))
    for ids in _counted(_encoded(documents, encoding), notes, header["documents"], train_tokens):
        writer.add(_to_ids(ids, header["vocab_size"]))
    header = header | {"documents": notes["documents"]}
    header["splits"] = header["splits"] | {"train": header["splits"]["train"] + writer.close()}
    _write_atomically(data_dir / HEADER, json.dumps(header, indent=1).encode())
    return header


def prepare_tiny_shakespeare(
    out_dir: str | os.PathLike, *, val_fraction: float = 0.1, shard_tokens: int = 100_000_000
) -> dict:
    """Tiny Shakespeare (committed, so offline) as shards: the first 90% of the text is "train", the rest
    "val", split by characters as in lesson 09. One document, so one <|endoftext|> at the start of each split."""
    from course_lib.data import gpt2_encoding, load_text

    _checks.probability("val_fraction", val_fraction)
    text, encoding = load_text("tinyshakespeare.txt"), gpt2_encoding()
    cut = int(len(text) * (1 - val_fraction))
    eot = encoding.eot_token
    splits = {
        "train": [[eot, *encoding.encode_ordinary(text[:cut])]],
        "val": [[eot, *encoding.encode_ordinary(text[cut:])]],
    }
    return write_shards(splits, out_dir, encoding.n_vocab, eot_token=eot, shard_tokens=shard_tokens)


def hub_documents(
    path: str,
    name: str | None = None,
    *,
    split: str = "train",
    text_field: str = "text",
    limit: int | None = None,
    skip: int = 0,
) -> Iterator[str]:
    """Stream the texts of a Hugging Face dataset (needs the internet and `pip install datasets`), e.g.
    ``hub_documents("HuggingFaceFW/fineweb-edu", "sample-10BT")`` or ``hub_documents("roneneldan/TinyStories")``.
    Streaming downloads only what is read; `skip` starts after that many documents (the stream's order is
    fixed, so a prepared folder can grow with the documents after those it holds), `limit` stops after that many."""
    try:
        import datasets
    except ImportError as error:
        raise ImportError("hub_documents needs the `datasets` package: pip install datasets") from error
    rows = datasets.load_dataset(path, name, split=split, streaming=True)
    if skip:
        rows = rows.skip(skip)
    for count, row in enumerate(rows):
        if limit is not None and count >= limit:
            return
        yield row[text_field]


def read_header(data_dir: str | os.PathLike) -> dict:
    """The header of a shard directory, checked: the format, and each shard's size against its token count."""
    data_dir = Path(data_dir)
    path = data_dir / HEADER
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} does not exist: {data_dir} is not a prepared shard directory (or its preparation was "
            "interrupted). Prepare it with prepare_tiny_shakespeare / prepare_documents."
        )
    header = json.loads(path.read_text())
    if header.get("format") != FORMAT:
        raise ValueError(f"{path} has format {header.get('format')!r}, expected {FORMAT!r}")
    for split, shards in header["splits"].items():
        for shard in shards:
            size = (data_dir / shard["file"]).stat().st_size
            if size != 2 * shard["tokens"]:
                raise ValueError(
                    f"shard {shard['file']} of split {split!r} has {size} bytes, expected {2 * shard['tokens']} "
                    f"({shard['tokens']} uint16 tokens): the file is damaged; prepare the data again"
                )
    return header


def steps_available(header: dict, micro_batch_size: int, seq_len: int, accum: int = 1, world_size: int = 1) -> int:
    """Optimizer steps the "train" split holds without reading a token twice, as ShardLoader reads it: a shard
    gives (tokens - 1) // (B*T*world_size) micro-steps (the tail no whole micro-step fits is skipped, and the
    last target needs one token more), and an optimizer step takes `accum` micro-steps."""
    _checks.positive_ints(micro_batch_size=micro_batch_size, seq_len=seq_len, accum=accum, world_size=world_size)
    step_tokens = micro_batch_size * seq_len * world_size
    micro_steps = sum(max(0, (shard["tokens"] - 1) // step_tokens) for shard in header["splits"]["train"])
    return micro_steps // accum


def rank_batch(
    tokens: Tensor, micro_step: int, batch_size: int, seq_len: int, rank: int = 0, world_size: int = 1
) -> tuple[Tensor, Tensor]:
    """Lesson 11, exercise `rank_batch`: the (x, y) that process `rank` of `world_size` trains on at `micro_step`.

    The stream is cut into blocks of B*T tokens. At each micro-step the processes together read the next
    world_size blocks, rank r the r-th of them: block micro_step * world_size + rank. x is that block as B rows
    of T tokens, y the same block one token on (so one token past the block is needed for the last target).
    Read this way, N processes with B rows each see exactly the batch one process with N*B rows would see.
    """
    _checks.tensor("tokens", tokens, "N", integer=True)
    _checks.int_between("micro_step", micro_step, 0)
    _checks.positive_ints(batch_size=batch_size, seq_len=seq_len, world_size=world_size)
    _checks.int_between("rank", rank, 0, world_size - 1, note="a process index below world_size")
    block = batch_size * seq_len
    start = (micro_step * world_size + rank) * block  # the first token of this rank's block
    if start + block + 1 > len(tokens):
        raise ValueError(
            f"`tokens` holds {len(tokens)} tokens; micro-step {micro_step} of rank {rank} needs tokens "
            f"{start}..{start + block} (its block of batch_size*seq_len = {block}, plus one for the last target)"
        )
    x = tokens[start : start + block].view(batch_size, seq_len)  # (B, T)
    y = tokens[start + 1 : start + block + 1].view(batch_size, seq_len)  # (B, T) the token after each position
    return x, y


class ShardLoader:
    """(x, y) batches of `batch_size` rows of `seq_len` tokens, read in order from the shards of one split.

    Lesson 11. With `world_size` processes, each step consumes B*T*world_size tokens and rank `rank` gets
    the rank-th block of B*T (+1) of them, so the ranks together see what one process with world_size times
    the batch would see. ``state_dict()`` / ``load_state_dict()`` save and restore the read position.
    """

    def __init__(
        self,
        data_dir: str | os.PathLike,
        split: str,
        batch_size: int,
        seq_len: int,
        *,
        rank: int = 0,
        world_size: int = 1,
    ):
        _checks.positive_ints(batch_size=batch_size, seq_len=seq_len, world_size=world_size)
        _checks.int_between("rank", rank, 0, world_size - 1, note="a process index below world_size")
        self.data_dir, self.split = Path(data_dir), split
        self.header = read_header(self.data_dir)
        if split not in self.header["splits"] or not self.header["splits"][split]:
            raise ValueError(f"`split` must be one of {sorted(self.header['splits'])}, got {split!r}")
        self.shards = self.header["splits"][split]
        self.B, self.T, self.rank, self.world_size = batch_size, seq_len, rank, world_size
        self.step_tokens = batch_size * seq_len * world_size
        for shard in self.shards:
            if shard["tokens"] < self.step_tokens + 1:
                raise ValueError(
                    f"shard {shard['file']} holds {shard['tokens']} tokens, fewer than one step needs "
                    f"(batch_size*seq_len*world_size + 1 = {self.step_tokens + 1}); use smaller batches"
                )
        self.reset()

    def reset(self) -> None:
        """Back to the first token of the first shard (evaluation always reads the same batches)."""
        self._open(0)
        self.epoch = 0

    def _open(self, shard: int) -> None:
        self.shard, self.position = shard, 0
        self.tokens = np.memmap(self.data_dir / self.shards[shard]["file"], dtype=DTYPE, mode="r")

    def next_batch(self) -> tuple[Tensor, Tensor]:
        """The next (x, y), both (B, T) int64 on the CPU; y is x shifted one token to the left."""
        # This micro-step's tokens of every rank (B*T*world_size + 1), of which rank_batch takes this rank's block.
        window = self.tokens[self.position : self.position + self.step_tokens + 1]
        x, y = rank_batch(torch.from_numpy(window.astype(np.int64)), 0, self.B, self.T, self.rank, self.world_size)
        self.position += self.step_tokens
        if self.position + self.step_tokens + 1 > len(self.tokens):  # the next step would run off the end
            if self.shard + 1 == len(self.shards):
                self.epoch += 1
            self._open((self.shard + 1) % len(self.shards))
        return x, y

    def state_dict(self) -> dict:
        return {"split": self.split, "shard": self.shard, "position": self.position, "epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        if state["split"] != self.split:
            raise ValueError(f"the saved position is in split {state['split']!r}, this loader reads {self.split!r}")
        self._open(state["shard"])
        self.position, self.epoch = state["position"], state["epoch"]
