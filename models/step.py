"""Time of one optimizer step (one global batch) for a layout on a GPU type.

The step time is written in a form whose dependence on the data-parallel
degree d, the micro-batches per step m and the server's NIC bandwidth is
explicit, so that the CP-SAT model can encode it exactly (solvers/cpsat/model.py).
With g = d * cp (the gradient-reduction group) and k the group's ranks per
scale-up domain (domain GPUs / tp: one 8-GPU server, or a 72-GPU NVL72 rack):

step = m * stage                                micro-batches through the slowest stage
     + (p-1)/v * stage                          pipeline bubble, (p-1)/(v*m) of the work
                                                (Narayanan et al. SC'21, eqs. 1-2)
     + 2 (v*m + p - 1) * send                   pipeline sends on the critical path
                                                (v chunks multiply the sends)
     + exposed gradient reduction               hierarchical ring (models.comm):
         g <  k: 2 B (1 - 1/g) / bw_up          all inside one scale-up domain
         g >= k: 2 B (k-1)/k / bw_up            inside the domain, then across domains
               + 2 (B/k) (1 - k/g) / (NIC share per GPU)
     + optimizer / g                            memory-bound Adam on the ZeRO-1 shard
     + m * cp_nic                               ring attention across servers (CP beyond the
                                                scale-up domain): max(0, bytes / NIC share
                                                - attention window) each micro-batch, and
                                                its (p-1)/v share of the bubble

where stage = compute + TP + CP time of one micro-batch on the busiest pipeline rank
(its layers as Megatron-LM splits them, plus the logits on the last rank:
``slowest_stage``), B the gradient bytes per GPU of the rank holding the most, and sends cross
the NICs (NIC share) unless the whole job fits in one scale-up domain. Under ZeRO-3
the reduction adds m micro-batches' parameter all-gathers (a MoE model's routed experts
over their expert-DP group) less what each hides behind its own compute; with the
stack's per-micro-batch gradient reduce-scatter on
(zero3_microbatch_grad_reduce_bytes), each micro-batch reduce-scatters its gradients too,
sharing the same window, and the backward's last reduce-scatter is exposed (without it,
the gradients accumulate unsharded and are reduced with the step, in the stack's reduce
dtype; a stack keeping a PP stage's parameters unsharded across the micro-batches gathers
them once a step instead: zero3_gathers_once, models.memory.zero3_kept_bytes); the last
micro-batch's compute is one window for its own collectives and the step's reduction,
never two (zero3_exposed_s), and what each window hides still slows its compute by
the collectives' HBM traffic (zero3_contention_s). An all-to-all overlap (models/expert.py)
hides at most the compute of the chunks it pairs with (ep_overlap_s), and the seconds it
takes of them hide nothing else. bw_up is the
bandwidth of a k-rank group on the platform's topology (models/scaleup.py: a mesh
gives k - 1 links; a group smaller than k, only on clusters of one domain, is
charged at the k-rank rate).
Compute time = FLOPs / (dense peak x calibrated GEMM efficiency) plus
memory-bound element-wise work (catalog.Calibration), and the stage time is at
least the host's kernel-issue time (launch-bound small models): compute is
raised to max(compute, issue - TP) so that compute + TP >= issue.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, NamedTuple, TypedDict

import numpy as np

from catalog.specs import GPUSpec
from models import comm, flops, scaleup
from models.layout import Assumptions, Layout, Network
from models.memory import (
    activation_bytes_per_layer,
    stage_params,
    zero3_microbatch_reduce_bytes,
)
from models.pipeline import StageLoad, bubble_fraction, busiest_stage, stage_layers
from models.transformer import TransformerSpec


@dataclass(frozen=True)
class StepBreakdown:
    """Exposed seconds of each part of one step (floats; numpy arrays when vectorised)."""

    compute: Any
    bubble: Any
    tp_comm: Any
    cp_comm: Any
    pp_comm: Any
    dp_comm: Any
    optimizer: Any
    ep_comm: Any = 0.0  # expert-parallel token dispatch and combine (models/expert.py)
    cp_nic_comm: Any = 0.0  # ring attention's exposed KV exchange over the NICs (CP across servers)

    @property
    def total(self) -> float:
        return (
            self.compute
            + self.bubble
            + self.tp_comm
            + self.cp_comm
            + self.cp_nic_comm
            + self.pp_comm
            + self.dp_comm
            + self.optimizer
            + self.ep_comm
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
            "ep_comm": self.ep_comm,
            "cp_nic_comm": self.cp_nic_comm,
        }


def matmul_efficiency(gpu: GPUSpec, hidden: int, tp: int) -> float:
    """Achieved fraction of peak for GEMMs of width h/t: thin shards run below peak
    (a saturating curve, eff_max * w / (w + w_half); calibrated constants)."""
    cal = gpu.calibration
    width = hidden / tp
    return cal.matmul_efficiency * width / (width + cal.matmul_half_width)


def forward_passes(recompute: str) -> float:
    """Forward-equivalents of work per layer: forward 1 + backward 2, + 1 when fully recomputed."""
    return 4.0 if recompute == "full" else 3.0


@dataclass(frozen=True)
class StageWork:
    """FLOPs one GPU of the slowest stage does per micro-batch, recomputation included,
    split by the kind of kernel that does them (model FLOPs: the full score square)."""

    linear: float  # the layers' weight GEMMs (QKV, projection, MLP)
    attention: float  # attention scores and values, Q K^T and A V
    logits: float  # the output layer

    @property
    def total(self) -> float:
        return self.linear + self.attention + self.logits


@lru_cache(maxsize=1 << 16)
def slowest_stage(spec: TransformerSpec, layout: Layout, seq_len: int) -> StageLoad:
    """The pipeline rank with the most FLOPs per micro-batch (models.pipeline.busiest_stage):
    its transformer layers, plus the logits on the last rank."""
    per_layer = 3.0 * flops.layer_forward_flops_per_token(spec, seq_len)
    per_layer += flops.recompute_flops_per_token(spec, seq_len, layout.recompute) / spec.layers
    logits = 3.0 * flops.logit_forward_flops_per_token(spec)
    return busiest_stage(spec.layers, layout, logits / per_layer)


@lru_cache(maxsize=1 << 16)
def stage_work_per_microbatch(
    spec: TransformerSpec, layout: Layout, seq_len: int, flash_attention: bool = False
) -> StageWork:
    """Work of one GPU of the slowest pipeline rank per micro-batch (flops.py formulas).

    The layers' GEMMs run 3 forward-equivalents (forward, two backward GEMMs), 4 with
    full recomputation. The attention scores and values also run 3, plus one
    recomputed forward with selective or full recomputation; FlashAttention
    recomputes the scores inside its backward instead (Dao et al. 2022, section
    3.1: 5 matmuls backward for 2 forward), 3.5 forward-equivalents, +1 when the
    whole layer is recomputed. The logits count on the last rank only.
    """
    tokens = layout.micro_batch * seq_len / (layout.tp * layout.cp)
    stage = slowest_stage(spec, layout, seq_len)
    linear_fwd = 2.0 * spec.layer_matmul_params()
    attention_fwd = flops.attention_forward_flops_per_token(spec, seq_len)
    forwards = forward_passes(layout.recompute)
    if flash_attention:
        attention_passes = 3.5 + (1.0 if layout.recompute == "full" else 0.0)
    else:
        attention_passes = 4.0 if layout.recompute in ("full", "selective") else 3.0
    logits = 3.0 * flops.logit_forward_flops_per_token(spec) if stage.output else 0.0
    return StageWork(
        linear=tokens * stage.layers * linear_fwd * forwards,
        attention=tokens * stage.layers * attention_fwd * attention_passes,
        logits=tokens * logits,
    )


def stage_flops_per_microbatch(spec: TransformerSpec, layout: Layout, seq_len: int) -> float:
    """FLOPs one GPU of the slowest stage does per micro-batch, recomputation included."""
    return stage_work_per_microbatch(spec, layout, seq_len).total


def gemm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec
) -> float:
    """Tensor-core time of one micro-batch on the slowest stage.

    The 2022 profile runs every FLOP at the layout precision's peak times the
    width-dependent GEMM efficiency. A modern profile splits the work: the
    linear layers at the precision's peak (FP8 GEMMs at ``fp8_matmul_efficiency``
    of the FP8 peak: Transformer Engine, Micikevicius et al. 2022 "FP8 formats for
    deep learning"), the output layer in BF16, and the attention scores and
    values in BF16 at ``attention_efficiency`` (FlashAttention-2/3, Dao 2023;
    Shah et al. 2024), of which causal masking skips half.
    """
    cal = gpu.calibration
    work = stage_work_per_microbatch(spec, layout, seq_len, cal.flash_attention)
    return work_gemm_s(work, spec.hidden, layout, gpu)


def work_gemm_s(work: StageWork, hidden: int, layout: Layout, gpu: GPUSpec) -> float:
    """Tensor-core seconds of ``work`` at the layout's precision (gemm_per_microbatch_s's
    rules; models/expert.py prices a MoE stage's work with it too)."""
    return work_at_rates_s(work, gemm_rates(gpu, hidden, layout.precision, layout.tp))


