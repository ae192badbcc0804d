"""`designer report`: check the report extra is installed, build the report's data once
(designer.report.data), write the page and the workbook whole or not at all
(designer.output.files), and open the page where a browser exists."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from catalog.files import MAX_RESULTS_BYTES, check_input
from designer.answer import explain
from designer.errors import UsageError
from designer.output import formats as report
from designer.output.files import atomic_path, write_atomic
from designer.question.build import _read_document, load_question_file
from designer.question.saved_answer import check_answer, check_breakeven
from designer.report.data import (
    ReportData,
    answer_report,
    breakeven_report,
    compare_report,
)
from designer.report.html import page
from designer.report.study import study_report
from designer.report.xlsx import workbook
from solvers import solve

EXTRA = "pip install 'designer[report]'"


def need(module: str, option: str) -> None:
    """Exit 2 naming the report extra when ``module`` (plotly, openpyxl) is not installed."""
    try:
        importlib.import_module(module)
    except ImportError as err:
        raise UsageError(f"needs {module}; {EXTRA}", option) from err


def open_page(path: Path, browser=None) -> str:
    """Open the page in the default browser; the line to print (where there is none, say so)."""
    import webbrowser

    try:
        opener = browser or webbrowser.get()
    except webbrowser.Error:
        return f"no web browser found on this machine; open {path} in one yourself"
    if not opener.open(path.resolve().as_uri()):
        return f"the browser did not open {path}; open it yourself"
    return f"opened {path} in the browser"


def write_report(
    file: Path,
    html: Path | None,
    xlsx: Path | None,
    open_it: bool = False,
    study: Path | None = None,
    time_limit_s: float = 60.0,
) -> list[str]:
    """Write the asked files; the lines to print (what was written, where)."""
    if html is None and xlsx is None:
        raise UsageError("give --html FILE and/or --xlsx FILE to write", "--html")
    if open_it and html is None:
        raise UsageError("--open opens the page; give --html FILE too", "--open")
    if html is not None:
        need("plotly", "--html")
    if xlsx is not None:
        need("openpyxl", "--xlsx")
    data = load(file, study, time_limit_s)
    lines = []
    if html is not None:
        text = page(data)
        write_atomic(html, text, "--html")
        lines.append(f"page: {html} ({len(text.encode()) / 1e6:.2f} MB)")
    if xlsx is not None:
        with atomic_path(xlsx, "--xlsx") as tmp:
            workbook(data).save(tmp)
        lines.append(f"workbook: {xlsx}")
    if open_it and html is not None:
        lines.append(open_page(html))
    return lines


def load(path: Path, study_file: Path | None = None, time_limit_s: float = 60.0) -> ReportData:
    """The report of ``path``: a results CSV (its study file beside it, or ``study_file``),
    a ``compare --json`` result, a ``breakeven --json`` result, an ``optimize``/``explain
    --json`` answer or a question."""
    check_input(
        path, UsageError, "a saved answer, compare result or CSV", MAX_RESULTS_BYTES, "FILE"
    )
    if path.suffix.lower() == ".csv":
        return study_report(path, study_file)
    if study_file is not None:
        raise UsageError("only a sweep's results CSV takes a study file", "--study")
    doc = _read_document(path)
    if "breakeven_price_usd" in doc:
        check_breakeven(doc, str(path))  # every field the report reads, as check_answer
        return breakeven_report(path, doc)
    if "plans" not in doc or "question" not in doc:
        doc = _answered(path, time_limit_s)  # a question file: answered as explain would
    else:
        check_answer(doc, str(path))  # every field the report shows, before any is shown
    plans = doc.get("plans")
    if isinstance(plans, list) and plans and all("status" in p for p in plans):
        return compare_report(path, doc)
    return answer_report(path, doc)


def _answered(path: Path, time_limit_s: float) -> dict[str, Any]:
    """``designer explain FILE --json``'s object for a question file."""
    scenario, _ = load_question_file(path)
    res = solve(scenario, time_limit_s=time_limit_s)
    binding, conflict = explain(scenario, res, time_limit_s)
    return report.result_dict(scenario, res, binding, conflict)
