"""The price a question pays for a GPU: its purchase price under capex (and TCO) pricing,
its hourly price under cloud pricing (one home for the choice; breakeven and a sweep's
price multipliers change that price)."""

from __future__ import annotations

import dataclasses

from solvers import Scenario


def price_field(pricing: str) -> str:
    """The GPU spec's field that ``pricing`` charges."""
    return "cloud_usd_per_gpu_hour" if pricing == "cloud" else "price_usd"


def price_unit(pricing: str) -> str:
    return "per GPU-hour" if pricing == "cloud" else "per GPU"


def gpu_price(scenario: Scenario, gpu: str) -> float:
    """The catalog price of ``gpu`` under the question's pricing."""
    return getattr(scenario.catalog.gpu(gpu), price_field(scenario.pricing))


def with_prices(scenario: Scenario, gpus: dict[str, float], nics: dict[str, float]) -> Scenario:
    """The question with these GPUs' prices (under its pricing) and NICs' prices set."""
    cat = scenario.catalog
    field = price_field(scenario.pricing)
    gpu_specs = dict(cat.gpus)
    for name, price in gpus.items():
        gpu_specs[name] = gpu_specs[name].model_copy(update={field: price})
    nic_specs = dict(cat.nics)
    for name, price in nics.items():
        nic_specs[name] = nic_specs[name].model_copy(update={"price_usd": price})
    return scenario.with_changes(catalog=dataclasses.replace(cat, gpus=gpu_specs, nics=nic_specs))
