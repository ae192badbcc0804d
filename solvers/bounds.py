"""Valid bounds per shape, from the model's own numbers.

Used three ways: as redundant cuts in the CP-SAT model, as its presolve
(shapes whose DP range is empty cannot be chosen), and by the explanation code
to skip re-solves that cannot improve the objective.
"""

from __future__ import annotations

import math

import numpy as np

from models.cost import cluster_totals, usd_to_cents_up
from models.step import group_reduce_s
from solvers.scenario import GPU_CAP, Scenario
from solvers.space import Candidate, nic_specs


def least_capex_cents(scenario: Scenario, gpu, num_gpus) -> np.ndarray:
    """The least capex of ``num_gpus`` GPUs of this type (numpy array or int): the fewest
    NICs per server its design allows, of whichever fitting kind is cheapest at that size,
    with its fabric and racks (models.cost.cluster_totals, the solvers' own formula).
    More NICs per server only add NICs, links, switch ports and power, so no plan costs
    less."""
    cat = scenario.catalog
    fitting = scenario.nics_for(gpu.name) or nic_specs(scenario)
    fewest = min(scenario.nic_counts(gpu.name))
    return np.min(
        [
            cluster_totals(
                gpu, nic, cat.switch_for(nic), cat.facility, num_gpus, fewest
            ).capex_cents
            for nic in fitting
        ],
        axis=0,
    )


