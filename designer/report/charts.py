"""The report page's interactive charts (Plotly figures), each drawn from designer.report.data's
structure; every point's hover text is the plan behind it (report_data.plan_label)."""

from __future__ import annotations

from typing import Any

from designer.output import text as render
from designer.report.data import ReportData

HOVER = "%{hovertext}<extra></extra>"
PARTS_ORDER = (
    *("compute", "bubble", "tp_comm", "cp_comm", "pp_comm", "dp_comm", "ep_comm", "optimizer"),
)


def _go():
    import plotly.graph_objects as go  # the report extra: imported on use

    return go


def _layout(fig, title: str, x: str, y: str, **extra: Any):
    fig.update_layout(
        title={"text": title, "x": 0.01},
        xaxis_title=x,
        yaxis_title=y,
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
            x=[b["relaxation"] for b in rows],
            y=[b["improvement_if_relaxed"] for b in rows],
            hovertext=[
                f"{b['constraint']}: {b['detail']}; {b['relaxation']} saves "
                f"{b['improvement_if_relaxed']:,.3g} {unit} ({b['improvement_pct']:.1f}%)"
                + (f"<br>plan: {data.plans[0]['label']}" if data.plans else "")
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


def pareto_chart(data: ReportData):
    """Cost against time to train of every plan, one colour per GPU type, the front joined."""
    go = _go()
    if data.study is not None:
        plans = [r for r in data.study["rows"] if r.get("time_to_train_days") is not None]
        front = data.study["pareto"]
    else:
        plans = [p for p in data.plans if p.get("num_gpus") not in (None, "")]
        front = []
    if len(plans) < 2:
        return None
    fig = go.Figure()
    for gpu, pts in sorted(_by_gpu(plans).items()):
        fig.add_trace(
            go.Scatter(
                x=[p["time_to_train_days"] for p in pts],
                y=[p["cost_usd"] for p in pts],
                mode="markers",
                name=gpu,
                marker={"size": 10},
                hovertext=[p["label"] for p in pts],
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
    for c in curves:
        pts = c["points"]
        fig.add_trace(
            go.Scatter(
                x=[p["budget_usd"] for p in pts],
                y=[p["days"] for p in pts],
                mode="lines+markers",
                name=c["name"],
                marker={"size": 9},
                hovertext=[f"budget ${p['budget_usd']:,.0f}<br>{p['label']}" for p in pts],
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
            x=names,
            y=[100 * shares[g]["win_share"] for g in names],
            hovertext=[
                f"{g}: wins {int(shares[g]['wins'])} samples; days p10-p50-p90 "
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
    for gpu, pts in sorted(_by_gpu(points).items()):
        fig.add_trace(
            go.Scatter(
                x=[p["scales"].get(a, 1.0) for p in pts],
                y=[p["scales"].get(b, 1.0) for p in pts],
                mode="markers",
                name=f"{gpu} wins",
                marker={"size": 10},
                hovertext=[
                    f"{a} x{p['scales'].get(a, 1.0):.3f}, {b} x{p['scales'].get(b, 1.0):.3f}"
                    f"<br>{p['label']}"
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
    labels = [e["label"] for e in data.breakdown]
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
                name=part,
                orientation="h",
                hovertext=[
                    f"{part}: {v:,.3f} s of a {e['step_time_s']:,.3f} s step<br>{e['plan']}"
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
