"""The cluster and cost parts of the CP-SAT model: servers, NICs, fabric, racks and power
(solvers/cpsat/cluster.py), and the cost of the question's pricing (models/cost.py):
capex in cents, TCO in 1/TCO_UNITS_PER_CENT cents, cloud rent as GPU-time per GPU type."""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from models.cost import usd_to_cents_up
from models.rental import LENGTH_TOL, Billing
from solvers.cpsat.cluster import add_cluster_terms, product_cents
from solvers.cpsat.context import BuildContext, IntVar, gpu_days_per_unit
from solvers.cpsat.gpu_time_cap import cloud_cents_per_unit, gpu_time_cap, tco_rates
from solvers.intmath import ceil_div, down, hi, product, up
from solvers.limits import TCO_UNITS_PER_CENT
from solvers.scenario import GPU_CAP


def _chosen(md: cp_model.CpModel, name: str, hi_: int, value, lit) -> IntVar:
    """name = value if lit else 0."""
    var = md.new_int_var(0, hi_, name)
    md.add(var == value).only_enforce_if(lit)
    md.add(var == 0).only_enforce_if(~lit)
    return var


def add_cluster(ctx: BuildContext) -> None:
    """Servers and NICs per type, fabric, racks and IT power; the capex expression."""
    md, gpus, nics = ctx.md, ctx.gpus, ctx.nics
    gpus_of, nodes_of = {}, {}
    for g in ctx.gpu_names:
        gpus_of[g] = _chosen(md, f"gpus_of[{g}]", GPU_CAP, ctx.num_gpus, ctx.gpu_lit[g])
        nodes_of[g] = _chosen(md, f"servers_of[{g}]", GPU_CAP, ctx.nodes, ctx.gpu_lit[g])
    nn = product(md, "nics_total", ctx.nodes, ctx.nics_per_node)
    nics_of = {
        nc.name: _chosen(md, f"nics_total_of[{nc.name}]", hi(nn), nn, ctx.nic_lits[nc.name])
        for nc in nics
    }
    cluster = add_cluster_terms(
        md, ctx.scenario, ctx.nodes, nodes_of, ctx.gpu_lit, ctx.nic_lits, ctx.nic_count, nics_of
    )
    ctx.capex_expr = cp_model.LinearExpr.sum(
        [
            *(usd_to_cents_up(gpus[g].price_usd) * gpus_of[g] for g in ctx.gpu_names),
            *(usd_to_cents_up(gpus[g].server.overhead_usd) * nodes_of[g] for g in ctx.gpu_names),
            *(usd_to_cents_up(nc.price_usd) * nics_of[nc.name] for nc in nics),
            cluster.capex_cents,
        ]
    )
    ctx.cluster, ctx.nics_total = cluster, nn


def charges_tco(ctx: BuildContext) -> bool:
    """Whether the model carries the TCO (the objective, or a budget on it): then add_cost
    reads ``ctx.least_per_gpu``, which the model sets before."""
    s = ctx.scenario
    return s.pricing == "tco" and (s.objective == "cost" or "budget" in ctx.enforce)


def add_cost(ctx: BuildContext) -> None:
    """The cost expression of the question's pricing (its budget: solvers/families/budget.py)."""
    s = ctx.scenario
    ctx.per_cent = TCO_UNITS_PER_CENT if s.pricing == "tco" else 1
    if s.pricing == "capex":
        ctx.cost_expr = ctx.capex_expr
    elif charges_tco(ctx):
        ctx.cost_expr = _tco_cost(ctx)
    elif s.pricing == "cloud":
        _cloud_gpu_time(ctx)


def _cloud_gpu_time(ctx: BuildContext) -> None:
    """Cost = hourly price x GPU-time, G x T' built from per-shape factors (GpuTime: tight
    once the shape is chosen), in cents per GPU-time unit of each GPU type."""
    md, s, gpu_time = ctx.md, ctx.scenario, ctx.gpu_time
    ctx.coef = cloud_cents_per_unit(ctx)
    budget = "budget" in ctx.enforce
    gt_hi = hi(gpu_time.var)
    cap = gpu_time_cap(ctx)
    if cap is not None:
        gt_hi = min(gt_hi, cap)
        md.add(gpu_time.var <= gt_hi)
    for g in ctx.gpu_names:
        cap = gt_hi
        if budget:
            cap = min(cap, down(s.budget * 100 / ctx.coef[g]))
        ctx.gt_of[g] = md.new_int_var(0, max(0, cap), f"gpu_time_of[{g}]")
        md.add(ctx.gt_of[g] == gpu_time.var).only_enforce_if(ctx.gpu_lit[g])
        md.add(ctx.gt_of[g] == 0).only_enforce_if(~ctx.gpu_lit[g])
    ctx.cost_expr = sum(ctx.coef[g] * ctx.gt_of[g] for g in ctx.gpu_names)
    min_days = s.cloud_min_days
    ctx.min_gt_per_gpu = up(min_days / gpu_days_per_unit(ctx)) if min_days > 0 else 0
    ctx.gpu_days = {}
    for g in ctx.gpu_names:
        billing = s.billing(g)
        if not billing.by_use:
            ctx.gpu_days[g] = _billed_gpu_days(ctx, g, billing)


