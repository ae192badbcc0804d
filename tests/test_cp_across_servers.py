"""Context parallelism across servers and servers with fewer NICs (issue 31, item 4): ring
attention's KV exchange over the NICs (models.step.cp_nic_mb_s) in evaluate, in both
solvers, and the 4-NIC A100 server GPT-NeoX-20B trained on."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest

from designer.question.build import build_scenario
from helpers import rows as csv_rows
from helpers import run_cli, sweep
from models import comm, moe_zoo
from models.evaluate import Hardware, evaluate
from models.expert import moe_attention_flop_share
from models.layout import Assumptions, Layout
from models.step import (
    cp_crosses_nics,
    cp_ring_bytes_per_microbatch,
    slowest_stage,
    step_coefficients,
)
from models.transformer import TransformerSpec
from solvers import solve_cpsat, solve_exhaustive
from solvers.space import enumerate_candidates

# Llama 3 405B's long-context stage (Dubey et al. 2024, "The Llama 3 Herd of Models",
# table 4): TP 8, CP 16, PP 16, DP 8 on 16,384 H100, 131,072 tokens, 16 sequences per DP
# rank; 126 layers in 16 stages count the embedding and the loss as layers
LLAMA3_128K = [
    "--model", "llama3-405b", "--tp", "8", "--cp", "16", "--pp", "16", "--dp", "8",
    "--vp", "8", "--seq-len", "131072", "--global-batch", "128", "--embedding-in-split",
    "--loss-in-split", "--recompute", "full", "--cp-across-servers",
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


def test_cp_across_servers_is_an_opt_in_the_contract_keeps_tp_x_cp_in_the_domain():
    """The contract's tp_domain keeps TP and CP inside one scale-up domain: without
    --cp-across-servers the 128K stage (TP 8 x CP 16 on 8-GPU servers) is a tp_domain
    violation (exit 1) whose detail names the option; before, CP left the domain by
    default. The breakdown, ring over the NICs included, is the same either way."""
    strict = [a for a in LLAMA3_128K if a != "--cp-across-servers"]
    res = run_cli(["evaluate", *strict, "--json"])
    assert res.exit_code == 1, res.output
    d = json.loads(res.output)
    assert [v["constraint"] for v in d["violations"]] == ["tp_domain"]
    assert "tp x cp = 128 exceeds the scale-up domain of 8 GPUs" in d["violations"][0]["detail"]
    assert "--cp-across-servers" in d["violations"][0]["detail"]
    allowed = json.loads(run_cli(["evaluate", *LLAMA3_128K, "--json"]).output)
    assert d["breakdown_s"] == allowed["breakdown_s"]
    # the brief's reproduction: TP 4 x CP 4 = 16 GPUs of an 8-GPU H100 domain
    small = ["evaluate", "--model", "llama2-7b", "--tp", "4", "--cp", "4", "--dp", "1"]
    small += ["--seq-len", "16384", "--json"]
    res = run_cli(small)
    assert res.exit_code == 1 and not json.loads(res.output)["feasible"]
    assert run_cli([*small, "--cp-across-servers"]).exit_code == 0
    # TP beyond the domain stays a violation with CP allowed across servers
    wide = ["evaluate", "--model", "llama2-7b", "--tp", "16", "--cp-across-servers", "--json"]
    res = run_cli(wide)
    assert res.exit_code == 1 and "tp 16 exceeds" in res.output


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


def _long_question(model: TransformerSpec, **limits):
    """A question for ``model`` at 131,072 tokens on up to 512 H100 whose CP may leave the
    server, without full recomputation."""
    s = build_scenario(
        model=model, tokens=2e10, seq_len=131072, gpus=("h100-sxm",), max_gpus=512,
        evidence="any", max_virtual_stages=1, cp_across_servers=True, **limits,
    )  # fmt: skip
    return dataclasses.replace(s, recompute_modes=("none", "selective"))


def _agreeing_plans(s) -> tuple:
    """Both solvers' top 3 plans of ``s``, once their objectives are checked to agree."""
    ref = solve_exhaustive(s, top_k=3)
    got = solve_cpsat(s, top_k=3, time_limit_s=60)
    assert got.status == "optimal" and ref.plans
    want, have = [p.objective for p in ref.plans], [p.objective for p in got.plans]
    assert all(math.isclose(x, y, rel_tol=1e-6) for x, y in zip(have, want, strict=True))
    return (*got.plans, *ref.plans)


