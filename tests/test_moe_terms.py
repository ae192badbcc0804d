"""The MoE step's named, switchable terms (issue 34 item 1): each switched off and on, the
step changes by exactly the amount its formula says (models/expert.py, models/memory.py).

Layouts have PP 1 where the step is compared, so a term that joins the stage time moves
the step by m x the term (no bubble), and the megatron-core profile's collective latency
is 0 (asserted), so an all-to-all's time is its bytes over the bandwidth.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from catalog.specs import DEFAULT_STACK
from designer.question.build import stack_catalog
from models import comm, scaleup
from models.evaluate import Hardware, evaluate
from models.expert import (
    DISPATCH_BYTES,
    FP8_DISPATCH_BYTES,
    HOPPER_FUSED_ATTENTION_SPEEDUP,
    OVERLAP_SM_FRACTION,
    PERMUTE_HBM_PASSES,
    ROUTER_FP32_CAST_BYTES,
    TF32_PER_BF16,
    UNFUSED_PERMUTE_HBM_PASSES,
    ExpertLayout,
    a2a_overlap_violation,
    dualpipe_bubble_scale,
    dualpipe_violation,
    expert_memory,
    grouped_gemm_efficiency,
    moe_gemm_per_microbatch_s,
    moe_step_coefficients,
    permute_per_microbatch_s,
    routed_activation_units,
    routed_elementwise_per_microbatch_s,
    router_fp32_per_microbatch_s,
    tokens_per_gpu,
    weight_bytes_per_pass,
)
from models.layout import Assumptions, Layout
from models.memory import GB, StoredActivations, _moe_ranks
from models.pipeline import a2a_overlap_exposed_share, a2a_overlap_warmup_chunks
from models.step import (
    StageWork,
    ep_overlap_s,
    expert_reduce_s,
    group_reduce_s,
    matmul_efficiency,
    step_from_coefficients,
    work_gemm_s,
    zero3_exposed_s,
)
from models.zoo import moe_zoo

MIXTRAL = moe_zoo()["mixtral-8x7b"]
V3 = moe_zoo()["deepseek-v3"]
FLAT = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)  # 8 micro-batches
QWEN3_30B = moe_zoo()["qwen3-30b-a3b"]
# the invariant audit's reproduction: EP 32 over four 8-GPU servers, 16 micro-batches, where
# the all-to-alls (8.77 s a step at a GPU's NIC share) outlast the compute (4.61 s)
WIDE = Layout(tp=1, pp=1, dp=32, micro_batch=1, global_batch=512)
WIDE_PP2 = replace(WIDE, pp=2)


@pytest.fixture(scope="module")
def hw() -> Hardware:
    hw = Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "h100-sxm")
    assert hw.gpu.calibration.collective_latency_us == 0.0
    return hw


def run(hw, ex: ExpertLayout, layout: Layout = FLAT, spec=MIXTRAL):
    return evaluate(spec, hw, layout, 4096, experts=ex).breakdown


def test_permutation_passes_cost_their_hbm_bytes(hw):
    """permute + unpermute: passes x T k h x 2 bytes per MoE layer over HBM; off: 0."""
    on, off = ExpertLayout(ep=8), ExpertLayout(ep=8, permute_hbm_passes=0.0)
    term = 32 * 8.0 * 4096 * 2 * 4096 * 2.0 / (hw.gpu.memory_bw_tb_per_s * 1e12)
    assert permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, on) == pytest.approx(term)
    assert permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off) == 0.0
    a, b = run(hw, on), run(hw, off)
    assert a.compute - b.compute == pytest.approx(8 * term, rel=1e-9)
    assert a.total - b.total == pytest.approx(8 * term, rel=1e-9)


def test_unfused_permutation_costs_its_measured_passes(hw):
    """permute_fusion off (Megatron-Core without --moe-permute-fusion): the same bytes at
    UNFUSED_PERMUTE_HBM_PASSES instead of permute_hbm_passes; the step rises by the
    difference per micro-batch and nothing but compute moves; the term off stays 0."""
    fused, unfused = ExpertLayout(ep=8), ExpertLayout(ep=8, permute_fusion=False)
    one_pass = 32 * 4096 * 2 * 4096 * 2.0 / (hw.gpu.memory_bw_tb_per_s * 1e12)
    got = permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, unfused)
    assert got == pytest.approx(UNFUSED_PERMUTE_HBM_PASSES * one_pass)
    assert UNFUSED_PERMUTE_HBM_PASSES > PERMUTE_HBM_PASSES
    a, b = run(hw, unfused), run(hw, fused)
    extra = 8 * (UNFUSED_PERMUTE_HBM_PASSES - PERMUTE_HBM_PASSES) * one_pass
    assert a.total - b.total == pytest.approx(extra, rel=1e-9)
    assert a.compute - b.compute == pytest.approx(extra, rel=1e-9) and a.ep_comm == b.ep_comm
    off = ExpertLayout(ep=8, permute_fusion=False, permute_hbm_passes=0.0)
    assert permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off) == 0.0


def test_routed_elementwise_traffic_counts_the_top_k_copies(hw):
    """Mixtral's MoE layers run their SwiGLU over top-2 copies of width 14,336, the dense
    formula over one: per layer T x 6 x (2 x 14336 - 14336) bytes more, at the profile's
    element-wise passes per forward-equivalent; off: 0. DeepSeek-V3's k experts and
    shared expert are as wide as its ffn: 0 either way."""
    on, off = ExpertLayout(ep=8), ExpertLayout(ep=8, routed_elementwise=False)
    cal = hw.gpu.calibration
    passes = 3.0 * cal.elementwise_passes  # recompute selective: 3 forward-equivalents
    term = 32 * 4096 * 6 * 14336 * passes / (hw.gpu.memory_bw_tb_per_s * 1e12)
    assert routed_elementwise_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, on) == (
        pytest.approx(term)
    )
    assert routed_elementwise_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off) == 0.0
    a, b = run(hw, on), run(hw, off)
    assert a.compute - b.compute == pytest.approx(8 * term, rel=1e-9)
    assert routed_elementwise_per_microbatch_s(V3, FLAT, 4096, hw.gpu, on) == 0.0


def test_fp32_router_runs_its_backward_gemms_at_the_tf32_rate(hw):
    """--moe-router-dtype fp32: per MoE layer the router's data- and weight-gradient GEMMs,
    2 x 2 T h E FLOPs, at half the bf16 peak instead of at it (same GEMM efficiency), and
    12 bytes per element of T x h of casts over HBM; off (Megatron-Core's default): 0. The
    step changes by m x the term."""
    assert (TF32_PER_BF16, ROUTER_FP32_CAST_BYTES) == (0.5, 12.0)
    on, off = ExpertLayout(ep=8, router_fp32=True), ExpertLayout(ep=8)
    assert "fp32 router" in on.described() and "fp32 router" not in off.described()
    rate = hw.gpu.dense_bf16_tflops * 1e12 * matmul_efficiency(hw.gpu, 4096, 1)
    flops = 32 * 4096 * 4.0 * 4096 * 8  # layers x tokens x 2 GEMMs x 2 h E
    casts = 32 * 4096 * 12.0 * 4096 / (hw.gpu.memory_bw_tb_per_s * 1e12)
    term = flops / (0.5 * rate) - flops / rate + casts
    assert router_fp32_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, on) == pytest.approx(term)
    assert router_fp32_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off) == 0.0
    a, b = run(hw, on), run(hw, off)
    assert a.compute - b.compute == pytest.approx(8 * term, rel=1e-9)
    assert a.total - b.total == pytest.approx(8 * term, rel=1e-9)


def test_fused_attention_kernels_divide_the_attention_core_time(hw):
    """attention_kernel_speedup S: the attention core (Q K^T and A V over the causal half,
    3.5 forward-equivalents at the profile's attention efficiency of the bf16 peak) takes
    1/S of its seconds, so the step falls by m x core x (1 - 1/S); 1.0 is the profile's.
    The constant is the FlashAttention-3 paper's cuDNN / FlashAttention-2 ratio on H100."""
    assert HOPPER_FUSED_ATTENTION_SPEEDUP == pytest.approx(1.61)
    off, on = ExpertLayout(ep=8), ExpertLayout(ep=8, attention_kernel_speedup=1.61)
    cal = hw.gpu.calibration
    assert cal.flash_attention and cal.causal_attention_skip
    flops = 4096 * 32 * 4.0 * 4096 * MIXTRAL.q_width * 3.5  # tokens x layers x core x passes
    core_s = 0.5 * flops / (hw.gpu.dense_bf16_tflops * 1e12 * cal.attention_efficiency)
    a = moe_gemm_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off)
    b = moe_gemm_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, on)
    assert a - b == pytest.approx(core_s * (1 - 1 / 1.61), rel=1e-9)
    assert run(hw, off).total - run(hw, on).total == pytest.approx(
        8 * core_s * (1 - 1 / 1.61), rel=1e-9
    )
    long = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    assert evaluate(MIXTRAL, hw, long, 32768, experts=on).step_time_s < (
        evaluate(MIXTRAL, hw, long, 32768, experts=off).step_time_s
    )