def _billed_gpu_days(ctx: BuildContext, g: str, billing: Billing) -> IntVar:
    """The whole GPU-days a rented plan of GPU type ``g`` pays when its block is reserved
    in lengths (models.rental.Billing): G x D, D a length (a variable over the block's
    lengths: AWS's 1 to 14 days, then 21 to 182 by weeks) with D at or above the plan's
    days, T' x days per unit <= D / (1 - LENGTH_TOL) in whole units of T' (rounded down:
    a plan CP-SAT bills D days is billed at most D by the float model); a plan longer than
    the block's longest has no length. The cost objective minimises it (the float cost is
    24 x the rate x it), and the budget bounds it (solvers/families/budget.py)."""
    md, s = ctx.md, ctx.scenario
    per_day = down(1.0 / (ctx.days_per_unit * (1.0 - LENGTH_TOL)))  # units of T' in a day
    rate = ctx.gpus[g].cloud_usd_per_gpu_hour
    top = hi(ctx.per_seq) * ctx.days_per_unit  # the most days a plan runs
    if "deadline" in ctx.enforce:
        top = min(top, s.deadline * (1 + 1e-6))
    if "budget" in ctx.enforce:  # one GPU for the days the budget pays
        top = min(top, s.budget / (24.0 * rate) * (1 + 1e-6))
    days = _length_var(md, f"billed_days[{g}]", billing, max(top, 1.0))
    if per_day < 1 or max(per_day, ctx.gpu_cap) * hi(days) >= 2**62:
        raise OverflowError("a reservation's days in time units leave 64-bit arithmetic")
    md.add(ctx.per_seq <= per_day * days).only_enforce_if(ctx.gpu_lit[g])
    gpu_days = md.new_int_var(0, ctx.gpu_cap * hi(days), f"billed_gpu_days[{g}]")
    md.add_multiplication_equality(gpu_days, [ctx.num_gpus, days])
    return gpu_days


def _length_var(md: cp_model.CpModel, name: str, billing: Billing, top: float) -> IntVar:
    """A variable over the block's reservation lengths up to the first at or above ``top``
    days (Billing.lengths_to), the longest at most; a stretch without end as start + step
    x K, so that its lengths need not be listed."""
    steps = billing.steps
    open_start = steps[-2][0] if len(steps) > 1 else 0.0
    if not math.isinf(steps[-1][0]) or top <= open_start:
        lengths = [int(d) for d in billing.lengths_to(top)]
        return md.new_int_var_from_domain(cp_model.Domain.from_values(lengths), name)
    step = steps[-1][1]
    closed = [int(d) for d in billing.lengths_to(open_start)] if open_start > 0 else []
    count = max(1, math.ceil((top - open_start) / step))
    var = md.new_int_var(1, int(open_start) + step * count, name)
    k = md.new_int_var(1, count, f"{name}_steps")
    if not closed:
        md.add(var == int(open_start) + step * k)
        return var
    past = md.new_bool_var(f"{name}_past_{int(open_start)}")
    md.add(var == int(open_start) + step * k).only_enforce_if(past)
    md.add_linear_expression_in_domain(var, cp_model.Domain.from_values(closed)).only_enforce_if(
        ~past
    )
    return var


def billed_gpu_time(ctx: BuildContext, g: str) -> cp_model.LinearExprT:
    """The GPU-time a rented plan of GPU type ``g`` pays for, in the cost's GPU-time units:
    its own, or under a term with a minimum (Scenario.cloud_min_days) the GPUs times that
    minimum where that is more (models.evaluate.billed_days). The minimum per GPU is
    rounded up to a whole unit: under one unit per GPU of its thousands or more."""
    gt, per_gpu = ctx.gt_of[g], ctx.min_gt_per_gpu
    if per_gpu <= 0:
        return gt
    top = max(hi(gt), hi(ctx.num_gpus) * per_gpu)
    if top >= 2**62:  # answered by the model's retry at a coarser time unit
        raise OverflowError("a term's minimum in GPU-time units leaves 64-bit arithmetic")
    billed = ctx.md.new_int_var(0, top, f"billed_gpu_time[{g}]")
    ctx.md.add(billed >= gt)
    ctx.md.add(billed >= per_gpu * ctx.num_gpus)
    return billed


