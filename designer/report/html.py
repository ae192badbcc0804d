"""`designer report --html`: one self-contained page (Plotly's JavaScript inlined once, no
network needed to open it) laying out designer.report.data's structure: the recommendation,
the plans, the binding constraints, a study's charts, the bill of materials, the step-time
breakdown, the question and the catalog entries with their sources and dates."""

from __future__ import annotations

import datetime as dt
from html import escape
from typing import Any

from designer.output import text as render
from designer.output.study_csv import designer_version
from designer.report import tables
from designer.report.charts import CHARTS
from designer.report.data import ReportData

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;
 background:#fafafa}
main{max-width:1200px;margin:0 auto;padding:24px 32px;background:#fff}
h1{font-size:1.6em;margin:0 0 4px}h2{font-size:1.2em;margin:28px 0 8px;
 border-bottom:1px solid #ddd;padding-bottom:4px}
.meta{color:#666;font-size:.85em}.rec{font-size:1.05em;line-height:1.5;background:#eef4fb;
 padding:12px 16px;border-left:4px solid #4c72b0}
table{border-collapse:collapse;font-size:.82em;margin:6px 0;width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:left;vertical-align:top}
th{background:#f2f2f2}td.n{text-align:right;white-space:nowrap}
.wide{overflow-x:auto}table.plans td{white-space:nowrap}table.plans td:last-child{white-space:normal;min-width:9em}.src{color:#555;font-size:.95em}.note{color:#8a5a00}.chart{margin:8px 0}
"""


def _table(headers: list[str], rows: list[list[tuple[str, Any]]], cls: str = "") -> str:
    if cls == "plans":  # columns with nothing to show (no cost range, say) left out
        keep = [i for i in range(len(headers)) if any(r[i][0] not in ("-", "") for r in rows)]
        if "cost range" in headers and "cost USD" in headers:  # capex: the cost again
            at, cost = headers.index("cost range"), headers.index("cost USD")
            if all(r[at][0] in (r[cost][0], "-") for r in rows) and at in keep:
                keep.remove(at)
        headers = [headers[i] for i in keep]
        rows = [[r[i] for i in keep] for r in rows]
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for text, value in row:
            num = isinstance(value, (int, float)) and not isinstance(value, bool)
            cells.append(f"<td{' class=n' if num else ''}>{escape(str(text))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    table = (
        f"<table class='{cls}'><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
    return f"<div class=wide>{table}</div>"  # a table wider than the page scrolls, alone


def _section(title: str, *parts: str) -> str:
    return f"<section><h2>{escape(title)}</h2>{''.join(p for p in parts if p)}</section>"


def _chart_html(fig, name: str) -> str:
    import plotly.io as pio

    div = pio.to_html(
        fig,
        include_plotlyjs=False,
        full_html=False,
        config={"displaylogo": False, "responsive": True},
        div_id=f"chart-{name}",
    )
    return f"<div class='chart' data-chart='{name}'>{div}</div>"


def charts(data: ReportData) -> dict[str, str]:
    """Each applicable chart's HTML, by name (binding, budget, pareto, ...)."""
    out = {}
    for draw in CHARTS:
        fig = draw(data)
        if fig is not None:
            name = draw.__name__.removesuffix("_chart")
            out[name] = _chart_html(fig, name)
    return out


def _plans(data: ReportData) -> str:
    title = "Plans on the cost-time Pareto front" if data.kind == "study" else "Plans"
    rows = [tables.plan_row(data, p) for p in data.plans]
    legend = (
        "<p class=src>evidence: measured training runs behind each GPU's profile and their mean "
        "step-time error; ranges: the measured step, days and cost those errors imply</p>"
        if any(p.get("num_gpus") not in (None, "") for p in data.plans)
        else ""
    )
    return _section(title, _table(tables.plan_headers(data), rows, "plans"), legend) if rows else ""


def _alternatives(data: ReportData) -> str:
    """The plans the evidence rule kept out that would beat the answer, each with its
    sentence (designer.alternatives)."""
    if not data.alternatives:
        return ""
    heads = ["#", "gpu", "precision", "gpus", tables.layout_head(data.moe), "days", "days range"]
    heads += ["cost USD", "MFU"]
    rows = [tables.alternative_row(i + 1, a, data.moe) for i, a in enumerate(data.alternatives)]
    sentences = "".join(f"<li>{escape(str(a['sentence']))}</li>" for a in data.alternatives)
    return _section(
        "Beyond the evidence rule",
        f"<p class=src>{escape(tables.ALTERNATIVES_INTRO)}</p>",
        _table(heads, rows),
        f"<ul class=src>{sentences}</ul>",
    )


def _winners(data: ReportData) -> str:
    """Each scenario's best plan, then the scenarios without one (their status)."""
    st = data.study or {}
    wins = st.get("winners") or []
    missing = st.get("unanswered") or []
    if not (wins or missing) or st.get("win_shares"):
        return ""
    axes = [a for a in st["axes"] if a != "gpus"]
    what = "Fastest" if st["objective"] == "time" else "Cheapest"
    rows = [
        [
            *((tables.axis_value(w.get(a)), w.get(a)) for a in axes),
            (w["gpu"], w["gpu"]) if i < len(wins) else ("-", None),
            (w["label"] if i < len(wins) else f"no plan ({', '.join(w['statuses'])})", None),
        ]
        for i, w in enumerate([*wins, *missing][:100])
    ]
    return _section(f"{what} plan per scenario", _table([*axes, "gpu", "plan"], rows))


def _binding(data: ReportData, figs: dict[str, str]) -> str:
    if not data.binding:
        return ""
    unit = data.objective.get("unit") or ""
    rows = [tables.binding_row(b, unit) for b in data.binding]
    return _section(
        "What limits the best plan",
        figs.get("binding", ""),
        _table(tables.binding_headers(unit), rows),
    )


def _study_charts(data: ReportData, figs: dict[str, str]) -> str:
    parts = [figs.get(k, "") for k in ("budget", "pareto", "win_share", "breakeven")]
    parts.append(_price_wins(data))
    return (
        _section("Study" if data.kind == "study" else "Time and cost", *parts) if any(parts) else ""
    )


def _price_wins(data: ReportData) -> str:
    if data.breakeven:
        rows = [tables.breakeven_row(e) for e in data.breakeven]
        return "<h3>Break-even price</h3>" + _table(tables.BREAKEVEN_HEADERS, rows)
    st = data.study or {}
    rows = []
    for e in st.get("price_wins") or []:
        price = (st.get("catalog_prices") or {}).get(e["gpu"])

        def cell(k: float | None, price: float | None = price) -> tuple[str, Any]:
            if k is None:
                return ("-", None)
            return (f"x{k:.3f}" + (f" (${k * price:,.2f})" if price else ""), k)

        verdict = (
            "a break-even lies between" if e["clean"] else "overlap: the rival's price decides"
        )
        rows.append(
            [(e["gpu"], e["gpu"]), cell(e["won_up_to"]), cell(e["lost_from"]), (verdict, None)]
        )
    if not rows:
        return ""
    heads = ["gpu", "highest price it won at", "lowest price it lost at", "break-even"]
    return "<h3>Break-even prices (x catalog price)</h3>" + _table(heads, rows)


def _bom(data: ReportData) -> str:
    if not data.bom:
        return ""
    rows = [tables.bom_row(line) for line in data.bom["lines"]]
    total = data.bom["total_usd"]
    rows.append(
        [("total (capex)", None), ("", None), ("", None), (f"${total:,.2f}", total), ("", None)]
    )
    power = "; ".join(tables.bom_facts(data.bom))
    others = ", ".join(f"{o['gpu']} {render.usd(o['bom']['total_usd'])}" for o in data.other_boms)
    return _section(
        "Bill of materials",
        f"<p class=src>Plan: {escape(data.bom_plan)}</p>",
        f"<p class=src>Other GPU types' totals (their lines in the workbook): {escape(others)}</p>"
        if others
        else "",
        _table(tables.BOM_HEADERS, rows),
        f"<p class=src>{escape(power)}</p>",
    )


def _question(data: ReportData) -> str:
    if not data.question:
        return ""
    fields = tables.flat(data.question)
    text = tables.value_text
    main = [[(k, None), (text(v), v)] for k, v in fields if not k.startswith("model_spec.")]
    spec = [[(k, None), (text(v), v)] for k, v in fields if k.startswith("model_spec.")]
    more = (
        f"<details><summary>the model's spec ({len(spec)} fields)</summary>"
        f"{_table(['field', 'value'], spec)}</details>"
        if spec
        else ""
    )
    return _section("The question", _table(["field", "value"], main), more)


def _catalog(data: ReportData) -> str:
    if not data.catalog:
        return ""
    rows = []
    for e in data.catalog:
        for i, (k, v) in enumerate(e["fields"]):
            first = i == 0
            rows.append(
                [
                    (e["kind"] if first else "", None),
                    (e["name"] if first else "", None),
                    (k, None),
                    (tables.value_text(v), v),
                ]
            )
    return _section(
        "Catalog entries used (prices, sources and dates)",
        _table(["kind", "entry", "field", "value"], rows),
    )


def page(data: ReportData) -> str:
    """The whole page: Plotly's JavaScript once, then the sections."""
    from plotly.offline import get_plotlyjs

    figs = charts(data)
    when = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    notes = "".join(f"<p class=note>Note: {escape(n)}</p>" for n in data.notes)
    body = "".join(
        [
            f"<h1>{escape(data.title)}</h1>",
            f"<p class=meta>designer report of {escape(data.source)} ({data.kind}); "
            f"designer {escape(designer_version())}; written {when}</p>",
            _section("Recommendation", f"<p class=rec>{escape(data.recommendation)}</p>", notes),
            _plans(data),
            _alternatives(data),
            _winners(data),
            _binding(data, figs),
            _study_charts(data, figs),
            _bom(data),
            _section("Step time", figs["breakdown"]) if "breakdown" in figs else "",
            _question(data),
            _catalog(data),
        ]
    )
    return (
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
        f"<title>{escape(data.title)}</title><style>{STYLE}</style>"
        f"<script>{get_plotlyjs()}</script></head><body><main>{body}</main></body></html>"
    )
