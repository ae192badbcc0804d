"""The decision space, the CP-SAT formulation, the exhaustive reference solver and explanations."""

from solvers.cpsat import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.plan import PLAN_COLUMNS, Config, Plan
from solvers.result import SolveResult
from solvers.scenario import FAMILIES, Scenario


def solve(
    scenario: Scenario, solver: str = "cpsat", top_k: int = 1, time_limit_s: float = 60.0
) -> SolveResult:
    """Answer the question with the chosen solver."""
    if solver == "cpsat":
        return solve_cpsat(scenario, top_k=top_k, time_limit_s=time_limit_s)
    if solver == "exhaustive":
        return solve_exhaustive(scenario, top_k=top_k)
    raise ValueError(f"unknown solver {solver!r}")


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
