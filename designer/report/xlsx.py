"""`designer report --xlsx`: a workbook (openpyxl) of designer.report.data's structure. Sheets:
``plans``, ``BOM`` (unit prices and their sources; each line total is a formula, quantity x
unit price, and the total their SUM, so a changed unit price moves the total), ``study``
(a sweep's rows as written), ``binding`` and ``assumptions`` (the recommendation, the
question and the catalog entries with their sources and dates)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from designer.output.cells import guard_sheet_row
from designer.report import tables
from designer.report.data import ReportData

USD_FORMAT = '"$"#,##0.00'
BOM_SHEET = "BOM"


def _cell_value(value: Any) -> Any:
    """A value a cell can hold (lists and mappings as text)."""
    if value is None or isinstance(value, (int, float, str, bool)):
        return value
    return str(value)


def _sheet(wb, title: str, headers: list[str], rows: list[list[Any]]):
    from openpyxl.styles import Font

    ws = wb.create_sheet(title)
    ws.append(headers)
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for row in rows:
        ws.append([_cell_value(v) for v in row])
    ws.freeze_panes = "A2"
    for i, head in enumerate(headers, start=1):
        width = max(
            [len(str(head)), *(len(str(r[i - 1])) for r in rows[:200] if r[i - 1] is not None)]
        )
        ws.column_dimensions[ws.cell(1, i).column_letter].width = min(60, max(8, width + 2))
    return ws


PERCENT_FORMAT = "0.0%"
NUMBER_FORMATS = {
    "MFU": PERCENT_FORMAT,
    "%": PERCENT_FORMAT,
    "cost USD": USD_FORMAT,
    "cost range low": USD_FORMAT,
    "cost range high": USD_FORMAT,
    "saves (USD)": USD_FORMAT,
}
"""Each numeric column's Excel format, by its head (the others: General)."""


def _cells(heads: list[str], cells: list[tables.Cell]) -> tuple[list[str], list[Any]]:
    """A table's row as the workbook stores it: each cell's number (its text where it has
    none; empty where the page shows ``-``), a measured range as two numeric columns."""
    out_heads, row = [], []
    for head, (text, value) in zip(heads, cells, strict=True):
        if head in tables.RANGES:
            out_heads += [f"{head} low", f"{head} high"]
            row += list(value) if value else [None, None]
        else:
            out_heads.append(head)
            row.append(value if value is not None else (None if text in ("-", "") else text))
    return out_heads, row


def _table_sheet(wb, title: str, heads: list[str], rows: list[list[tables.Cell]], extra=None):
    """A sheet of a table's rows (``extra``: a last column's head and values), numbers in
    their formats (NUMBER_FORMATS)."""
    out = [_cells(heads, r) for r in rows]
    out_heads = out[0][0] if out else _cells(heads, [("-", None)] * len(heads))[0]
    values = [r for _, r in out]
    if extra is not None:
        out_heads = [*out_heads, extra[0]]
        values = [[*r, v] for r, v in zip(values, extra[1], strict=True)]
    ws = _sheet(wb, title, out_heads, values)
    for col, head in enumerate(out_heads, start=1):
        if head in NUMBER_FORMATS:
            for r in range(2, len(values) + 2):
                ws.cell(r, col).number_format = NUMBER_FORMATS[head]
    return ws


def _plans(wb, data: ReportData) -> None:
    rows = [tables.plan_row(data, p) for p in data.plans]
    labels = ("plan", [p["label"] for p in data.plans])
    _table_sheet(wb, "plans", tables.plan_headers(data), rows, labels)


def _alternatives(wb, data: ReportData) -> None:
    """The plans beyond the evidence rule and their sentences."""
    if not data.alternatives:
        return
    heads = ["#", "gpu", "precision", "gpus", tables.layout_head(data.moe), "days", "days range"]
    heads += ["cost USD", "MFU"]
    rows = [tables.alternative_row(i + 1, a, data.moe) for i, a in enumerate(data.alternatives)]
    sentences = ("sentence", [str(a["sentence"]) for a in data.alternatives])
    _table_sheet(wb, "beyond evidence", heads, rows, sentences)


