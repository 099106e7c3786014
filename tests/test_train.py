"""course_lib.train: the contract formulas, the choices made from the device, and the loop on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from course_lib import train_setup
from course_lib.checkpoint import CheckpointError, load_checkpoint
from course_lib.train import (
    PEAK_FLOPS,
    attention_shape,
    cosine_lr,
    estimate_mfu,
    gpu_model,
    grad_accum_steps,
    peak_flops,
    sample,
    time_the_loop,
    train,
)
from tests.char_gpt import CharGPT
from tests.learner_gpt import LearnerGPT
from tests.train_helpers import config, make_shards, tiny_model, train_losses

# ------------------------------------------------------------------------------------------------------------
# cosine_lr, grad_accum_steps, estimate_mfu
# ------------------------------------------------------------------------------------------------------------


def test_cosine_lr_warms_up_linearly_from_max_lr_over_warmup():
    assert [cosine_lr(s, 1.0, 0.1, 4, 20) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]


def test_cosine_lr_ends_at_min_lr_and_stays_there():
    assert cosine_lr(20, 1.0, 0.1, 4, 20) == pytest.approx(0.1, abs=1e-15)
    assert cosine_lr(21, 1.0, 0.1, 4, 20) == 0.1
    assert cosine_lr(12, 1.0, 0.1, 4, 20) == pytest.approx(0.55)  # half way: the mean of max and min


def test_cosine_lr_decay_matches_torchs_cosine_annealing():
    max_lr, min_lr, warmup, max_steps = 6e-4, 6e-5, 10, 50
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=max_lr)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=max_steps - warmup, eta_min=min_lr)
    for step in range(warmup, max_steps + 1):
        assert cosine_lr(step, max_lr, min_lr, warmup, max_steps) == pytest.approx(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()


@given(st.integers(1, 50), st.integers(1, 200), st.floats(1e-5, 1.0), st.floats(0.0, 1.0))
def test_cosine_lr_rises_then_falls_and_stays_between_min_and_max(warmup, extra, max_lr, fraction):
    max_steps, min_lr = warmup + extra, max_lr * fraction
    lrs = [cosine_lr(s, max_lr, min_lr, warmup, max_steps) for s in range(max_steps + 3)]
    assert all(a < b for a, b in zip(lrs[:warmup], lrs[1:warmup], strict=False))
    assert all(a >= b - 1e-15 for a, b in zip(lrs[warmup:], lrs[warmup + 1 :], strict=False))
    assert all(0 < lr <= max_lr * (1 + 1e-12) for lr in lrs[:warmup])
    assert all(min_lr - 1e-12 <= lr <= max_lr + 1e-12 for lr in lrs[warmup:])


def test_cosine_lr_rejects_warmup_not_below_max_steps():
    with pytest.raises(ValueError, match="warmup_steps.*smaller than.*max_steps"):
        cosine_lr(0, 1.0, 0.1, 10, 10)


def test_grad_accum_steps():
    assert grad_accum_steps(524288, 16, 1024) == 32  # GPT-2's 0.5M-token batch on one GPU
    assert grad_accum_steps(524288, 16, 1024, world_size=8) == 4
    with pytest.raises(ValueError, match="multiple of micro_batch_size \\* seq_len \\* world_size = 16 \\* 1024 \\* 3"):
        grad_accum_steps(524288, 16, 1024, world_size=3)
    with pytest.raises(ValueError, match="micro_batch_size"):
        grad_accum_steps(1024, 0, 16)


def test_estimate_mfu_counts_six_flops_per_parameter_and_the_attention_term():
    # one token per second through a 1-parameter, attention-free model needs 6 FLOP/s
    assert estimate_mfu(1, 0, 0, 0, 1024, tokens_per_second=1.0, peak_flops=6.0) == 1.0
    attention = 12 * 12 * 12 * 64 * 1024  # GPT-2 small at T=1024
    expected = (6 * 124_439_808 + attention) * 1e5 / PEAK_FLOPS["A100"]["bf16"]
    assert estimate_mfu(124_439_808, 12, 12, 64, 1024, 1e5, PEAK_FLOPS["A100"]["bf16"]) == pytest.approx(expected)
    with pytest.raises(ValueError, match="`peak_flops` must be a positive number"):
        estimate_mfu(1, 0, 0, 0, 1024, 1.0, peak_flops=0)


# ------------------------------------------------------------------------------------------------------------
# The device: names, peaks, precision, optimizer
# ------------------------------------------------------------------------------------------------------------

NAMES = {  # torch.cuda.get_device_name() as it reads on these GPUs -> the PEAK_FLOPS key
    "Tesla T4": "T4",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
    "NVIDIA A10G": "A10G",
    "NVIDIA A10": "A10",
    "NVIDIA L4": "L4",
    "NVIDIA L40S": "L40S",  # "L4" must not match inside "L40S"
    "NVIDIA L40": None,  # not in the table: its peak is measured
    "NVIDIA GeForce RTX 3090": "RTX 3090",
    "NVIDIA GeForce RTX 3090 Ti": None,  # another card, faster than the 3090
    "NVIDIA GeForce RTX 4090": "RTX 4090",
    "NVIDIA GeForce RTX 4090 D": None,  # fewer cores than the 4090
    "NVIDIA A100-SXM4-40GB": "A100",
    "NVIDIA A100-PCIE-40GB": "A100",
    "NVIDIA A100 80GB PCIe": "A100",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA H100 80GB HBM3": "H100 SXM",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA GH200 480GB": None,  # not an H200
    "nvidia h100 80gb hbm3": "H100 SXM",  # case is ignored
    "cpu": None,
}


@pytest.mark.parametrize("name", NAMES)
def test_gpu_model_finds_the_table_entry(name):
    assert gpu_model(name) == NAMES[name]


def test_every_table_entry_has_a_peak_in_the_precision_the_lesson_uses():
    capability = {"T4": (7, 5), "V100 SXM2": (7, 0), "V100 PCIe": (7, 0), "V100S PCIe": (7, 0)}
    for gpu in PEAK_FLOPS:
        precision = train_setup.choose_precision("cuda", capability.get(gpu, (8, 0)))
        assert PEAK_FLOPS[gpu][precision] > 1e12, gpu
    assert set(NAMES.values()) - {None} == set(PEAK_FLOPS)  # every entry is reached by a real device name


def test_peak_flops():
    assert peak_flops("Tesla T4", "fp16") == 65e12
    assert peak_flops("Tesla T4", "bf16") is None  # the T4 has no bf16 tensor cores
    assert peak_flops("Tesla V100-SXM2-16GB", "fp16") == 125e12
    assert peak_flops("NVIDIA A100-SXM4-80GB", "bf16") == peak_flops("NVIDIA A100-PCIE-40GB", "bf16") == 312e12
    assert peak_flops("NVIDIA H100 80GB HBM3", "bf16") == 989.5e12  # half the datasheet's 1,979 with sparsity
    assert peak_flops("NVIDIA H100 PCIe", "bf16") == 756.5e12
    assert peak_flops("NVIDIA H200", "bf16") == 989.5e12
    assert peak_flops("NVIDIA L4", "bf16") == 121e12
    assert peak_flops("NVIDIA GeForce RTX 4090", "bf16") == 165.2e12
    assert peak_flops("cpu", "fp32") is None


def test_measured_peak_is_the_flops_of_the_timed_matmuls():
    """2 * n**3 FLOPs per product, `repeats` products per round, the fastest round: with a clock that says each
    round took 0.5, 0.25 and 1.0 s, the peak is 2 * 64**3 * 4 / 0.25."""
    ticks = iter([0.0, 0.5, 10.0, 10.25, 20.0, 21.0])
    peak = train_setup.measure_matmul_peak("cpu", "fp32", size=64, repeats=4, rounds=3, clock=lambda: next(ticks))
    assert peak == 2 * 64**3 * 4 / 0.25


def test_an_unknown_device_gets_a_measured_peak():
    peak = train_setup.find_peak("cpu", "fp32")  # a CPU has no datasheet entry: measured, in a second or so
    assert peak.source == "measured" and peak.label == "against a measured peak"
    assert 1e8 < peak.flops < 1e14 and "fp32 matmuls on cpu" in peak.name  # any CPU of this century
    known = train_setup.Peak(989.5e12, "datasheet", "H100 SXM")
    assert known.label == "against the H100 SXM's datasheet peak"


def test_find_peak_measures_a_gpu_the_table_does_not_know(monkeypatch):
    monkeypatch.setattr(train_setup, "device_name", lambda device: "NVIDIA RTX PRO 6000 Blackwell")
    monkeypatch.setattr(train_setup, "measure_matmul_peak", lambda device, precision: 123e12)
    peak = train_setup.find_peak("cuda", "bf16")
    assert (peak.flops, peak.source) == (123e12, "measured")
    monkeypatch.setattr(train_setup, "device_name", lambda device: "NVIDIA H100 PCIe")
    assert train_setup.find_peak("cuda", "bf16") == train_setup.Peak(756.5e12, "datasheet", "H100 PCIe")


@pytest.mark.parametrize(
    ("device", "capability", "expected"),
    [
        ("cpu", None, "fp32"),
        ("mps", None, "fp32"),
        ("cuda", (7, 0), "fp16"),  # V100
        ("cuda", (7, 5), "fp16"),  # T4
        ("cuda", (8, 0), "bf16"),  # A100
        ("cuda", (8, 9), "bf16"),  # L4
        ("cuda", (9, 0), "bf16"),  # H100
    ],
)
def test_choose_precision_from_the_compute_capability(device, capability, expected):
    assert train_setup.choose_precision(device, capability) == expected


def test_precision_errors_and_scaler():
    with pytest.raises(ValueError, match="capability"):
        train_setup.choose_precision("cuda")
    with pytest.raises(ValueError, match="precision='fp16' needs a GPU"):
        train_setup.resolve_precision("fp16", "cpu")
    assert train_setup.resolve_precision("auto", "cpu") == "fp32"
    assert train_setup.grad_scaler("cpu", "fp16").is_enabled()
    assert not train_setup.grad_scaler("cpu", "bf16").is_enabled()
    assert not train_setup.grad_scaler("cpu", "fp32").is_enabled()
    assert isinstance(train_setup.autocast("cpu", "bf16"), torch.autocast)


def test_weight_decay_only_on_matrices():
    model = CharGPT(40, 8, d_model=16, n_layers=1, n_heads=2)
    decay, no_decay = train_setup.parameter_groups(model, 0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = {names[id(p)] for p in decay["params"]}
    assert {"tok_emb.weight", "pos_emb.weight", "lm_head.weight"} <= decayed
    assert {"blocks.0.attn.qkv.weight", "blocks.0.mlp.fc1.weight"} <= decayed
    assert not any(n.endswith("bias") or ".ln" in n or n.startswith("ln_f") for n in decayed), decayed
    assert all(p.dim() == 1 for p in no_decay["params"])  # biases and LayerNorm gains
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_fused_adamw_only_on_cuda():
    model = CharGPT(40, 8, d_model=16, n_layers=1, n_heads=2)
    assert not train_setup.configure_optimizer(model, 1e-3, device_type="cpu").defaults["fused"]
    assert train_setup.configure_optimizer(model, 1e-3, device_type="cuda").defaults["fused"]


def test_distributed_from_env(monkeypatch):
    assert train_setup.distributed_from_env() == train_setup.Distributed(0, 0, 1)
    monkeypatch.setenv("RANK", "3")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    dist = train_setup.distributed_from_env()
    assert (dist.rank, dist.local_rank, dist.world_size, dist.enabled, dist.is_main) == (3, 1, 4, True, False)


def test_attention_shape_reads_the_blocks():
    assert attention_shape(CharGPT(40, 8, d_model=48, n_layers=3, n_heads=4)) == (3, 4, 12)
    # A learner's attention need not keep a d_head: D is read from out_proj, as lesson 05's contract names it.
    learner = LearnerGPT(40, 8, 48, 4, 3)
    assert not hasattr(learner.blocks[0].attn, "d_head") and attention_shape(learner) == (3, 4, 12)
    assert attention_shape(torch.nn.Linear(2, 2)) is None


# ------------------------------------------------------------------------------------------------------------
# The model of a preset: the course's GPT2, or a GPT class of lesson 09's (the learner's)
# ------------------------------------------------------------------------------------------------------------


def test_build_model_makes_a_learners_gpt_at_the_presets_sizes_with_gpt2s_initialisation():
    torch.manual_seed(0)
    theirs = train_setup.build_model("gpt2", 50257, 1024, gpt=LearnerGPT)
    assert isinstance(theirs, LearnerGPT) and theirs.lm_head.weight is theirs.tok_emb.weight
    assert theirs.tok_emb.weight.shape == (50257, 768) and theirs.pos_emb.weight.shape == (1024, 768)
    assert len(theirs.blocks) == 12 and theirs.blocks[0].attn.n_heads == 12  # GPT-2 124M: 12 x 12 x 768
    assert sum(p.numel() for p in theirs.parameters()) == 124_439_808  # GPT-2 small, unpadded vocabulary
    out_proj = torch.cat([b.attn.out_proj.weight.flatten() for b in theirs.blocks])
    fc1 = torch.cat([b.mlp.fc1.weight.flatten() for b in theirs.blocks])
    assert abs(fc1.std().item() - 0.02) < 0.001 and abs(out_proj.std().item() - 0.02 / 24**0.5) < 0.0002
    assert all(bool((b.attn.qkv.bias == 0).all()) for b in theirs.blocks)
    course = train_setup.build_model("gpt2", 50257, 1024)
    assert course.tok_emb.weight.shape == (50304, 768)  # the course's: padded to a multiple of 64
    tiny = train_setup.build_model("tiny", 97, 32, gpt=LearnerGPT)
    assert tiny.pos_emb.weight.shape == (32, 64) and len(tiny.blocks) == 2 and tiny.blocks[0].attn.n_heads == 4


def test_fit_micro_batch_halves_until_the_measured_peak_fits():
    peaks = {16: None, 8: 9 * 2**30, 4: 5 * 2**30}  # 16 runs out of memory, 8 needs 9 GiB, 4 needs 5

    def measure(rows):
        if peaks[rows] is None:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory")
        return peaks[rows]

    fit = train_setup.fit_micro_batch(measure, 16, 6 * 2**30)
    assert fit.micro_batch_size == 4 and fit.out_of_memory == (16,)
    assert fit.tried == ((16, None), (8, 9 * 2**30), (4, 5 * 2**30))
    assert train_setup.fit_micro_batch(measure, 8, 10 * 2**30).micro_batch_size == 8  # the first that fits
    with pytest.raises(ValueError, match="no micro-batch fits 4.0 GiB: tried 16 .out of memory., 8 .9.0 GiB"):
        train_setup.fit_micro_batch(measure, 16, 4 * 2**30, minimum=4)
    unmeasured = train_setup.fit_micro_batch(lambda rows: None, 16, 2**30)  # no GPU: the plan's micro-batch stays
    assert unmeasured.micro_batch_size == 16 and unmeasured.tried == ((16, None),)


def test_step_memory_measures_nothing_on_a_cpu():
    assert train_setup.step_memory(LearnerGPT(32, 8, 16, 2, 1), 2, 8, "cpu", "fp32") is None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_an_attention_that_keeps_its_weights_needs_more_memory_than_the_fused_kernel():
    """On a GPU: a step of the learner's GPT (explicit (B, H, T, T) weights) peaks higher than the course's GPT2
    (F.scaled_dot_product_attention) at the same sizes, and the fit halves the micro-batch for less room."""
    torch.manual_seed(0)
    theirs = train_setup.build_model("tiny", 512, 512, gpt=LearnerGPT)
    course = train_setup.build_model("tiny", 512, 512)
    precision = train_setup.choose_precision("cuda", torch.cuda.get_device_capability())
    peaks = [train_setup.step_memory(m, 16, 512, "cuda", precision) for m in (theirs, course)]
    assert peaks[0] > peaks[1] > 0
    fit = train_setup.fit_micro_batch(lambda rows: train_setup.step_memory(theirs, rows, 512, "cuda", precision), 16,
                                      peaks[0] - 1)  # fmt: skip
    assert fit.micro_batch_size < 16


# ------------------------------------------------------------------------------------------------------------
# The loop (CPU, fp32, a tiny model on a learnable Markov chain)
# ------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    return make_shards(tmp_path_factory.mktemp("shards"))


def test_training_lowers_the_loss_and_logs_each_step(shards):
    records = train(tiny_model(), config(shards, max_steps=30, eval_interval=10, eval_batches=4))
    losses, evals = train_losses(records), [r["val_loss"] for r in records if r["kind"] == "eval"]
    assert len(losses) == 30 and [r["step"] for r in records if r["kind"] == "eval"] == [0, 10, 20, 30]
    assert evals[0] > math.log(32) - 0.3 and evals[-1] < evals[0] - 1.0, evals
    step = next(r for r in records if r["kind"] == "train")
    assert step["tokens_per_s"] > 0 and step["mfu"] is None and step["lr"] == cosine_lr(0, 3e-3, 3e-4, 2, 30)


def test_mfu_is_logged_against_a_stated_peak(shards):
    """On a CPU there is no datasheet peak: with `peak_flops` given, each step's MFU is estimate_mfu of its
    tokens/s against it (the lesson states its CPU peak as an assumption)."""
    model = tiny_model(kind="gpt2")
    records = train(model, config(shards, max_steps=3, peak_flops=1e12))
    n_params = sum(p.numel() for p in model.parameters())
    for step in (r for r in records if r["kind"] == "train"):
        expected = estimate_mfu(n_params, 2, 4, 8, 16, step["tokens_per_s"], 1e12)
        assert step["mfu"] == pytest.approx(expected, rel=1e-12) and 0 < step["mfu"] < 1
    with pytest.raises(ValueError, match="`peak_flops` must be a positive number"):
        config(shards, peak_flops=0.0)


def test_accumulation_equals_one_big_batch(shards):
    """Two micro-batches of 2 rows with loss/2 each = one batch of 4 rows: the same tokens, the same mean."""
    big = train(tiny_model(), config(shards, micro_batch_size=4))
    accumulated = train(tiny_model(), config(shards, micro_batch_size=2, total_batch_tokens=4 * 16))
    assert train_losses(accumulated) == pytest.approx(train_losses(big), rel=1e-5)
    wrong = train(tiny_model(), config(shards, micro_batch_size=2))  # half the tokens per step
    assert train_losses(wrong)[1:] != pytest.approx(train_losses(big)[1:], rel=1e-5)


def test_clipping_bounds_the_update(shards):
    tight = train(tiny_model(), config(shards, grad_clip=1e-3, max_steps=3))
    loose = train(tiny_model(), config(shards, grad_clip=0.0, max_steps=3))
    assert train_losses(tight)[0] == train_losses(loose)[0]  # the first loss comes before any update
    assert train_losses(tight)[2] != train_losses(loose)[2]


class Crash(Exception):
    pass


def _crash_at(step):
    def on_log(record):
        if record["kind"] == "train" and record["step"] == step:
            raise Crash

    return on_log


@pytest.mark.parametrize(("kind", "dropout"), [("char", 0.0), ("char", 0.2), ("gpt2", 0.2), ("learner", 0.0)])
def test_resume_after_a_crash_continues_exactly(shards, tmp_path, kind, dropout):
    """Lesson 11's resume, for the tests' CharGPT, the course's GPT2 and a learner's GPT (tests/learner_gpt.py, as
    lesson 11 trains the learner's lesson 09 GPT)."""
    settings = {"max_steps": 10, "checkpoint_interval": 4, "checkpoint_path": str(tmp_path / "ck.pt")}
    model = tiny_model(dropout=dropout, kind=kind)
    straight = train_losses(train(model, config(shards, **settings | {"checkpoint_path": None})))
    with pytest.raises(Crash):  # crashes during step 6, two steps after the checkpoint of step 4
        train(tiny_model(dropout=dropout, kind=kind), config(shards, **settings), on_log=_crash_at(6))
    assert load_checkpoint(tmp_path / "ck.pt")["step"] == 4
    resumed = train(tiny_model(seed=99, dropout=dropout, kind=kind), config(shards, **settings), resume=True)
    assert resumed[0] | {"elapsed_s": 0} == {
        "kind": "resume",
        "step": 4,
        "path": str(tmp_path / "ck.pt"),
        "elapsed_s": 0,
    }
    assert train_losses(resumed) == straight[4:]  # bit for bit


def test_resume_without_the_rng_state_differs_with_dropout(shards, tmp_path, monkeypatch):
    """The test above can fail: skipping one piece of the state (dropout's generator) changes the losses."""
    settings = {"max_steps": 8, "checkpoint_interval": 4, "checkpoint_path": str(tmp_path / "ck.pt")}
    straight = train_losses(train(tiny_model(dropout=0.2), config(shards, **settings)))
    (tmp_path / "ck.pt").unlink()
    with pytest.raises(Crash):
        train(tiny_model(dropout=0.2), config(shards, **settings), on_log=_crash_at(5))
    monkeypatch.setattr("course_lib.train.set_rng_state", lambda state: None)
    resumed = train(tiny_model(dropout=0.2), config(shards, **settings), resume=True)
    assert train_losses(resumed)[0] != straight[4]


def test_resume_refuses_changed_settings(shards, tmp_path):
    path = str(tmp_path / "ck.pt")
    train(tiny_model(), config(shards, max_steps=4, checkpoint_path=path))
    with pytest.raises(ValueError, match="cannot resume exactly.*micro_batch_size: 4 -> 2"):
        train(tiny_model(), config(shards, max_steps=4, micro_batch_size=2, checkpoint_path=path), resume=True)


def test_time_budget_stops_with_a_checkpoint(shards, tmp_path):
    path = tmp_path / "ck.pt"
    records = train(tiny_model(), config(shards, max_time_s=0.0, checkpoint_path=str(path)))
    assert [r["kind"] for r in records] == ["start", "stop", "checkpoint"] and load_checkpoint(path)["step"] == 0
    start = {"kind": "start", "step": 0, "model": "tests.char_gpt.CharGPT", "device": "cpu", "precision": "fp32"}
    start |= {"fused_adamw": False}
    assert records[0].pop("elapsed_s") >= 0  # every record says when it was made
    assert records[0] == start | {"compile": False, "grad_accum_steps": 1, "world_size": 1}


def test_config_is_checked(shards):
    with pytest.raises(ValueError, match="warmup_steps"):
        config(shards, warmup_steps=8)
    with pytest.raises(ValueError, match="precision"):
        config(shards, precision="fp8")
    with pytest.raises(ValueError, match="total_batch_tokens"):
        train(tiny_model(), config(shards, total_batch_tokens=100))


def test_resume_from_a_damaged_checkpoint_stops_and_keeps_the_file(shards, tmp_path):
    path = tmp_path / "ck.pt"
    train(tiny_model(), config(shards, max_steps=4, checkpoint_path=str(path)))
    damaged = path.read_bytes()[:1000]
    path.write_bytes(damaged)
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        train(tiny_model(), config(shards, max_steps=4, checkpoint_path=str(path)), resume=True)
    assert path.read_bytes() == damaged  # left for the user to inspect, not replaced by a fresh start


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["auto", "fp16"])
def test_cuda_mixed_precision_fused_adamw_and_resume(shards, tmp_path, precision):
    """On a GPU: the precision chosen from the capability (or fp16 + GradScaler), the fused AdamW, and a
    resume that continues the run (to rounding: GPU kernels need not be bit-reproducible)."""
    capability = torch.cuda.get_device_capability()
    expected = train_setup.choose_precision("cuda", capability) if precision == "auto" else "fp16"
    settings = {"device": "cuda", "precision": precision, "max_steps": 10, "checkpoint_interval": 5}
    straight = train(tiny_model(kind="gpt2"), config(shards, **settings))
    assert straight[0]["precision"] == expected and straight[0]["fused_adamw"]
    losses = train_losses(straight)
    assert all(math.isfinite(x) for x in losses) and losses[-1] < losses[0]
    path = str(tmp_path / "ck.pt")
    with pytest.raises(Crash):
        train(tiny_model(kind="gpt2"), config(shards, checkpoint_path=path, **settings), on_log=_crash_at(7))
    resumed = train(tiny_model(kind="gpt2"), config(shards, checkpoint_path=path, **settings), resume=True)
    assert train_losses(resumed) == pytest.approx(losses[5:], rel=2e-2)


