"""solvers/screen/prune.py: incumbents and pruning by bound before CP-SAT builds its model.

Pruning may only drop shapes that cannot hold one of the k best plans: the optimum's
shape (CP-SAT over the whole space) survives, every kept bound is valid, the incumbents
are feasible plans, best first."""

from __future__ import annotations

import pytest

from helpers import random_scenario, wide_moe_scenario
from solvers.cpsat.solve import Resolve, resolve_cpsat, solve_cpsat
from solvers.exhaustive import best_for_candidate
from solvers.plan import build_plan
from solvers.screen import prune as prune_module
from solvers.screen.bounds import (
    deadline_cost_bounds,
    objective_lower_bounds,
    prepare_bounds,
    screen_bounds,
)
from solvers.screen.presolve import defer_presolve, finish_is_costly, presolve
from solvers.screen.prune import (
    PRUNE_MARGIN,
    may_beat,
    prune,
    prune_by_incumbent,
    prune_deferred,
)
from solvers.space import enumerate_candidates, nic_specs


def test_prune_by_incumbent_keeps_all_until_k_incumbents():
    lbs = [1.0, 5.0, 9.0]
    assert prune_by_incumbent(lbs, [], 1) == [0, 1, 2]
    one = [(4.0, None)]
    assert prune_by_incumbent(lbs, one, 2) == [0, 1, 2]  # fewer than k incumbents
    assert prune_by_incumbent(lbs, one, 1) == [0]
    two = [(4.0, None), (6.0, None)]
    assert prune_by_incumbent(lbs, two, 2) == [0, 1]


def test_prune_by_incumbent_allows_the_margin():
    cutoff = 100.0
    inside = cutoff * (1 + PRUNE_MARGIN / 2)
    outside = cutoff * (1 + 2 * PRUNE_MARGIN)
    assert prune_by_incumbent([inside, outside], [(cutoff, None)], 1) == [0]


def test_prune_by_incumbent_cuts_at_a_ceiling_below_the_incumbent():
    """A capped minimisation's ceiling (Resolve.cap_minimises) cuts as an incumbent at that
    value would, with the same margin; the lower of the two cuts, and alone it cuts too."""
    lbs = [1.0, 5.0, 9.0, 100.0 * (1 + PRUNE_MARGIN / 2)]
    assert prune_by_incumbent(lbs, [(8.0, None)], 1, ceiling=4.0) == [0]
    assert prune_by_incumbent(lbs, [(4.0, None)], 1, ceiling=8.0) == [0]
    assert prune_by_incumbent(lbs, [], 1, ceiling=100.0) == [0, 1, 2, 3]
    assert prune_by_incumbent(lbs, [], 1, ceiling=99.0) == [0, 1, 2]


@pytest.mark.parametrize("seed", [3, 11, 16, 27])  # shapes pruned in each
@pytest.mark.parametrize("top_k", [1, 3])
def test_prune_keeps_the_optimum_and_valid_bounds(cat, seed, top_k):
    s = random_scenario(seed, cat)
    pre = presolve(s, enumerate_candidates(s))
    pruned = prune(s, pre, top_k=top_k)
    kept = {c.shape for c in pruned.candidates}
    assert kept <= {c.shape for c in pre.candidates}
    objectives = [o for o, _ in pruned.incumbents]
    assert objectives == sorted(objectives)
    assert len({cfg.shape for _, cfg in pruned.incumbents}) == len(pruned.incumbents)
    for objective, config in pruned.incumbents:
        plan = build_plan(s, config)
        assert plan.feasible and plan.objective == pytest.approx(objective, rel=1e-9)
    res = solve_cpsat(s, top_k=top_k, time_limit_s=60.0)
    assert res.best is not None
    assert res.best.config.shape in kept or any(
        cfg.shape == res.best.config.shape for _, cfg in pruned.incumbents
    )
    bounds = dict(zip((c.shape for c in pruned.candidates), pruned.lower_bounds, strict=True))
    for plan in res.plans:
        if plan.config.shape in bounds:
            assert bounds[plan.config.shape] <= plan.objective * (1 + 1e-9)


def test_may_beat_brackets_the_optimum(cat):
    s = random_scenario(2, cat)
    pre = presolve(s, enumerate_candidates(s))
    res = solve_cpsat(s, time_limit_s=60.0)
    assert res.best is not None
    best = res.best.objective
    assert may_beat(s, pre, best * 1.01)
    assert not may_beat(s, pre, 0.0)


def _deadline_question(cat, seed):
    """A random question with a deadline (prune_deferred's case), cost or time."""
    s = random_scenario(seed, cat)
    if s.deadline_days is None:
        s = s.with_changes(deadline_days=30.0 + seed)
    return s


