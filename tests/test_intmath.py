"""solvers/intmath.py: rounding floats for the CP-SAT model (usage up, capacity down,
forgiving float noise of 1e-9 relative) and the integer definitions it builds (ceilings,
floors, products, picks), each checked by solving a tiny model and comparing with the
integer arithmetic it stands for."""

from __future__ import annotations

import math

import pytest
from ortools.sat.python import cp_model

from solvers.intmath import (
    INT_LIMIT,
    ceil_by,
    ceil_div,
    down,
    floor_div,
    hi,
    lo,
    pick,
    product,
    selected,
    times,
    up,
)
from solvers.stop import stoppable_solver


def _solve(md: cp_model.CpModel) -> cp_model.CpSolver:
    solver = stoppable_solver()  # never CP-SAT's own SIGINT handler
    solver.parameters.num_workers = 1
    assert solver.solve(md) == cp_model.OPTIMAL
    return solver


@pytest.mark.parametrize(
    "x,rounded_up,rounded_down",
    [
        (2.0, 2, 2),
        (2.5, 3, 2),
        (-2.5, -2, -3),
        (0.0, 0, 0),
        (3.0 + 1e-12, 3, 3),  # float noise under 1e-9 relative is forgiven
        (3.0 - 1e-12, 3, 3),
        (1e12 + 100.0, 10**12 - 900, 10**12 + 1100),  # relative: 1,000 units forgiven at 1e12
        (3.0 + 1e-6, 4, 3),  # a real excess is not
        (3.0 - 1e-6, 3, 2),
    ],
)
def test_up_and_down_round_forgiving_float_noise(x, rounded_up, rounded_down):
    assert up(x) == rounded_up and down(x) == rounded_down
    assert isinstance(up(x), int) and isinstance(down(x), int)


def test_up_is_never_below_down_and_at_most_one_apart():
    """Where the forgiven noise is under half a unit (|x| < 5e8); above, it is 1e-9 x |x|."""
    for x in (0.1, 1.5, 7.0, 123.456, -9.99, 4e8 + 0.5):
        assert 0 <= up(x) - down(x) <= 1
        assert up(x) >= x - 1e-9 * max(1.0, abs(x))
        assert down(x) <= x + 1e-9 * max(1.0, abs(x))


def test_lo_and_hi_read_a_domain():
    md = cp_model.CpModel()
    assert (lo(md.new_int_var(-3, 17, "v")), hi(md.new_int_var(-3, 17, "w"))) == (-3, 17)
    holes = md.new_int_var_from_domain(cp_model.Domain.from_intervals([[1, 2], [5, 9]]), "h")
    assert (lo(holes), hi(holes)) == (1, 9)  # the ends of a domain with a hole


