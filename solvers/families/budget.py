"""budget: the plan's cost (capex, cloud rent or TCO; models/cost.py) at most the budget.

CP-SAT bounds the cost expression of the question's pricing (solvers/cpsat/model.py
builds it: cents, or 1/TCO_UNITS_PER_CENT cents, or GPU-time units per GPU type when
renting)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from models.units import HOURS_PER_DAY
from solvers.families.base import (
    NUDGES,
    STEP_ROOM,
    Family,
    Fix,
    FixSearch,
    Grid,
    bisect,
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


class Budget(Family):
    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(budget_usd=s.budget * 1.1)

    def relaxations(self, s: Scenario, plan: Plan | None = None) -> list[tuple[str, Scenario]]:
        """+10%, or, where that buys no purchase unit more, what the plan's shape costs on
        the next one (resized): a plan of one 8-GPU server at $297,538 under a $400,000
        budget was called not limiting, and $607,051 buys a plan of 16 GPUs, twice as fast.
        Only the time objective can gain from a larger budget."""
        step = [(self.relaxation_in(s), self.relax(s))]
        if plan is None or s.objective != "time":
            return step
        more = resized(s, plan, 1)
        if more is None or more.cost_usd * (1 + STEP_ROOM) <= s.budget * 1.1:
            return step
        budget = float(math.ceil(more.cost_usd * (1 + STEP_ROOM)))
        gpus = more.evaluation.layout.num_gpus
        more_usd = budget - s.budget
        words = f"budget +${more_usd:,.0f} (the plan's shape on {gpus:,} GPUs, the next size up)"
        return [(words, s.with_changes(budget_usd=budget))]

    def encode(self, ctx: BuildContext) -> None:
        s, on = ctx.scenario, ctx.enforce[self.name]
        if s.pricing != "cloud":
            ctx.md.add(ctx.cost_expr <= down(s.budget * 100 * ctx.per_cent)).only_enforce_if(on)
            return
        # a term with a minimum bills GPUs x the minimum at least (models.evaluate.billed_days):
        # within the budget on its own, whether or not max_gpus holds the GPU cap that
        # solvers.cloud_terms.term_scenario derives from it (--ignore max_gpus dropped the
        # cap, and a plan billed $2.05M passed a budget of $86K)
        per_gpu = ctx.min_gt_per_gpu
        for g in ctx.gpu_names:  # GPU-time units of each GPU type
            limit = down(s.budget * 100 / ctx.coef[g])
            if limit < ctx.hi(ctx.gt_of[g]):  # else the budget cannot bind
                ctx.md.add(ctx.gt_of[g] <= limit).only_enforce_if([on, ctx.gpu_lit[g]])
            if 0 < per_gpu and limit < per_gpu * ctx.hi(ctx.num_gpus):  # else it cannot bind
                ctx.md.add(per_gpu * ctx.num_gpus <= limit).only_enforce_if([on, ctx.gpu_lit[g]])
            if g in ctx.gpu_days:  # a block reserved in lengths: the whole GPU-days it pays
                most = gpu_days_within(s.budget, ctx.gpus[g].cloud_usd_per_gpu_hour)
                if most < ctx.hi(ctx.gpu_days[g]):  # else it cannot bind (int64 kept)
                    ctx.md.add(ctx.gpu_days[g] <= most).only_enforce_if([on, ctx.gpu_lit[g]])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.cost_cents <= s.budget * 100.0 * (1 + ADMITS_TOL)

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        cost = ev.extra["cost_usd"]
        if cost > s.budget * (1 + TOL):
            return violation(self.name, f"costs ${cost:,.0f}, budget ${s.budget:,.0f}")
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        return s.budget - plan.cost_usd, "USD", f"${plan.cost_usd:,.0f} of ${s.budget:,.0f}"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # the least budget is the cost optimum with the budget off, named rounded up to the
        # dollar it prints: the optimum's, not the nudged limit other_objective_fix verified
        # ($4,348,184 named where the optimum, $4,348,180, holds)
        # under TCO the figure is raised to what CP-SAT admits (admitted_dollars), and the
        # words say by how much
        # first from the cheapest plan itself (plan_figure), else past the nudges
        cheapest: list[float] = []

        def least(fixed: Scenario, optimum: float) -> float:
            return admitted(fixed, optimum, least_dollars(search, fixed, optimum))

        def admitted(fixed: Scenario, optimum: float, named: float) -> float:
            found = admitted_dollars(search, fixed, optimum, named)
            if found > named:
                cheapest.append(optimum)
            return found

        def first(optimum: float, plan: Plan) -> float | None:
            named = plan_figure(search, optimum, plan.config)
            return None if named is None else admitted(search.scenario, optimum, named)

        def words(x: float) -> str:
            if not cheapest:
                return _words(x)
            return f"{_words(x)} (the cheapest plan costs ${cheapest[0]:,.2f}; {TCO_ROUNDING})"

        return other_objective_fix(
            search, self, "cost", lambda plan: plan.cost_usd, words, least, first=first
        )


# the grid's margin over the budget (admits): float noise, well under a cent
ADMITS_TOL = 1e-12


def gpu_days_within(budget_usd: float, usd_per_gpu_hour: float) -> int:
    """The most whole GPU-days at ``usd_per_gpu_hour`` the budget admits, in the float
    arithmetic the grid search prices them in (models.rental.Rental.cost, then cents, within
    ADMITS_TOL): CP-SAT's bound on a plan billed in reservation lengths, so that both solvers
    admit the same plans to the GPU-day."""

    def fits(n: int) -> bool:
        return float(n) * HOURS_PER_DAY * usd_per_gpu_hour * 100.0 <= budget_usd * 100.0 * (
            1 + ADMITS_TOL
        )

    n = max(0, math.floor(budget_usd / (HOURS_PER_DAY * usd_per_gpu_hour)))
    while fits(n + 1):
        n += 1
    while n > 0 and not fits(n):
        n -= 1
    return n


def _words(x: float) -> str:
    return f"budget must be at least ${x:,.0f}"


def least_dollars(search: FixSearch, fixed: Scenario, optimum: float) -> float:
    """The least whole-dollar budget at or above the cost ``optimum`` that holds, ``fixed``
    being the question at the optimum nudged past the solver's rounding (other_objective_fix:
    it holds). The nudge, 1e-6 of the cost, is dollars ($4,348,184 was named where the
    optimum, $4,348,180, holds): the optimum rounded up is asked first, then the dollars up
    to the nudged budget, by bisection. Rounded up, so that the figure printed holds (less
    than the cost optimum cannot: nothing is cheaper)."""
    top = math.ceil(fixed.budget)
    guess = math.ceil(optimum - 1e-6)
    if guess >= top or search.ok(fixed.with_changes(budget_usd=float(guess))):
        return float(min(guess, top))
    found = bisect(lambda v: search.ok(fixed.with_changes(budget_usd=float(v))), guess, top, True)
    return float(top if found is None else found)


def plan_figure(search: FixSearch, optimum: float, cfg: Config) -> float | None:
    """least_dollars' figure found from the cheapest plan (``cfg``, its cost ``optimum``):
    the least whole dollar at which the model admits that plan (plan_dollars: each probe
    a few milliseconds), up to the last of other_objective_fix's nudges, when the question
    a dollar less is infeasible (nothing else is admitted there: the figure is the least
    that holds). None otherwise: the nudges and least_dollars' bisection find it.

    Each test of a budget a dollar short of what the model admits is a CP-SAT proof over
    every shape (about 0.6 s on the 405B questions): the seed-7 question of
    bench/explain_speed.py (Llama 3 405B on A100, TCO, failures x 1000), whose model admits
    its cheapest plan ($351,442,171.50) only from $351,473,793, 9e-5 above (its time unit
    coarsened to fit int64), asked 33 of them, 17 s of its 18; this asks one."""
    s = search.scenario
    guess = math.ceil(optimum - 1e-6)
    own = plan_dollars(search, s, cfg, guess, [math.ceil(optimum * (1 + n)) for n in NUDGES])
    if own is None:
        return None
    if own > guess and search.ok(s.with_changes(budget_usd=float(own - 1))):
        return None
    return float(own)


def plan_dollars(
    search: FixSearch, s: Scenario, cfg: Config, lo: int, tops: list[int]
) -> int | None:
    """The least whole dollar from ``lo`` up to the last of ``tops`` (ascending) at which
    the model admits the plan of ``cfg`` (search.admits, the question ``s`` otherwise):
    ``lo``, else bisection below the first of ``tops`` that admits it (monotone, as the
    budget's other searches take it). None when none admits it or a probe is undecided.
    A budget that admits the plan holds (search.ok)."""

    def admits(v: int) -> bool | None:
        return search.admits(s.with_changes(budget_usd=float(v)), cfg)

    at = admits(lo)
    if at is None or at:
        return None if at is None else lo
    for hi in (t for t in tops if t > lo):
        at = admits(hi)
        if at is None:
            return None
        if at:
            break
        lo = hi
    else:
        return None
    while hi - lo > 1:
        mid = (lo + hi) // 2
        at = admits(mid)
        if at is None:
            return None
        lo, hi = (lo, mid) if at else (mid, hi)
    return hi


# what a raised TCO budget figure says (admitted_dollars)
TCO_ROUNDING = "CP-SAT's TCO model rounds costs up by about 1e-6 and needs the rest"
# CP-SAT's TCO rounding: the relative margins over the cost optimum admitted_dollars asks,
# from the first (two factors of 2^-20 each: solvers/cpsat/cluster.py product_cents) by
# fours up to the last
TCO_MARGINS = (2.0**-19, 2.0**-17, 2.0**-15, 2.0**-13, 2.0**-11)


def admitted_dollars(search: FixSearch, fixed: Scenario, optimum: float, named: float) -> float:
    """The least whole-dollar budget at or above ``named`` that CP-SAT admits, the question
    otherwise ``fixed`` (``named`` itself outside TCO pricing, or when no margin up to
    TCO_MARGINS' last is admitted). The fix search verifies a figure with the float model
    (a witness plan, explain._feasible), but CP-SAT's TCO expression rounds up (power per
    GPU in 1/1024 W, GPU-time and rate coarsened by 2^-20: solvers/cpsat/cost.py) and the
    budget holds it with no tolerance, so a plan within ~1e-6 of the budget is refused: the
    TCO budget fix printed, $10,489,517, was infeasible under the default solver, which
    first admitted $10,489,530. Each figure asked is a CP-SAT solve of the question."""
    if fixed.pricing != "tco":
        return named

    def admits(v: float) -> bool:
        res = search.solve(fixed.with_changes(budget_usd=float(v)), search.cands)
        return res.status in ("optimal", "feasible")

    if admits(named):
        return named
    lo = named
    for margin in TCO_MARGINS:
        hi = float(math.ceil(optimum * (1 + margin)))
        if hi > lo and admits(hi):
            found = bisect(admits, lo, hi, True)
            return float(hi if found is None else found)
        lo = max(lo, hi)
    return named


FAMILY = Budget("budget", 90, "budget +10%", field="budget_usd")
