"""`designer breakeven`'s JSON object, text and CSV."""

from __future__ import annotations

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
    }


def breakeven_csv(scenario, be) -> str:
    """The two plans: the candidate at the break-even price, then the rival."""
    plans = [(r.best, r.status_text) for _, r in _sides(be) if r is not None and r.best]
    return report.plans_csv(plans, None, scenario)


def breakeven_text(scenario, be) -> str:
    unit = price_unit(scenario.pricing)
    if be.price is None:
        return (
            f"{be.gpu} does not win against {be.against} even at 1/1000 of its price "
            f"({render.usd(be.catalog_price)} {unit})."
        )
    if be.price >= be.searched[1]:
        lead = (
            f"{be.gpu} wins the job against {be.against} even at 1,000 times its price "
            f"({_money(scenario, be.price)} {unit}; catalog {_money(scenario, be.catalog_price)}): "
            "its price does not limit its plan."
        )
    else:
        change = 100 * (be.price / be.catalog_price - 1)
        lead = (
            f"{be.gpu} wins the job against {be.against} at or below "
            f"{_money(scenario, be.price)} {unit} (catalog {_money(scenario, be.catalog_price)}, "
            f"{change:+.1f}%)."
        )
    block = block_rate(scenario, be)
    if block is not None:
        lead += (
            f" On demand it rents its catalog block at the block's own price, which moves "
            f"with it: {_money(scenario, block)} {unit} at that price."
        )
    lines = [lead]
    for label, res in _sides(be):
        if res is not None and res.best is not None:
            ev = res.best.evaluation
            evid = report.plan_evidence(scenario, res.best)
            days = report.with_range(float(ev.time_to_train_days or 0), evid["days_range"], ".1f")
            lines.append(
                f"  {label}: {ev.layout.num_gpus:,} GPUs, {days} days, "
                f"{render.usd(res.best.cost_usd)}; {evid['line']}"
            )
    return "\n".join(lines)
