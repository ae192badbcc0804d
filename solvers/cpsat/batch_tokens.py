"""Tokens that depend on the batch in the CP-SAT model (models/batch_tokens.py).

A plan at a global batch of GB sequences trains the question's tokens times
f(GB) = max(1, (c + GB) / (2 c)), c the critical batch in whole sequences. The time per
question sequence T' and the GPU-time per sequence G x T' become, exactly,

    T' f = T' + ceil(T' x over / (2 c)),    over = max(0, GB - c),

computed exactly where the product T' x over would leave int64 too: T' is split into two
words, T' = B h + l, and the quotient carried (_split_extra). Below the critical batch
over = 0 and nothing changes, so the ceiling's dominance (the largest m is best) holds up
to the critical batch: the batch ceiling family encodes it there
(solvers/families/batch_ceiling.py)."""

from __future__ import annotations

from solvers.cpsat.context import BuildContext, GpuTime, IntVar
from solvers.intmath import INT_LIMIT, ceil_by, hi, times


def tokens_room(ctx: BuildContext) -> int:
    """How many times the ideal time the batch's tokens can make it (the most f reaches
    on the admissible batches, rounded up; 1 with the model off), for the int64 room."""
    crit = ctx.prepared.critical_batch_seq
    if crit is None:
        return 1
    return -(-(crit + hi(ctx.global_batch)) // (2 * crit))


def add_batch_tokens(ctx: BuildContext) -> None:
    """Replace the ideal T' (``per_seq``) and G x T' (``gpu_time``) by their values for
    the tokens the plan's batch needs (before goodput, which scales with them)."""
    crit = ctx.prepared.critical_batch_seq
    if crit is None:
        return
    md = ctx.md
    over_hi = max(0, hi(ctx.global_batch) - crit)
    if over_hi == 0:
        return  # every admissible batch is at or below the critical batch
    over = md.new_int_var(0, over_hi, "batch_over_critical")
    md.add_max_equality(over, [ctx.global_batch - crit, 0])
    ctx.per_seq = _inflated(ctx, "time_per_sequence_tokens", ctx.per_seq, over, crit)
    gt = ctx.gpu_time
    var = _inflated(ctx, "gpu_time_per_sequence_tokens", gt.var, over, crit)
    ctx.gpu_time = GpuTime(var, gt.scale, gt.lo)


def _inflated(ctx: BuildContext, name: str, var: IntVar, over: IntVar, crit: int) -> IntVar:
    """var + ceil(var x over / (2 crit)), exactly (in two words where the product would
    not fit in int64: _split_extra)."""
    md = ctx.md
    two_c = 2 * crit
    fit = (INT_LIMIT // 4) // max(1, hi(over))  # the most var's steps the product allows
    if hi(var) <= fit:
        prod = times(md, f"{name}_product", var, over)
        extra = ceil_by(md, f"{name}_extra", prod, hi(prod), two_c)
    else:
        extra = _split_extra(ctx, name, var, over, two_c)
    top = hi(var) + hi(extra)
    if top >= INT_LIMIT // 4:
        raise OverflowError(f"{name}: time per sequence with the batch's tokens exceeds int64")
    out = md.new_int_var(0, top, name)
    md.add(out == var + extra)
    return out


def _split_extra(ctx: BuildContext, name: str, var: IntVar, over: IntVar, two_c: int) -> IntVar:
    """ceil(var x over / (2 c)), exactly, when var x over would leave int64: var = B h + l
    with 0 <= l < B, h x over = 2 c q + r with 0 <= r < 2 c, so that

        var x over / (2 c) = B q + (B r + l x over) / (2 c)

    and the extra is B q + ceil((B r + l x over) / (2 c)). B is the largest word for which
    B r + l x over fits; h x over fits while hi(var) x hi(over) x (hi(over) + 2 c) stays
    under 2^122 (5e36: 1e28 on the toy models whose single product did not
    fit). Until 2026-12-05 this was the lesser of two upper bounds (var or the share
    over / (2 c) rounded up), which ranked a smaller DP degree of a toy model 0.12% too
    fast under a budget (tests/test_cpsat_batch_tokens.py)."""
    md, limit = ctx.md, INT_LIMIT // 4
    word = limit // (hi(over) + two_c)  # B: B r + l x over < B (2 c + hi(over))
    high = md.new_int_var(0, hi(var) // word, f"{name}_high_word")
    low = md.new_int_var(0, word - 1, f"{name}_low_word")
    md.add(var == word * high + low)
    carried = times(md, f"{name}_high_product", high, over)  # OverflowError past int64
    quotient = md.new_int_var(0, hi(carried) // two_c, f"{name}_high_quotient")
    remainder = md.new_int_var(0, two_c - 1, f"{name}_high_remainder")
    md.add(carried == two_c * quotient + remainder)
    low_product = times(md, f"{name}_low_product", low, over)
    rest_hi = word * (two_c - 1) + hi(low_product)
    rest = ceil_by(md, f"{name}_low_extra", word * remainder + low_product, rest_hi, two_c)
    top = word * hi(quotient) + hi(rest)
    if top >= limit:
        raise OverflowError(f"{name}: the batch's extra tokens exceed int64")
    extra = md.new_int_var(0, top, f"{name}_extra")
    md.add(extra == word * quotient + rest)
    return extra
