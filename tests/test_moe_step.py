"""Expert parallelism in the step time and `designer evaluate --ep/--etp` (issue 17 item 4).

- Acceptance: moving DeepSeek-V3's EP from inside one 8-GPU H100 server (EP 8) to across
  servers (EP 64) raises ``ep_comm`` by the ratio of the scale-up to the NIC bandwidth
  per GPU.
- A dense model: ``ep_comm`` is 0.0, ep = etp = 1, --ep / --etp refused, step unchanged.
- evaluate's JSON keys and exit codes; planning (optimize) still refuses MoE models.
"""

from __future__ import annotations

import json
import math

import pytest

from catalog.specs import DEFAULT_STACK
from designer.question.build import stack_catalog
from helpers import run_main
from models import comm, scaleup
from models.evaluate import Hardware, evaluate
from models.expert import (
    ExpertLayout,
    all_to_all_s,
    dispatch_terms,
    ep_comm_per_microbatch_s,
    grouped_gemm_efficiency,
    rank_layers,
    remote_domains_per_token,
    routed_activation_units,
)
from models.layout import Layout
from models.pipeline import a2a_overlap_exposed_share
from models.zoo import moe_zoo, zoo

# DeepSeek-V3 as its report trains it (PP 16, 61 layers split 3 + 4 x 14 + 2), on 2,048 H100
V3 = [
    "evaluate",
    "--model",
    "deepseek-v3",
    "--gpu",
    "h100-sxm",
    "--tp",
    "1",
    "--pp",
    "16",
    "--dp",
    "128",
    "--first-stage-layers",
    "3",
    "--last-stage-layers",
    "2",
    "--global-batch",
    "4096",
]
V3_LAYOUT = Layout(
    tp=1, pp=16, dp=128, micro_batch=1, global_batch=4096, first_stage_layers=3, last_stage_layers=2
)


@pytest.fixture(scope="module")
def hw() -> Hardware:
    return Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "h100-sxm")


def evaluate_json(capsys, args: list[str]) -> dict:
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code in (0, 1), err  # 1: infeasible (memory), still a full answer
    return json.loads(out)


def test_ep_across_servers_raises_ep_comm_by_scale_up_over_nic_bandwidth(capsys, hw):
    """EP 8 (one server) against EP 64 (8 servers): each GPU sends the same T x k x h x 2
    bytes per all-to-all; EP 8 moves 7/8 of it over NVLink, EP 64 moves 56/64 = 7/8 over
    its NIC share (and 7/64 over NVLink at the same time, hidden behind the NICs), so the
    ratio is exactly bw_up / NIC share per GPU, both at their bus efficiencies. Tolerance
    1e-6: the profile's collective latency (one per all-to-all) is the only other term
    and is 0 in the megatron-core profile (asserted) or a few microseconds otherwise."""
    inside = evaluate_json(capsys, [*V3, "--ep", "8"])
    across = evaluate_json(capsys, [*V3, "--ep", "64"])
    assert (inside["ep"], across["ep"]) == (8, 64)
    gpu = hw.gpu
    cal = gpu.calibration
    assert cal.collective_latency_us == 0.0
    up = scaleup.group_bw_gb_per_s(gpu, 8) * cal.scale_up_bus_efficiency * comm.GB
    nic = comm.nic_share(hw.network.node_bw_gb_per_s, 8, cal.network_bus_efficiency)
    ratio = across["breakdown_s"]["ep_comm"] / inside["breakdown_s"]["ep_comm"]
    assert ratio == pytest.approx(up / nic, rel=1e-6)
    assert ratio > 5  # 450 GB/s x 0.8 NVLink against 8 x 50 GB/s x 0.71 NICs over 8 GPUs
    # fewer NICs per server: the cross-server all-to-all slows by the same factor
    half = evaluate_json(capsys, [*V3, "--ep", "64", "--nics-per-node", "4"])
    assert half["breakdown_s"]["ep_comm"] == pytest.approx(
        2 * across["breakdown_s"]["ep_comm"], rel=1e-9
    )
    assert half["breakdown_s"]["ep_comm"] > 0 and inside["breakdown_s"]["ep_comm"] > 0


