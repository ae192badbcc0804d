"""solvers/grid_search.py: the best (DP degree, micro-batches, NICs, purchases) of one shape on
a numpy grid. The batch range per DP degree follows the ceiling, the pipeline fill, the floor
and the interleaved schedule; the DP range stops at the GPU cap, the ceiling and the budget;
the grid's best is the float model's best of the shape, and its fast form (the largest m
only) never claims a better plan than the full grid finds."""

from __future__ import annotations

import math

import numpy as np
import pytest

import solvers.grid_search as grid_search
from designer.question.build import build_scenario
from helpers import prime_scenario
from solvers.exhaustive import solve_exhaustive
from solvers.grid_search import (
    batch_bounds,
    batch_cap_seq,
    best_for_candidate,
    checked_families,
    dp_upper,
)
from solvers.plan import build_plan
from solvers.screen.presolve import presolve
from solvers.space import enumerate_candidates


def test_the_batch_cap_is_the_ceiling_in_sequences(cat):
    s = prime_scenario(cat)  # a 4M-token ceiling, 4,096-token sequences
    assert batch_cap_seq(s, s.prepare()) == 4 * 2**20 // 4096 == 1024
    off = s.with_changes(disabled=s.disabled | {"batch_ceiling"})
    assert batch_cap_seq(off, off.prepare()) is None


def test_batch_bounds_per_dp_degree(cat):
    s = prime_scenario(cat)
    q = s.prepare()
    dps = np.array([1, 3, 8, 2000])
    m_hi, m_lo = batch_bounds(s, q, 2, dps, pp=1)
    assert list(m_hi) == [1024 // (2 * d) for d in dps]  # 512, 170, 64, 0
    assert list(m_lo) == [1, 1, 1, 1]
    m_hi, m_lo = batch_bounds(s, q, 1, dps, pp=4)  # the pipeline fill: m >= p
    assert list(m_lo) == [4, 4, 4, 4]
    m_hi, m_lo = batch_bounds(s, q, 1, dps, pp=4, vp=2)  # interleaved: m a multiple of p
    assert all(h % 4 == 0 and lo % 4 == 0 for h, lo in zip(m_hi, m_lo, strict=True))
    assert list(m_hi) == [1024 // d // 4 * 4 for d in dps]


def test_the_batch_floor_raises_the_least_m(cat):
    s = prime_scenario(cat).with_changes(min_batch_tokens=2**20)  # 256 sequences
    m_hi, m_lo = batch_bounds(s, s.prepare(), 1, np.array([1, 4, 300]), pp=1)
    assert list(m_lo) == [256, 64, 1]


def test_the_dp_range_stops_at_the_budget_and_the_ceiling(cat):
    s = prime_scenario(cat)
    q = s.prepare()
    cand = next(c for c in enumerate_candidates(s) if c.shape.pp == 4 and c.shape.tp == 8)
    shape = cand.shape
    price = 100 * cat.gpu("h100-sxm").price_usd
    hi = dp_upper(s, q, cand, math.ceil(price))
    by_budget = int(s.budget * 100 // (math.ceil(price) * shape.replica_gpus))
    by_ceiling = 1024 // (shape.micro_batch * 4)  # at least p micro-batches
    assert hi == min(by_budget, by_ceiling)
    rich = s.with_changes(budget_usd=1e12)
    assert dp_upper(rich, rich.prepare(), cand, math.ceil(price)) == by_ceiling


def test_checked_families_are_the_active_ones_not_enumerated(cat):
    s = prime_scenario(cat)
    names = {f.name for f in checked_families(s)}
    assert "budget" in names
    relaxed = s.with_changes(disabled=s.disabled | {"budget"})
    assert "budget" not in {f.name for f in checked_families(relaxed)}
    assert all(not f.enumerated for f in checked_families(s))


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_the_grids_best_is_the_shapes_best_plan(cat, objective):
    s = prime_scenario(cat).with_changes(objective=objective)
    nics = list(s.prepare().nic_specs)
    allowed = [c for c in enumerate_candidates(s) if c.allowed(s)]  # the shape's own checks
    assert len(allowed) > 10
    found = 0
    for cand in allowed[:: len(allowed) // 8]:
        full = best_for_candidate(s, cand, nics, s.assumptions.dp_overlap, every_m=True)
        fast = best_for_candidate(s, cand, nics, s.assumptions.dp_overlap)
        ref = solve_exhaustive(s, candidates=[cand])
        if full is None:
            assert ref.status == "infeasible" and fast is None
            continue
        plan = build_plan(s, full[1])
        assert plan.feasible and plan.objective == pytest.approx(ref.plans[0].objective)
        found += 1
        if fast is not None:
            assert build_plan(s, fast[1]).objective >= plan.objective * (1 - 1e-9)
    assert found >= 3


def test_a_shape_no_budget_buys_has_no_best(cat):
    s = prime_scenario(cat).with_changes(budget_usd=1e3)
    nics = list(s.prepare().nic_specs)
    cand = enumerate_candidates(s)[0]
    assert best_for_candidate(s, cand, nics, 0.0, every_m=True) is None


def test_the_warm_start_tries_the_batch_at_the_critical_batch(monkeypatch):
    """With the batch-tokens model on (the default), the largest micro-batch count is no
    longer the best: past the critical batch each step trains tokens the question does not
    need. The fast form also tries the counts on either side of the critical batch, so
    that its plan is never worse than the largest count's, and on a question where the
    critical batch binds it is better on some shapes and reaches the every-m search's best
    (agreement seed 189: 1.593 days with the largest count against the shape's 1.473)."""
    s = build_scenario(
        model="llama2-7b", gpus=("h100-sxm",), tokens=2e12, budget=3e7, failure_scale=100.0
    )
    assert s.critical_batch_seq is not None
    q = s.prepare()
    nics = list(q.nic_specs)
    cands = presolve(s, enumerate_candidates(s)).candidates[:40]

    def best(cand, every_m=False):
        found = grid_search.best_for_candidate(
            s, cand, nics, s.assumptions.dp_overlap, every_m=every_m, prepared=q
        )
        return None if found is None else found[0][0]

    fast = [best(c) for c in cands]
    full = [best(c, every_m=True) for c in cands]
    monkeypatch.setattr(grid_search, "_critical_m", lambda *args: ())  # the largest m only
    largest = [best(c) for c in cands]
    better = 0
    for f, e, old in zip(fast, full, largest, strict=True):
        if old is None:
            continue
        assert f is not None and e is not None
        assert e <= f * (1 + 1e-12) and f <= old * (1 + 1e-12)
        if f < old * (1 - 1e-3):
            better += 1
            assert f <= e * 1.01  # within 1% of the every-m optimum
    assert better >= 5, better
