"""Scale-up (GPU-to-GPU) bandwidth a group of ranks actually gets, per topology.

Two topologies (catalog ``GPUSpec.scale_up_topology``):

* **switched** (NVLink through NVSwitch; PCIe through a switch): every GPU
  reaches any peer of its domain at its whole scale-up bandwidth, whatever the
  group size (NVIDIA DGX H100/B200 user guides; NVL72: one 72-GPU domain).
* **mesh** (AMD Infinity Fabric on MI300X-class UBB boards, Gaudi 3's on-chip
  RoCE ports): one direct link to each of the other GPUs of the board. A
  collective over ``n`` ranks can drive only the ``n - 1`` links to its peers, so
  it gets ``min(aggregate, (n - 1) x link)`` (AMD ROCm "MI300X system
  architecture": 7 x 128 GB/s bidirectional links per GPU; Intel Gaudi 3
  network configuration: 21 scale-up ports, 3 x 200GbE to each of 7 peers). A
  point-to-point send (pipeline stages, ring attention) crosses one link.

The bandwidths are nominal, per direction; the stack's ``scale_up_bus_efficiency``
applies on top (models/step.py). The TP rule (seed E2, 3h/t FLOPs per byte, with the
attention core's work and FP8's traffic: ``tp_rule``) uses the group's bandwidth at its own
degree.
"""

from __future__ import annotations

from typing import NamedTuple

from catalog.specs import GPUSpec
from models import flops
from models.comm import tp_bandwidth_limit
from models.transformer import TransformerSpec


def group_bw_gb_per_s(gpu: GPUSpec, ranks: int) -> float:
    """Per-direction bandwidth a GPU drives in a collective over ``ranks`` GPUs of one
    scale-up domain (module docstring)."""
    whole = gpu.scale_up_bw_gb_per_s_per_direction
    link = gpu.scale_up_link_gb_per_s_per_direction
    if gpu.scale_up_topology == "switched" or link is None:
        return whole
    return min(whole, max(1, ranks - 1) * link)


def p2p_bw_gb_per_s(gpu: GPUSpec) -> float:
    """Per-direction bandwidth of one send to one peer in the domain."""
    link = gpu.scale_up_link_gb_per_s_per_direction
    if gpu.scale_up_topology == "switched" or link is None:
        return gpu.scale_up_bw_gb_per_s_per_direction
    return link


def domain_gpus(gpu: GPUSpec) -> int:
    """GPUs that share the scale-up fabric (8 in an HGX server, 72 in an NVL72 rack)."""
    return gpu.server.scale_up_domain_gpus


def domain_servers(gpu: GPUSpec) -> int:
    """Servers of one scale-up domain, at least one (an NVL72 rack's 18 four-GPU trays, one
    HGX server): a cluster of no more needs no scale-out fabric (models/fabric.py), since a
    job that fits one domain sends nothing over the NICs (models/step.py
    step_from_coefficients: dp x replica <= domain_gpus)."""
    return max(1, domain_gpus(gpu) // gpu.server.gpus_per_server)


def ranks_in_domain(gpu: GPUSpec, stride: int) -> int:
    """Ranks of a group whose members are ``stride`` ranks apart (a data-parallel group
    behind TP = stride) that share one scale-up domain: domain / stride, at least 1."""
    dom = domain_gpus(gpu)
    return max(1, dom // stride) if stride < dom else 1


def attention_share(spec: TransformerSpec, seq_len: int) -> float:
    """The attention core's forward FLOPs per token and layer over seed E2's linear ones,
    (its causal FLOPs) / (24 h^2): E2's 3h/t counts the linear layers' work only, 24 h^2
    FLOPs per token and layer (2 x their 12 h^2 parameters); the attention core (Q K^T
    and A V) is split over the TP ranks with the heads, as the linear layers are, between
    the same collectives, and does the FLOPs models.flops
    attention_core_causal_forward_per_token counts (2 s q for a query width q, h in the
    zoo's dense models; multi-head latent attention's query-key and value widths;
    none on linear-attention layers), as the step prices them. 0.042 at the seed's 4,096
    tokens and h 8,192; 10.7 for Llama 2 7B at 512K tokens; 0.136 for DeepSeek-V3 at 4,096
    (its 128 heads of 192 + 128 over h 7,168; 0.048 at its 7,168-wide q alone)."""
    return flops.attention_core_causal_forward_per_token(spec, seq_len) / (
        24.0 * spec.hidden * spec.hidden
    )


FP8_TP_TRAFFIC_FACTOR = 4.0 / 3.0
"""Seed E2's FLOPs per byte of TP traffic in FP8 over bf16: of the four collectives a layer's
forward runs under sequence parallelism, Transformer Engine casts the two all-gathered
linear inputs to FP8 before gathering them (1 byte an element) and reduce-scatters the two
outputs in bf16, so 6 bytes move where bf16 moves 8 (module/linear.py at v1.13: cast_to_fp8
before gather_along_first_dim under sequence_parallel; at v2.0-v2.18: gather_along_first_dim
with the input quantizer, distributed.py _all_gather_fp8 and _all_gather_mxfp8). Applied on
the GPUs whose training stacks run Transformer Engine or its ROCm port
(``TRANSFORMER_ENGINE_VENDORS``); Gaudi's FP8 collectives are not documented here."""

TRANSFORMER_ENGINE_VENDORS = ("NVIDIA", "AMD")


class TpRule(NamedTuple):
    """Seed E2's limit on one TP group with the attention core's work (``limit``), and its
    terms: ``seed`` 3h x bw / peak, ``work`` 1 + the attention share at the peak's rate,
    ``traffic`` the FP8 factor (1 in bf16), ``bw`` and ``peak``."""

    limit: float
    seed: float
    work: float
    traffic: float
    bw: float
    peak: float


def tp_rule(hidden: int, gpu: GPUSpec, tp: int, precision: str, share: float = 0.0) -> TpRule:
    """t <= 3h x bw / peak x (1 + share x peak / bf16 peak) x traffic for a TP group of
    ``tp``, ``share`` the attention share (``attention_share``; 0: the seed's rule). In FP8
    the linear layers run at the FP8 peak and the attention core at bf16's (Megatron-LM's
    FP8 recipes leave it in bf16 unless --fp8-dot-product-attention), so its work counts
    peak / bf16 peak times as long; the traffic factor is FP8_TP_TRAFFIC_FACTOR on the
    TRANSFORMER_ENGINE_VENDORS' GPUs in FP8, else 1."""
    peak = gpu.peak_tflops(precision) or gpu.dense_bf16_tflops
    bw = group_bw_gb_per_s(gpu, min(tp, domain_gpus(gpu)))
    seed = tp_bandwidth_limit(hidden, bw, peak)
    work = 1.0 + share * peak / gpu.dense_bf16_tflops
    te_fp8 = precision == "fp8" and gpu.vendor in TRANSFORMER_ENGINE_VENDORS
    traffic = FP8_TP_TRAFFIC_FACTOR if te_fp8 else 1.0
    return TpRule(seed * work * traffic, seed, work, traffic, bw, peak)


def model_tp_rule(
    spec: TransformerSpec, seq_len: int, gpu: GPUSpec, tp: int, precision: str
) -> TpRule:
    """``tp_rule`` of a model at a sequence length: its hidden size and its
    ``attention_share`` (the rule evaluate checks and the solvers' tp_bandwidth family
    enforces)."""
    return tp_rule(spec.hidden, gpu, tp, precision, attention_share(spec, seq_len))