def test_samples_come_from_their_own_generator(tmp_path):
    """A sample is the same for the same seed and leaves torch's global generator (dropout's) where it was."""
    model = tiny_model(kind="gpt2")
    torch.manual_seed(5)
    before = torch.get_rng_state()
    first = sample(model, [1, 2, 3], 20, 16, torch.Generator().manual_seed(0))
    assert torch.equal(torch.get_rng_state(), before)
    assert first == sample(model, [1, 2, 3], 20, 16, torch.Generator().manual_seed(0))
    assert first != sample(model, [1, 2, 3], 20, 16, torch.Generator().manual_seed(1))
    assert len(first) == 20 and all(0 <= i < 32 for i in first)


# ------------------------------------------------------------------------------------------------------------
# Planning a run from measured times
# ------------------------------------------------------------------------------------------------------------


def test_plan_steps_is_what_the_budget_leaves_divided_by_the_step_time():
    plan = train_setup.plan_steps(budget_s=100.0, spent_s=10.0, step_s=2.0, extra_s=6.0)
    assert (plan.max_steps, plan.fits) == (42, True)  # (100 - 10 - 6) / 2
    assert plan.expected_s == 100.0
    assert train_setup.plan_steps(100.0, 10.0, 2.5, 6.0).max_steps == 33  # 84 / 2.5 = 33.6: rounded down


