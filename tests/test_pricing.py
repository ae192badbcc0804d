"""designer/pricing.py: the price a question pays for a GPU (the purchase price under capex
and TCO, the hourly price under cloud) and a question with changed GPU and NIC prices."""

from __future__ import annotations

import pytest

from designer.pricing import gpu_price, price_field, price_unit, with_prices
from helpers import prime_scenario


@pytest.mark.parametrize(
    "pricing,field,unit",
    [
        ("capex", "price_usd", "per GPU"),
        ("tco", "price_usd", "per GPU"),
        ("cloud", "cloud_usd_per_gpu_hour", "per GPU-hour"),
    ],
)
def test_the_field_and_unit_follow_the_pricing(cat, pricing, field, unit):
    assert (price_field(pricing), price_unit(pricing)) == (field, unit)
    s = prime_scenario(cat).with_changes(pricing=pricing)
    assert gpu_price(s, "h100-sxm") == getattr(cat.gpu("h100-sxm"), field)


@pytest.mark.parametrize("pricing", ["capex", "cloud"])
def test_with_prices_changes_only_the_named_prices(cat, pricing):
    s = prime_scenario(cat).with_changes(pricing=pricing)
    changed = with_prices(s, {"h100-sxm": 1234.5}, {"cx7-400g": 99.0})
    assert gpu_price(changed, "h100-sxm") == 1234.5
    assert changed.catalog.nic("cx7-400g").price_usd == 99.0
    assert gpu_price(changed, "h200") == gpu_price(s, "h200")  # others unchanged
    other = "cloud_usd_per_gpu_hour" if pricing == "capex" else "price_usd"
    assert getattr(changed.catalog.gpu("h100-sxm"), other) == getattr(cat.gpu("h100-sxm"), other)
    assert gpu_price(s, "h100-sxm") == getattr(cat.gpu("h100-sxm"), price_field(pricing))
    assert changed.catalog is not s.catalog and s.catalog is cat  # the question's own copy


def test_a_cheaper_gpu_makes_a_cheaper_plan(cat):
    from solvers.exhaustive import solve_exhaustive

    s = prime_scenario(cat).with_changes(objective="cost")
    half = with_prices(s, {"h100-sxm": cat.gpu("h100-sxm").price_usd / 2}, {})
    assert solve_exhaustive(half).plans[0].cost_usd < solve_exhaustive(s).plans[0].cost_usd
