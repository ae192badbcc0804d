"""Context parallelism across servers and servers with fewer NICs (issue 31, item 4): ring
attention's KV exchange over the NICs (models.step.cp_nic_mb_s) in evaluate, in both
solvers, and the 4-NIC A100 server GPT-NeoX-20B trained on."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from designer.question.build import build_scenario
from helpers import run_cli
from models import comm, moe_zoo
from models.evaluate import Hardware, evaluate
from models.layout import Assumptions, Layout
from models.step import (
    cp_crosses_nics,
    cp_ring_bytes_per_microbatch,
    slowest_stage,
    step_coefficients,
)
from models.transformer import TransformerSpec
from solvers import solve_cpsat, solve_exhaustive

# Llama 3 405B's long-context stage (Dubey et al. 2024, "The Llama 3 Herd of Models",
# table 4): TP 8, CP 16, PP 16, DP 8 on 16,384 H100, 131,072 tokens, 16 sequences per DP
# rank; 126 layers in 16 stages count the embedding and the loss as layers
LLAMA3_128K = [
    "--model", "llama3-405b", "--tp", "8", "--cp", "16", "--pp", "16", "--dp", "8",
    "--vp", "8", "--seq-len", "131072", "--global-batch", "128", "--embedding-in-split",
    "--loss-in-split", "--recompute", "full",
]  # fmt: skip


def test_llama3_128k_stage_evaluates_with_cp_on_the_nics():
    res = run_cli(["evaluate", *LLAMA3_128K, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["feasible"], d["violations"]
    assert d["num_gpus"] == 16384
    assert "cp_nic_comm" in d["breakdown_s"]
    ring = d["cp_ring_nics"]
    # 3 (cp-1) KV chunks a layer, bf16, 8 KV heads of 128 over TP 8, 8,192 tokens a rank,
    # on the busiest stage's 8 layers, 16 micro-batches a step
    chunk = 2 * 2 * (131072 / 16) * 8 * 128 / 8
    assert ring["nic_gb_per_gpu"] == pytest.approx(16 * 8 * 3 * 15 * chunk / 1e9)
    assert ring["nic_s"] > 0 and ring["hidden_behind_s"] > ring["nic_s"]
    assert ring["exposed_s"] == pytest.approx(d["breakdown_s"]["cp_nic_comm"])
    text = run_cli(["evaluate", *LLAMA3_128K]).output
    assert "cp_nic_comm" in text and "ring attention over the NICs: CP 16 spans servers" in text
    # Meta reports 380 TFLOP/s per GPU for this stage (table 4); the model gives 371
    assert d["model_tflops_per_gpu"] == pytest.approx(380, rel=0.05)


def test_cp_inside_the_domain_keeps_the_nvlink_charge(models, catalog):
    hw = Hardware.from_catalog(catalog, "h100-sxm")
    lay = Layout(tp=2, cp=4, pp=1, dp=2, micro_batch=1, global_batch=4)
    assert not cp_crosses_nics(lay, hw.gpu)
    ev = evaluate(models["llama3-8b"], hw, lay, seq_len=32768)
    assert ev.cp_ring is None and ev.breakdown.cp_nic_comm == 0
    assert "cp_ring_nics" not in ev.as_dict()


def test_ring_over_the_nics_is_bytes_over_the_share_less_the_attention(models, catalog):
    """One NIC per server: the ring's bytes at a GPU's eighth of it exceed the attention
    window, and the excess is exposed per micro-batch, in the bubble too."""
    spec, seq = models["llama3-8b"], 16384
    lay = Layout(tp=8, cp=2, pp=2, dp=1, micro_batch=1, global_batch=8)
    times = {}
    for nics in (1, 8):
        hw = Hardware.from_catalog(catalog, "h100-sxm", nics_per_node=nics)
        ev = evaluate(spec, hw, lay, seq_len=seq)
        c = step_coefficients(spec, lay, seq, hw.gpu, hw.network, Assumptions(flash_attention=True))
        share = comm.nic_share(hw.network.node_bw_gb_per_s, 8, c.network_efficiency)
        per_mb = max(0.0, c.cp_nic_bytes / share - c.cp_window_s)
        assert ev.breakdown.cp_nic_comm == pytest.approx(lay.grad_accum * per_mb)
        assert ev.breakdown.cp_comm == 0  # the in-domain term is not charged twice
        times[nics] = ev.breakdown.cp_nic_comm
    assert times[1] > 0 and times[1] > times[8]


LONG = TransformerSpec(
    name="long-context", layers=8, hidden=16384, heads=128, kv_heads=8, vocab=32000,
    seq_len=131072, gated_mlp=True,
)  # fmt: skip


@pytest.mark.parametrize(
    "limits", [{"budget": 3e7, "objective": "time"}, {"deadline": 30.0, "objective": "cost"}]
)
def test_solvers_agree_when_cp_must_leave_the_server(limits):
    """A wide model at 131,072 tokens without full recomputation fits only with TP x CP
    beyond one server: both solvers find the same optimum, and it runs CP across servers."""
    s = build_scenario(
        model=LONG, tokens=2e10, seq_len=131072, gpus=("h100-sxm",), max_gpus=512,
        evidence="any", max_virtual_stages=1, **limits,
    )  # fmt: skip
    s = dataclasses.replace(s, recompute_modes=("none", "selective"))
    ref = solve_exhaustive(s, top_k=3)
    got = solve_cpsat(s, top_k=3, time_limit_s=60)
    assert got.status == "optimal" and ref.plans
    want, have = [p.objective for p in ref.plans], [p.objective for p in got.plans]
    assert all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(have, want, strict=True))
    for plan in (*got.plans, *ref.plans):
        lay = plan.evaluation.layout
        assert lay.tp * lay.cp > 8 and plan.evaluation.cp_ring is not None


def test_a100_servers_take_four_nics(catalog):
    """GPT-NeoX-20B's servers: 8 A100-40GB and four ConnectX-6 (Black et al. 2022)."""
    assert 4 in catalog.gpu("a100-40gb").server.allowed_nic_counts()
    assert 4 in catalog.gpu("a100-80gb").server.allowed_nic_counts()
    res = run_cli(
        ["evaluate", "--model", "llama2-13b", "--gpu", "a100-40gb", "--tp", "2", "--pp", "4",
         "--dp", "12", "--global-batch", "96", "--nics-per-node", "4", "--json"]
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["layout"]["nics_per_node"] == 4
    assert not any(v["constraint"] == "nic_slots" for v in d["violations"])
    eight = run_cli(
        ["evaluate", "--model", "llama2-13b", "--gpu", "a100-40gb", "--tp", "2", "--pp", "4",
         "--dp", "12", "--global-batch", "96", "--nics-per-node", "8", "--json"]
    )  # fmt: skip
    # half the NICs: the gradient reduction over the NICs is no faster
    assert d["breakdown_s"]["dp_comm"] >= json.loads(eight.output)["breakdown_s"]["dp_comm"]


def test_a_four_nic_h100_server_from_a_catalog_override(tmp_path):
    """H100 servers ship with 8 NICs in the catalog; a --catalog file that lists 4 makes a
    4-NIC server evaluate without a nic_slots violation, with slower NIC traffic."""
    override = tmp_path / "h100_4nic.yaml"
    override.write_text("gpus:\n  h100-sxm:\n    server:\n      nic_counts: [4, 8]\n")
    args = ["evaluate", "--model", "llama2-70b", "--tp", "8", "--pp", "4", "--dp", "4",
            "--global-batch", "1024", "--json"]  # fmt: skip
    shipped = json.loads(run_cli([*args, "--nics-per-node", "4"]).output)
    assert any(v["constraint"] == "nic_slots" for v in shipped["violations"])
    four = json.loads(run_cli([*args, "--catalog", str(override), "--nics-per-node", "4"]).output)
    eight = json.loads(run_cli([*args, "--catalog", str(override)]).output)
    assert four["feasible"] and four["layout"]["nics_per_node"] == 4
    assert four["breakdown_s"]["pp_comm"] > eight["breakdown_s"]["pp_comm"]


def test_mla_ring_passes_the_up_projected_keys_and_values(models):
    """DeepSeek-V3's ring exchanges its 128 heads' keys (128 + 64 wide) and values (128
    wide), not 2 x hidden / heads: per micro-batch and layer 3 (cp-1) chunks of 2 bytes x
    the rank's tokens x 128 x 320 / TP."""
    spec, seq = moe_zoo()["deepseek-v3"], 4096
    lay = Layout(tp=2, cp=4, pp=1, dp=1, micro_batch=1, global_batch=8)
    assert spec.kv_pass_width == 128 * (128 + 64 + 128)
    chunk = 2.0 * (seq / 4) * 128 * 320 / 2
    layers = slowest_stage(spec, lay, seq).layers
    assert cp_ring_bytes_per_microbatch(spec, lay, seq) == pytest.approx(layers * 9 * chunk)
    plain = models["llama3-8b"]
    assert plain.kv_pass_width == 2 * plain.kv * plain.head_dim
