"""Hot spares and checkpoint storage as decisions in the CP-SAT model (issue 18 item 4;
solvers/purchases.py holds the options both solvers share).

One literal per spare option (spares per 100 servers) and one per storage option (GB/s per
server), exactly one of each, the way a NIC type and count are chosen. Their effect is
exact and per (GPU type, option): the goodput coefficients (models/goodput.py
``with_purchases(...).coefficients()``) become rows enforced by the AND of the GPU type's
and the option's literals, the storage moving a (the reload and the interval's write
bound) and the spares c (the restart), x moving with neither; the price enters the capex
as the spare count (ceil(servers x k / 100), two linear inequalities per option) times the
GPU type's server price, plus the servers times the storage option's price per server
(models/cost.py purchases_cents, to the cent as the BOM). Nothing here is tabulated over G
and no bound changes: the purchases only lower the expected time (the ideal time still
bounds it below) and only add cost (every capex lower bound stays one)."""

from __future__ import annotations

from models.cost import server_usd, storage_upgrade_usd, usd_to_cents_up
from solvers.cpsat.context import BuildContext, IntVar
from solvers.intmath import hi

_MILLI = 100_000  # spares per 100 in thousandths: ceil(servers x milli / 100,000)


def add_purchase_choices(ctx: BuildContext) -> None:
    """The option literals (none when no GPU type of the question decides purchases)."""
    md, q = ctx.md, ctx.prepared
    deciding = [g for g in ctx.gpu_names if q.decides_purchases[g]]
    ctx.spare_lits, ctx.storage_lits = {}, {}
    if not deciding:
        return
    spares = sorted({k for g in deciding for k in q.spare_options[g]})
    storage = sorted({b for g in deciding for b in q.storage_options[g]})
    ctx.spare_lits = {k: md.new_bool_var(f"spares_per_100[{k:g}]") for k in spares}
    ctx.storage_lits = {b: md.new_bool_var(f"storage_gb_s[{b:g}]") for b in storage}
    md.add_exactly_one(ctx.spare_lits.values())
    md.add_exactly_one(ctx.storage_lits.values())
    for g in ctx.gpu_names:  # a GPU type takes only its own options (no decision: 0, base)
        ks = q.spare_options[g] if g in deciding else (0.0,)
        bs = q.storage_options[g] if g in deciding else (min(storage),)
        for k, lit in ctx.spare_lits.items():
            if k not in ks:
                md.add_bool_or([~ctx.gpu_lit[g], ~lit])
        for b, lit in ctx.storage_lits.items():
            if b not in bs:
                md.add_bool_or([~ctx.gpu_lit[g], ~lit])


def _chosen(ctx: BuildContext, name: str, top: int, value, lit) -> IntVar:
    var = ctx.md.new_int_var(0, top, name)
    ctx.md.add(var == value).only_enforce_if(lit)
    ctx.md.add(var == 0).only_enforce_if(~lit)
    return var


def add_purchase_cost(ctx: BuildContext) -> None:
    """Add the spares' and the storage's price (cents) to the capex expression."""
    if not ctx.spare_lits:
        return
    md, fac, nodes = ctx.md, ctx.scenario.catalog.facility, ctx.nodes
    parts, top = [], 0
    spare_hi = 0
    counts = []
    for k, lit in ctx.spare_lits.items():
        milli = round(k * 1000)
        if milli == 0:
            continue
        k_hi = -(-hi(nodes) * milli // _MILLI)
        var = md.new_int_var(0, k_hi, f"spare_servers_if[{k:g}]")
        md.add(_MILLI * var >= milli * nodes).only_enforce_if(lit)
        md.add(_MILLI * var <= milli * nodes + _MILLI - 1).only_enforce_if(lit)
        md.add(var == 0).only_enforce_if(~lit)
        counts.append(var)
        spare_hi = max(spare_hi, k_hi)
    if counts:
        spares = md.new_int_var(0, spare_hi, "spare_servers")
        md.add(spares == sum(counts))
        for g in ctx.gpu_names:
            cents = usd_to_cents_up(server_usd(ctx.gpus[g]))
            parts.append(
                cents * _chosen(ctx, f"spare_servers_of[{g}]", spare_hi, spares, ctx.gpu_lit[g])
            )
            top = max(top, cents * spare_hi)
    store_top = 0
    for b, lit in ctx.storage_lits.items():
        cents = usd_to_cents_up(storage_upgrade_usd(fac, b))
        if cents > 0:
            parts.append(
                cents * _chosen(ctx, f"servers_with_storage[{b:g}]", hi(nodes), nodes, lit)
            )
            store_top = max(store_top, cents * hi(nodes))
    ctx.capex_expr = ctx.capex_expr + sum(parts)
    ctx.purchase_hi_cents = top + store_top
