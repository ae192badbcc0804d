"""models/scaleup.py: the scale-up domain's bandwidth by topology. A mesh gives a group one link per
peer, a switched fabric its whole bandwidth; the TP collectives and the TP bandwidth rule read
the group's links; a mesh entry needs its link bandwidth. From issue 15's checklist."""

from __future__ import annotations

import pytest

from models import Layout, comm, zoo
from models.layout import Network
from models.scaleup import attention_share, group_bw_gb_per_s, p2p_bw_gb_per_s, tp_rule
from models.step import tp_comm_per_microbatch_s


def _mesh(cat, name="mi300x", link=64.0):
    gpu = cat.gpu(name)
    return gpu.model_copy(
        update={"scale_up_topology": "mesh", "scale_up_link_gb_per_s_per_direction": link}
    )


# ------------------------------------------------------------------ scale-up topology
def test_mesh_group_gets_one_link_per_peer(cat):
    gpu = _mesh(cat)
    whole = gpu.scale_up_bw_gb_per_s_per_direction
    assert group_bw_gb_per_s(gpu, 2) == 64.0
    assert group_bw_gb_per_s(gpu, 4) == 3 * 64.0
    assert group_bw_gb_per_s(gpu, 8) == min(whole, 7 * 64.0)
    assert p2p_bw_gb_per_s(gpu) == 64.0
    switched = cat.gpu("h100-sxm")
    assert group_bw_gb_per_s(switched, 2) == switched.scale_up_bw_gb_per_s_per_direction
    assert p2p_bw_gb_per_s(switched) == switched.scale_up_bw_gb_per_s_per_direction


def test_tp_collectives_on_four_mesh_gpus_use_three_links(cat):
    """TP 4 on an MI300X-class mesh: each all-reduce runs over the 3 links to the peers."""
    gpu = _mesh(cat)
    spec = zoo()["llama2-70b"]
    layout = Layout(tp=4, pp=1, dp=1, micro_batch=1, global_batch=1, recompute="none")
    cal = gpu.calibration
    nbytes = 2.0 * spec.seq_len * spec.hidden
    per_call = comm.ring_allreduce_s(
        nbytes, 4, 3 * 64.0 * cal.scale_up_bus_efficiency, cal.collective_latency_us * 1e-6
    )
    expected = spec.layers * 4 * per_call * (1 - cal.tp_overlap_fraction)
    got = tp_comm_per_microbatch_s(spec, layout, spec.seq_len, gpu, Network("-", 8, 50.0))
    assert got == pytest.approx(expected, rel=1e-12)
    # the same group on a switched fabric of equal aggregate bandwidth is faster
    switched = gpu.model_copy(
        update={"scale_up_topology": "switched", "scale_up_link_gb_per_s_per_direction": None}
    )
    assert (
        tp_comm_per_microbatch_s(spec, layout, spec.seq_len, switched, Network("-", 8, 50.0))
        < expected
    )


def test_tp_bandwidth_rule_uses_the_groups_links(cat):
    gpu = _mesh(cat, "gaudi3", 75.0)
    limit2, bw2 = tp_rule(8192, gpu, 2, "bf16")[::4]
    limit8, bw8 = tp_rule(8192, gpu, 8, "bf16")[::4]
    assert bw2 == 75.0 and bw8 == min(gpu.scale_up_bw_gb_per_s_per_direction, 7 * 75.0)
    assert limit8 == pytest.approx(limit2 * bw8 / bw2)


def test_the_tp_rule_counts_the_attention_cores_work_and_fp8s_traffic(cat):
    """Seed E2's 3h/t counts 24 h^2 linear FLOPs per token and layer; the attention core
    adds its causal 2 s q with no more TP traffic, at the bf16 rate in FP8 too; FP8 moves 6
    bytes where bf16 moves 8 (Transformer Engine's FP8 all-gathers)."""
    from models import resolve_model

    l70, l7 = resolve_model("llama2-70b"), resolve_model("llama2-7b")
    assert attention_share(l70, 4096) == pytest.approx(4096 / (12 * 8192))
    assert attention_share(l7, 524288) == pytest.approx(524288 / (12 * 4096))
    # multi-head latent attention at its query-key and value widths (128 heads of 192 and
    # 128), not its 7,168-wide model; linear-attention layers have no s x s core
    ds = resolve_model("deepseek-v3")
    assert attention_share(ds, 4096) == pytest.approx(4096 * 128 * (192 + 128) / (24 * 7168**2))
    qn = resolve_model("qwen3-next-80b-a3b")  # 1 layer in 4 full attention
    full = 2 * 8192 * qn.q_width / (24 * qn.hidden**2)
    assert attention_share(qn, 8192) == pytest.approx(full / 4)
    gpu = cat.gpu("h100-sxm")
    seed = tp_rule(8192, gpu, 8, "bf16")
    assert seed.limit == seed.seed == pytest.approx(3 * 8192 * 450 / 989.0 * 1e-3, rel=1e-3)
    share = attention_share(l70, 4096)
    rule = tp_rule(8192, gpu, 8, "bf16", share)
    assert (rule.work, rule.traffic) == (pytest.approx(1 + share), 1.0)
    assert rule.limit == pytest.approx(seed.limit * (1 + share))  # E2's 11.18 -> 11.65
    # FP8: the seed's limit at the FP8 peak, the attention core at twice its share (bf16
    # rate), 4/3 the FLOPs per byte: Llama 3 70B at 8,192 tokens reaches TP 8 (5.59 alone)
    fp8 = tp_rule(8192, gpu, 8, "fp8", attention_share(resolve_model("llama3-70b"), 8192))
    peaks = gpu.dense_fp8_tflops / gpu.dense_bf16_tflops
    assert fp8.seed == pytest.approx(3 * 8192 * 450e9 / (gpu.dense_fp8_tflops * 1e12))
    assert fp8.work == pytest.approx(1 + peaks * 8192 / (12 * 8192))
    assert fp8.limit == pytest.approx(fp8.seed * fp8.work * 4 / 3) and 8 < fp8.limit < 9
    # Llama 2 7B in FP8 at 512K tokens (NeMo ran TP 8): 2.79 alone
    long = tp_rule(4096, gpu, 8, "fp8", attention_share(l7, 524288))
    # Gaudi 3 runs no Transformer Engine: its FP8 collectives keep the seed's bytes
    assert tp_rule(8192, cat.gpu("gaudi3"), 8, "fp8").traffic == 1.0
    assert long.seed == pytest.approx(2.79, abs=0.01) and long.limit > 8


def test_mesh_entry_needs_its_link_bandwidth(cat):
    gpu = cat.gpu("mi300x")
    data = gpu.model_dump(exclude={"calibration"})
    data.update(scale_up_topology="mesh", scale_up_link_gb_per_s_per_direction=None)
    with pytest.raises(ValueError, match="per-peer link"):
        type(gpu).model_validate(data)
    data.update(scale_up_topology="switched", scale_up_link_gb_per_s_per_direction=64.0)
    with pytest.raises(ValueError, match="only a mesh"):
        type(gpu).model_validate(data)
