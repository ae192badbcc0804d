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
applies on top (models/step.py). The TP rule (seed E2, 3h/t FLOPs per byte)
uses the group's bandwidth at its own degree.
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


def tp_limit(hidden: int, gpu: GPUSpec, tp: int, precision: str) -> tuple[float, float]:
    """(the seed's 3h x bw / peak limit, the bandwidth it used) for a TP group of ``tp``."""
    peak = gpu.peak_tflops(precision) or gpu.dense_bf16_tflops
    bw = group_bw_gb_per_s(gpu, min(tp, domain_gpus(gpu)))
    return tp_bandwidth_limit(hidden, bw, peak), bw
