"""solvers/result.py: what a solve returns: the best plan, whether the answer is proved,
and the status as printed (a feasible answer says it is not proved, with its gap)."""

from __future__ import annotations

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
