"""Valid bounds per shape, from the model's own numbers.

Used three ways: as redundant cuts in the CP-SAT model, as its presolve
(shapes whose DP range is empty cannot be chosen), and by the explanation code
to skip re-solves that cannot improve the objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from models.batch_tokens import token_multiplier
from models.comm import nic_share
from models.cost import (
    cluster_totals,
    energy_usd,
    link_cents,
    nic_power_w,
    server_power_w,
    servers_per_rack,
    switch_power_w,
    usd_to_cents_up,
)
from models.evaluate import cloud_usd
from models.goodput import with_purchases
from models.step import group_reduce_s, nic_stage_mb_s
from models.units import days_from_seconds, seconds_from_days
from solvers.families import REGISTRY, active
from solvers.intmath import down
from solvers.purchases import spare_options, storage_options
from solvers.scenario import GPU_CAP, Scenario, nic_specs

if TYPE_CHECKING:
    from solvers.space import Candidate


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


def least_per_gpu(scenario: Scenario, gpu) -> tuple[float, float]:
    """The least capex (USD) and IT power (W) per GPU of this type at any cluster size
    (each the least over the NIC options of per_gpu_rates)."""
    rates = per_gpu_rates(scenario, gpu, False)
    return min(r[2] for r in rates), min(r[3] for r in rates)


def per_gpu_rates(scenario: Scenario, gpu, several_servers: bool) -> list[tuple]:
    """(NIC, NICs per server, least capex USD per GPU, least IT watts per GPU) per NIC option.

    A server holds at most ``gpus_per_server`` GPUs and its k NICs, a rack at most
    ``servers_per_rack`` of them (models/cost.py); across several servers every NIC is
    one end of a link and takes a switch port, so the fabric adds at least a link
    and 1/ports of a switch per NIC. So a cluster of G GPUs with these NICs costs at
    least G times the capex and draws at least G times the watts."""
    key = ("per_gpu_rates", gpu.name, several_servers)
    if key not in scenario.memo:
        cat, fac = scenario.catalog, scenario.catalog.facility
        gpn = gpu.server.gpus_per_server
        out = []
        for nic in scenario.nics_for(gpu.name):  # the NICs and counts its server takes
            switch = cat.switch_for(nic)
            port_cents = link_cents(nic) + usd_to_cents_up(switch.price_usd) / switch.ports
            port_w = switch_power_w(switch) / switch.ports
            for k in scenario.nic_counts(gpu.name):
                nic_w = k * nic_power_w(nic)
                spr = servers_per_rack(gpu, fac, nic_w)
                per_server = float(
                    usd_to_cents_up(gpu.server.overhead_usd) + k * usd_to_cents_up(nic.price_usd)
                )
                watts = float(server_power_w(gpu) + nic_w)
                if several_servers:
                    per_server += k * port_cents
                    watts += k * port_w
                cents = (
                    usd_to_cents_up(gpu.price_usd)
                    + per_server / gpn
                    + usd_to_cents_up(fac.rack_usd) / (gpn * spr)
                )
                out.append((nic, k, cents / 100.0 * (1 - 1e-12), watts / gpn * (1 - 1e-12)))
        scenario.memo[key] = out
    return scenario.memo[key]


def tco_lower_bound(scenario: Scenario, cand: Candidate, lo: int, exact: bool = True) -> float:
    """TCO (USD) no plan of this shape beats with DP degree at least ``lo``.

    Per NIC option (per_gpu_rates), the job takes at least sequences x
    gpu_seconds_per_sequence GPU-seconds with that option's bandwidth; energy and a
    lifetime's capex share both grow with GPUs x days, so they are at least that many
    GPU-days at the option's least watts and capex per GPU. Capex charged in full:
    the least capex at the smallest DP degree (least_capex_cents) plus that energy.
    ``exact=False``: the GEMM time alone and the least rates (no step coefficients)."""
    s = cand.shape
    g = scenario.catalog.gpu(s.gpu)
    fac = scenario.catalog.facility
    several = lo * s.replica_gpus > g.server.gpus_per_server
    if exact:
        options = [
            (
                gpu_seconds_per_sequence(
                    scenario, cand, lo, k * nic.speed_gbit_per_s / 8.0, several
                ),
                usd,
                w,
            )
            for nic, k, usd, w in per_gpu_rates(scenario, g, several)
        ]
    else:
        usd, w = least_per_gpu(scenario, g)
        options = [(s.replica_gpus * cand.gemm_mb_s / s.micro_batch, usd, w)]
    best = math.inf
    for gpu_s, usd, watts in options:
        gpu_days = days_from_seconds(scenario.sequences * gpu_s)
        cost = float(energy_usd(watts, fac, gpu_days))
        if fac.lifetime_years is not None:
            cost += gpu_days * usd / (365.0 * fac.lifetime_years)
        best = min(best, cost * (1 - 1e-9))
    if fac.lifetime_years is None:
        best += _least_capex_usd(scenario, g, lo * s.replica_gpus)
    return best


def _least_capex_usd(scenario: Scenario, gpu, num_gpus: int) -> float:
    key = ("least_capex_cents", gpu.name, num_gpus)
    if key not in scenario.memo:
        scenario.memo[key] = int(least_capex_cents(scenario, gpu, num_gpus))
    return scenario.memo[key] / 100.0


def warm_least_capex(scenario: Scenario, wanted: list[tuple[str, int]]) -> None:
    """Fill _least_capex_usd's memo for many (GPU type, GPU count) pairs at once: one
    vectorised least_capex_cents per GPU type instead of one call per count (the same
    formula on an array; a cost bound over thousands of shapes asks for hundreds)."""
    by_gpu: dict[str, set[int]] = {}
    for name, num_gpus in wanted:
        if ("least_capex_cents", name, num_gpus) not in scenario.memo:
            by_gpu.setdefault(name, set()).add(num_gpus)
    for name, counts in by_gpu.items():
        sizes = np.array(sorted(counts), dtype=np.int64)
        cents = np.atleast_1d(least_capex_cents(scenario, scenario.catalog.gpu(name), sizes))
        for n, c in zip(sizes.tolist(), cents.tolist(), strict=True):
            scenario.memo["least_capex_cents", name, n] = int(c)


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


def stage_time_lower(cand: Candidate, node_gb_s: float | None = None) -> float:
    """A micro-batch's time through the slowest stage, the cheaper of both send regimes;
    with ``node_gb_s`` (the most scale-out GB/s a server of the shape may have), also the
    expert dispatch and ring attention that cross the NICs, at that bandwidth
    (models.step.nic_stage_mb_s: it only falls as the bandwidth grows)."""
    c = cand.coeffs
    stage = min(
        c.stage_mb_s + 2 * c.vp * c.pp_send_intra_s, c.stage_mb_s + 2 * c.vp * c.pp_latency_s
    )
    if node_gb_s and (c.ep_crosses_nics or c.cp_crosses_nics):
        share = nic_share(node_gb_s, c.gpus_per_node, c.network_efficiency)
        stage += float(nic_stage_mb_s(c, share))
    return stage


def dp_bounds(scenario: Scenario, cand: Candidate) -> tuple[int, int]:
    """The DP range one shape admits under the enforced families.

    Lower: the memory shard that fits; the deadline, since a sequence takes at
    least A / (b d) (A the cheaper regime's stage time). Upper: the GPU cap; the
    batch ceiling with the fewest micro-batches; under a capex budget, the most
    GPUs whose least capex fits it (budget_gpu_limit); the site limits. The parts that
    depend on the question (and the GPU) alone are computed once (dp_limits). The range
    is empty when a cloud or TCO budget prices the shape out (priced_out) or the
    deadline finds it too slow at its upper end (too_slow). Both ends are multiples of
    dp_step: GPUs are bought in whole servers or racks."""
    s = cand.shape
    per_day, ceiling_seqs, fill, gpu_hi = dp_limits(scenario, s.gpu)
    lo = cand.dp_floor(scenario)
    if per_day is not None:
        need = per_day * stage_time_lower(cand) / s.micro_batch
        lo = max(lo, math.floor(need * (1 - 1e-9)))
    hi = gpu_hi // s.replica_gpus
    if ceiling_seqs is not None:
        m_min = s.pp if ((fill or s.vp > 1) and s.pp > 1) else 1
        hi = min(hi, ceiling_seqs // (s.micro_batch * m_min))
    step = dp_step(scenario, cand)  # whole purchase units; MoE: the folding's step too
    lo, hi = -(-max(1, lo) // step) * step, hi // step * step
    if lo <= hi and (priced_out(scenario, cand, lo) or too_slow(scenario, cand, hi)):
        hi = 0  # a cloud or TCO budget, or the deadline, rules the shape out
    return lo, hi


def dp_step(scenario: Scenario, cand: Candidate) -> int:
    """The DP degrees a shape can take are the multiples of this: replica x d GPUs come
    in whole purchase units (servers, or NVL72 racks; catalog ServerSpec), so d is a
    multiple of unit / gcd(replica, unit); an MoE shape's d is also a multiple of its
    expert folding's step (Shape.dp_step, ep_domain). Their least common multiple."""
    unit = scenario.catalog.gpu(cand.shape.gpu).server.purchase_unit_gpus
    return math.lcm(unit // math.gcd(cand.shape.replica_gpus, unit), cand.shape.dp_step)


def dp_limits(scenario: Scenario, gpu_name: str) -> tuple[float | None, int | None, bool, int]:
    """dp_bounds' terms of the question and one GPU type: sequences per second of the
    deadline (None without one), the batch ceiling in sequences (None without one),
    whether pipeline_fill is enforced, and the most GPUs of the type (GPU cap, capex
    budget, site limits)."""
    key = ("dp_limits", gpu_name)
    if key not in scenario.memo:
        g = scenario.catalog.gpu(gpu_name)
        per_day = None
        if active(scenario, "deadline"):
            per_day = scenario.sequences / seconds_from_days(scenario.deadline)
        ceiling = None
        if active(scenario, "batch_ceiling"):
            ceiling = down(scenario.ceiling_tokens / scenario.seq_len)
        gpu_hi = GPU_CAP
        cap = scenario.gpu_cap(gpu_name) if active(scenario, "max_gpus") else None
        if cap is not None:
            gpu_hi = min(gpu_hi, cap)
        if active(scenario, "budget") and scenario.capex_charged_in_full:
            gpu_hi = min(gpu_hi, budget_gpu_limit(scenario, g))
        gpu_hi = min(gpu_hi, site_gpu_limit(scenario, g))
        scenario.memo[key] = (per_day, ceiling, active(scenario, "pipeline_fill"), gpu_hi)
    return scenario.memo[key]


def site_gpu_limit(scenario: Scenario, gpu) -> int:
    """The most GPUs of this type the active families' site limits allow (the power cap,
    the rack cap: each family's ``gpu_limit``, solvers/families/)."""
    key = ("site_gpu_limit", gpu.name)
    if key not in scenario.memo:
        limit = GPU_CAP
        for family in REGISTRY:
            if family.active(scenario):
                found = family.gpu_limit(scenario, gpu, least_per_gpu)
                if found is not None:
                    limit = min(limit, found)
        scenario.memo[key] = limit
    return scenario.memo[key]


class _TimeTerms(NamedTuple):
    """What the time bounds read from the question for the shapes of one GPU type."""

    sequences: float
    ceiling_seqs: int | None  # the enforced batch ceiling in sequences; None: none
    node_gb_s: float | None  # every NIC slot of the fastest NIC the server takes (None: no NIC)
    dp_overlap: float
    critical_seqs: int | None = None  # the batch-tokens model's critical batch (None: off)

    def tokens_x(self, batch_seqs):
        """f(B): tokens per question token at a global batch of B sequences
        (models.batch_tokens.token_multiplier; 1 with the model off). f(B) / B does not
        increase with B, which is what makes the time bounds' products valid."""
        if self.critical_seqs is None:
            return batch_seqs * 0 + 1.0
        return token_multiplier(batch_seqs, self.critical_seqs)


def _time_terms(scenario: Scenario, gpu_name: str) -> _TimeTerms:
    key = ("time_terms", gpu_name)
    if key not in scenario.memo:
        fitting = scenario.nics_for(gpu_name) or nic_specs(scenario)
        node_gb_s = _most_node_gb_s(scenario, gpu_name) if fitting else None
        ceiling = (
            down(scenario.ceiling_tokens / scenario.seq_len)
            if active(scenario, "batch_ceiling")
            else None
        )
        scenario.memo[key] = _TimeTerms(
            scenario.sequences,
            ceiling,
            node_gb_s,
            scenario.assumptions.dp_overlap,
            scenario.critical_batch_seq,
        )
    return scenario.memo[key]


def _step_fixed_lower(
    scenario: Scenario, cand: Candidate, node_gb_s: float | None = None
) -> tuple[float, float, float]:
    """A step's parts not proportional to the micro-batches, at their least, and the most
    micro-batches per step W_hi: (C + D_min, O, W_hi), with C the bubble, D_min the
    exposed gradient reduction at the smallest DP degree (it grows with the degree)
    over ``node_gb_s`` of scale-out bandwidth per server (default: every NIC slot of
    the fastest NIC its server takes, at its most NICs), O the unsharded optimizer step."""
    terms = _time_terms(scenario, cand.shape.gpu)
    return _fixed_lower(cand, cand.dp_floor(scenario), terms, node_gb_s)


def _fixed_lower(
    cand: Candidate, floor: int, terms: _TimeTerms, node_gb_s: float | None = None
) -> tuple[float, float, float]:
    """_step_fixed_lower of a shape whose smallest DP degree is ``floor``, from the
    question's terms alone."""
    s, c = cand.shape, cand.coeffs
    w_hi = (  # micro-batches per step: b x W sequences fit the ceiling
        terms.ceiling_seqs // s.micro_batch if terms.ceiling_seqs is not None else GPU_CAP**2
    )
    if node_gb_s is None:
        node_gb_s = terms.node_gb_s
    d_min = float(group_reduce_s(c, c.dp_bytes, floor * c.cp, node_gb_s))
    d_min = max(0.0, d_min - c.dp_window_s(terms.dp_overlap))
    return c.bubble_s + d_min, c.optimizer_s, max(1, w_hi)


def _most_node_gb_s(scenario: Scenario, gpu_name: str) -> float:
    """Scale-out GB/s per server at its most NICs of the fastest NIC it takes."""
    key = ("most_node_gb_s", gpu_name)
    if key not in scenario.memo:
        fitting = scenario.nics_for(gpu_name) or nic_specs(scenario)
        fastest = max(n.speed_gbit_per_s for n in fitting) / 8.0
        scenario.memo[key] = max(scenario.nic_counts(gpu_name)) * fastest
    return scenario.memo[key]


def gpu_seconds_per_sequence(
    scenario: Scenario,
    cand: Candidate,
    lo: int,
    node_gb_s: float | None = None,
    several_servers: bool = False,
) -> float:
    """GPU-seconds per trained sequence no plan of this shape beats with d >= ``lo``
    (and ``node_gb_s`` of scale-out bandwidth per server, _step_fixed_lower):
    G x step / (b m d) = replica x (A + (d (C + D) + O / cp) / W) / b >= replica x
    (A + (lo (C + D_min) + O / cp) / W_hi) / b. ``several_servers``: the job spans
    servers for every d >= lo, so pipeline sends cross the NICs at ``node_gb_s``
    (models.step.step_from_coefficients)."""
    c = cand.coeffs
    fixed, opt, w_hi = _step_fixed_lower(scenario, cand, node_gb_s)
    stage = stage_time_lower(cand)
    if several_servers and node_gb_s and c.pp > 1:
        share = nic_share(node_gb_s, c.gpus_per_node, c.network_efficiency)
        send = c.pp_send_bytes / share + c.pp_latency_s
        stage = c.stage_mb_s + 2 * c.vp * send
        fixed += 2 * (c.pp - 1) * send
    per_mb = stage + (lo * fixed + opt / c.cp) / w_hi
    return cand.shape.replica_gpus * per_mb / cand.shape.micro_batch


def objective_lower_bound(
    scenario: Scenario, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A value the objective cannot beat with this shape (days, or USD), whatever d, m and NICs are.

    Time: T = sequences x f(b m d) x (m A + C + D + O/g) / (b m d) >= sequences x
    (A f(b d_max) / (b d_max) + (C + D_min + O / g_max) f(b W_max) / (b W_max)), f the
    batch's token multiplier (_TimeTerms.tokens_x: f(B) >= f(b d) and f(B) / B does not
    increase), with D_min the gradient reduction at the
    smallest DP degree over every NIC slot of the fastest NIC; with failures, the
    expected time's (expected_time_lower_bound: the objective is the expected time, and
    the failures' overhead can be several times the ideal time). Cost: the least
    capex at the smallest DP degree (least_capex_cents); cloud: sequences x
    gpu_seconds_per_sequence at the GPU's hourly price; TCO: tco_lower_bound."""
    lo, hi = bounds if bounds is not None else dp_bounds(scenario, cand)  # bounds: dp_bounds'
    hi = max(1, hi)
    key = ("objective_lower_bound", cand.shape, lo, hi)  # a probe and its re-solve share it
    if key not in scenario.memo:
        if scenario.objective == "time":
            scenario.memo[key] = expected_time_lower_bound(scenario, cand, hi)
        else:
            scenario.memo[key] = cost_lower_bound(scenario, cand, lo)
    return scenario.memo[key]


def time_lower_bound(scenario: Scenario, cand: Candidate, hi: int) -> float:
    """The least time (days) of any plan of this shape with d <= ``hi``: sequences x
    (A / (b hi) + (C + D_min + O / (hi cp)) / (b W_max)) (objective_lower_bound)."""
    return _time_lower(cand, hi, cand.dp_floor(scenario), _time_terms(scenario, cand.shape.gpu))


def _time_lower(cand: Candidate, hi: int, floor: int, terms: _TimeTerms) -> float:
    """time_lower_bound from the question's terms alone (``floor``: the shape's smallest
    DP degree)."""
    b = cand.shape.micro_batch
    fixed, opt, w_hi = _fixed_lower(cand, floor, terms)
    stage = stage_time_lower(cand, terms.node_gb_s)
    rest = (fixed + opt / (hi * cand.coeffs.cp)) / (b * w_hi) * terms.tokens_x(b * w_hi)
    per_seq = stage / (b * hi) * terms.tokens_x(b * hi) + rest
    return days_from_seconds(per_seq * terms.sequences)


def too_slow(scenario: Scenario, cand: Candidate, hi: int) -> bool:
    """Whether the enforced deadline rules out every plan of this shape with d <= ``hi``:
    its least time, by the GEMM-only bound first (gemm_lower_bound's, cheap) and then
    expected_time_lower_bound, exceeds the deadline. (The deadline's lower end of the DP range
    counts the stage time alone; this counts the bubble, the gradient reduction and the
    optimizer step too, at the most DP degrees and micro-batches the range allows.)

    Within shared_bounds, the answer is shared by every question whose terms are the same
    (the key holds every input _too_slow_of reads)."""
    if not active(scenario, "deadline"):
        return False
    key = ("too_slow", cand.shape, hi)
    if key not in scenario.memo:
        scenario.memo[key] = _too_slow_in(scenario, cand, hi, _table("too_slow", scenario, cand))
    return scenario.memo[key]


def _too_slow_in(scenario: Scenario, cand: Candidate, hi: int, table: dict | None) -> bool:
    """too_slow, found in (or added to) a shared table of the question's terms when there
    is one (_table: keyed by the shape's root candidate, ``hi`` and its DP floor)."""
    key = _shape_key("too_slow", scenario, cand, hi)
    if table is not None:
        found = table.get(key)
        if found is not None:
            return found
    # its inputs are the keys' parts themselves: a key holds every one by construction
    _, limit, terms, overhead = _table_key("too_slow", scenario, cand.shape.gpu)
    _, _, floor = key
    found = _too_slow_of(cand, hi, floor, limit, terms, overhead)
    if table is not None:
        table[key] = found
    return found


def _too_slow_of(
    cand: Candidate,
    hi: int,
    floor: int,
    limit: float,
    terms: _TimeTerms,
    overhead: tuple[float, float] | None,
) -> bool:
    """too_slow from its inputs alone: the deadline (``limit`` days, its tolerance
    included), the question's terms, the least failure overhead on the shape's GPU."""
    s = cand.shape
    gemm = days_from_seconds(terms.sequences * cand.gemm_mb_s / (s.micro_batch * max(1, hi)))
    return bool(
        gemm > limit
        or _gemm_too_slow(
            terms.sequences, limit, overhead, cand.gemm_mb_s, s.micro_batch, s.replica_gpus, hi
        )
        or _expected_time_lower(cand, hi, floor, terms, overhead) > limit
    )


def too_slow_by_gemm(scenario: Scenario, gpu: str, gemm_mb_s, micro_batch, replica_gpus, hi):
    """A sufficient test for too_slow that needs no step coefficients (element-wise on
    numpy arrays of shapes on ``gpu``): expected_time_lower_bound with the GEMM time G
    for the stage time A (A >= G: models.step.StepCoefficients.stage_mb_s adds
    non-negative terms to G) and sequences x G / (b hi) for the ideal time (which
    time_lower_bound's other terms only raise), so (1 + a) sequences G / (b hi) +
    c replica sequences G / b, with (a, c) of _least_overhead, never exceeds it. Less
    1e-12 of itself (the rounding of the operations done in another order), it
    exceeding the deadline rules the shape out without the performance model's step
    time (presolve tests it on every shape a reduced question lets through)."""
    return _gemm_too_slow(
        scenario.sequences,
        scenario.deadline * (1 + 1e-9),
        _least_overhead(scenario, gpu),
        gemm_mb_s,
        micro_batch,
        replica_gpus,
        hi,
    )


def _gemm_too_slow(sequences, limit, overhead, gemm_mb_s, micro_batch, replica_gpus, hi):
    """too_slow_by_gemm from its inputs alone."""
    a, c = overhead if overhead is not None else (0.0, 0.0)
    ideal = days_from_seconds(sequences * gemm_mb_s / (micro_batch * np.maximum(1, hi)))
    gpu_days = days_from_seconds(replica_gpus * sequences * gemm_mb_s / micro_batch)
    return ((1.0 + a) * ideal + c * gpu_days) * (1 - 1e-12) > limit


def expected_time_lower_bound(scenario: Scenario, cand: Candidate, hi: int) -> float:
    """time_lower_bound with failures, checkpoints and restarts (models/goodput.py): the
    expected time T (1 + x/G + a + c G) >= (1 + a) T_lb(hi) + c G T, and G T >= replica x
    sequences x A / b whatever d is (G = replica x d GPUs, T >= sequences x A / (b d),
    A the stage time of one micro-batch): the restarts' share grows with the GPUs as the
    time falls, so a deadline rules out shapes that only a huge cluster would meet. With
    the most hot spares and the fastest checkpoint storage a plan may buy."""
    gpu = cand.shape.gpu
    return _expected_time_lower(
        cand,
        hi,
        cand.dp_floor(scenario),
        _time_terms(scenario, gpu),
        _least_overhead(scenario, gpu),
    )


def _expected_time_lower(
    cand: Candidate,
    hi: int,
    floor: int,
    terms: _TimeTerms,
    overhead: tuple[float, float] | None,
) -> float:
    """expected_time_lower_bound from its inputs alone (``overhead``: _least_overhead)."""
    ideal = _time_lower(cand, hi, floor, terms)
    if overhead is None:
        return ideal
    a, c = overhead
    s = cand.shape
    gpu_days = days_from_seconds(
        s.replica_gpus * terms.sequences * stage_time_lower(cand) / s.micro_batch
    )
    return (1.0 + a) * ideal + c * gpu_days


def _least_overhead(scenario: Scenario, gpu: str) -> tuple[float, float] | None:
    """(a, c) of the failure overhead x/G + a + c G on ``gpu`` with the most a plan may buy
    (solvers/purchases.py): more spares only lower c, faster storage only lowers a (the
    reload, and the interval that the write bounds). None: the ideal model. Once per GPU
    type (a deadline's presolve asks for every shape)."""
    key = ("least_overhead", gpu)
    if key not in scenario.memo:
        model = scenario.failure_model(gpu)
        found = None
        if model is not None:
            best = with_purchases(
                model,
                scenario.catalog.facility,
                max(spare_options(scenario, gpu)),
                max(storage_options(scenario, gpu)),
            )
            _, a, c = best.coefficients()
            found = (a, c)
        scenario.memo[key] = found
    return scenario.memo[key]


def cost_lower_bound(scenario: Scenario, cand: Candidate, lo: int) -> float:
    """The least cost (USD, in the question's pricing) of any plan of this shape with
    d >= ``lo``: capex charged in full, the least capex of lo x replica GPUs
    (least_capex_cents); cloud, sequences x gpu_seconds_per_sequence at the GPU's hourly
    price; TCO, tco_lower_bound."""
    s = cand.shape
    g = scenario.catalog.gpu(s.gpu)
    if scenario.pricing == "tco":
        return tco_lower_bound(scenario, cand, lo)
    if scenario.capex_charged_in_full:
        return _least_capex_usd(scenario, g, lo * s.replica_gpus)
    gpu_s = scenario.sequences * gpu_seconds_per_sequence(scenario, cand, lo)
    return cloud_usd(1, days_from_seconds(gpu_s), g)


def priced_out(scenario: Scenario, cand: Candidate, lo: int) -> bool:
    """Whether the enforced budget rules out every plan of this shape with d >= ``lo``
    when the cost grows with the GPU-time (cloud, TCO): its least cost by the GEMM-only
    bound (gemm_lower_bound's) exceeds the budget. That bound needs no step
    coefficients; cost_lower_bound's exact one would, for every shape the budget is
    tested on (explanations test thousands, each time a family is dropped), and the
    CP-SAT model carries it anyway as a cut. Capex charged in full is bounded by
    budget_gpu_limit instead (dp_limits)."""
    if not active(scenario, "budget") or scenario.pricing == "capex":
        return False
    key = ("priced_out", cand.shape, lo)
    if key not in scenario.memo:
        table = _table("priced_out", scenario, cand)
        scenario.memo[key] = _priced_out_in(scenario, cand, lo, table)
    return scenario.memo[key]


def _priced_out_in(scenario: Scenario, cand: Candidate, lo: int, table: dict | None) -> bool:
    """priced_out, found in (or added to) a shared table of the question's terms when
    there is one (_table: keyed by the shape's root candidate and ``lo``)."""
    key = _shape_key("priced_out", scenario, cand, lo)
    if table is not None:
        found = table.get(key)
        if found is not None:
            return found
    found = bool(_cost_gemm_lower_bound(scenario, cand, lo) > scenario.budget * (1 + 1e-9))
    if table is not None:
        table[key] = found
    return found


def ruled_out(
    scenario: Scenario, cands: list[Candidate], lows: list[int], highs: list[int]
) -> list[bool]:
    """dp_bounds' last rule for many shapes (each with its DP range): priced_out or
    too_slow. Within shared_bounds, each GPU type's shared tables are found once."""
    budget = active(scenario, "budget") and scenario.pricing != "capex"
    deadline = active(scenario, "deadline")
    priced: dict[str, dict | None] = {}
    slow: dict[str, dict | None] = {}
    out = []
    for cand, lo, hi in zip(cands, lows, highs, strict=True):
        gpu = cand.shape.gpu
        if budget:
            if gpu not in priced:
                priced[gpu] = _table("priced_out", scenario, cand)
            if _priced_out_in(scenario, cand, lo, priced[gpu]):
                out.append(True)
                continue
        if deadline:
            if gpu not in slow:
                slow[gpu] = _table("too_slow", scenario, cand)
            out.append(_too_slow_in(scenario, cand, hi, slow[gpu]))
        else:
            out.append(False)
    return out


def _table(kind: str, scenario: Scenario, cand: Candidate) -> dict | None:
    """Within shared_bounds, the table of too_slow's or priced_out's answers shared by
    every question whose inputs to it are the same as this one's for ``cand``'s GPU
    type (the limit and _time_terms and _least_overhead, or _cost_terms); None outside."""
    shared = _SHARED.get()
    if shared is None:
        return None
    key = _table_key(kind, scenario, cand.shape.gpu)
    table = shared.get(key)
    if table is None:
        table = shared[key] = {}
    return table


def _shape_key(kind: str, scenario: Scenario, cand: Candidate, end: int) -> tuple:
    """A shape's key within a _table: its root candidate (the step coefficients and GEMM
    time), the DP end the bound is taken at, and too_slow's DP floor (the gradient
    reduction at the smallest degree; it moves with memory and its scale)."""
    if kind == "priced_out":
        return (_root(cand), end)
    return (_root(cand), end, cand.dp_floor(scenario))


def _table_key(kind: str, scenario: Scenario, gpu: str) -> tuple:
    """What too_slow (``kind`` "too_slow") or priced_out reads of the question for the
    shapes of one GPU type: a table's answers hold for every question with this key
    (within the table, a shape's own key: its root candidate and DP end, and too_slow's
    DP floor)."""
    if kind == "priced_out":
        return (kind, scenario.budget * (1 + 1e-9), _cost_terms(scenario, gpu))
    limit = scenario.deadline * (1 + 1e-9)
    return (kind, limit, _time_terms(scenario, gpu), _least_overhead(scenario, gpu))


def _cost_terms(scenario: Scenario, gpu_name: str) -> tuple:
    """Every input of _cost_gemm_lower_bound besides the shape and ``lo``: the catalog
    (the GPU's prices and power, the facility, NICs and switches: held by identity),
    the pricing and the sequences; under TCO, the least capex and watts per GPU
    (least_per_gpu), and without a lifetime what least_capex_cents reads of the
    question's NICs (the fitting ones, else the question's, and the fewest per server)."""
    key = ("cost_terms", gpu_name)
    if key not in scenario.memo:
        terms: tuple = (_Same(scenario.catalog), scenario.pricing, scenario.sequences)
        if scenario.pricing == "tco":
            gpu = scenario.catalog.gpu(gpu_name)
            terms += (least_per_gpu(scenario, gpu),)
            if scenario.catalog.facility.lifetime_years is None:
                fitting = scenario.nics_for(gpu_name) or nic_specs(scenario)
                terms += (tuple(n.name for n in fitting), min(scenario.nic_counts(gpu_name)))
        scenario.memo[key] = terms
    return scenario.memo[key]


class _Same:
    """An object compared by identity (and held alive) in a key."""

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


# per-shape bounds shared by the questions of one explanation (shared_bounds)
_SHARED: ContextVar[dict | None] = ContextVar("shared_bounds", default=None)


@contextmanager
def shared_bounds() -> Iterator[None]:
    """Within: too_slow and priced_out share their per-shape answers between questions,
    keyed by every input they read (the shape's own numbers through its root candidate,
    _root; the DP end; the limit; _time_terms or _cost_terms; the least failure
    overhead) rather than by the question. An explanation asks thousands of shapes the
    same thing under each question it derives (a family switched off, a limit moved):
    each answer is computed once. Outside, each question keeps its own (Scenario.memo)."""
    token = _SHARED.set({})
    try:
        yield
    finally:
        _SHARED.reset(token)


def _root(cand: Candidate) -> Candidate:
    """The candidate whose step coefficients and GEMM time ``cand`` shares (space.Candidate
    ``_origin``: the same shape under another memory scale)."""
    while cand._origin is not None:
        cand = cand._origin
    return cand


def gemm_lower_bound(
    scenario: Scenario, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A weaker bound than objective_lower_bound, and cheaper: it needs only the shape's
    GEMM time G, not its step coefficients.

    Time: sequences x G f(b d_max) / (b d_max) (f: _TimeTerms.tokens_x). Every other term of objective_lower_bound
    is non-negative and its stage time A >= G, so this never exceeds it (the
    same floating-point operations on smaller operands). Cloud: replica x
    sequences x G / b GPU-seconds; TCO: tco_lower_bound with G for the stage
    time. Capex: objective_lower_bound itself (no step time involved)."""
    s = cand.shape
    if scenario.objective == "time":
        lo, hi = bounds if bounds is not None else dp_bounds(scenario, cand)
        f = _time_terms(scenario, s.gpu).tokens_x(s.micro_batch * max(1, hi))
        return _gemm_days(cand.gemm_mb_s, s.micro_batch, max(1, hi), f, scenario.sequences)
    lo, _ = bounds if bounds is not None else dp_bounds(scenario, cand)
    return _cost_gemm_lower_bound(scenario, cand, lo)


def gemm_lower_bounds(
    scenario: Scenario, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """``gemm_lower_bound`` of every candidate at its DP range (presolve's), the time
    objective's in one numpy pass: the same operations in the same order, element-wise,
    so each value equals the scalar one exactly (tests/test_bounds.py)."""
    if scenario.objective != "time" or not cands:
        return [gemm_lower_bound(scenario, c, r) for c, r in zip(cands, ranges, strict=True)]
    gemm = np.fromiter((c.gemm_mb_s for c in cands), dtype=float, count=len(cands))
    b = np.fromiter((c.shape.micro_batch for c in cands), dtype=float, count=len(cands))
    hi = np.fromiter((max(1, r[1]) for r in ranges), dtype=float, count=len(cands))
    crit = scenario.critical_batch_seq  # gemm_lower_bound's _TimeTerms.tokens_x
    f = 1.0 if crit is None else token_multiplier(b * hi, crit)
    return _gemm_days(gemm, b, hi, f, scenario.sequences).tolist()


def _gemm_days(gemm_mb_s, micro_batch, hi, tokens_x, sequences):
    """sequences x G f(b d_max) / (b d_max) in days (gemm_lower_bound's time; element-wise
    on numpy arrays, the same operations in the same order on numbers, and in the order
    _time_lower multiplies its stage term, so that this never exceeds it)."""
    return days_from_seconds(gemm_mb_s / (micro_batch * hi) * tokens_x * sequences)


def _cost_gemm_lower_bound(scenario: Scenario, cand: Candidate, lo: int) -> float:
    """gemm_lower_bound's cost: cost_lower_bound with the GEMM time for the step time."""
    s = cand.shape
    if scenario.pricing == "tco":
        return tco_lower_bound(scenario, cand, lo, exact=False)
    if scenario.capex_charged_in_full:
        return cost_lower_bound(scenario, cand, lo)
    g = scenario.catalog.gpu(s.gpu)
    gpu_s = s.replica_gpus * scenario.sequences * cand.gemm_mb_s / s.micro_batch
    return cloud_usd(1, days_from_seconds(gpu_s), g)
