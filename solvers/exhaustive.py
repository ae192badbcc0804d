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
searched by solvers/grid_search.py (best_for_candidate), which the CP-SAT warm start uses too."""

from __future__ import annotations

import time

from solvers import cloud_terms
from solvers.gc_pause import without_gc_pauses
from solvers.grid_search import best_for_candidate  # noqa: F401  (imported from here before)
from solvers.plan import Config, build_plan
from solvers.purchase_rule import settle
from solvers.result import SolveResult, names_objective
from solvers.scenario import Scenario
from solvers.space import Candidate, enumerate_candidates, enumerate_within


@names_objective
@without_gc_pauses
def solve_exhaustive(
    scenario: Scenario,
    top_k: int = 1,
    candidates: list[Candidate] | None = None,
    time_limit_s: float | None = None,
) -> SolveResult:
    """Every shape's best plan, the ``top_k`` best overall. Past ``time_limit_s`` it stops
    between shapes: the plans found so far are ``feasible`` (not proved), or ``unknown``."""
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
    complete = True
    for cand in cands:
        if time_limit_s is not None and time.perf_counter() - start > time_limit_s:
            complete = False
            break
        if not cand.allowed(scenario):
            continue
        best = best_for_candidate(scenario, cand, nics, a.dp_overlap, every_m=True, prepared=q)
        if best is not None:
            per_shape.append(best)
    per_shape.sort(key=lambda kv: kv[0])
    # phase two: the cheapest purchases within the tolerance (solvers/purchase_rule.py)
    plans = settle(scenario, [build_plan(scenario, cfg, q) for _, cfg in per_shape[:top_k]], q)
    if complete:
        status = "optimal" if plans else "infeasible"
    else:
        status = "feasible" if plans else "unknown"
    return SolveResult(
        status=status,
        solver="exhaustive",
        wall_s=time.perf_counter() - start,
        gap=0.0 if plans and complete else None,
        plans=plans,
        candidates=cands,
    )


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
