"""Rentable cloud plans (issue 31 item 2): a rented cluster is one block a provider rents
(catalog/cloud.py: the largest per GPU type, or ``--cloud-max-gpus``), paid under a term
(on-demand, 1- or 3-year reserved) as models/rental.py prices it: the term's rate (on
demand, a catalog block with a published price of its own is paid at that price, whatever
size of block --cloud-max-gpus names) for the billed days (at least the term's minimum; on
demand, a block its provider reserves in whole lengths is paid for the next length at or
above the job's days, and cannot be rented past its longest).

Both solvers answer a question with terms (``Scenario.cloud_terms``) the same way: one
solve per term, each an ordinary cloud question at the term's price with the block as a
per-type GPU cap and the term's billing per type (Scenario.cloud_billing); under a budget
(the time objective), the term's minimum also caps the GPUs of each type: price x 24 x
minimum days x GPUs <= budget, so that a job shorter than the minimum is paid in full
within the budget. Every plan is billed as models/rental.py says (solvers.plan.cost_usd,
the grid search, and CP-SAT's cost, budget and objective: solvers/cpsat/cost.py
billed_gpu_time and billed_gpu_days), and the terms' plans merged: the fastest (then the
cheapest) under the time objective, the cheapest (then the fastest) under the cost
objective (cheapest by a deadline), where a term's cheapest plan that pays for more days
than it runs (the term's minimum, or a reservation length) is replaced by the fastest plan
that costs no more, which costs the same (_fastest_at_its_cost)."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from typing import Any

from catalog.cloud import CloudTerm, cloud_offers
from models.rental import Rental, rental, rental_words
from models.rental import block_price_scale as _scale
from solvers.result import SolveResult, merged_gap
from solvers.scenario import Scenario
from solvers.tie_rule import plan_order


def applies(scenario: Scenario) -> bool:
    """Whether the question rents under terms not yet fixed (the caller splits it)."""
    return scenario.pricing == "cloud" and scenario.cloud_terms and scenario.cloud_term is None


def block_gpus(scenario: Scenario, gpu: str) -> int:
    """The largest rentable block of ``gpu``: --cloud-max-gpus, or the catalog's."""
    return cloud_offers().rentable_gpus(gpu, scenario.cloud_max_gpus)


def terms(scenario: Scenario) -> tuple[CloudTerm, ...]:
    """The terms the question may rent under, less those another bills more cheaply for
    every plan the question allows (_dominates): within 300 days, a year's reservation
    bills any plan less than three years' (70% for at least 365 days against 50% for at
    least 1,095), so the three-year term is not solved."""
    kept: list[CloudTerm] = []
    for term in cloud_offers().terms:
        if any(_dominates(scenario, k, term) for k in kept):
            continue
        kept = [k for k in kept if not _dominates(scenario, term, k)] + [term]
    return tuple(t for t in cloud_offers().terms if t in kept)


def _dominates(scenario: Scenario, a: CloudTerm, b: CloudTerm) -> bool:
    """Whether term ``a`` bills every plan of every GPU type of the question at most what
    ``b`` does, for every job of up to the deadline's days ``b`` can rent (_bills_no_more).
    Then ``a`` also caps the GPUs no lower under a budget (term_scenario: the check at
    d = 0), and every plan ``b`` admits costs no more under ``a``: ``b`` cannot give a
    better answer under either objective."""
    return all(
        _bills_no_more(_rental(scenario, g, a), _rental(scenario, g, b), scenario.deadline_days)
        for g in scenario.gpus
    )


def _bills_no_more(a: Rental, b: Rental, horizon: float | None) -> bool:
    """Whether ``a`` bills every job ``b`` rents of up to ``horizon`` days (None: any) at
    most what ``b`` does. ``b`` bills a job of d days at least rate x max(d, its minimum);
    ``a`` by use bills rate x max(d, its minimum), piecewise linear in d (checked at its
    breaks and the horizon, and by the slopes without one), and in reservation lengths
    the next length L for every job past the length P before it (checked against ``b``'s
    least bill past P). ``a`` cannot dominate where it cannot rent a job ``b`` can."""
    ba, bb = a.billing, b.billing
    top = horizon if bb.max_days is None else min(horizon or math.inf, bb.max_days)
    top = None if top is None or math.isinf(top) else top
    if ba.max_days is not None and (top is None or top > ba.max_days):
        return False

    def b_least(d: float) -> float:
        return b.usd_per_gpu_hour * max(d, bb.min_days)

    if ba.steps:
        if top is None:
            return False  # lengths without end: not checked (b is solved too)
        lengths = ba.lengths_to(top)
        return all(
            a.usd_per_gpu_hour * length <= b_least(before)
            for before, length in zip([0.0, *lengths], lengths, strict=False)
        )
    if top is None and a.usd_per_gpu_hour > b.usd_per_gpu_hour:  # the longest jobs: slopes
        return False
    days = [d for d in (0.0, ba.min_days, bb.min_days) if top is None or d <= top]
    days += [] if top is None else [top]
    return all(a.usd_per_gpu_hour * ba.billed_days(d) <= b_least(d) for d in days)


