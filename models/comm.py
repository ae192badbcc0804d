"""Collective and point-to-point communication times.

Ring algorithms (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations", JPDC 2009; NCCL's "bus bandwidth" convention): an
all-reduce of B bytes over n ranks takes 2(n-1) steps and moves 2*(n-1)/n*B per
rank, a reduce-scatter or all-gather (n-1) steps and (n-1)/n*B. Time is the
alpha-beta model (Hockney 1994): steps x per-step latency + bytes / (nominal
bandwidth x bus efficiency). The TP rule is the seed's E2:
3h/t FLOPs per byte of TP traffic must reach peak / link bandwidth.
"""

from __future__ import annotations

import math

GB = 1e9


def nic_share(node_bw_gb_per_s, gpus_per_node: int, efficiency: float):
    """A GPU's share of its server's scale-out bandwidth, bytes/s: the server's NICs
    (GB/s per direction) split over its GPUs, at the stack's bus efficiency (the one
    formula of the NIC share; ``node_bw_gb_per_s`` may be a numpy array)."""
    return node_bw_gb_per_s * GB / gpus_per_node * efficiency


def ring_allreduce_s(
    nbytes: float, ranks: int, bw_gb_per_s: float, latency_s: float = 0.0
) -> float:
    """Ring all-reduce of ``nbytes`` per rank over ``ranks`` at ``bw`` GB/s per direction;
    ``latency_s`` per ring step (2(n-1) steps)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return 2.0 * (ranks - 1) / ranks * nbytes / (bw_gb_per_s * GB) + 2.0 * (ranks - 1) * latency_s


def ring_gather_s(nbytes: float, ranks: int, bw_gb_per_s: float, latency_s: float = 0.0) -> float:
    """Reduce-scatter or all-gather: (n-1)/n of the full buffer per rank, (n-1) steps."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return (ranks - 1) / ranks * nbytes / (bw_gb_per_s * GB) + (ranks - 1) * latency_s


def hierarchical_allreduce_s(
    nbytes: float,
    ranks: int,
    ranks_per_node: int,
    intra_bw_gb_per_s: float,
    inter_bw_gb_per_s_per_gpu: float,
    latency_s: float = 0.0,
) -> float:
    """All-reduce over ``ranks`` GPUs, ``ranks_per_node`` of them in each server.

    Reduce-scatter inside the server over the scale-up link, all-reduce of each
    GPU's 1/k shard across the n = ranks/k servers over the NICs (each GPU has
    its share of the server's NIC bandwidth), all-gather inside the server
    (NCCL's tree/ring hierarchy; Jia et al. 2018 "Highly scalable deep learning
    training system with mixed-precision", section 3.3).
    """
    k = max(1, min(ranks_per_node, ranks))
    nodes = max(1, math.ceil(ranks / k))
    intra = ring_allreduce_s(nbytes, k, intra_bw_gb_per_s, latency_s) if k > 1 else 0.0
    inter = (
        ring_allreduce_s(nbytes / k, nodes, inter_bw_gb_per_s_per_gpu, latency_s)
        if nodes > 1
        else 0.0
    )
    return intra + inter


def p2p_s(nbytes: float, bw_gb_per_s: float, latency_s: float = 0.0) -> float:
    """One point-to-point send."""
    if nbytes <= 0:
        return 0.0
    return nbytes / (bw_gb_per_s * GB) + latency_s


def tp_bandwidth_limit(
    hidden: int, link_bw_gb_per_s_per_direction: float, peak_tflops: float
) -> float:
    """Seed E2: the largest TP degree whose traffic hides behind compute, 3h*bw/peak."""
    return 3.0 * hidden * link_bw_gb_per_s_per_direction * GB / (peak_tflops * 1e12)


def tp_max_degree(hidden: int, link_bw_gb_per_s_per_direction: float, peak_tflops: float) -> int:
    """floor(3h*bw/peak), at least 1 (TP 1 has no traffic)."""
    return max(
        1,
        math.floor(tp_bandwidth_limit(hidden, link_bw_gb_per_s_per_direction, peak_tflops) + 1e-9),
    )
