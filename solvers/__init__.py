"""The decision space, the CP-SAT formulation, the exhaustive reference solver and explanations."""

from solvers.cpsat import solve_cpsat
from dataclasses import replace

from solvers.exhaustive import estimated_seconds, solve_exhaustive
from solvers.plan import PLAN_COLUMNS, Config, Plan
from solvers.result import SolveResult
from solvers.scenario import FAMILIES, Scenario


def solve(
    scenario: Scenario, solver: str = "cpsat", top_k: int = 1, time_limit_s: float = 60.0
) -> SolveResult:
    """Answer the question with the chosen solver."""
    if solver == "cpsat":
        res = solve_cpsat(scenario, top_k=top_k, time_limit_s=time_limit_s)
        if res.status in ("feasible", "unknown"):
            return replace(res, message=unproved_advice(scenario, res))
        return res
    if solver == "exhaustive":
        return solve_exhaustive(scenario, top_k=top_k)
    raise ValueError(f"unknown solver {solver!r}")


def unproved_advice(scenario: Scenario, res: SolveResult) -> str:
    """What to do when CP-SAT stopped before a proof: the exhaustive solver when it would
    take less than the search already spent (estimated on a sample of shapes), else a
    longer time limit."""
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
