"""designer/output/breakeven_doc.py: `designer breakeven`'s JSON object, text and CSV, on
break-even results built directly (two given plans, no solve, no CliRunner): the prices and
the change in percent, the unit under capex and cloud pricing, a candidate that never wins
(no plan at a price: null in the JSON, no CSV row, the sentence that says so), and the CSV
read back."""

from __future__ import annotations

import csv
import io

import pytest

from designer.breakeven import Breakeven
from designer.output.breakeven_doc import breakeven_csv, breakeven_dict, breakeven_text
from designer.pricing import gpu_price, with_prices
from designer.question.build import build_scenario, evaluate_config
from solvers import Config
from solvers.space import Shape

GPU, RIVAL = "h100-sxm", "h200"


def _question(pricing: str):
    return build_scenario(
        model="llama2-7b",
        tokens=2e10,
        gpus=(GPU, RIVAL),
        budget=5e6,
        pricing=pricing,
        max_batch_tokens=2**20,
        no_failures=True,
    )


def _result(scenario, gpu: str, dp: int):
    """A one-plan result: llama2-7b at TP 2 on ``gpu`` with ``dp`` replicas."""
    nic = scenario.nics_for(gpu)[0].name
    shape = Shape(gpu, 2, 1, 1, 1, 1, "selective", "bf16")
    return evaluate_config(scenario, Config(shape, nic, max(scenario.nic_counts(gpu)), dp, 16))


def _breakeven(pricing: str, factor: float | None) -> tuple:
    """(question, Breakeven): GPU wins at ``factor`` x its catalog price (None: never)."""
    s = _question(pricing)
    base = gpu_price(s, GPU)
    rival = _result(s.with_changes(gpus=(RIVAL,)), RIVAL, 8)
    if factor is None:
        return s, Breakeven(GPU, RIVAL, base, None, False, rival, None, (base / 1e3, base * 1e3))
    priced = with_prices(s, {GPU: base * factor}, {}).with_changes(gpus=(GPU,))
    at = _result(priced, GPU, 4)
    be = Breakeven(
        GPU, RIVAL, base, base * factor, factor >= 1, rival, at, (base / 1e3, base * 1e3)
    )
    return s, be


@pytest.fixture(scope="module")
def capex():
    return _breakeven("capex", 0.9)


def test_the_json_object(capex):
    s, be = capex
    doc = breakeven_dict(s, be)
    assert doc["gpu"] == GPU and doc["against"] == RIVAL and doc["pricing"] == "capex"
    assert doc["catalog_price_usd"] == be.catalog_price
    assert doc["breakeven_price_usd"] == pytest.approx(0.9 * be.catalog_price)
    assert doc["wins_at_catalog_price"] is False
    assert doc["objective"] == {"name": "time_to_train", "unit": "days"}
    ours, theirs = doc["plans"]["gpu"], doc["plans"]["against"]
    assert (ours["gpu"], ours["num_gpus"], ours["rank"]) == (GPU, 8, 1)  # TP 2 x DP 4
    assert (theirs["gpu"], theirs["num_gpus"]) == (RIVAL, 16)  # TP 2 x DP 8
    assert ours["cost_usd"] == pytest.approx(float(be.at_price.best.cost_usd))
    assert "evidence" in ours and ours["evidence"]["status"] in ("measured", "thin")


def test_the_text_gives_the_price_the_change_and_both_plans(capex):
    s, be = capex
    lines = breakeven_text(s, be).split("\n")
    price = be.price
    assert lines[0] == (
        f"{GPU} wins the job against {RIVAL} at or below ${price / 1e3:,.1f}K per GPU "
        f"(catalog ${be.catalog_price / 1e3:,.1f}K, -10.0%)."
    )
    assert lines[1].startswith(f"  {GPU} at that price: 8 GPUs, ")
    assert lines[2].startswith(f"  {RIVAL}: 16 GPUs, ")
    assert len(lines) == 3


def test_a_higher_break_even_is_a_positive_change():
    s, be = _breakeven("capex", 1.25)
    assert "+25.0%)." in breakeven_text(s, be).split("\n")[0]
    assert breakeven_dict(s, be)["wins_at_catalog_price"] is True


def test_cloud_prices_are_per_gpu_hour():
    s, be = _breakeven("cloud", 0.5)
    first = breakeven_text(s, be).split("\n")[0]
    assert "per GPU-hour" in first and "-50.0%)." in first
    assert breakeven_dict(s, be)["pricing"] == "cloud"


def test_a_candidate_that_never_wins():
    s, be = _breakeven("capex", None)
    lead, rival = breakeven_text(s, be).split("\n")
    assert lead == (
        f"{GPU} does not win the job against {RIVAL} even at 1/1000 of its catalog price "
        f"(${be.catalog_price / 1e3:,.1f}K per GPU)."
    )
    assert rival.startswith(f"  {RIVAL}: 16 GPUs, ")  # the rival's plan, as JSON has it
    doc = breakeven_dict(s, be)
    assert doc["breakeven_price_usd"] is None and doc["plans"]["gpu"] is None
    assert doc["plans"]["against"]["gpu"] == RIVAL
    rows = list(csv.DictReader(io.StringIO(breakeven_csv(s, be))))
    assert [r["gpu"] for r in rows] == [RIVAL]  # only the rival has a plan


def test_the_csv_has_the_candidate_then_the_rival(capex):
    s, be = capex
    rows = list(csv.DictReader(io.StringIO(breakeven_csv(s, be))))
    assert [r["gpu"] for r in rows] == [GPU, RIVAL]
    assert [int(r["num_gpus"]) for r in rows] == [8, 16]
    assert [r["rank"] for r in rows] == ["1", "2"]
    assert float(rows[0]["cost_usd"]) == pytest.approx(float(be.at_price.best.cost_usd), rel=1e-6)
    assert [r["status"] for r in rows] == [be.at_price.status_text, be.rival.status_text]
    assert rows[0]["status"] == "feasible (not proved; gap unknown)"  # a given plan's result
