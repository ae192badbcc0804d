"""Time of one optimizer step (one global batch) for a layout on a GPU type.

step = m * (compute + tp + cp)                     micro-batches through the slowest stage
     + (p-1)/v * (compute + tp + cp)               pipeline bubble, (p-1)/(v*m) of the work
                                                   (Narayanan et al. SC'21, eq. 1 and 2)
     + pp point-to-point sends on the critical path: 2 (m + p - 1) sends
     + exposed data-parallel gradient reduction      (hierarchical ring, models.comm)
     + optimizer step                              (memory-bound Adam, HBM traffic / bandwidth)
The slowest stage is the last one: it holds L/p layers and the logits.
Compute time = FLOPs / (dense peak x matmul efficiency); the efficiency is a
calibrated catalog constant (catalog.Calibration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from catalog.specs import GPUSpec
from models import comm, flops
from models.layout import Assumptions, Layout, Network
from models.memory import activation_bytes_per_layer, stage_params
from models.spec import TransformerSpec


@dataclass(frozen=True)
class StepBreakdown:
    """Exposed seconds of each part of one step."""

    compute: float
    bubble: float
    tp_comm: float
    cp_comm: float
    pp_comm: float
    dp_comm: float
    optimizer: float

    @property
    def total(self) -> float:
        return (
            self.compute + self.bubble + self.tp_comm + self.cp_comm + self.pp_comm + self.dp_comm + self.optimizer
        )

    def as_dict(self) -> dict[str, float]:
        return {
            "compute": self.compute,
            "bubble": self.bubble,
            "tp_comm": self.tp_comm,
            "cp_comm": self.cp_comm,
            "pp_comm": self.pp_comm,
            "dp_comm": self.dp_comm,
            "optimizer": self.optimizer,
        }


def stage_flops_per_microbatch(spec: TransformerSpec, layout: Layout, seq_len: int) -> float:
    """FLOPs one GPU of the last (slowest) stage does per micro-batch, recomputation included."""
    tokens = layout.micro_batch * seq_len
    layers = math.ceil(spec.layers / layout.pp)
    per_layer = 3.0 * flops.layer_forward_flops_per_token(spec, seq_len)
    recompute = flops.recompute_flops_per_token(spec, seq_len, layout.recompute) / spec.layers
    logits = 3.0 * flops.logit_forward_flops_per_token(spec)
    return tokens * (layers * (per_layer + recompute) + logits) / (layout.tp * layout.cp)


def matmul_efficiency(gpu: GPUSpec, hidden: int, tp: int) -> float:
    """Achieved fraction of peak for GEMMs of width h/t: thin shards run below peak
    (a saturating curve, eff_max * w / (w + w_half); calibrated constants)."""
    cal = gpu.calibration
    width = hidden / tp
    return cal.matmul_efficiency * width / (width + cal.matmul_half_width)


def forward_passes(recompute: str) -> float:
    """Forward-equivalents of work per layer: forward 1 + backward 2, + 1 when fully recomputed."""
    return 4.0 if recompute == "full" else 3.0


def memory_bound_per_microbatch_s(spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec) -> float:
    """Element-wise kernels (norms, softmax, dropout, activation functions) and launch overhead.

    Their HBM traffic is taken as ``elementwise_passes`` times the activation
    bytes a layer produces (Korthikanti's no-recompute formula, which counts
    each element-wise output once), per forward-equivalent, at the GPU's memory
    bandwidth; plus a fixed per-layer overhead. Both constants are calibrated.
    """
    cal = gpu.calibration
    layers = math.ceil(spec.layers / layout.pp)
    produced = activation_bytes_per_layer(
        spec, seq_len, layout.micro_batch, layout.tp, layout.sp, "none", layout.cp
    )
    passes = forward_passes(layout.recompute)
    traffic_s = cal.elementwise_passes * produced / (gpu.memory_bw_tb_per_s * 1e12)
    return layers * passes * (traffic_s + cal.kernel_overhead_us_per_layer * 1e-6)


def tp_comm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, network: Network
) -> float:
    """Four all-reduces (or reduce-scatter + all-gather pairs with SP) of s*b*h bf16 per layer:
    two forward, two backward; full recomputation repeats the forward two
    (Shoeybi et al. 2019, Megatron-LM, section 3; Korthikanti et al. 2022, section 4.2.2)."""
    if layout.tp == 1:
        return 0.0
    cal = gpu.calibration
    nbytes = 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.hidden
    intra = gpu.scale_up_bw_gb_per_s_per_direction * cal.scale_up_bus_efficiency
    lat = cal.collective_latency_us * 1e-6
    domain = gpu.server.scale_up_domain_gpus
    if layout.tp <= domain:
        per_call = comm.ring_allreduce_s(nbytes, layout.tp, intra, lat)
    else:  # TP leaves the scale-up domain: hierarchical over the NICs
        per_call = comm.hierarchical_allreduce_s(
            nbytes, layout.tp, domain, intra, _inter_node_bw_per_gpu(gpu, network), lat
        )
    calls = 4 + (2 if layout.recompute == "full" else 0)
    return math.ceil(spec.layers / layout.pp) * calls * per_call


def cp_comm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, compute_mb_s: float
) -> float:
    """Ring attention: each CP rank passes its K and V chunk (cp-1) times forward and
    K, V, dK, dV backward (Liu et al. 2023, Ring Attention; Megatron-LM context
    parallelism). Overlapped with the attention compute; only the excess is exposed."""
    if layout.cp == 1:
        return 0.0
    cal = gpu.calibration
    chunk = 2.0 * 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.kv * spec.head_dim / layout.tp
    per_layer = 3.0 * (layout.cp - 1) * chunk / (gpu.scale_up_bw_gb_per_s_per_direction * cal.scale_up_bus_efficiency * comm.GB)
    layers = math.ceil(spec.layers / layout.pp)
    attn_share = flops.attention_forward_flops_per_token(spec, seq_len) / flops.layer_forward_flops_per_token(spec, seq_len)
    return max(0.0, layers * per_layer - attn_share * compute_mb_s)


def _inter_node_bw_per_gpu(gpu: GPUSpec, network: Network) -> float:
    """A GPU's share of its server's NIC bandwidth, GB/s per direction, at bus efficiency."""
    gpn = gpu.server.gpus_per_server
    return network.node_bw_gb_per_s / gpn * gpu.calibration.network_bus_efficiency


def pp_comm_s(spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, network: Network) -> float:
    """Activation sends between stages: s*b*h bf16 (split over TP, Megatron's scatter-gather),
    2 (m + p - 1) on the critical path; between servers unless a whole pipeline fits in one."""
    if layout.pp == 1:
        return 0.0
    nbytes = 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.hidden / layout.tp
    stride = layout.tp * layout.cp * layout.dp
    if stride < gpu.server.gpus_per_server:
        bw = gpu.scale_up_bw_gb_per_s_per_direction * gpu.calibration.scale_up_bus_efficiency
    else:
        bw = _inter_node_bw_per_gpu(gpu, network)
    send = comm.p2p_s(nbytes, bw, gpu.calibration.collective_latency_us * 1e-6)
    return 2.0 * (layout.grad_accum + layout.pp - 1) * send


def dp_comm_s(spec: TransformerSpec, layout: Layout, gpu: GPUSpec, network: Network, a: Assumptions) -> float:
    """Gradient reduction over the DP x CP group (Megatron reduces over both), hierarchical.

    ZeRO 0: all-reduce of the gradients; ZeRO 1/2: reduce-scatter of gradients
    plus all-gather of updated bf16 weights; ZeRO 3 adds a weight all-gather in
    forward and backward of every micro-batch (Rajbhandari et al. 2020, sec. 7).
    """
    group = layout.dp * layout.cp
    if group == 1:
        return 0.0
    gpn = gpu.server.gpus_per_server
    params = stage_params(spec, layout, "first" if layout.pp == 1 else "last")
    per_node = max(1, gpn // layout.tp) if layout.tp < gpn else 1
    cal = gpu.calibration
    intra = gpu.scale_up_bw_gb_per_s_per_direction * cal.scale_up_bus_efficiency
    inter = _inter_node_bw_per_gpu(gpu, network)
    lat = cal.collective_latency_us * 1e-6
    if layout.zero == 0:
        nbytes = params * a.grad_bytes
    else:
        nbytes = params * (a.grad_bytes + a.weight_bytes) / 2.0
    t = comm.hierarchical_allreduce_s(nbytes, group, per_node, intra, inter, lat)
    if layout.zero >= 3:
        gather = comm.hierarchical_allreduce_s(params * a.weight_bytes, group, per_node, intra, inter, lat) / 2.0
        t += 2.0 * layout.grad_accum * gather
    return t


def optimizer_s(spec: TransformerSpec, layout: Layout, gpu: GPUSpec, a: Assumptions) -> float:
    """Adam is memory-bound: HBM bytes per (sharded) parameter / memory bandwidth."""
    params = stage_params(spec, layout, "first")
    if layout.zero >= 1:
        params /= layout.dp * layout.cp
    return params * a.optimizer_traffic_bytes / (gpu.memory_bw_tb_per_s * 1e12)


def step_time(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    gpu: GPUSpec,
    network: Network,
    a: Assumptions,
) -> StepBreakdown:
    """Exposed time of each part of one optimizer step (see module docstring)."""
    peak = gpu.peak_tflops(layout.precision)
    if peak is None:
        raise ValueError(f"{gpu.name} has no {layout.precision} peak")
    m = layout.grad_accum
    eff = matmul_efficiency(gpu, spec.hidden, layout.tp)
    gemm_mb = stage_flops_per_microbatch(spec, layout, seq_len) / (peak * 1e12 * eff)
    compute_mb = gemm_mb + memory_bound_per_microbatch_s(spec, layout, seq_len, gpu)
    tp_mb = tp_comm_per_microbatch_s(spec, layout, seq_len, gpu, network)
    cp_mb = cp_comm_per_microbatch_s(spec, layout, seq_len, gpu, compute_mb)
    stage_mb = compute_mb + tp_mb + cp_mb
    bubble = (layout.pp - 1) / layout.vp * stage_mb
    dp = dp_comm_s(spec, layout, gpu, network, a)
    backward_last_mb = compute_mb * 2.0 / forward_passes(layout.recompute)
    dp_exposed = max(0.0, dp - a.dp_overlap * backward_last_mb)
    return StepBreakdown(
        compute=m * compute_mb,
        bubble=bubble,
        tp_comm=m * tp_mb,
        cp_comm=m * cp_mb,
        pp_comm=pp_comm_s(spec, layout, seq_len, gpu, network),
        dp_comm=dp_exposed,
        optimizer=optimizer_s(spec, layout, gpu, a),
    )