def test_fp8_dispatch_shrinks_the_dispatch_direction_only(hw):
    """Forward dispatch and backward combine at 1 + 4/128 bytes, the other two bf16."""
    bf16, fp8 = ExpertLayout(ep=8), ExpertLayout(ep=8, dispatch_bytes=FP8_DISPATCH_BYTES)
    ratio = (2 * FP8_DISPATCH_BYTES + 2 * DISPATCH_BYTES) / (4 * DISPATCH_BYTES)
    assert run(hw, fp8).ep_comm == pytest.approx(ratio * run(hw, bf16).ep_comm, rel=1e-12)
    up = scaleup.group_bw_gb_per_s(hw.gpu, 8) * hw.gpu.calibration.scale_up_bus_efficiency
    per_layer = 4096 * 2 * 4096 * (2 * FP8_DISPATCH_BYTES + 2 * DISPATCH_BYTES) * 7 / 8
    assert run(hw, fp8).ep_comm == pytest.approx(8 * 32 * per_layer / (up * comm.GB))


def test_capacity_factor_pads_every_expert_to_it(hw):
    """A capacity factor c: the busiest expert takes c x the balanced share (dropped
    beyond, padded up to it): all-to-all bytes and permutation x c, whatever the load."""
    free, cap = ExpertLayout(ep=8, expert_load=1.4), ExpertLayout(ep=8, capacity_factor=1.25)
    assert (free.load, cap.load) == (1.4, 1.25)
    assert run(hw, cap).ep_comm == pytest.approx(1.25 * run(hw, ExpertLayout(ep=8)).ep_comm)
    assert permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, cap) == pytest.approx(
        1.25 * permute_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, ExpertLayout(ep=8))
    )
    rows = tokens_per_gpu(FLAT, 4096) * 2 * 1.25 * 8 / 8
    gg = grouped_gemm_efficiency(MIXTRAL, FLAT, 4096, hw.gpu, cap)
    # the roofline's m_half at the mean bytes per weight element of the three passes,
    # (2 + 2 + 8) / 3 = 4 (the weight-gradient term): peak / bandwidth x 4 / 2
    half = hw.gpu.dense_bf16_tflops / hw.gpu.memory_bw_tb_per_s * 2.0
    act = routed_activation_units(
        MIXTRAL, FLAT, cap, hw.gpu.dense_bf16_tflops / hw.gpu.memory_bw_tb_per_s
    )
    assert gg == pytest.approx(rows / (rows + half + act * rows))
    a = Assumptions()
    mem_cap = expert_memory(MIXTRAL, FLAT, 4096, 80, a, cap)
    mem_one = expert_memory(MIXTRAL, FLAT, 4096, 80, a, ExpertLayout(ep=8))
    assert mem_cap.routed_activations_gb == pytest.approx(1.25 * mem_one.routed_activations_gb)


