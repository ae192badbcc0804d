"""Ring attention across servers and the step's reduction share one window: the compute of
the last micro-batch (models.step.cp_ring_hidden_s). Counted in both, a faster GPU, whose
windows are shorter, predicted a slower step."""

from __future__ import annotations

from itertools import pairwise

import pytest

from models import comm
from models.evaluate import Hardware, evaluate
from models.layout import Assumptions, Layout
from models.step import group_reduce_s, step_coefficients


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
