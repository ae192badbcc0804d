"""The report page's interactive charts (Plotly figures), each drawn from designer.report.data's
structure; every point's hover text is the plan behind it (report_data.plan_label).

Plotly draws its text (hover labels, tick labels, legend entries, titles) as a subset of
HTML (``<a href>``, ``<b>``, ``<br>``), so every text that comes from a file (a catalog's
GPU name, a saved answer's binding detail, a study's axis value) goes in escaped (``_t``):
it shows as written and never as a link or markup."""

from __future__ import annotations

from html import escape
from typing import Any

from designer.output import text as render
from designer.report.data import ReportData, pareto_front
from designer.report.tables import saving

HOVER = "%{hovertext}<extra></extra>"
PARTS_ORDER = (
    *("compute", "bubble", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "ep_comm", "optimizer"),
)
COLOURS = (
    *("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"),
    *("#bcbd22", "#7f7f7f", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"),
    *("#e6550d", "#31a354", "#756bb1", "#636363", "#9c9ede", "#cedb9c", "#e7969c", "#de9ed6"),
)
"""24 colours (Tableau's 10, then Vega's category20b/c darker and lighter ones)."""
SYMBOLS = ("circle", "square", "diamond", "triangle-up", "x", "cross", "triangle-down")
"""Marker shapes: with the colours, 168 series before a (colour, shape) pair repeats."""


def _t(text: Any) -> str:
    """A text from a file, escaped for Plotly's HTML subset (shown as written)."""
    return escape(str(text), quote=False)


def _style(i: int) -> dict[str, Any]:
    """The i-th series' marker: its own colour and shape (24 colours x 7 shapes)."""
    return {"color": COLOURS[i % len(COLOURS)], "symbol": SYMBOLS[i % len(SYMBOLS)]}


def _go():
    import plotly.graph_objects as go  # the report extra: imported on use

    return go


def _layout(fig, title: str, x: str, y: str, **extra: Any):
    """Titles escaped here (_t): they may name a GPU or a unit read from a file."""
    fig.update_layout(
        title={"text": _t(title), "x": 0.01},
        xaxis_title=_t(x),
        yaxis_title=_t(y),
        template="plotly_white",
        height=380,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        hoverlabel={"namelength": -1},
        legend={"orientation": "h", "y": -0.2},
        **extra,
    )
    return fig


def binding_chart(data: ReportData):
    """Days (or dollars) saved per relaxation of each constraint of the best plan."""
    rows = [b for b in data.binding if b.get("improvement_if_relaxed")]
    if not rows:
        return None
    go = _go()
    unit = data.objective.get("unit") or ""
    what = "days saved" if unit == "days" else f"{unit} saved"
    fig = go.Figure(
        go.Bar(
            x=[_t(b["relaxation"]) for b in rows],
            y=[b["improvement_if_relaxed"] for b in rows],
            hovertext=[
                _t(
                    f"{b['constraint']}: {b['detail']}; {b['relaxation']} saves "
                    f"{saving(b['improvement_if_relaxed'], unit)}{'' if unit == 'USD' else ' ' + unit}"
                    + (
                        f" ({b['improvement_pct']:.1f}%)"
                        if b.get("improvement_pct") is not None
                        else ""
                    )
                )
                + (f"<br>plan: {_t(data.plans[0]['label'])}" if data.plans else "")
                for b in rows
            ],
            hovertemplate=HOVER,
            marker_color=["#c44e52" if b.get("binding") else "#8c8c8c" for b in rows],
        )
    )
    return _layout(fig, f"Binding constraints: {what} per relaxation", "relaxation", what)


def _by_gpu(points: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for p in points:
        out.setdefault(p["gpu"], []).append(p)
    return out


def _priced(plans: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The plans with both a time to train and a cost (a hand-edited null has neither)."""
    return [
        p
        for p in plans
        if p.get("num_gpus") not in (None, "")
        and p.get("time_to_train_days") is not None
        and p.get("cost_usd") is not None
    ]


def pareto_chart(data: ReportData):
    """Cost against time to train of every plan (a study's rows, compare's GPU types, an
    answer's top plans), one colour and shape per GPU type; for a study and compare the
    Pareto front joined (the plans no other beats on both time and cost: the choices a
    trade of time for money leaves)."""
    go = _go()
    if data.study is not None:
        plans = [r for r in data.study["rows"] if r.get("time_to_train_days") is not None]
        front = data.study["pareto"]
    else:
        plans = _priced(data.plans)  # an answer's top plans answer one question: no front
        front = pareto_front(plans) if data.kind == "compare" else []
    if len(plans) < 2:
        return None
    fig = go.Figure()
    for i, (gpu, pts) in enumerate(sorted(_by_gpu(plans).items())):
        fig.add_trace(
            go.Scatter(
                x=[p["time_to_train_days"] for p in pts],
                y=[p["cost_usd"] for p in pts],
                mode="markers",
                name=_t(gpu),
                marker={"size": 10, **_style(i)},
                hovertext=[_t(p["label"]) for p in pts],
                hovertemplate=HOVER,
            )
        )
    if len(front) > 1:
        fig.add_trace(
            go.Scatter(
                x=[p["time_to_train_days"] for p in front],
                y=[p["cost_usd"] for p in front],
                mode="lines",
                name="Pareto front",
                line={"color": "#333", "dash": "dot"},
                hoverinfo="skip",
            )
        )
    return _layout(fig, "Cost against time to train", "time to train (days)", "cost (USD)")


def budget_chart(data: ReportData):
    """Time to train against budget, one line per GPU type (a study with a budget axis)."""
    curves = (data.study or {}).get("budget_curves") or []
    if not curves:
        return None
    go = _go()
    fig = go.Figure()
    for i, c in enumerate(curves):
        pts = c["points"]
        style = _style(i)
        fig.add_trace(
            go.Scatter(
                x=[p["budget_usd"] for p in pts],
                y=[p["days"] for p in pts],
                mode="lines+markers",
                name=_t(c["name"]),
                marker={"size": 9, **style},
                line={"color": style["color"]},
                hovertext=[f"budget ${p['budget_usd']:,.0f}<br>{_t(p['label'])}" for p in pts],
                hovertemplate=HOVER,
            )
        )
    fig = _layout(fig, "Time to train against budget", "budget (USD)", "time to train (days)")
    budgets = sorted({p["budget_usd"] for c in curves for p in c["points"]})
    fig.update_xaxes(type="log", tickvals=budgets, ticktext=[render.usd(b) for b in budgets])
    return fig


def win_share_chart(data: ReportData):
    """How often each GPU type wins under price uncertainty (designer.sweep.summary)."""
    shares = (data.study or {}).get("win_shares") or {}
    if not shares:
        return None
    go = _go()
    names = list(shares)
    fig = go.Figure(
        go.Bar(
            x=[_t(g) for g in names],
            y=[100 * shares[g]["win_share"] for g in names],
            hovertext=[
                f"{_t(g)}: wins {int(shares[g]['wins'])} samples; days p10-p50-p90 "
                f"{shares[g]['days_p10']:,.1f}-{shares[g]['days_p50']:,.1f}-"
                f"{shares[g]['days_p90']:,.1f}; median cost ${shares[g]['cost_p50']:,.0f}"
                for g in names
            ],
            hovertemplate=HOVER,
            marker_color="#55a868",
        )
    )
    return _layout(fig, "Win shares under price uncertainty", "GPU type", "wins (% of samples)")


def breakeven_chart(data: ReportData):
    """Each sample's price multipliers of two GPU types, coloured by the winner: the
    boundary between the colours is the break-even."""
    points = (data.study or {}).get("price_points") or []
    names = sorted({g for p in points for g in p["scales"]})
    if len(names) < 2:
        return None
    go = _go()
    a, b = names[0], names[1]
    fig = go.Figure()
    for i, (gpu, pts) in enumerate(sorted(_by_gpu(points).items())):
        fig.add_trace(
            go.Scatter(
                x=[p["scales"].get(a, 1.0) for p in pts],
                y=[p["scales"].get(b, 1.0) for p in pts],
                mode="markers",
                name=_t(f"{gpu} wins"),
                marker={"size": 10, **_style(i)},
                hovertext=[
                    _t(f"{a} x{p['scales'].get(a, 1.0):.3f}, {b} x{p['scales'].get(b, 1.0):.3f}")
                    + f"<br>{_t(p['label'])}"
                    for p in pts
                ],
                hovertemplate=HOVER,
            )
        )
    title = "Break-even: which wins at each pair of prices (x catalog price)"
    return _layout(fig, title, f"{a} price multiplier", f"{b} price multiplier")


def breakdown_chart(data: ReportData):
    """Each plan's step time split into its exposed parts (stacked bars)."""
    if not data.breakdown:
        return None
    go = _go()
    labels = [_t(e["label"]) for e in data.breakdown]
    fig = go.Figure()
    seen = {k for e in data.breakdown for k in e["parts"]}
    for part in [*PARTS_ORDER, *sorted(seen - set(PARTS_ORDER))]:
        values = [e["parts"].get(part, 0.0) for e in data.breakdown]
        if not any(values):
            continue
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values,
                name=_t(part),
                orientation="h",
                hovertext=[
                    f"{_t(part)}: {v:,.3f} s of a {e['step_time_s']:,.3f} s step<br>{_t(e['plan'])}"
                    for v, e in zip(values, data.breakdown, strict=True)
                ],
                hovertemplate=HOVER,
            )
        )
    fig = _layout(fig, "Step time per plan, by part (exposed seconds)", "seconds per step", "")
    fig.update_layout(barmode="stack", height=max(300, 120 + 40 * len(labels)))
    fig.update_yaxes(autorange="reversed")
    return fig


CHARTS = (
    binding_chart,
    budget_chart,
    pareto_chart,
    win_share_chart,
    breakeven_chart,
    breakdown_chart,
)
"""Every chart the page may hold, in the page's order (each None where it does not apply)."""