@pytest.mark.parametrize(("precision", "recompute"), [("bf16", "none"), ("fp8", "full")])
def test_wgrad_accumulation_bytes_raise_the_routed_gemms_m_half(hw, precision, recompute):
    """The weight-gradient GEMM reads and writes the fp32 main_grad (8 bytes a weight
    element) where the other passes read the weight (2 bytes, fp8 1): m_half = peak /
    bandwidth x (w (passes - 1) + 8) / passes / 2; off (None), w / 2. The step moves by
    m x the routed GEMMs' seconds at the two efficiencies (PP 1)."""
    lay = replace(FLAT, precision=precision, recompute=recompute)
    # the activations' term off: the weights' roofline alone
    on = ExpertLayout(ep=8, routed_activation_bytes=None)
    off = replace(on, wgrad_accumulation_bytes=None)
    w = 1.0 if precision == "fp8" else 2.0
    passes = 4.0 if recompute == "full" else 3.0
    assert weight_bytes_per_pass(MIXTRAL, lay, on) == pytest.approx((w * (passes - 1) + 8) / passes)
    assert weight_bytes_per_pass(MIXTRAL, lay, off) == w
    ridge = hw.gpu.peak_tflops(precision) / hw.gpu.memory_bw_tb_per_s
    rows = tokens_per_gpu(lay, 4096) * 2 * 8 / 8
    gg_on = grouped_gemm_efficiency(MIXTRAL, lay, 4096, hw.gpu, on)
    gg_off = grouped_gemm_efficiency(MIXTRAL, lay, 4096, hw.gpu, off)
    assert gg_on == pytest.approx(rows / (rows + ridge * (w * (passes - 1) + 8) / passes / 2))
    assert gg_off == pytest.approx(rows / (rows + ridge * w / 2))
    # the routed GEMMs' seconds R at efficiency 1 (grouped_gemm_half_tokens 0) take R / gg
    gemm = {
        name: moe_gemm_per_microbatch_s(MIXTRAL, lay, 4096, hw.gpu, ex)
        for name, ex in (("on", on), ("off", off))
    }
    full = moe_gemm_per_microbatch_s(
        MIXTRAL, lay, 4096, hw.gpu, ExpertLayout(ep=8, grouped_gemm_half_tokens=0.0)
    )
    routed_s = (gemm["off"] - full) / (1 / gg_off - 1)
    assert gemm["on"] == pytest.approx(full + routed_s * (1 / gg_on - 1))
    # the step: x the 8 micro-batches
    step_on = evaluate(MIXTRAL, hw, lay, 4096, experts=on).breakdown.compute
    step_off = evaluate(MIXTRAL, hw, lay, 4096, experts=off).breakdown.compute
    assert step_on - step_off == pytest.approx(8 * routed_s * (1 / gg_on - 1 / gg_off))
    assert step_on > step_off


def test_routed_activation_bytes_add_the_gemms_operand_traffic(hw):
    """Each routed GEMM pass over m rows of a k x n weight also reads and writes m (k + n)
    activations (bf16; fp8 operands 1 byte) for its 2 m k n FLOPs: the roofline adds ridge x 2 / 2 x (1/k + 1/n)
    of peak-rate seconds a FLOP, whatever m, the up- (k = h, n = 2 f gated) and
    down-projection (k = f, n = h) weighted 2 : 1. Off (None): the weights' roofline alone;
    the step moves by m x the routed GEMMs' seconds at the two efficiencies (PP 1)."""
    ridge = hw.gpu.dense_bf16_tflops / hw.gpu.memory_bw_tb_per_s
    nxt = moe_zoo()["qwen3-next-80b-a3b"]  # h 2048, f 512: activations outweigh weights
    h, f = 2048, 512
    units = ridge * (2 * (1 / h + 1 / (2 * f)) + 1 / f + 1 / h) / 3
    assert routed_activation_units(nxt, FLAT, ExpertLayout(ep=32), ridge) == pytest.approx(units)
    assert routed_activation_units(nxt, FLAT, ExpertLayout(ep=32, etp=2), ridge) > units  # f / ETP
    # fp8: operands read at 1 byte, outputs written at 2, over the three passes (forward:
    # k read n written; data gradient: n read k written; weight gradient: k + n read):
    # (2 x 1 + 2) / 3 bytes an element against bf16's 2
    fp8 = replace(FLAT, precision="fp8")
    assert routed_activation_units(nxt, fp8, ExpertLayout(ep=32), ridge) == pytest.approx(
        units * (2 * 1 + 2) / 3 / 2
    )
    assert (
        routed_activation_units(nxt, FLAT, ExpertLayout(routed_activation_bytes=None), ridge) == 0
    )
    on, off = ExpertLayout(ep=8), ExpertLayout(ep=8, routed_activation_bytes=None)
    rows = tokens_per_gpu(FLAT, 4096) * 2 * 8 / 8
    half = ridge * weight_bytes_per_pass(MIXTRAL, FLAT, on) / 2
    act = ridge * (2 * (1 / 4096 + 1 / (2 * 14336)) + 1 / 14336 + 1 / 4096) / 3
    gg_on = grouped_gemm_efficiency(MIXTRAL, FLAT, 4096, hw.gpu, on)
    gg_off = grouped_gemm_efficiency(MIXTRAL, FLAT, 4096, hw.gpu, off)
    assert gg_off == pytest.approx(rows / (rows + half))
    assert gg_on == pytest.approx(rows / (rows + half + act * rows))
    full = moe_gemm_per_microbatch_s(
        MIXTRAL, FLAT, 4096, hw.gpu, ExpertLayout(ep=8, grouped_gemm_half_tokens=0.0)
    )
    routed_s = (moe_gemm_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, off) - full) / (
        1 / gg_off - 1
    )
    step_on = evaluate(MIXTRAL, hw, FLAT, 4096, experts=on).breakdown.compute
    step_off = evaluate(MIXTRAL, hw, FLAT, 4096, experts=off).breakdown.compute
    assert step_on - step_off == pytest.approx(8 * routed_s * (1 / gg_on - 1 / gg_off))
    assert step_on > step_off


