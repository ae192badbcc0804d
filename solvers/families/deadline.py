"""deadline: the days to train (models/evaluate.py) at most the deadline."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from solvers.families.base import (
    STEP_ROOM,
    Family,
    Fix,
    FixSearch,
    Grid,
    other_objective_fix,
    resized,
    violation,
)
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

    def relaxations(self, s: Scenario, plan: Plan | None = None) -> list[tuple[str, Scenario]]:
        """+10%, or, where that frees no purchase unit, what the plan's shape takes on the
        next size down, one purchase unit or more fewer (resized): 32 H100s for 29.9 days
        under a 30-day deadline were called not limiting, and 39.83 days (the shape on 24
        GPUs) buys a plan $288.5K cheaper. Only the cost objective gains from a longer
        deadline."""
        step = [(self.relaxation_in(s), self.relax(s))]
        if plan is None or s.objective != "cost":
            return step
        fewer = resized(s, plan, -1)
        days = None if fewer is None else fewer.evaluation.time_to_train_days
        if fewer is None or days is None or days * (1 + STEP_ROOM) <= s.deadline * 1.1:
            return step
        deadline = math.ceil(days * (1 + STEP_ROOM) * PER_DAY) / PER_DAY
        gpus = fewer.evaluation.layout.num_gpus
        more = deadline - s.deadline
        words = (
            f"deadline +{more:,.2f} days (the plan's shape on {gpus:,} GPUs, the next size down)"
        )
        return [(words, s.with_changes(deadline_days=deadline))]

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
        # the least deadline is near the time optimum with the deadline off: found from it
        # to the hundredth of a day it prints (least_deadline)
        return other_objective_fix(
            search,
            self,
            "time",
            lambda plan: _days(plan.evaluation),
            _words,
            lambda fixed, optimum: least_deadline(search, s, fixed, optimum),
        )


# the deadline fix's precision: hundredths of a day, as it prints
PER_DAY = 100


def _words(x: float) -> str:
    return f"deadline must be at least {x:,.2f} days"


def least_deadline(search: FixSearch, s: Scenario, fixed: Scenario, optimum: float) -> float:
    """The least deadline in hundredths of a day that holds, so that the figure printed holds
    and a hundredth less does not (rounded to the nearest, 140.42 was named for a plan of
    140.4202 days). ``fixed`` is the question at the time ``optimum`` nudged past the
    solver's rounding (other_objective_fix: it holds), ``s`` the question (its deadline
    does not). The optimum rounded up is asked first, then a hundredth less: the hot spares
    and storage a deadline buys (solvers/purchase_rule.py) can beat the time optimum,
    which buys only what pays (237.70 days named where 237.69 held), so the search goes
    down from there by doubling steps, then bisects."""

    def holds(k: int) -> bool:
        return search.ok(fixed.with_changes(deadline_days=k / PER_DAY))

    bad = math.floor(s.deadline * PER_DAY)  # the question's deadline: nothing fits
    top = math.ceil(fixed.deadline * PER_DAY)  # at or above the verified limit: holds
    guess = math.ceil(optimum * PER_DAY - 1e-6)
    if bad < guess < top:
        if holds(guess):
            top = guess
        else:
            bad = guess
    step = 1
    while top - step > bad:
        if not holds(top - step):
            bad = top - step
            break
        top, step = top - step, step * 2
    while top - bad > 1:
        mid = (top + bad) // 2
        if holds(mid):
            top = mid
        else:
            bad = mid
    return top / PER_DAY


FAMILY = Deadline("deadline", 100, "deadline +10%", field="deadline_days")
