"""What a solve returns."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from solvers.plan import Plan
    from solvers.scenario import Scenario

ENUMERATION_STOPPED = (
    "the decision space was still being enumerated when the time limit ran out; raise --time-limit"
)
"""A solve's message when its time limit ran out before the space was enumerated."""


def objective_fields(objective: str) -> tuple[str, str]:
    """SolveResult's objective name and unit for a question's objective ("time" or
    "cost"): one home, so that every result says what the question minimised, a result
    without a plan too (an infeasible cheapest-by-deadline answer said "time_to_train")."""
    return ("time_to_train", "days") if objective == "time" else ("cost", "USD")


def names_objective(solve: Callable[..., SolveResult]) -> Callable[..., SolveResult]:
    """A solver whose every result names its question's objective (objective_fields)."""

    @functools.wraps(solve)
    def named(scenario: Scenario, *args: Any, **kwargs: Any) -> SolveResult:
        name, unit = objective_fields(scenario.objective)
        res = solve(scenario, *args, **kwargs)
        return replace(checked(res), objective_name=name, objective_unit=unit)

    return named


def checked(res: SolveResult) -> SolveResult:
    """``res``, once every plan in it passes the float model's checks of the question's
    enforced families (solvers.plan.build_plan re-evaluates each one; the solvers choose
    from bounds and coefficients read from models/, and a plan the evaluator rejects
    would be reported as the answer: 256 GPUs 2.2 GB over memory were). An internal error
    otherwise: a disagreement between a solver's encoding and models.evaluate."""
    for plan in res.plans:
        if plan.violations:
            broken = "; ".join(f"{v.constraint}: {v.detail}" for v in plan.violations)
            raise RuntimeError(
                f"internal error: {res.solver}'s plan {plan.config.shape} (DP "
                f"{plan.config.dp}, {plan.config.microbatches} micro-batches) fails the "
                f"evaluator's check ({broken})"
            )
    return res


@dataclass
class SolveResult:
    status: str  # "optimal" | "feasible" | "infeasible" | "unknown"
    solver: str
    wall_s: float
    gap: float | None
    plans: list[Plan] = field(default_factory=list)
    objective_name: str = "time_to_train"
    objective_unit: str = "days"
    message: str = ""
    candidates: list = field(default_factory=list, repr=False)  # the decision space, for re-solves

    @classmethod
    def enumeration_stopped(cls, solver: str, wall_s: float) -> SolveResult:
        """``unknown``: the time limit ran out while the decision space was being enumerated
        (solvers.space.enumerate_within returned None), for either solver."""
        return cls("unknown", solver, wall_s, None, message=ENUMERATION_STOPPED)

    @property
    def best(self) -> Plan | None:
        return self.plans[0] if self.plans else None

    @property
    def proved(self) -> bool:
        """Whether the answer is proved: optimal, or infeasible."""
        return self.status in ("optimal", "infeasible")

    @property
    def status_text(self) -> str:
        """The status as printed: ``feasible (not proved; gap 3.2%)`` when the search
        stopped before proving its best plan optimal."""
        if self.status != "feasible":
            return self.status
        gap = "unknown" if self.gap is None else f"{100 * self.gap:.2g}%"
        return f"feasible (not proved; gap {gap})"