class GemmRates(NamedTuple):
    """The FLOP/s that ``work_gemm_s`` divides each kind of work by on one GPU at one
    precision and TP (gemm_per_microbatch_s's rules), and the share of the attention
    FLOPs that run (causal masking skips half with a fitted attention rate)."""

    linear_flop_s: float
    logits_flop_s: float
    attention_share: float
    attention_flop_s: float


def gemm_rates(gpu: GPUSpec, hidden: int, precision: str, tp: int) -> GemmRates:
    """``work_gemm_s``'s rates (gemm_per_microbatch_s's docstring): they depend on the GPU,
    the precision and the GEMM width h / TP only, so a caller pricing many shapes on one
    GPU computes them once per (precision, TP)."""
    peak = gpu.peak_tflops(precision)
    if peak is None:
        raise ValueError(f"{gpu.name} has no {precision} peak")
    cal = gpu.calibration
    eff = matmul_efficiency(gpu, hidden, tp)
    bf16 = gpu.dense_bf16_tflops * 1e12
    if precision == "fp8" and cal.fp8_matmul_efficiency is not None:
        linear, logits = peak * 1e12 * cal.fp8_matmul_efficiency, bf16 * eff
    else:
        linear = logits = peak * 1e12 * eff
    if cal.attention_efficiency is None:
        return GemmRates(linear, logits, 1.0, peak * 1e12 * eff)
    share = 0.5 if cal.causal_attention_skip else 1.0
    return GemmRates(linear, logits, share, bf16 * cal.attention_efficiency)


def work_at_rates_s(work: StageWork, rates: GemmRates) -> float:
    """``work_gemm_s`` at rates already computed (``gemm_rates``): each kind of work over
    its rate, the attention's share of it (x 1.0 where all of it runs: exact)."""
    linear_s = work.linear / rates.linear_flop_s
    logits_s = work.logits / rates.logits_flop_s
    attention_s = rates.attention_share * work.attention / rates.attention_flop_s
    return linear_s + attention_s + logits_s


def memory_bound_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec
) -> float:
    """Element-wise kernels (norms, softmax, dropout, activation functions) and launch overhead.

    Their HBM traffic is taken as ``elementwise_passes`` times the activation
    bytes a layer produces (Korthikanti's no-recompute formula, which counts
    each element-wise output once), per forward-equivalent, at the GPU's memory
    bandwidth; plus a fixed per-layer overhead. Both constants are calibrated.
    """
    cal = gpu.calibration
    layers = slowest_stage(spec, layout, seq_len).layers
    # FlashAttention keeps the score matrix on chip: no softmax/dropout pass over it in HBM
    counted = "selective" if cal.flash_attention else "none"
    produced = activation_bytes_per_layer(
        spec, seq_len, layout.micro_batch, layout.tp, layout.sp, counted, layout.cp
    )
    passes = forward_passes(layout.recompute)
    hbm_passes = cal.elementwise_passes + (cal.fp8_cast_passes if layout.precision == "fp8" else 0)
    traffic_s = hbm_passes * produced / (gpu.memory_bw_tb_per_s * 1e12)
    return layers * passes * (traffic_s + cal.kernel_overhead_us_per_layer * 1e-6)


def host_issue_per_microbatch_s(spec: TransformerSpec, layout: Layout, gpu: GPUSpec) -> float:
    """Host time to issue one micro-batch's kernels on a stage (launch-bound floor), on the
    rank with the most layers."""
    layers = max(stage_layers(spec.layers, layout))
    passes = forward_passes(layout.recompute)
    return layers * passes * gpu.calibration.host_issue_us_per_layer * 1e-6


def _scale_up_bw(gpu: GPUSpec, ranks: int) -> float:
    """Effective bandwidth of a collective over ``ranks`` GPUs of one domain (models/scaleup)."""
    return scaleup.group_bw_gb_per_s(gpu, ranks) * gpu.calibration.scale_up_bus_efficiency


def _p2p_bw(gpu: GPUSpec) -> float:
    """Effective bandwidth of one send to a peer in the domain (models/scaleup)."""
    return scaleup.p2p_bw_gb_per_s(gpu) * gpu.calibration.scale_up_bus_efficiency


def nic_share_gb_per_s(gpu: GPUSpec, node_bw_gb_per_s: float) -> float:
    """A GPU's share of its server's NIC bandwidth, GB/s per direction, at bus efficiency."""
    return node_bw_gb_per_s / gpu.server.gpus_per_server * gpu.calibration.network_bus_efficiency


