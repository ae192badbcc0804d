"""The best (DP degree, micro-batches per step, NIC type and count, purchases) of one shape,
evaluated on a numpy grid with the float model: the exhaustive solver's kernel
(solvers/exhaustive.py, every m and NIC option) and, in its fast form, the heuristic
that seeds CP-SAT (solvers/screen/prune.py warm start).

Here, below both, so that the CP-SAT side does not import the exhaustive solver (issue 32:
solvers/ in at most 7 import floors); the docstring of solvers/exhaustive.py says what it
checks and which dominance arguments it does not use."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from models.batch_tokens import token_multiplier
from models.cost import bought_gpus, cluster_totals, purchases_cents, tco_usd, usd_to_cents_up
from models.feasibility import TOL
from models.goodput import with_purchases
from models.pipeline import microbatch_step
from models.rental import by_the_hour
from models.step import step_from_coefficients
from models.units import days_from_seconds
from solvers.decisions import Config
from solvers.families import REGISTRY, active, nic_dominance
from solvers.families.base import Family, Grid
from solvers.scenario import GPU_CAP, PreparedQuestion, Scenario

if TYPE_CHECKING:
    from solvers.space import Candidate

MAX_PAIRS = 20_000_000


def batch_bounds(
    scenario: Scenario,
    q: PreparedQuestion,
    micro_batch: int,
    dps: np.ndarray,
    pp: int,
    vp: int = 1,
):
    """Largest and smallest micro-batches per step for each DP degree."""
    cap = batch_cap_seq(scenario, q)
    if cap is not None:
        m_hi = cap // (micro_batch * dps)
    else:
        m_hi = np.full_like(dps, GPU_CAP)
    m_lo = np.ones_like(dps)
    if (active(scenario, "pipeline_fill") or vp > 1) and pp > 1:  # interleaving always needs m >= p
        m_lo = np.maximum(m_lo, pp)
    if active(scenario, "batch_floor"):
        floor_seq = math.ceil(scenario.floor_tokens / scenario.seq_len - TOL)
        m_lo = np.maximum(m_lo, -(-floor_seq // (micro_batch * dps)))
    step = microbatch_step(pp, vp)  # the interleaved schedule: m a multiple of p
    m_hi, m_lo = m_hi // step * step, -(-m_lo // step) * step
    return m_hi, m_lo


def batch_cap_seq(scenario: Scenario, q: PreparedQuestion) -> int | None:
    """The largest global batch in sequences: the enforced ceiling's and the batch-tokens
    model's (Scenario.model_batch_cap_seq), None without either."""
    caps = []
    if active(scenario, "batch_ceiling"):
        caps.append(math.floor(scenario.ceiling_tokens / scenario.seq_len + TOL))
    if q.model_batch_cap_seq is not None:
        caps.append(q.model_batch_cap_seq)
    return min(caps) if caps else None


