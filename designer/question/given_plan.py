"""A saved answer's first plan, given back to ``explain`` and ``export``: its decisions,
the rental term it was billed under and what the solve that chose it proved, re-evaluated
as the optimizer prices it.

- The term: a rented plan (``--pricing cloud``) is billed under the term its solve chose
  (solvers/cloud_terms.py: the term's price, the block's own price on demand, and the
  term's minimum days), not at the catalog's hourly price, so its cost, the budget's
  slack and the binding list are the ones ``optimize`` printed.
- The proof: a plan saved as proved optimal stays so when it re-evaluates to the saved
  objective (same model, same catalog: the catalog's content hash is checked on reading);
  it was proved then, and is not re-solved now (``solve.message`` says so). A plan whose
  objective moved is an unproved given plan, with a message saying to re-run optimize.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from designer.errors import Infeasible, UsageError

if TYPE_CHECKING:
    from solvers import Scenario, SolveResult
    from solvers.plan import Config, Plan

GIVEN = "given plan"  # the solver of a given plan's result (the text says "The saved plan")


@dataclass(frozen=True)
class GivenPlan:
    """A plan to re-evaluate: its decisions, and from a saved answer its rental term and
    what its solve proved (None: a plan without a saved solve)."""

    config: Config
    cloud_term: str | None = None  # solvers/cloud_terms.py; None: not rented under a term
    status: str | None = None  # the saved answer's status ("optimal": proved)
    solver: str | None = None  # the solver that proved it
    objective: float | None = None  # the saved objective's value (days or USD)


def given_from_answer(doc: dict[str, Any], config: Config, origin: str) -> GivenPlan:
    """The saved answer's first plan with its term and its solve (validated: UsageError,
    one line naming the field)."""
    # lazy: catalog/cloud.yaml's terms load with a saved answer, not at start-up
    from catalog.cloud import cloud_offers

    term = doc["plans"][0].get("cloud_term")
    names = [t.name for t in cloud_offers().terms]
    if term is not None and term not in names:
        raise UsageError(
            f"{term!r} is not a rental term (one of {', '.join(names)}); fix it or regenerate "
            "with optimize --json",
            f"{origin}: plans[0].cloud_term",
        )
    solve, objective = doc.get("solve"), doc.get("objective")
    solver = solve.get("solver") if isinstance(solve, dict) else None
    value = objective.get("value") if isinstance(objective, dict) else None
    status = doc.get("status")
    return GivenPlan(
        config,
        term,
        status if isinstance(status, str) else None,
        solver if isinstance(solver, str) else None,
        _finite(value),
    )


def _finite(value: Any) -> float | None:
    """A saved number, or None where it is not a finite JSON number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def evaluate_given(scenario: Scenario, given: GivenPlan) -> SolveResult:
    """The given plan as a one-plan result, re-evaluated and billed under its term;
    violations raise Infeasible; proved optimal as saved when its objective is unchanged
    (module docstring)."""
    # lazy: solvers.plan loads numpy; commands that never solve do not
    from solvers import SolveResult, cloud_terms
    from solvers.plan import build_plan
    from solvers.result import objective_fields

    start = time.perf_counter()
    name, unit = objective_fields(scenario.objective)
    if given.cloud_term is not None and cloud_terms.applies(scenario):
        plan = cloud_terms.billed_plan(scenario, given.config, given.cloud_term)
    else:
        plan = build_plan(scenario, given.config)
    if not plan.feasible:
        broken = "; ".join(f"{v.constraint}: {v.detail}" for v in plan.violations)
        raise Infeasible(f"the saved plan breaks the question: {broken}")
    _check_rentable(plan)
    res = SolveResult(
        status="feasible",
        solver=GIVEN,
        wall_s=time.perf_counter() - start,
        gap=None,
        plans=[plan],
        objective_name=name,
        objective_unit=unit,
    )
    return _as_saved(res, given, plan)


def _check_rentable(plan: Plan) -> None:
    """A saved plan billed under a term that cannot rent it (on demand, past its block's
    longest reservation: AWS's 182 days) is refused, naming the limit (models/rental.py)."""
    rented = plan.evaluation.rental
    days = plan.evaluation.time_to_train_days
    if rented is None or days is None or rented.billing.rents(days):
        return
    raise Infeasible(
        f"the saved plan runs {days:,.1f} days and its term, {rented.term}, rents its block for "
        f"at most {rented.billing.max_days:,.0f} days; re-run optimize, which rents it reserved"
    )


def _as_saved(res: SolveResult, given: GivenPlan, plan: Plan) -> SolveResult:
    """``res`` proved optimal when the saved solve proved it and the objective is the
    saved one; else unproved, saying why when the proof was lost."""
    if given.status != "optimal" or given.objective is None:
        return res
    by = f" by {given.solver}" if given.solver else ""
    if math.isclose(plan.objective, given.objective, rel_tol=1e-9, abs_tol=1e-12):
        return replace(
            res,
            status="optimal",
            gap=0.0,
            message=f"proved optimal{by} when saved; re-evaluated here, not re-solved",
        )
    return replace(
        res,
        message=(
            f"proved optimal{by} when saved at {given.objective:,.6g} {res.objective_unit}; "
            f"it now evaluates to {plan.objective:,.6g}, so the proof no longer holds: re-run "
            "optimize"
        ),
    )
