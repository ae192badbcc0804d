"""Nothing bought without a return (issue 31 item 3): the second phase both solvers apply
to the plans they return.

A fastest plan may buy hot spares or checkpoint storage (solvers/purchases.py) that save a
sliver of its time: the 405B $500M question bought $18.43M of storage for 0.016 days of
88.6 (1.8e-4 of the time). The time objective alone cannot refuse it. So, in two phases:
phase one minimises the time (CP-SAT or the exhaustive search, unchanged); phase two keeps
the plan's layout (shape, NICs, DP degree, micro-batches) and chooses its purchases again,
the fastest (then the cheapest) among those of which every step pays: each option against
the next cheaper level of the same option (2 spares per 100 against 1, 4 GB/s against 2)
must save more than ``PURCHASE_TOLERANCE`` of the plan's time. Buying nothing always
qualifies; when the phase-one purchases already pay, the plan is unchanged. 0.1% of the
time (about 2 hours on a 90-day run) is the agreement tolerance of the differential tests
(bench/agreement.py REL_TOL): far above the models' rounding, far below what a spare costs.

Both solvers call ``settle`` on their plans, so they apply the same rule to the same
phase-one optima (tests/test_purchases.py, tests/test_agreement_full.py). Phase two runs
only on the time objective: under the cost objective a purchase adds cost and is bought
only to meet the deadline or to save more energy than it costs. Only the purchases move
in phase two, not the layout: a cheaper layout within the tolerance is not searched
(README "Not yet done")."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from solvers.plan import Plan, build_plan
from solvers.purchases import decides_purchases
from solvers.scenario import PreparedQuestion, Scenario
from solvers.tie_rule import plan_order

PURCHASE_TOLERANCE = 1e-3  # a purchase step must save more than this share of the time


def _days(plan: Plan) -> float:
    return float(plan.evaluation.time_to_train_days or float("inf"))


def _prepared_for(
    scenario: Scenario, gpu: str, prepared: PreparedQuestion | None
) -> PreparedQuestion:
    """``prepared`` (else the scenario's) when it holds ``gpu``; a plan on a GPU type the
    question does not offer (one evaluated from elsewhere) gets that type's own."""
    q = prepared if prepared is not None else scenario.prepare()
    if gpu in q.decides_purchases:
        return q
    return scenario.with_changes(gpus=(gpu,)).prepare()


def _options(q: PreparedQuestion, gpu: str) -> tuple[tuple[float, ...], tuple[float, ...]]:
    return q.spare_options[gpu], q.storage_options[gpu]


def _lower(levels: Sequence[float], level: float) -> float | None:
    """The next cheaper level of an option list (None: the cheapest)."""
    below = [v for v in levels if v < level]
    return max(below) if below else None


def _with(
    scenario: Scenario, q: PreparedQuestion, plan: Plan, spares: float, storage: float
) -> Plan:
    if (spares, storage) == _own(scenario, plan):
        return plan
    return build_plan(
        scenario, replace(plan.config, spares_per_100=spares, storage_gb_per_s=storage), q
    )


def _own(scenario: Scenario, plan: Plan) -> tuple[float, float]:
    base = scenario.catalog.facility.checkpoint_storage_gb_per_s_per_server
    return plan.config.spares_per_100, plan.config.storage_gb_per_s or base


def _idle_steps(
    scenario: Scenario, q: PreparedQuestion, plan: Plan, days_of
) -> list[tuple[str, float]]:
    """The plan's purchase steps (each option against the next cheaper level of the same
    option) that save no more than PURCHASE_TOLERANCE of its time, with the days saved."""
    spares, storages = _options(q, plan.config.shape.gpu)
    k, b = _own(scenario, plan)
    days = days_of(k, b)
    idle = []
    k_low, b_low = _lower(spares, k), _lower(storages, b)
    if k_low is not None:
        saved = days_of(k_low, b) - days
        if saved <= PURCHASE_TOLERANCE * days:
            idle.append((f"{k:g} spares per 100 (against {k_low:g})", saved))
    if b_low is not None:
        saved = days_of(k, b_low) - days
        if saved <= PURCHASE_TOLERANCE * days:
            idle.append((f"{b:g} GB/s storage (against {b_low:g})", saved))
    return idle


def purchases_that_pay(
    scenario: Scenario, plan: Plan, prepared: PreparedQuestion | None = None
) -> Plan:
    """The plan's layout with the fastest purchases of which every step pays (then the
    cheapest): the plan itself when it buys nothing idle or the question decides nothing.
    ``prepared``: ``scenario.prepare()``, when the caller has it."""
    gpu = plan.config.shape.gpu
    if scenario.objective != "time":
        return plan
    q = _prepared_for(scenario, gpu, prepared)
    if not q.decides_purchases[gpu]:
        return plan
    spares, storages = _options(q, gpu)
    plans = {(k, b): _with(scenario, q, plan, k, b) for k in spares for b in storages}

    def days_of(k: float, b: float) -> float:
        return _days(plans[(k, b)])

    if not _idle_steps(scenario, q, plan, days_of):
        return plan
    paying = [
        (days_of(k, b), p.cost_usd, k, b)
        for (k, b), p in plans.items()
        if p.feasible and not _idle_steps(scenario, q, p, days_of)
    ]
    return plans[min(paying)[2:]] if paying else plan


def settle(
    scenario: Scenario, plans: list[Plan], prepared: PreparedQuestion | None = None
) -> list[Plan]:
    """Every plan with its purchases that pay (purchases_that_pay), best first by optimize's
    tie rule (solvers.tie_rule: the objective, then the other one, then fewer GPUs), so
    both solvers' --top lists order equal plans alike. ``prepared``: ``scenario.prepare()``,
    when the caller has it (once per solve)."""
    if not plans:
        return plans
    q = prepared if prepared is not None else scenario.prepare()
    settled = [purchases_that_pay(scenario, p, q) for p in plans]
    ordered = sorted(settled, key=lambda p: plan_order(p, scenario.objective))
    return plans if all(a is b for a, b in zip(ordered, plans, strict=True)) else ordered


def idle_purchases(scenario: Scenario, plan: Plan) -> list[tuple[str, float]]:
    """The plan's purchase steps that save no more than PURCHASE_TOLERANCE of its time, each
    as (what, days saved against the next cheaper level): empty when every purchase pays,
    and for the cost objective (a purchase there pays in cost or meets the deadline)."""
    if scenario.objective != "time" or not decides_purchases(scenario, plan.config.shape.gpu):
        return []
    q = _prepared_for(scenario, plan.config.shape.gpu, None)
    cache: dict[tuple[float, float], float] = {}

    def days_of(k: float, b: float) -> float:
        if (k, b) not in cache:
            cache[(k, b)] = _days(_with(scenario, q, plan, k, b))
        return cache[(k, b)]

    return _idle_steps(scenario, q, plan, days_of)
