"""The report's tables, cell by cell, shared by the page and the workbook: each cell is its
text (as the CLI's tables write it, designer.output.formats) and its value (the number the
workbook stores)."""

from __future__ import annotations

import json
import math
from typing import Any

from designer.output import formats as report
from designer.output import text as render
from designer.report.data import ReportData
from models.evidence_rule import RULE_TEXT

Cell = tuple[str, Any]
RANGES = ("step s range", "days range", "cost range")
"""The plan columns whose value is a measured range, (low, high): one text on the page, two
numeric columns in the workbook."""


def _num(v: Any, mid: str = ".2f") -> Cell:
    """A number as the CLI writes it (designer.output.text.number: thousands without
    decimals, ``mid`` from 1 to 100, three figures below), ``-`` for none."""
    if v is None:
        return ("-", None)
    return (render.number(float(v), mid), float(v))


def _fixed(v: Any) -> Cell:
    """GB per GPU as the CLI's plans table writes them (one decimal: 169.2)."""
    return ("-", None) if v is None else (f"{float(v):,.1f}", float(v))


def _span(rng: list | None) -> Cell:
    return (report.span(rng), (rng[0], rng[1]) if rng else None)


def _evidence(p: dict[str, Any]) -> dict[str, Any] | None:
    ev = p.get("evidence")
    return ev if isinstance(ev, dict) else None


def layout_head(moe: bool) -> str:
    """The layout column's head, as the CLI's (designer.output.formats.layout_head)."""
    return "tp/pp/dp/cp/vp/ep/etp" if moe else "tp/pp/dp/cp/vp"


def plan_headers(data: ReportData) -> list[str]:
    heads = ["#", "gpu"]
    if data.kind in ("compare", "study"):
        heads.append("status" if data.kind == "compare" else "axes")
    heads += ["gpus", "servers", "nics/server", layout_head(data.moe), "micro-batch x accum"]
    heads += ["recompute", "memory GB/GPU", "step s", "step s range", "days", "days range"]
    heads += ["cost USD", "cost range", "MFU", "evidence"]
    if data.kind in ("compare", "study"):
        heads.append("top binding")
    return heads


def axis_value(v: Any) -> str:
    """A study axis's value as the page shows it: a GPU list (``["h100-sxm"]``, as the CSV
    writes it) as its names joined by ``+``."""
    if isinstance(v, str) and v.startswith("["):
        try:
            v = json.loads(v)
        except ValueError:
            return v
    if isinstance(v, list):
        return " + ".join(axis_value(x) for x in v)
    return render.fmt(v)


def plan_row(data: ReportData, p: dict[str, Any]) -> list[Cell]:
    """One plan's cells, in plan_headers' order (a compare row without a plan: dashes)."""
    ev = _evidence(p)
    gpu = report.gpu_label(p["gpu"], ev) if ev and ev.get("status") else p["gpu"]
    cells: list[Cell] = [(str(p.get("rank", "")), p.get("rank")), (gpu, gpu)]
    if data.kind == "compare":
        cells.append((str(p.get("status") or "-"), p.get("status")))
    elif data.kind == "study":
        where = ", ".join(f"{a} {axis_value(p.get(a))}" for a in (data.study or {}).get("axes", []))
        cells.append((where or "-", where))
    if p.get("num_gpus") in (None, ""):
        cells += [("-", None)] * 15
    else:
        cells += _plan_cells(p, ev, data.moe)
    if data.kind in ("compare", "study"):
        cells.append((p.get("top_binding") or "-", p.get("top_binding")))
    return cells


def layout_cell(p: dict[str, Any], moe: bool) -> str:
    """``tp/pp/dp/cp/vp``, with ``/ep/etp`` for a MoE model (designer.output.formats.layout_cell)."""
    cell = f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}/{p['vp']}"
    return f"{cell}/{p.get('ep') or 1}/{p.get('etp') or 1}" if moe else cell