def test_overlap_hides_the_all_to_all_at_its_sm_cost(hw):
    """ep_overlap 1 at PP 1 and 8 micro-batches: the first forward's and the last
    backward's all-to-alls run alone (1 / 8 of them exposed), the rest hidden at
    overlap_sm_fraction x their seconds."""
    off = run(hw, ExpertLayout(ep=8))
    on = run(hw, ExpertLayout(ep=8, ep_overlap=1.0))
    free = run(hw, ExpertLayout(ep=8, ep_overlap=1.0, overlap_sm_fraction=0.0))
    assert off.ep_comm > 0 and a2a_overlap_exposed_share(1, 1, 8) == 1 / 8
    assert on.ep_comm == pytest.approx(off.ep_comm / 8)
    assert on.compute - off.compute == pytest.approx(OVERLAP_SM_FRACTION * 7 / 8 * off.ep_comm)
    assert free.compute == pytest.approx(off.compute, rel=1e-12)
    half = run(hw, ExpertLayout(ep=8, ep_overlap=0.5))
    assert half.ep_comm == pytest.approx((1 - 0.5 * 7 / 8) * off.ep_comm)
    assert half.compute - off.compute == pytest.approx(
        0.5 * 7 / 8 * OVERLAP_SM_FRACTION * off.ep_comm
    )


def test_interleaved_overlap_leaves_its_warm_up_exposed(hw):
    """PP 4 x VP 2, 16 micro-batches: the first rank runs 2 (p - 1) + (v - 1) p + 1 = 11
    chunk forwards alone (and as many backwards), 11 of its 32 chunk passes each way; one
    micro-batch holds them all exposed; DualPipe hides them all."""
    layout = Layout(tp=1, pp=4, vp=2, dp=2, micro_batch=1, global_batch=32)
    assert a2a_overlap_warmup_chunks(4, 2) == 11
    assert a2a_overlap_exposed_share(4, 2, 16) == pytest.approx(11 / 32)
    assert a2a_overlap_exposed_share(4, 2, 4) == 1.0
    off = run(hw, ExpertLayout(ep=2), layout)
    on = run(hw, ExpertLayout(ep=2, ep_overlap=1.0), layout)
    assert off.ep_comm > 0
    assert on.ep_comm == pytest.approx(11 / 32 * off.ep_comm)
    assert ExpertLayout(ep=2, dualpipe=True).hidden_share(layout) == 1.0
    assert ExpertLayout(ep=2).hidden_share(layout) == 0.0


def test_overlap_hides_no_more_than_the_compute_beside_it(hw):
    """A paired chunk takes at least max(compute + SM cost, all-to-alls) (models.step.
    ep_overlap_s: one communication and one compute stream, Megatron-Core's
    TransformerLayerSchedulePlan.run; DualPipe's chunk pairs): the hidden seconds are
    min(hidden share x all-to-alls, paired share x compute) and the rest is exposed. The
    reproduction stepped in 6.41 s (a2a) and 3.27 s (DualPipe, PP 2) against 8.77 s and
    4.38 s of all-to-alls on the NICs."""
    off = run(hw, ExpertLayout(ep=32), WIDE, QWEN3_30B)
    on = run(hw, ExpertLayout(ep=32, ep_overlap=1.0), WIDE, QWEN3_30B)
    assert off.ep_comm > 1.8 * off.compute  # the NIC-bound case
    assert on.total >= off.ep_comm  # no schedule beats the wire time
    assert on.total >= max(on.compute, off.ep_comm)
    paired = 1 - a2a_overlap_exposed_share(1, 1, 16)  # 15 / 16 of the chunks paired
    hidden = paired * off.compute  # min(15/16 all-to-alls, 15/16 compute)
    assert on.ep_comm == pytest.approx(off.ep_comm - hidden, rel=1e-9)
    assert on.compute == pytest.approx(off.compute + OVERLAP_SM_FRACTION * hidden, rel=1e-9)
    plan = evaluate(QWEN3_30B, hw, WIDE, 4096, experts=ExpertLayout(ep=32, ep_overlap=1.0))
    capped = off.ep_comm * paired - hidden  # evaluate's moe line says so
    assert f"{capped:.3g} s a step of the overlapped all-to-alls outlast" in plan.moe_plan[-1]
    # DualPipe pairs every chunk: it hides the compute's seconds, not the all-to-alls'
    off2 = run(hw, ExpertLayout(ep=32), WIDE_PP2, QWEN3_30B)
    dual = run(hw, ExpertLayout(ep=32, dualpipe=True), WIDE_PP2, QWEN3_30B)
    assert off2.ep_comm > off2.compute
    assert dual.ep_comm == pytest.approx(off2.ep_comm - off2.compute, rel=1e-9)
    assert dual.compute == pytest.approx(off2.compute * (1 + OVERLAP_SM_FRACTION), rel=1e-9)
    assert dual.total >= max(dual.compute, off2.ep_comm)
    # where the compute covers them (Mixtral at EP 8 in a server) nothing changes
    small = run(hw, ExpertLayout(ep=8), FLAT)
    assert small.ep_comm < small.compute
    assert run(hw, ExpertLayout(ep=8, ep_overlap=1.0), FLAT).ep_comm == pytest.approx(
        small.ep_comm / 8
    )


