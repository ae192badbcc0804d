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

import math

from models.cost import server_usd, storage_upgrade_usd, usd_to_cents_up
from models.goodput import with_purchases
from solvers.cpsat_context import BuildContext, IntVar
from solvers.intmath import hi
from solvers.purchases import decides_purchases, spare_options, storage_options

_MILLI = 100_000  # spares per 100 in thousandths: ceil(servers x milli / 100,000)


def add_purchase_choices(ctx: BuildContext) -> None:
    """The option literals (none when no GPU type of the question decides purchases)."""
    md, s = ctx.md, ctx.scenario
    deciding = [g for g in ctx.gpu_names if decides_purchases(s, g)]
    ctx.spare_lits, ctx.storage_lits = {}, {}
    if not deciding:
        return
    spares = sorted({k for g in deciding for k in spare_options(s, g)})
    storage = sorted({b for g in deciding for b in storage_options(s, g)})
    ctx.spare_lits = {k: md.new_bool_var(f"spares_per_100[{k:g}]") for k in spares}
    ctx.storage_lits = {b: md.new_bool_var(f"storage_gb_s[{b:g}]") for b in storage}
    md.add_exactly_one(ctx.spare_lits.values())
    md.add_exactly_one(ctx.storage_lits.values())
    for g in ctx.gpu_names:  # a GPU type takes only its own options (no decision: 0, base)
        ks = spare_options(s, g) if g in deciding else [0.0]
        bs = storage_options(s, g) if g in deciding else [min(storage)]
        for k, lit in ctx.spare_lits.items():
            if k not in ks:
                md.add_bool_or([~ctx.gpu_lit[g], ~lit])
        for b, lit in ctx.storage_lits.items():
            if b not in bs:
                md.add_bool_or([~ctx.gpu_lit[g], ~lit])


def _both(ctx: BuildContext, name: str, a: IntVar, b: IntVar) -> IntVar:
    lit = ctx.md.new_bool_var(name)
    ctx.md.add_bool_and([a, b]).only_enforce_if(lit)
    ctx.md.add_bool_or([~a, ~b]).only_enforce_if(~lit)
    return lit


Rows = dict[str, tuple[float, IntVar]]  # key: (coefficient, the literal enforcing the row)


def goodput_rows(ctx: BuildContext) -> tuple[Rows, Rows, Rows]:
    """The goodput coefficients as rows ({key: (coef, literal)}) of x (per GPU type), a
    (per GPU type and storage option) and c (per GPU type and spare option), each row in
    two pieces where the interval's floor can bind (models/goodput.py floor_gpus): Young's
    below G* GPUs, the floor's from G* up, chosen by one literal tied to G per row."""
    s, fac = ctx.scenario, ctx.scenario.catalog.facility
    x_rows: Rows = {}
    a_rows: Rows = {}
    c_rows: Rows = {}
    base = fac.checkpoint_storage_gb_per_s_per_server
    floored = ctx.md.new_bool_var("checkpoint_interval_floored")
    for g in ctx.gpu_names:
        model = s.failure_model(g)
        gl = ctx.gpu_lit[g]
        if model is None:
            ctx.md.add(floored == 0).only_enforce_if(gl)
            x_rows[g], a_rows[g], c_rows[g] = (0.0, gl), (0.0, gl), (0.0, gl)
            continue
        storage = ctx.storage_lits if ctx.spare_lits else {base: gl}
        spares = ctx.spare_lits if ctx.spare_lits else {0.0: gl}
        by_storage = {b: with_purchases(model, fac, 0.0, b) for b in storage}
        stars = {b: m.floor_gpus() for b, m in by_storage.items()}
        cuts = {b: None if v is None else math.ceil(v) for b, v in stars.items()}
        pieces = [False]
        if any(n is not None and n <= ctx.gpu_cap for n in cuts.values()):
            pieces.append(True)
        for b, lit in storage.items():
            key = f"{g},storage={b:g}" if ctx.spare_lits else g
            row = lit if not ctx.spare_lits else _both(ctx, f"gpu_storage[{key}]", gl, lit)
            _tie_floor(ctx, floored, row, cuts[b] if len(pieces) == 2 else None)
            for f in pieces:
                coef = by_storage[b].coefficients(f)[1]
                a_rows[_piece(key, f)] = (coef, _piece_lit(ctx, key, row, floored, f, pieces))
        plain = with_purchases(model, fac, 0.0, base) if ctx.spare_lits else model
        for f in pieces:
            x_rows[_piece(g, f)] = (
                plain.coefficients(f)[0],
                _piece_lit(ctx, g, gl, floored, f, pieces),
            )
        for k, lit in spares.items():
            key = f"{g},spares={k:g}" if ctx.spare_lits else g
            row = lit if not ctx.spare_lits else _both(ctx, f"gpu_spares[{key}]", gl, lit)
            for f in pieces:
                coef = (
                    with_purchases(model, fac, k, base).coefficients(f)[2]
                    if ctx.spare_lits
                    else model.coefficients(f)[2]
                )
                c_rows[_piece(key, f)] = (coef, _piece_lit(ctx, key, row, floored, f, pieces))
    return x_rows, a_rows, c_rows


def _piece(key: str, floored: bool) -> str:
    return f"{key},floored" if floored else key


def _piece_lit(ctx: BuildContext, key: str, row, floored, f: bool, pieces: list[bool]) -> IntVar:
    """The row's literal, with the floor's (or its negation) when the row has two pieces."""
    if len(pieces) == 1:
        return row
    return _both(ctx, f"goodput_row[{_piece(key, f)}]", row, floored if f else ~floored)


def _tie_floor(ctx: BuildContext, floored, row, cut: int | None) -> None:
    """Under the row's literal: floored <=> G >= cut (never floored without a cut)."""
    if cut is None:
        ctx.md.add(floored == 0).only_enforce_if(row)
        return
    ctx.md.add(ctx.num_gpus >= cut).only_enforce_if([row, floored])
    ctx.md.add(ctx.num_gpus <= cut - 1).only_enforce_if([row, ~floored])


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
