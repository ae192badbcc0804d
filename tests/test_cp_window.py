"""Ring attention across servers and the step's reduction share one window: the compute of
the last micro-batch (models.step.cp_ring_hidden_s). Counted in both, a faster GPU, whose
windows are shorter, predicted a slower step."""

from __future__ import annotations

import dataclasses
from itertools import pairwise

import pytest

from models import comm, moe_zoo, scaleup
from models.evaluate import Hardware, evaluate
from models.expert import (
    FP8_DISPATCH_BYTES,
    HOPPER_FUSED_ATTENTION_SPEEDUP,
    ExpertLayout,
    moe_attention_flop_share,
    moe_step_coefficients,
)
from models.layout import Assumptions, Layout
from models.step import (
    cp_crosses_nics,
    cp_ring_bytes_per_microbatch,
    group_reduce_s,
    step_coefficients,
)


def _faster(hw: Hardware, times: float) -> Hardware:
    gpu = hw.gpu.model_copy(update={"dense_bf16_tflops": hw.gpu.dense_bf16_tflops * times})
    return Hardware(gpu, hw.nic, hw.nics_per_node, hw.switch, hw.facility)


def test_the_reduction_window_is_shorter_by_what_the_ring_hides(models, catalog):
    """One micro-batch, TP 4 x CP 4 over two servers of 2 NICs: dp_comm = max(0, reduction
    - max(0, window - min(ring bytes / share, attention window)))."""
    spec, seq = models["llama3-8b"], 16384
    hw = Hardware.from_catalog(catalog, "h100-sxm", nics_per_node=2)
    lay = Layout(tp=4, cp=4, pp=1, dp=4, micro_batch=1, global_batch=4)
    a = Assumptions(flash_attention=True)
    c = step_coefficients(spec, lay, seq, hw.gpu, hw.network, a)
    assert c.cp_crosses_nics and lay.grad_accum == 1
    node = hw.network.node_bw_gb_per_s
    share = comm.nic_share(node, 8, c.network_efficiency)
    ring = min(c.cp_nic_bytes / share, c.cp_window_s)
    reduce = group_reduce_s(c, c.dp_bytes, lay.dp * lay.cp, node)
    window = c.dp_window_s(a.dp_overlap)
    ev = evaluate(spec, hw, lay, seq_len=seq)
    assert ev.breakdown.dp_comm == pytest.approx(max(0.0, reduce - max(0.0, window - ring)))
    assert ring > 0 and ev.breakdown.dp_comm > max(0.0, reduce - window)


@pytest.mark.parametrize("nics", [2, 8])
def test_a_faster_gpu_never_predicts_a_slower_step_with_cp_across_servers(models, catalog, nics):
    """Llama 3 8B, TP 4 x CP 4 x DP 4 at 16K on H100 with 8 NICs was 0.159 s, 0.112 s at
    twice the TFLOP/s and 0.120 s at three times."""
    checked = 0
    for name, tp, cp, dp, m, seq in (
        ("llama3-8b", 4, 4, 4, 1, 16384),
        ("llama3-8b", 4, 4, 1, 1, 16384),
        ("llama3-8b", 8, 2, 4, 1, 16384),
        ("llama3-8b", 8, 4, 4, 2, 65536),
        ("llama3-70b", 8, 2, 4, 1, 16384),
    ):
        hw = Hardware.from_catalog(catalog, "h100-sxm", nics_per_node=nics)
        lay = Layout(tp=tp, cp=cp, pp=1, dp=dp, micro_batch=1, global_batch=m * dp)
        steps = [
            evaluate(models[name], _faster(hw, x), lay, seq_len=seq).step_time_s
            for x in (1, 1.25, 1.5, 2, 3)
        ]
        assert all(b <= a * (1 + 1e-12) for a, b in pairwise(steps)), (name, steps)
        checked += 1
    assert checked == 5


def test_a_faster_gpu_never_predicts_a_slower_step_with_cp_inside_the_domain(models, catalog):
    """The in-domain ring (over the peer links) takes its share of the same window:
    Llama 2 13B, CP 4 x DP 16 at 4K on H200 was 0.291 s, 0.298 s at twice the TFLOP/s and
    0.302 s at four times (models.step.cp_in_domain_s)."""
    hw = Hardware.from_catalog(catalog, "h200")
    checked = 0
    for name, tp, cp, dp, seq in (
        ("llama2-13b", 1, 4, 16, 4096),
        ("llama2-13b", 1, 4, 4, 4096),
        ("llama2-13b", 2, 4, 4, 4096),
        ("llama3-8b", 2, 2, 16, 16384),
    ):
        lay = Layout(tp=tp, cp=cp, pp=1, dp=dp, micro_batch=1, global_batch=dp, recompute="none")
        steps = [
            evaluate(models[name], _faster(hw, x), lay, seq_len=seq).step_time_s for x in (1, 2, 4)
        ]
        assert all(b <= a * (1 + 1e-12) for a, b in pairwise(steps)), (name, steps)
        checked += 1
    assert checked == 4


# --- a mixture-of-experts stage's ring (models.expert.moe_cp_coefficients) -------------------

# Mixtral 8x7B at 4K on B200 servers under vtrain-2022: TP 4 x CP 4 crosses the NICs
MOE_RING = Layout(tp=4, pp=8, vp=2, cp=4, dp=1, micro_batch=1, global_batch=16, zero=3,
                  recompute="none")  # fmt: skip


