"""What a solve returns."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solvers.plan import Plan

ENUMERATION_STOPPED = (
    "the decision space was still being enumerated when the time limit ran out; raise --time-limit"
)
"""A solve's message when its time limit ran out before the space was enumerated."""


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
