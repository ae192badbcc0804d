"""Numbers with suffixes, as the CLI contract defines them.

K, M, B, T multiply by 1e3, 1e6, 1e9, 1e12 (``2T`` tokens, ``30M`` dollars);
``d`` and ``h`` are days and hours for durations (``90d``, ``36h``).
A leading ``$`` and thousands separators (``30,000,000``) are accepted.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from pathlib import Path

import click

from designer.errors import UsageError

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
    # decimal arithmetic, so that 4.1M and 4100K are the same number; an exponent past
    # decimal's range (1e999999999) is no finite number either
    try:
        out = float(Decimal(m.group(2)) * Decimal(int(SCALE[suffix])))
    except ArithmeticError as err:  # decimal.Overflow, InvalidOperation
        raise ValueError(f"{text!r} is not a finite number") from err
    if m.group(1) == "-":
        out = -out
    if not math.isfinite(out):
        raise ValueError(f"{text!r} is not a finite number")
    return out


def parse_days(text: str) -> float:
    """'90d' -> 90, '36h' -> 1.5, '30' -> 30 (days). Raises ValueError quoting the text as
    given (not the number before its unit: '90dd' was reported as "'90d' has unknown
    suffix 'd'")."""
    raw = str(text).strip().lower()
    unit = raw[-1:] if raw[-1:] in ("d", "h") else ""
    try:
        value = parse_quantity(raw[: len(raw) - len(unit)])
    except ValueError:
        raise ValueError(
            f"{text!r} is not a duration; write days with d or hours with h after the number "
            "(90d, 36h), or a plain number of days"
        ) from None
    return value / 24.0 if unit == "h" else value


def show_limit(x: float) -> str:
    """A largest value as a message gives it: 1,048,576 or 1e13."""
    if x == int(x) and x < 1e7:
        return f"{int(x):,}"
    return f"{x:.0e}".replace("e+0", "e").replace("e+", "e")


class _Positive(click.ParamType):
    """A positive number parsed from text by ``parse`` (numbers pass as they are), at most
    ``maximum`` (the largest the solvers hold: solvers/limits.py)."""

    maximum: float | None = None
    minimum: float | None = None
    unit = ""  # after the largest value in a message

    def parse(self, text: str) -> float:
        raise NotImplementedError

    def value_of(self, value) -> float:
        """The number ``value`` stands for; ValueError saying why it is not one (the question
        schema checks a file's values with it, the option its text)."""
        if isinstance(value, bool):
            raise ValueError(f"{value!r} is not a number")
        out = float(value) if isinstance(value, (int, float)) else self.parse(value)
        if not math.isfinite(out):
            raise ValueError(f"{value!r} is not a finite number")
        if out <= 0:
            raise ValueError(f"{value!r} must be positive")
        if self.minimum is not None and out < self.minimum:
            raise ValueError(f"{value!r} is less than the least value allowed, {self.minimum:g}")
        if self.maximum is not None and out > self.maximum:
            raise ValueError(
                f"{value!r} is more than the largest value allowed, "
                f"{show_limit(self.maximum)}{self.unit}"
            )
        return out

    def positive(self, value, param, ctx) -> float:
        try:
            return self.value_of(value)
        except ValueError as err:
            self.fail(str(err), param, ctx)


class Quantity(_Positive):
    """A positive number with an optional K/M/B/T suffix."""

    name = "number"

    def __init__(
        self, integer: bool = False, maximum: float | None = None, minimum: float | None = None
    ) -> None:
        self.integer = integer
        self.maximum = maximum
        self.minimum = minimum

    def parse(self, text: str) -> float:
        return parse_quantity(text)

    def value_of(self, value) -> float:
        out = super().value_of(value)
        if self.integer and abs(out - round(out)) > 1e-9 * max(1.0, out):
            raise ValueError(f"{value!r} must be a whole number")
        return out

    def convert(self, value, param, ctx):
        out = self.positive(value, param, ctx)
        return int(round(out)) if self.integer else out


class Days(_Positive):
    """A positive duration in days: '90d', '36h' or a plain number of days."""

    name = "days"
    unit = " days"

    def __init__(self, maximum: float | None = None) -> None:
        self.maximum = maximum

    def parse(self, text: str) -> float:
        return parse_days(text)

    def value_of(self, value) -> float:
        try:
            return super().value_of(value)
        except ValueError as err:
            raise ValueError(f"{err}{_scale_hint(value, self.maximum)}") from None

    def convert(self, value, param, ctx):
        return self.positive(value, param, ctx)


_SCALE_WORDS = {"K": "thousands", "M": "millions", "B": "billions", "T": "trillions"}


def _scale_hint(value: object, maximum: float | None) -> str:
    """Why a duration past ``maximum`` is that long, when a K/M/B/T suffix made it so: '5m'
    (five minutes, meant) is 5 million days; '' otherwise."""
    raw = value.strip() if isinstance(value, str) else ""
    letter = raw[-1:].upper()
    if letter not in _SCALE_WORDS or maximum is None:
        return ""
    try:
        days = parse_quantity(raw)
    except ValueError:
        return ""
    if days <= maximum:
        return ""
    hint = f": {raw[-1]} is {_SCALE_WORDS[letter]} ({raw} = {days:,.0f} days)"
    return hint + ("; for minutes give hours (e.g. 0.1h)" if letter == "M" else "")


class Finite(click.FloatRange):
    """click.FloatRange that also refuses NaN and the infinities (which pass its bounds: NaN
    compares false with both): every float option of the designer takes it."""

    def convert(self, value, param, ctx):
        out = super().convert(value, param, ctx)
        if not math.isfinite(out):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return out


class InputPath(click.Path):
    """A file option's path (``--catalog``): an empty one is refused naming the option
    (``--catalog ""`` was read as the working folder: ".: is a directory")."""

    def __init__(self) -> None:
        super().__init__(path_type=Path)

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path; give a YAML file or leave the option out", param, ctx)
        return super().convert(value, param, ctx)


def check_ascii_numbers(args: list[str]) -> None:
    """Refuse a command-line number written with digits outside 0-9 (issue 33: Python's
    ``int`` and ``float`` read ``٣`` as 3, so ``--pue ٣`` and ``--top ٣`` were accepted
    while the suffixed options refused them): UsageError naming the option."""
    for i, arg in enumerate(args):
        flag, eq, inline = arg.partition("=")
        value = inline if arg.startswith("--") and eq else arg
        if value.isascii():
            continue
        try:
            float(value.replace(",", "").replace("_", ""))
        except ValueError:
            continue  # a name or a path, not a number
        if arg.startswith("--") and eq:
            option = flag
        else:
            option = args[i - 1] if i and args[i - 1].startswith("-") else "argument"
        raise UsageError(f"{value!r} uses digits outside 0-9; write the number with 0-9", option)


_SUFFIXED = re.compile(r"^\s*[0-9]*\.?[0-9]+\s*[kKmMbBtT]\s*$")


class WholeCount(click.IntRange):
    """A whole number in a range, in digits. A suffix (``--seq-len 8K``) is refused with
    the fix rather than read: the contract's K is 1,000, so 8K would be 8,000 tokens, where
    a sequence or batch of "8K" is almost always 8,192."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and _SUFFIXED.match(value):  # (digits and a K/M/B/T)
            self.fail(
                f"{value!r}: write the whole number in digits, e.g. 8192 (a suffix would read "
                f"K as 1,000: {parse_quantity(value):,.0f})",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)
