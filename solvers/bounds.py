"""Valid bounds per shape, from the model's own numbers.

Used three ways: as redundant cuts in the CP-SAT model, as its presolve
(shapes whose DP range is empty cannot be chosen), and by the explanation code
to skip re-solves that cannot improve the objective.
"""

from __future__ import annotations

import math

from models.cost import usd_to_cents_up
from models.step import group_reduce_s
from solvers.scenario import GPU_CAP, Scenario
from solvers.space import Candidate, nic_specs


def server_cents_lower(scenario: Scenario, gpu) -> int:
    """Least capex per server beyond its GPUs: overhead and one NIC of the cheapest kind
    (a single server needs no fabric; racks are left out)."""
    cheapest_nic = min(usd_to_cents_up(n.price_usd) for n in nic_specs(scenario))
    return usd_to_cents_up(gpu.server.overhead_usd) + cheapest_nic


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
    batch ceiling with the fewest micro-batches; under a capex budget, cost >= G
    x (GPU price + (server overhead + cheapest NIC) / GPUs per server)."""
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
        per_gpu = (
            usd_to_cents_up(g.price_usd)
            + server_cents_lower(scenario, g) / g.server.gpus_per_server
        )
        hi = min(hi, int(scenario.budget * 100 // (per_gpu * s.replica_gpus)))
    return max(1, lo), hi


def objective_lower_bound(
    scenario: Scenario, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A value the objective cannot beat with this shape (days, or USD), whatever d, m and NICs are.

    Time: T = sequences x (m A + C + D + O/g) / (b m d) >= sequences x (A / (b d_max) +
    (C + D_min + O / g_max) / (b W_max)), with D_min the gradient reduction at the
    smallest DP degree over every NIC slot of the fastest NIC. Cost: capex at the
    smallest DP degree with one NIC of the cheapest kind per server; cloud:
    replica x sequences x A / b GPU-seconds at the GPU's hourly price."""
    s, c = cand.shape, cand.coeffs
    g = scenario.catalog.gpu(s.gpu)
    lo, hi = bounds if bounds is not None else dp_bounds(scenario, cand)  # bounds: dp_bounds'
    hi = max(1, hi)
    b = s.micro_batch
    if scenario.objective == "time":
        w_hi = (
            _down(scenario.ceiling_tokens / scenario.seq_len)
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
        d_min = max(0.0, d_min - scenario.assumptions.dp_overlap * c.backward_mb_s)
        opt = c.optimizer_s / (hi * c.cp)
        per_seq = stage_time_lower(cand) / (b * hi) + (c.bubble_s + d_min + opt) / (b * w_hi)
        return per_seq * scenario.sequences / 86400.0
    if scenario.capex_charged_in_full:
        count = lo * s.replica_gpus
        servers = -(-count // g.server.gpus_per_server)
        cents = count * usd_to_cents_up(g.price_usd) + servers * server_cents_lower(scenario, g)
        return cents / 100.0
    if scenario.pricing == "tco":
        return 0.0  # a lifetime share of capex plus energy: no cheap bound
    gpu_s = s.replica_gpus * scenario.sequences * stage_time_lower(cand) / b
    return gpu_s / 3600.0 * g.cloud_usd_per_gpu_hour
