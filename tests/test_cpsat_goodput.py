"""solvers/cpsat/goodput.py: the goodput terms of the CP-SAT model stay within int64 (the
build rebuilds coarser when they would not) and bound the expected time before the search
picks a purchase option."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from ortools.sat.python import cp_model

import solvers.cpsat.goodput as goodput
import solvers.cpsat.model as cpsat_model
from designer.question.build import build_scenario
from solvers import solve_cpsat
from solvers.intmath import INT_LIMIT, hi
from solvers.stop import stoppable_solver


def _rows_context(rows: int):
    """A context with what _scaled reads: the model and one literal per row."""
    md = cp_model.CpModel()
    lits = {f"h100,spares={k}": md.new_bool_var(f"row{k}") for k in range(rows)}
    md.add_exactly_one(lits.values())
    return SimpleNamespace(md=md, gpu_lit={"h100": md.new_bool_var("gpu")}), lits


def test_a_sum_of_rows_past_int64_raises_overflow_so_the_build_coarsens():
    """Each row's part fits (about 2^60.5) but four rows sum past INT_LIMIT (2^62): _scaled
    raises OverflowError, which build() answers by rebuilding with a coarser time unit
    (commit 48722ff; before it, the sum became a variable past the limit and CP-SAT ended
    in an internal error: agreement seed 191, MT-NLG 530B at 128K, 74 s to reach)."""
    ctx, lits = _rows_context(4)
    var = ctx.md.new_int_var(0, 2**50, "time_per_sequence")
    coef = 2**10.5  # x the coarsening step 2^10: about 2^20.5 per unit of 2^40 steps
    coefs = dict.fromkeys(lits, coef)
    with pytest.raises(OverflowError, match="goodput term exceeds int64"):
        goodput._scaled(ctx, "goodput_restart_time", var, coefs, lits=lits)
    # one row alone fits: the limit is on the sum, not on a part
    ctx1, lits1 = _rows_context(1)
    var1 = ctx1.md.new_int_var(0, 2**50, "time_per_sequence")
    total = goodput._scaled(
        ctx1, "goodput_restart_time", var1, dict.fromkeys(lits1, coef), lits=lits1
    )
    assert isinstance(total, cp_model.IntVar) and 2**59 < hi(total) < INT_LIMIT


def test_a_question_whose_rows_overflow_is_rebuilt_coarser_and_answered(monkeypatch):
    """With the goodput's limit lowered so that a small question's rows overflow at the
    finest time unit, build() retries coarser and the solve still answers, the same plan
    as good as at the real limit or worse by the coarser rounding, never better."""
    s = build_scenario(
        model="llama2-7b", gpus=("h100-sxm",), tokens=1e11, budget=2e6, failure_scale=100.0
    )
    plain = solve_cpsat(s, time_limit_s=20)
    assert plain.status == "optimal"
    sums: list[int] = []
    real = goodput._scaled

    def recorded(*args, **kwargs):
        out = real(*args, **kwargs)
        if not isinstance(out, int):
            sums.append(hi(out))
        return out

    monkeypatch.setattr(goodput, "_scaled", recorded)
    solve_cpsat(s, time_limit_s=20)
    limit = max(sums) // 2  # the largest sum of rows now overflows at the finest unit
    monkeypatch.setattr(goodput, "INT_LIMIT", limit)
    coarsened: list[float] = []
    real_build = cpsat_model._build

    def spied(scenario, prepared, candidates, coarsen, *rest):
        coarsened.append(coarsen)
        return real_build(scenario, prepared, candidates, coarsen, *rest)

    monkeypatch.setattr(cpsat_model, "_build", spied)
    tight = solve_cpsat(s, time_limit_s=20)
    assert max(coarsened) > 1.0  # rebuilt with a coarser time unit
    assert tight.status == "optimal" and tight.plans[0].feasible
    # the coarser unit rounds every time up, so it can only lose plans, not gain them
    assert tight.plans[0].objective >= plain.plans[0].objective * (1 - 1e-9)


def _root_bound_days(s, plan) -> float:
    """The least expected time CP-SAT's root propagation gives ``plan``'s shape, DP degree
    and micro-batches (no conflict allowed: the search stops before a purchase option is
    tried out)."""
    from solvers.cpsat.model import build  # lazy: the model's build, for these tests only
    from solvers.space import enumerate_candidates  # lazy: as above

    cands = [c for c in enumerate_candidates(s) if c.shape == plan.config.shape]
    form = build(s, cands)
    md = form.model
    assert form.days_per_unit is not None
    md.add(form.dp == plan.config.dp)
    md.add(form.m == plan.config.microbatches)
    md.minimize(form.objective)
    solver = stoppable_solver()  # never CP-SAT's own SIGINT handler (tests/conftest.py)
    solver.parameters.max_number_of_conflicts = 0  # what propagation proves, nothing more
    solver.parameters.num_workers = 1
    solver.parameters.cp_model_presolve = False
    solver.parameters.search_branching = cp_model.FIXED_SEARCH
    solver.solve(md)
    return solver.best_objective_bound * form.days_per_unit


def test_goodput_rows_bound_the_time_before_a_purchase_is_chosen(monkeypatch):
    """The expected time's goodput terms are rows per (GPU type, purchase option); with
    only the shape and the DP degree fixed, the model's least expected time counts the
    least row of each term (_least_rows), before the search picks the spares and the
    storage. Without that cut those terms propagated nothing until then, so that a proof
    over the DP degrees ran once per option (agreement seed 189: a shape of Llama 3 8B at
    a failure rate x 100, 29 s to prove with its optimal plan as the hint, 1.2 s with it).
    The spare cover is held at the facility's 2 per 100 (a 6-minute repair: Little's law
    puts 1.6 per 100 in repair at 1,000x the rates, models/goodput.py spare_cover_per_100),
    so that the plan buys spares and storage with the budget it leaves and the purchase
    rows differ widely, the case the cut is for."""
    s = build_scenario(
        model="llama2-7b", gpus=("h100-sxm",), tokens=1e12, budget=2e7, failure_scale=1000.0
    )
    s = s.with_changes(catalog=s.catalog.with_facility(hot_spare_repair_hours=0.1))
    plan = solve_cpsat(s, time_limit_s=20).plans[0]
    ideal = plan.evaluation.goodput.ideal_days
    with_cut = _root_bound_days(s, plan)
    assert ideal < with_cut <= plan.objective * (1 + 1e-6)
    monkeypatch.setattr(goodput, "_least_rows", lambda *args: None)  # the cut left out
    without = _root_bound_days(s, plan)
    assert with_cut > without * 1.01, (with_cut / ideal, without / ideal)