@given(
    st.floats(10.0, 1e5),  # the budget
    st.floats(0.0, 0.8),  # the share of it spent compiling and timing
    st.floats(0.0, 0.1),  # the share taken by evaluations, samples and checkpoints
    st.floats(1e-4, 0.01),  # a step's share of what is left for the steps
)
def test_a_plan_that_fits_ends_within_a_step_of_its_budget(budget, spent, extra, step):
    spent_s, extra_s = spent * budget, extra * budget
    step_s = step * (budget - spent_s - extra_s)
    plan = train_setup.plan_steps(budget, spent_s, step_s, extra_s)
    assert plan.fits
    assert budget - step_s * (1 + 1e-9) <= plan.expected_s <= budget * (1 + 1e-9)  # so within 1 % of the budget


def test_when_compilation_eats_the_budget_the_plan_runs_the_minimum_and_says_it_does_not_fit():
    plan = train_setup.plan_steps(budget_s=60.0, spent_s=75.0, step_s=0.5, extra_s=3.0, min_steps=10)
    assert (plan.max_steps, plan.fits) == (10, False)
    assert plan.expected_s == 75.0 + 10 * 0.5 + 3.0  # 83 s: the caller can say it overruns by 23 s
    tight = train_setup.plan_steps(budget_s=60.0, spent_s=50.0, step_s=2.0, min_steps=10)  # room for 5 steps
    assert (tight.max_steps, tight.fits) == (10, False)


