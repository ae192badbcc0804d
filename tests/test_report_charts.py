"""designer/report/charts.py: the report page's Plotly figures, drawn directly from report
data built here (no CliRunner, no solve): the values of every trace, the hover text that
names the plan behind a point, the order of the step-time parts, the axes, and None where a
chart does not apply."""

from __future__ import annotations

import pytest

from designer.report.charts import (
    CHARTS,
    PARTS_ORDER,
    binding_chart,
    breakdown_chart,
    breakeven_chart,
    budget_chart,
    pareto_chart,
    win_share_chart,
)
from designer.report.data import ReportData

PLANS = [
    {"label": "plan A", "gpu": "h200", "num_gpus": 1024, "time_to_train_days": 30.0,
     "cost_usd": 2.5e7},
    {"label": "plan B", "gpu": "h100-sxm", "num_gpus": 512, "time_to_train_days": 40.0,
     "cost_usd": 2.0e7},
    {"label": "l4: no plan", "gpu": "l4", "num_gpus": None},
]  # fmt: skip
BINDING = [
    {"constraint": "budget", "detail": "$25M of $25M", "relaxation": "+10% budget",
     "improvement_if_relaxed": 2.5, "improvement_pct": 8.3, "binding": True},
    {"constraint": "memory", "detail": "61 of 80 GB", "relaxation": "+1 GB",
     "improvement_if_relaxed": 0.5, "improvement_pct": 1.7, "binding": False},
    {"constraint": "power", "detail": "-", "relaxation": "", "improvement_if_relaxed": None},
]  # fmt: skip


def answer(**fields) -> ReportData:
    base = dict(
        kind="answer",
        source="a.json",
        title="t",
        recommendation="r",
        objective={"name": "time_to_train", "unit": "days"},
        plans=[dict(p) for p in PLANS],
        binding=[dict(b) for b in BINDING],
    )
    return ReportData(**{**base, **fields})


def study(**views) -> ReportData:
    return answer(kind="study", plans=[], binding=[], study={"rows": [], "pareto": [], **views})


# --------------------------------------------------------------------- binding constraints


def test_binding_bars_are_the_gains_of_the_relaxations_that_gain():
    fig = binding_chart(answer())
    (bar,) = fig.data
    assert list(bar.x) == ["+10% budget", "+1 GB"]  # power gains nothing: no bar
    assert list(bar.y) == [2.5, 0.5]
    assert list(bar.marker.color) == ["#c44e52", "#8c8c8c"]  # binding red, the rest grey
    assert bar.hovertext[0] == (
        "budget: $25M of $25M; +10% budget saves 2.5 days (8.3%)<br>plan: plan A"
    )
    assert fig.layout.title.text == "Binding constraints: days saved per relaxation"
    assert fig.layout.yaxis.title.text == "days saved"


def test_binding_under_a_cost_objective_says_dollars():
    fig = binding_chart(answer(objective={"name": "cost", "unit": "USD"}, plans=[]))
    assert fig.layout.yaxis.title.text == "USD saved"
    assert "plan:" not in fig.data[0].hovertext[0]  # no plan to name


def test_no_gain_no_binding_chart():
    assert binding_chart(answer(binding=[BINDING[2]])) is None
    assert binding_chart(answer(binding=[])) is None


# --------------------------------------------------------------------- cost against time


def test_the_pareto_view_of_an_answer_is_a_trace_per_gpu_with_a_plan():
    fig = pareto_chart(answer())
    assert [t.name for t in fig.data] == ["h100-sxm", "h200"]  # sorted; l4 has no plan
    h100 = fig.data[0]
    assert (list(h100.x), list(h100.y), list(h100.hovertext)) == ([40.0], [2.0e7], ["plan B"])
    assert all(t.mode == "markers" for t in fig.data)  # an answer has no front to join
    assert fig.layout.xaxis.title.text == "time to train (days)"


def test_a_single_plan_has_no_pareto_view():
    assert pareto_chart(answer(plans=PLANS[:1])) is None
    assert pareto_chart(answer(plans=[PLANS[0], PLANS[2]])) is None  # one with a plan


def test_a_study_joins_its_front():
    rows = [
        {"gpu": "h200", "time_to_train_days": 10.0, "cost_usd": 3e6, "label": "a"},
        {"gpu": "h200", "time_to_train_days": 20.0, "cost_usd": 2e6, "label": "b"},
        {"gpu": "h200", "time_to_train_days": 25.0, "cost_usd": 2.5e6, "label": "c"},
        {"gpu": "l4", "time_to_train_days": None, "cost_usd": None, "label": "none"},
    ]
    fig = pareto_chart(study(rows=rows, pareto=rows[:2]))
    points, front = fig.data
    assert list(points.x) == [10.0, 20.0, 25.0] and list(points.hovertext) == ["a", "b", "c"]
    assert front.name == "Pareto front" and front.mode == "lines"
    assert list(front.x) == [10.0, 20.0] and front.hoverinfo == "skip"
    one_front = pareto_chart(study(rows=rows, pareto=rows[:1]))
    assert [t.name for t in one_front.data] == ["h200"]  # a one-point front is not drawn


# --------------------------------------------------------------------- a study's views