def tp_comm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, network: Network
) -> float:
    """Four all-reduces (or reduce-scatter + all-gather pairs with SP) of s*b*h bf16 per layer:
    two forward, two backward; full recomputation repeats the forward two
    (Shoeybi et al. 2019, Megatron-LM, section 3; Korthikanti et al. 2022, section 4.2.2).
    TP beyond the scale-up domain runs hierarchically over the NICs."""
    if layout.tp == 1:
        return 0.0
    cal = gpu.calibration
    nbytes = 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.hidden
    lat = cal.collective_latency_us * 1e-6
    domain = scaleup.domain_gpus(gpu)
    if layout.tp <= domain:
        per_call = comm.ring_allreduce_s(nbytes, layout.tp, _scale_up_bw(gpu, layout.tp), lat)
    else:
        per_call = comm.hierarchical_allreduce_s(
            nbytes,
            layout.tp,
            domain,
            _scale_up_bw(gpu, domain),
            nic_share_gb_per_s(gpu, network.node_bw_gb_per_s),
            lat,
        )
    calls = 4 + (2 if layout.recompute == "full" else 0)
    exposed = 1.0 - cal.tp_overlap_fraction
    return slowest_stage(spec, layout, seq_len).layers * calls * per_call * exposed


def cp_crosses_nics(layout: Layout, gpu: GPUSpec) -> bool:
    """Whether the context-parallel ring leaves the scale-up domain: its cp ranks sit tp
    apart (Megatron-Core's rank order: TP innermost, then CP), so TP x CP GPUs beyond
    the domain put ring hops on the NICs (Llama 3 ran CP 16 across servers, TP 8 inside:
    Dubey et al. 2024, "The Llama 3 Herd of Models", section 3.3.2 and table 4)."""
    return layout.cp > 1 and layout.tp * layout.cp > scaleup.domain_gpus(gpu)


def cp_ring_bytes_per_microbatch(spec: TransformerSpec, layout: Layout, seq_len: int) -> float:
    """Bytes each CP rank sends per micro-batch on its slowest stage: its K and V chunk
    (bf16, this TP rank's KV heads, spec.kv_pass_width: MLA's up-projected heads) passed
    (cp-1) times forward, and K, V plus dK, dV backward, 3 (cp-1) chunks a layer (Liu et
    al. 2023, Ring Attention; Megatron-Core context parallelism, cp_comm_type p2p).
    Llama 3's all-gather CP moves the same (cp-1)/cp of the sequence's K and V per rank
    (Dubey et al. 2024, section 3.3.2)."""
    if layout.cp == 1:
        return 0.0
    chunk = 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.kv_pass_width / layout.tp
    layers = slowest_stage(spec, layout, seq_len).layers
    return layers * 3.0 * (layout.cp - 1) * chunk


def cp_window_per_microbatch_s(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    compute_mb_s: float,
    attention_share: float | None = None,
) -> float:
    """The attention compute that hides ring attention's sends: each step's send of the
    next KV chunk overlaps the current chunk's attention (Megatron-Core's
    attn-with-cp double buffering; Liu et al. 2023, section 3), the attention share of
    the stage's compute: by default a dense layer's attention FLOPs over its FLOPs,
    ``attention_share`` where the layers are others (a MoE model's:
    models.expert.moe_attention_flop_share). A share of FLOPs, fixed whatever the GPU:
    a faster kernel shortens the window only with the compute, by the share of what it
    saves, so the compute plus the exposed ring never rises when the compute falls."""
    if attention_share is None:
        attention_share = flops.attention_forward_flops_per_token(
            spec, seq_len
        ) / flops.layer_forward_flops_per_token(spec, seq_len)
    return attention_share * compute_mb_s


def cp_in_domain_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, window_s: float
) -> tuple[float, float]:
    """(exposed, hidden) seconds of ring attention inside the scale-up domain, one
    micro-batch: the ring's 3 (cp-1) chunks a layer (cp_ring_bytes_per_microbatch) at the
    peer link's bandwidth, overlapped with the attention compute (its window ``window_s``,
    cp_window_per_microbatch_s). exposed: the excess, max(0, ring - window); hidden: the
    window's part the ring takes up, min(ring, window), which the step's other windows
    lose (cp_ring_hidden_s). Both 0 without CP, and when the ring crosses servers: it is
    charged over the NICs instead (cp_nic_mb_s: the NIC hop paces every ring step)."""
    if layout.cp == 1 or cp_crosses_nics(layout, gpu):
        return 0.0, 0.0
    total = cp_ring_bytes_per_microbatch(spec, layout, seq_len) / (_p2p_bw(gpu) * comm.GB)
    return max(0.0, total - window_s), min(total, window_s)


class CpCoefficients(TypedDict):
    """StepCoefficients' ring-attention fields (cp_coefficients)."""

    cp_mb_s: float
    cp_hidden_s: float
    cp_nic_bytes: float
    cp_window_s: float


def cp_coefficients(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, window_s: float
) -> CpCoefficients:
    """StepCoefficients' ring-attention fields of a stage whose attention hides the ring
    for ``window_s`` a micro-batch (cp_window_per_microbatch_s of its own compute: the
    dense stage's in step_coefficients, a MoE stage's in
    models.expert.moe_step_coefficients): inside the scale-up domain the exposed and hidden
    seconds (cp_in_domain_s), across servers the NIC bytes and the window (cp_nic_mb_s)."""
    crosses = cp_crosses_nics(layout, gpu)
    exposed, hidden = cp_in_domain_s(spec, layout, seq_len, gpu, window_s)
    return CpCoefficients(
        cp_mb_s=exposed,
        cp_hidden_s=hidden,
        cp_nic_bytes=cp_ring_bytes_per_microbatch(spec, layout, seq_len) if crosses else 0.0,
        cp_window_s=window_s if crosses else 0.0,
    )


