"""Numbers with suffixes, as the CLI contract defines them.

K, M, B, T multiply by 1e3, 1e6, 1e9, 1e12 (``2T`` tokens, ``30M`` dollars);
``d`` and ``h`` are days and hours for durations (``90d``, ``36h``).
A leading ``$`` and thousands separators (``30,000,000``) are accepted.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal

import click

SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}
_NUMBER = re.compile(r"^([+-]?)\$?([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)([A-Za-z]*)$")


def parse_quantity(text: str) -> float:
    """'30M' -> 3e7. Raises ValueError with the reason."""
    raw = str(text).strip().replace(",", "").replace("_", "")
    m = _NUMBER.match(raw)
    if not m:
        raise ValueError(f"{text!r} is not a number; write e.g. 30M, 2T, 1.5e9")
    suffix = m.group(3).upper()
    if suffix not in SCALE:
        raise ValueError(f"{text!r} has unknown suffix {m.group(3)!r}; use K, M, B or T")
    # decimal arithmetic, so that 4.1M and 4100K are the same number
    out = float(Decimal(m.group(2)) * Decimal(int(SCALE[suffix])))
    if m.group(1) == "-":
        out = -out
    if not math.isfinite(out):
        raise ValueError(f"{text!r} is not a finite number")
    return out


def parse_days(text: str) -> float:
    """'90d' -> 90, '36h' -> 1.5, '30' -> 30 (days)."""
    raw = str(text).strip().lower()
    if raw.endswith("d"):
        return parse_quantity(raw[:-1])
    if raw.endswith("h"):
        return parse_quantity(raw[:-1]) / 24.0
    return parse_quantity(raw)


class _Positive(click.ParamType):
    """A positive number parsed from text by ``parse`` (numbers pass as they are)."""

    def parse(self, text: str) -> float:
        raise NotImplementedError

    def positive(self, value, param, ctx) -> float:
        if isinstance(value, (int, float)):
            out = float(value)
        else:
            try:
                out = self.parse(value)
            except ValueError as err:
                self.fail(str(err), param, ctx)
        if out <= 0:
            self.fail(f"{value!r} must be positive", param, ctx)
        return out


class Quantity(_Positive):
    """A positive number with an optional K/M/B/T suffix."""

    name = "number"

    def __init__(self, integer: bool = False) -> None:
        self.integer = integer

    def parse(self, text: str) -> float:
        return parse_quantity(text)

    def convert(self, value, param, ctx):
        out = self.positive(value, param, ctx)
        if self.integer:
            if abs(out - round(out)) > 1e-9 * max(1.0, out):
                self.fail(f"{value!r} must be a whole number", param, ctx)
            return int(round(out))
        return out


class Days(_Positive):
    """A positive duration in days: '90d', '36h' or a plain number of days."""

    name = "days"

    def parse(self, text: str) -> float:
        try:
            return parse_days(text)
        except ValueError as err:
            raise ValueError(str(err).replace("use K, M, B or T", "use d or h")) from err

    def convert(self, value, param, ctx):
        return self.positive(value, param, ctx)