def _moe_ring_step(catalog, host_scale: float) -> float:
    spec = moe_zoo()["mixtral-8x7b"]
    hw = Hardware.from_catalog(catalog.with_stack("vtrain-2022"), "b200")
    cal = hw.gpu.calibration
    cal = cal.model_copy(
        update={"host_issue_us_per_layer": cal.host_issue_us_per_layer * host_scale}
    )
    hw = dataclasses.replace(hw, gpu=hw.gpu.with_calibration(cal))
    ex = ExpertLayout(ep=2, dispatch_bytes=FP8_DISPATCH_BYTES)
    return evaluate(spec, hw, MOE_RING, 4096, None, Assumptions(dp_overlap=1.0), ex).step_time_s


def test_a_faster_host_never_slows_a_moe_step_with_cp(catalog):
    """The MoE stage's compute, not the dense stand-in's (whose host floor it was), sets the
    window that hides its ring: a host issuing kernels in half or a quarter the time leaves
    the step as it is (the MoE compute is above the floor). It was 0.39897 s, 0.40533 s at
    half the host time (the stand-in's window shrank below the ring's NIC time); 0.40219 s
    until ZeRO-3 gathered the experts over expert-DP (models.expert.zero3_moe_bytes)."""
    steps = [_moe_ring_step(catalog, x) for x in (1.0, 0.5, 0.25)]
    assert steps == pytest.approx([steps[0]] * 3, rel=1e-12)
    assert steps[0] == pytest.approx(1.18096, rel=1e-4)


@pytest.mark.parametrize("gpu,tp,cp", [("b200", 4, 4), ("h100-sxm", 2, 4)])
def test_a_moe_rings_window_is_its_layers_attention_share_of_its_compute(catalog, gpu, tp, cp):
    """Ring attention hides behind the attention share of the MoE stage's own compute: a
    Mixtral layer's forward FLOPs per token are its attention projections and router,
    2 of 8 experts and the 4 s x heads x head_dim core, so the core is 14.5% of them at
    8K (23.5% of the dense stand-in's, whose MLP is one expert). Across servers the window
    is cp_window_s (it had been the stand-in's share of the stand-in's compute, 13.8% of
    the MoE compute on B200); inside the domain the ring's seconds split into exposed and
    hidden at it (there the ring is shorter than either window: the split's formula)."""
    spec, seq = moe_zoo()["mixtral-8x7b"], 8192
    h, q, kv = spec.hidden, spec.q_width, spec.kv_heads * spec.head_dim
    attention = 2.0 * (2 * h * q + 2 * h * kv) + 2.0 * h * spec.experts
    routed = 2.0 * spec.experts_per_token * 3 * h * spec.expert_ffn
    core = 4.0 * seq * q
    share = core / (attention + routed + core)
    assert share == pytest.approx(0.14544, rel=1e-4)
    assert moe_attention_flop_share(spec, seq) == pytest.approx(share, rel=1e-12)
    hw = Hardware.from_catalog(catalog.with_stack("vtrain-2022"), gpu)
    lay = Layout(tp=tp, cp=cp, pp=1, dp=2, micro_batch=1, global_batch=2, recompute="full")
    c = moe_step_coefficients(spec, lay, ExpertLayout(ep=2), seq, hw.gpu, hw.network, Assumptions())
    window = share * c.compute_mb_s
    if cp_crosses_nics(lay, hw.gpu):
        assert c.cp_window_s == pytest.approx(window, rel=1e-12) and c.cp_nic_bytes > 0
    else:
        ring = c.cp_mb_s + c.cp_hidden_s
        assert ring == pytest.approx(cp_ring_bytes_per_microbatch(spec, lay, seq) / (
            scaleup.p2p_bw_gb_per_s(hw.gpu) * hw.gpu.calibration.scale_up_bus_efficiency * 1e9
        ), rel=1e-12)  # fmt: skip
        assert c.cp_hidden_s == pytest.approx(min(ring, window), rel=1e-12)


def test_fused_attention_shortens_a_moe_rings_window_by_its_share_of_the_saving(catalog):
    """--fused-attention (Hopper's kernels at 1.61 x the attention rate) shortens the MoE
    stage's compute, and the window hiding its ring by the attention share of that saving:
    the exposed ring grows by less than the compute falls, so the step is faster. Qwen3
    30B-A3B at 32K, TP 2 x CP 8 on one-NIC H100 servers. The window had been the dense
    stand-in's, which the option does not reach (the exposed ring stayed as it was)."""
    spec, seq = moe_zoo()["qwen3-30b-a3b"], 32768
    hw = Hardware.from_catalog(catalog, "h100-sxm", nics_per_node=1)
    lay = Layout(tp=2, cp=8, pp=1, dp=2, micro_batch=1, global_batch=8)
    experts = [ExpertLayout(ep=8, attention_kernel_speedup=x) for x in (1.0, 1.61)]
    assert experts[1].attention_kernel_speedup == HOPPER_FUSED_ATTENTION_SPEEDUP
    plain, fused = (evaluate(spec, hw, lay, seq, None, Assumptions(), ex) for ex in experts)
    saved = plain.breakdown.compute - fused.breakdown.compute
    exposed = fused.breakdown.cp_nic_comm - plain.breakdown.cp_nic_comm
    assert plain.breakdown.cp_nic_comm > 0 and saved > 0
    assert exposed == pytest.approx(moe_attention_flop_share(spec, seq) * saved, rel=1e-9)
    assert fused.step_time_s < plain.step_time_s
