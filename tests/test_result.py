"""solvers/result.py: what a solve returns: the best plan, whether the answer is proved,
and the status as printed (a feasible answer says it is not proved, with its gap)."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest

from solvers.result import SolveResult


def _result(status: str, gap: float | None = None, plans=None) -> SolveResult:
    return SolveResult(status=status, solver="cpsat", wall_s=1.0, gap=gap, plans=plans or [])


def test_best_is_the_first_plan_or_none():
    assert _result("infeasible").best is None
    first, second = object(), object()
    assert _result("optimal", plans=[first, second]).best is first  # type: ignore[list-item]


@pytest.mark.parametrize(
    "status,proved",
    [("optimal", True), ("infeasible", True), ("feasible", False), ("unknown", False)],
)
def test_proved_means_optimal_or_infeasible(status, proved):
    assert _result(status).proved is proved


@pytest.mark.parametrize(
    "status,gap,text",
    [
        ("optimal", None, "optimal"),
        ("infeasible", 0.5, "infeasible"),
        ("unknown", None, "unknown"),
        ("feasible", 0.032, "feasible (not proved; gap 3.2%)"),
        ("feasible", 0.25, "feasible (not proved; gap 25%)"),
        ("feasible", None, "feasible (not proved; gap unknown)"),
    ],
)
def test_status_text_says_an_unproved_plan_and_its_gap(status, gap, text):
    assert _result(status, gap).status_text == text


def test_defaults_are_the_time_objectives():
    res = _result("optimal")
    assert (res.objective_name, res.objective_unit, res.message) == ("time_to_train", "days", "")
    assert res.plans == [] and res.candidates == []
    assert "candidates" not in repr(res)  # the decision space is not printed


@pytest.mark.parametrize("gap,text", [(1.0, "100%"), (0.995, "100%"), (1e-7, "<0.01%")])
def test_a_gap_is_printed_without_an_exponent(gap, text):
    """A stopped exhaustive search's gap can be 100% (no bound above 0 for a shape it did
    not search): printed '1e+02%' before; two significant digits, '<0.01%' below them."""
    assert _result("feasible", gap).status_text == f"feasible (not proved; gap {text})"


def _plan(objective: float):
    return SimpleNamespace(objective=objective)


def test_a_merged_gap_is_against_the_least_bound_of_the_parts():
    """Parts of one question (cloud terms) merged: the gap of the best plan against the
    least of the parts' bounds (their own, or best x (1 - gap)); an infeasible part has
    none; a part stopped without a bound (unknown, no plan) leaves the gap unknown, since
    it may hold a better plan (the merge took the others' gaps alone: 0% here)."""
    from solvers.result import merged_gap

    optimal = _result("optimal", 0.0, [_plan(10.0)])
    stopped = replace(_result("feasible", 0.5, [_plan(20.0)]), bound=8.0)
    assert merged_gap([optimal, stopped], 10.0) == pytest.approx(0.2)
    assert merged_gap([optimal, _result("feasible", 0.5, [_plan(12.0)])], 10.0) == 0.4
    assert merged_gap([optimal, _result("infeasible")], 10.0) == 0.0
    assert merged_gap([optimal, replace(_result("unknown"), bound=5.0)], 10.0) == 0.5
    assert merged_gap([optimal, _result("unknown")], 10.0) is None
    assert merged_gap([optimal, _result("feasible", None, [_plan(9.0)])], 9.0) is None
