"""Goodput in the CP-SAT model: the expected time per sequence with failures, checkpoints
and restarts (models/goodput.py), encoded exactly in integers.

The expected wall time per trained sequence is W = T' (1 + x / G + a + c G) with T' the
ideal time per sequence (``per_seq``), G the GPUs and (x, a, c) the chosen GPU type's
constants (models.goodput.FailureModel.coefficients: x = 0 with Young's interval). So

    W = T' + ceil(a T') + ceil(c x (G T')) + ceil(ceil(x T') / G)

with G T' the model's GPU-time per sequence (nearly fixed once the shape is), every term
rounded up: the model overestimates the float model by a small fraction of the overhead
(coefficients to 10 or 20 bits), so a plan it admits within a deadline is within it. No tabulation over G: once the shape and the
DP degree are fixed, G is, and every term is linear in T'. The cost objectives charge
the expected GPU-time G W the same way, from G T' (solvers/cpsat/time.py
_gpu_time_per_sequence). Terms are per GPU type, each row enforced by that type's
literal. ``headroom`` reserves the range the overhead needs (the time unit's scale)."""

from __future__ import annotations

import math

from models.errors import ModelError
from models.goodput import with_purchases
from solvers.cpsat.context import BuildContext, GpuTime, IntVar
from solvers.cpsat.gpu_time_cap import gpu_time_cap
from solvers.intmath import INT_LIMIT, ceil_by, ceil_div, hi, product

_COEF_BITS = 20  # a coefficient is a fraction num / 2^k with num about 2^20 (2^10: coarse)
_FIT_BITS = 61  # num x the coarsened factor's upper end stays under 2^61
# a lost time this many times the training time is no plan (the first-order model holds for
# a few tens of percent); beyond it the time units would leave int64 whatever the coarsening
_MOST_OVERHEAD = 1e12


def headroom(ctx: BuildContext) -> int:
    """How many times the ideal time the expected time can reach on any plan of the
    question (1 without failures), so that the time units leave it room in int64."""
    s = ctx.scenario
    if s.no_failures:
        return 1
    worst = 0.0
    fac = s.catalog.facility
    for g in ctx.gpu_names:
        model = ctx.prepared.failure_models[g]
        if model is None:
            continue
        x, a, c = model.coefficients()
        worst = max(worst, x + a + c * ctx.gpu_cap)
        # the floor's piece from G* GPUs up (x' / G <= x' / G*), G* the least over the
        # storage options (faster storage can only shorten t1)
        for b in ctx.prepared.storage_options[g]:
            g_star = with_purchases(model, fac, 0.0, b).floor_gpus()
            if g_star is not None and g_star <= ctx.gpu_cap:
                x, a, c = model.coefficients(floored=True)
                worst = max(worst, x / max(1.0, g_star) + a + c * ctx.gpu_cap)
    if not worst <= _MOST_OVERHEAD:
        raise ModelError(
            f"failures: the catalog's failure and checkpoint constants lose {worst:.3g} times "
            "the training time on some plan (a checkpoint bandwidth near 0?); check the "
            "facility's checkpoint_* fields and the failure rates, or plan --no-failures"
        )
    return 2 * math.ceil(1.0 + worst)


def _both(ctx: BuildContext, name: str, a: IntVar, b: IntVar) -> IntVar:
    lit = ctx.md.new_bool_var(name)
    ctx.md.add_bool_and([a, b]).only_enforce_if(lit)
    ctx.md.add_bool_or([~a, ~b]).only_enforce_if(~lit)
    return lit


# key: (coefficient, the literal enforcing the row, the GPU type whose literal the row's
# implies: exactly one of a GPU type's rows holds when it is chosen)
Rows = dict[str, tuple[float, IntVar, str]]