def _plan_cells(p: dict[str, Any], ev: dict[str, Any] | None, moe: bool = False) -> list[Cell]:
    ev = ev or {}
    layout = layout_cell(p, moe)
    cost_rng = ev.get("cost_usd_range")
    cost, mfu = p.get("cost_usd"), p.get("mfu")
    nodes = p.get("nodes")
    return [
        (f"{int(p['num_gpus']):,}", int(p["num_gpus"])),
        ("-", None) if nodes is None else (f"{int(nodes):,}", int(nodes)),
        (f"{p['nics_per_node']} x {p['nic']}", f"{p['nics_per_node']} x {p['nic']}"),
        (layout, layout),
        (f"{p['micro_batch']} x {p['grad_accum']}", f"{p['micro_batch']} x {p['grad_accum']}"),
        (str(p["recompute"]), p["recompute"]),
        _fixed(p.get("memory_gb_per_gpu")),
        _num(p.get("step_time_s"), ".2f"),
        _span(ev.get("step_time_s_range")),
        _num(p.get("time_to_train_days"), ".1f"),
        _span(ev.get("days_range")),
        ("-", None) if cost is None else (render.usd(float(cost)), float(cost)),
        (_usd_span(cost_rng), (cost_rng[0], cost_rng[1]) if cost_rng else None),
        ("-", None) if mfu is None else (f"{100 * float(mfu):.1f}%", float(mfu)),
        (_evidence_text(ev), ev.get("line")),
    ]


def _evidence_text(ev: dict[str, Any]) -> str:
    """The evidence column as the CLI writes it (designer.output.formats.evidence_cell); a
    saved object without its mean error shows its runs."""
    if not ev.get("status"):
        return "-"
    if ev["status"] != "extrapolated" and ev.get("mape_pct") is None:
        return f"{ev.get('precision_runs') or ev.get('runs') or 0:,} runs"
    return report.evidence_cell({**ev, "runs": ev.get("runs") or 0})


def _usd_span(rng: list | None) -> str:
    if not rng:
        return "-"
    if rng[1] is not None and abs(rng[1] - rng[0]) < 0.5:
        return render.usd(rng[0])  # capex: unchanged by the time
    hi = render.usd(rng[1]) if rng[1] is not None else "unbounded"
    return f"{render.usd(rng[0])}-{hi}"


ALTERNATIVES_INTRO = (
    f"The evidence rule ({RULE_TEXT}) kept these GPU and precision pairs out of the search; "
    "each would beat the answer if the model's prediction for it holds."
)


def alternative_row(i: int, a: dict[str, Any], moe: bool) -> list[Cell]:
    """A plan beyond the evidence rule, as designer.alternatives.text tabulates it."""
    p = a["plan"]
    ev = _evidence(p) or {}
    gpu = a["gpu"] if a.get("tier") in (None, "measured") else f"{a['gpu']} ({a['tier']})"
    layout = layout_cell(p, moe)
    cost, mfu = p.get("cost_usd"), p.get("mfu")
    return [
        (str(i), i),
        (gpu, gpu),
        (str(p["precision"]), p["precision"]),
        (f"{int(p['num_gpus']):,}", int(p["num_gpus"])) if p.get("num_gpus") else ("-", None),
        (layout, layout),
        _num(p.get("time_to_train_days"), ".1f"),
        _span(ev.get("days_range")),
        ("-", None) if cost is None else (render.usd(float(cost)), float(cost)),
        ("-", None) if mfu is None else (f"{100 * float(mfu):.1f}%", float(mfu)),
    ]


def binding_headers(unit: str) -> list[str]:
    return ["constraint", "binding", "on this plan", "relaxation", f"saves ({unit})", "%"]


def saving(gain: float, unit: str) -> str:
    """What a relaxation saves: dollars as the CLI writes them ($31.1K), else three figures
    as the CLI's binding table (1.37, 0.227; whole from 1,000: never 1.23e+03)."""
    if unit == "USD":
        return render.usd(gain)
    return f"{gain:,.0f}" if abs(gain) >= 1000 else f"{gain:,.3g}"


