"""`designer breakeven`'s JSON object, text and CSV."""

from __future__ import annotations

from typing import Any

from designer.output import formats as report
from designer.output import text as render
from designer.pricing import price_unit


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
    change = 100 * (be.price / be.catalog_price - 1)
    lines = [
        f"{be.gpu} wins the job against {be.against} at or below {render.usd(be.price)} {unit} "
        f"(catalog {render.usd(be.catalog_price)}, {change:+.1f}%)."
    ]
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
