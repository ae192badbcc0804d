"""Cells of the CSV files and workbooks the designer writes, safe to open in a spreadsheet
(issue 33, OWASP's CSV-injection guidance): a text cell that begins with ``=``, ``+``,
``-``, ``@``, a tab or a carriage return (a name from a catalog, model, question or study
such as ``=HYPERLINK(...)``) is written with a ``'`` before it, so that a spreadsheet shows
it as text instead of running it. Numbers are never changed: a number, or text that is a
plain decimal number (``-1.50``), is written as it is. A text cell already beginning with
``'`` gets a second one, so that ``read_cell`` gives back exactly what was escaped."""

from __future__ import annotations

import re
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
ESCAPE = "'"
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")


def is_number_text(text: str) -> bool:
    """A plain decimal number written as text (a spreadsheet reads it as that number)."""
    return _NUMBER.fullmatch(text) is not None


def text_cell(value: Any) -> Any:
    """``value`` as a CSV cell a spreadsheet shows as text: see the module's docstring."""
    if not isinstance(value, str) or not value:
        return value
    if value.startswith(ESCAPE) or (value.startswith(FORMULA_START) and not is_number_text(value)):
        return ESCAPE + value
    return value


def text_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every value of a CSV row through ``text_cell``."""
    return {k: text_cell(v) for k, v in row.items()}


def read_cell(value: str) -> str:
    """A cell as ``text_cell`` was given it (its escape removed)."""
    return value[1:] if value.startswith(ESCAPE) else value


def read_row(row: dict[str, Any]) -> dict[str, Any]:
    """Every text value of a CSV row read back through ``read_cell``."""
    return {k: read_cell(v) if isinstance(v, str) else v for k, v in row.items()}


def guard_sheet_row(cells: Any, formulas: tuple[int, ...] = ()) -> None:
    """openpyxl cells of one row: text that openpyxl would store as a formula (it begins with
    ``=``) or that begins with another formula character gets the string type and Excel's
    quote prefix (shown as text, kept as text when edited), except the columns (1-based) in
    ``formulas``, which the program writes as formulas on purpose."""
    for cell in cells:
        value = cell.value
        if cell.column in formulas or not isinstance(value, str):
            continue
        if value.startswith(FORMULA_START) and not is_number_text(value):
            cell.data_type = "s"
            cell.quotePrefix = True