def test_ep_comm_by_hand(hw):
    """DeepSeek-V3, EP 8 in one server: the busiest rank's MoE layers x 4 all-to-alls x
    T k h 2 (EP-1)/EP bytes over the scale-up link."""
    spec = moe_zoo()["deepseek-v3"]
    ex = ExpertLayout(ep=8)
    n_moe = max(m for _, m in rank_layers(spec, V3_LAYOUT))
    assert n_moe == 4  # 4 MoE layers on a middle rank (the first has the 3 dense ones)
    nbytes = 4096 * 8 * 7168 * 2.0
    up = scaleup.group_bw_gb_per_s(hw.gpu, 8) * hw.gpu.calibration.scale_up_bus_efficiency
    expected = 4 * 4 * nbytes * 7 / 8 / (up * comm.GB)
    got = ep_comm_per_microbatch_s(spec, V3_LAYOUT, 4096, hw.gpu, hw.network, ex)
    assert got == pytest.approx(expected, rel=1e-12)
    # full recomputation repeats the forward dispatch and combine: 6 all-to-alls
    full = Layout(**{**V3_LAYOUT.__dict__, "recompute": "full"})
    assert ep_comm_per_microbatch_s(spec, full, 4096, hw.gpu, hw.network, ex) == pytest.approx(
        1.5 * expected
    )
    # ep_overlap hides its share of what the schedule overlaps (all but the warm-up's
    # chunks); expert_load slows the busiest receiver
    alone = a2a_overlap_exposed_share(V3_LAYOUT.pp, V3_LAYOUT.vp, V3_LAYOUT.grad_accum)
    assert 0 < alone < 1
    hidden = ExpertLayout(ep=8, ep_overlap=0.25, expert_load=1.2)
    assert ep_comm_per_microbatch_s(
        spec, V3_LAYOUT, 4096, hw.gpu, hw.network, hidden
    ) == pytest.approx(expected * (1 - 0.25 * (1 - alone)) * 1.2)


def test_per_domain_dispatch_sends_a_token_once_per_remote_domain(hw):
    """DeepEP's forwarding: DeepSeek-V3 (256 experts, top 8) at EP 64 over eight 8-GPU
    servers sends (8 - 1) (1 - C(224, 8) / C(256, 8)) copies per token over the NICs, not
    8 x 56 / 64; inside one server nothing changes."""
    spec = moe_zoo()["deepseek-v3"]
    per_copy = dispatch_terms(spec, V3_LAYOUT, 4096, hw.gpu, ExpertLayout(ep=64))
    deepep = ExpertLayout(ep=64, dispatch_per_domain=True)
    per_domain = dispatch_terms(spec, V3_LAYOUT, 4096, hw.gpu, deepep)
    miss = math.comb(224, 8) / math.comb(256, 8)
    assert remote_domains_per_token(256, 8, 64, 8) == pytest.approx(7 * (1 - miss), rel=1e-12)
    ratio = 7 * (1 - miss) / (8 * 56 / 64)
    assert per_domain.nic_bytes == pytest.approx(per_copy.nic_bytes * ratio, rel=1e-12)
    assert ratio < 0.7
    assert (per_domain.fixed_s, per_domain.up_s) == (per_copy.fixed_s, per_copy.up_s)
    inside = ExpertLayout(ep=8, dispatch_per_domain=True)
    assert dispatch_terms(spec, V3_LAYOUT, 4096, hw.gpu, inside) == dispatch_terms(
        spec, V3_LAYOUT, 4096, hw.gpu, ExpertLayout(ep=8)
    )
    assert remote_domains_per_token(256, 8, 8, 8) == 0.0


def test_all_to_all_split_between_domain_and_nics():
    # 4 of 16 ranks in the domain: 3/16 over the link, 12/16 over the NICs, in parallel
    assert all_to_all_s(16.0, 16, 4, 1.0, 1.0, 0.0) == pytest.approx(12.0)
    assert all_to_all_s(16.0, 16, 4, 0.01, 1.0, 0.0) == pytest.approx(300.0)
    assert all_to_all_s(16.0, 4, 4, 1.0, 1e-9, 0.0) == pytest.approx(12.0)  # no NIC use
    assert all_to_all_s(16.0, 1, 1, 1.0, 1.0, 1.0) == 0.0