def _capex_hi(ctx: BuildContext) -> int:
    """An upper bound of the capex expression, in cents."""
    gpus, cluster = ctx.gpus.values(), ctx.cluster
    assert cluster is not None and ctx.nics_total is not None
    return (
        ctx.gpu_cap * max(usd_to_cents_up(g.price_usd) for g in gpus)
        + hi(ctx.nodes) * max(usd_to_cents_up(g.server.overhead_usd) for g in gpus)
        + hi(ctx.nics_total) * max(usd_to_cents_up(nc.price_usd) for nc in ctx.nics)
        + cluster.capex_hi_cents
        + ctx.purchase_hi_cents
    )


# steps of a watt in which the TCO model's power per GPU is rounded up
WATT_STEPS = 1024


def _tco_cost(ctx: BuildContext) -> cp_model.LinearExprT:
    """TCO in 1/TCO_UNITS_PER_CENT cents: capex (or its lifetime share) + energy (models/cost.py).

    Energy = eps x IT power x T' = eps x (IT power / G) x (G x T') (eps: cents per W per
    GPU-time unit, at the average draw and the PUE). With a lifetime, share + energy =
    sigma x (G x T') x (capex + kappa x power) / G, kappa = eps / sigma cents per W, so
    one product carries both. Both factors, a per-GPU rate (rounded up) and the
    GPU-time per sequence, are nearly fixed once the shape is, so the product's
    bounds are tight; their ranges come from the least rate per GPU (solvers/screen/bounds.py
    least_per_gpu, handed in by the model), the least GPU-time of any shape, and the budget or the
    incumbent's cost, which keeps their rounding near 2^-20."""
    md, gpu_time, cluster = ctx.md, ctx.gpu_time, ctx.cluster
    assert cluster is not None
    r = tco_rates(ctx)
    cap, eps, p_lo = r.cap, r.eps, r.p_lo
    t_lo, t_hi = gpu_time.lo, hi(gpu_time.var)
    t_cap = gpu_time_cap(ctx)
    if t_cap is not None:
        t_hi = min(t_hi, t_cap)
    per_cent = TCO_UNITS_PER_CENT

    def per_gpu_of(name: str, amount, amount_hi: int, lo: int) -> IntVar:
        return ceil_div(md, name, amount, amount_hi, ctx.num_gpus, low=lo)

    if r.sigma is None:  # no lifetime: capex + energy
        # power per GPU in 1/WATT_STEPS W: rounded up to a whole watt, a plan's energy was up
        # to 1/1,400 too high (Llama 3 405B on 112 H100 over 1,294 days: $146, so a budget
        # the reference solver met was refused)
        lo_steps = WATT_STEPS * p_lo
        p_hi = WATT_STEPS * hi(cluster.it_power_w)
        if cap is not None:
            md.add(ctx.capex_expr <= down(cap))  # capex alone is within the cost
            if eps > 0:
                p_hi = min(p_hi, down(WATT_STEPS * cap / (eps * t_lo)))
        md.add(gpu_time.var <= t_hi)
        power = WATT_STEPS * cluster.it_power_w
        steps = per_gpu_of("power_per_gpu", power, WATT_STEPS * hi(cluster.it_power_w), lo_steps)
        md.add(steps <= max(lo_steps, p_hi))
        energy = product_cents(
            md,
            "energy",
            steps,
            (lo_steps, p_hi),
            gpu_time.var,
            (t_lo, t_hi),
            eps * per_cent / WATT_STEPS,
            most=None if cap is None else cap * per_cent,
        )
        return per_cent * ctx.capex_expr + energy
    capex_hi = _capex_hi(ctx)
    sigma, kappa, q_lo = r.sigma, r.kappa, r.q_lo
    assert sigma is not None
    q_hi = 1024 * capex_hi + kappa * hi(cluster.it_power_w)
    if cap is not None:
        q_hi = min(q_hi, down(cap * 1024 / (sigma * t_lo)))
    weight_hi = 1024 * capex_hi + kappa * hi(cluster.it_power_w)
    if weight_hi >= 2**62:  # kappa does not shrink with the time unit: QuestionTooLarge
        raise OverflowError("tco_weight: capex and power per GPU leave 64-bit arithmetic")
    weighted = md.new_int_var(0, weight_hi, "tco_weight")
    md.add(weighted == 1024 * ctx.capex_expr + kappa * cluster.it_power_w)
    rate = per_gpu_of("tco_weight_per_gpu", weighted, hi(weighted), q_lo)
    md.add(gpu_time.var <= t_hi)
    md.add(rate <= max(q_lo, q_hi))
    return product_cents(
        md,
        "tco",
        rate,
        (q_lo, q_hi),
        gpu_time.var,
        (t_lo, t_hi),
        sigma / 1024 * per_cent,
        most=None if cap is None else cap * per_cent,
    )