@pytest.mark.parametrize("seed", [1, 3, 4, 8, 11, 16, 27])
@pytest.mark.parametrize("top_k", [1, 3])
def test_prune_deferred_is_prune_of_presolve(cat, seed, top_k):
    """prune(presolve(...)) from presolve's screen, finishing only the shapes pruning reads:
    the same shapes, ranges, bounds and incumbents."""
    s = _deadline_question(cat, seed)
    assert finish_is_costly(s)
    space = enumerate_candidates(s)
    pre = presolve(s, space)
    got = prune_deferred(s, defer_presolve(s, space), top_k, None, 2, None)
    if not pre.candidates:
        assert got is None
        return
    want = prune(s, pre, top_k=top_k, warm_shapes=2)
    assert got is not None
    assert got.incumbents == want.incumbents
    assert [c.shape for c in got.candidates] == [c.shape for c in want.candidates]
    assert got.dp_ranges == want.dp_ranges
    assert got.lower_bounds == want.lower_bounds


@pytest.mark.parametrize("seed", [2, 3, 4, 6, 10, 11, 14, 15, -2, -5])
def test_deadline_cost_bounds_are_valid(cat, seed):
    """No plan of a shape costs less than its sharper bound (the reference solver's best
    plan of the shape, every micro-batch count and NIC option), and the bound is at least
    the one at presolve's range. Negative seeds: WIDE_MOE at that many days, its expert
    dispatch across the NICs where EP spans servers."""
    if seed < 0:
        s = wide_moe_scenario(
            cat, objective="cost", budget_usd=None, deadline_days=-seed, micro_batches=(1, 2, 4)
        )
    else:
        s = random_scenario(seed, cat).with_changes(
            objective="cost", pricing="capex", budget_usd=None, deadline_days=100.0 + seed
        )
    pre = presolve(s, enumerate_candidates(s))
    sharp = deadline_cost_bounds(s, pre.candidates, pre.dp_ranges)
    plain = objective_lower_bounds(s, pre.candidates, pre.dp_ranges)
    nics = nic_specs(s)
    checked = 0
    for c, bound, low in zip(pre.candidates, sharp, plain, strict=True):
        assert bound >= low
        best = best_for_candidate(s, c, nics, s.assumptions.dp_overlap, every_m=True)
        if best:
            checked += 1
            assert bound <= best[0][0] * (1 + 1e-9), c.shape
    assert checked > 0


def test_sharper_cut_keeps_the_optimum(cat, monkeypatch):
    """A cost question with a deadline over MoE shapes whose dispatch crosses the NICs: the
    second warm-start round and the sharper cut (prune._sharpens) keep fewer shapes, and
    the solve gives the plan it gives without them, through either path (Resolve.alive
    takes prune(presolve(...)))."""
    s = wide_moe_scenario(
        cat, objective="cost", budget_usd=None, deadline_days=2.0, micro_batches=(1, 2, 4)
    )
    space = enumerate_candidates(s)
    pre = presolve(s, space)
    sharp = prune(s, pre)
    res = solve_cpsat(s, candidates=space)
    alive = resolve_cpsat(s, Resolve(alive=pre), candidates=space)
    monkeypatch.setattr(prune_module, "_sharpens", lambda _s: False)
    plain = prune(s, pre)
    old = solve_cpsat(s, candidates=space)
    assert sharp.incumbents == plain.incumbents
    assert len(sharp.candidates) < len(plain.candidates)
    assert res.best is not None and old.best is not None and alive.best is not None
    assert res.best.config == old.best.config == alive.best.config
    assert res.best.objective == old.best.objective


@pytest.mark.parametrize("seed", [1, 3, 4, 8, 11])
def test_weak_ranges_bound_presolve_from_below(cat, seed):
    """The deferred screen keeps every shape presolve keeps, with a lower end at most
    presolve's and the same upper end, and a cheap bound at most the one at presolve's
    range (what prune_deferred's order rests on); finishing every shape is presolve."""
    s = _deadline_question(cat, seed)
    space = enumerate_candidates(s)
    pre = presolve(s, space)
    d = defer_presolve(s, space)
    weak = dict(zip((c.shape for c in d.candidates), d.weak_ranges, strict=True))
    t = prepare_bounds(s)
    cheap_pre = screen_bounds(t, pre.candidates, pre.dp_ranges, 0)[0]
    cheap_weak = screen_bounds(t, d.candidates, d.weak_ranges, 0)[0]
    by_shape = dict(zip((c.shape for c in d.candidates), cheap_weak, strict=True))
    for c, (lo, hi), cheap in zip(pre.candidates, pre.dp_ranges, cheap_pre, strict=True):
        assert c.shape in weak
        assert weak[c.shape][0] <= lo and weak[c.shape][1] == hi
        assert by_shape[c.shape] <= cheap
    done = d.finish(list(range(len(d.candidates))))
    assert [r for r in done if r is not None] == pre.dp_ranges