@pytest.mark.parametrize("nics", [1, 2, 4, 8])
@pytest.mark.parametrize(
    ("layout", "ex"),
    [
        (WIDE, ExpertLayout(ep=32, ep_overlap=1.0)),
        (WIDE, ExpertLayout(ep=16, ep_overlap=0.5)),
        (replace(WIDE, pp=2, vp=2), ExpertLayout(ep=32, ep_overlap=1.0)),
        (WIDE_PP2, ExpertLayout(ep=32, dualpipe=True)),
        (replace(WIDE, pp=4, global_batch=1024), ExpertLayout(ep=8, dualpipe=True)),
    ],
)
def test_an_overlapped_step_is_never_shorter_than_its_all_to_alls(layout, ex, nics):
    """Each micro-batch at least max(its compute, its all-to-alls), whatever the NICs: the
    step at least the step's all-to-all seconds without the overlap and its compute."""
    catalog = stack_catalog((), DEFAULT_STACK)
    h = Hardware.from_catalog(catalog, "h100-sxm", nics_per_node=nics)
    on = evaluate(QWEN3_30B, h, layout, 4096, experts=ex).breakdown
    plain = replace(ex, ep_overlap=0.0, dualpipe=False)
    off = evaluate(QWEN3_30B, h, layout, 4096, experts=plain).breakdown
    assert on.total >= max(on.compute, off.ep_comm) * (1 - 1e-12)
    assert on.ep_comm >= off.ep_comm - off.compute * (1 + 1e-12)


def test_the_overlaps_compute_hides_nothing_else(hw):
    """The seconds the all-to-alls take of a chunk's compute are no window for another
    transfer: under DualPipe (the model pairs every chunk, the last micro-batch's too) the
    step's gradient reduction loses them from its window; under ZeRO-3 each micro-batch's
    gather window loses them (models.step.step_from_coefficients, zero3_exposed_s)."""
    a = Assumptions()
    bw = hw.network.node_bw_gb_per_s
    share = comm.nic_share(bw, 8, hw.gpu.calibration.network_bus_efficiency)
    dual = ExpertLayout(ep=32, dualpipe=True)
    c = moe_step_coefficients(QWEN3_30B, WIDE_PP2, dual, 4096, hw.gpu, hw.network, a)
    hidden, exposed = ep_overlap_s(c, share)
    assert c.ep_window_last and hidden == pytest.approx(c.ep_window_s) and exposed > 0
    reduce_s = group_reduce_s(c, c.dp_bytes, 32, bw) + expert_reduce_s(c, 32, bw)
    window = c.dp_window_s(a.dp_overlap)
    got = step_from_coefficients(c, 32, 16, bw, a.dp_overlap).dp_comm
    assert got == pytest.approx(max(0.0, reduce_s - max(0.0, window - hidden)), rel=1e-12)
    assert got > max(0.0, reduce_s - window)  # it bites here
    # Megatron-Core's overlap runs the last backward alone: the reduction keeps its window
    a2a = moe_step_coefficients(QWEN3_30B, WIDE, ExpertLayout(ep=32, ep_overlap=1.0), 4096,
                                hw.gpu, hw.network, a)  # fmt: skip
    assert not a2a.ep_window_last
    # ZeRO-3 (two NICs a server): every micro-batch's gather window is short of the
    # all-to-alls' seconds
    two = Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "h100-sxm", nics_per_node=2)
    bw2 = two.network.node_bw_gb_per_s
    z3 = moe_step_coefficients(QWEN3_30B, replace(WIDE, zero=3), ExpertLayout(ep=32, ep_overlap=1.0),
                               4096, two.gpu, two.network, a)  # fmt: skip
    hidden3, _ = ep_overlap_s(z3, comm.nic_share(bw2, 8, z3.network_efficiency))
    assert 0 < hidden3 < z3.gather_overlap_s
    reduce3 = group_reduce_s(z3, z3.dp_bytes, 32, bw2) + expert_reduce_s(z3, 32, bw2)
    window3 = z3.dp_window_s(a.dp_overlap)
    got3 = step_from_coefficients(z3, 32, 16, bw2, a.dp_overlap).dp_comm
    assert got3 == pytest.approx(zero3_exposed_s(z3, reduce3, 32, bw2, 16, window3, hidden3))
    assert got3 > zero3_exposed_s(z3, reduce3, 32, bw2, 16, window3)  # it bites here


def test_overlap_holds_the_activations_1f1b_holds(hw):
    """The overlap's extra warm-up forward is the one 1F1B runs before its first backward,
    and its combined steps free a layer as they store one (a2a_overlap_warmup_chunks):
    the same memory as without it, at PP 1 and interleaved."""
    a = Assumptions()
    layout = Layout(tp=1, pp=4, vp=2, dp=2, micro_batch=1, global_batch=32)
    for lay, ep in ((FLAT, 8), (layout, 2)):
        on = expert_memory(MIXTRAL, lay, 4096, 80, a, ExpertLayout(ep=ep, ep_overlap=1.0))
        off = expert_memory(MIXTRAL, lay, 4096, 80, a, ExpertLayout(ep=ep))
        assert on.memory == off.memory


@pytest.mark.parametrize(
    "pp, vp, global_batch, fragment",
    [
        (1, 1, 64, "even PP of 2 or more, not 1"),
        (4, 2, 64, "set VP to 1"),
        (4, 1, 8, "at least 2 x PP = 8, not 4"),
        (4, 1, 18, "not 9"),
    ],
)
def test_dualpipe_runs_where_its_schedule_can(pp, vp, global_batch, fragment):
    """dualpipe_violation (deepseek-ai/DualPipe ``DualPipe.step``): even PP, even
    micro-batches, at least 2 x PP of them, no virtual stages; DeepSeek-V3's report layout
    (PP 16, 120 micro-batches) runs."""
    from helpers import load_bench

    lay = Layout(tp=1, pp=pp, vp=vp, dp=2, micro_batch=1, global_batch=global_batch)
    why = dualpipe_violation(lay, ExpertLayout(ep=2, dualpipe=True))
    assert why is not None and fragment in why
    assert dualpipe_violation(lay, ExpertLayout(ep=2)) is None
    ok = Layout(tp=1, pp=4, dp=2, micro_batch=1, global_batch=16)
    assert dualpipe_violation(ok, ExpertLayout(ep=2, dualpipe=True)) is None
    report = load_bench("deepseek_v3.py", "bench_deepseek_v3").report_layout()
    assert dualpipe_violation(report, ExpertLayout(ep=64, dualpipe=True)) is None