def bom_sheet(wb, title: str, bom: dict[str, Any] | None, plan: str) -> None:
    """Item, quantity, unit price, line total (=quantity x unit), source; then the total
    (=SUM of the line totals) and the plan's capex as the answer saved it."""
    ws = _sheet(wb, title, tables.BOM_HEADERS, [])
    if not bom:
        ws.append(["no bill of materials in this input"])
        return
    lines = bom["lines"]
    for r, line in enumerate(lines, start=2):
        ws.append([line["item"], line["quantity"], line["unit_usd"], f"=B{r}*C{r}", line["source"]])
        ws.cell(r, 3).number_format = USD_FORMAT
        ws.cell(r, 4).number_format = USD_FORMAT
    last = len(lines) + 1
    ws.append(["total (capex)", None, None, f"=SUM(D2:D{last})", None])
    ws.cell(last + 1, 4).number_format = USD_FORMAT
    ws.append(["capex as the answer saved it", None, None, bom["total_usd"], "designer"])
    ws.cell(last + 2, 4).number_format = USD_FORMAT
    ws.append([f"plan: {plan}"])
    ws.append(["; ".join(tables.bom_facts(bom))])
    for col, width in (("A", 48), ("B", 10), ("C", 16), ("D", 18), ("E", 90)):
        ws.column_dimensions[col].width = width


def _boms(wb, data: ReportData) -> None:
    """The featured plan's BOM, then (compare) each other GPU type's on its own sheet."""
    bom_sheet(wb, BOM_SHEET, data.bom, data.bom_plan)
    for other in data.other_boms:
        title = re.sub(r"[\\/*?:\[\]]", "-", f"{BOM_SHEET} {other['gpu']}")[:31]
        bom_sheet(wb, title, other["bom"], other["plan"])


def _study(wb, data: ReportData) -> None:
    if data.study is None:
        return
    heads = tables.study_headers(data)
    rows = []
    for r in data.study["rows"]:
        row = []
        for h in heads:
            v = r.get(h)
            row.append(v.get("status") if isinstance(v, dict) else v)
        rows.append(row)
    _sheet(wb, "study", heads, rows)


def _binding(wb, data: ReportData) -> None:
    """The binding constraints: a saving and its share as numbers (the share a fraction,
    percent-formatted), empty where the page shows ``-``."""
    unit = data.objective.get("unit") or ""
    rows = []
    for b in data.binding:
        cells = tables.binding_row(b, unit)
        text, pct = cells[-1]
        cells[-1] = (text, None if pct is None else pct / 100)
        rows.append(cells)
    _table_sheet(wb, "binding", tables.binding_headers(unit), rows)


def _breakeven(wb, data: ReportData) -> None:
    """``designer breakeven``'s prices, or a study's prices won and lost at."""
    if data.breakeven:
        rows = [[v for _, v in tables.breakeven_row(e)] for e in data.breakeven]
        _sheet(wb, "break-even", tables.BREAKEVEN_HEADERS, rows)
    elif data.study and data.study.get("price_wins"):
        heads = ["gpu", "highest multiplier it won at", "lowest multiplier it lost at", "clean"]
        rows = [
            [e["gpu"], e["won_up_to"], e["lost_from"], e["clean"]] for e in data.study["price_wins"]
        ]
        _sheet(wb, "break-even", heads, rows)


def _assumptions(wb, data: ReportData) -> None:
    rows: list[list[Any]] = [
        ["report", "source", data.source],
        ["report", "kind", data.kind],
        ["report", "recommendation", data.recommendation],
        *(["report", "note", n] for n in data.notes),
    ]
    rows += [["question", k, v] for k, v in tables.flat(data.question or {})]
    for e in data.catalog:
        rows += [[f"{e['kind']} {e['name']}", k, v] for k, v in e["fields"]]
    _sheet(wb, "assumptions", ["section", "field", "value"], rows)


def workbook(data: ReportData):
    """The workbook (openpyxl.Workbook) of a report."""
    from openpyxl import Workbook

    wb = Workbook()
    wb.remove(wb.active)
    _plans(wb, data)
    _alternatives(wb, data)
    _boms(wb, data)
    _study(wb, data)
    _binding(wb, data)
    _breakeven(wb, data)
    _assumptions(wb, data)
    for ws in wb.worksheets:  # text never a live formula; the BOM's line totals and SUM are
        formulas = (4,) if ws.title.startswith(BOM_SHEET) else ()
        for row in ws.iter_rows():
            guard_sheet_row(row, formulas)
    return wb


def save(data: ReportData, path: Path) -> None:
    workbook(data).save(path)
