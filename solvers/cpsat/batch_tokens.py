"""Tokens that depend on the batch in the CP-SAT model (models/batch_tokens.py).

A plan at a global batch of GB sequences trains the question's tokens times
f(GB) = max(1, (c + GB) / (2 c)), c the critical batch in whole sequences. The time per
question sequence T' and the GPU-time per sequence G x T' become, exactly,

    T' f = T' + ceil(T' x over / (2 c)),    over = max(0, GB - c),

where the product T' x over would leave int64, the least of two upper bounds of the term:
T' rounded up to a multiple of 2 c x k (k so that the product fits), and the share
over / (2 c) rounded up to a step of 1 / scale (_share_extra). Below the critical batch over = 0 and nothing changes, so the
ceiling's dominance (the largest m is best) holds up to the critical batch: the batch
ceiling family encodes it there (solvers/families/batch_ceiling.py)."""

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
    """var + ceil(var x over / (2 crit)); an upper bound of it when the product would not
    fit in int64 (_share_extra)."""
    md = ctx.md
    two_c = 2 * crit
    fit = (INT_LIMIT // 4) // max(1, hi(over))  # the most var's steps the product allows
    if hi(var) <= fit:
        prod = times(md, f"{name}_product", var, over)
        extra = ceil_by(md, f"{name}_extra", prod, hi(prod), two_c)
    else:
        extra = _share_extra(ctx, name, var, over, two_c, fit)
    top = hi(var) + hi(extra)
    if top >= INT_LIMIT // 4:
        raise OverflowError(f"{name}: time per sequence with the batch's tokens exceeds int64")
    out = md.new_int_var(0, top, name)
    md.add(out == var + extra)
    return out


SHARE_SCALE = 10**6
"""The most steps of 1 the share over / (2 c) is counted in (a millionth: below the 1e-6
relative noise solvers/intmath.py forgives)."""


def _share_extra(
    ctx: BuildContext, name: str, var: IntVar, over: IntVar, two_c: int, fit: int
) -> IntVar:
    """ceil(var x over / (2 c)), or an upper bound of it, when var x over would leave int64:
    the least of two upper bounds. (1) var rounded up to a step sized by var's largest value
    (the slowest plan of the shapes), times over: precise for slow plans, but a fast plan's
    few steps round by up to one in their count (1/44 of a toy model's extra tokens, enough
    to rank a smaller DP degree first). (2) The share over / (2 c) rounded up to a step of
    1 / scale, times var: off by at most var / scale whatever var is (the room int64 leaves
    sets scale, 1,000 on that toy). Taking the lesser keeps each bound's precision.
    ``fit``: the most steps of var the product with over may hold (_inflated's)."""
    md = ctx.md
    k = -(-hi(var) // (fit * two_c))  # steps of 2 c k: hi(var) / (2 c k) <= fit
    coarse = ceil_by(md, f"{name}_coarse", var, hi(var), two_c * k)
    prod = times(md, f"{name}_product", coarse, over)
    by_steps = md.new_int_var(0, k * hi(prod), f"{name}_extra_by_steps")
    md.add(by_steps == k * prod)
    share_hi = -(-hi(over) // two_c)  # whole steps of 2 c that over can reach
    scale = min(SHARE_SCALE, (INT_LIMIT // 4) // max(1, hi(var) * share_hi))
    if scale < 2:
        return by_steps
    share = ceil_by(md, f"{name}_share", over * scale, hi(over) * scale, two_c)
    shared = times(md, f"{name}_share_product", var, share)
    by_share = ceil_by(md, f"{name}_extra_by_share", shared, hi(shared), scale)
    extra = md.new_int_var(0, min(hi(by_steps), hi(by_share)), f"{name}_extra")
    md.add_min_equality(extra, [by_steps, by_share])
    return extra
