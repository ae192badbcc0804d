"""`designer breakeven`'s JSON object, text and CSV."""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from catalog.cloud import cloud_offers
from designer.output import formats as report
from designer.output import text as render
from designer.pricing import price_unit, with_prices
from solvers import cloud_terms


def _money(scenario, v: float) -> str:
    """A price as the question's pricing quotes it: dollars and cents per GPU-hour when
    renting ($3.59 read "$4"), else as every other dollar figure."""
    return f"${v:,.2f}" if scenario.pricing == "cloud" else render.usd(v)


def block_rate(scenario, be) -> float | None:
    """The on-demand rate of the candidate's catalog block at the break-even price (its own
    published price moves with the GPU's price: solvers.cloud_terms.block_price_scale);
    None when not renting from a priced block."""
    if scenario.pricing != "cloud" or be.price is None or not cloud_terms.applies(scenario):
        return None
    on_demand = next(t for t in cloud_offers().terms if t.min_days == 0)  # every term there
    priced = with_prices(scenario, {be.gpu: be.price}, {})
    rate = cloud_terms.term_rate(priced, be.gpu, on_demand)
    return None if rate == priced.catalog.gpu(be.gpu).cloud_usd_per_gpu_hour else rate


def _sides(be) -> list[tuple[str, Any]]:
    """(label, result) of the candidate at the break-even price and of the rival."""
    return [(f"{be.gpu} at that price", be.at_price), (be.against, be.rival)]


def breakeven_dict(scenario, be) -> dict[str, Any]:
    def entry(res) -> dict[str, Any] | None:
        if res is None or res.best is None:
            return None
        return report.plan_entry(scenario, res.best, 1)

    return {
        "gpu": be.gpu,
        "against": be.against,
        "pricing": scenario.pricing,
        "catalog_price_usd": be.catalog_price,
        "breakeven_price_usd": be.price,
        "wins_at_catalog_price": be.wins_at_catalog_price,
        # it still wins at the top of the searched range: the price is that bound
        "wins_across_search": be.price is not None and be.price >= be.searched[1],
        "block_usd_per_gpu_hour": block_rate(scenario, be),
        "objective": {"name": be.rival.objective_name, "unit": be.rival.objective_unit},
        "plans": {"gpu": entry(be.at_price), "against": entry(be.rival)},
        # the rival's solve ("infeasible": the price is where the candidate stops answering)
        "against_status": be.rival.status,
        # never winning: the candidate's best plan at 1/1000 of its price (null: none)
        "lowest_price_plan": entry(be.lowest),
    }


def breakeven_csv(scenario, be) -> str:
    """The two plans: the candidate at the break-even price, then the rival."""
    plans = [(r.best, r.status_text) for _, r in _sides(be) if r is not None and r.best]
    return report.plans_csv(plans, None, scenario)


_USD_STEPS = ((1e9, 1e7), (1e6, 1e4), (1e3, 100.0))  # render.usd: from, the last digit shown


def _money_down(scenario, v: float) -> str:
    """``_money`` rounded down at the precision shown: an "at or below" price never reads
    above the price found ($30,373 reads "$30.3K", not "$30.4K")."""
    if scenario.pricing == "cloud":
        step = 0.01
    else:  # render.usd's precision: $1.23B, $1.23M, $30.3K, $999
        step = next((step for at, step in _USD_STEPS if v >= at), 1.0)
    return _money(scenario, math.floor(round(v / step, 6)) * step)


def _lead(scenario, be) -> str:
    """The first sentence: the price and what it means (module docstring of
    designer.breakeven: the rival may have no plan, the candidate may never win)."""
    unit, money = price_unit(scenario.pricing), partial(_money, scenario)
    catalog = f"catalog price ({money(be.catalog_price)} {unit})"
    if be.price is None:
        if be.lowest is not None and be.lowest.best is None:
            return (
                f"{be.gpu} has no plan for this question even at 1/1000 of its {catalog}, "
                f"so it never wins the job against {be.against}."
            )
        return (
            f"{be.gpu} does not win the job against {be.against} even at 1/1000 of its {catalog}."
        )
    none = be.rival.best is None
    wins = f"{be.gpu} wins the job against {be.against}"
    if none:  # the price is where the candidate stops answering the question
        why = "has no plan for this question"
        if be.rival.status != "infeasible":
            why = "found no plan within the time limit"
        wins = f"{be.against} {why}; {be.gpu} answers it"
    if be.price >= be.searched[1]:
        return (
            f"{wins} even at 1,000 times its price ({money(be.price)} {unit}; catalog "
            f"{money(be.catalog_price)}): its price does not limit its plan."
        )
    change = 100 * (be.price / be.catalog_price - 1)
    above = f"; above it {be.gpu} has no plan either" if none else ""
    return (
        f"{wins} at or below {_money_down(scenario, be.price)} {unit} (catalog "
        f"{money(be.catalog_price)}, {change:+.1f}%){above}."
    )


def _plan_line(scenario, label: str, res) -> str:
    """``  label: 128 GPUs, 6.6 (6.1-6.6) days, $5.00M; evidence``, or that it has none."""
    if res is None or res.best is None:
        return f"  {label}: no plan ({'not run' if res is None else res.status_text})"
    ev = res.best.evaluation
    evid = report.plan_evidence(scenario, res.best)
    days = report.with_range(float(ev.time_to_train_days or 0), evid["days_range"], ".1f")
    return (
        f"  {label}: {ev.layout.num_gpus:,} GPUs, {days} days, "
        f"{render.usd(res.best.cost_usd)}; {evid['line']}"
    )


def breakeven_text(scenario, be) -> str:
    lead = _lead(scenario, be)
    block = block_rate(scenario, be)
    if block is not None:
        lead += (
            f" On demand it rents its catalog block at the block's own price, which moves "
            f"with it: {_money(scenario, block)} {price_unit(scenario.pricing)} at that price."
        )
    lines = [lead]
    if be.price is not None:
        lines.append(_plan_line(scenario, f"{be.gpu} at that price", be.at_price))
    elif be.lowest is not None and be.lowest.best is not None:
        lines.append(_plan_line(scenario, f"{be.gpu} at 1/1000 of its price", be.lowest))
    lines.append(_plan_line(scenario, be.against, be.rival))
    return "\n".join(lines)