def test_plan_steps_rejects_impossible_times():
    with pytest.raises(ValueError, match="step_s"):
        train_setup.plan_steps(60.0, 1.0, 0.0)
    with pytest.raises(ValueError, match="spent_s"):
        train_setup.plan_steps(60.0, -1.0, 0.5)
    with pytest.raises(ValueError, match="budget_s"):
        train_setup.plan_steps(0.0, 1.0, 0.5)


def test_time_the_loop_times_each_part_and_puts_the_weights_back(shards):
    settings = {"max_steps": 6, "eval_interval": 3, "eval_batches": 2, "checkpoint_interval": 2}
    model = tiny_model(kind="gpt2")
    before = {k: v.clone() for k, v in model.state_dict().items()}
    timed = time_the_loop(model, config(shards, **settings), steps=4)
    assert set(timed) == {"first_step_s", "step_s", "eval_s", "sample_s", "checkpoint_s", "total_s"}
    assert all(v >= 0 for v in timed.values()) and timed["step_s"] > 0 and timed["eval_s"] > 0
    assert timed["sample_s"] == 0  # the run samples nothing (and the Markov shards have no tokenizer)
    assert timed["total_s"] >= timed["first_step_s"] + 2 * timed["step_s"]  # two of the 3 timed steps >= median
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    # the run after the timing is the run without it
    assert train_losses(train(model, config(shards, **settings))) == train_losses(
        train(tiny_model(kind="gpt2"), config(shards, **settings))
    )
    with pytest.raises(ValueError, match="steps"):
        time_the_loop(model, config(shards, **settings), steps=1)


