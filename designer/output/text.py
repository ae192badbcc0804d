"""Plain-text tables and number formatting for the CLI."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A left/right-aligned text table (numbers right-aligned)."""
    cells = [[str(c) for c in headers]] + [[fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_num(r[i]) for r in rows) if rows else False for i in range(len(headers))]
    lines = []
    for j, r in enumerate(cells):
        parts = [
            c.rjust(w) if numeric[i] else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ]
        lines.append("  ".join(parts).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):  # a hand-edited answer's NaN (issue 33)
            return str(v)
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return number(v)
    return str(v)


def exact(v: Any) -> str:
    """A value as its file holds it (``catalog show``, ``models show``): fmt, but a float with
    every digit it has, thousands grouped (1.555, 1,307.4, 1.1583e-05), never rounded."""
    if isinstance(v, float) and math.isfinite(v) and v != int(v):
        return f"{v:,}"
    return fmt(v)


def number(v: float, mid: str = ".2f") -> str:
    """A float to read: thousands without decimals, ``mid`` from 1 to 100, three figures below."""
    if abs(v) >= 100:
        return f"{v:,.0f}"
    return f"{v:{mid}}" if abs(v) >= 1 else f"{v:.3g}"


def usd(v: float | None) -> str:
    if v is None:
        return "-"
    for div, suffix, digits in ((1e9, "B", ",.2f"), (1e6, "M", ",.2f"), (1e3, "K", ",.1f")):
        if abs(v) >= div:
            return f"${v / div:{digits}}{suffix}"
    return f"${v:,.0f}"


def si(v: float) -> str:
    """2e12 -> '2T', 3.5e8 -> '350M' (the CLI's own suffixes)."""
    for div, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if abs(v) >= div:
            return f"{v / div:,.4g}{suffix}"
    return f"{v:,.4g}"


def count(n: float, noun: str, plural: str | None = None) -> str:
    """``n`` with its noun, singular for exactly one ("1 server", "2 servers", "1,035,890
    interruptions"; counts are printed whole, with thousands separators)."""
    whole = round(n)
    word = noun if whole == 1 else (plural or noun + "s")
    return f"{whole:,} {word}"
