"""designer/compare.py: the same question answered once per GPU type, best first and the
GPU types without a plan last, each row with the constraint that binds its plan."""

from __future__ import annotations

from dataclasses import dataclass

from designer.compare import CompareRow, compare
from helpers import prime_scenario
from solvers.result import SolveResult


@dataclass
class _B:
    constraint: str
    binding: bool


def test_top_binding_is_the_first_binding_constraint():
    res = SolveResult("optimal", "cpsat", 0.0, 0.0)
    assert CompareRow("a", res, None).top_binding == ""
    row = CompareRow("a", res, [_B("memory", False), _B("budget", True), _B("deadline", True)])
    assert row.top_binding == "budget"


def test_rows_are_best_first_and_the_infeasible_last(cat):
    s = prime_scenario(cat).with_changes(gpus=("h100-sxm", "h200", "a100-80gb"), budget_usd=2.5e6)
    rows = compare(s, explain=False, time_limit_s=30.0)
    assert sorted(r.gpu for r in rows) == ["a100-80gb", "h100-sxm", "h200"]
    keys = [r.sort_key for r in rows]
    assert keys == sorted(keys)
    with_plan = [r for r in rows if r.result.best is not None]
    assert with_plan and rows[: len(with_plan)] == with_plan  # the plans first
    objectives = [r.result.best.objective for r in with_plan]
    assert objectives == sorted(objectives)
    for r in rows:
        assert r.binding is None  # explain=False
        if r.result.best is not None:
            assert r.result.best.config.shape.gpu == r.gpu  # each type solved on its own


def test_explained_rows_carry_their_binding_constraints(cat):
    s = prime_scenario(cat)
    (row,) = compare(s, explain=True, time_limit_s=30.0)
    assert row.gpu == "h100-sxm" and row.binding
    assert row.top_binding in {b.constraint for b in row.binding if b.binding} | {""}
