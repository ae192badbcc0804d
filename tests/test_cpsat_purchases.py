"""solvers/cpsat/purchases.py: hot spares and checkpoint storage as decisions of the CP-SAT
model. At one plan with each purchase option fixed, the model's time is the float model's
with those purchases rounded up and its capex the float model's to the cent (the spares'
servers and the storage per server priced as models/cost.py purchases_cents does); a
question that decides nothing has no purchase literals."""

from __future__ import annotations

from dataclasses import replace

import pytest
from ortools.sat.python import cp_model

from helpers import small_batch_scenario, solve_at
from solvers.exhaustive import solve_exhaustive
from solvers.plan import build_plan
from solvers.purchases import spare_options, storage_options


def _failing(cat, **changes):
    """Failures at 1,000x the rates, a budget that buys spares: purchases are decided."""
    base = dict(tokens=1e10, no_failures=False, failure_scale=1000.0, budget_usd=2e6)
    return small_batch_scenario(cat, **{**base, **changes})


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_each_purchase_option_is_the_float_models(cat, objective):
    plan = solve_exhaustive(_failing(cat, budget_usd=3e7)).plans[0]  # the fastest: 64 servers
    s = _failing(cat, objective=objective, budget_usd=1e8)  # every purchase within it
    gpu = plan.config.shape.gpu
    spares, storages = spare_options(s, gpu), storage_options(s, gpu)
    assert len(spares) > 1 and len(storages) > 1  # the question decides both
    assert plan.evaluation.cluster.servers > 50  # 2 per 100 is more than one spare server
    admitted = 0
    for k in spares:
        for b in storages:
            p = build_plan(s, replace(plan.config, spares_per_100=k, storage_gb_per_s=b))
            status, solver, form, value = solve_at(s, p.config)
            assert set(form.spare_lits) == set(spares) and set(form.storage_lits) == set(storages)
            assert (status == cp_model.OPTIMAL) == p.feasible, (k, b, p.violations)
            if status != cp_model.OPTIMAL:
                continue
            admitted += 1
            if objective == "cost":
                assert solver.objective_value == round(p.cost_usd * 100)
            else:
                days, want = (
                    solver.objective_value * form.days_per_unit,
                    p.evaluation.time_to_train_days,
                )
                assert want * (1 - 1e-8) <= days <= want * (1 + 1e-6)
            if k > 0:
                assert value("spare_servers") == p.evaluation.cluster.spare_servers > 0
    assert admitted == len(spares) * len(storages)


def test_spares_make_the_plan_faster_in_the_model_too(cat):
    plan = solve_exhaustive(_failing(cat)).plans[0]
    s = _failing(cat, budget_usd=1e8)  # every spare count within the budget
    days = {}
    for k in spare_options(s, plan.config.shape.gpu):
        p = build_plan(s, replace(plan.config, spares_per_100=k))
        status, solver, form, _ = solve_at(s, p.config)
        assert status == cp_model.OPTIMAL
        days[k] = solver.objective_value * form.days_per_unit
    ordered = [days[k] for k in sorted(days)]
    assert ordered == sorted(ordered, reverse=True) and ordered[0] > ordered[-1]


@pytest.mark.parametrize(
    "changes", [{"no_failures": True}, {"pricing": "cloud"}], ids=["ideal", "rented"]
)
def test_a_question_that_decides_nothing_has_no_purchase_literals(cat, changes):
    s = _failing(cat, **changes)
    plan = solve_exhaustive(s).plans[0]
    status, _, form, _ = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL
    assert form.spare_lits == {} and form.storage_lits == {}
