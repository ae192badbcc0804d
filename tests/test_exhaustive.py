"""solvers/exhaustive.py: the exhaustive solver (the oracle the differential tests compare
CP-SAT with) keeps its time limit (issue 20's reproduction 18)."""

from __future__ import annotations

import time

import pytest

from helpers import one_line, run_main


def test_the_exhaustive_solver_keeps_its_time_limit(capsys):
    """Reproduction 18: --solver exhaustive --time-limit 0.01 ran 15 s and said optimal; it
    now stops between shapes and says what it has (unknown here: exit 1, no plan)."""
    from solvers import space

    # a space kept from an earlier test would enumerate within the limit and let the first
    # shape finish (feasible): start cold, as the command does
    space._SPACES.clear()
    args = ["optimize", "--budget", "30M", "--solver", "exhaustive", "--time-limit", "0.01"]
    start = time.perf_counter()
    code, out, err = run_main(capsys, [*args, "--no-explain"])
    assert time.perf_counter() - start < 10
    assert "exhaustive: optimal" not in out and "status: optimal" not in out
    if code == 1:  # stopped before a shape finished (the usual case)
        assert "exhaustive: unknown" in out
        assert "time limit" in one_line(err)
    else:  # a warm process may finish its first shape within 0.01 s: a plan, not proved
        assert code == 0 and "exhaustive: feasible" in out, (code, out, err)


# ---------------------------------------------------------------- the solver's own contract
def test_top_k_plans_are_feasible_best_first_with_distinct_shapes(cat):
    from helpers import prime_scenario
    from solvers.exhaustive import solve_exhaustive

    s = prime_scenario(cat)
    res = solve_exhaustive(s, top_k=4)
    assert (res.status, res.solver, res.gap) == ("optimal", "exhaustive", 0.0)
    assert (res.objective_name, res.objective_unit) == ("time_to_train", "days")
    assert len(res.plans) == 4 and all(p.feasible for p in res.plans)
    objectives = [p.objective for p in res.plans]
    assert objectives == sorted(objectives)
    assert len({p.config.shape for p in res.plans}) == 4  # one plan per shape
    assert res.candidates and res.plans[0] == solve_exhaustive(s).plans[0]


def test_a_shape_list_limits_the_search(cat):
    from helpers import prime_scenario
    from solvers.exhaustive import solve_exhaustive
    from solvers.space import enumerate_candidates

    s = prime_scenario(cat)
    best = solve_exhaustive(s).plans[0]
    others = [c for c in enumerate_candidates(s) if c.shape != best.config.shape]
    res = solve_exhaustive(s, candidates=others)
    assert res.status == "optimal" and res.candidates == others
    assert res.plans[0].config.shape != best.config.shape
    assert res.plans[0].objective >= best.objective


def test_a_question_no_plan_meets_is_infeasible(cat):
    from helpers import prime_scenario
    from solvers.exhaustive import solve_exhaustive

    res = solve_exhaustive(prime_scenario(cat).with_changes(budget_usd=1e3))
    assert (res.status, res.plans, res.gap) == ("infeasible", [], None)
    cost = solve_exhaustive(prime_scenario(cat).with_changes(objective="cost"))
    assert (cost.objective_name, cost.objective_unit) == ("cost", "USD")


def test_a_zero_time_limit_stops_before_the_first_shape(cat):
    from helpers import prime_scenario
    from solvers.exhaustive import solve_exhaustive

    res = solve_exhaustive(prime_scenario(cat), time_limit_s=-1.0)
    assert (res.status, res.plans, res.gap) == ("unknown", [], None)


def test_the_estimate_scales_with_the_shapes_searched(cat):
    from helpers import prime_scenario
    from solvers.exhaustive import estimated_seconds
    from solvers.space import enumerate_candidates

    s = prime_scenario(cat)
    cands = [c for c in enumerate_candidates(s) if c.allowed(s)]
    assert estimated_seconds(s, []) == 0.0
    one, many = estimated_seconds(s, cands[:1]), estimated_seconds(s, cands)
    assert 0 < one < 5 and many > 0
    assert many / len(cands) < 1.0  # under a second a shape on this question


@pytest.mark.parametrize("solver", ["cpsat", "exhaustive"])
def test_the_time_limit_bounds_the_enumeration_too(solver):
    """A spec at its field limits (100,000 MoE layers) took about a minute to enumerate
    before either solver started, whatever --time-limit said. The enumeration now stops at
    the limit: unknown, no plan, and the message says what ran out."""
    from designer.question.build import build_scenario
    from models.transformer import TransformerSpec
    from solvers import solve
    from solvers.result import ENUMERATION_STOPPED

    deep = TransformerSpec(
        name=f"deep-moe-{solver}", layers=100_000, hidden=512, heads=8, ffn_hidden=2048,
        vocab=32000, seq_len=2048, experts=64, experts_per_token=2, expert_ffn_hidden=1024,
    )  # fmt: skip
    s = build_scenario(model=deep, budget=30e6, gpus=("h100-sxm",))
    start = time.perf_counter()
    res = solve(s, solver=solver, time_limit_s=1.0)
    assert time.perf_counter() - start < 15
    assert res.status == "unknown" and not res.plans
    assert res.message == ENUMERATION_STOPPED