@dataclass(frozen=True)
class StepCoefficients:
    """Everything about a step that depends on the shape only (seconds, bytes, GB/s)."""

    compute_mb_s: float  # GEMMs + memory-bound work of one micro-batch, slowest stage
    gemm_mb_s: float  # the GEMM part of compute_mb_s (at most compute_mb_s)
    tp_mb_s: float
    cp_mb_s: float
    pp: int
    vp: int
    cp: int
    replica_gpus: int  # tp * cp * pp: GPUs of one data-parallel replica
    pp_send_bytes: float  # one activation send between stages
    pp_send_intra_s: float  # one send over the scale-up link, latency included
    pp_latency_s: float  # latency of one send over the NICs
    dp_bytes: float  # gradient bytes per GPU reduced each step (all-reduce equivalent)
    dp_ranks_per_node: int  # k: reduction-group ranks per scale-up domain (models/scaleup)
    scale_up_bw_gb_per_s: float  # effective, of a reduction over k ranks in one domain
    gpus_per_node: int  # GPUs sharing a server's NICs
    domain_gpus: int  # GPUs of one scale-up domain: their traffic stays off the NICs
    network_efficiency: float
    optimizer_s: float  # Adam step with no sharding; divided by g under ZeRO >= 1
    zero: int
    zero3_gather_bytes: float  # weight bytes all-gathered per micro-batch under ZeRO-3
    backward_mb_s: float  # backward share of one micro-batch (overlap window)
    grad_overlap_s: float = 0.0  # the stack's window hiding the distributed optimizer's traffic
    # ZeRO-3 / FSDP: the part of each micro-batch's compute that hides its parameter
    # all-gathers (prefetch: the next layer's gather runs under this layer's compute)
    gather_overlap_s: float = 0.0
    # ZeRO-3 / FSDP gradient reduce-scatter after every micro-batch's backward, as all-reduce
    # equivalent bytes (a reduce-scatter moves half an all-reduce's traffic): of all the
    # rank's parameters, and of the backward's last group (the root module's embedding,
    # output and norm and the first layer), which no later backward hides
    zero3_grad_rs_bytes: float = 0.0
    zero3_grad_rs_tail_bytes: float = 0.0
    # ZeRO-3 / FSDP parameters kept unsharded across the step's micro-batches
    # (zero3_gathers_once): one all-gather a step (all-reduce equivalent, half of
    # zero3_gather_bytes' two), in the first micro-batch, instead of zero3_gather_bytes
    zero3_step_gather_bytes: float = 0.0
    # seconds of HBM time per byte a GPU sends in the ZeRO-3 collectives its compute hides
    # (the profile's zero3_overlap_hbm_passes / HBM bandwidth; zero3_contention_s)
    zero3_contention_s_per_byte: float = 0.0
    # mixture-of-experts (models/expert.py; 0 for a dense model). Exposed token dispatch and
    # combine of one micro-batch: ep_mb_s + max(ep_up_mb_s, ep_nic_bytes / NIC share)
    # + ep_nic_extra_bytes / NIC share (the NIC parts only when the EP group leaves the
    # scale-up domain: they depend on the NICs the solvers choose)
    ep_mb_s: float = 0.0
    ep_up_mb_s: float = 0.0
    ep_nic_bytes: float = 0.0
    ep_nic_extra_bytes: float = 0.0
    # the expert gradients' reduction over expert-DP = (d cp) x num / den ranks, k_e per
    # scale-up domain at its bandwidth (models.expert.expert_dp_reduce_s)
    expert_dp_bytes: float = 0.0
    expert_dp_num: int = 1
    expert_dp_den: int = 1
    expert_ranks_per_node: int = 1
    expert_scale_up_bw_gb_per_s: float = 1.0
    # the all-to-alls an overlap pairs with compute (--moe-overlap; models.expert): their
    # seconds per micro-batch as the exposed ones' terms, ep_hidden_mb_s + max(
    # ep_hidden_up_mb_s, ep_hidden_nic_bytes / share) + ep_hidden_nic_extra_bytes / share,
    # at most the compute of the chunks they overlap, ep_window_s = ep_paired x the
    # micro-batch's compute (ep_overlap_s: the rest is exposed); ep_window_last: the last
    # micro-batch's compute is one of those windows (DualPipe), so the step's reduction
    # window loses what they take of it
    ep_hidden_mb_s: float = 0.0
    ep_hidden_up_mb_s: float = 0.0
    ep_hidden_nic_bytes: float = 0.0
    ep_hidden_nic_extra_bytes: float = 0.0
    ep_window_s: float = 0.0
    ep_paired: float = 0.0
    ep_window_last: bool = False
    # ZeRO-3 / FSDP of the routed experts, over that expert-DP group: each micro-batch's
    # expert-weight all-gathers (forward and backward) and, when the stack reduces every
    # micro-batch, its expert-gradient reduce-scatter (all-reduce equivalent bytes), and
    # the backward's last group's share of that reduce-scatter (models.expert.zero3_moe_bytes)
    expert_zero3_bytes: float = 0.0
    expert_zero3_tail_bytes: float = 0.0
    expert_zero3_step_gather_bytes: float = 0.0  # as zero3_step_gather_bytes
    # the pipeline schedule's bubble over 1F1B's (p-1)/v stage times: 1.0, or DualPipe's
    # (models.expert.dualpipe_bubble_scale; a MoE plan option, never chosen by the solvers)
    bubble_scale: float = 1.0
    # ring attention across servers (cp_crosses_nics): the bytes each GPU sends over the
    # NICs per micro-batch and the attention compute that hides them (cp_nic_mb_s)
    cp_nic_bytes: float = 0.0
    cp_window_s: float = 0.0
    # the in-domain ring's share of a micro-batch's attention compute (cp_in_domain_s)
    cp_hidden_s: float = 0.0

    def updated(self, **changes: Any) -> StepCoefficients:
        """dataclasses.replace(self, **changes), a third of its cost: the fields' values
        copied, not passed through the frozen __init__ again (nothing here validates or
        derives a field: no __post_init__). Used for the MoE coefficients, built from the
        dense ones once per shape (models.expert.moe_step_coefficients)."""
        unknown = changes.keys() - _STEP_FIELDS
        if unknown:
            raise TypeError(f"StepCoefficients has no field {sorted(unknown)[0]!r}")
        new = object.__new__(StepCoefficients)
        state = new.__dict__
        state.update(self.__dict__)
        state.update(changes)
        return new

    @property
    def ep_crosses_nics(self) -> bool:
        """Whether the expert dispatch has a part that depends on the NICs (ep_nic_mb_s)."""
        return self.ep_nic_bytes > 0 or self.ep_nic_extra_bytes > 0 or self.ep_up_mb_s > 0

    @property
    def ep_overlapped(self) -> bool:
        """Whether an overlap pairs all-to-alls with compute (ep_overlap_s)."""
        return self.ep_paired > 0

    @property
    def cp_crosses_nics(self) -> bool:
        """Whether the context-parallel ring has hops on the NICs (cp_nic_mb_s)."""
        return self.cp_nic_bytes > 0

    @property
    def stage_mb_s(self) -> float:
        return self.compute_mb_s + self.tp_mb_s + self.cp_mb_s + self.ep_mb_s

    def dp_window_s(self, dp_overlap: float) -> float:
        """Time the gradient reduction hides behind: the larger of the question's
        ``dp_overlap`` x the last backward and the stack's overlapped window."""
        return max(dp_overlap * self.backward_mb_s, self.grad_overlap_s)

    @property
    def bubble_s(self) -> float:
        # (p-1)/(v m) of the m micro-batches' work: (p-1)/v stage times, whatever m is
        return bubble_fraction(self.pp, 1, self.vp) * self.bubble_scale * self.stage_mb_s


_STEP_FIELDS = frozenset(f.name for f in fields(StepCoefficients))


