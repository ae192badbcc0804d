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
    # a value no plan of the question beats, when a search stopped early knows one (the
    # exhaustive solver's, with or without a plan; merged_gap reads it): None otherwise
    bound: float | None = None

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
        stopped before proving its best plan optimal (gap_text)."""
        if self.status != "feasible":
            return self.status
        return f"feasible (not proved; gap {gap_text(self.gap)})"


def relative_gap(best: float, bound: float) -> float:
    """A search's relative gap: (``best`` - ``bound``) / ``best``, with ``best`` the
    objective of its best plan and ``bound`` a value no plan beats, within [0, 1] (the
    objectives, days and dollars, are not negative: a gap of 1 claims nothing)."""
    return float(min(1.0, max(0.0, (best - bound) / max(abs(best), 1e-12))))


def merged_gap(results: list[SolveResult], best: float) -> float | None:
    """The gap of an answer merged from searches of parts of one question, ``best`` the
    objective of its best plan (the best of theirs, as cloud_terms.solve_by_term merges its
    terms): against the least of the parts' bounds (a part's ``bound``, else its best plan's
    objective x (1 - its gap); none from an infeasible part). None when a part's search
    stopped with no bound known (an unknown part, or a plan without a gap): a gap from the
    others alone would claim too little, since that part may hold a better plan."""
    bounds = []
    for r in results:
        if r.bound is not None:
            bounds.append(r.bound)
        elif r.plans and r.gap is not None:
            bounds.append(float(r.plans[0].objective) * (1 - r.gap))
        elif r.status != "infeasible":
            return None
    return relative_gap(best, min(bounds, default=best))


def gap_text(gap: float | None) -> str:
    """A gap as printed: two significant digits of its percentage (``3.2%``, ``25%``,
    ``100%``, never an exponent), ``<0.01%`` below that, ``unknown`` for None."""
    if gap is None:
        return "unknown"
    pct = 100 * gap
    if pct >= 9.95:
        return f"{pct:.0f}%"
    if pct == 0 or pct >= 0.00995:
        return f"{pct:.2g}%"
    return "<0.01%"
