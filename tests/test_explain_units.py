"""A limit that binds at a purchase-unit boundary is called binding (solvers/families/
max_gpus.py caps_stepped, base.py resized and the budget and deadline relaxations).

GPUs are bought in whole servers (8 H100s) or NVL72 racks (72 GB200s), and a +10% step
smaller than one unit bought nothing: 64 H100s +10% is 71, 144 GB200s +10% is 159, a
$400,000 budget +10% buys no second server for a $297,538 plan, and the explanation called
each limit "not limiting" although one unit more (fewer) sped the plan up (made it cheaper).
The questions are the CLI's (build_scenario), as the defects were reported."""

from __future__ import annotations

import pytest

from designer.question.build import build_scenario
from solvers.cpsat.solve import solve_cpsat
from solvers.explain import binding_constraints
from solvers.families import BY_NAME

TIME_LIMIT_S = 30.0


def explained(s):
    res = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
    assert res.status == "optimal", res.status
    rows = binding_constraints(s, res.best, res.candidates, time_limit_s=TIME_LIMIT_S)
    return res.best, {b.constraint: b for b in rows}


CAPS = {
    # 64 -> 72 H100s: 14.45 -> 12.85 days
    "h100 server": (dict(model="llama2-7b", gpus=("h100-sxm",), max_gpus=64), 72, 8),
    # 144 -> 216 GB200s: 5.0 -> 3.32 days
    "gb200 rack": (dict(model="llama2-13b", gpus=("gb200",), max_gpus=144), 216, 72),
}


@pytest.mark.parametrize("name", sorted(CAPS))
def test_a_gpu_cap_one_unit_short_is_binding(name):
    kw, stepped, unit = CAPS[name]
    s = build_scenario(tokens=1e12, budget=30e6, **kw)
    assert BY_NAME["max_gpus"].relax(s).max_gpus == stepped
    plan, rows = explained(s)
    row = rows["max_gpus"]
    assert row.slack == 0
    assert row.binding, row
    assert row.relaxation == f"GPU caps + one purchase unit ({unit} GPUs)"
    faster = solve_cpsat(s.with_changes(max_gpus=stepped), time_limit_s=TIME_LIMIT_S).best
    assert row.improvement_if_relaxed == pytest.approx(plan.objective - faster.objective)


def test_the_gpu_cap_steps_by_ten_percent_where_that_buys_a_unit():
    s = build_scenario(model="llama2-7b", tokens=1e12, gpus=("h100-sxm",), max_gpus=800)
    fam = BY_NAME["max_gpus"]
    assert fam.relax(s).max_gpus == 880
    assert fam.relaxation_in(s) == fam.relaxation == "GPU caps +10%"


def test_a_budget_one_server_short_is_binding():
    """$297,538 of $400,000 on one server; the plan's shape on 16 GPUs costs $607K and
    takes 57.8 days instead of 117.8."""
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=4e5, gpus=("h100-sxm",))
    plan, rows = explained(s)
    assert plan.evaluation.layout.num_gpus == 8
    row = rows["budget"]
    assert row.binding, row
    assert row.relaxation.startswith("budget +$")
    assert "on 16 GPUs, the next size up" in row.relaxation
    assert row.improvement_if_relaxed > 50  # days
    words, relaxed = BY_NAME["budget"].relaxations(s, plan)[0]
    assert words == row.relaxation
    assert relaxed.budget > 6e5
    assert f"+${relaxed.budget - s.budget:,.0f} " in words


def test_a_deadline_one_unit_short_is_binding_under_the_cost_objective():
    """The cheapest plan within 30 days uses 32 GPUs (29.9 days); on 24 it takes 9.83 days
    longer than the deadline allows, which +10% (3 days) does not free."""
    s = build_scenario(
        model="llama2-7b", tokens=1e12, deadline=30, objective="cost", gpus=("h100-sxm",)
    )
    plan, rows = explained(s)
    row = rows["deadline"]
    assert row.binding, row
    assert "the next size down" in row.relaxation
    words, relaxed = BY_NAME["deadline"].relaxations(s, plan)[0]
    assert words == row.relaxation and relaxed.deadline > 33
    cheaper = solve_cpsat(relaxed, time_limit_s=TIME_LIMIT_S).best
    assert cheaper.evaluation.layout.num_gpus < plan.evaluation.layout.num_gpus
    assert row.improvement_if_relaxed == pytest.approx(plan.objective - cheaper.objective)


def test_without_a_plan_the_steps_are_ten_percent():
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=4e5, deadline=30)
    for name in ("budget", "deadline"):
        fam = BY_NAME[name]
        assert fam.relaxations(s) == [(fam.relaxation, fam.relax(s))]