def test_grouped_gemm_efficiency_rises_with_rows_per_expert(hw):
    spec = moe_zoo()["deepseek-v3"]
    small = grouped_gemm_efficiency(spec, V3_LAYOUT, 4096, hw.gpu, ExpertLayout(ep=8))
    large = grouped_gemm_efficiency(spec, V3_LAYOUT, 4096, hw.gpu, ExpertLayout(ep=64))
    assert 0 < small < large < 1
    # 1,024 rows per local expert at EP 8 against the roofline's peak / HBM bandwidth x
    # the mean bytes per weight element of a pass / 2: forward and data gradient read 2,
    # the weight gradient reads and writes the fp32 main_grad (8): (2 + 2 + 8) / 3 = 4
    assert V3_LAYOUT.recompute != "full" and V3_LAYOUT.precision == "bf16"
    # plus the activations' traffic a x m (routed_activation_units; tests/test_moe_terms.py)
    ridge = hw.gpu.dense_bf16_tflops / hw.gpu.memory_bw_tb_per_s
    half = ridge * 4.0 / 2.0
    act = routed_activation_units(spec, V3_LAYOUT, ExpertLayout(ep=8), ridge) * 1024
    assert small == pytest.approx(1024 / (1024 + half + act))
    # without the weight-gradient term, one weight read a pass (2 bytes): peak / bandwidth
    old = ExpertLayout(ep=8, wgrad_accumulation_bytes=None)
    assert grouped_gemm_efficiency(spec, V3_LAYOUT, 4096, hw.gpu, old) == pytest.approx(
        1024 / (1024 + ridge + act)
    )
    named = ExpertLayout(ep=8, grouped_gemm_half_tokens=1024)
    assert grouped_gemm_efficiency(spec, V3_LAYOUT, 4096, hw.gpu, named) == pytest.approx(0.5)


def test_dense_model_has_no_ep_comm_and_ignores_expert_layout(hw):
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=8, pp=4, dp=16, micro_batch=1, global_batch=1024)
    plain = evaluate(spec, hw, layout)
    with_ex = evaluate(spec, hw, layout, experts=ExpertLayout(ep=4, etp=2))
    assert plain.breakdown.ep_comm == 0.0 and (plain.ep, plain.etp) == (1, 1)
    assert with_ex.step_time_s == plain.step_time_s  # bit-identical
    parts = plain.breakdown.as_dict()
    old = sum(parts[k] for k in parts if k != "ep_comm")
    assert plain.step_time_s == old  # the seven parts of before, exactly


def test_evaluate_json_keys_moe_and_dense(capsys):
    d = evaluate_json(capsys, [*V3, "--ep", "8", "--etp", "2"])
    assert (d["ep"], d["etp"]) == (8, 2)
    assert (d["layout"]["ep"], d["layout"]["etp"]) == (8, 2)
    assert d["breakdown_s"]["ep_comm"] > 0
    assert sum(d["breakdown_s"].values()) == pytest.approx(d["step_time_s"])
    assert d["model_tflops_per_gpu"] > 0
    dense = evaluate_json(capsys, ["evaluate", "--tp", "8", "--pp", "4", "--dp", "4"])
    assert (dense["ep"], dense["etp"], dense["breakdown_s"]["ep_comm"]) == (1, 1, 0.0)


def test_evaluate_text_shows_ep_for_moe_only(capsys):
    code, out, err = run_main(capsys, [*V3, "--ep", "64"])
    assert code in (0, 1), err
    assert "ep 64, etp 1" in out and "ep_comm" in out
    code, out, err = run_main(capsys, ["evaluate", "--tp", "8", "--pp", "4", "--dp", "4"])
    assert code == 0, err
    assert "ep_comm" not in out and ", ep " not in out