def step_coefficients(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    gpu: GPUSpec,
    network: Network,
    a: Assumptions,
) -> StepCoefficients:
    """The shape-only part of the step time (see the module docstring)."""
    cal = gpu.calibration
    gemm_mb = gemm_per_microbatch_s(spec, layout, seq_len, gpu)
    compute_mb = gemm_mb + memory_bound_per_microbatch_s(spec, layout, seq_len, gpu)
    tp_mb = tp_comm_per_microbatch_s(spec, layout, seq_len, gpu, network)
    compute_mb = max(compute_mb, host_issue_per_microbatch_s(spec, layout, gpu) - tp_mb)
    lat = cal.collective_latency_us * 1e-6
    send_bytes = 2.0 * (seq_len / layout.cp) * layout.micro_batch * spec.hidden / layout.tp
    send_exposed = 1.0 - cal.pp_overlap_fraction  # overlapped P2P hides the rest
    sync = cal.pp_sync_us_per_send * 1e-6  # a host-synchronised send: exposed whatever overlaps
    gpn = gpu.server.gpus_per_server
    k = scaleup.ranks_in_domain(gpu, layout.tp)
    grad_params = stage_params(spec, layout, "most")
    rs_bytes = zero3_microbatch_reduce_bytes(
        layout, cal.zero3_microbatch_grad_reduce_bytes, cal.zero3_pp_unsharded_params
    )
    gathers = grad_params * a.weight_bytes if layout.zero >= 3 else 0.0
    once = zero3_gathers_once(layout, gpu)
    window = cp_window_per_microbatch_s(spec, layout, seq_len, compute_mb)
    return StepCoefficients(
        compute_mb_s=compute_mb,
        gemm_mb_s=gemm_mb,
        tp_mb_s=tp_mb,
        **cp_coefficients(spec, layout, seq_len, gpu, window),
        pp=layout.pp,
        vp=layout.vp,
        cp=layout.cp,
        replica_gpus=layout.tp * layout.cp * layout.pp,
        pp_send_bytes=send_bytes * send_exposed if layout.pp > 1 else 0.0,
        pp_send_intra_s=comm.p2p_s(send_bytes, _p2p_bw(gpu), lat) * send_exposed + sync
        if layout.pp > 1
        else 0.0,
        pp_latency_s=lat * send_exposed + sync if layout.pp > 1 else 0.0,
        dp_bytes=grad_params * step_reduction_bytes(layout, gpu, a),
        dp_ranks_per_node=k,
        scale_up_bw_gb_per_s=_scale_up_bw(gpu, k),
        gpus_per_node=gpn,
        domain_gpus=scaleup.domain_gpus(gpu),
        network_efficiency=cal.network_bus_efficiency,
        optimizer_s=stage_params(spec, layout, "most")
        * a.optimizer_traffic_bytes
        / (gpu.memory_bw_tb_per_s * 1e12),
        zero=layout.zero,
        zero3_gather_bytes=0.0 if once else gathers,
        zero3_step_gather_bytes=gathers / 2.0 if once else 0.0,
        zero3_grad_rs_bytes=grad_params * rs_bytes / 2.0,
        zero3_grad_rs_tail_bytes=_last_reduced_params(spec, layout, grad_params) * rs_bytes / 2.0
        if rs_bytes > 0
        else 0.0,
        backward_mb_s=compute_mb * 2.0 / forward_passes(layout.recompute),
        grad_overlap_s=cal.grad_overlap_fraction * (compute_mb + tp_mb)
        if layout.zero >= 1
        else 0.0,
        gather_overlap_s=cal.param_gather_overlap_fraction * (compute_mb + tp_mb)
        if layout.zero >= 3
        else 0.0,
        zero3_contention_s_per_byte=cal.zero3_overlap_hbm_passes / (gpu.memory_bw_tb_per_s * 1e12)
        if layout.zero >= 3
        else 0.0,
    )


def step_reduction_bytes(layout: Layout, gpu: GPUSpec, a: Assumptions) -> float:
    """Bytes per parameter of the step's own gradient reduction, as an all-reduce: ZeRO-0
    all-reduces the gradients; ZeRO >= 1 reduce-scatters them and all-gathers the weights,
    one all-reduce of their mean size; where ZeRO-3 reduce-scatters every micro-batch
    (models.memory.zero3_microbatch_reduce_bytes) only the weights' half stays. A ZeRO-3
    stage that reduces once a step reduce-scatters the gradients it accumulated unsharded,
    in the stack's reduce dtype (the profile's zero3_microbatch_grad_reduce_bytes, as
    models.memory.zero3_kept_bytes holds them; grad_bytes where 0): FSDP2's
    post_backward at the last backward reduce-scatters each unsharded_accumulated_grad
    (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py@v2.9.0)."""
    cal = gpu.calibration
    if layout.zero == 0:
        return a.grad_bytes
    each = zero3_microbatch_reduce_bytes(
        layout, cal.zero3_microbatch_grad_reduce_bytes, cal.zero3_pp_unsharded_params
    )
    if each > 0:
        return a.weight_bytes / 2.0
    grads = a.grad_bytes
    if layout.zero >= 3 and cal.zero3_microbatch_grad_reduce_bytes > 0:
        grads = cal.zero3_microbatch_grad_reduce_bytes
    return (grads + a.weight_bytes) / 2.0


def zero3_gathers_once(layout: Layout, gpu: GPUSpec) -> bool:
    """Whether a ZeRO-3 stage gathers its parameters once a step rather than every
    micro-batch: with PP > 1 under a stack that keeps them unsharded across the step's
    micro-batches (the profile's zero3_pp_unsharded_params; models.memory.zero3_kept_bytes
    holds them): one all-gather, in the first micro-batch's forward (zero3_exposed_s)."""
    return layout.zero >= 3 and layout.pp > 1 and gpu.calibration.zero3_pp_unsharded_params


def group_reduce_s(c: StepCoefficients, nbytes: float, group, node_bw_gb_per_s):
    """All-reduce of ``nbytes`` per GPU over ``group`` ranks, k per server (module docstring).

    Works element-wise on numpy arrays of ``group`` and ``node_bw_gb_per_s``; on two
    numbers it returns a float (the same operations, without numpy's overhead: the
    solvers' bounds call it per shape)."""
    return _reduce_s(
        c, nbytes, group, node_bw_gb_per_s, c.dp_ranks_per_node, c.scale_up_bw_gb_per_s
    )


