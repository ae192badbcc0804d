"""`designer breakeven`: the price at which one GPU type starts to win the job against another.

Bisection on the candidate GPU's price (purchase price under capex pricing, hourly
price under cloud pricing): the best plan on it can only improve as its price falls,
so the largest price at which it is at least as good as the best plan on the rival is
found to ``rel`` precision (README "designer breakeven"). "At least as good" is optimize's
tie rule (solvers/tie_rule.py): a plan as fast as the rival's wins only when it is no
dearer (as cheap as the rival's, by a deadline: no slower), as optimize with both GPU types
would pick it. Without a rival plan, the price is where the candidate stops answering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from designer.errors import Infeasible, UsageError
from designer.pricing import gpu_price, with_prices
from designer.question.build import scenario_from_options
from solvers import Scenario, SolveResult, solve_cpsat
from solvers.tie_rule import ranks_first


def _priced(scenario: Scenario, gpu: str, price: float) -> Scenario:
    return with_prices(scenario, {gpu: price}, {}).with_changes(gpus=(gpu,))


def catalog_price(scenario: Scenario, gpu: str) -> float:
    return gpu_price(scenario, gpu)


@dataclass
class Breakeven:
    gpu: str
    against: str
    catalog_price: float
    price: float | None  # None: never wins in the searched range
    wins_at_catalog_price: bool
    rival: SolveResult
    at_price: SolveResult | None  # the candidate's best plan at the break-even price
    searched: tuple[float, float]
    # when it never wins: its best plan at the bottom of the searched range (None: not run)
    lowest: SolveResult | None = None


def breakeven(
    scenario: Scenario, gpu: str, against: str, rel: float = 1e-3, time_limit_s: float = 60.0
) -> Breakeven:
    rival = solve_cpsat(scenario.with_changes(gpus=(against,)), time_limit_s=time_limit_s)
    base = catalog_price(scenario, gpu)

    def solve_at(price: float) -> SolveResult:
        return solve_cpsat(_priced(scenario, gpu, price), time_limit_s=time_limit_s)

    def wins(res: SolveResult) -> bool:  # optimize's pick between the two, ties included
        if res.best is None:
            return False
        return rival.best is None or ranks_first(res.best, rival.best, scenario.objective)

    at_base = solve_at(base)
    lo, hi = base / 1000.0, base * 1000.0
    if wins(at_base):  # search upward: the highest price at which it still wins
        good, good_res, bad = base, at_base, hi
        top = solve_at(hi)
        if wins(top):
            return Breakeven(gpu, against, base, hi, True, rival, top, (lo, hi))
    else:  # search downward
        bottom = solve_at(lo)
        if not wins(bottom):
            if rival.best is None and bottom.best is None:  # no answer to compare
                raise Infeasible(
                    f"neither {gpu} (even at 1/1000 of its price) nor {against} has a plan "
                    "for this question; relax it (designer optimize explains the conflict)"
                )
            return Breakeven(gpu, against, base, None, False, rival, None, (lo, hi), bottom)
        good, good_res, bad = lo, bottom, base
    while bad - good > rel * good:
        mid = (good + bad) / 2
        res = solve_at(mid)
        if wins(res):
            good, good_res = mid, res
        else:
            bad = mid
    return Breakeven(gpu, against, base, good, bool(wins(at_base)), rival, good_res, (lo, hi))


def breakeven_question(question: dict[str, Any], against: str) -> tuple[Scenario, str]:
    """The question's Scenario over the candidate (its one --gpu) and the rival, and the
    candidate's name; click's parameters in (designer.question.fields)."""
    gpus = tuple(question.get("gpus") or ())
    if len(gpus) != 1:
        raise UsageError(
            "give exactly one GPU type to price (and the rival with --against)", "--gpu"
        )
    if against == gpus[0]:
        raise UsageError("pick a GPU type other than --gpu", "--against")
    try:
        return scenario_from_options({**question, "gpus": (gpus[0], against)}), gpus[0]
    except UsageError as err:
        # the names are checked in order, --gpu's first: an unknown rival is --against's.
        # The message opens with the unknown name (catalog.names.unknown_name); the rival may
        # also be among its suggestions (--gpu h100 --against h100-sxm), which is --gpu's
        if err.option == "--gpu" and err.detail.startswith(f"unknown GPU {against!r};"):
            raise err.renamed("--against") from None
        raise
