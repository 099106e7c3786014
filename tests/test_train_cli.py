"""`python -m course_lib.train` (course_lib.train.main, with the command line read by train_cli): prepare data, train
GPT2 presets, log, resume; the run's one TrainConfig, model preset and dropout included."""

from __future__ import annotations

import json

import pytest
import torch

from course_lib.checkpoint import load_checkpoint
from course_lib.gpt2 import GPT2
from course_lib.train import main
from course_lib.train_cli import SMOKE, Command, read_command_line
from course_lib.train_setup import TrainConfig, build_model
from tests.train_helpers import make_shards


def test_help_lists_the_commands_and_the_settings(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--smoke",
        "--resume",
        "--micro-batch-size",
        "--total-batch-tokens",
        "--max-time-s",
        "--compile",
        "--peak-flops",
        "--model",
        "--dropout",
    ):
        assert flag in out


def test_a_run_logs_json_lines_and_resumes(tmp_path, capsys):
    data = make_shards(tmp_path / "data")
    args = ["run", "--data-dir", str(data), "--model", "tiny", "--seq-len", "16", "--micro-batch-size", "4"]
    args += ["--warmup-steps", "1", "--eval-interval", "0", "--device", "cpu", "--precision", "fp32"]
    args += ["--checkpoint-path", str(tmp_path / "ck.pt"), "--log", str(tmp_path / "runs" / "log.jsonl")]
    full = main([*args, "--max-steps", "4"])
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    logged = [json.loads(line) for line in (tmp_path / "runs" / "log.jsonl").read_text().splitlines()]  # folder made
    assert printed == logged == full
    assert [r["step"] for r in full if r["kind"] == "train"] == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="cannot resume exactly.*max_steps: 4 -> 6"):
        main([*args, "--max-steps", "6", "--resume"])
    again = main([*args, "--max-steps", "4", "--resume"])  # already finished: nothing left but the final save
    assert [r["kind"] for r in again] == ["resume", "start", "checkpoint"] and again[0]["step"] == 4
    saved = load_checkpoint(tmp_path / "ck.pt")["config"]  # one config, the model's settings in it, no side notes
    assert (saved["model"], saved["dropout"]) == ("tiny", 0.0) and "extra" not in saved
    with pytest.raises(ValueError, match="cannot resume exactly.*dropout: 0.0 -> 0.1"):
        main([*args, "--max-steps", "4", "--resume", "--dropout", "0.1"])


def test_the_command_line_is_read_into_one_config(tmp_path):
    data = make_shards(tmp_path / "data")
    command = read_command_line(["run", "--smoke", "--data-dir", str(data), "--dropout", "0.1", "--resume"])
    expected = TrainConfig(data_dir=str(data), dropout=0.1, **SMOKE)  # the --smoke preset, then the flags given
    assert command == Command(expected, resume=True, log=None)
    flags = ["run", "--data-dir", str(data), "--model", "gpt2-medium", "--max-steps", "70", "--compile"]
    config = read_command_line(flags).config
    assert (config.model, config.max_steps, config.compile, config.dropout) == ("gpt2-medium", 70, True, 0.0)


def test_the_model_and_its_dropout_are_settings_of_the_run(tmp_path, capsys):
    data = make_shards(tmp_path / "data")
    args = ["run", "--data-dir", str(data), "--seq-len", "16", "--micro-batch-size", "4", "--warmup-steps", "1"]
    args += ["--eval-interval", "0", "--device", "cpu", "--precision", "fp32", "--max-steps", "2"]
    losses = lambda records: [r["loss"] for r in records if r["kind"] == "train"]
    plain, dropped = losses(main([*args, "--model", "tiny"])), losses(main([*args, "--dropout", "0.5"]))
    assert plain == losses(main(args))  # "tiny" is the default preset
    assert plain != dropped  # the same weights and batches: the config's dropout reached the model
    capsys.readouterr()
    with pytest.raises(ValueError, match="`model` must be one of"):
        TrainConfig(data_dir=str(data), model="gpt5")
    with pytest.raises(ValueError, match="dropout"):
        TrainConfig(data_dir=str(data), dropout=1.5)


def test_build_model_presets():
    tiny = build_model("tiny", 50257, 64)
    assert isinstance(tiny, GPT2) and tiny.config.padded_vocab_size == 50304 and tiny.config.use_sdpa
    assert tiny.lm_head.weight is tiny.tok_emb.weight
    with torch.device("meta"):  # the real sizes, without allocating them
        small = build_model("gpt2", 50257, 1024)
    assert (small.config.n_layers, small.config.d_model) == (12, 768)
    with pytest.raises(ValueError, match="`name` must be one of"):
        build_model("gpt5", 50257, 64)
    with pytest.raises(ValueError, match="longer than gpt2's context of 1024"):
        build_model("gpt2", 50257, 2048)
