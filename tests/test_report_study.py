"""designer/report/study.py: a sweep's results read for the report. CSV cells typed, the
study's axes, the Pareto front of time and cost, each scenario's winner across GPU types,
the budget curves, and the price multipliers each GPU type won and lost at."""

from __future__ import annotations

import json

from designer.report.study import (
    axes_of,
    budget_curves,
    pareto_front,
    price_points,
    price_wins,
    typed,
    winners,
)


def _row(gpu: str, days: float, cost: float, **more) -> dict:
    return {"gpu": gpu, "time_to_train_days": days, "cost_usd": cost, "label": gpu, **more}


def test_typed_turns_cells_into_numbers_flags_and_evidence():
    row = typed(
        {
            "scenario": "s1",
            "tp": "8",
            "dp": "16.0",
            "cost_usd": "1.5e6",
            "sequence_parallel": "True",
            "loss_in_split": "False",
            "nic": "",
            "evidence": "measured",
            "evidence_runs": "3",
            "days_lo": "10.5",
            "days_hi": "12.0",
            "evidence_error_lo_pct": "-8.58",
            "cost_usd_lo": "1.4e6",
            "cost_usd_hi": "1.6e6",
            "evidence_stack": "megatron-core",
        }
    )
    assert (row["tp"], row["dp"], row["cost_usd"]) == (8, 16, 1.5e6)
    assert row["sequence_parallel"] is True and row["loss_in_split"] is False
    assert row["nic"] is None and row["scenario"] == "s1"
    assert row["evidence"] == {
        "status": "measured",
        "runs": 3,
        "mape_pct": None,
        "step_time_s_range": None,
        "days_range": [10.5, 12.0],
        # the evidence columns added 2026-12-04, numbers where they are numbers
        "stack": "megatron-core",
        "worst_pct": None,
        "error_lo_pct": -8.58,
        "error_hi_pct": None,
        "cost_usd_range": [1.4e6, 1.6e6],
        "basis": None,
        "line": None,
    }


def test_the_axes_are_the_columns_between_scenario_and_status():
    header = ["scenario", "budget", "gpus", "sample", "price_scales", "status", "gpu"]
    assert axes_of(header) == ["budget", "gpus"]


def test_the_pareto_front_keeps_what_nothing_beats_on_both():
    rows = [
        _row("a", 10, 5),
        _row("b", 12, 4),
        _row("c", 11, 6),
        _row("d", 15, 4),
        _row("e", 20, 1),
    ]
    assert [r["gpu"] for r in pareto_front(rows)] == ["a", "b", "e"]
    assert pareto_front([]) == []


def test_winners_are_the_best_per_setting_of_the_other_axes():
    rows = [
        _row("h100", 10, 5, budget="1M"),
        _row("h200", 9, 6, budget="1M"),
        _row("h100", 8, 9, budget="2M"),
        _row("h200", 8, 7, budget="2M"),
    ]
    fastest = winners(rows, ["budget", "gpus"], "time")
    assert [(r["budget"], r["gpu"]) for r in fastest] == [("1M", "h200"), ("2M", "h200")]
    cheapest = winners(rows, ["budget", "gpus"], "cost")
    assert [(r["budget"], r["gpu"]) for r in cheapest] == [("1M", "h100"), ("2M", "h200")]


def test_budget_curves_are_one_series_per_gpu_sorted_by_budget():
    rows = [_row("h100", 10, 2e6, budget="2M"), _row("h100", 20, 1e6, budget="1M")]
    rows.append(_row("h200", 9, 2e6, budget="2M"))
    curves = budget_curves(rows, ["budget", "gpus"])
    assert [c["name"] for c in curves] == ["h100", "h200"]
    assert [p["budget_usd"] for p in curves[0]["points"]] == [1e6, 2e6]
    assert curves[0]["points"][0]["days"] == 20
    assert budget_curves(rows, ["tokens"]) == []


def test_price_wins_bracket_each_gpus_break_even():
    def drawn(winner: str, scale: float) -> dict:
        return _row(winner, 1, 1, price_scales=json.dumps({"h200": scale}))

    rows = [drawn("h200", 0.8), drawn("h200", 1.0), drawn("h100", 1.3), drawn("h100", 1.6)]
    (e,) = price_wins(rows)
    assert e == {"gpu": "h200", "won_up_to": 1.0, "lost_from": 1.3, "n": 4, "clean": True}
    (muddled,) = price_wins([drawn("h100", 0.9), drawn("h200", 1.2)])
    assert muddled["clean"] is False  # won above a price it lost at
    points = price_points([*rows, _row("h100", 1, 1)])
    assert len(points) == 4 and points[0]["scales"] == {"h200": 0.8}