@pytest.mark.parametrize("num,den", [(0, 3), (1, 3), (3, 3), (4, 3), (17, 5), (100, 1)])
def test_ceil_by_a_constant_is_the_ceiling(num, den):
    md = cp_model.CpModel()
    n = md.new_int_var(num, num, "n")
    var = ceil_by(md, "c", n, 100, den)
    assert hi(var) == -(-100 // den)
    assert _solve(md).value(var) == math.ceil(num / den)


@pytest.mark.parametrize("num,den", [(0, 3), (1, 3), (3, 3), (4, 3), (17, 5), (9, 1)])
def test_ceil_div_and_floor_div_by_a_variable(num, den):
    md = cp_model.CpModel()
    n = md.new_int_var(num, num, "n")
    d = md.new_int_var(den, den, "d")
    c, f = ceil_div(md, "c", n, 100, d), floor_div(md, "f", n, d)
    solver = _solve(md)
    assert solver.value(c) == math.ceil(num / den)
    assert solver.value(f) == num // den


def test_ceil_div_keeps_its_lower_end():
    md = cp_model.CpModel()
    var = ceil_div(md, "c", md.new_int_var(0, 0, "n"), 10, md.new_int_var(2, 2, "d"), low=1)
    assert lo(var) == 1
    solver = stoppable_solver()  # never CP-SAT's own SIGINT handler
    assert solver.solve(md) == cp_model.INFEASIBLE  # ceil(0 / 2) = 0 is below the floor of 1


def test_product_bounds_are_the_corners_and_the_value_is_exact():
    md = cp_model.CpModel()
    a, b = md.new_int_var(-3, 5, "a"), md.new_int_var(-7, 2, "b")
    var = product(md, "p", a, b)
    assert (lo(var), hi(var)) == (-35, 21)  # 5 x -7 and -3 x -7
    md.add(a == 4)
    md.add(b == -6)
    assert _solve(md).value(var) == -24


def test_times_of_non_negative_variables():
    md = cp_model.CpModel()
    a, b = md.new_int_var(0, 6, "a"), md.new_int_var(0, 9, "b")
    var = times(md, "t", a, b)
    assert (lo(var), hi(var)) == (0, 54)
    md.add(a == 6)
    md.add(b == 7)
    assert _solve(md).value(var) == 42


@pytest.mark.parametrize("fn", [product, times])
def test_products_past_int64_raise_overflow_naming_the_variable(fn):
    md = cp_model.CpModel()
    big = md.new_int_var(0, 2**31, "a")
    with pytest.raises(OverflowError, match="the_product"):
        fn(md, "the_product", big, md.new_int_var(0, 2**31, "b"))
    assert 2**31 * 2**31 == INT_LIMIT  # exactly at the limit is refused too


def test_product_of_negative_corners_past_int64_raises():
    md = cp_model.CpModel()
    a, b = md.new_int_var(-(2**31), 0, "a"), md.new_int_var(0, 2**31, "b")
    with pytest.raises(OverflowError):
        product(md, "p", a, b)


@pytest.mark.parametrize("flag,want", [(True, 11), (False, -4)])
def test_pick_follows_its_literal(flag, want):
    md = cp_model.CpModel()
    lit = md.new_bool_var("lit")
    var = pick(md, "p", 20, 11, -4, lit)
    assert (lo(var), hi(var)) == (-20, 20)
    md.add(lit == int(flag))
    assert _solve(md).value(var) == want


def test_selected_is_the_chosen_literals_value():
    md = cp_model.CpModel()
    lits = [md.new_bool_var(f"x{i}") for i in range(3)]
    md.add_exactly_one(lits)
    md.add(lits[1] == 1)
    var = md.new_int_var(-100, 100, "v")
    md.add(var == selected(lits, [7, 2.0, -5]))  # floats become integers
    assert _solve(md).value(var) == 2


def test_whole_units_step_one_shape_and_a_space_agree():
    """d x replica fills whole purchase units and d is a multiple of the folding's step:
    unit 8, replica 12 -> d a multiple of 2; with folding 3 -> 6; numpy elementwise."""
    import numpy as np

    from solvers.intmath import whole_units_step

    assert whole_units_step(8, 12, 1) == 2
    assert whole_units_step(8, 12, 3) == 6
    assert whole_units_step(72, 8, 1) == 9  # an NVL72 rack of 8-GPU replicas
    units, replicas, foldings = np.array([8, 8, 72]), np.array([12, 12, 8]), np.array([1, 3, 1])
    assert list(whole_units_step(units, replicas, foldings, xp=np)) == [2, 6, 9]


@pytest.mark.parametrize("den", [1, 2, 3, 4])
def test_ceil_div_is_the_ceiling_on_both_sides_of_zero(den):
    """Every numerator from -7 to 7: trunc((num - p) / den) + p with p = [num >= 1] is the
    ceiling (the form with den in the numerator gave -1 for -6 / 3)."""
    for num in range(-7, 8):
        md = cp_model.CpModel()
        n = md.new_int_var(num, num, "n")
        d = md.new_int_var(den, den, "d")
        c = ceil_div(md, "c", n, 7, d, low=-7)
        assert _solve(md).value(c) == math.ceil(num / den), (num, den)
