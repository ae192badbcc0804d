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
attention core's work: ``tp_work_factor``) uses the group's bandwidth at its own degree.
"""

from __future__ import annotations

from catalog.specs import GPUSpec
from models.comm import tp_bandwidth_limit


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


def tp_work_factor(hidden: int, q_width: int, seq_len: int) -> float:
    """A TP rank's forward FLOPs per token and layer over the seed's, between the same TP
    collectives: 1 + 2 s q / (24 h^2).

    Seed E2's 3h/t counts the linear layers' work only, 24 h^2 FLOPs per token and layer (2
    x their 12 h^2 parameters). The attention core (Q K^T and A V) is split over the TP ranks
    with the heads, as the linear layers are, and adds its causal half of 4 s q FLOPs per
    token (models.flops.attention_forward_flops_per_token; FlashAttention skips the masked
    blocks, as models/step.py prices it), q the query width (h for the zoo's dense models),
    with no more TP traffic. About 1.04 at the seed's 4,096 tokens and h 8,192 (E2's integer
    limits unchanged); 11.7 for Llama 2 7B at 512K tokens, where NeMo's measured TP 8 runs
    hide their TP traffic (bench/data/published)."""
    return 1.0 + 2.0 * seq_len * q_width / (24.0 * hidden * hidden)


def tp_limit(
    hidden: int, gpu: GPUSpec, tp: int, precision: str, work_factor: float = 1.0
) -> tuple[float, float]:
    """(3h x bw / peak x ``work_factor``, the bandwidth it used) for a TP group of ``tp``:
    the seed's limit (``work_factor`` 1) or with the attention core's work
    (``tp_work_factor``)."""
    peak = gpu.peak_tflops(precision) or gpu.dense_bf16_tflops
    bw = group_bw_gb_per_s(gpu, min(tp, domain_gpus(gpu)))
    return tp_bandwidth_limit(hidden, bw, peak) * work_factor, bw