@pytest.mark.parametrize(
    "device",
    [
        pytest.param("cpu", marks=pytest.mark.slow),  # torch.compile on the CPU: tens of seconds
        pytest.param(
            "cuda",
            marks=[pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")],
        ),
    ],
)
def test_the_timed_steps_compile_the_model_once_for_the_run(shards, device):
    """time_the_loop's compilation is the run's: the run after it finds the compiled graphs and compiles none,
    so the plan, which counts the compilation once, holds."""
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    model = tiny_model(kind="gpt2")
    settings = config(shards, device=device, compile=True, max_steps=4, eval_interval=2, eval_batches=1)
    time_the_loop(model, settings, steps=3)
    graphs = counters["stats"]["unique_graphs"]
    assert graphs > 0  # the training step and the evaluation were compiled
    train(model, settings)
    assert counters["stats"]["unique_graphs"] == graphs
    torch._dynamo.reset()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_measured_matmul_peak_does_not_exceed_the_datasheet():
    """A datasheet peak below what the GPU measurably does would be a wrong table entry (or a wrong match of the
    device name, say a PCIe card taken for an SXM one)."""
    name = torch.cuda.get_device_name()
    precision = train_setup.choose_precision("cuda", torch.cuda.get_device_capability())
    datasheet = peak_flops(name, precision)
    if datasheet is None:
        pytest.skip(f"{name} is not in PEAK_FLOPS (lesson 11 measures its peak instead)")
    assert 0 < train_setup.measure_matmul_peak("cuda", precision) <= 1.05 * datasheet
