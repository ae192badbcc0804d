"""Exhaustive reference solver: enumerates the whole decision space with the float model.

For every shape, NIC type and NIC count it evaluates every admissible pair of
DP degree and micro-batches per step at once (numpy), checks every enforced
limit and keeps the best, ties broken by the secondary objective, then fewer
GPUs, then the shape's order. It uses no dominance argument, so the
differential tests also check the ones CP-SAT relies on (the largest m the
ceiling allows is best, a multiple of PP under the interleaved schedule; renting
makes the fastest NIC in every slot best).
Only when no batch ceiling bounds m (the family switched off, and the batch-tokens
model off: its own cap bounds the batch) does it take the largest m, since the space
is then unbounded. Obviously correct, slow: the
oracle of the differential tests and the baseline of bench/solver.py. One shape's grid is
searched by solvers/grid_search.py (best_for_candidate), which the CP-SAT warm start uses too.
Stopped by its time limit, it gives its best plan's gap to the least lower bound
(solvers/screen/bounds.py) of the shapes it did not search (unsearched_bound)."""

from __future__ import annotations

import math
import time

from solvers import cloud_terms
from solvers.gc_pause import without_gc_pauses
from solvers.grid_search import best_for_candidate, dp_range
from solvers.plan import Config, build_plan
from solvers.purchase_rule import settle
from solvers.result import SolveResult, names_objective, relative_gap
from solvers.scenario import PreparedQuestion, Scenario
from solvers.screen.bounds import (
    BoundTerms,
    gemm_lower_bounds,
    objective_lower_bounds,
    prepare_bounds,
)
from solvers.space import Candidate, enumerate_candidates, enumerate_within

BOUND_SECONDS = 0.5  # the most a stopped search spends sharpening its gap (unsearched_bound)


@names_objective
@without_gc_pauses
def solve_exhaustive(
    scenario: Scenario,
    top_k: int = 1,
    candidates: list[Candidate] | None = None,
    time_limit_s: float | None = None,
) -> SolveResult:
    """Every shape's best plan, the ``top_k`` best overall. Past ``time_limit_s`` it stops
    between shapes (time_up): the plans found so far are ``feasible`` (not proved), with the
    gap to the least bound of the shapes not searched (unsearched_bound), or ``unknown``."""
    if cloud_terms.applies(scenario):  # one solve per rental term (solvers/cloud_terms.py)
        return cloud_terms.solve_by_term(
            solve_exhaustive, scenario, top_k, candidates=candidates, time_limit_s=time_limit_s
        )
    start = time.perf_counter()
    cands = candidates if candidates is not None else enumerate_within(scenario, time_limit_s)
    if cands is None:  # the time limit ran out while enumerating
        wall = time.perf_counter() - start
        return SolveResult.enumeration_stopped("exhaustive", wall)
    q = scenario.prepare()  # once per solve (solvers/scenario.py PreparedQuestion)
    nics = list(q.nic_specs)
    a = scenario.assumptions
    per_shape: list[tuple[tuple, Config]] = []
    left: list[Candidate] | None = None  # the shapes not searched when the time ran out
    for i, cand in enumerate(cands):
        if time_up(start, time_limit_s):
            left = cands[i:]
            break
        if not cand.allowed(scenario):
            continue
        best = best_for_candidate(scenario, cand, nics, a.dp_overlap, every_m=True, prepared=q)
        if best is not None:
            per_shape.append(best)
    per_shape.sort(key=lambda kv: kv[0])
    # phase two: the cheapest purchases within the tolerance (solvers/purchase_rule.py)
    plans = settle(scenario, [build_plan(scenario, cfg, q) for _, cfg in per_shape[:top_k]], q)
    status, gap = ("optimal", 0.0) if plans else ("infeasible", None)
    bound: float | None = None
    if left is not None:  # the best found against the least bound of what was not searched
        least = per_shape[0][0][0] if per_shape else math.inf
        bound = min(least, unsearched_bound(scenario, q, left))
        # never optimal, even at gap 0: a bound equal to the best plan's objective does not
        # settle the tie rule's second key (the faster plan at that cost) nor the other
        # top-K plans, and the shapes not searched may hold either
        status = "feasible" if plans else "unknown"
        gap = relative_gap(plans[0].objective, bound) if plans else None
    return SolveResult(
        status=status,
        solver="exhaustive",
        wall_s=time.perf_counter() - start,
        gap=gap,
        plans=plans,
        candidates=cands,
        bound=bound,
    )


