"""budget: the plan's cost (capex, cloud rent or TCO; models/cost.py) at most the budget.

CP-SAT bounds the cost expression of the question's pricing (solvers/cpsat/model.py
builds it: cents, or 1/TCO_UNITS_PER_CENT cents, or GPU-time units per GPU type when
renting)."""

from __future__ import annotations

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


class Budget(Family):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(budget_usd=s.budget * 1.1)

    def encode(self, ctx: BuildContext) -> None:
        s, on = ctx.scenario, ctx.enforce[self.name]
        if s.pricing != "cloud":
            ctx.md.add(ctx.cost_expr <= down(s.budget * 100 * ctx.per_cent)).only_enforce_if(on)
            return
        for g in ctx.gpu_names:  # GPU-time units of each GPU type
            limit = down(s.budget * 100 / ctx.coef[g])
            if limit < ctx.hi(ctx.gt_of[g]):  # else the budget cannot bind
                ctx.md.add(ctx.gt_of[g] <= limit).only_enforce_if([on, ctx.gpu_lit[g]])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.cost_cents <= s.budget * 100.0 * (1 + 1e-12)

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        cost = ev.extra["cost_usd"]
        if cost > s.budget * (1 + TOL):
            return violation(self.name, f"costs ${cost:,.0f}, budget ${s.budget:,.0f}")
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        return s.budget - plan.cost_usd, "USD", f"${plan.cost_usd:,.0f} of ${s.budget:,.0f}"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # the least budget is the cost optimum with the budget off
        return other_objective_fix(
            search,
            self,
            "cost",
            lambda plan: plan.cost_usd,
            lambda x: f"budget must be at least ${x:,.0f}",
        )


FAMILY = Budget("budget", 90, "budget +10%", field="budget_usd")
