"""designer/report/catalog.py: the catalog entries a report's plans use (GPU, NIC, switch,
then the facility), each with the fields a buyer checks (prices, sources, dates, power),
nested ones too and the performance-model profiles left out."""

from __future__ import annotations

from designer.report.catalog import catalog_entries, flat_fields
from helpers import prime_scenario
from solvers.exhaustive import solve_exhaustive


def test_flat_fields_keeps_prices_sources_dates_and_power_nested_too():
    d = {
        "name": "x",
        "price_usd": 30000,
        "price_source": "a quote",
        "price_date": "2025-01",
        "tdp_w": 700,
        "host_power_w": 1500,
        "memory_gb": 80,
        "server": {"overhead_usd": 100000, "gpus_per_server": 8, "deep": {"usd_per_kwh": 0.1}},
        "calibration": {"price_usd": 1},  # a profile: left out
        "stacks": {"x": {"power": 1}},
        "measured": {"price_usd": 2},
        "cloud_usd_per_gpu_hour": None,  # unset: left out
    }
    assert flat_fields(d) == [
        ("price_usd", 30000),
        ("price_source", "a quote"),
        ("price_date", "2025-01"),
        ("host_power_w", 1500),
        ("server.overhead_usd", 100000),
        ("server.deep.usd_per_kwh", 0.1),
    ]


def test_the_entries_are_the_plans_hardware_gpus_first_then_the_facility(cat):
    s = prime_scenario(cat).with_changes(gpus=("h100-sxm", "h200"), budget_usd=1e7)
    plans = solve_exhaustive(s, top_k=4).plans
    entries = catalog_entries(cat, plans)
    kinds = [e["kind"] for e in entries]
    assert kinds == sorted(kinds, key=["GPU", "NIC", "switch", "facility"].index)
    assert kinds[-1] == "facility" and kinds.count("facility") == 1
    gpus = {e["name"] for e in entries if e["kind"] == "GPU"}
    assert gpus == {p.evaluation.gpu for p in plans}
    assert {e["name"] for e in entries if e["kind"] == "NIC"} == {p.evaluation.nic for p in plans}
    for e in entries:
        assert e["title"] and e["fields"]  # every entry has a price, source or power field
    h100 = next(e for e in entries if e["name"] == "h100-sxm") if "h100-sxm" in gpus else None
    if h100 is not None:
        assert h100["title"] == cat.gpu("h100-sxm").display_name
        assert ("price_usd", cat.gpu("h100-sxm").price_usd) in h100["fields"]
    assert catalog_entries(cat, [])[0]["kind"] == "facility"  # no plan: the facility alone