def goodput_rows(ctx: BuildContext) -> tuple[Rows, Rows, Rows]:
    """The goodput coefficients as rows ({key: (coef, literal)}) of x (per GPU type), a
    (per GPU type and storage option) and c (per GPU type and spare option), each row in
    two pieces where the interval's floor can bind (models/goodput.py floor_gpus): Young's
    below G* GPUs, the floor's from G* up, chosen by one literal tied to G per row."""
    fac = ctx.scenario.catalog.facility
    x_rows: Rows = {}
    a_rows: Rows = {}
    c_rows: Rows = {}
    base = fac.checkpoint_storage_gb_per_s_per_server
    floored = ctx.md.new_bool_var("checkpoint_interval_floored")
    for g in ctx.gpu_names:
        model = ctx.prepared.failure_models[g]
        gl = ctx.gpu_lit[g]
        if model is None:
            ctx.md.add(floored == 0).only_enforce_if(gl)
            x_rows[g], a_rows[g], c_rows[g] = (0.0, gl, g), (0.0, gl, g), (0.0, gl, g)
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
                a_rows[_piece(key, f)] = (coef, _piece_lit(ctx, key, row, floored, f, pieces), g)
        plain = with_purchases(model, fac, 0.0, base) if ctx.spare_lits else model
        for f in pieces:
            x_rows[_piece(g, f)] = (
                plain.coefficients(f)[0],
                _piece_lit(ctx, g, gl, floored, f, pieces),
                g,
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
                c_rows[_piece(key, f)] = (coef, _piece_lit(ctx, key, row, floored, f, pieces), g)
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


def _scaled(
    ctx: BuildContext,
    name: str,
    var: IntVar,
    coefs: dict[str, float],
    bits: int = _COEF_BITS,
    lits: dict[str, IntVar] | None = None,
    owners: dict[str, str] | None = None,
) -> IntVar | int:
    """ceil(coef_g x var) for the chosen GPU type g: each coefficient rounded up to about
    ``bits`` bits, var rounded up to steps of 2^-(61 - bits) of its upper end. Factors whose
    range is wide (T', from d = 1 up) take 10-bit coefficients, kept for the small terms.
    ``owners``: each row's GPU type, when rows are per (GPU type, option): see _least_rows."""
    md = ctx.md
    if max(coefs.values(), default=0.0) <= 0:
        return 0
    step = max(1, -(-hi(var) // 2 ** (_FIT_BITS - 1 - bits)))
    coarse = var if step == 1 else ceil_by(md, f"{name}_coarse", var, hi(var), step)
    parts = []
    for g, coef in coefs.items():
        if coef <= 0:
            continue
        q = coef * step
        lit = (lits or ctx.gpu_lit)[g]  # a GPU type's, or a (GPU type, option) row's
        if q * hi(coarse) < 1:  # a tiny rate: ceil(coef x var) is 0 or 1; take 1 (rounded up)
            part = md.new_int_var(0, 1, f"{name}[{g}]")
            md.add(part == lit)
            parts.append(part)
            continue
        den = 2 ** max(0, bits - math.floor(math.log2(q)))
        num = math.ceil(q * den)
        top = -(-num * hi(coarse) // den)
        if num * hi(coarse) >= INT_LIMIT or den * top >= INT_LIMIT:
            raise OverflowError(f"{name}: goodput term exceeds int64")
        part = md.new_int_var(0, top, f"{name}[{g}]")
        md.add(den * part >= num * coarse).only_enforce_if(lit)
        md.add(den * part <= num * coarse + den - 1).only_enforce_if(lit)
        md.add(part == 0).only_enforce_if(~lit)
        parts.append(part)
    top_total = sum(hi(p) for p in parts)
    if top_total >= INT_LIMIT:  # the caller rebuilds coarser (as for one part's overflow)
        raise OverflowError(f"{name}: goodput term exceeds int64")
    total = md.new_int_var(0, top_total, name)
    md.add(total == sum(parts))
    if owners is not None:
        _least_rows(ctx, total, coarse, {key: c * step for key, c in coefs.items()}, owners, bits)
    return total


def _least_rows(
    ctx: BuildContext,
    total: IntVar,
    coarse: IntVar,
    qs: dict[str, float],
    owners: dict[str, str],
    bits: int,
) -> None:
    """A redundant cut per GPU type: the term is at least its least row's coefficient (in
    ``coarse``'s steps, rounded down) times ``coarse``, under the GPU type's literal alone.

    The rows are enforced by (GPU type, purchase option, interval piece) literals, so that
    until the search fixes the option no row bounds the term and it propagates 0: the
    expected time's bound is the ideal time's, and a proof over d visits every degree once
    per option (agreement seed 189: a goodput overhead of 3x the ideal time at a failure
    rate x 100, not proved in 60 s). Valid: exactly one row of the chosen GPU type holds,
    and its part is at least its coefficient times ``coarse`` (rounded up) >= the least's."""
    md = ctx.md
    for g in sorted(set(owners.values())):
        q = min(qs[key] for key, owner in owners.items() if owner == g)
        if q * hi(coarse) < 1:
            continue  # no row of this type adds a whole unit: nothing to cut
        den = 2 ** max(0, bits - math.floor(math.log2(q)))
        while den > 1 and den * hi(total) >= INT_LIMIT:
            den //= 2
        num = math.floor(q * den)
        if num < 1 or den * hi(total) >= INT_LIMIT:
            continue
        md.add(den * total >= num * coarse).only_enforce_if(ctx.gpu_lit[g])


def _times_gpus(ctx: BuildContext, name: str, var: IntVar) -> tuple[IntVar, int]:
    """G x var, var coarsened so that the product fits: (the product, var's step).

    var (the GPU-time per sequence before failures) is at most the expected GPU-time, which
    the cost bounds by the budget or the cost cap (solvers/cpsat/gpu_time_cap.py): the
    product's range, and so the restart term's steps of 2^-40 of it, come from that bound
    when there is one (no plan is excluded: the cost enforces the bound on every plan)."""
    top = hi(var)
    cap = gpu_time_cap(ctx)
    if cap is not None:
        top = max(1, min(top, cap))
    step = max(1, -(-hi(ctx.num_gpus) * top // 2**61))
    if step == 1 and top == hi(var):
        return product(ctx.md, name, ctx.num_gpus, var), step
    coarse = ceil_by(ctx.md, f"{name}_coarse", var, top, step)
    return product(ctx.md, name, ctx.num_gpus, coarse), step


def _expected(ctx: BuildContext, name: str, base: IntVar, terms: list[IntVar | int]) -> IntVar:
    parts = [t for t in terms if not isinstance(t, int)]
    top = hi(base) + sum(hi(t) for t in parts)
    if top >= INT_LIMIT:
        raise OverflowError(f"{name}: expected time exceeds int64")
    var = ctx.md.new_int_var(0, top, name)
    ctx.md.add(var == base + sum(parts))
    return var


def add_goodput(ctx: BuildContext) -> None:
    """Replace T' (``per_seq``) and G x T' (``gpu_time``) by their expected values.

    The restart term c G T' is taken from the GPU-time G x T' (``gpu_time``, nearly fixed
    per shape, so that its coarsening is fine on every plan), not from G times T', whose
    range (from d = 1 up) is too wide for a fine product."""
    s = ctx.scenario
    if s.no_failures:
        return
    # per GPU type (x) and per (GPU type, purchase option) rows (a: storage, c: spares)
    # (each in two pieces where the interval's floor can bind: below and from G*)
    x_rows, a_rows, c_rows = goodput_rows(ctx)
    xs = {key: v[0] for key, v in x_rows.items()}
    x_lits = {key: v[1] for key, v in x_rows.items()}
    a_s = {key: v[0] for key, v in a_rows.items()}
    a_lits = {key: v[1] for key, v in a_rows.items()}
    c_lits = {key: v[1] for key, v in c_rows.items()}
    x_own, a_own, c_own = ({k: v[2] for k, v in r.items()} for r in (x_rows, a_rows, c_rows))
    p, gt = ctx.per_seq, ctx.gpu_time
    to_time = ctx.k_scale / gt.scale  # GPU-time units to T' units, per GPU
    x_part = _scaled(ctx, "snapshot_time_x_gpus", p, xs, bits=10, lits=x_lits, owners=x_own)
    terms: list[IntVar | int] = [
        _scaled(ctx, "goodput_constant_time", p, a_s, bits=10, lits=a_lits, owners=a_own),
        _scaled(
            ctx,
            "goodput_restart_time",
            gt.var,
            {key: v[0] * to_time for key, v in c_rows.items()},
            lits=c_lits,
            owners=c_own,
        ),
    ]
    if not isinstance(x_part, int):
        terms.append(ceil_div(ctx.md, "snapshot_time", x_part, hi(x_part), ctx.num_gpus))
    ctx.ideal_per_seq = p
    ctx.per_seq = _expected(ctx, "expected_time_per_sequence", p, terms)
    if s.pricing not in ("cloud", "tco"):
        return
    ggt, g_step = _times_gpus(ctx, "gpus_x_gpu_time", gt.var)
    gt_terms: list[IntVar | int] = [
        _scaled(ctx, "goodput_constant_gpu_time", gt.var, a_s, lits=a_lits, owners=a_own),
        _scaled(
            ctx,
            "goodput_restart_gpu_time",
            ggt,
            {key: v[0] * g_step for key, v in c_rows.items()},
            lits=c_lits,
            owners=c_own,
        ),
        _scaled(
            ctx,
            "snapshot_gpu_time",
            p,
            {key: x / to_time for key, x in xs.items()},
            bits=10,
            lits=x_lits,
            owners=x_own,
        ),
    ]
    var = _expected(ctx, "expected_gpu_time_per_sequence", gt.var, gt_terms)
    ctx.gpu_time = GpuTime(var, gt.scale, gt.lo)
