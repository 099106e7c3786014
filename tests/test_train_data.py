"""course_lib.train_data: uint16 shards written and read back, batches in order, resumable position."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib.data import gpt2_encoding, load_text
from course_lib.train_data import (
    HEADER,
    ShardLoader,
    extend_documents,
    hub_documents,
    prepare_documents,
    prepare_tiny_shakespeare,
    rank_batch,
    read_header,
    steps_available,
    write_shards,
)


@pytest.fixture
def stream():
    return np.arange(1000) % 300  # ids 0..299, so each position is recognisable


def test_shards_hold_the_stream_in_order_as_uint16(tmp_path, stream):
    header = write_shards(
        {"train": [stream[:400], stream[400:]], "val": [stream[:50]]}, tmp_path, 300, shard_tokens=300
    )
    assert [s["tokens"] for s in header["splits"]["train"]] == [300, 300, 300, 100]
    assert json.loads((tmp_path / HEADER).read_text()) == header
    read = np.concatenate([np.fromfile(tmp_path / s["file"], dtype="<u2") for s in header["splits"]["train"]])
    assert (tmp_path / "train_000000.bin").stat().st_size == 600  # two bytes a token
    assert np.array_equal(read, stream)


def test_loader_batches_follow_the_stream_and_targets_are_shifted(tmp_path, stream):
    write_shards({"train": [stream]}, tmp_path, 300, shard_tokens=500)
    loader = ShardLoader(tmp_path, "train", batch_size=2, seq_len=8)
    x, y = loader.next_batch()
    assert x.dtype == torch.int64 and x.shape == (2, 8)
    assert x.flatten().tolist() == list(range(16)) and y.flatten().tolist() == list(range(1, 17))
    x, _ = loader.next_batch()
    assert x[0, 0] == 16
    batches = [loader.next_batch()[0] for _ in range(29)]  # 31 batches of 16 tokens: the next would not fit
    assert batches[-1][0, 0] == stream[30 * 16] and loader.shard == 1 and loader.position == 0
    x, _ = loader.next_batch()
    assert x[0, 0] == stream[500]  # the second shard starts where the first ended


def test_ranks_read_consecutive_blocks_of_one_big_batch(tmp_path, stream):
    write_shards({"train": [stream]}, tmp_path, 300)
    one = ShardLoader(tmp_path, "train", batch_size=4, seq_len=8)
    ranks = [ShardLoader(tmp_path, "train", batch_size=2, seq_len=8, rank=r, world_size=2) for r in range(2)]
    for _ in range(3):
        x, y = one.next_batch()
        parts = [loader.next_batch() for loader in ranks]
        assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)


def test_rank_batch_takes_block_micro_step_times_world_size_plus_rank():
    tokens = torch.arange(200)  # each token is its own position
    x, y = rank_batch(tokens, 2, batch_size=2, seq_len=4, rank=1, world_size=3)
    start = (2 * 3 + 1) * 8  # block 7 of 8 tokens
    assert x.tolist() == [list(range(start, start + 4)), list(range(start + 4, start + 8))]
    assert torch.equal(y, x + 1) and x.dtype == torch.int64
    x, y = rank_batch(tokens, 0, 3, 5)  # one process: the stream from its start
    assert torch.equal(x.flatten(), tokens[:15]) and torch.equal(y.flatten(), tokens[1:16])


@given(st.integers(0, 5), st.integers(1, 4), st.integers(1, 6), st.integers(1, 4))
def test_the_ranks_of_a_micro_step_together_read_one_big_batch(micro_step, batch_size, seq_len, world_size):
    """world_size processes of batch_size rows each read, in rank order, the rows of one process with
    world_size * batch_size rows: DDP then averages the gradients of exactly that big batch."""
    tokens = torch.randperm(1000, generator=torch.Generator().manual_seed(micro_step))
    parts = [rank_batch(tokens, micro_step, batch_size, seq_len, r, world_size) for r in range(world_size)]
    x, y = rank_batch(tokens, micro_step, world_size * batch_size, seq_len)
    assert torch.equal(torch.cat([p[0] for p in parts]), x) and torch.equal(torch.cat([p[1] for p in parts]), y)


def test_rank_batch_is_what_the_loader_reads(tmp_path, stream):
    write_shards({"train": [stream]}, tmp_path, 300)
    loaders = [ShardLoader(tmp_path, "train", batch_size=2, seq_len=8, rank=r, world_size=3) for r in range(3)]
    for micro_step in range(5):
        for rank, loader in enumerate(loaders):
            expected = rank_batch(torch.from_numpy(stream), micro_step, 2, 8, rank, 3)
            assert all(torch.equal(a, b) for a, b in zip(loader.next_batch(), expected, strict=True))


def test_rank_batch_errors_name_the_argument():
    tokens = torch.arange(50)
    with pytest.raises(ValueError, match="`rank` must be an int in 0..1 .*got 2"):
        rank_batch(tokens, 0, 2, 4, rank=2, world_size=2)
    with pytest.raises(ValueError, match="holds 50 tokens; micro-step 3 of rank 0 needs tokens 48..56"):
        rank_batch(tokens, 3, 2, 4, rank=0, world_size=2)
    with pytest.raises(ValueError, match="holds 49 tokens"):
        rank_batch(torch.arange(49), 0, 7, 7)  # a block of 49 tokens needs one more for the last target
    assert rank_batch(torch.arange(50), 0, 7, 7)[1][-1, -1] == 49
    with pytest.raises(TypeError, match="integer tensor"):
        rank_batch(tokens.float(), 0, 2, 4)


def test_loader_position_is_saved_and_restored(tmp_path, stream):
    write_shards({"train": [stream]}, tmp_path, 300, shard_tokens=200)
    loader = ShardLoader(tmp_path, "train", batch_size=2, seq_len=8)
    for _ in range(13):
        loader.next_batch()
    state = loader.state_dict()
    expected = [loader.next_batch()[0] for _ in range(60)]
    other = ShardLoader(tmp_path, "train", batch_size=2, seq_len=8)
    other.load_state_dict(state)
    assert all(torch.equal(a, other.next_batch()[0]) for a in expected)
    assert loader.epoch == other.epoch == 1  # 12 batches fit in each of the 5 shards: 73 batches wrapped once


def test_damaged_or_missing_data_is_reported(tmp_path, stream):
    with pytest.raises(FileNotFoundError, match="not a prepared shard directory"):
        ShardLoader(tmp_path, "train", 2, 8)
    write_shards({"train": [stream]}, tmp_path, 300)
    with open(tmp_path / "train_000000.bin", "r+b") as f:
        f.truncate(100)
    with pytest.raises(ValueError, match="train_000000.bin .* has 100 bytes, expected 2000"):
        ShardLoader(tmp_path, "train", 2, 8)
    with pytest.raises(ValueError, match="fit uint16"):
        write_shards({"train": [stream]}, tmp_path, 70000)
    with pytest.raises(ValueError, match="token ids must lie in 0..99"):
        write_shards({"train": [stream]}, tmp_path, 100)
    write_shards({"train": [stream[:20]]}, tmp_path, 300)
    with pytest.raises(ValueError, match="fewer than one step needs"):
        ShardLoader(tmp_path, "train", 2, 16)
    with pytest.raises(ValueError, match="`split` must be one of"):
        ShardLoader(tmp_path, "val", 1, 4)


def test_documents_start_with_end_of_text_and_val_comes_first(tmp_path):
    encoding = gpt2_encoding()
    documents = ["The first document.", "A second one, a little longer than the first.", "Third."]
    header = prepare_documents(iter(documents), tmp_path, val_tokens=6, shard_tokens=10)
    tokens = {
        split: np.concatenate([np.fromfile(tmp_path / s["file"], dtype=np.uint16) for s in shards]).tolist()
        for split, shards in header["splits"].items()
    }
    expected = [t for d in documents for t in [encoding.eot_token, *encoding.encode_ordinary(d)]]
    assert tokens["val"] == expected[:6] and tokens["train"] == expected[6:]
    assert header["vocab_size"] == 50257 and header["eot_token"] == 50256
    with pytest.raises(ValueError, match="only 5 tokens, not more than val_tokens=6"):
        prepare_documents(iter(["The first document."]), tmp_path, val_tokens=6)


def test_tiny_shakespeare_shards_decode_to_the_text(tmp_path):
    header = prepare_tiny_shakespeare(tmp_path)
    text, encoding = load_text("tinyshakespeare.txt"), gpt2_encoding()
    train = np.fromfile(tmp_path / header["splits"]["train"][0]["file"], dtype=np.uint16)
    val = np.fromfile(tmp_path / header["splits"]["val"][0]["file"], dtype=np.uint16)
    assert train[0] == val[0] == encoding.eot_token
    assert encoding.decode(train[1:].tolist()) + encoding.decode(val[1:].tolist()) == text
    assert len(val) / (len(train) + len(val)) == pytest.approx(0.1, abs=0.01)


@pytest.mark.network
def test_hub_documents_streams_a_few_tinystories(tmp_path):
    datasets = pytest.importorskip("datasets", reason="hub_documents needs `pip install datasets`")
    try:
        documents = list(hub_documents("roneneldan/TinyStories", limit=3))
    except (OSError, datasets.exceptions.DatasetNotFoundError) as error:
        pytest.skip(f"the Hugging Face Hub is unreachable: {error}")
    assert len(documents) == 3 and all(isinstance(d, str) and d for d in documents)
    header = prepare_documents(documents, tmp_path, val_tokens=10)
    assert header["splits"]["train"][0]["tokens"] > 10


def test_hub_documents_without_datasets_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)  # as if it were not installed
    with pytest.raises(ImportError, match="pip install datasets"):
        next(hub_documents("roneneldan/TinyStories"))


# ------------------------------------------------------------------------------------------------------------
# Enough data for a run, and more when it needs more
# ------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch_size", "seq_len", "accum", "shard_tokens"), [(2, 8, 1, 300), (3, 5, 4, 250), (1, 7, 3, 1000)]
)
def test_steps_available_is_what_the_loader_reads_before_it_starts_again(
    tmp_path, stream, batch_size, seq_len, accum, shard_tokens
):
    header = write_shards({"train": [stream]}, tmp_path, 300, shard_tokens=shard_tokens)
    loader = ShardLoader(tmp_path, "train", batch_size, seq_len)
    micro_steps = 0
    while loader.epoch == 0:
        loader.next_batch()
        micro_steps += 1
    assert steps_available(header, batch_size, seq_len, accum) == micro_steps // accum
    assert steps_available(header, batch_size, seq_len, 1, world_size=2) == sum(
        (s["tokens"] - 1) // (2 * batch_size * seq_len) for s in header["splits"]["train"]
    )


def _documents(n: int) -> list[str]:
    return [f"Document number {i} says {'something ' * (i % 7 + 1)}and stops." for i in range(n)]


def _train_ids(folder) -> list[int]:
    shards = read_header(folder)["splits"]["train"]
    return np.concatenate([np.fromfile(folder / s["file"], dtype=np.uint16) for s in shards]).tolist()


def test_prepare_stops_after_enough_train_tokens_and_extending_goes_on_from_the_next_document(tmp_path):
    documents = _documents(200)
    whole = prepare_documents(iter(documents), tmp_path / "whole", val_tokens=40, shard_tokens=500)
    assert whole["documents"] == 200
    part = prepare_documents(iter(documents), tmp_path / "part", val_tokens=40, train_tokens=300, shard_tokens=500)
    written = sum(s["tokens"] for s in part["splits"]["train"])
    assert 300 <= written < 300 + 30  # whole documents: stops after the one that reaches 300 tokens
    assert _train_ids(tmp_path / "part") == _train_ids(tmp_path / "whole")[:written]
    grown = extend_documents(iter(documents[part["documents"] :]), tmp_path / "part", 400, shard_tokens=500)
    total = sum(s["tokens"] for s in grown["splits"]["train"])
    assert total >= written + 400 and grown["documents"] > part["documents"]
    assert _train_ids(tmp_path / "part") == _train_ids(tmp_path / "whole")[:total]  # as if prepared at once
    assert [s["file"] for s in grown["splits"]["train"]][: len(part["splits"]["train"])] == [
        s["file"] for s in part["splits"]["train"]
    ]  # the old shards are kept, new ones numbered after them
    assert read_header(tmp_path / "part") == grown


def test_a_folder_that_is_not_a_document_stream_cannot_grow(tmp_path):
    prepare_tiny_shakespeare(tmp_path)
    with pytest.raises(ValueError, match="cannot grow"):
        extend_documents(iter(["more text"]), tmp_path, 10)


def test_hub_documents_skips_the_documents_a_folder_already_holds(monkeypatch):
    rows = [{"text": f"doc {i}"} for i in range(10)]

    class Stream(list):
        def skip(self, n):
            return Stream(self[n:])

    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda path, name, split, streaming: Stream(rows)
    monkeypatch.setitem(sys.modules, "datasets", fake)
    assert list(hub_documents("any/dataset", skip=7)) == ["doc 7", "doc 8", "doc 9"]
    assert list(hub_documents("any/dataset", skip=2, limit=2)) == ["doc 2", "doc 3"]
