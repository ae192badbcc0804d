"""Which plan ranks first: optimize's order of plans, ties included (one source of truth).

A question minimises its objective (the time to train under a budget, the cost by a
deadline); two plans equal on it are ordered by the other one (the cheaper of two equally
fast plans first, the faster of two equally cheap ones), then by fewer GPUs. Past that, the
solvers' own order makes the answer deterministic: the purchases, the shape (its GPU type
first), the NIC and the NICs per server. The exhaustive grid search applies the same key
to its arrays (solvers/grid_search.py best_for_candidate); CP-SAT, whose model minimises
the objective alone, in a second phase (solvers/cpsat/solve.py): under the cost objective
the time minimised at the proved optimal cost (to its integer units' rounding, a plan
there kept if it ties the optimum to FLOAT_TIE: ties_or_beats), for every plan of a --top
list (_fastest_at_cost); under the time objective the cheapest NICs at the plan's time
(_cheapest_nics); bench/agreement.py --full compares both keys. The solvers' plan lists
(--top K: solvers.purchase_rule.settle, CP-SAT's per-shape search, the merged rental
terms and GPU types), compare's rows and breakeven's comparison of two GPU types read it
here."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solvers.decisions import Plan

# two objectives this close (relative) are one value to the float model: far above its own
# rounding of a plan's cost or days (the same plan evaluated two ways differs in its last
# bits), far below a real difference (bench/agreement.py's ties, CP-SAT's second phase)
FLOAT_TIE = 1e-9


def secondary(plan: Plan, objective: str) -> float:
    """The objective a tie on ``objective`` ("time" or "cost") is broken by: the cost of a
    time question's plan, the days of a cost question's."""
    if objective == "time":
        return float(plan.cost_usd)
    days = plan.evaluation.time_to_train_days
    return math.inf if days is None else float(days)


def tie_key(plan: Plan, objective: str) -> tuple[float, float, int]:
    """The objective, then the other one, then the GPUs: the smaller key is the better
    plan (equal keys: equally good to the question)."""
    return (float(plan.objective), secondary(plan, objective), int(plan.num_gpus))


def plan_order(plan: Plan, objective: str) -> tuple:
    """``tie_key`` and then the solvers' deterministic rest (the module docstring): the
    sort key of a list of plans, best first."""
    cfg = plan.config
    buys = (cfg.spares_per_100, cfg.storage_gb_per_s or 0.0)
    return (*tie_key(plan, objective), buys, cfg.shape, cfg.nic, cfg.nics_per_node)


def ranks_first(a: Plan, b: Plan, objective: str) -> bool:
    """Whether ``a`` is at least as good as ``b`` under the tie rule (no worse on the
    objective, and no worse on the other one when tied on it, then GPUs)."""
    return tie_key(a, objective) <= tie_key(b, objective)


def ties_or_beats(a: Plan, b: Plan, objective: str) -> bool:
    """Whether ``a`` is as good as ``b`` on ``objective`` to the float model (at most
    FLOAT_TIE worse, relative) and no worse on the other one: CP-SAT's second phase keeps
    a plan its integer units put past the optimum only if this holds against the
    optimum's plan (solvers/cpsat/solve.py _fastest_at_cost)."""
    bound = float(b.objective) + FLOAT_TIE * abs(float(b.objective))
    return float(a.objective) <= bound and secondary(a, objective) <= secondary(b, objective)
