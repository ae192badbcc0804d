"""The decision space, the CP-SAT formulation, the exhaustive reference solver and explanations.

Holds the question (``scenario.py``), the decision space (``space.py``, ``decisions.py``),
the constraint families (``families/``), screening shapes before the search (``screen/``),
the CP-SAT model and its solve (``cpsat/``), the exhaustive solver (``exhaustive.py``,
``grid_search.py``), plans and results (``plan.py``, ``result.py``) and explanations
(``explain.py``). May import: catalog/ and models/; never designer/. Inside, seven import
floors at most and no cycle (tests/test_import_cycles.py).

The solvers and plans are imported on first use (PEP 562 ``__getattr__``): OR-Tools
and the pandas it loads take about half a second, and the performance model numpy,
which commands that never solve (``designer --help``, ``catalog``, ``models``)
should not pay (bench/startup.py)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from solvers.columns import PLAN_COLUMNS
from solvers.families import NAMES as FAMILIES  # --ignore's choices, in registry order
from solvers.result import SolveResult
from solvers.scenario import Scenario

if TYPE_CHECKING:
    from solvers.cpsat.solve import solve_cpsat
    from solvers.exhaustive import solve_exhaustive
    from solvers.plan import Config, Plan

_LAZY = {
    "solve_cpsat": "solvers.cpsat.solve",
    "solve_exhaustive": "solvers.exhaustive",
    "Config": "solvers.plan",
    "Plan": "solvers.plan",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'solvers' has no attribute {name!r}")


def solve(
    scenario: Scenario, solver: str = "cpsat", top_k: int = 1, time_limit_s: float = 60.0
) -> SolveResult:
    """Answer the question with the chosen solver."""
    if solver == "cpsat":
        # lazy: OR-Tools loads here, not in commands that never solve (module docstring)
        from solvers.cpsat.solve import solve_cpsat

        res = solve_cpsat(scenario, top_k=top_k, time_limit_s=time_limit_s)
        if res.status in ("feasible", "unknown") and not res.message:  # (stopped enumerating)
            return replace(res, message=unproved_advice(scenario, res))
        return res
    if solver == "exhaustive":
        # lazy: numpy and the plans load here, not in commands that never solve
        from solvers.exhaustive import solve_exhaustive

        return solve_exhaustive(scenario, top_k=top_k, time_limit_s=time_limit_s)
    raise ValueError(f"unknown solver {solver!r}")


def unproved_advice(scenario: Scenario, res: SolveResult) -> str:
    """What to do when CP-SAT stopped before a proof: the exhaustive solver when it would
    take less than the search already spent (estimated on a sample of shapes), else a
    longer time limit."""
    # lazy: numpy and the plans load here, not in commands that never solve
    from solvers.exhaustive import estimated_seconds

    estimate = estimated_seconds(scenario, res.candidates or None)
    what = "not proved optimal" if res.plans else "no plan found"
    if estimate < res.wall_s:
        return (
            f"{what} in {res.wall_s:.1f} s; the exhaustive solver would prove the answer in "
            f"about {estimate:.0f} s: rerun with --solver exhaustive"
        )
    return (
        f"{what} in {res.wall_s:.1f} s; raise --time-limit (the exhaustive solver would "
        f"take about {estimate:.0f} s)"
    )


__all__ = [
    "FAMILIES",
    "PLAN_COLUMNS",
    "Config",
    "Plan",
    "Scenario",
    "SolveResult",
    "solve",
    "solve_cpsat",
    "solve_exhaustive",
]