def _reduce_s(c: StepCoefficients, nbytes: float, group, node_bw_gb_per_s, k: int, up_gb_s):
    """group_reduce_s with ``k`` ranks per scale-up domain at ``up_gb_s`` GB/s (the DP
    group's, or the expert-DP group's: expert_reduce_s)."""
    scalar = isinstance(group, int | float) and isinstance(node_bw_gb_per_s, int | float)
    if scalar:
        group, node_bw_gb_per_s = float(group), float(node_bw_gb_per_s)
    else:
        group = np.asarray(group, dtype=float)
        node_bw_gb_per_s = np.asarray(node_bw_gb_per_s, dtype=float)
    up = up_gb_s * comm.GB
    share = comm.nic_share(node_bw_gb_per_s, c.gpus_per_node, c.network_efficiency)
    inside = 2.0 * nbytes * (1.0 - 1.0 / group) / up
    across = 2.0 * nbytes * (k - 1) / k / up + 2.0 * (nbytes / k) * (1.0 - k / group) / share
    if scalar:
        return (inside if group < k else across) if nbytes > 0 else 0.0
    return np.where(group < k, inside, across) if nbytes > 0 else np.zeros_like(group * share)


def ep_nic_mb_s(c: StepCoefficients, share):
    """The NIC-dependent part of one micro-batch's exposed dispatch and combine (0 when
    the EP group stays in the scale-up domain): max(in-domain part, NIC bytes / share)
    plus the additive NIC bytes (models/expert.py). ``share``: bytes/s per GPU."""
    return np.maximum(c.ep_up_mb_s, c.ep_nic_bytes / share) + c.ep_nic_extra_bytes / share


def ep_overlap_s(c: StepCoefficients, share, ring: Any = None) -> tuple[Any, Any]:
    """(hidden, exposed) seconds of the all-to-alls an overlap pairs with compute, one
    micro-batch (both 0 without one). The overlap runs each chunk's dispatch and combine on
    a communication stream beside another micro-batch's chunk on the compute stream
    (Megatron-Core's 1F1B all-to-all overlap: TransformerLayerSchedulePlan.run,
    megatron/core/models/common/model_chunk_schedule_plan.py, pairs "comm_stream:
    combine_bwd | dispatch_fwd->dispatch_bwd | combine_fwd" with "comp_stream: attn_fwd |
    mlp_bwd->mlp_bwd_dw->mlp_fwd | attn_bwd", each part waiting for both streams; DualPipe
    the same within "a pair of individual forward and backward chunks", DeepSeek-V3
    Technical Report section 3.2.1 and figure 4). One stream each way, so a paired chunk
    takes at least the longer of its compute and its all-to-alls: the hidden seconds are
    at most the compute of the chunks they pair with, min(wanted, window), with wanted the
    hidden share's seconds at ``share`` (bytes/s per GPU; ``ep_hidden_*``) and window
    ``ep_window_s`` less what ring attention takes of those chunks (``ring``: its
    cp_ring_hidden_s at ``share``, computed when not given, x ``ep_paired``); the rest, max(0, wanted - window), is exposed. A
    fixed share hid more than the compute could cover: Qwen3-30B-A3B at EP 32 over 4
    servers (DP 32, 16 micro-batches) stepped in 6.41 s with 8.77 s of all-to-alls a GPU
    (its NIC share's wire time)."""
    if not c.ep_overlapped:
        return 0.0, 0.0
    if ring is None:
        ring = cp_ring_hidden_s(c, share)
    wanted = (
        c.ep_hidden_mb_s
        + np.maximum(c.ep_hidden_up_mb_s, c.ep_hidden_nic_bytes / share)
        + c.ep_hidden_nic_extra_bytes / share
    )
    window = np.maximum(0.0, c.ep_window_s - c.ep_paired * ring)
    return np.minimum(wanted, window), np.maximum(0.0, wanted - window)


def ep_overlap_capped_s(c: StepCoefficients, microbatches: float, node_bw_gb_per_s: float):
    """The all-to-all seconds of a step an overlap would hide but its compute cannot
    (ep_overlap_s's exposed part x the micro-batches, at the server's NIC bandwidth), for
    the breakdown's reader; 0 without an overlap."""
    if not c.ep_overlapped:
        return 0.0
    share = comm.nic_share(node_bw_gb_per_s, c.gpus_per_node, c.network_efficiency)
    _, exposed = ep_overlap_s(c, share)
    return microbatches * float(exposed)


def cp_nic_mb_s(c: StepCoefficients, share):
    """Ring attention's exposed time per micro-batch when the ring crosses servers: its
    bytes at the GPU's NIC share (``share``, bytes/s; each ring step waits on its NIC
    hop) less the attention compute that hides them, max(0, bytes / share - window)."""
    return np.maximum(0.0, c.cp_nic_bytes / share - c.cp_window_s)


def cp_ring_hidden_s(c: StepCoefficients, share):
    """The seconds of a micro-batch's compute that ring attention takes up: across servers
    min(bytes / share, window), the part of cp_nic_mb_s that its attention compute hides;
    inside the domain the same over the peer links (``cp_hidden_s``). The same compute is
    the last micro-batch's window for the step's gradient reduction (dp_window_s) and
    every micro-batch's for its ZeRO-3 gathers, so those windows are shorter by it
    (step_from_coefficients): counted in both, a faster GPU, whose windows are shorter,
    could predict a slower step (across servers, Llama 3 8B TP 4 x CP 4 x DP 4 at 16K on
    H100: 0.112 s at twice the TFLOP/s, 0.120 s at three times; inside one, Llama 2 13B
    CP 4 x DP 16 on H200: 0.291 s, 0.298 s at twice). The collectives then queue on the
    compute's kernels (NCCL's run on SMs) rather than each taking it whole, a
    conservative reading where they use different links."""
    if not c.cp_crosses_nics:
        return c.cp_hidden_s
    return np.minimum(c.cp_nic_bytes / share, c.cp_window_s)


def cp_ring_on_nics(c: StepCoefficients, microbatches: float, node_bw_gb_per_s: float):
    """Ring attention's traffic over the NICs in one step, for the breakdown's reader:
    None when the ring stays in the scale-up domain; else the bytes each GPU sends
    (GB), their time at its NIC share, the attention compute that hides them and the
    exposed rest (``cp_nic_comm`` less its bubble share), all per step."""
    if not c.cp_crosses_nics:
        return None
    share = comm.nic_share(node_bw_gb_per_s, c.gpus_per_node, c.network_efficiency)
    return {
        "nic_gb_per_gpu": microbatches * c.cp_nic_bytes / comm.GB,
        "nic_s": microbatches * c.cp_nic_bytes / share,
        "hidden_behind_s": microbatches * c.cp_window_s,
        "exposed_s": microbatches * float(cp_nic_mb_s(c, share)),
    }


def nic_stage_mb_s(c: StepCoefficients, share):
    """The NIC-dependent part of a micro-batch's stage time: the expert dispatch that
    leaves the domain (ep_nic_mb_s), the all-to-alls an overlap cannot hide (ep_overlap_s)
    and ring attention across servers (cp_nic_mb_s)."""
    out = 0.0
    if c.ep_crosses_nics:
        out = out + ep_nic_mb_s(c, share)
    if c.ep_overlapped:
        out = out + ep_overlap_s(c, share)[1]
    if c.cp_crosses_nics:
        out = out + cp_nic_mb_s(c, share)
    return out