CURVES = [
    {"name": "h200", "points": [
        {"budget_usd": 1e6, "days": 40.0, "label": "x"},
        {"budget_usd": 3e6, "days": 15.0, "label": "y"}]},
    {"name": "h100-sxm", "points": [{"budget_usd": 3e5, "days": 90.0, "label": "z"}]},
]  # fmt: skip


def test_budget_curves_on_a_log_axis_ticked_at_the_budgets():
    fig = budget_chart(study(budget_curves=CURVES))
    assert [t.name for t in fig.data] == ["h200", "h100-sxm"]
    assert list(fig.data[0].y) == [40.0, 15.0]
    assert fig.data[0].hovertext[1] == "budget $3,000,000<br>y"
    assert fig.layout.xaxis.type == "log"
    assert list(fig.layout.xaxis.tickvals) == [3e5, 1e6, 3e6]
    assert list(fig.layout.xaxis.ticktext) == ["$300.0K", "$1.00M", "$3.00M"]
    assert budget_chart(study()) is None and budget_chart(answer()) is None


def test_win_shares_in_percent_with_their_spread():
    shares = {
        "h200": {"win_share": 0.7, "wins": 7.0, "days_p10": 9.5, "days_p50": 10.0,
                 "days_p90": 12.25, "cost_p50": 2.5e6},
        "h100-sxm": {"win_share": 0.3, "wins": 3.0, "days_p10": 11.0, "days_p50": 12.0,
                     "days_p90": 13.0, "cost_p50": 2.0e6},
    }  # fmt: skip
    fig = win_share_chart(study(win_shares=shares))
    (bar,) = fig.data
    assert list(bar.x) == ["h200", "h100-sxm"] and list(bar.y) == pytest.approx([70.0, 30.0])
    assert bar.hovertext[0] == (
        "h200: wins 7 samples; days p10-p50-p90 9.5-10.0-12.2; median cost $2,500,000"
    )
    assert win_share_chart(study()) is None


def test_the_break_even_view_plots_the_first_two_gpus_price_multipliers():
    points = [
        {"gpu": "h200", "scales": {"h200": 0.8, "h100-sxm": 1.2}, "label": "p"},
        {"gpu": "h100-sxm", "scales": {"h200": 1.3}, "label": "q"},  # h100 at its catalog price
    ]
    fig = breakeven_chart(study(price_points=points))
    assert [t.name for t in fig.data] == ["h100-sxm wins", "h200 wins"]
    h100, h200 = fig.data
    assert (list(h100.x), list(h100.y)) == ([1.0], [1.3])  # x: h100-sxm, y: h200 (sorted)
    assert (list(h200.x), list(h200.y)) == ([1.2], [0.8])
    assert h200.hovertext[0] == "h100-sxm x1.200, h200 x0.800<br>p"
    assert fig.layout.xaxis.title.text == "h100-sxm price multiplier"
    one = [{"gpu": "h200", "scales": {"h200": 0.8}, "label": "p"}]
    assert breakeven_chart(study(price_points=one)) is None  # needs two GPU types


# --------------------------------------------------------------------- step-time breakdown


def test_the_breakdown_stacks_the_parts_in_order_and_skips_empty_ones():
    breakdown = [
        {"label": "#1 h200", "plan": "plan A", "step_time_s": 2.0,
         "parts": {"compute": 1.5, "dp_comm": 0.3, "bubble": 0.0, "zz_new": 0.2}},
        {"label": "#2 h100", "plan": "plan B", "step_time_s": 3.0,
         "parts": {"compute": 2.5, "tp_comm": 0.5}},
    ]  # fmt: skip
    fig = breakdown_chart(answer(breakdown=breakdown))
    names = [t.name for t in fig.data]
    assert names == ["compute", "tp_comm", "dp_comm", "zz_new"]  # bubble: zero everywhere
    assert [names.index(p) for p in names if p in PARTS_ORDER] == [0, 1, 2]
    tp = fig.data[1]
    assert list(tp.x) == [0.0, 0.5] and list(tp.y) == ["#1 h200", "#2 h100"]
    assert tp.orientation == "h"
    assert tp.hovertext[1] == "tp_comm: 0.500 s of a 3.000 s step<br>plan B"
    assert fig.layout.barmode == "stack" and fig.layout.height == 300  # max(300, 120 + 80)
    many = [{**breakdown[0], "label": f"#{i}"} for i in range(10)]
    assert breakdown_chart(answer(breakdown=many)).layout.height == 120 + 40 * 10
    assert breakdown_chart(answer()) is None


def test_every_chart_shares_the_page_style():
    data = answer(breakdown=[{"label": "a", "plan": "p", "step_time_s": 1.0,
                              "parts": {"compute": 1.0}}])  # fmt: skip
    drawn = [draw(data) for draw in CHARTS]
    assert [d is not None for d in drawn] == [True, False, True, False, False, True]
    for fig in (f for f in drawn if f is not None):
        assert fig.layout.template.layout.paper_bgcolor == "white"  # plotly_white
        assert fig.layout.hoverlabel.namelength == -1  # full trace names on hover
        assert all(t.hovertemplate in (None, "%{hovertext}<extra></extra>") for t in fig.data)