@pytest.mark.parametrize(
    "layout, ex, spec, fragment",
    [
        (FLAT, ExpertLayout(ep=1, ep_overlap=1.0), MIXTRAL, "set EP above 1"),
        (
            Layout(tp=1, pp=4, dp=2, micro_batch=1, global_batch=32),
            ExpertLayout(ep=2, ep_overlap=1.0),
            MIXTRAL,
            "set VP above 1",
        ),
        (
            Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, recompute="full"),
            ExpertLayout(ep=8, ep_overlap=1.0),
            MIXTRAL,
            "full recomputation",
        ),
        (
            FLAT,
            ExpertLayout(ep=8, ep_overlap=1.0, recompute_modules=frozenset({"moe"})),
            MIXTRAL,
            "drop moe",
        ),
        (FLAT, ExpertLayout(ep=8, ep_overlap=1.0), V3.model_copy(update={"mtp_layers": 2}), "MTP"),
    ],
    ids=["ep1", "pp-no-vp", "full", "moe-module", "mtp2"],
)
def test_overlap_runs_where_megatron_core_runs_it(layout, ex, spec, fragment):
    """a2a_overlap_violation: TransformerConfig.__post_init__'s rules (megatron-core
    0.19.2); none for a layout that meets them, for DualPipe or with the overlap off."""
    why = a2a_overlap_violation(spec, layout, ex)
    assert why is not None and fragment in why
    assert a2a_overlap_violation(MIXTRAL, FLAT, ExpertLayout(ep=8, ep_overlap=1.0)) is None
    assert a2a_overlap_violation(spec, layout, replace(ex, ep_overlap=0.0)) is None
    interleaved = Layout(tp=1, pp=4, vp=2, dp=2, micro_batch=1, global_batch=32)
    assert a2a_overlap_violation(MIXTRAL, interleaved, ExpertLayout(ep=2, ep_overlap=1.0)) is None


def test_dualpipe_bubble_overlap_and_weights(hw):
    """DualPipe: bubble (PP/2 - 1) 2 / (3 (PP - 1)) of 1F1B's, the all-to-alls hidden at
    the SM cost, stages r and PP-1-r on rank r (the weights twice over the pipeline)."""
    assert dualpipe_bubble_scale(16) == pytest.approx(7 * 2 / (3 * 15))
    assert dualpipe_bubble_scale(2) == 1.0
    layout = Layout(tp=1, pp=8, dp=8, micro_batch=1, global_batch=256)
    spec = MIXTRAL
    plain, dual = ExpertLayout(ep=8), ExpertLayout(ep=8, dualpipe=True)
    a = Assumptions()
    cp = moe_step_coefficients(spec, layout, plain, 4096, hw.gpu, hw.network, a)
    cd = moe_step_coefficients(spec, layout, dual, 4096, hw.gpu, hw.network, a)
    # every all-to-all hidden (EP 8 inside a server: no NIC part), at the SM cost
    assert cp.ep_mb_s > 0 and cd.ep_mb_s == 0.0 and not cp.ep_crosses_nics
    assert cd.compute_mb_s == pytest.approx(
        cp.compute_mb_s + OVERLAP_SM_FRACTION * cp.ep_mb_s, rel=1e-12
    )
    assert cd.bubble_s == pytest.approx(dualpipe_bubble_scale(8) * 7 * cd.stage_mb_s)
    # rank r holds stages r and PP-1-r: both stages' parameters, and 1F1B's PP - r
    # micro-batches of stage r with r + 1 of stage PP-1-r (1F1B's count at rank PP-1-r),
    # PP + 1 in all
    one = _moe_ranks(spec, layout, 4096, a, 8, 1, None, 1.0, StoredActivations())
    two = _moe_ranks(spec, layout, 4096, a, 8, 1, None, 1.0, StoredActivations(dualpipe=True))
    for r, (mine, paired) in enumerate(zip(one, reversed(one), strict=True)):
        assert two[r].dense_params == pytest.approx(mine.dense_params + paired.dense_params)
        assert two[r].expert_params == pytest.approx(mine.expert_params + paired.expert_params)
        assert two[r].act == pytest.approx(mine.act + paired.act)
    m2 = expert_memory(spec, layout, 4096, 80, a, dual)
    both = two[m2.rank]
    assert m2.memory.weights == pytest.approx(
        (both.dense_params + both.expert_params) * a.weight_bytes / GB
    )
    # the optimizer states once per pipeline: half of the two stages' on each holder
    dense_o = both.dense_params * a.optimizer_bytes / 8 / GB  # ZeRO-1 over DP 8
    expert_o = both.expert_params * a.optimizer_bytes / GB  # expert-DP 1
    assert m2.memory.optimizer == pytest.approx((dense_o + expert_o) / 2)
    assert m2.memory.activations == pytest.approx(both.act / GB)


def test_recompute_moe_reruns_the_layer_forward_and_its_all_to_alls(hw):
    """--recompute-modules moe: one more forward of the router, shared and routed GEMMs,
    two more all-to-alls; the routed activations are not stored."""
    base, again = ExpertLayout(ep=8), ExpertLayout(ep=8, recompute_modules=frozenset({"moe"}))
    assert run(hw, again).ep_comm == pytest.approx(1.5 * run(hw, base).ep_comm)
    # one more forward of each MoE layer's router (2 h E) and top-2 experts (2 x 2 x 3 h f)
    # per token: at gg 1 (half-tokens 0) exactly their GEMM time
    mlp_only = ExpertLayout(ep=8, grouped_gemm_half_tokens=0.0)
    mlp_again = replace(mlp_only, recompute_modules=again.recompute_modules)
    d = moe_gemm_per_microbatch_s(
        MIXTRAL, FLAT, 4096, hw.gpu, mlp_again
    ) - moe_gemm_per_microbatch_s(MIXTRAL, FLAT, 4096, hw.gpu, mlp_only)
    router = StageWork(32 * 4096 * 2 * 4096 * 8, 0.0, 0.0)
    experts = StageWork(32 * 4096 * 2 * 2 * 3 * 4096 * 14336, 0.0, 0.0)
    expected = work_gemm_s(router, 4096, FLAT, hw.gpu) + work_gemm_s(experts, 4096, FLAT, hw.gpu)
    assert d == pytest.approx(expected, rel=1e-9)
    mem0 = expert_memory(MIXTRAL, FLAT, 4096, 80, Assumptions(), base)
    mem1 = expert_memory(MIXTRAL, FLAT, 4096, 80, Assumptions(), again)
    assert mem1.routed_activations_gb == 0.0 < mem0.routed_activations_gb