def _rental(scenario: Scenario, gpu: str, term: CloudTerm) -> Rental:
    """``gpu`` rented under ``term`` at the question's price of it (models/rental.py)."""
    return rental(scenario.catalog.gpu(gpu), term)


def term_rate(scenario: Scenario, gpu: str, term: CloudTerm) -> float:
    """USD per GPU-hour of ``gpu`` under ``term`` (models.rental.rental: price_factor x the
    catalog's on-demand price, except on demand from a catalog block with a published price
    of its own, AWS's Capacity Blocks, which is paid at that price whatever block size
    --cloud-max-gpus names)."""
    return _rental(scenario, gpu, term).usd_per_gpu_hour


def block_price_scale(scenario: Scenario, gpu: str) -> float:
    """The question's on-demand price of ``gpu`` over the shipped catalog's
    (models.rental.block_price_scale): a block's own price moves with it."""
    return _scale(scenario.catalog.gpu(gpu))


def _enforced_budget(scenario: Scenario) -> float | None:
    """The question's budget, None when it has none or it is switched off (--ignore budget,
    an explanation's relaxation): a budget switched off caps nothing."""
    return None if "budget" in scenario.disabled else scenario.budget_usd


def term_scenario(scenario: Scenario, term: CloudTerm) -> Scenario:
    """The question at ``term``'s price, each GPU type capped by its block and, under an
    enforced budget, by the GPUs whose minimum term the budget pays."""
    cat = scenario.catalog
    gpus = dict(cat.gpus)
    caps = dict(scenario.gpu_caps)
    budget = _enforced_budget(scenario)
    billing = []
    for name in scenario.gpus:
        rented = _rental(scenario, name, term)
        rate = rented.usd_per_gpu_hour
        gpus[name] = gpus[name].model_copy(update={"cloud_usd_per_gpu_hour": rate})
        billing.append((name, rented.billing))
        # the question's cap where it has one (designer.question.build caps a rented type at
        # its block, and a relaxation may scale that cap), else the block
        cap = caps.get(name, block_gpus(scenario, name))
        if budget is not None and term.min_days > 0:
            cap = min(cap, math.floor(budget / (rate * 24.0 * term.min_days)))
        caps[name] = cap
    return scenario.with_changes(
        catalog=dataclasses.replace(cat, gpus=gpus),
        gpu_caps=tuple(sorted(caps.items())),
        cloud_term=term.name,
        cloud_min_days=term.min_days,
        cloud_billing=tuple(billing),
    )


def _with_term(plan: Any, term: CloudTerm) -> Any:
    """The plan with its term named in its extras; its cost is already billed for
    max(days, the term's minimum) (solvers.plan.cost_usd reads Scenario.cloud_min_days of
    the term's question), and so is its objective under the cost objective."""
    ev = plan.evaluation
    extra = {**ev.extra, "cloud_term": term.name}
    return dataclasses.replace(plan, evaluation=dataclasses.replace(ev, extra=extra))


def billed_plan(scenario: Scenario, config: Any, term_name: str) -> Any:
    """``config`` rented under the term named ``term_name``, priced and billed as
    solve_by_term prices and bills its plans (a saved plan given back: the term it chose)."""
    # lazy: solvers.plan loads numpy and the performance model; the CLI's renderers import
    # this module at start-up (rental_sentence)
    from solvers.plan import build_plan

    term = cloud_offers().term(term_name)
    return _with_term(build_plan(term_scenario(scenario, term), config), term)


def _days(plan: Any) -> float:
    return float(plan.evaluation.time_to_train_days or 0.0)