def expert_reduce_s(c: StepCoefficients, dp, node_bw_gb_per_s):
    """The expert gradients' reduction over expert-DP (``group_reduce_s`` with the
    expert-DP group's ranks per scale-up domain and its bandwidth); 0 for a dense model.
    On two numbers (``dp`` and ``node_bw_gb_per_s``) it returns a float, as
    group_reduce_s does."""
    if c.expert_dp_bytes <= 0:
        return 0.0
    scalar = isinstance(dp, int | float)
    group = (float(dp) if scalar else np.asarray(dp, dtype=float)) * c.cp
    return expert_group_reduce_s(c, c.expert_dp_bytes, group, node_bw_gb_per_s)


def expert_group(c: StepCoefficients, group):
    """The expert-DP group of a DP x CP group of ``group`` ranks: group x TP / (EP x ETP)
    (Megatron-Core's folding, models.expert.expert_dp_group)."""
    return group * c.expert_dp_num / c.expert_dp_den


def expert_group_reduce_s(c: StepCoefficients, nbytes: float, group, node_bw_gb_per_s):
    """All-reduce of ``nbytes`` per GPU over the expert-DP group of a DP x CP group of
    ``group`` ranks (``expert_group``), at that group's ranks per scale-up domain and
    bandwidth (``expert_ranks_per_node``, ``expert_scale_up_bw_gb_per_s``: the ranks sit
    EP x ETP apart, models.expert.expert_dp_reduce_s)."""
    k, up = c.expert_ranks_per_node, c.expert_scale_up_bw_gb_per_s
    return _reduce_s(c, nbytes, expert_group(c, group), node_bw_gb_per_s, k, up)


def _last_reduced_params(spec: TransformerSpec, layout: Layout, rank_params: float) -> float:
    """Parameters per GPU of the backward's last reduce-scatter: the rank's parameters less
    all its layers but one (the first layer and the root module's embedding, output and
    final norm, as OLMo-core and torchtitan wrap them: one FSDP group per block, the rest
    in the root)."""
    layers = max(stage_layers(spec.layers, layout))
    return max(0.0, rank_params - (layers - 1) * spec.layer_params() / layout.tp)


class Zero3Collectives(NamedTuple):
    """Seconds of one micro-batch's ZeRO-3 / FSDP collectives (zero3_microbatch_s)."""

    comm_s: Any  # gathers + reduce-scatter on one link, alone
    tail_s: Any  # the backward's last reduce-scatter, which no compute follows
    contention_s: Any  # compute time the hidden part costs (zero3_contention_s)


def zero3_microbatch_s(c: StepCoefficients, group, node_bw_gb_per_s) -> Zero3Collectives:
    """One micro-batch's ZeRO-3 / FSDP collectives over ``group`` ranks.

    gathers: the parameter all-gathers, forward and backward (one all-reduce's traffic,
    ``zero3_gather_bytes``); PyTorch FSDP issues the next layer's all-gather while this
    layer computes (Zhao et al. 2023, "PyTorch FSDP", section 3.3: forward and backward
    prefetching), as Megatron-FSDP does. reduce-scatter: the gradients' reduce-scatter
    after the micro-batch's backward when the stack issues one per micro-batch
    (``zero3_grad_rs_bytes``; PyTorch FSDP2 FSDPParamGroup.post_backward runs it on its
    reduce-scatter stream while the next group's backward computes, and
    FSDPModule.set_requires_gradient_sync(False) skips it). A MoE model's routed experts
    are sharded over the expert-DP group instead (models.memory.moe_memory_per_gpu), so
    their gathers and reduce-scatter (``expert_zero3_bytes``) run over that group at its
    bandwidth (expert_group_reduce_s), one after the dense ones on the GPU's links. They
    all share one window (``gather_overlap_s``). tail: the backward's last reduce-scatter
    (``zero3_grad_rs_tail_bytes``, ``expert_zero3_tail_bytes``), which no compute follows:
    FSDPParamGroup.finalize_backward makes the compute stream wait for it at the end of
    every backward. contention: what the hidden part slows the compute by
    (zero3_contention_s). What a step exposes of them: zero3_exposed_s."""
    nbytes = c.zero3_gather_bytes + c.zero3_grad_rs_bytes
    comm_s = group_reduce_s(c, nbytes, group, node_bw_gb_per_s)
    tail = zero3_grad_tail_s(c, group, node_bw_gb_per_s)
    sent = _sent_bytes(nbytes, group)
    if c.expert_zero3_bytes > 0:
        comm_s = comm_s + expert_group_reduce_s(c, c.expert_zero3_bytes, group, node_bw_gb_per_s)
        tail = tail + expert_group_reduce_s(c, c.expert_zero3_tail_bytes, group, node_bw_gb_per_s)
        sent = sent + _sent_bytes(c.expert_zero3_bytes, expert_group(c, group))
    return Zero3Collectives(comm_s, tail, zero3_contention_s(c, sent, comm_s))


def _sent_bytes(nbytes: float, group):
    """Bytes a GPU sends in a ring all-reduce of ``nbytes`` over ``group`` ranks,
    2 nbytes (1 - 1/group)."""
    return 2.0 * nbytes * (1.0 - 1.0 / np.asarray(group, dtype=float))


def zero3_exposed_s(
    c: StepCoefficients, reduce_s, group, node_bw_gb_per_s, m, window, ring_s: Any = 0.0
):
    """Exposed ZeRO-3 / FSDP communication of a step of ``m`` micro-batches. Each of the
    first m - 1 exposes what its own compute does not hide, max(tail, comm -
    gather_overlap_s) + contention (zero3_microbatch_s). The last one's compute is also
    the step's ``window`` for the step's reduction (``reduce_s``; dp_window_s): the two
    windows are the same seconds of compute, so it hides at most the larger of them,
    max(tail, comm + reduce_s - max(gather_overlap_s, window)) + contention. Hiding each
    in its own window counted those seconds twice, and a faster GPU, whose windows are
    shorter, could predict a slower step (python bench/fsdp_level.py refits the level
    with them shared). ``ring_s``: what ring attention takes of each micro-batch's window
    (cp_ring_hidden_s; ``window`` is already short of it) and an overlap's all-to-alls
    (ep_overlap_s: the compute of the chunks they pair with; ``window`` is short of them
    where the last micro-batch's compute is one of those, ``ep_window_last``). Parameters
    kept unsharded across the micro-batches (zero3_gathers_once) are gathered once, in the
    first micro-batch, whose compute hides it as any micro-batch's hides its gathers:
    max(0, once - gather_overlap_s) + its contention (zero3_step_gather_s); with one
    micro-batch, that one is the last, and its window hides the gather with the rest."""
    comm_s, tail, contention = zero3_microbatch_s(c, group, node_bw_gb_per_s)
    gathers = np.maximum(0.0, c.gather_overlap_s - ring_s)
    each = np.maximum(tail, comm_s - gathers) + contention
    shared = np.maximum(gathers, window)
    first: Any = 0.0
    if c.zero3_step_gather_bytes > 0 or c.expert_zero3_step_gather_bytes > 0:
        once, sent = zero3_step_gather_s(c, group, node_bw_gb_per_s)
        alone = m > 1.0  # the first micro-batch is not the last
        first = np.where(alone, np.maximum(0.0, once - gathers), 0.0)
        first = first + zero3_contention_s(c, sent, once)
        comm_s = comm_s + np.where(alone, 0.0, once)
    last = np.maximum(tail, comm_s + reduce_s - shared) + contention
    return (m - 1.0) * each + first + last