def test_stored_activation_options_drop_their_bytes():
    """layernorm: 4 sbh / TP; mla_up_proj: MLA's Q, K, V (4 qk + 2 v per token);
    moe_act: 2 f per routed copy; fp8: routed inputs and SwiGLU inputs at 1 byte;
    probs_in_combine (off, as Megatron-Core) adds each copy's output, 2 h bytes."""
    layout = Layout(tp=1, pp=16, dp=128, micro_batch=1, global_batch=4096)
    a = Assumptions()
    ex = ExpertLayout(ep=64)

    def act(**kw) -> float:
        return expert_memory(V3, layout, 4096, 80, a, ExpertLayout(ep=64, **kw)).memory.activations

    base = act()
    rank = expert_memory(V3, layout, 4096, 80, a, ex)
    layers = 4  # a middle rank's MoE layers (PP 16 over 61: 3 dense then 58 MoE)
    held = 16 - rank.rank if rank.rank < 16 else 1
    sbh = 4096 * 7168
    qk, v = 128 * 192, 128 * 128
    assert base - act(recompute_modules=frozenset({"layernorm"})) == pytest.approx(
        layers * held * 4 * sbh / GB, rel=1e-9
    )
    assert base - act(recompute_modules=frozenset({"mla_up_proj"})) == pytest.approx(
        layers * held * 4096 * (4 * qk + 2 * v) / GB, rel=1e-9
    )
    copies = 4096 * 8
    assert base - act(recompute_modules=frozenset({"moe_act"})) == pytest.approx(
        layers * held * copies * 2 * 2048 / GB, rel=1e-9
    )
    fp8_saved = copies * (7168 + 2 * 2048) + 4096 * v  # inputs, SwiGLU inputs, attn out
    assert base - act(fp8_activations=True) == pytest.approx(
        layers * held * fp8_saved / GB, rel=1e-9
    )
    assert StoredActivations().routed_bytes_per_copy(V3, 1) == 2 * 7168 + 6 * 2048
    # a combine that weights the expert outputs keeps each of them: 2 h per routed copy
    assert act(probs_in_combine=True) - base == pytest.approx(
        layers * held * copies * 2 * 7168 / GB, rel=1e-9
    )
    assert StoredActivations(probs_in_combine=True).routed_bytes_per_copy(V3, 1) == (
        2 * 7168 + 6 * 2048 + 2 * 7168
    )


DSV3_REPORT = [
    "evaluate", "--model", "deepseek-v3", "--gpu", "h800", "--tp", "1", "--pp", "16",
    "--dp", "128", "--ep", "64", "--first-stage-layers", "3", "--last-stage-layers", "2",
    "--global-batch", "15360", "--precision", "fp8", "--recompute", "none",
    "--moe-overlap", "dualpipe", "--dispatcher", "deepep", "--fp8-dispatch",
    "--recompute-modules", "layernorm,mla_up_proj,moe_act", "--fp8-activations", "--json",
]  # fmt: skip


def test_evaluate_options_switch_the_terms_as_the_library(capsys):
    """evaluate's MoE options build bench/deepseek_v3.py's ExpertLayout: the same step;
    DeepSeek-V3 on 2,048 H800 as its report trains it is within 15% of its 180K
    GPU-hours per trillion tokens (bench/deepseek_v3.py prints it)."""
    import json

    from helpers import load_bench, run_main

    bench = load_bench("deepseek_v3.py", "bench_deepseek_v3")

    code, out, err = run_main(capsys, DSV3_REPORT)
    assert code in (0, 1), err
    got = json.loads(out)
    layout = bench.report_layout()
    ev = bench.predict(layout, a=bench.MODERN_ASSUMPTIONS)  # the CLI's optimizer precision
    assert got["step_time_s"] == pytest.approx(float(ev.step_time_s), rel=1e-9)
    report = bench.predict(layout)  # the report's bf16 moments and fp32 gradients
    hours = bench.gpu_hours_per_trillion(float(report.step_time_s), layout)
    assert abs(hours / bench.REPORT_GPU_HOURS_PER_T - 1) < 0.15
    assert report.memory.total <= bench.MEMORY_GB  # it ran on 80 GB H800s
    assert ev.memory.total < report.memory.total  # fp32 gradients outweigh bf16 moments
    assert got["feasible"] is True
    assert got["breakdown_s"]["ep_comm"] == 0.0  # DualPipe hides the all-to-alls
    assert got["moe_plan"][0].startswith("DualPipe") and "fp8 activations" in got["moe_plan"]
    plain = [a for a in DSV3_REPORT if a not in ("--fp8-dispatch", "--fp8-activations")]
    code, out, _ = run_main(capsys, plain)
    assert json.loads(out)["memory_gb"]["activations"] > got["memory_gb"]["activations"]