@pytest.mark.parametrize(
    ("args", "option"),
    [
        (["--ep", "3"], "--ep"),  # does not divide 256 experts
        (["--ep", "256"], "--ep"),  # 256 does not divide TP x CP x DP = 128
        (["--ep", "64", "--etp", "4"], "--etp"),  # 64 x 4 does not divide 128
    ],
)
def test_bad_ep_values_exit_2_naming_the_option(capsys, args, option):
    code, out, err = run_main(capsys, [*V3, *args])
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"{option}:" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("option", ["--ep", "--etp"])
def test_ep_on_a_dense_model_exits_2(capsys, option):
    code, out, err = run_main(capsys, ["evaluate", "--dp", "8", option, "2"])
    assert code == 2
    assert f"{option}: " in err and "dense" in err


def test_evaluate_mixtral_with_ep(capsys):
    d = evaluate_json(
        capsys, ["evaluate", "--model", "mixtral-8x7b", "--tp", "2", "--dp", "16", "--ep", "8"]
    )
    assert d["ep"] == 8 and d["breakdown_s"]["ep_comm"] > 0


def _scout_zero3(global_batch: int, zero: int = 3) -> Layout:
    """Llama 4 Scout on 32 B200, TP 4 x DP 8 with EP 2: expert-DP 16 (its experts' ZeRO-3
    shards), 16 GB of expert weights a GPU holds whole at ZeRO-1 and gathers at ZeRO-3."""
    return Layout(tp=4, pp=1, dp=8, micro_batch=1, global_batch=global_batch, zero=zero)


def test_zero3_gathers_and_reduce_scatters_the_expert_shards_every_micro_batch():
    """ZeRO-3 shards the routed experts over expert-DP (models.memory.moe_memory_per_gpu),
    so each micro-batch all-gathers them, forward and backward, over that group, and the
    stack's per-micro-batch fp32 reduce-scatter reduces their gradients there: priced by
    the expert-DP group's own formula (models.expert.expert_dp_reduce_s, the group's ranks
    per domain and bandwidth). Before, the step gathered the non-expert weights only:
    16 more micro-batches added 0.058 s of gathers, the expert shards never gathered."""
    from models.evaluate import with_profile
    from models.expert import expert_dp_reduce_s, expert_memory, moe_step_coefficients
    from models.layout import Assumptions
    from models.step import group_reduce_s, zero3_microbatch_s

    hw = Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "b200")
    spec, ex = moe_zoo()["llama4-scout"], ExpertLayout(ep=2)
    s = spec.seq_len
    a = with_profile(Assumptions(), hw.gpu)
    lay = _scout_zero3(128)
    mem = expert_memory(spec, lay, s, hw.gpu.memory_gb, a, ex)
    c = moe_step_coefficients(spec, lay, ex, s, hw.gpu, hw.network, a)
    rs = hw.gpu.calibration.zero3_microbatch_grad_reduce_bytes
    assert mem.expert_dp == 16 and rs == 4.0
    node, g = hw.network.node_bw_gb_per_s, lay.dp * lay.cp
    # the expert-DP group's own formula: gathers (two all-gathers, one all-reduce's traffic
    # of the weights) and the reduce-scatter (half an all-reduce of the fp32 gradients)
    gathers = expert_dp_reduce_s(c, mem.expert_params, 16, hw.gpu, ex, hw.network, a.weight_bytes)
    reduce = expert_dp_reduce_s(c, mem.expert_params, 16, hw.gpu, ex, hw.network, rs / 2)
    assert gathers == pytest.approx(1.229, abs=0.001)
    dense = group_reduce_s(c, mem.dense_params * (a.weight_bytes + rs / 2), g, node)
    per_mb = zero3_microbatch_s(c, g, node)
    assert per_mb.comm_s == pytest.approx(gathers + reduce + dense, rel=1e-9)
    short, long = (evaluate(spec, hw, _scout_zero3(gb), s, experts=ex) for gb in (128, 256))
    # each micro-batch exposes what its window does not hide: 16 more micro-batches add
    # 16 x (comm - window + contention), about 40 s (0.058 s before)
    added = long.breakdown.dp_comm - short.breakdown.dp_comm
    each = per_mb.comm_s - c.gather_overlap_s + per_mb.contention_s
    assert added == pytest.approx(16 * each, rel=1e-9)
    assert added > 16 * (gathers - c.gather_overlap_s) > 15.0
    # only the data-parallel part moves with the micro-batches' collectives; ZeRO-1 (the
    # experts whole on every GPU) is untouched
    assert long.step_time_s - short.step_time_s > added
    z1 = evaluate(spec, hw, _scout_zero3(128, zero=1), s, experts=ex)
    assert z1.step_time_s == pytest.approx(4.896, abs=0.001)
    assert short.step_time_s > 8 * z1.step_time_s


