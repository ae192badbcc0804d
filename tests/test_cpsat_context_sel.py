"""solvers/cpsat/context.py's selection helpers: the chosen candidate's value (``sel``) and a
variable bounded by the candidates' values (``bounded``), solved on a context over three
shapes. A file of its own beside tests/test_cpsat_context.py (which checks the build
stages, issue 32); the fields each part fills are checked through the built model
(tests/test_cpsat_model.py and the test_cpsat_* files)."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from solvers.cpsat.context import BuildContext
from solvers.stop import stoppable_solver


def _context(cat) -> BuildContext:
    """A context holding only what ``sel`` and ``bounded`` read (the model and the shape
    literals), whatever the inputs the build hands the constructor."""
    md = cp_model.CpModel()
    ctx = object.__new__(BuildContext)
    ctx.md = md
    ctx.x = [md.new_bool_var(f"x{i}") for i in range(3)]
    md.add_exactly_one(ctx.x)
    return ctx


@pytest.mark.parametrize("chosen", [0, 1, 2])
def test_sel_and_bounded_are_the_chosen_candidates_value(cat, chosen):
    ctx = _context(cat)
    values = [7, -3, 12]
    var = ctx.bounded("v", values)
    assert (ctx.hi(var), var.proto.domain[0]) == (12, -3)
    total = ctx.md.new_int_var(-100, 100, "total")
    ctx.md.add(total == ctx.sel([1, 10, 100]))
    ctx.md.add(ctx.x[chosen] == 1)
    solver = stoppable_solver()  # never CP-SAT's own SIGINT handler
    assert solver.solve(ctx.md) == cp_model.OPTIMAL
    assert solver.value(var) == values[chosen]
    assert solver.value(total) == [1, 10, 100][chosen]


def test_bounded_keeps_zero_in_its_domain(cat):
    ctx = _context(cat)
    var = ctx.bounded("pos", [5, 6, 9])
    assert (var.proto.domain[0], ctx.hi(var)) == (0, 9)
