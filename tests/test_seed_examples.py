"""Every number of ../shared/SEED-EXAMPLES.md (E1-E9), through the public API and the CLI."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from designer.cli import cli
from models import Assumptions, Hardware, Layout, evaluate, zoo
from models.comm import p2p_s, tp_bandwidth_limit, tp_max_degree
from models.flops import training_flops_6nd
from models.memory import (
    activation_bytes_per_layer,
    min_gpus_for_memory,
    model_state_gb,
    seed_activation_bytes,
)
from models.pipeline import (
    article_held_microbatches,
    bubble_fraction,
    in_flight_microbatches,
    naive_recompute_layer_forwards,
    stages_needed,
)
from models.transformer import TransformerSpec

ARTICLE_4090 = """
gpus:
  rtx4090:
    dense_bf16_tflops: 330
    scale_up_bw_gb_per_s_per_direction: 32
"""

# A GPT-shaped layer (4h MLP, no GQA) with Llama-2-70B's h, L and heads: Korthikanti's formula exactly.
GPT_SHAPED_70B = """
name: gpt-shaped-70b
layers: 80
hidden: 8192
heads: 64
vocab: 32000
seq_len: 4096
"""


# The seed's Llama 2 70B layout on H100s (E1, E2)
LLAMA2_70B_TP8_PP4_DP4 = (
    "evaluate --model llama2-70b --tp 8 --pp 4 --dp 4 --global-batch 1024".split()
)


def run(args):
    result = CliRunner().invoke(cli, args)
    return result


@pytest.fixture
def article_catalog(tmp_path):
    path = tmp_path / "article-4090.yaml"
    path.write_text(ARTICLE_4090)
    return path


# E1 -----------------------------------------------------------------------
def test_e1_training_compute():
    assert training_flops_6nd(70e9, 2e12) == pytest.approx(8.4e23, rel=1e-12)


def test_e1_via_cli():
    out = run([*LLAMA2_70B_TP8_PP4_DP4, "--tokens", "2T", "--json"])
    assert out.exit_code == 0, out.output
    flops = json.loads(out.output)["training_flops_6nd"]
    # Llama-2-70B's exact architecture has 68.98e9 parameters; the article rounds to 70e9.
    assert flops == pytest.approx(8.4e23, rel=0.02)
    assert flops == pytest.approx(6 * zoo()["llama2-70b"].params() * 2e12, rel=1e-12)


# E2 -----------------------------------------------------------------------
def test_e2_rtx4090_tp_limit():
    assert 330e12 / 32e9 == pytest.approx(10312.5)
    assert tp_bandwidth_limit(8192, 32, 330) == pytest.approx(2.383, abs=1e-3)
    assert tp_max_degree(8192, 32, 330) == 2


def test_e2_h100_tp_limit():
    assert 989e12 / 450e9 == pytest.approx(2197.8, abs=0.05)
    assert tp_bandwidth_limit(8192, 450, 989) == pytest.approx(11.18, abs=0.01)
    assert tp_max_degree(8192, 450, 989) == 11


def test_e2_one_head_per_gpu():
    spec = zoo()["llama2-70b"]
    flops_per_byte = 3 * spec.hidden / spec.heads  # 3h/t with t = heads
    assert flops_per_byte == 3 * spec.head_dim == 384
    needed_gb_per_s = 330e12 / flops_per_byte / 1e9
    assert needed_gb_per_s == pytest.approx(859.4, abs=0.1)
    assert 2 * needed_gb_per_s / 1e3 == pytest.approx(1.7, abs=0.05)  # TB/s both ways
    assert 2 * needed_gb_per_s > 900 > 64


def test_e2_catalog_holds_true_4090_rate(catalog):
    assert catalog.gpu("rtx4090").dense_bf16_tflops == pytest.approx(165.2)


def test_e2_via_cli_tp_bandwidth(article_catalog):
    base = [
        "evaluate",
        "--model",
        "llama2-70b",
        "--gpu",
        "rtx4090",
        "--catalog",
        str(article_catalog),
        "--pp",
        "80",
        "--global-batch",
        "160",
        "--json",
    ]
    ok = json.loads(run([*base, "--tp", "2"]).output)
    assert "tp_bandwidth" not in {v["constraint"] for v in ok["violations"]}
    bad = json.loads(run([*base, "--tp", "4"]).output)
    hit = [v for v in bad["violations"] if v["constraint"] == "tp_bandwidth"]
    assert hit and "2.38" in hit[0]["detail"]


def test_e2_h100_tp8_is_fine_via_cli():
    out = json.loads(run([*LLAMA2_70B_TP8_PP4_DP4, "--json"]).output)
    assert "tp_bandwidth" not in {v["constraint"] for v in out["violations"]}


# E3 -----------------------------------------------------------------------
def test_e3_model_states():
    layout = Layout(tp=1, pp=1, dp=1, micro_batch=8, global_batch=8, zero=0)
    weights, grads, optimizer = model_state_gb(70e9, layout, Assumptions())
    assert (weights, grads, optimizer) == pytest.approx((140.0, 140.0, 840.0))


def test_e3_activations_and_total():
    spec = zoo()["llama2-70b"]
    act = seed_activation_bytes(spec, seq_len=4096, micro_batch=8, tp=1) / 1e9
    assert act == pytest.approx(730.1, abs=0.05)
    gpt = TransformerSpec(name="gpt", layers=80, hidden=8192, heads=64, vocab=32000, seq_len=4096)
    per_layer = activation_bytes_per_layer(gpt, 4096, 8, tp=1, sp=False, recompute="selective")
    assert per_layer * 80 / 1e9 == pytest.approx(730.1, abs=0.05)
    total = 140 + 140 + 840 + act
    assert total == pytest.approx(1850, abs=0.5)
    assert min_gpus_for_memory(1850, 80) == 24
    assert min_gpus_for_memory(1850, 24) == 78


def test_e3_via_cli(tmp_path):
    spec_file = tmp_path / "gpt70.yaml"
    spec_file.write_text(GPT_SHAPED_70B)
    out = json.loads(
        run(
            [
                "evaluate",
                "--model",
                str(spec_file),
                "--gpu",
                "h200",
                "--micro-batch",
                "8",
                "--no-sequence-parallel",
                "--recompute",
                "selective",
                "--zero",
                "0",
                "--json",
            ]
        ).output
    )
    assert out["memory_gb"]["activations"] == pytest.approx(730.1, abs=0.05)
    params = TransformerSpec(
        name="g", layers=80, hidden=8192, heads=64, vocab=32000, seq_len=4096
    ).params()
    assert out["memory_gb"]["weights"] == pytest.approx(2 * params / 1e9)
    assert out["memory_gb"]["optimizer"] == pytest.approx(12 * params / 1e9)
    assert out["feasible"] is False  # ~1.8 TB on one 141 GB GPU


# E4 -----------------------------------------------------------------------
def test_e4_pipeline_activation_cost():
    assert article_held_microbatches(80) == pytest.approx(160, abs=1)
    assert article_held_microbatches(8) == pytest.approx(16, abs=1)
    assert naive_recompute_layer_forwards(80) == 3240
    assert naive_recompute_layer_forwards(80) / 80 == pytest.approx(40, abs=0.6)
    # the designer models 1F1B: the first stage holds p micro-batches of L/p layers
    assert in_flight_microbatches(80, 1, 1000) == 80
    assert in_flight_microbatches(8, 1, 1000) == 8


def test_e4_bubble():
    assert bubble_fraction(8, 64) == pytest.approx(7 / 64)
    assert bubble_fraction(8, 64, vp=2) == pytest.approx(7 / 128)


def test_e4_fill_rule_via_cli():
    out = json.loads(
        run(
            [
                "evaluate",
                "--model",
                "llama2-70b",
                "--tp",
                "8",
                "--pp",
                "8",
                "--dp",
                "1",
                "--global-batch",
                "4",
                "--json",
            ]
        ).output
    )
    assert "pipeline_fill" in {v["constraint"] for v in out["violations"]}


def test_e4_fewer_stages_is_faster(catalog):
    spec = zoo()["llama2-70b"]
    hw = Hardware.from_catalog(catalog, "h200")
    few = evaluate(spec, hw, Layout(tp=8, pp=2, dp=8, micro_batch=1, global_batch=512))
    many = evaluate(spec, hw, Layout(tp=8, pp=8, dp=2, micro_batch=1, global_batch=512))
    assert few.step_time_s < many.step_time_s


# E5 -----------------------------------------------------------------------
def test_e5_dp_traffic_arithmetic():
    stage_params = 1e9
    assert stage_params * 4 / 1e9 == 4.0  # fp32 gradients, GB
    flops = training_flops_6nd(stage_params, 8 * 4096)
    assert flops / 1e12 == pytest.approx(196.6, abs=0.05)
    assert flops / 330e12 == pytest.approx(0.6, abs=0.005)
    one_way = p2p_s(4e9, 32)
    assert one_way == pytest.approx(0.125)
    assert 2 * one_way == pytest.approx(0.25)
    assert 80 * round(flops / 330e12, 1) == pytest.approx(48)  # the article's 80 x 0.6 s
    assert 80 * flops / 330e12 == pytest.approx(48, rel=0.01)


def test_e5_nics(catalog):
    nic = catalog.nic("cx6-200g")
    assert nic.bw_gb_per_s_per_direction == 25.0
    gpu = catalog.gpu("rtx4090")
    assert gpu.server.nic_slots == gpu.server.gpus_per_server == 8
    # 25 GB/s is about one PCIe Gen4 x16 per direction (31.5 GB/s)
    assert nic.bw_gb_per_s_per_direction / 31.5 == pytest.approx(0.8, abs=0.05)


def test_e5_via_cli_default_nics():
    out = run(
        [
            "evaluate",
            "--model",
            "llama2-7b",
            "--gpu",
            "rtx4090",
            "--tp",
            "2",
            "--pp",
            "4",
            "--dp",
            "1",
            "--global-batch",
            "8",
        ]
    )
    assert "8 x cx6-200g" in out.output


def test_e5_local_accumulation_hides_allreduce(catalog):
    """Accumulating many micro-batches before one all-reduce makes DP traffic small next to compute."""
    spec = zoo()["llama2-7b"]
    hw = Hardware.from_catalog(catalog, "a100-80gb")
    ev = evaluate(spec, hw, Layout(tp=1, pp=4, dp=8, micro_batch=1, global_batch=8 * 80))
    assert ev.breakdown.dp_comm < 0.05 * ev.breakdown.compute


# E6 -----------------------------------------------------------------------
def test_e6_batch_ceiling(catalog):
    layout = Layout(tp=1, pp=1, dp=2048, micro_batch=8, global_batch=16384)
    assert layout.global_batch == 2048 * 8
    assert layout.grad_accum == 1
    spec = zoo()["llama2-7b"]
    hw = Hardware.from_catalog(catalog, "h100-sxm")
    ceiling = Assumptions(batch_ceiling_tokens=16384 * 4096)
    ok = evaluate(spec, hw, layout, assumptions=ceiling)
    assert "batch_ceiling" not in {v.constraint for v in ok.violations}
    big = Layout(tp=1, pp=1, dp=2048, micro_batch=8, global_batch=32768)
    bad = evaluate(spec, hw, big, assumptions=ceiling)
    assert "batch_ceiling" in {v.constraint for v in bad.violations}


# E7 -----------------------------------------------------------------------
def test_e7_tp_inside_server_cuts_stages():
    assert stages_needed(80, layers_per_gpu=1, tp=1) == 80
    assert stages_needed(80, layers_per_gpu=1, tp=8) == 10


# E8 -----------------------------------------------------------------------
def test_e8_global_batch_formula():
    layout = Layout(tp=1, pp=1, dp=1, micro_batch=5, global_batch=10)
    assert layout.grad_accum == 2
    samples = 1000
    assert samples // layout.global_batch == 100
    full = Layout(tp=1, pp=1, dp=1, micro_batch=10, global_batch=10)
    assert full.grad_accum == 1 and samples // full.global_batch == 100
    general = Layout(tp=8, pp=4, dp=16, micro_batch=2, global_batch=2 * 8 * 16)
    assert general.num_gpus == 8 * 4 * 16
    assert general.dp == general.num_gpus // (general.tp * general.pp)
    assert general.global_batch == general.micro_batch * general.grad_accum * general.dp


# E9 -----------------------------------------------------------------------
def test_e9_h200_vs_h100(catalog):
    h100, h200 = catalog.gpu("h100-sxm"), catalog.gpu("h200")
    assert h100.dense_bf16_tflops == h200.dense_bf16_tflops == 989
    assert (h100.memory_gb, h200.memory_gb) == (80, 141)
    assert (h100.memory_bw_tb_per_s, h200.memory_bw_tb_per_s) == (3.35, 4.8)


def test_e9_h200_fits_larger_microbatch_fewer_stages(catalog):
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=8, pp=2, dp=4, micro_batch=8, global_batch=256)
    on_h100 = evaluate(spec, Hardware.from_catalog(catalog, "h100-sxm"), layout)
    on_h200 = evaluate(spec, Hardware.from_catalog(catalog, "h200"), layout)
    assert "memory" in {v.constraint for v in on_h100.violations}
    assert on_h200.feasible
    assert math.isclose(on_h100.memory.total, on_h200.memory.total)
