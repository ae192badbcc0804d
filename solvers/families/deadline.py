"""deadline: the days to train (models/evaluate.py) at most the deadline."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from solvers.families.base import Family, Fix, FixSearch, Grid, other_objective_fix, violation
from solvers.intmath import down

if TYPE_CHECKING:
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario


def _days(ev: Evaluation) -> float:
    return float(ev.time_to_train_days or 0.0)


class Deadline(Family):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(deadline_days=s.deadline * 1.1)

    def encode(self, ctx: BuildContext) -> None:
        limit = down(ctx.scenario.deadline / ctx.days_per_unit)
        if limit >= ctx.hi(ctx.per_seq):
            return  # no plan takes that long (a deadline of years for a small run): int64 kept
        ctx.md.add(ctx.per_seq <= limit).only_enforce_if(ctx.enforce[self.name])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.days <= s.deadline * (1 + TOL)

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        days = ev.time_to_train_days or math.inf
        if days > s.deadline * (1 + TOL):
            return violation(self.name, f"takes {days:,.2f} days, deadline {s.deadline:,.2f}")
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        days = _days(plan.evaluation)
        return s.deadline - days, "days", f"{days:,.1f} of {s.deadline:,.1f} days"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # the least deadline is the time optimum with the deadline off
        return other_objective_fix(
            search,
            self,
            "time",
            lambda plan: _days(plan.evaluation),
            lambda x: f"deadline must be at least {x:,.2f} days",
        )


FAMILY = Deadline("deadline", 100, "deadline +10%", field="deadline_days")