@pytest.mark.parametrize(
    "limits", [{"budget": 3e7, "objective": "time"}, {"deadline": 30.0, "objective": "cost"}]
)
def test_solvers_agree_when_cp_must_leave_the_server(limits):
    """A wide model at 131,072 tokens without full recomputation fits only with TP x CP
    beyond one server: both solvers find the same optimum, and it runs CP across servers."""
    for plan in _agreeing_plans(_long_question(LONG, **limits)):
        lay = plan.evaluation.layout
        assert lay.tp * lay.cp > 8 and plan.evaluation.cp_ring is not None


LONG_MOE = TransformerSpec(
    name="long-moe", layers=8, hidden=8192, heads=64, kv_heads=8, vocab=32000,
    seq_len=131072, gated_mlp=True, ffn_hidden=8192, experts=8, experts_per_token=2,
    expert_ffn_hidden=8192,
)  # fmt: skip


def test_solvers_agree_on_a_moe_ring_across_servers():
    """LONG's question for a mixture-of-experts model: both solvers find the same optimum,
    TP x CP beyond one server, whose ring hides behind the MoE layers' attention share of
    the MoE stage's compute (models.expert.moe_cp_coefficients, which CP-SAT reads through
    the step coefficients); the dense part's bound (Candidate.dense_stage: the ring exposed
    at the GEMM + element-wise compute) stays under every CP shape's stage time."""
    s = _long_question(LONG_MOE, budget=3e7, objective="time")
    share = moe_attention_flop_share(LONG_MOE, 131072)
    for plan in _agreeing_plans(s):
        ev, ring = plan.evaluation, plan.evaluation.cp_ring
        assert ev.layout.tp * ev.layout.cp > 8 and ring is not None and plan.config.shape.ep > 1
        assert ring["hidden_behind_s"] == pytest.approx(share * ev.breakdown.compute, rel=1e-9)
    shapes = [c for c in enumerate_candidates(s) if c.shape.cp > 1 and c.dense_stage]
    assert len(shapes) > 1000
    assert all(c.dense_stage[0] <= c.coeffs.stage_mb_s for c in shapes)


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


MEGATRON_CP = (
    "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py --num-layers 4 --hidden-size 8192 "
    "--num-attention-heads 64 --seq-length 16384 --max-position-embeddings 16384 "
    "--micro-batch-size 1 --global-batch-size 8 --tensor-model-parallel-size 4 "
    "--context-parallel-size 4 --bf16"
)


