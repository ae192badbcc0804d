"""`designer report`: check the report extra is installed, build the report's data once
(designer.report_data), write the page and the workbook whole or not at all
(designer.outputs), and open the page where a browser exists."""

from __future__ import annotations

import importlib
from pathlib import Path

from designer.errors import UsageError
from designer.outputs import atomic_path, write_atomic

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
    from designer.report_data import load

    data = load(file, study, time_limit_s)
    lines = []
    if html is not None:
        from designer.report_html import page

        text = page(data)
        write_atomic(html, text, "--html")
        lines.append(f"page: {html} ({len(text.encode()) / 1e6:.2f} MB)")
    if xlsx is not None:
        from designer.report_xlsx import workbook

        with atomic_path(xlsx, "--xlsx") as tmp:
            workbook(data).save(tmp)
        lines.append(f"workbook: {xlsx}")
    if open_it and html is not None:
        lines.append(open_page(html))
    return lines