@pytest.mark.parametrize(
    "args, option",
    [
        (["--model", "llama2-7b", "--fp8-dispatch"], "--fp8-dispatch"),
        (["--model", "llama2-7b", "--moe-overlap", "a2a"], "--moe-overlap"),
        (["--model", "llama2-7b", "--fused-attention"], "--fused-attention"),
        (["--model", "llama2-7b", "--router-fp32"], "--router-fp32"),
        (["--model", "llama2-7b", "--no-permute-fusion"], "--no-permute-fusion"),
        (["--model", "llama2-7b", "--permute-fusion"], "--permute-fusion"),
        # a name neither Megatron-LM nor models.memory knows (mlp is Megatron's: noted)
        (["--model", "mixtral-8x7b", "--dp", "8", "--ep", "8", "--recompute-modules", "attn"],
         "--recompute-modules"),
        # Megatron-Core refuses the all-to-all overlap: PP 4 without virtual stages, full
        # recomputation, EP 1 (models.expert.a2a_overlap_violation)
        (["--model", "mixtral-8x7b", "--pp", "4", "--dp", "2", "--ep", "2",
          "--moe-overlap", "a2a"], "--moe-overlap"),
        (["--model", "mixtral-8x7b", "--dp", "8", "--ep", "8", "--recompute", "full",
          "--moe-overlap", "a2a"], "--moe-overlap"),
        (["--model", "mixtral-8x7b", "--dp", "8", "--moe-overlap", "a2a"], "--moe-overlap"),
        # DualPipe: 4 micro-batches on PP 4 (it needs 8), PP 1, virtual stages
        (["--model", "mixtral-8x7b", "--pp", "4", "--dp", "2", "--ep", "2",
          "--global-batch", "8", "--moe-overlap", "dualpipe"], "--moe-overlap"),
        (["--model", "mixtral-8x7b", "--dp", "8", "--ep", "8", "--moe-overlap", "dualpipe"],
         "--moe-overlap"),
        (["--model", "mixtral-8x7b", "--pp", "2", "--vp", "2", "--dp", "4", "--ep", "2",
          "--global-batch", "64", "--moe-overlap", "dualpipe"], "--moe-overlap"),
    ],
)  # fmt: skip
def test_evaluate_moe_options_refused_where_they_mean_nothing(capsys, args, option):
    from helpers import run_main

    code, _, err = run_main(capsys, ["evaluate", *args])
    assert code == 2 and option in err and "Traceback" not in err


def test_h800_is_evaluated_but_not_searched_unless_named():
    """The H800 is no longer sold (``for_sale`` false): a question that names no GPU
    searches the others, as before it joined the catalog."""
    from catalog import load_catalog

    cat = load_catalog()
    assert "h800" in cat.gpus and "h800" not in cat.gpus_for_sale()
    assert len(cat.gpus_for_sale()) == len(cat.gpus) - 1
    h800, h100 = cat.gpu("h800"), cat.gpu("h100-sxm")
    assert h800.dense_fp8_tflops == h100.dense_fp8_tflops
    assert h800.scale_up_bw_gb_per_s_per_direction == 200


def _evaluate_mixtral(capsys, *extra: str) -> tuple[dict, dict]:
    """(plain, with ``extra``): evaluate's --json of Mixtral 8x7B on 8 H100 (EP 8, PP 1)."""
    import json

    from helpers import run_main

    args = ["evaluate", "--model", "mixtral-8x7b", "--gpu", "h100-sxm", "--tp", "1", "--pp",
            "1", "--dp", "8", "--ep", "8", "--global-batch", "64", "--json"]  # fmt: skip
    out = []
    for argv in (args, [*args, *extra]):
        code, text, err = run_main(capsys, argv)
        assert code in (0, 1), err
        out.append(json.loads(text))
    return out[0], out[1]


def test_evaluate_fused_attention_switches_the_kernel_term(capsys):
    """--fused-attention: ExpertLayout.attention_kernel_speedup = 1.61, named in the plan's
    moe line; the step falls by the attention core's share (test above)."""
    plain, fused = _evaluate_mixtral(capsys, "--fused-attention")
    assert any(p.startswith("fused attention (x1.61") for p in fused["moe_plan"])
    assert not any(p.startswith("fused attention") for p in plain["moe_plan"])
    assert fused["step_time_s"] < plain["step_time_s"]
    assert fused["breakdown_s"]["ep_comm"] == plain["breakdown_s"]["ep_comm"]


def test_evaluate_no_permute_fusion_switches_the_permutation_term(capsys, hw):
    """--no-permute-fusion: ExpertLayout.permute_fusion off, named in the plan's moe line; the
    step rises by 8 micro-batches x (UNFUSED - fused) passes of the routed copies, nothing
    else moves; --permute-fusion is the default."""
    plain, unfused = _evaluate_mixtral(capsys, "--no-permute-fusion")
    _, fused = _evaluate_mixtral(capsys, "--permute-fusion")
    assert "unfused permutation" in unfused["moe_plan"]
    assert "unfused permutation" not in plain["moe_plan"] and fused == plain
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, recompute="none")
    fused_s, unfused_s = (
        permute_per_microbatch_s(MIXTRAL, layout, MIXTRAL.seq_len, hw.gpu, ex)
        for ex in (ExpertLayout(ep=8), ExpertLayout(ep=8, permute_fusion=False))
    )
    assert unfused_s / fused_s == pytest.approx(UNFUSED_PERMUTE_HBM_PASSES / PERMUTE_HBM_PASSES)
    extra = 8 * (unfused_s - fused_s)
    assert unfused["step_time_s"] - plain["step_time_s"] == pytest.approx(extra, rel=1e-3)
    assert unfused["breakdown_s"]["ep_comm"] == plain["breakdown_s"]["ep_comm"]


def test_evaluate_router_fp32_switches_the_router_term(capsys):
    """--router-fp32: ExpertLayout.router_fp32, named in the plan's moe line; the step rises
    by m x router_fp32_per_microbatch_s (PP 1, 8 micro-batches), nothing else moves."""
    plain, fp32 = _evaluate_mixtral(capsys, "--router-fp32")
    assert "fp32 router" in fp32["moe_plan"] and "fp32 router" not in plain["moe_plan"]
    hw = Hardware.from_catalog(stack_catalog((), DEFAULT_STACK), "h100-sxm")
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64, recompute="none")
    term = router_fp32_per_microbatch_s(
        MIXTRAL, layout, MIXTRAL.seq_len, hw.gpu, ExpertLayout(ep=8, router_fp32=True)
    )
    assert fp32["step_time_s"] - plain["step_time_s"] == pytest.approx(8 * term, rel=1e-3)
    assert fp32["breakdown_s"]["ep_comm"] == plain["breakdown_s"]["ep_comm"]
