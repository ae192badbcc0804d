"""The CP-SAT formulation of the design question.

Variables (named in the model): one literal per candidate shape (exactly one
is chosen), a NIC-type literal per NIC, NICs per server, the data-parallel
degree d, micro-batches per step m, servers, and auxiliary integers for the
step time. Each constraint family of the contract is guarded by its own
enforcement literal ``enforce[family]``; solving normally fixes them true, the
explanation code (solvers/explain.py) passes them as assumptions or leaves
them out. Products of two variables use AddMultiplicationEquality.

The model is built in parts over one BuildContext (solvers/cpsat/context.py):
the choices, scale, NICs, servers, time (solvers/cpsat/time.py, with its MoE terms from
solvers/cpsat/expert.py), the batch's tokens (solvers/cpsat/batch_tokens.py), failures
(solvers/cpsat/goodput.py), the purchases (solvers/cpsat/purchases.py), the cluster and
the cost (solvers/cpsat/cost.py), then every active family's own encoding
(solvers/families/), the redundant cuts, the objective and the search order. The parts
are siblings: each imports only the context and the bottom floors, never another part
(cpsat_expert aside, the time part's own MoE terms), and this module calls them in
order, handing each what an earlier one or the bounds computed through the context
(issue 32: solvers/ in at most 7 import floors, tests/test_import_cycles.py).

Units: time in ``unit_s`` seconds (ns or coarser, chosen so that the largest
step fits in ~1e12 units); usage is rounded up and capacity down, so a plan
CP-SAT admits always passes the float model (solvers/plan.py re-checks it).
The objective T' is K x step time / global batch (time per trained sequence),
which times the training sequences is the time to train.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ortools.sat.python import cp_model

from models.cost import usd_to_cents_up
from models.pipeline import microbatch_step
from models.units import seconds_from_days
from solvers.cpsat.batch_tokens import add_batch_tokens, tokens_room
from solvers.cpsat.cluster import ClusterTerms
from solvers.cpsat.context import Bounds, BuildContext
from solvers.cpsat.cost import (
    TCO_UNITS_PER_CENT,
    add_cluster,
    add_cost,
    billed_gpu_time,
    charges_tco,
)
from solvers.cpsat.goodput import add_goodput, headroom
from solvers.cpsat.purchases import add_purchase_choices, add_purchase_cost
from solvers.cpsat.time import add_time
from solvers.families import REGISTRY, needs_cluster, nic_dominance
from solvers.families.ep_domain import add_folding
from solvers.intmath import down, up
from solvers.limits import QuestionTooLarge
from solvers.scenario import GPU_CAP, PreparedQuestion, Scenario
from solvers.screen.bounds import BoundTerms, dp_bounds, objective_lower_bounds, prepare_bounds
from solvers.space import Candidate

__all__ = ["TCO_UNITS_PER_CENT", "BuildContext", "Formulation", "build"]


@dataclass
class Formulation:
    model: cp_model.CpModel
    x: list[cp_model.IntVar]
    nic_lits: dict[str, cp_model.IntVar]
    nics: cp_model.IntVar
    dp: cp_model.IntVar
    m: cp_model.IntVar
    nodes: cp_model.IntVar
    objective: cp_model.LinearExprT
    enforce: dict[str, cp_model.IntVar] = field(default_factory=dict)
    candidates: list[Candidate] = field(default_factory=list)
    cluster: ClusterTerms | None = None  # fabric, racks and power, when the question prices them
    # hot spares and checkpoint storage options (solvers/cpsat/purchases.py; empty: none)
    spare_lits: dict[float, cp_model.IntVar] = field(default_factory=dict)
    storage_lits: dict[float, cp_model.IntVar] = field(default_factory=dict)
    days_per_unit: float | None = None  # the time objective's days per unit (None: cost)
    # what the build read of the question (Scenario.prepare): the plans read it too
    prepared: PreparedQuestion | None = None
    # the expected time per sequence (the time objective's own variable): the cost
    # objective's second phase minimises it at the optimal cost (solvers/cpsat/solve.py)
    time_per_seq: cp_model.IntVar | None = None


def build(
    scenario: Scenario,
    candidates: list[Candidate],
    cost_cap_usd: float | None = None,
    bounds: Bounds | None = None,
    terms: BoundTerms | None = None,
) -> Formulation:
    """The CP-SAT model of ``scenario`` over ``candidates``, with the finest time unit that fits int64.

    ``cost_cap_usd``: no plan that matters costs more (an incumbent's cost with a margin);
    it tightens the bounds of the TCO products, so their rounding is finer. ``bounds``:
    each candidate's DP range and objective lower bound (solvers/screen/bounds.py), when the
    caller has them. ``terms``: ``bounds.prepare_bounds(scenario)`` (with what the scenario
    prepared), when the caller has it (once per solve)."""
    terms = terms if terms is not None else prepare_bounds(scenario)
    coarsen = 1.0
    for _ in range(8):
        try:
            form = _build(scenario, terms, candidates, coarsen, cost_cap_usd, bounds)
        except OverflowError:
            coarsen *= 1000.0
            continue
        # CP-SAT's own check: the sum of the variables' domains must fit int64 too (many
        # wide terms, e.g. goodput rows per purchase option at a high failure rate)
        if not form.model.validate():
            return form
        coarsen *= 1000.0
    raise QuestionTooLarge(scenario.pricing, scenario.catalog.facility.lifetime_years is not None)


def _build(
    scenario: Scenario,
    terms: BoundTerms,
    candidates: list[Candidate],
    coarsen: float,
    cost_cap_usd: float | None = None,
    given_bounds: Bounds | None = None,
) -> Formulation:
    if not candidates:
        raise ValueError("no candidate shapes")
    md = cp_model.CpModel()
    ctx = BuildContext(
        md, scenario, list(candidates), coarsen, cost_cap_usd, given_bounds, terms.prepared, terms
    )
    _choices(ctx)
    add_purchase_choices(ctx)
    _scale(ctx)
    _nics(ctx)
    _batch(ctx)
    _servers(ctx)
    if charges_tco(ctx):  # read by the goodput's and the cost's GPU-time cap
        ctx.least_per_gpu = [terms.per_gpu[g].least_per_gpu for g in ctx.gpus]
    _time(ctx)
    if needs_cluster(scenario):
        add_cluster(ctx)
        add_purchase_cost(ctx)
    add_cost(ctx)
    for family in REGISTRY:
        if family.name in ctx.enforce:
            family.encode(ctx)
    _cuts(ctx)
    form = Formulation(
        md,
        ctx.x,
        ctx.nic_lits,
        ctx.nics_per_node,
        ctx.dp,
        ctx.m,
        ctx.nodes,
        _objective(ctx),
        ctx.enforce,
        list(candidates),
        ctx.cluster,
        ctx.spare_lits,
        ctx.storage_lits,
        ctx.days_per_unit if scenario.objective == "time" else None,
        terms.prepared,
        ctx.per_seq,
    )
    _search_order(ctx)
    return form


def _time(ctx: BuildContext) -> None:
    """The time parts, in this order (each reads what the one before set): the headroom the
    batch's tokens and the failures leave in int64 (``goodput_room``), T' and G x T'
    (solvers/cpsat/time.py), their inflation by the batch's tokens
    (solvers/cpsat/batch_tokens.py), then their expected values with failures
    (solvers/cpsat/goodput.py)."""
    ctx.goodput_room = headroom(ctx) * tokens_room(ctx)
    add_time(ctx)
    add_batch_tokens(ctx)
    add_goodput(ctx)


def _choices(ctx: BuildContext) -> None:
    """One literal per shape, per GPU type and per active family; the NIC types on offer."""
    md, s, cands = ctx.md, ctx.scenario, ctx.candidates
    # only NIC types some GPU of the question takes (each brings its own fabric terms)
    q = ctx.prepared
    usable = {nc.name for g in {c.shape.gpu for c in cands} for nc in q.nics_for[g]}
    ctx.nics = [nc for nc in q.nic_specs if nc.name in usable] or list(q.nic_specs)
    ctx.x = [md.new_bool_var(f"shape[{i}]") for i in range(len(cands))]
    md.add_exactly_one(ctx.x)
    ctx.enforce = {}
    for family in REGISTRY:
        if family.active(s):
            ctx.enforce[family.name] = md.new_bool_var(f"enforce[{family.name}]")
            md.add(ctx.enforce[family.name] == 1)
    ctx.shapes = [c.shape for c in cands]
    ctx.gpus = {c.shape.gpu: s.catalog.gpu(c.shape.gpu) for c in cands}
    ctx.gpu_names = sorted(ctx.gpus)
    ctx.gpu_lit = {g: md.new_bool_var(f"gpu[{g}]") for g in ctx.gpu_names}
    for g in ctx.gpu_names:
        md.add(ctx.gpu_lit[g] == sum(ctx.x[i] for i, sh in enumerate(ctx.shapes) if sh.gpu == g))


def _scale(ctx: BuildContext) -> None:
    """The largest admissible DP degree and micro-batches per step: the variables d and m
    (the enforced families' limits bound their domains)."""
    s, enforce = ctx.scenario, ctx.enforce
    ctx.ceiling_seq = down(s.ceiling_tokens / s.seq_len) if "batch_ceiling" in enforce else None
    gpu_cap = GPU_CAP
    if "max_gpus" in enforce:
        caps = [ctx.prepared.gpu_caps[g] for g in ctx.gpus]
        if all(c is not None for c in caps):
            gpu_cap = min(gpu_cap, max(c for c in caps if c is not None))
    if "budget" in enforce and ctx.prepared.capex_charged_in_full:
        cheapest = min(usd_to_cents_up(g.price_usd) for g in ctx.gpus.values())
        gpu_cap = min(gpu_cap, int(s.budget * 100 // cheapest))
    ctx.gpu_cap = max(1, gpu_cap)
    dp_max, m_max = ctx.gpu_cap, GPU_CAP
    # the batch-tokens model's own cap holds with or without the ceiling (exhaustive.py)
    model_cap = ctx.prepared.model_batch_cap_seq
    batch_caps = [c for c in (ctx.ceiling_seq, model_cap) if c is not None and c > 0]
    if batch_caps:
        dp_max, m_max = min(dp_max, min(batch_caps)), min(batch_caps)
    ctx.dp_max, ctx.m_max = dp_max, max(1, m_max)
    ctx.dp = ctx.md.new_int_var(1, ctx.dp_max, "dp")
    ctx.m = ctx.md.new_int_var(1, ctx.m_max, "microbatches")


def _nics(ctx: BuildContext) -> None:
    """One NIC type the chosen GPU's server takes, a count its design allows (the vendor's
    counts: solvers/families/nic_slots.py; here the relaxed rule's)."""
    md, s, nics = ctx.md, ctx.scenario, ctx.nics
    q = ctx.prepared
    ctx.counts_of = {name: q.nic_counts[name] for name in ctx.gpus}
    ctx.fits_of = {name: {nc.name for nc in q.nics_for[name]} for name in ctx.gpus}
    max_count = max(max(c) for c in ctx.counts_of.values())
    ctx.nic_lits = {nc.name: md.new_bool_var(f"nic[{nc.name}]") for nc in nics}
    md.add_exactly_one(ctx.nic_lits.values())
    ctx.nics_per_node = md.new_int_var(1, max_count, "nics_per_node")
    ctx.nic_count = {}
    for nc in nics:
        v = md.new_int_var(0, max_count, f"nics_of[{nc.name}]")
        md.add(v == ctx.nics_per_node).only_enforce_if(ctx.nic_lits[nc.name])
        md.add(v == 0).only_enforce_if(~ctx.nic_lits[nc.name])
        ctx.nic_count[nc.name] = v
    ctx.node_bw = md.new_int_var(
        1, max_count * max(up(nc.speed_gbit_per_s) for nc in nics), "node_gbit_s"
    )
    md.add(ctx.node_bw == sum(down(nc.speed_gbit_per_s) * ctx.nic_count[nc.name] for nc in nics))
    for name in ctx.gpus:
        for nc in nics:
            if nc.name not in ctx.fits_of[name]:  # PCIe generation or the vendor's design
                md.add_bool_or([~ctx.gpu_lit[name], ~ctx.nic_lits[nc.name]])
        if not ctx.fits_of[name]:
            md.add(ctx.gpu_lit[name] == 0)
        md.add_linear_expression_in_domain(
            ctx.nics_per_node, cp_model.Domain.from_values(q.relaxed_nic_counts[name])
        ).only_enforce_if(ctx.gpu_lit[name])
    if nic_dominance(s):
        _fastest_nics(ctx)


def _fastest_nics(ctx: BuildContext) -> None:
    """Dominance: rented GPU-hours do not charge for NICs, and more NIC bandwidth never slows
    a step, so the fastest NIC in every slot is always best (exhaustive.py too; not under a
    family that prices NICs, such as the power cap, where switches draw power)."""
    for name in ctx.gpus:
        fitting = [nc for nc in ctx.nics if nc.name in ctx.fits_of[name]]
        if not fitting:
            continue
        fastest = max(fitting, key=lambda nc: (nc.speed_gbit_per_s, nc.name))
        ctx.md.add(ctx.nic_lits[fastest.name] == 1).only_enforce_if(ctx.gpu_lit[name])
        ctx.md.add(ctx.nics_per_node == max(ctx.counts_of[name])).only_enforce_if(ctx.gpu_lit[name])


def _batch(ctx: BuildContext) -> None:
    """W = m d micro-batches, global batch GB = b W sequences."""
    md, shapes = ctx.md, ctx.shapes
    ctx.w = md.new_int_var(1, ctx.dp_max * ctx.m_max, "microbatches_total")
    md.add_multiplication_equality(ctx.w, [ctx.dp, ctx.m])
    ctx.b_sel = md.new_int_var(1, max(s.micro_batch for s in shapes), "micro_batch")
    md.add(ctx.b_sel == ctx.sel(s.micro_batch for s in shapes))
    gb_max = max(s.micro_batch for s in shapes) * ctx.dp_max * ctx.m_max
    if "batch_ceiling" in ctx.enforce and ctx.ceiling_seq:
        gb_max = min(gb_max, ctx.ceiling_seq)
    model_cap = ctx.prepared.model_batch_cap_seq
    if model_cap is not None:  # not relaxable: the model's range
        gb_max = min(gb_max, model_cap)
    ctx.global_batch = md.new_int_var(1, gb_max, "global_batch")
    md.add_multiplication_equality(ctx.global_batch, [ctx.b_sel, ctx.w])
    # the interleaved schedule itself needs at least p micro-batches (Narayanan et al. SC'21,
    # section 2.2): not a relaxable rule
    md.add(ctx.m >= ctx.sel(s.pp if s.vp > 1 else 1 for s in shapes))
    # and runs them in groups of p per virtual stage: m a multiple of p
    # (models.pipeline.microbatch_step), not relaxable either
    steps = [microbatch_step(s.pp, s.vp) for s in shapes]
    for p in sorted(set(steps) - {1}):
        groups = md.new_int_var(1, max(1, ctx.m_max // p), f"microbatch_groups[{p}]")
        for x, step in zip(ctx.x, steps, strict=True):
            if step == p:
                md.add(ctx.m == p * groups).only_enforce_if(x)


def _servers(ctx: BuildContext) -> None:
    """G = replica x d in whole purchase units, servers = ceil(G / GPUs per server), and the
    regimes: gradient group inside one server (r_dp), whole job in one server (r_pp)."""
    md, shapes, gpus = ctx.md, ctx.shapes, ctx.gpus
    rep = md.new_int_var(1, max(s.replica_gpus for s in shapes), "replica_gpus")
    md.add(rep == ctx.sel(s.replica_gpus for s in shapes))
    ctx.num_gpus = num_gpus = md.new_int_var(1, ctx.gpu_cap, "num_gpus")
    md.add_multiplication_equality(num_gpus, [rep, ctx.dp])
    md.add(num_gpus <= GPU_CAP)
    for name, spec in gpus.items():  # bought in whole servers or racks (catalog ServerSpec)
        unit = spec.server.purchase_unit_gpus
        if unit > 1:
            units = md.new_int_var(0, ctx.gpu_cap // unit + 1, f"purchase_units[{name}]")
            md.add(num_gpus == unit * units).only_enforce_if(ctx.gpu_lit[name])
    gpn_hi = max(g.server.gpus_per_server for g in gpus.values())
    gpn = md.new_int_var(1, gpn_hi, "gpus_per_server")
    md.add(gpn == ctx.sel(gpus[s.gpu].server.gpus_per_server for s in shapes))
    ctx.nodes = md.new_int_var(1, ctx.gpu_cap, "servers")
    node_gpus = md.new_int_var(1, GPU_CAP * 1024, "server_gpu_slots")
    md.add_multiplication_equality(node_gpus, [ctx.nodes, gpn])
    md.add(node_gpus >= num_gpus)
    md.add(node_gpus <= num_gpus + gpn - 1)
    if "ep_domain" not in ctx.enforce:  # Megatron-Core's folding holds whatever the families
        add_folding(ctx)
    ctx.cf = [c.coeffs for c in ctx.candidates]
    ctx.r_dp = md.new_bool_var("dp_group_in_one_server")
    ctx.r_pp = md.new_bool_var("job_in_one_server")
    thd = [math.ceil(c.dp_ranks_per_node / s.cp) for c, s in zip(ctx.cf, shapes, strict=True)]
    thp = [c.domain_gpus // s.replica_gpus for c, s in zip(ctx.cf, shapes, strict=True)]
    md.add(ctx.dp <= ctx.sel(thd) - 1).only_enforce_if(ctx.r_dp)
    md.add(ctx.dp >= ctx.sel(thd)).only_enforce_if(~ctx.r_dp)
    md.add(ctx.dp <= ctx.sel(thp)).only_enforce_if(ctx.r_pp)
    md.add(ctx.dp >= ctx.sel(thp) + 1).only_enforce_if(~ctx.r_pp)


def _cuts(ctx: BuildContext) -> None:
    """Redundant cuts (valid bounds that let CP-SAT discard shapes without search): each
    shape's DP range and a lower bound on its objective (solvers/screen/bounds.py)."""
    md, s, cands = ctx.md, ctx.scenario, ctx.candidates
    ctx.lbs = [0.0] * len(cands)  # per candidate, objective units (the search order)
    if ctx.given_bounds is not None:
        bounds, ctx.lbs = ctx.given_bounds
    else:
        bounds = [dp_bounds(ctx.terms, cand) for cand in cands]
        ctx.lbs = objective_lower_bounds(ctx.terms, cands, bounds)
    md.add(ctx.dp <= ctx.sel(max(1, min(hi, ctx.dp_max)) for _, hi in bounds))
    md.add(ctx.dp >= ctx.sel(min(lo, ctx.dp_max) for lo, _ in bounds))
    if s.objective == "time":
        to_units = (
            ctx.k_scale
            * seconds_from_days(1.0)
            / (ctx.prepared.sequences * ctx.unit_s)
            * (1 - 1e-9)
        )
        md.add(ctx.per_seq >= ctx.sel(max(0, math.floor(lb * to_units) - 1) for lb in ctx.lbs))
    elif s.pricing != "cloud":
        per_cent = ctx.per_cent
        md.add(ctx.cost_expr >= ctx.sel(down(lb * 100 * per_cent * (1 - 1e-12)) for lb in ctx.lbs))
    else:  # in GPU-time units of each GPU type (the cost's coefficients are not integers)
        for gname in ctx.gpu_names:
            # the model's GPU-time rounds some terms down (the overlap window, the DP
            # savings), so the cut keeps a 1e-6 margin below the float bound
            terms = [
                (ctx.x[i], down(ctx.lbs[i] * 100 / ctx.coef[gname] * (1 - 1e-6)))
                for i, sh in enumerate(ctx.shapes)
                if sh.gpu == gname
            ]
            md.add(ctx.gt_of[gname] >= sum(v * lb for v, lb in terms))
            if gname in ctx.gpu_days:  # the GPU-days billed: at least the bound's
                per_day = 24.0 * ctx.gpus[gname].cloud_usd_per_gpu_hour
                days = [
                    (ctx.x[i], down(ctx.lbs[i] / per_day * (1 - 1e-6)))
                    for i, sh in enumerate(ctx.shapes)
                    if sh.gpu == gname
                ]
                md.add(ctx.gpu_days[gname] >= sum(v * lb for v, lb in days))


def _objective(ctx: BuildContext) -> cp_model.LinearExprT:
    s = ctx.scenario
    if s.objective == "time":
        return ctx.per_seq
    if s.pricing != "cloud":
        assert ctx.cost_expr is not None
        return ctx.cost_expr
    # cloud cost = price x GPU-time: with one GPU type (solve_cpsat splits by type) the
    # GPU-time itself is the integer objective, so no float coefficient reaches CP-SAT
    if len(ctx.gpu_names) != 1:
        raise ValueError("the cloud cost objective is solved one GPU type at a time")
    (g,) = ctx.gpu_names
    if g in ctx.gpu_days:  # a block reserved in lengths: the whole GPU-days it pays
        return ctx.gpu_days[g]
    return billed_gpu_time(ctx, g)


def _search_order(ctx: BuildContext) -> None:
    """Shapes by lower bound, then the network (small domains; once fixed, the budget caps
    d tightly), then d by bisection, m, and the smallest fabric and fewest racks."""
    md = ctx.md
    order = sorted(range(len(ctx.x)), key=lambda i: (ctx.lbs[i], i))
    md.add_decision_strategy(
        [ctx.x[i] for i in order], cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
    )
    md.add_decision_strategy(
        list(ctx.nic_lits.values()), cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
    )
    md.add_decision_strategy([ctx.nics_per_node], cp_model.CHOOSE_FIRST, cp_model.SELECT_UPPER_HALF)
    md.add_decision_strategy(
        [ctx.dp],
        cp_model.CHOOSE_FIRST,
        cp_model.SELECT_UPPER_HALF
        if ctx.scenario.objective == "time"
        else cp_model.SELECT_LOWER_HALF,
    )
    # m: the largest first, or for the time with tokens that depend on the batch the
    # smallest (the ceiling's dominance puts it at the critical batch; past it each step
    # costs tokens): bench/solver.py --batch-tokens --search-work, 70b-30M 1.18 -> 0.015
    # deterministic s (the cost objective keeps the largest first: 1.9 against 2.4)
    m_order = cp_model.SELECT_UPPER_HALF
    if ctx.prepared.critical_batch_seq is not None and ctx.scenario.objective == "time":
        m_order = cp_model.SELECT_MIN_VALUE
    md.add_decision_strategy([ctx.m], cp_model.CHOOSE_FIRST, m_order)
    if ctx.cluster is not None:  # then the smallest fabric and the fewest racks (the cheapest)
        md.add_decision_strategy(
            ctx.cluster.tier_literals, cp_model.CHOOSE_FIRST, cp_model.SELECT_MAX_VALUE
        )
        md.add_decision_strategy(
            [ctx.cluster.racks], cp_model.CHOOSE_FIRST, cp_model.SELECT_MIN_VALUE
        )