def binding_row(b: dict[str, Any], unit: str = "") -> list[Cell]:
    """A binding constraint's cells, as designer.output.formats.binding_table writes them
    (no saving: ``-`` on the page, an empty cell in the workbook)."""
    gain = b.get("improvement_if_relaxed") or None
    pct = b.get("improvement_pct") if gain else None
    state = "yes" if b.get("binding") else ("no" if b.get("decided", True) else "unproved")
    return [
        (b["constraint"], b["constraint"]),
        (state, state),
        (b.get("detail") or "", b.get("detail")),
        (b.get("relaxation") or "", b.get("relaxation")),
        (saving(gain, unit) if gain else "-", gain),
        (f"{pct:.1f}%" if pct is not None else "-", pct),
    ]


BOM_HEADERS = ["item", "quantity", "unit USD", "line total USD", "source"]


def bom_row(line: dict[str, Any]) -> list[Cell]:
    return [
        (line["item"], line["item"]),
        (f"{line['quantity']:,}", line["quantity"]),
        (f"${line['unit_usd']:,.2f}", line["unit_usd"]),
        (f"${line['extended_usd']:,.2f}", line["extended_usd"]),
        (line.get("source") or "", line.get("source")),
    ]


_FACTS = {
    "it_kw": "IT power {:,.0f} kW",
    "facility_kw": "facility power {:,.0f} kW",
    "racks": "{:,} racks",
    "fabric_tiers": "{}-tier fabric",
    "switches": "{:,} switches",
    "links": "{:,} links",
}


def bom_facts(bom: dict[str, Any]) -> list[str]:
    """The cluster's power, racks and fabric beside its bill of materials (report.bom_dict)."""
    out = []
    for k, v in bom.items():
        if k in ("lines", "total_usd") or v is None:
            continue
        out.append(_FACTS[k].format(v) if k in _FACTS else f"{k} {render.fmt(v)}")
    return out


BREAKEVEN_HEADERS = ["gpu", "against", "pricing", "catalog price", "break-even price", "change"]


def breakeven_row(e: dict[str, Any]) -> list[Cell]:
    """``designer breakeven``'s price: the catalog's, the break-even, the change in percent."""
    price, base = e.get("breakeven_price_usd"), e["catalog_price_usd"]
    change = None if price is None else 100 * (price / base - 1)
    return [
        (e["gpu"], e["gpu"]),
        (e["against"], e["against"]),
        (e["pricing"], e["pricing"]),
        (f"${base:,.2f}", base),
        ("never wins" if price is None else f"${price:,.2f}", price),
        ("-" if change is None else f"{change:+.1f}%", change),
    ]


def flat(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    """(dotted key, value) of a nested mapping (the question), an empty mapping left out,
    lists as one text (a list of lists, a study's GPU axis, as ``a + b, c``)."""
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict):
            out += flat(v, f"{prefix}{k}.")
        elif isinstance(v, (list, tuple)):
            out.append((f"{prefix}{k}", ", ".join(value_text(x) for x in v) or "-"))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def value_text(v: Any) -> str:
    """A question's or catalog entry's value to read: whole numbers with thousands
    separators (30,000), others to six figures (0.8, 1.2), a list's items joined by ``+``."""
    if isinstance(v, (list, tuple)):
        return " + ".join(value_text(x) for x in v) or "-"
    if isinstance(v, float) and math.isfinite(v) and v != int(v):
        return f"{v:,.6f}".rstrip("0").rstrip(".") if abs(v) >= 1e-3 else f"{v:.3g}"
    return render.fmt(v)


def study_headers(data: ReportData) -> list[str]:
    """A study's CSV columns, as written (the workbook's study sheet)."""
    return [c for c in (data.study or {}).get("columns", []) if c != "study"]