def test_zero3_reducing_once_a_step_gathers_the_experts_but_keeps_their_reduction():
    """A stack that reduces once a step (zero3_microbatch_grad_reduce_bytes 0) still gathers
    the expert shards every micro-batch; their gradients are reduced once, with the step
    (expert_dp_bytes: reduce-scatter and all-gather, their mean size)."""
    from models.evaluate import with_profile
    from models.expert import expert_memory, moe_step_coefficients
    from models.layout import Assumptions

    base = Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "b200")
    cal = base.gpu.calibration.model_copy(update={"zero3_microbatch_grad_reduce_bytes": 0.0})
    hw = Hardware(base.gpu.with_calibration(cal), base.nic, base.nics_per_node, base.switch,
                  base.facility)  # fmt: skip
    spec, ex, lay = moe_zoo()["llama4-scout"], ExpertLayout(ep=2), _scout_zero3(128)
    a = with_profile(Assumptions(), hw.gpu)
    mem = expert_memory(spec, lay, spec.seq_len, hw.gpu.memory_gb, a, ex)
    c = moe_step_coefficients(spec, lay, ex, spec.seq_len, hw.gpu, hw.network, a)
    assert c.expert_zero3_bytes == pytest.approx(mem.expert_params * a.weight_bytes)
    assert c.expert_zero3_tail_bytes == 0 and c.zero3_grad_rs_bytes == 0
    assert c.expert_dp_bytes == pytest.approx(
        mem.expert_params * (a.grad_bytes + a.weight_bytes) / 2
    )
    assert c.zero3_gather_bytes == pytest.approx(mem.dense_params * a.weight_bytes)


def test_zero3_pipeline_stages_keep_and_gather_the_experts_once_a_step():
    """With PP under pytorch-fsdp2 a stage keeps its parameters unsharded across the step's
    micro-batches and accumulates its gradients unsharded in fp32 (models.memory
    .zero3_kept_bytes): the experts' too, so both are gathered once a step, the experts
    over their expert-DP group (models.step.zero3_gathers_once), and held whole in memory."""
    from models.evaluate import with_profile
    from models.expert import expert_memory, moe_step_coefficients
    from models.layout import Assumptions
    from models.memory import GB, UNSHARDED_PARAM_BYTES

    hw = Hardware.from_catalog(stack_catalog((), "pytorch-fsdp2"), "b200")
    spec, ex = moe_zoo()["llama4-scout"], ExpertLayout(ep=2)
    lay = Layout(tp=4, pp=2, dp=8, micro_batch=1, global_batch=128, zero=3)
    a = with_profile(Assumptions(), hw.gpu)
    assert a.zero3_pp_unsharded_params and a.zero3_microbatch_grad_reduce_bytes == 4.0
    mem = expert_memory(spec, lay, spec.seq_len, hw.gpu.memory_gb, a, ex)
    c = moe_step_coefficients(spec, lay, ex, spec.seq_len, hw.gpu, hw.network, a)
    assert c.zero3_gather_bytes == 0 and c.expert_zero3_bytes == 0
    assert c.expert_zero3_step_gather_bytes == pytest.approx(mem.expert_params * 2.0 / 2)
    assert c.zero3_step_gather_bytes == pytest.approx(mem.dense_params * 2.0 / 2)
    assert c.expert_dp_bytes == pytest.approx(mem.expert_params * (4.0 + 2.0) / 2)
    params = mem.dense_params + mem.expert_params
    assert mem.memory.gradients == pytest.approx(params * 4.0 / GB, rel=1e-9)
    shards = mem.dense_params / lay.dp + mem.expert_params / mem.expert_dp
    want_w = (shards * a.weight_bytes + params * UNSHARDED_PARAM_BYTES) / GB
    assert mem.memory.weights == pytest.approx(want_w, rel=1e-9)