def test_a_megatron_command_with_cp_across_servers_implies_the_option():
    """evaluate --from-megatron takes the command as Megatron-LM runs it: TP 4 x CP 4 on
    8-GPU servers puts its CP ranks on two servers, which Megatron-LM does without asking,
    so the command implies --cp-across-servers; --no-cp-across-servers checks it against
    the contract's rule instead."""
    res = run_cli(["evaluate", "--from-megatron", MEGATRON_CP, "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["feasible"] and (d["layout"]["tp"], d["layout"]["cp"]) == (4, 4)
    assert d["cp_ring_nics"]
    res = run_cli(["evaluate", "--from-megatron", MEGATRON_CP, "--no-cp-across-servers", "--json"])
    assert res.exit_code == 1
    assert [v["constraint"] for v in json.loads(res.output)["violations"]] == ["tp_domain"]


def test_the_solvers_keep_tp_x_cp_in_the_domain_and_the_fix_names_the_option():
    """The question above without --cp-across-servers: no shape fits inside one 8-GPU
    domain, both solvers say so, and the conflict's tp_domain fix is the option (CP across
    servers, the rule kept for TP), not the rule switched off."""
    from solvers.explain import explain_infeasible

    s = build_scenario(
        model=LONG, tokens=2e10, seq_len=131072, gpus=("h100-sxm",), max_gpus=512,
        evidence="any", max_virtual_stages=1, budget=3e7, objective="time",
    )  # fmt: skip
    s = dataclasses.replace(s, recompute_modes=("none", "selective"))
    assert not s.assumptions.cp_across_servers
    assert solve_cpsat(s, time_limit_s=60).status == "infeasible"
    assert solve_exhaustive(s).status == "infeasible"
    conflict = explain_infeasible(s, time_limit_s=60)
    assert "tp_domain" in conflict.constraints
    fix = next(f for f in conflict.fixes if f.constraint == "tp_domain")
    assert fix.change == "CP across servers allowed (--cp-across-servers)"
    assert fix.scenario.assumptions.cp_across_servers and "tp_domain" not in fix.scenario.disabled


BUYER_405B = ["optimize", "--model", "llama3-405b", "--tokens", "15T", "--budget", "500M"]


def test_a_plan_bound_by_cp_names_the_option_and_the_option_reaches_every_question(tmp_path):
    """README's 405B buyer question: without the option its plan keeps TP x CP inside one
    server and tp_domain binds, priced by allowing CP across servers (the relaxation names
    --cp-across-servers); with it, the plan runs TP 8 x CP 2 over two servers. The
    option reaches a question file and the saved answer's question."""
    res = run_cli([*BUYER_405B, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    plan = doc["plans"][0]
    assert plan["tp"] * plan["cp"] <= 8 and doc["question"]["cp_across_servers"] is False
    bound = {b["constraint"]: b for b in doc["binding"]}["tp_domain"]
    assert (
        bound["binding"]
        and bound["relaxation"] == "CP across servers allowed (--cp-across-servers)"
    )
    across = run_cli([*BUYER_405B, "--cp-across-servers", "--no-explain", "--json"])
    assert across.exit_code == 0, across.output
    wide = json.loads(across.output)
    p = wide["plans"][0]
    assert (p["tp"], p["cp"]) == (8, 2) and wide["question"]["cp_across_servers"] is True
    assert p["time_to_train_days"] == pytest.approx(
        plan["time_to_train_days"] - bound["improvement_if_relaxed"], rel=1e-6
    )
    q = tmp_path / "q.yaml"
    q.write_text("model: llama3-405b\ntokens: 15T\nbudget: 500M\ncp_across_servers: true\n")
    res = run_cli(["explain", str(q), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["plans"][0]["cp"] == 2
    saved = tmp_path / "a.json"
    saved.write_text(across.output)
    res = run_cli(["explain", str(saved), "--json"])
    assert res.exit_code == 0, res.output
    again = json.loads(res.output)
    assert again["question"]["cp_across_servers"] is True and again["status"] != "infeasible"


def test_answers_saved_before_the_option_read_back_with_cp_across_servers():
    """Answers saved between issue 31 item 4 and the option planned with CP allowed across
    servers: one without the key reads back so (legacy), and explains the plan it holds."""
    from designer.question.build import _from_answer
    from designer.question.fields import answer_question

    q = answer_question(build_scenario(budget=30e6))
    assert q.pop("cp_across_servers") is False
    back, _ = _from_answer({"question": q, "plans": []}, "old.json")
    assert back.assumptions.cp_across_servers


def test_a_study_sweeps_cp_across_servers(tmp_path, capsys):
    """The option is a question field: a study's axis (and base field) like any other."""
    study = tmp_path / "s.yaml"
    study.write_text(
        "explain: false\nbase: {model: llama3-405b, tokens: 15T, budget: 500M, gpus: [h100-sxm]}"
        "\naxes:\n  cp_across_servers: [false, true]\n"
    )
    out = tmp_path / "s.csv"
    code, _, err = sweep(capsys, study, out)
    assert code == 0, err
    rows = {r["cp_across_servers"]: r for r in csv_rows(out)}
    assert int(rows["False"]["tp"]) * int(rows["False"]["cp"]) <= 8
    assert int(rows["True"]["tp"]) * int(rows["True"]["cp"]) == 16
