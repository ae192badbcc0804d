"""designer/report/tables.py: the report's tables cell by cell (its text as the CLI writes
it, and the value the workbook stores): a plan's row in its headers' order, a binding
constraint, a BOM line and the cluster's facts, the break-even price, a flattened question."""

from __future__ import annotations

import pytest

from designer.report.data import ReportData
from designer.report.tables import (
    BOM_HEADERS,
    BREAKEVEN_HEADERS,
    binding_headers,
    binding_row,
    bom_facts,
    bom_row,
    breakeven_row,
    flat,
    plan_headers,
    plan_row,
)

PLAN = {
    "rank": 1,
    "gpu": "h100-sxm",
    "num_gpus": 1024,
    "nodes": 128,
    "nics_per_node": 8,
    "nic": "cx7-400g",
    "tp": 8,
    "pp": 4,
    "dp": 32,
    "cp": 1,
    "vp": 1,
    "micro_batch": 1,
    "grad_accum": 16,
    "recompute": "selective",
    "memory_gb_per_gpu": 61.234,
    "step_time_s": 5.678,
    "time_to_train_days": 30.25,
    "cost_usd": 2.5e7,
    "mfu": 0.4321,
}


def _data(kind: str) -> ReportData:
    return ReportData(kind, "a.json", "t", "r", study={"axes": ["budget"]})


@pytest.mark.parametrize("kind", ["answer", "compare", "study"])
def test_a_plans_row_has_a_cell_per_header(kind):
    data = _data(kind)
    row = plan_row(data, {**PLAN, "status": "optimal", "budget": "30M", "top_binding": "budget"})
    assert len(row) == len(plan_headers(data))
    cells = dict(zip(plan_headers(data), row, strict=True))
    assert cells["gpus"] == ("1,024", 1024)
    assert cells["tp/pp/dp/cp/vp"] == ("8/4/32/1/1", "8/4/32/1/1")
    assert cells["micro-batch x accum"][0] == "1 x 16"
    assert cells["memory GB/GPU"] == ("61.2", 61.234)
    assert cells["days"] == ("30.2", 30.25)  # 30.25 to one decimal, half to even
    assert cells["cost USD"] == ("$25.00M", 2.5e7)
    assert cells["MFU"] == ("43.2%", 0.4321)
    assert cells["days range"] == ("-", None) and cells["evidence"] == ("-", None)
    if kind == "compare":
        assert cells["status"] == ("optimal", "optimal") and cells["top binding"][0] == "budget"
    if kind == "study":
        assert cells["axes"] == ("budget 30M", "budget 30M")


def test_a_compare_row_without_a_plan_is_dashes():
    data = _data("compare")
    row = plan_row(data, {"gpu": "l4", "status": "infeasible", "num_gpus": None})
    assert len(row) == len(plan_headers(data))
    assert row[3:-1] == [("-", None)] * 15


@pytest.mark.parametrize(
    "b,state,gain",
    [
        (
            {
                "constraint": "budget",
                "binding": True,
                "improvement_if_relaxed": 2.5,
                "improvement_pct": 8.33,
            },
            "yes",
            ("2.5", "8.3%"),
        ),
        ({"constraint": "memory", "binding": False}, "no", ("-", "-")),
        ({"constraint": "power", "binding": False, "decided": False}, "unproved", ("-", "-")),
    ],
)
def test_a_binding_row_says_yes_no_or_unproved(b, state, gain):
    row = binding_row(b)
    assert len(row) == len(binding_headers("days"))
    assert row[1] == (state, state) and (row[4][0], row[5][0]) == gain


def test_bom_rows_and_facts():
    line = {"item": "GPU h100-sxm", "quantity": 1024, "unit_usd": 30000.0, "extended_usd": 3.072e7}
    row = bom_row(line)
    assert len(row) == len(BOM_HEADERS)
    assert [c[0] for c in row] == ["GPU h100-sxm", "1,024", "$30,000.00", "$30,720,000.00", ""]
    facts = bom_facts(
        {"lines": [], "total_usd": 1.0, "it_kw": 1234.4, "racks": 32, "fabric_tiers": 2, "x": None}
    )
    assert facts == ["IT power 1,234 kW", "32 racks", "2-tier fabric"]


def test_the_breakeven_row_says_the_change_or_never():
    e = {"gpu": "h200", "against": "h100-sxm", "pricing": "capex", "catalog_price_usd": 40000.0}
    row = breakeven_row({**e, "breakeven_price_usd": 30000.0})
    assert len(row) == len(BREAKEVEN_HEADERS)
    assert [c[0] for c in row[3:]] == ["$40,000.00", "$30,000.00", "-25.0%"]
    assert [c[0] for c in breakeven_row({**e, "breakeven_price_usd": None})[4:]] == [
        "never wins",
        "-",
    ]


def test_flat_dots_nested_keys_and_joins_lists():
    q = {"model": "llama2-7b", "gpus": ["h100-sxm", "h200"], "caps": {"h100-sxm": 512}, "nics": []}
    assert flat(q) == [
        ("model", "llama2-7b"),
        ("gpus", "h100-sxm, h200"),
        ("caps.h100-sxm", 512),
        ("nics", "-"),
    ]
