"""The report's tables, cell by cell, shared by the page and the workbook: each cell is its
text (as the CLI's tables write it, designer.output.formats) and its value (the number the
workbook stores)."""

from __future__ import annotations

from typing import Any

from designer.output import formats as report
from designer.output import text as render
from designer.report.data import ReportData

Cell = tuple[str, Any]


def _num(v: Any, digits: str = ",.2f") -> Cell:
    if v is None:
        return ("-", None)
    return (f"{float(v):{digits}}", float(v))


def _span(rng: list | None) -> Cell:
    return (report.span(rng), report.span(rng) if rng else None)


def _evidence(p: dict[str, Any]) -> dict[str, Any] | None:
    ev = p.get("evidence")
    return ev if isinstance(ev, dict) else None


def plan_headers(data: ReportData) -> list[str]:
    heads = ["#", "gpu"]
    if data.kind in ("compare", "study"):
        heads.append("status" if data.kind == "compare" else "axes")
    heads += ["gpus", "servers", "nics/server", "tp/pp/dp/cp/vp", "micro-batch x accum"]
    heads += ["recompute", "memory GB/GPU", "step s", "step s range", "days", "days range"]
    heads += ["cost USD", "cost range", "MFU", "evidence"]
    if data.kind in ("compare", "study"):
        heads.append("top binding")
    return heads


def plan_row(data: ReportData, p: dict[str, Any]) -> list[Cell]:
    """One plan's cells, in plan_headers' order (a compare row without a plan: dashes)."""
    ev = _evidence(p)
    gpu = report.gpu_label(p["gpu"], ev) if ev and ev.get("status") else p["gpu"]
    cells: list[Cell] = [(str(p.get("rank", "")), p.get("rank")), (gpu, p["gpu"])]
    if data.kind == "compare":
        cells.append((str(p.get("status") or "-"), p.get("status")))
    elif data.kind == "study":
        where = ", ".join(f"{a} {p.get(a)}" for a in (data.study or {}).get("axes", []))
        cells.append((where or "-", where))
    if p.get("num_gpus") in (None, ""):
        cells += [("-", None)] * 15
    else:
        cells += _plan_cells(p, ev)
    if data.kind in ("compare", "study"):
        cells.append((p.get("top_binding") or "-", p.get("top_binding")))
    return cells


def _plan_cells(p: dict[str, Any], ev: dict[str, Any] | None) -> list[Cell]:
    ev = ev or {}
    layout = f"{p['tp']}/{p['pp']}/{p['dp']}/{p['cp']}/{p['vp']}"
    cost_rng = ev.get("cost_usd_range")
    return [
        (f"{int(p['num_gpus']):,}", int(p["num_gpus"])),
        (f"{int(p['nodes']):,}", int(p["nodes"])),
        (f"{p['nics_per_node']} x {p['nic']}", f"{p['nics_per_node']} x {p['nic']}"),
        (layout, layout),
        (f"{p['micro_batch']} x {p['grad_accum']}", f"{p['micro_batch']} x {p['grad_accum']}"),
        (str(p["recompute"]), p["recompute"]),
        _num(p["memory_gb_per_gpu"], ",.1f"),
        _num(p["step_time_s"], ",.2f"),
        _span(ev.get("step_time_s_range")),
        _num(p["time_to_train_days"], ",.1f"),
        _span(ev.get("days_range")),
        (render.usd(float(p["cost_usd"])), float(p["cost_usd"])),
        (_usd_span(cost_rng), _usd_span(cost_rng) if cost_rng else None),
        (f"{100 * float(p['mfu']):.1f}%", float(p["mfu"])),
        (report.evidence_cell(ev) if ev.get("status") else "-", ev.get("line")),
    ]


def _usd_span(rng: list | None) -> str:
    if not rng:
        return "-"
    if rng[1] is not None and abs(rng[1] - rng[0]) < 0.5:
        return render.usd(rng[0])  # capex: unchanged by the time
    hi = render.usd(rng[1]) if rng[1] is not None else "unbounded"
    return f"{render.usd(rng[0])}-{hi}"


def binding_headers(unit: str) -> list[str]:
    return ["constraint", "binding", "on this plan", "relaxation", f"saves ({unit})", "%"]


def binding_row(b: dict[str, Any]) -> list[Cell]:
    """A binding constraint's cells, as designer.output.formats.binding_table writes them."""
    gain = b.get("improvement_if_relaxed")
    state = "yes" if b.get("binding") else ("no" if b.get("decided", True) else "unproved")
    return [
        (b["constraint"], b["constraint"]),
        (state, state),
        (b.get("detail") or "", b.get("detail")),
        (b.get("relaxation") or "", b.get("relaxation")),
        (f"{gain:,.3g}" if gain else "-", gain),
        (f"{b['improvement_pct']:.1f}%" if gain else "-", b.get("improvement_pct")),
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
    """(dotted key, value) of a nested mapping (the question), lists as one text."""
    out: list[tuple[str, Any]] = []
    for k, v in d.items():
        if isinstance(v, dict) and v:
            out += flat(v, f"{prefix}{k}.")
        elif isinstance(v, (list, tuple)):
            out.append((f"{prefix}{k}", ", ".join(render.fmt(x) for x in v) or "-"))
        else:
            out.append((f"{prefix}{k}", v))
    return out


def study_headers(data: ReportData) -> list[str]:
    """A study's CSV columns, as written (the workbook's study sheet)."""
    return [c for c in (data.study or {}).get("columns", []) if c != "study"]
