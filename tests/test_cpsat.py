"""solvers/cpsat.py: the CP-SAT driver (its top-K cutoff; issue 20's checklist)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import OPTIMIZE_SLOW


@pytest.mark.slow
def test_a_wide_top_k_question_builds_a_valid_model():
    """``--top 20`` on this question ended in "internal error: invalid CP-SAT model (The sum of
    all variable domains do not fit on an int64_t)": the top-K cutoff was a variable of domain
    [0, 2^61]. It is now a linear constraint's bound: twenty plans, proved."""
    cmd = [sys.executable, "-m", "designer", *OPTIMIZE_SLOW, "--time-limit", "120", "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)
    assert answer["status"] == "optimal"
    assert len(answer["plans"]) == 20


# ---------------------------------------------------------------- the driver's contract
def test_top_k_plans_have_distinct_shapes_best_first_and_match_the_reference(cat):
    from helpers import prime_scenario
    from solvers.cpsat import solve_cpsat
    from solvers.exhaustive import solve_exhaustive

    s = prime_scenario(cat)
    got, ref = solve_cpsat(s, top_k=3), solve_exhaustive(s, top_k=3)
    assert (got.status, got.solver) == ("optimal", "cpsat")
    assert all(p.feasible for p in got.plans)
    assert len({p.config.shape for p in got.plans}) == 3
    assert [p.objective for p in got.plans] == sorted(p.objective for p in got.plans)
    for a, b in zip(got.plans, ref.plans, strict=True):
        assert a.objective == pytest.approx(b.objective, rel=1e-3)


def test_a_question_no_plan_meets_is_infeasible_with_its_space(cat):
    from helpers import prime_scenario
    from solvers.cpsat import solve_cpsat

    res = solve_cpsat(prime_scenario(cat).with_changes(budget_usd=1e3))
    assert (res.status, res.plans) == ("infeasible", [])
    assert res.candidates  # the space, for the explanation's re-solves


def test_a_time_cap_asks_whether_any_plan_is_faster(cat):
    from helpers import prime_scenario
    from solvers.cpsat import solve_cpsat

    s = prime_scenario(cat)
    best = solve_cpsat(s).plans[0].objective
    assert solve_cpsat(s, time_cap_days=best * 0.99).status == "infeasible"
    faster = solve_cpsat(s, time_cap_days=best * 1.05)
    assert faster.status in ("feasible", "optimal") and faster.plans[0].objective < best * 1.05


def test_a_hint_changes_no_answer(cat):
    from helpers import prime_scenario
    from solvers.cpsat import solve_cpsat

    s = prime_scenario(cat)
    plans = solve_cpsat(s, top_k=2).plans
    hinted = solve_cpsat(s, hint=plans[1].config, warm_shapes=1)
    assert hinted.status == "optimal"
    assert hinted.plans[0].objective == pytest.approx(plans[0].objective, rel=1e-9)