def time_up(start: float, time_limit_s: float | None) -> bool:
    """Whether the solve begun at ``start`` (time.perf_counter) has run past its time limit:
    the search's one stop check, made before each shape."""
    return time_limit_s is not None and time.perf_counter() - start > time_limit_s


def unsearched_bound(
    scenario: Scenario, q: PreparedQuestion, left: list[Candidate], spend_s: float = BOUND_SECONDS
) -> float:
    """A value no plan of the shapes ``left`` (those not searched) beats, inf when none is
    left: the least over them of their bounds (screen/bounds.py) over the DP range the
    search would have swept (grid_search.dp_range: every plan the search admits lies in
    it). The cheap bound of every shape
    (gemm_lower_bounds: the GEMM time alone, no step coefficients), then the full one
    (objective_lower_bounds) of the shapes whose cheap bound is the least, for up to
    ``spend_s`` seconds (_least_bound). Each holds for any d, m, NICs and purchases in the
    range, so the gap it gives is never below the true one (tests/test_exhaustive.py)."""
    t = prepare_bounds(scenario, q)
    shapes, ranges = [], []
    for cand in left:
        if not cand.allowed(scenario):
            continue
        lo, hi = dp_range(scenario, q, cand)
        if lo <= hi:  # else the search finds no plan of the shape
            shapes.append(cand)
            ranges.append((lo, hi))
    cheap = gemm_lower_bounds(t, shapes, ranges)
    return _least_bound(t, shapes, ranges, cheap, time.perf_counter() + spend_s)


def _least_bound(
    t: BoundTerms,
    shapes: list[Candidate],
    ranges: list[tuple[int, int]],
    cheap: list[float],
    stop_at: float,
) -> float:
    """The least over ``shapes`` of the greater of each one's cheap bound (``cheap``) and its
    full bound, the full ones computed in chunks in the order of the cheap ones while the
    next cheap bound lies below the least so far and the clock is before ``stop_at``; then
    that next cheap bound bounds every shape not yet refined (each full bound is at least
    its cheap one, and a shape's greater of two valid bounds is valid)."""
    order = sorted(range(len(shapes)), key=lambda i: cheap[i])
    least, done, chunk = math.inf, 0, 16
    while done < len(order) and cheap[order[done]] < least and time.perf_counter() < stop_at:
        part = order[done : done + chunk]
        full = objective_lower_bounds(t, [shapes[i] for i in part], [ranges[i] for i in part])
        least = min(least, *(max(cheap[i], f) for i, f in zip(part, full, strict=True)))
        done, chunk = done + len(part), 2 * chunk
    return min(least, cheap[order[done]]) if done < len(order) else least


def estimated_seconds(
    scenario: Scenario, candidates: list[Candidate] | None = None, sample: int = 6
) -> float:
    """About how long solve_exhaustive takes on this question: the shapes it would
    search times the time of searching a few of them, evenly spread (measured here,
    so it reflects this machine)."""
    cands = candidates if candidates is not None else enumerate_candidates(scenario)
    allowed = [c for c in cands if c.allowed(scenario)]
    if not allowed:
        return 0.0
    picked = allowed[:: max(1, len(allowed) // sample)][:sample]
    q = scenario.prepare()  # once per solve (solvers/scenario.py PreparedQuestion)
    nics = list(q.nic_specs)
    start = time.perf_counter()
    for cand in picked:
        best_for_candidate(
            scenario, cand, nics, scenario.assumptions.dp_overlap, every_m=True, prepared=q
        )
    return (time.perf_counter() - start) / len(picked) * len(allowed)
