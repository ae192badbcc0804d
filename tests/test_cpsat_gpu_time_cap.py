"""solvers/cpsat/gpu_time_cap.py: the most GPU-time per sequence a plan within the budget or
the incumbent's cost cap can take, which bounds the cost's products. A cap at or above a
plan's cost keeps the plan (and rounds its TCO finer, never below the float model's); a cap
under it leaves the plan out; a rented plan's GPU-time is capped by the budget."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

import solvers.cpsat.gpu_time_cap as cap
from designer.question.build import build_scenario
from helpers import prime_scenario, solve_at
from solvers.cpsat.model import build
from solvers.exhaustive import solve_exhaustive
from solvers.limits import TCO_UNITS_PER_CENT
from solvers.space import enumerate_candidates


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_a_cost_cap_above_a_plan_keeps_it_and_rounds_finer(cat, objective):
    s = prime_scenario(cat).with_changes(pricing="tco", objective=objective)
    for plan in solve_exhaustive(s, top_k=2).plans:
        status, free, _, _ = solve_at(s, plan.config)
        status_cap, capped, _, _ = solve_at(s, plan.config, cost_cap_usd=plan.cost_usd * 1.001)
        assert status == status_cap == cp_model.OPTIMAL
        if objective == "time":
            assert capped.objective_value == free.objective_value  # the same time
        else:
            floor = plan.cost_usd * 100 * TCO_UNITS_PER_CENT
            assert floor <= capped.objective_value <= free.objective_value


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_a_cost_cap_under_a_plan_leaves_it_out(cat, objective):
    s = prime_scenario(cat).with_changes(pricing="tco", objective=objective)
    plan = solve_exhaustive(s).plans[0]
    for share in (0.9, 0.01):
        status, _, _, _ = solve_at(s, plan.config, cost_cap_usd=plan.cost_usd * share)
        assert status == cp_model.INFEASIBLE


@pytest.mark.parametrize("pricing", ["tco", "cloud"])
def test_the_budget_caps_the_gpu_time(cat, pricing):
    s = prime_scenario(cat).with_changes(pricing=pricing)
    plan = solve_exhaustive(s).plans[0]
    within = solve_at(s.with_changes(budget_usd=plan.cost_usd * 1.001), plan.config)[0]
    over = solve_at(s.with_changes(budget_usd=plan.cost_usd * 0.5), plan.config)[0]
    assert (within, over) == (cp_model.OPTIMAL, cp_model.INFEASIBLE)


def test_a_rented_plans_cap_is_the_budgets_not_the_incumbents(cat):
    """The cloud cost is price x GPU-time exactly: no cost-cap rounding to tighten, so the
    incumbent's cap is not applied to the GPU-time (the budget is)."""
    s = prime_scenario(cat).with_changes(pricing="cloud")
    plan = solve_exhaustive(s).plans[0]
    status, _, _, _ = solve_at(s, plan.config, cost_cap_usd=plan.cost_usd * 0.01)
    assert status == cp_model.OPTIMAL


@pytest.mark.parametrize("pricing", ["tco", "cloud"])
def test_rates_are_computed_once_per_build(monkeypatch, pricing):
    """The goodput's GPU-time cap (solvers/cpsat/goodput.py) and the cost
    (solvers/cpsat/cost.py) both read the rates; the build computes them once and both
    get the same object."""
    s = build_scenario(
        model="llama2-7b",
        gpus=("h100-sxm",),
        tokens=1e11,
        budget=2e6,
        pricing=pricing,
        **({"lifetime_years": 4.0} if pricing == "tco" else {}),
    )
    calls = {"tco": 0, "days": 0}
    real_tco, real_days = cap._tco_rates, cap.gpu_days_per_unit

    def tco_once(ctx):
        calls["tco"] += 1
        return real_tco(ctx)

    def days_once(ctx):  # each computation of the rates reads it once
        calls["days"] += 1
        return real_days(ctx)

    monkeypatch.setattr(cap, "_tco_rates", tco_once)
    monkeypatch.setattr(cap, "gpu_days_per_unit", days_once)
    build(s, enumerate_candidates(s)[:20])
    assert calls == {"tco": 1 if pricing == "tco" else 0, "days": 1}