def budget_gpu_limit(scenario: Scenario, gpu) -> int:
    """The most GPUs of this type whose least capex fits the budget (capex charged in full).

    A 64-way search (a few vectorised rounds): the least capex never falls as
    GPUs are added (servers, fabric tiers, switches, links and racks all grow
    with the count; tests/test_bounds.py checks it)."""
    key = ("budget_gpu_limit", gpu.name)
    if key not in scenario.memo:
        cents = scenario.budget * 100
        lo, hi = 0, min(GPU_CAP, int(cents // usd_to_cents_up(gpu.price_usd)))
        while lo < hi:  # invariant: lo GPUs fit (0 always does), more than hi never do
            probes = np.unique(np.linspace(lo + 1, hi, num=min(64, hi - lo)).astype(np.int64))
            fits = int(np.count_nonzero(least_capex_cents(scenario, gpu, probes) <= cents))
            if fits == len(probes):
                lo = hi
            else:
                lo = int(probes[fits - 1]) if fits else lo
                hi = int(probes[fits]) - 1
        scenario.memo[key] = lo
    return scenario.memo[key]


def _down(x: float) -> int:
    return int(math.floor(x + 1e-9 * max(1.0, abs(x))))


def stage_time_lower(cand: Candidate) -> float:
    """A micro-batch's time through the slowest stage, the cheaper of both send regimes."""
    c = cand.coeffs
    return min(
        c.stage_mb_s + 2 * c.vp * c.pp_send_intra_s, c.stage_mb_s + 2 * c.vp * c.pp_latency_s
    )


def dp_bounds(scenario: Scenario, cand: Candidate) -> tuple[int, int]:
    """The DP range one shape admits under the enforced families.

    Lower: the memory shard that fits; the deadline, since a sequence takes at
    least A / (b d) (A the cheaper regime's stage time). Upper: the GPU cap; the
    batch ceiling with the fewest micro-batches; under a capex budget, the most
    GPUs whose least capex fits it (budget_gpu_limit)."""
    s = cand.shape
    g = scenario.catalog.gpu(s.gpu)
    lo = cand.dp_floor(scenario)
    if scenario.active("deadline"):
        need = (
            scenario.sequences
            * stage_time_lower(cand)
            / (s.micro_batch * scenario.deadline * 86400.0)
        )
        lo = max(lo, math.floor(need * (1 - 1e-9)))
    hi = GPU_CAP // s.replica_gpus
    cap = scenario.gpu_cap(s.gpu) if scenario.active("max_gpus") else None
    if cap is not None:
        hi = min(hi, cap // s.replica_gpus)
    if scenario.active("batch_ceiling"):
        m_min = s.pp if ((scenario.active("pipeline_fill") or s.vp > 1) and s.pp > 1) else 1
        hi = min(hi, _down(scenario.ceiling_tokens / scenario.seq_len) // (s.micro_batch * m_min))
    if scenario.active("budget") and scenario.capex_charged_in_full:
        hi = min(hi, budget_gpu_limit(scenario, g) // s.replica_gpus)
    return max(1, lo), hi


def objective_lower_bound(
    scenario: Scenario, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A value the objective cannot beat with this shape (days, or USD), whatever d, m and NICs are.

    Time: T = sequences x (m A + C + D + O/g) / (b m d) >= sequences x (A / (b d_max) +
    (C + D_min + O / g_max) / (b W_max)), with D_min the gradient reduction at the
    smallest DP degree over every NIC slot of the fastest NIC. Cost: the least
    capex at the smallest DP degree (least_capex_cents); cloud:
    replica x sequences x A / b GPU-seconds at the GPU's hourly price."""
    s = cand.shape
    g = scenario.catalog.gpu(s.gpu)
    lo, hi = bounds if bounds is not None else dp_bounds(scenario, cand)  # bounds: dp_bounds'
    hi = max(1, hi)
    b = s.micro_batch
    if scenario.objective == "time":
        c = cand.coeffs
        w_hi = (  # micro-batches per step: b x W sequences fit the ceiling
            _down(scenario.ceiling_tokens / scenario.seq_len) // b
            if scenario.active("batch_ceiling")
            else GPU_CAP**2
        )
        fastest = max(n.speed_gbit_per_s for n in nic_specs(scenario)) / 8.0
        slots = (
            (g.server.nic_slots + scenario.extra_nic_slots)
            if scenario.active("nic_slots")
            else (2 * g.server.nic_slots)
        )
        d_min = float(
            group_reduce_s(c, c.dp_bytes, cand.dp_floor(scenario) * c.cp, slots * fastest)
        )
        d_min = max(0.0, d_min - c.dp_window_s(scenario.assumptions.dp_overlap))
        opt = c.optimizer_s / (hi * c.cp)
        per_seq = stage_time_lower(cand) / (b * hi) + (c.bubble_s + d_min + opt) / (b * w_hi)
        return per_seq * scenario.sequences / 86400.0
    if scenario.capex_charged_in_full:
        key = ("least_capex_cents", g.name, lo * s.replica_gpus)
        if key not in scenario.memo:
            scenario.memo[key] = int(least_capex_cents(scenario, g, lo * s.replica_gpus))
        return scenario.memo[key] / 100.0
    if scenario.pricing == "tco":
        return 0.0  # a lifetime share of capex plus energy: no cheap bound
    gpu_s = s.replica_gpus * scenario.sequences * stage_time_lower(cand) / b
    return gpu_s / 3600.0 * g.cloud_usd_per_gpu_hour


def gemm_lower_bound(
    scenario: Scenario, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A weaker bound than objective_lower_bound, and cheaper: it needs only the shape's
    GEMM time G, not its step coefficients.

    Time: sequences x G / (b d_max). Every other term of objective_lower_bound
    is non-negative and its stage time A >= G, so this never exceeds it (the
    same floating-point operations on smaller operands). Cloud: replica x
    sequences x G / b GPU-seconds. Capex: objective_lower_bound itself (no step
    time involved); TCO: 0."""
    s = cand.shape
    if scenario.objective == "time":
        lo, hi = bounds if bounds is not None else dp_bounds(scenario, cand)
        per_seq = cand.gemm_mb_s / (s.micro_batch * max(1, hi))
        return per_seq * scenario.sequences / 86400.0
    if scenario.capex_charged_in_full or scenario.pricing == "tco":
        return objective_lower_bound(scenario, cand, bounds)
    g = scenario.catalog.gpu(s.gpu)
    gpu_s = s.replica_gpus * scenario.sequences * cand.gemm_mb_s / s.micro_batch
    return gpu_s / 3600.0 * g.cloud_usd_per_gpu_hour