def dp_upper(scenario: Scenario, q: PreparedQuestion, cand: Candidate, gpu_price_cents: int) -> int:
    shape = cand.shape
    hi = GPU_CAP // shape.replica_gpus
    cap = q.gpu_caps[shape.gpu] if active(scenario, "max_gpus") else None
    if cap is not None:
        hi = min(hi, cap // shape.replica_gpus)
    cap_seq = batch_cap_seq(scenario, q)
    if cap_seq is not None:
        m_min = (
            shape.pp
            if ((active(scenario, "pipeline_fill") or shape.vp > 1) and shape.pp > 1)
            else 1
        )
        hi = min(hi, cap_seq // (shape.micro_batch * m_min))
    if active(scenario, "budget") and q.capex_charged_in_full:
        hi = min(hi, int(scenario.budget * 100 // (gpu_price_cents * shape.replica_gpus)))
    return hi


def checked_families(scenario: Scenario) -> list[Family]:
    """The active families whose ``admits`` the search applies to its pairs: those its
    enumeration does not already keep within (Family.enumerated)."""
    return [f for f in REGISTRY if f.active(scenario) and not f.enumerated]


def _pairs(
    dps: np.ndarray,
    m_lo: np.ndarray,
    m_hi: np.ndarray,
    every_m: bool,
    at_critical: tuple[np.ndarray, ...] = (),
):
    """(d, m) pairs to evaluate: every admissible m for each d, or only the largest, and
    those of ``at_critical`` (_critical_m) where admissible and not the largest."""
    if not every_m:
        ds, ms = [dps], [m_hi]
        for near in at_critical:
            other = (near != m_hi) & (near >= m_lo) & (near <= m_hi)
            ds.append(dps[other])
            ms.append(near[other])
        return np.concatenate(ds), np.concatenate(ms)
    counts = np.maximum(0, m_hi - m_lo + 1)
    total = int(counts.sum())
    if total > MAX_PAIRS:  # a ceiling too high to enumerate under: the largest m, as above
        return dps, m_hi
    d_rep = np.repeat(dps, counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    m = np.repeat(m_lo, counts) + (np.arange(total) - starts)
    return d_rep, m


def _critical_m(
    q: PreparedQuestion, micro_batch: int, dps: np.ndarray, step: int
) -> tuple[np.ndarray, ...]:
    """For each d, the m (multiples of ``step``) on either side of the batch-tokens model's
    critical batch: the largest whose batch b m d stays within it (0 where none does) and
    the next (none with the model off).

    With the model on, the largest m is no longer the best: past the critical batch each
    step trains tokens the question does not need (models/batch_tokens.py), and with
    failures the restarts' share grows with the GPU-time that the extra tokens take. The
    warm start tries this m too, so that its incumbent is near the shape's best plan
    (agreement seed 189: 1.593 days with the largest m against the shape's 1.473, and a
    loose incumbent leaves CP-SAT's per-shape proof slow, solvers/cpsat/solve.py)."""
    if q.critical_batch_seq is None:
        return ()
    within = q.critical_batch_seq // (micro_batch * dps) // step * step
    return within, within + step


def _purchases(q: PreparedQuestion, gpu: str) -> list[tuple[float, float | None]]:
    """(spares per 100, storage GB/s or None: the facility's) pairs a plan may buy
    (solvers/purchases.py); only (0, None) when the question does not decide them."""
    if not q.decides_purchases[gpu]:
        return [(0.0, None)]
    return [(k, b) for k in q.spare_options[gpu] for b in q.storage_options[gpu]]


def _expected(
    scenario: Scenario, q: PreparedQuestion, gpu, gpus, ideal_days, cluster, spares, storage
):
    """Expected days, cost (cents and USD) and the cluster totals with the purchases, for
    every (d, m) pair: the days times 1 + overhead(G) of the failure model with them
    (models/goodput.py), the capex plus their price (models/cost.py purchases_cents)."""
    fac = scenario.catalog.facility
    failures = q.failure_models[gpu.name]
    totals = cluster
    if failures is not None and storage is not None:
        failures = with_purchases(failures, fac, spares, storage)
        servers = -(-bought_gpus(gpu, gpus) // gpu.server.gpus_per_server)
        extra = purchases_cents(gpu, fac, servers, spares, storage)
        totals = replace(cluster, capex_cents=cluster.capex_cents + extra)
    # expected wall time per ideal time: checkpoints, lost work, restarts (models/goodput.py)
    days = (
        ideal_days
        if failures is None
        else ideal_days * (1.0 + failures.overhead(gpus.astype(float)))
    )
    if scenario.pricing == "capex":
        cost_cents = totals.capex_cents
        cost = cost_cents / 100.0
    elif scenario.pricing == "tco":
        cost = tco_usd(totals.capex_cents / 100.0, totals.it_power_w, fac, days)
        cost_cents = cost * 100.0
    else:  # its term's rate for its billed days (models/rental.py); inf past the block's longest
        cost = (scenario.rental(gpu.name) or by_the_hour(gpu)).cost(gpus, days)
        cost_cents = cost * 100.0
    return days, cost_cents, cost, totals


def dp_range(scenario: Scenario, q: PreparedQuestion, cand: Candidate) -> tuple[int, int]:
    """The DP degrees the search sweeps for a shape: from its memory floor to dp_upper
    (empty when the first exceeds the second); every plan it admits lies in it."""
    gpu = scenario.catalog.gpu(cand.shape.gpu)
    return cand.dp_floor(scenario), dp_upper(scenario, q, cand, usd_to_cents_up(gpu.price_usd))


def best_for_candidate(
    scenario: Scenario,
    cand: Candidate,
    nics,
    dp_overlap: float,
    every_m: bool = False,
    prepared: PreparedQuestion | None = None,
):
    """The best (d, m, NIC type, NICs) for one shape, or None if none is feasible.

    ``every_m`` enumerates every micro-batch count and every NIC option (the
    reference solver); otherwise the largest m and, when renting, only the
    fastest NIC in every slot are tried (the dominance arguments; the CP-SAT
    warm start uses this fast form). ``prepared``: ``scenario.prepare()``, when the
    caller has it (once per solve)."""
    q = prepared if prepared is not None else scenario.prepare()
    shape, c = cand.shape, cand.coeffs
    gpu = scenario.catalog.gpu(shape.gpu)
    lo, hi = dp_range(scenario, q, cand)
    if hi < lo:
        return None
    dps = np.arange(lo, hi + 1, dtype=np.int64)
    m_hi, m_lo = batch_bounds(scenario, q, shape.micro_batch, dps, shape.pp, shape.vp)
    m_lo = np.maximum(m_lo, 1)
    # GPUs come in whole purchase units (servers, or NVL72 racks)
    ok_batch = (m_hi >= m_lo) & ((shape.replica_gpus * dps) % gpu.server.purchase_unit_gpus == 0)
    if shape.dp_step > 1:  # Megatron-Core's folding: EP x ETP divides TP x CP x DP (ep_domain)
        ok_batch &= dps % shape.dp_step == 0
    if not ok_batch.any():
        return None
    # no ceiling: m runs to GPU_CAP, and the largest is best (module docstring)
    every_m = every_m and batch_cap_seq(scenario, q) is not None
    dps = dps[ok_batch]
    at_crit = _critical_m(q, shape.micro_batch, dps, microbatch_step(shape.pp, shape.vp))
    dps, m = _pairs(dps, m_lo[ok_batch], m_hi[ok_batch], every_m, at_crit)
    keep = m % microbatch_step(shape.pp, shape.vp) == 0  # every m enumerated: the multiples
    dps, m = dps[keep], m[keep]
    gpus = shape.replica_gpus * dps
    takes = {n.name for n in q.nics_for[gpu.name]}
    fitting = [nic for nic in nics if nic.name in takes]
    counts = q.nic_counts[gpu.name]
    options = [(nic, k) for nic in fitting for k in counts]
    if nic_dominance(scenario) and not every_m and fitting:
        fastest = max(fitting, key=lambda nc: (nc.speed_gbit_per_s, nc.name))
        options = [(fastest, max(counts))]
    cat = scenario.catalog
    families = checked_families(scenario)
    best = None
    for nic, k in options:
        cluster = cluster_totals(gpu, nic, cat.switch_for(nic), cat.facility, gpus, k)
        parts = step_from_coefficients(c, dps, m, k * nic.bw_gb_per_s_per_direction, dp_overlap)
        tau = sum(parts.as_dict().values())
        batch = shape.micro_batch * m * dps
        tokens_x = token_multiplier(
            batch, q.critical_batch_seq
        )  # the batch's tokens (models/batch_tokens.py)
        ideal = days_from_seconds(tau / batch * q.sequences * tokens_x)
        for spares, storage in _purchases(q, gpu.name):
            days, cost_cents, cost, totals = _expected(
                scenario, q, gpu, gpus, ideal, cluster, spares, storage
            )
            grid = Grid(cand, gpu, k, dps, m, gpus, days, cost_cents, totals)
            ok = np.isfinite(cost)  # renting: a job past the block's longest cannot rent it
            for family in families:  # every enforced family, each by its own check
                ok &= family.admits(scenario, grid)
            if not ok.any():
                continue
            objective = days if scenario.objective == "time" else cost
            secondary = cost if scenario.objective == "time" else days  # (solvers/tie_rule.py)
            idx = np.flatnonzero(ok)
            order = np.lexsort((gpus[idx], secondary[idx], objective[idx]))
            i = idx[order[0]]
            buys = (spares, storage or 0.0)
            key = (float(objective[i]), float(secondary[i]), int(gpus[i]), buys, shape, nic.name, k)
            if best is None or key < best[0]:
                cfg = Config(shape, nic.name, k, int(dps[i]), int(m[i]), spares, storage)
                best = (key, cfg)
    return best
