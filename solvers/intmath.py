"""Integer arithmetic for the CP-SAT model: rounding floats and defining ceilings,
floors and products of variables without slack.

Usage is rounded up and capacity down (``up``, ``down``), so a plan CP-SAT admits
always passes the float model. Ceilings and floors are functional definitions
(``AddDivisionEquality`` or two linear inequalities), products bounded to fit int64.
OR-Tools is imported lazily: the families import ``up``/``down`` at startup."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ortools.sat.python import cp_model

INT_LIMIT = 2**62


def up(x: float) -> int:
    """x rounded up, forgiving float noise of 1e-9 relative."""
    return int(math.ceil(x - 1e-9 * max(1.0, abs(x))))


def down(x: float) -> int:
    """x rounded down, forgiving float noise of 1e-9 relative."""
    return int(math.floor(x + 1e-9 * max(1.0, abs(x))))


def whole_units_step(unit: Any, replica: Any, folding: Any, xp: Any = math) -> Any:
    """The step of the DP degrees d a shape can take: replica x d GPUs come in whole
    purchase units of ``unit`` GPUs, so d is a multiple of unit / gcd(replica, unit), and
    of the expert folding's step ``folding``: their least common multiple. ``xp`` gives
    ``gcd`` and ``lcm``: ``math`` for one shape (bounds.dp_step), numpy for a whole space
    at once, elementwise (presolve)."""
    return xp.lcm(unit // xp.gcd(replica, unit), folding)


def expert_folding_step(tp: Any, cp: Any, ep: Any, etp: Any, xp: Any = math) -> Any:
    """The expert folding's step of the DP degree: EP x ETP divides TP x CP x DP
    (models.memory.expert_data_parallel), so DP is a multiple of EP x ETP / gcd(EP x ETP,
    TP x CP); 1 for a dense model (EP = ETP = 1). ``xp``: ``math`` for one shape
    (Shape.dp_step), numpy for a whole space at once (presolve)."""
    folded = ep * etp
    return folded // xp.gcd(folded, tp * cp)


def lo(var: cp_model.IntVar) -> int:
    """The lower end of a variable's domain."""
    return int(var.proto.domain[0])


def hi(var: cp_model.IntVar) -> int:
    """The upper end of a variable's domain."""
    dom = var.proto.domain  # ortools' repeated field does not support negative indexing
    return int(dom[len(dom) - 1])


def ceil_by(md: cp_model.CpModel, name: str, num: Any, num_hi: int, den: int) -> cp_model.IntVar:
    """name = ceil(num / den) for a constant den >= 1 (two linear inequalities)."""
    var = md.new_int_var(0, -(-num_hi // den), name)
    md.add(den * var >= num)
    md.add(den * var <= num + den - 1)
    return var


def product(md: cp_model.CpModel, name: str, a: cp_model.IntVar, b: cp_model.IntVar):
    """name = a x b, its bounds the corners' (OverflowError beyond int64)."""
    corners = [lo(a) * lo(b), lo(a) * hi(b), hi(a) * lo(b), hi(a) * hi(b)]
    low, high = min(corners), max(corners)
    if high >= INT_LIMIT or low <= -INT_LIMIT:
        raise OverflowError(f"{name}: product bounds exceed int64; narrow the question")
    var = md.new_int_var(low, high, name)
    md.add_multiplication_equality(var, [a, b])
    return var


def ceil_div(
    md: cp_model.CpModel, name: str, num: Any, num_hi: int, den: cp_model.IntVar, low: int = 0
) -> cp_model.IntVar:
    """name = ceil(num / den) for den >= 1, num >= low (a functional definition: no slack
    to crawl): trunc((num - p) / den) + p with p = [num >= 1] (CP-SAT's division truncates
    toward zero, which is the ceiling of a quotient at or below zero).

    The denominator stays out of the numerator. Written trunc((num + den - 1) / den), as
    until 2026-12-05, the division's bounds crawled: a bound of the quotient moved den,
    which moved the numerator, one step at a time (20,000 to 60,000 integer propagations
    per branch on the pipeline sends' term; seed 189 of bench/agreement.py --full took
    11.7 s against 1.1 s now); that form was also 1 too high for a negative multiple of
    den."""
    top = max(low, num_hi)
    positive = md.new_bool_var(f"{name}_positive")
    md.add(num >= 1).only_enforce_if(positive)
    md.add(num <= 0).only_enforce_if(~positive)
    truncated = md.new_int_var(min(0, low) - 1, top, f"{name}_truncated")
    md.add_division_equality(truncated, num - positive, den)
    var = md.new_int_var(low, top, name)
    md.add(var == truncated + positive)
    return var


def floor_div(
    md: cp_model.CpModel, name: str, num: cp_model.IntVar, den: cp_model.IntVar
) -> cp_model.IntVar:
    """name = floor(num / den) for den >= 1."""
    var = md.new_int_var(0, max(0, hi(num)), name)
    md.add_division_equality(var, num, den)
    return var


def pick(md: cp_model.CpModel, name: str, bound: int, when_true, when_false, lit):
    """name = when_true if lit else when_false, within [-bound, bound]."""
    var = md.new_int_var(-bound, bound, name)
    md.add(var == when_true).only_enforce_if(lit)
    md.add(var == when_false).only_enforce_if(~lit)
    return var


def selected(lits: list, values: Iterable[Any]) -> cp_model.LinearExpr:
    """The chosen literal's value: sum_i lit_i x value_i (exactly one literal is true)."""
    from ortools.sat.python import cp_model

    return cp_model.LinearExpr.weighted_sum(lits, [int(v) for v in values])


def times(md: cp_model.CpModel, name: str, a: cp_model.IntVar, b: cp_model.IntVar):
    """name = a x b for non-negative a and b, in [0, hi(a) x hi(b)]."""
    high = hi(a) * hi(b)
    if high >= INT_LIMIT:
        raise OverflowError(f"{name}: product bounds exceed int64; narrow the question")
    var = md.new_int_var(0, high, name)
    md.add_multiplication_equality(var, [a, b])
    return var
