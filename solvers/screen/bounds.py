"""Valid bounds per shape, from the model's own numbers.

Used three ways: as redundant cuts in the CP-SAT model, as its presolve
(shapes whose DP range is empty cannot be chosen), and by the explanation code
to skip re-solves that cannot improve the objective.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from types import MappingProxyType
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
from models.scaleup import domain_servers
from models.step import expert_reduce_s, group_reduce_s, nic_stage_mb_s
from models.units import days_from_seconds, seconds_from_days
from solvers.families import REGISTRY, active
from solvers.intmath import down, whole_units_step
from solvers.scenario import GPU_CAP, PreparedQuestion, Scenario

if TYPE_CHECKING:
    from catalog.specs import GPUSpec, NICSpec
    from solvers.space import Candidate


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


@dataclass(frozen=True)
class GpuBounds:
    """What the bounds read of the question for the shapes of one GPU type, computed once
    (prepare_bounds): its NIC options, its least rates per GPU, the time terms, the DP
    limits and the least failure overhead."""

    gpu: GPUSpec
    fitting: tuple[NICSpec, ...]  # the NICs its server takes, else the question's
    fewest_nics: int  # the fewest NICs per server its design allows
    # per_gpu_rates: (NIC, NICs per server, least capex USD per GPU, least IT W per GPU) per
    # NIC option, within one scale-up domain (False) and across several (True: one_domain_gpus)
    rates: Mapping[bool, tuple[tuple, ...]]
    least_per_gpu: tuple[float, float]  # the least of ``rates[False]``: USD and W per GPU
    time_terms: _TimeTerms
    # dp_limits: sequences per second of the deadline, the ceiling in sequences, whether
    # pipeline_fill is enforced, the most GPUs of the type
    dp_limits: tuple[float | None, int | None, bool, int]
    least_overhead: tuple[float, float] | None  # _least_overhead (None: the ideal model)
    cost_terms: tuple  # _cost_terms


@dataclass(frozen=True)
class BoundTerms:
    """The bounds' view of one question, prepared once at the top of a solve
    (prepare_bounds; issue 32 item 2): the question, what it prepared
    (Scenario.prepare) and each of its GPU types' GpuBounds. Immutable: every bound of a
    shape reads it and writes nothing back. A GPU type the question does not offer (a
    shape evaluated from elsewhere) gets its terms computed when asked, not kept."""

    scenario: Scenario
    prepared: PreparedQuestion
    per_gpu: Mapping[str, GpuBounds]

    def of(self, gpu: str) -> GpuBounds:
        found = self.per_gpu.get(gpu)
        if found is None:
            q = self.scenario.with_changes(gpus=(gpu,)).prepare()
            return _gpu_bounds(self.scenario, q, gpu)
        return found


def prepare_bounds(scenario: Scenario, prepared: PreparedQuestion | None = None) -> BoundTerms:
    """The bound terms of every GPU type of the question, once (``prepared``:
    ``scenario.prepare()``, when the caller has it)."""
    q = prepared if prepared is not None else scenario.prepare()
    per_gpu = {g: _gpu_bounds(scenario, q, g) for g in scenario.gpus}
    return BoundTerms(scenario, q, MappingProxyType(per_gpu))


def _terms(question: Scenario | BoundTerms) -> BoundTerms:
    """The bound terms of ``question``: itself, or a scenario's prepared afresh (a caller
    that bounds many shapes prepares them once and hands them in)."""
    if isinstance(question, BoundTerms):
        return question
    return prepare_bounds(question)


def _gpu_bounds(s: Scenario, q: PreparedQuestion, gpu_name: str) -> GpuBounds:
    """GpuBounds of one GPU type, each term from the ones before it."""
    gpu = s.catalog.gpu(gpu_name)
    nics_for, counts = q.nics_for[gpu_name], q.nic_counts[gpu_name]
    fitting = nics_for or q.nic_specs
    rates = {several: _rates(s, gpu, nics_for, counts, several) for several in (False, True)}
    least = (
        (min(r[2] for r in rates[False]), min(r[3] for r in rates[False]))
        if rates[False]
        else (math.inf, math.inf)
    )
    most = max(counts) * max(n.speed_gbit_per_s for n in fitting) / 8.0 if fitting else None
    ceiling = down(s.ceiling_tokens / s.seq_len) if active(s, "batch_ceiling") else None
    time_terms = _TimeTerms(
        s.sequences, ceiling, most, s.assumptions.dp_overlap, s.critical_batch_seq
    )
    cost_terms: tuple = (_Same(s.catalog), s.pricing, s.sequences)
    if s.pricing == "tco":
        cost_terms += (least,)
        if s.catalog.facility.lifetime_years is None:
            cost_terms += (tuple(n.name for n in fitting), min(counts))
    # the DP limits read the rates and NIC options: set once those are
    terms = GpuBounds(
        gpu, tuple(fitting), min(counts), MappingProxyType(rates), least, time_terms,
        (None, None, False, GPU_CAP), _least_overhead_of(s, q, gpu_name), cost_terms,
    )  # fmt: skip
    return replace(terms, dp_limits=_dp_limits(s, q, terms))


def least_capex_cents(question: Scenario | BoundTerms, gpu, num_gpus) -> np.ndarray:
    """The least capex of ``num_gpus`` GPUs of this type (numpy array or int): the fewest
    NICs per server its design allows, of whichever fitting kind is cheapest at that size,
    with its fabric and racks (models.cost.cluster_totals, the solvers' own formula).
    More NICs per server only add NICs, links, switch ports and power, so no plan costs
    less."""
    t = _terms(question)
    g = t.of(gpu.name)
    return _least_capex(t.scenario, gpu, g.fitting, g.fewest_nics, num_gpus)


def _least_capex(s: Scenario, gpu, fitting, fewest: int, num_gpus) -> np.ndarray:
    """least_capex_cents from its inputs: the fitting NICs and the fewest per server."""
    cat = s.catalog
    return np.min(
        [
            cluster_totals(
                gpu, nic, cat.switch_for(nic), cat.facility, num_gpus, fewest
            ).capex_cents
            for nic in fitting
        ],
        axis=0,
    )


def least_per_gpu(question: Scenario | BoundTerms, gpu) -> tuple[float, float]:
    """The least capex (USD) and IT power (W) per GPU of this type at any cluster size
    (each the least over the NIC options of per_gpu_rates)."""
    return _terms(question).of(gpu.name).least_per_gpu


def per_gpu_rates(question: Scenario | BoundTerms, gpu, several_servers: bool) -> list[tuple]:
    """(NIC, NICs per server, least capex USD per GPU, least IT watts per GPU) per NIC option
    (GpuBounds.rates, _rates)."""
    return list(_terms(question).of(gpu.name).rates[several_servers])


def _rates(s: Scenario, gpu, nics_for, counts, several_servers: bool) -> tuple[tuple, ...]:
    """per_gpu_rates of ``gpu`` with the NICs its server takes and their counts.

    A server holds at most ``gpus_per_server`` GPUs and its k NICs, a rack at most
    ``servers_per_rack`` of them (models/cost.py); across several scale-up domains
    (one_domain_gpus) every NIC is one end of a link and takes a switch port, so the
    fabric adds at least a link and 1/ports of a switch per NIC. So a cluster of G GPUs with these NICs costs at
    least G times the capex and draws at least G times the watts."""
    cat, fac = s.catalog, s.catalog.facility
    gpn = gpu.server.gpus_per_server
    out = []
    for nic in nics_for:  # the NICs and counts its server takes
        switch = cat.switch_for(nic)
        port_cents = link_cents(nic) + usd_to_cents_up(switch.price_usd) / switch.ports
        port_w = switch_power_w(switch) / switch.ports
        for k in counts:
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
    return tuple(out)


def one_domain_gpus(gpu: GPUSpec) -> int:
    """The most GPUs a cluster without a scale-out fabric holds: one scale-up domain's
    servers (models/scaleup.py domain_servers; models/fabric.py). A job on more spans
    domains, so it pays the fabric and its pipeline sends cross the NICs
    (models/step.py step_from_coefficients: dp x replica > domain_gpus)."""
    return gpu.server.gpus_per_server * domain_servers(gpu)


def tco_lower_bound(
    question: Scenario | BoundTerms,
    cand: Candidate,
    lo: int,
    exact: bool = True,
    capex: Mapping[tuple[str, int], int] | None = None,
) -> float:
    """TCO (USD) no plan of this shape beats with DP degree at least ``lo``.

    Per NIC option (per_gpu_rates), the job takes at least sequences x
    gpu_seconds_per_sequence GPU-seconds with that option's bandwidth; energy and a
    lifetime's capex share both grow with GPUs x days, so they are at least that many
    GPU-days at the option's least watts and capex per GPU. Capex charged in full:
    the least capex at the smallest DP degree (least_capex_cents) plus that energy.
    ``exact=False``: the GEMM time alone and the least rates (no step coefficients).
    ``capex``: least capex cents by (GPU type, GPU count) when the caller has them."""
    t = _terms(question)
    s = cand.shape
    g = t.of(s.gpu)
    fac = t.scenario.catalog.facility
    several = lo * s.replica_gpus > one_domain_gpus(g.gpu)
    if exact:  # what every NIC option shares, once (gpu_seconds_per_sequence's terms)
        shared = (g.time_terms, cand.dp_floor(t.scenario), stage_time_lower(cand))
        options = [
            (_gpu_seconds(cand, lo, shared, k * nic.speed_gbit_per_s / 8.0, several), usd, w)
            for nic, k, usd, w in g.rates[several]
        ]
    else:
        usd, w = g.least_per_gpu
        options = [(s.replica_gpus * cand.gemm_mb_s / s.micro_batch, usd, w)]
    best = math.inf
    for gpu_s, usd, watts in options:
        gpu_days = days_from_seconds(t.scenario.sequences * gpu_s)
        cost = float(energy_usd(watts, fac, gpu_days))
        if fac.lifetime_years is not None:
            cost += gpu_days * usd / (365.0 * fac.lifetime_years)
        best = min(best, cost * (1 - 1e-9))
    if fac.lifetime_years is None:
        best += _least_capex_usd(t, g, lo * s.replica_gpus, capex)
    return best


def _least_capex_usd(
    t: BoundTerms, g: GpuBounds, num_gpus: int, capex: Mapping[tuple[str, int], int] | None
) -> float:
    """The least capex (USD) of ``num_gpus`` GPUs of ``g``'s type: from ``capex`` (cents by
    (GPU type, count), capex_table) when it holds them, else computed."""
    found = None if capex is None else capex.get((g.gpu.name, num_gpus))
    if found is None:
        found = int(_least_capex(t.scenario, g.gpu, g.fitting, g.fewest_nics, num_gpus))
    return found / 100.0


def capex_table(
    question: Scenario | BoundTerms, wanted: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], int]:
    """Least capex cents for many (GPU type, GPU count) pairs at once: one vectorised
    least_capex_cents per GPU type instead of one call per count (the same formula on an
    array; a cost bound over thousands of shapes asks for hundreds)."""
    t = _terms(question)
    by_gpu: dict[str, set[int]] = {}
    for name, num_gpus in wanted:
        by_gpu.setdefault(name, set()).add(num_gpus)
    out: dict[tuple[str, int], int] = {}
    for name, counts in by_gpu.items():
        g = t.of(name)
        sizes = np.array(sorted(counts), dtype=np.int64)
        cents = np.atleast_1d(_least_capex(t.scenario, g.gpu, g.fitting, g.fewest_nics, sizes))
        for n, c in zip(sizes.tolist(), cents.tolist(), strict=True):
            out[name, n] = int(c)
    return out


def budget_gpu_limit(question: Scenario | BoundTerms, gpu) -> int:
    """The most GPUs of this type whose least capex fits the budget (capex charged in full;
    _budget_gpu_limit)."""
    t = _terms(question)
    g = t.of(gpu.name)
    return _budget_gpu_limit(t.scenario, gpu, g.fitting, g.fewest_nics)


def _budget_gpu_limit(s: Scenario, gpu, fitting, fewest: int) -> int:
    """budget_gpu_limit from its inputs. A 64-way search (a few vectorised rounds): the
    least capex never falls as GPUs are added (servers, fabric tiers, switches, links and
    racks all grow with the count; tests/test_bounds.py checks it)."""
    cents = s.budget * 100
    lo, hi = 0, min(GPU_CAP, int(cents // usd_to_cents_up(gpu.price_usd)))
    while lo < hi:  # invariant: lo GPUs fit (0 always does), more than hi never do
        probes = np.unique(np.linspace(lo + 1, hi, num=min(64, hi - lo)).astype(np.int64))
        fits = int(np.count_nonzero(_least_capex(s, gpu, fitting, fewest, probes) <= cents))
        if fits == len(probes):
            lo = hi
        else:
            lo = int(probes[fits - 1]) if fits else lo
            hi = int(probes[fits]) - 1
    return lo


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


def stage_times_lower(cands: list[Candidate]) -> list[float]:
    """stage_time_lower of every candidate (the deadline's lower end of the DP range over a
    whole space: presolve asks once for all the shapes it needs)."""
    return [stage_time_lower(c) for c in cands]


def dp_bounds(question: Scenario | BoundTerms, cand: Candidate) -> tuple[int, int]:
    """The DP range one shape admits under the enforced families.

    Lower: the memory shard that fits; the deadline, since a sequence takes at
    least A / (b d) (A the cheaper regime's stage time). Upper: the GPU cap; the
    batch ceiling with the fewest micro-batches; under a capex budget, the most
    GPUs whose least capex fits it (budget_gpu_limit); the site limits. The parts that
    depend on the question (and the GPU) alone are prepared once (GpuBounds.dp_limits). The
    range is empty when a cloud or TCO budget prices the shape out (priced_out) or the
    deadline finds it too slow at its upper end (too_slow). Both ends are multiples of
    dp_step: GPUs are bought in whole servers or racks."""
    t = _terms(question)
    scenario = t.scenario
    s = cand.shape
    per_day, ceiling_seqs, fill, gpu_hi = t.of(s.gpu).dp_limits
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
    if lo <= hi and (priced_out(t, cand, lo) or too_slow(t, cand, hi)):
        hi = 0  # a cloud or TCO budget, or the deadline, rules the shape out
    return lo, hi


def dp_step(scenario: Scenario, cand: Candidate) -> int:
    """The DP degrees a shape can take are the multiples of this: replica x d GPUs come
    in whole purchase units (servers, or NVL72 racks; catalog ServerSpec), so d is a
    multiple of unit / gcd(replica, unit); an MoE shape's d is also a multiple of its
    expert folding's step (Shape.dp_step, ep_domain). Their least common multiple
    (intmath.whole_units_step; presolve takes it over a whole space at once, on arrays)."""
    unit = scenario.catalog.gpu(cand.shape.gpu).server.purchase_unit_gpus
    return whole_units_step(unit, cand.shape.replica_gpus, cand.shape.dp_step)


def dp_limits(
    question: Scenario | BoundTerms, gpu_name: str
) -> tuple[float | None, int | None, bool, int]:
    """dp_bounds' terms of the question and one GPU type: sequences per second of the
    deadline (None without one), the batch ceiling in sequences (None without one),
    whether pipeline_fill is enforced, and the most GPUs of the type (GPU cap, capex
    budget, site limits). Prepared once (GpuBounds.dp_limits)."""
    return _terms(question).of(gpu_name).dp_limits


def _dp_limits(
    s: Scenario, q: PreparedQuestion, g: GpuBounds
) -> tuple[float | None, int | None, bool, int]:
    """dp_limits of ``g``'s GPU type (its least rates and NIC options already in ``g``)."""
    per_day = None
    if active(s, "deadline"):
        per_day = s.sequences / seconds_from_days(s.deadline)
    ceiling = None
    if active(s, "batch_ceiling"):
        ceiling = down(s.ceiling_tokens / s.seq_len)
    gpu_hi = GPU_CAP
    cap = q.gpu_caps[g.gpu.name] if active(s, "max_gpus") else None
    if cap is not None:
        gpu_hi = min(gpu_hi, cap)
    if active(s, "budget") and q.capex_charged_in_full:
        gpu_hi = min(gpu_hi, _budget_gpu_limit(s, g.gpu, g.fitting, g.fewest_nics))
    gpu_hi = min(gpu_hi, _site_gpu_limit(s, g))
    return (per_day, ceiling, active(s, "pipeline_fill"), gpu_hi)


def site_gpu_limit(question: Scenario | BoundTerms, gpu) -> int:
    """The most GPUs of this type the active families' site limits allow (the power cap,
    the rack cap: each family's ``gpu_limit``, solvers/families/)."""
    t = _terms(question)
    return _site_gpu_limit(t.scenario, t.of(gpu.name))


def _site_gpu_limit(s: Scenario, g: GpuBounds) -> int:
    """site_gpu_limit of ``g``'s GPU type; each family is handed its least rates per GPU."""
    limit = GPU_CAP
    for family in REGISTRY:
        if family.active(s):
            found = family.gpu_limit(s, g.gpu, lambda _s, _gpu: g.least_per_gpu)
            if found is not None:
                limit = min(limit, found)
    return limit


def _time_terms(question: Scenario | BoundTerms, gpu_name: str) -> _TimeTerms:
    return _terms(question).of(gpu_name).time_terms


def _fixed_lower(
    cand: Candidate, floor: int, terms: _TimeTerms, node_gb_s: float | None = None
) -> tuple[float, float, float]:
    """A step's parts not proportional to the micro-batches, at their least, and the most
    micro-batches per step W_hi: (C + D_min, O, W_hi), with C the bubble, D_min the
    exposed gradient reduction at the smallest DP degree ``floor`` (it grows with the
    degree) over ``node_gb_s`` of scale-out bandwidth per server (default: every NIC slot
    of the fastest NIC its server takes, at its most NICs), O the unsharded optimizer
    step; from the question's time terms alone."""
    s, c = cand.shape, cand.coeffs
    if node_gb_s is None:
        node_gb_s = terms.node_gb_s
    d_min = float(group_reduce_s(c, c.dp_bytes, floor * c.cp, node_gb_s))
    if c.expert_dp_bytes > 0:  # a MoE shape's expert gradients, over expert-DP
        d_min += float(expert_reduce_s(c, floor, node_gb_s))
    d_min = max(0.0, d_min - c.dp_window_s(terms.dp_overlap))
    return c.bubble_s + d_min, c.optimizer_s, _most_microbatches(terms, s.micro_batch)


def _most_microbatches(terms: _TimeTerms, micro_batch: int) -> int:
    """W_hi, the most micro-batches per step: b x W sequences fit the ceiling (at least 1)."""
    w_hi = terms.ceiling_seqs // micro_batch if terms.ceiling_seqs is not None else GPU_CAP**2
    return max(1, w_hi)


def gpu_seconds_per_sequence(
    question: Scenario | BoundTerms,
    cand: Candidate,
    lo: int,
    node_gb_s: float | None = None,
    several_servers: bool = False,
) -> float:
    """GPU-seconds per trained sequence no plan of this shape beats with d >= ``lo``
    (and ``node_gb_s`` of scale-out bandwidth per server, _fixed_lower):
    G x step / (b m d) = replica x (A + (d (C + D) + O / cp) / W) / b >= replica x
    (A + (lo (C + D_min) + O / cp) / W_hi) / b. ``several_servers``: the job spans
    servers for every d >= lo, so pipeline sends cross the NICs at ``node_gb_s``
    (models.step.step_from_coefficients)."""
    t = _terms(question)
    shared = (t.of(cand.shape.gpu).time_terms, cand.dp_floor(t.scenario), stage_time_lower(cand))
    return _gpu_seconds(cand, lo, shared, node_gb_s, several_servers)


def _gpu_seconds(
    cand: Candidate,
    lo: int,
    shared: tuple[_TimeTerms, int, float],
    node_gb_s: float | None,
    several_servers: bool,
) -> float:
    """gpu_seconds_per_sequence from what it reads of the question that no NIC option
    changes (``shared``: the time terms, the shape's smallest DP degree and its
    stage_time_lower), computed once for every option (tco_lower_bound)."""
    c = cand.coeffs
    terms, floor, stage = shared
    fixed, opt, w_hi = _fixed_lower(cand, floor, terms, node_gb_s)
    if several_servers and node_gb_s and c.pp > 1:
        share = nic_share(node_gb_s, c.gpus_per_node, c.network_efficiency)
        send = c.pp_send_bytes / share + c.pp_latency_s
        stage = c.stage_mb_s + 2 * c.vp * send
        fixed += 2 * (c.pp - 1) * send
    per_mb = stage + (lo * fixed + opt / c.cp) / w_hi
    return cand.shape.replica_gpus * per_mb / cand.shape.micro_batch


def objective_lower_bound(
    question: Scenario | BoundTerms, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A value the objective cannot beat with this shape (days, or USD), whatever d, m and NICs are.

    Time: T = sequences x f(B) x (m A + C + D + O/g) / B with B = b m d >= the least
    over B of sequences x f(B) (A / (b d) + (C + D_min + O / g_max) / B), d <= d_max and
    B <= b W_max (_days_lower), f the batch's token multiplier (_TimeTerms.tokens_x), with
    D_min the gradient reduction at the
    smallest DP degree over every NIC slot of the fastest NIC; with failures, the
    expected time's (expected_time_lower_bound: the objective is the expected time, and
    the failures' overhead can be several times the ideal time). Cost: the least
    capex at the smallest DP degree (least_capex_cents); cloud: sequences x
    gpu_seconds_per_sequence at the GPU's hourly price; TCO: tco_lower_bound."""
    t = _terms(question)
    return objective_lower_bounds(t, [cand], [bounds or dp_bounds(t, cand)])[0]


def objective_lower_bounds(
    question: Scenario | BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """objective_lower_bound of every candidate at its DP range, in one call: the least
    capex of every size they ask for at once (capex_table) under the cost objective."""
    t = _terms(question)
    return _full_bounds(t, cands, ranges, _capex_of(t, cands, ranges))


def _full_bounds(
    t: BoundTerms,
    cands: list[Candidate],
    ranges: list[tuple[int, int]],
    capex: Mapping[tuple[str, int], int] | None,
) -> list[float]:
    """objective_lower_bounds with the least capex table (``capex``) in hand."""
    if t.scenario.objective == "time":
        return [
            expected_time_lower_bound(t, c, max(1, r[1]))
            for c, r in zip(cands, ranges, strict=True)
        ]
    s = t.scenario
    if s.pricing == "tco" and s.catalog.facility.lifetime_years is not None and _SHARED.get():
        return _shared_tco_bounds(t, cands, ranges)
    return [cost_lower_bound(t, c, r[0], capex) for c, r in zip(cands, ranges, strict=True)]


def _shared_tco_bounds(
    t: BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """Within shared_bounds, tco_lower_bound of every shape at its DP range's lower end
    under a TCO with a lifetime (no capex table read), each found in (or added to) the
    table of its GPU type's inputs (_table "tco_bound"): an explanation under a TCO budget
    bounds the same thousands of shapes for every question it derives (issue 22: seed
    44's, 70,000 bounds, half its time)."""
    tables: dict[str, dict | None] = {}
    out = []
    for cand, (lo, _) in zip(cands, ranges, strict=True):
        gpu = cand.shape.gpu
        if gpu not in tables:
            tables[gpu] = _table("tco_bound", t, cand)
        table = tables[gpu]
        key = _shape_key("tco_bound", t, cand, lo)
        found = None if table is None else table.get(key)
        if found is None:
            found = tco_lower_bound(t, cand, lo)
            if table is not None:
                table[key] = found
        out.append(found)
    return out


def deadline_cost_bounds(
    question: Scenario | BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """objective_lower_bounds with a sharper lower end under the cost objective and an
    enforced deadline: the deadline's DP floor (dp_bounds: a sequence takes at least
    A / (b d), so d >= per_day x A / b) with A counting the expert dispatch and ring
    attention that cross the NICs, at the most scale-out bandwidth a server of the shape
    may have (stage_time_lower with node_gb_s, as _time_lower counts them), up to whole
    units (dp_step). cost_lower_bound holds for any valid lower end; inf where the floor
    passes the upper end (no plan of the shape meets the deadline). dp_bounds' floor, the
    CP-SAT model's range, leaves these terms out; pruning reads this one
    (prune.prune_deferred)."""
    t = _terms(question)
    s = t.scenario
    if s.objective != "cost" or not active(s, "deadline"):
        return objective_lower_bounds(t, cands, ranges)
    lows: list[int | None] = []
    for cand, (lo, hi) in zip(cands, ranges, strict=True):
        g = t.of(cand.shape.gpu)
        per_day = g.dp_limits[0]
        assert per_day is not None
        need = per_day * stage_time_lower(cand, g.time_terms.node_gb_s) / cand.shape.micro_batch
        step = dp_step(s, cand)
        low = -(-max(1, lo, math.floor(need * (1 - 1e-9))) // step) * step
        lows.append(low if low <= hi else None)
    live = [(c, low) for c, low in zip(cands, lows, strict=True) if low is not None]
    capex = _capex_of(t, [c for c, _ in live], [(low, low) for _, low in live])
    return [
        math.inf if low is None else cost_lower_bound(t, c, low, capex)
        for c, low in zip(cands, lows, strict=True)
    ]


def _capex_of(
    t: BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> dict[tuple[str, int], int] | None:
    """capex_table of the sizes the cost bounds of these shapes ask for at their lower
    ends (None: they ask for none: the time objective, renting, or the capex charged over a
    lifetime)."""
    if t.scenario.objective == "time" or not t.prepared.capex_charged_in_full:
        return None
    return capex_table(
        t, [(c.shape.gpu, r[0] * c.shape.replica_gpus) for c, r in zip(cands, ranges, strict=True)]
    )


def time_lower_bound(question: Scenario | BoundTerms, cand: Candidate, hi: int) -> float:
    """The least time (days) of any plan of this shape with d <= ``hi``: the least over
    the global batch B of sequences x f(B) (A / (b d) + (C + D_min + O / (hi cp)) / B)
    (_days_lower; objective_lower_bound)."""
    t = _terms(question)
    return _time_lower(cand, hi, cand.dp_floor(t.scenario), t.of(cand.shape.gpu).time_terms)


def _time_lower(cand: Candidate, hi: int, floor: int, terms: _TimeTerms) -> float:
    """time_lower_bound from the question's terms alone (``floor``: the shape's smallest
    DP degree)."""
    fixed, opt, w_hi = _fixed_lower(cand, floor, terms)
    stage = stage_time_lower(cand, terms.node_gb_s)
    fixed = fixed + opt / (hi * cand.coeffs.cp)
    return _days_lower(stage, fixed, cand.shape.micro_batch, hi, w_hi, terms)


def _days_lower(stage: float, fixed: float, b: int, hi: int, w_hi: float, terms: _TimeTerms):
    """The least of sequences x f(B) x (A / (b d) + F / B) in days over the global batch
    B = b m d (m >= 1 micro-batches, so b d <= B <= b W) and d <= ``hi``: the time bound of
    a stage time A and a per-step time F (time_lower_bound's and dense_part_lower_bounds'
    one formula). A step of B sequences takes m A + F' (F' >= F) and the question's tokens
    take sequences x f(B) / B steps: T = sequences x f(B) (A / (b d) + F' / B).

    For a given B the largest d = min(hi, W, B / b) is best. Below b d_max = b min(hi, W)
    the time is f(B) (A + F) / B, which does not increase (f(B) / B does not); above it,
    f(B) (a + F / B) with a = A / (b d_max): with f = max(1, (1 + B / B_c) / 2)
    (models.batch_tokens.token_multiplier) it falls until B_c and is convex past it, least
    at B* = sqrt(F B_c / a). So the least lies at one of b d_max, b W, B_c and B* (each
    clipped to [b d_max, b W]), every one a batch the step may run: the exact least, which
    is never below the bound of A and F taken apart at b d_max and b W that it replaces,
    sequences x (A f(b d_max) / (b d_max) + F f(b W) / (b W))."""
    d_max = min(hi, w_hi)
    lo, up = b * d_max, b * w_hi
    a = stage / lo
    batches = [lo, up]
    crit = terms.critical_seqs
    if crit is not None:
        batches.append(min(max(crit, lo), up))
        if a > 0 and fixed > 0:
            batches.append(min(max(math.sqrt(fixed * crit / a), lo), up))
    per_seq = min(terms.tokens_x(x) * (a + fixed / x) for x in batches)
    return days_from_seconds(per_seq * terms.sequences)


def dp_split_lower_bounds(
    question: Scenario | BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """expected_time_lower_bound sharpened where the gradient reduction grows with the DP
    degree (a MoE shape's expert gradients over expert-DP above all): the shape's DP range
    [lo, hi] is split at ceil(hi / 2), and each part is bounded with its own smallest
    reduction D(low) (the reduction does not fall as d grows: models.step.group_reduce_s)
    and its own largest d (the stage time's and the optimizer's share at its top); the
    lesser of the two. Each part's bound is _time_lower's on a narrower range, so the
    lesser is never below expected_time_lower_bound's over the whole range. (Splitting the
    lower part again, halving down to lo, prunes no more shapes of the $100M GPT-OSS-120B
    and Qwen3-30B-A3B questions on H100.) It costs two bounds: the callers ask it only to
    skip a search whose answer it already gives (a pair with no plan under its cap, an
    explanation's relaxation that moves no shape below the plan), never to shrink a
    search. Time objective only: another objective gets -inf."""
    t = _terms(question)
    if t.scenario.objective != "time":
        return [-math.inf] * len(cands)
    out = []
    for cand, (lo, hi) in zip(cands, ranges, strict=True):
        g = t.of(cand.shape.gpu)
        hi = max(1, hi)
        floor = min(hi, max(1, lo, cand.dp_floor(t.scenario)))
        out.append(_split_time_lower(cand, hi, floor, g.time_terms, g.least_overhead))
    return out


def _split_time_lower(
    cand: Candidate, hi: int, floor: int, terms: _TimeTerms, overhead: tuple[float, float] | None
) -> float:
    """dp_split_lower_bounds of one shape whose DP degrees lie in [floor, hi]: the lesser
    of _expected_time_lower over [mid, hi] and over [floor, mid - 1], mid = ceil(hi / 2)."""
    mid = max(floor, (hi + 1) // 2)
    parts = [(hi, mid)] + ([(mid - 1, floor)] if floor < mid else [])
    return min(_expected_time_lower(cand, top, low, terms, overhead) for top, low in parts)


def _with_failures(ideal, cand: Candidate, stage: float, terms: _TimeTerms, overhead):
    """(1 + a) T + c G T with G T >= replica x sequences x A / b (expected_time_lower_bound;
    ``overhead``: (a, c), None for the ideal model)."""
    if overhead is None:
        return ideal
    a, c = overhead
    s = cand.shape
    gpu_days = days_from_seconds(s.replica_gpus * terms.sequences * stage / s.micro_batch)
    return (1.0 + a) * ideal + c * gpu_days


def too_slow(question: Scenario | BoundTerms, cand: Candidate, hi: int) -> bool:
    """Whether the enforced deadline rules out every plan of this shape with d <= ``hi``:
    its least time, by the GEMM-only bound first (gemm_lower_bound's, cheap) and then
    expected_time_lower_bound, exceeds the deadline. (The deadline's lower end of the DP range
    counts the stage time alone; this counts the bubble, the gradient reduction and the
    optimizer step too, at the most DP degrees and micro-batches the range allows.)

    Within shared_bounds, the answer is shared by every question whose terms are the same
    (the key holds every input _too_slow_of reads)."""
    t = _terms(question)
    if not active(t.scenario, "deadline"):
        return False
    return _too_slow_in(t, cand, hi, _table("too_slow", t, cand))


def _too_slow_in(t: BoundTerms, cand: Candidate, hi: int, table: dict | None) -> bool:
    """too_slow, found in (or added to) a shared table of the question's terms when there
    is one (_table: keyed by the shape's root candidate, ``hi`` and its DP floor)."""
    key = _shape_key("too_slow", t, cand, hi)
    if table is not None:
        found = table.get(key)
        if found is not None:
            return found
    # its inputs are the keys' parts themselves: a key holds every one by construction
    _, limit, terms, overhead = _table_key("too_slow", t, cand.shape.gpu)
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


def too_slow_by_gemm(
    question: Scenario | BoundTerms, gpu: str, gemm_mb_s, micro_batch, replica_gpus, hi
):
    """A sufficient test for too_slow that needs no step coefficients (element-wise on
    numpy arrays of shapes on ``gpu``): expected_time_lower_bound with the GEMM time G
    for the stage time A (A >= G: models.step.StepCoefficients.stage_mb_s adds
    non-negative terms to G) and sequences x G / (b hi) for the ideal time (which
    time_lower_bound's other terms only raise), so (1 + a) sequences G / (b hi) +
    c replica sequences G / b, with (a, c) of _least_overhead, never exceeds it. Less
    1e-12 of itself (the rounding of the operations done in another order), it
    exceeding the deadline rules the shape out without the performance model's step
    time (presolve tests it on every shape a reduced question lets through)."""
    t = _terms(question)
    return _gemm_too_slow(
        t.scenario.sequences,
        t.scenario.deadline * (1 + 1e-9),
        t.of(gpu).least_overhead,
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


def expected_time_lower_bound(question: Scenario | BoundTerms, cand: Candidate, hi: int) -> float:
    """time_lower_bound with failures, checkpoints and restarts (models/goodput.py): the
    expected time T (1 + x/G + a + c G) >= (1 + a) T_lb(hi) + c G T, and G T >= replica x
    sequences x A / b whatever d is (G = replica x d GPUs, T >= sequences x A / (b d),
    A the stage time of one micro-batch): the restarts' share grows with the GPUs as the
    time falls, so a deadline rules out shapes that only a huge cluster would meet. With
    the most hot spares and the fastest checkpoint storage a plan may buy."""
    t = _terms(question)
    g = t.of(cand.shape.gpu)
    return _expected_time_lower(cand, hi, cand.dp_floor(t.scenario), g.time_terms, g.least_overhead)


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
    return _with_failures(ideal, cand, stage_time_lower(cand), terms, overhead)


def _least_overhead_of(s: Scenario, q: PreparedQuestion, gpu: str) -> tuple[float, float] | None:
    """(a, c) of the failure overhead x/G + a + c G on ``gpu`` with the most a plan may buy
    (solvers/purchases.py): more spares only lower c, faster storage only lowers a (the
    reload, and the interval that the write bounds). None: the ideal model. Once per GPU
    type (GpuBounds.least_overhead; a deadline's presolve asks for every shape)."""
    model = q.failure_models[gpu]
    if model is None:
        return None
    best = with_purchases(
        model, s.catalog.facility, max(q.spare_options[gpu]), max(q.storage_options[gpu])
    )
    _, a, c = best.coefficients()
    return (a, c)


def cost_lower_bound(
    question: Scenario | BoundTerms,
    cand: Candidate,
    lo: int,
    capex: Mapping[tuple[str, int], int] | None = None,
) -> float:
    """The least cost (USD, in the question's pricing) of any plan of this shape with
    d >= ``lo``: capex charged in full, the least capex of lo x replica GPUs
    (least_capex_cents; ``capex``: capex_table's, when the caller has it); cloud,
    sequences x gpu_seconds_per_sequence at the GPU's hourly price; TCO, tco_lower_bound."""
    t = _terms(question)
    s = cand.shape
    g = t.of(s.gpu)
    if t.scenario.pricing == "tco":
        return tco_lower_bound(t, cand, lo, capex=capex)
    if t.prepared.capex_charged_in_full:
        return _least_capex_usd(t, g, lo * s.replica_gpus, capex)
    gpu_s = t.scenario.sequences * gpu_seconds_per_sequence(t, cand, lo)
    return cloud_usd(1, days_from_seconds(gpu_s), g.gpu)


def priced_out(question: Scenario | BoundTerms, cand: Candidate, lo: int) -> bool:
    """Whether the enforced budget rules out every plan of this shape with d >= ``lo``
    when the cost grows with the GPU-time (cloud, TCO): its least cost by the GEMM-only
    bound (gemm_lower_bound's) exceeds the budget. That bound needs no step
    coefficients; cost_lower_bound's exact one would, for every shape the budget is
    tested on (explanations test thousands, each time a family is dropped), and the
    CP-SAT model carries it anyway as a cut. Capex charged in full is bounded by
    budget_gpu_limit instead (dp_limits)."""
    t = _terms(question)
    if not active(t.scenario, "budget") or t.scenario.pricing == "capex":
        return False
    return _priced_out_in(t, cand, lo, _table("priced_out", t, cand))


def _priced_out_in(t: BoundTerms, cand: Candidate, lo: int, table: dict | None) -> bool:
    """priced_out, found in (or added to) a shared table of the question's terms when
    there is one (_table: keyed by the shape's root candidate and ``lo``)."""
    key = _shape_key("priced_out", t, cand, lo)
    if table is not None:
        found = table.get(key)
        if found is not None:
            return found
    found = bool(_cost_gemm_lower_bound(t, cand, lo) > t.scenario.budget * (1 + 1e-9))
    if table is not None:
        table[key] = found
    return found


def ruled_out(
    question: Scenario | BoundTerms, cands: list[Candidate], lows: list[int], highs: list[int]
) -> list[bool]:
    """dp_bounds' last rule for many shapes (each with its DP range): priced_out or
    too_slow. Within shared_bounds, each GPU type's shared tables are found once."""
    t = _terms(question)
    budget = active(t.scenario, "budget") and t.scenario.pricing != "capex"
    deadline = active(t.scenario, "deadline")
    priced: dict[str, dict | None] = {}
    slow: dict[str, dict | None] = {}
    out = []
    for cand, lo, hi in zip(cands, lows, highs, strict=True):
        gpu = cand.shape.gpu
        if budget:
            if gpu not in priced:
                priced[gpu] = _table("priced_out", t, cand)
            if _priced_out_in(t, cand, lo, priced[gpu]):
                out.append(True)
                continue
        if deadline:
            if gpu not in slow:
                slow[gpu] = _table("too_slow", t, cand)
            out.append(_too_slow_in(t, cand, hi, slow[gpu]))
        else:
            out.append(False)
    return out


def _table(kind: str, t: BoundTerms, cand: Candidate) -> dict | None:
    """Within shared_bounds, the table of too_slow's or priced_out's answers shared by
    every question whose inputs to it are the same as this one's for ``cand``'s GPU
    type (the limit and the time terms and least overhead, or the cost terms); None
    outside."""
    shared = _SHARED.get()
    if shared is None:
        return None
    key = _table_key(kind, t, cand.shape.gpu)
    table = shared.get(key)
    if table is None:
        table = shared[key] = {}
    return table


def _shape_key(kind: str, question: Scenario | BoundTerms, cand: Candidate, end: int) -> tuple:
    """A shape's key within a _table: its root candidate (the step coefficients and GEMM
    time), the DP end the bound is taken at, and too_slow's and tco_bound's DP floor (the
    gradient reduction at the smallest degree; it moves with memory and its scale)."""
    if kind == "priced_out":
        return (_root(cand), end)
    scenario = question.scenario if isinstance(question, BoundTerms) else question
    return (_root(cand), end, cand.dp_floor(scenario))


def _table_key(kind: str, question: Scenario | BoundTerms, gpu: str) -> tuple:
    """What too_slow (``kind`` "too_slow"), priced_out or tco_lower_bound with a lifetime
    ("tco_bound": the cost terms, the time terms and each NIC option's rates) reads of the
    question for the shapes of one GPU type: a table's answers hold for every question
    with this key (within the table, a shape's own key: its root candidate and DP end,
    and too_slow's and tco_bound's DP floor)."""
    t = _terms(question)
    g = t.of(gpu)
    if kind == "priced_out":
        return (kind, t.scenario.budget * (1 + 1e-9), g.cost_terms)
    if kind == "tco_bound":  # with a lifetime: no capex table (tco_lower_bound)
        rates = tuple(
            (several, nic.name, nic.speed_gbit_per_s, k, usd, w)
            for several in (False, True)
            for nic, k, usd, w in g.rates[several]
        )
        return (kind, g.cost_terms, g.time_terms, rates)
    limit = t.scenario.deadline * (1 + 1e-9)
    return (kind, limit, g.time_terms, g.least_overhead)


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
    each answer is computed once. Outside, each is computed when asked (a solve asks each
    shape once)."""
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
    question: Scenario | BoundTerms, cand: Candidate, bounds: tuple[int, int] | None = None
) -> float:
    """A weaker bound than objective_lower_bound, and cheaper: it needs only the shape's
    GEMM time G, not its step coefficients.

    Time: sequences x G f(b d_max) / (b d_max) (f: _TimeTerms.tokens_x). Every other term of objective_lower_bound
    is non-negative and its stage time A >= G, so this never exceeds it (the
    same floating-point operations on smaller operands). Cloud: replica x
    sequences x G / b GPU-seconds; TCO: tco_lower_bound with G for the stage
    time. Capex: objective_lower_bound itself (no step time involved)."""
    t = _terms(question)
    s = cand.shape
    lo, hi = bounds if bounds is not None else dp_bounds(t, cand)
    if t.scenario.objective == "time":
        f = t.of(s.gpu).time_terms.tokens_x(s.micro_batch * max(1, hi))
        return _gemm_days(cand.gemm_mb_s, s.micro_batch, max(1, hi), f, t.scenario.sequences)
    return _cost_gemm_lower_bound(t, cand, lo)


def gemm_lower_bounds(
    question: Scenario | BoundTerms,
    cands: list[Candidate],
    ranges: list[tuple[int, int]],
    capex: Mapping[tuple[str, int], int] | None = None,
) -> list[float]:
    """``gemm_lower_bound`` of every candidate at its DP range (presolve's), the time
    objective's in one numpy pass: the same operations in the same order, element-wise,
    so each value equals the scalar one exactly (tests/test_bounds.py). ``capex``:
    capex_table's least capex, when the caller has it."""
    t = _terms(question)
    if t.scenario.objective != "time" or not cands:
        return [
            _cost_gemm_lower_bound(t, c, r[0], capex) for c, r in zip(cands, ranges, strict=True)
        ]
    gemm = np.fromiter((c.gemm_mb_s for c in cands), dtype=float, count=len(cands))
    b = np.fromiter((c.shape.micro_batch for c in cands), dtype=float, count=len(cands))
    hi = np.fromiter((max(1, r[1]) for r in ranges), dtype=float, count=len(cands))
    crit = t.prepared.critical_batch_seq  # gemm_lower_bound's _TimeTerms.tokens_x
    f = 1.0 if crit is None else token_multiplier(b * hi, crit)
    return _gemm_days(gemm, b, hi, f, t.scenario.sequences).tolist()


def dense_part_lower_bounds(
    question: Scenario | BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]]
) -> list[float]:
    """A bound between gemm_lower_bound and objective_lower_bound, for the shapes of a MoE
    model under the time objective: expected_time_lower_bound with the stage time A
    replaced by the shape's ``dense_stage`` (GEMM, element-wise, TP and CP: A >= it),
    the bubble by (p - 1)/v of it, and the gradient reduction and optimizer step by 0,
    each term no larger than objective_lower_bound's (the same operations on smaller
    operands), less 1e-12 of itself. It needs no expert memory or dispatch term: a shape it
    prunes never has its MoE step coefficients computed (on H100, of the shapes whose
    cheap bound lies under the optimum of the $100M question, it leaves GPT-OSS-120B
    1,445 of 2,672 and Qwen3-30B-A3B 695 of 3,185; the full bound 111 and 30:
    tests/test_bounds.py). -inf
    (prunes nothing) for a dense shape, one with a negative routed element-wise width
    (Candidate.dense_stage), or another objective."""
    t = _terms(question)
    if t.scenario.objective != "time":
        return [-math.inf] * len(cands)
    out = []
    for cand, r in zip(cands, ranges, strict=True):
        dense = cand.dense_stage
        if dense is None:
            out.append(-math.inf)
            continue
        g = t.of(cand.shape.gpu)
        out.append(_dense_part_lower(cand, max(1, r[1]), *dense, g.time_terms, g.least_overhead))
    return out


def _dense_part_lower(
    cand: Candidate,
    hi: int,
    stage: float,
    bubble_share: float,
    terms: _TimeTerms,
    overhead: tuple[float, float] | None,
) -> float:
    """dense_part_lower_bounds of one shape (``stage`` and ``bubble_share``: its
    Candidate.dense_stage), as _expected_time_lower and _time_lower compute theirs."""
    b = cand.shape.micro_batch
    w_hi = _most_microbatches(terms, b)
    ideal = _days_lower(stage, bubble_share * stage, b, hi, w_hi, terms)
    return float(_with_failures(ideal, cand, stage, terms, overhead)) * (1.0 - 1e-12)


def screen_bounds(
    t: BoundTerms, cands: list[Candidate], ranges: list[tuple[int, int]], head: int
) -> tuple[list[float], list[int], list[float]]:
    """The bounds pruning starts from, in one call: every shape's cheap bound
    (gemm_lower_bounds), the ``head`` shapes with the least of it (ties by position),
    and their full bounds (objective_lower_bounds). The least capex of every size the
    cost bounds ask for is computed once for both (capex_table)."""
    capex = _capex_of(t, cands, ranges)
    cheap = gemm_lower_bounds(t, cands, ranges, capex)
    first = sorted(range(len(cands)), key=lambda i: (cheap[i], i))[:head]
    full = _full_bounds(t, [cands[i] for i in first], [ranges[i] for i in first], capex)
    return cheap, first, full


def _gemm_days(gemm_mb_s, micro_batch, hi, tokens_x, sequences):
    """sequences x G f(b d_max) / (b d_max) in days (gemm_lower_bound's time; element-wise
    on numpy arrays, the same operations in the same order on numbers, and in the order
    _time_lower multiplies its stage term, so that this never exceeds it)."""
    return days_from_seconds(gemm_mb_s / (micro_batch * hi) * tokens_x * sequences)


def _cost_gemm_lower_bound(
    question: Scenario | BoundTerms,
    cand: Candidate,
    lo: int,
    capex: Mapping[tuple[str, int], int] | None = None,
) -> float:
    """gemm_lower_bound's cost: cost_lower_bound with the GEMM time for the step time."""
    t = _terms(question)
    s = cand.shape
    if t.scenario.pricing == "tco":
        return tco_lower_bound(t, cand, lo, exact=False, capex=capex)
    if t.prepared.capex_charged_in_full:
        return cost_lower_bound(t, cand, lo, capex)
    gpu_s = s.replica_gpus * t.scenario.sequences * cand.gemm_mb_s / s.micro_batch
    return cloud_usd(1, days_from_seconds(gpu_s), t.of(s.gpu).gpu)