def _fastest_at_its_cost(
    solve: Callable[..., SolveResult], fixed: Scenario, res: SolveResult, kwargs: dict[str, Any]
) -> SolveResult:
    """Under the cost objective, a term whose cheapest plan pays for more days than it runs
    (the term's minimum, or the block's next reservation length: models/rental.py) ties
    with every plan that pays as many GPU-days: the fastest plan of its GPU type costing no
    more (the time objective within that budget, the deadline kept) costs the same, so it
    is the answer, as the tie rule (cheapest, then fastest) has it. Either solver's own pick
    among the ties took days longer (223.1 against 222.3 for Llama-2-13B on 8 H100 reserved
    a year); billed in whole days, 16 GPUs for one day tie with 8 for two."""
    best = res.best
    if fixed.objective != "cost" or best is None:
        return res
    gpu, days = best.evaluation.gpu, _days(best)
    if not fixed.billing(gpu).billed_days(days) > days * (1 + 1e-9):
        return res
    # lazy: solvers.plan loads numpy and the performance model (module import: the CLI's
    # renderers read rental_sentence at start-up)
    from solvers.plan import build_plan

    at_most = best.cost_usd * (1 + 1e-9)  # the float cost's ties (CP-SAT rounds its units)
    user = _enforced_budget(fixed)
    fastest_q = fixed.with_changes(
        objective="time",
        gpus=(gpu,),
        budget_usd=at_most if user is None else min(user, at_most),
        disabled=fixed.disabled - {"budget"},
    )
    space = kwargs.get("candidates")
    given = dict(
        kwargs, candidates=None if space is None else [c for c in space if c.shape.gpu == gpu]
    )
    fast = solve(fastest_q, top_k=1, **given)
    if fast.best is None:
        return res
    plan = build_plan(fixed, fast.best.config)  # priced and ranked as the cost question
    if not plan.feasible or plan.objective > best.objective * (1 + 1e-9):
        return res
    rest = [p for p in res.plans if p.config.shape != plan.config.shape]  # the other ties
    proved = res.status == "optimal" and fast.status == "optimal"
    return dataclasses.replace(res, plans=[plan, *rest], status="optimal" if proved else "feasible")


def _within_the_cheapest(scenario: Scenario, plans: list[Any], top_k: int) -> Scenario:
    """Under the cost objective, a term solved after another need only look at plans no
    dearer than the cheapest found so far (ties kept: 1e-6 above it): that bound, a budget,
    caps its GPUs by its minimum and its GPU-time, so a three-year term with no deadline
    or budget to bound it (the explanation's budget fix asks that) is solved in a second,
    not 36. Not for the top K > 1 plans, which may be dearer."""
    if scenario.objective != "cost" or top_k != 1 or not plans:
        return scenario
    cheapest = min(p.cost_usd for p in plans) * (1 + 1e-6)
    user = _enforced_budget(scenario)
    budget = cheapest if user is None else min(user, cheapest)
    return scenario.with_changes(budget_usd=budget, disabled=scenario.disabled - {"budget"})


def solve_by_term(
    solve: Callable[..., SolveResult], scenario: Scenario, top_k: int = 1, **kwargs: Any
) -> SolveResult:
    """Solve the question once per term and merge the plans (module docstring)."""
    start = time.perf_counter()
    results: list[SolveResult] = []
    plans: list[Any] = []
    for term in terms(scenario):
        fixed = term_scenario(_within_the_cheapest(scenario, plans, top_k), term)
        res = _fastest_at_its_cost(solve, fixed, solve(fixed, top_k=top_k, **kwargs), kwargs)
        results.append(res)
        plans.extend(_with_term(p, term) for p in res.plans)
    plans.sort(key=lambda p: plan_order(p, scenario.objective))  # (solvers/tie_rule.py)
    kept, shapes = [], set()
    for plan in plans:
        if plan.config.shape not in shapes:
            shapes.add(plan.config.shape)
            kept.append(plan)
    found = [r for r in results if r.plans]
    best = float(kept[0].objective) if kept else math.inf
    if found:
        proved = all(r.status in ("optimal", "infeasible") for r in results)
        status = "optimal" if proved else "feasible"
    else:
        status = "unknown" if any(r.status == "unknown" for r in results) else "infeasible"
    return dataclasses.replace(
        results[0],
        status=status,
        wall_s=time.perf_counter() - start,
        gap=None if not found else 0.0 if status == "optimal" else merged_gap(results, best),
        plans=kept[:top_k],
        bound=None,  # (the first term's, not the merged question's)
    )


def rental_sentence(scenario: Scenario, plan: Any) -> str:
    """What a rented plan rents, at what rate, and for how many days it pays, as
    models/rental.py bills it ("" when not rented under terms); a plan reserved for longer
    than its block rents on demand says so (AWS: at most 182 days)."""
    term = plan.evaluation.extra.get("cloud_term")
    if term is None:
        return ""
    spec = cloud_offers().term(term)
    gpu = plan.evaluation.gpu
    block = block_gpus(scenario, gpu)
    origin = (
        "--cloud-max-gpus"
        if scenario.cloud_max_gpus is not None
        else cloud_offers().block_label(gpu)
    )
    rented = _rental(scenario, gpu, spec)
    days = _days(plan)
    price = (
        "the block's own price"
        if rented.block_price
        else f"{spec.price_factor:.0%} of the on-demand price"
    )
    text = (
        f"Rented {term} at {price} (${rented.usd_per_gpu_hour:,.3f} per GPU-hour), "
        f"{rental_words(rented, days)}; {plan.num_gpus:,} of the largest rentable block of "
        f"{block:,} {gpu} ({origin})."
    )
    on_demand = next(t for t in cloud_offers().terms if t.min_days <= 0)
    longest = _rental(scenario, gpu, on_demand).billing.max_days
    if spec.min_days > 0 and longest is not None and days > longest:
        text += f" On demand the block is reserved for at most {longest:,.0f} days."
    return text