def zero3_step_gather_s(c: StepCoefficients, group, node_bw_gb_per_s):
    """(seconds, bytes a GPU sends) of the once-a-step all-gather of the parameters a
    ZeRO-3 stage keeps unsharded (``zero3_step_gather_bytes`` over ``group`` ranks; a MoE
    model's experts, ``expert_zero3_step_gather_bytes``, over their expert-DP group after
    them, as zero3_microbatch_s runs its collectives)."""
    once = group_reduce_s(c, c.zero3_step_gather_bytes, group, node_bw_gb_per_s)
    sent = _sent_bytes(c.zero3_step_gather_bytes, group)
    if c.expert_zero3_step_gather_bytes > 0:
        nbytes = c.expert_zero3_step_gather_bytes
        once = once + expert_group_reduce_s(c, nbytes, group, node_bw_gb_per_s)
        sent = sent + _sent_bytes(nbytes, expert_group(c, group))
    return once, sent


def zero3_contention_s(c: StepCoefficients, sent, comm_s):
    """Seconds the hidden part of a micro-batch's ZeRO-3 collectives (``sent`` bytes a GPU
    sends in them, a ring's 2 nbytes (1 - 1/group) for each all-reduce equivalent of
    nbytes over group ranks; ``comm_s`` seconds alone) adds to the compute it overlaps:
    passes x the bytes sent x the hidden share min(comm_s, gather_overlap_s) / comm_s,
    at the GPU's HBM bandwidth (``zero3_contention_s_per_byte``). NCCL's kernels run on
    SMs and stage what they receive in HBM: a compute kernel overlapped by an all-gather
    slows down because "they're competing for memory bandwidth", each NVLink byte costing
    2x to 3x in HBM (S. Jeaugey, NVIDIA/nccl#1428, where an A100 GEMM took 2.08 ms
    overlapped against 1.18 ms alone);
    PyTorch measures matmuls overlapped by NCCL collectives "30-40% slower" on 8 H100
    (pytorch/pytorch#179937; #130583, the low-contention collectives). 0 when the
    profile's zero3_overlap_hbm_passes is 0."""
    if c.zero3_contention_s_per_byte <= 0 or np.all(np.asarray(sent) <= 0):
        return 0.0
    hidden_share = np.minimum(comm_s, c.gather_overlap_s) / np.maximum(comm_s, 1e-30)
    return c.zero3_contention_s_per_byte * sent * hidden_share


def zero3_grad_tail_s(c: StepCoefficients, group, node_bw_gb_per_s):
    """Seconds of the backward's last gradient reduce-scatter (``zero3_grad_rs_tail_bytes``
    over ``group`` ranks): exposed every micro-batch (zero3_exposed_s); 0 when
    the stack reduces once a step."""
    return group_reduce_s(c, c.zero3_grad_rs_tail_bytes, group, node_bw_gb_per_s)


def step_from_coefficients(
    c: StepCoefficients, dp, microbatches, node_bw_gb_per_s, dp_overlap: float
) -> StepBreakdown:
    """Assemble the step from the shape coefficients and d, m and the NIC bandwidth.

    ``dp``, ``microbatches`` and ``node_bw_gb_per_s`` may be numpy arrays (the
    exhaustive solver evaluates many at once); the parts are then arrays too."""
    dp = np.asarray(dp, dtype=float)
    m = np.asarray(microbatches, dtype=float)
    group = dp * c.cp
    share = comm.nic_share(
        np.asarray(node_bw_gb_per_s, dtype=float), c.gpus_per_node, c.network_efficiency
    )
    sends = 2.0 * (c.vp * m + c.pp - 1) if c.pp > 1 else 0.0 * m
    one_server = dp * c.replica_gpus <= c.domain_gpus  # sends stay on the scale-up fabric
    pp_time = sends * np.where(
        one_server, c.pp_send_intra_s, c.pp_send_bytes / share + c.pp_latency_s
    )
    dp_time = group_reduce_s(c, c.dp_bytes, group, node_bw_gb_per_s)
    ep_mb: Any = c.ep_mb_s  # floats, or arrays once a NIC-dependent term joins
    bubble: Any = c.bubble_s
    if c.expert_dp_bytes > 0:
        dp_time = dp_time + expert_reduce_s(c, dp, node_bw_gb_per_s)
    ring = cp_ring_hidden_s(c, share)  # what ring attention takes of the window
    a2a_hidden, a2a_exposed = ep_overlap_s(c, share, ring)  # and an overlap's all-to-alls
    if c.ep_crosses_nics or c.ep_overlapped:
        varying = (ep_nic_mb_s(c, share) if c.ep_crosses_nics else 0.0) + a2a_exposed
        ep_mb = ep_mb + varying
        bubble = bubble + bubble_fraction(c.pp, 1, c.vp) * c.bubble_scale * varying
    cp_nic = cp_nic_mb_s(c, share) if c.cp_crosses_nics else 0.0 * m
    bubble = bubble + bubble_fraction(c.pp, 1, c.vp) * c.bubble_scale * cp_nic
    taken = ring + (a2a_hidden if c.ep_window_last else 0.0)
    window = np.maximum(0.0, c.dp_window_s(dp_overlap) - taken)
    if c.zero >= 3:
        dp_exposed = zero3_exposed_s(
            c, dp_time, group, node_bw_gb_per_s, m, window, ring + a2a_hidden
        )
    else:
        dp_exposed = np.maximum(0.0, dp_time - window)
    optimizer = c.optimizer_s / (group if c.zero >= 1 else 1.0)
    return StepBreakdown(
        compute=m * c.compute_mb_s,
        bubble=bubble + 0.0 * m,
        tp_comm=m * c.tp_mb_s,
        cp_comm=m * c.cp_mb_s,
        pp_comm=pp_time,
        dp_comm=dp_exposed + 0.0 * m,
        optimizer=optimizer,
        ep_comm=m * ep_mb,
        cp_nic_comm=m * cp_nic,
    )
