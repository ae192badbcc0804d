"""solvers/cpsat/time.py: the time part of the CP-SAT model. At one plan (every decision
fixed), the model's time per sequence in days is the float model's, rounded up: never below
it by more than the 1e-9 relative noise solvers/intmath.py forgives, and above it by a
tiny fraction (the units are fine: the step is ~1e12 of them)."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from helpers import prime_scenario, solve_at, variants
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.intmath import INT_LIMIT, hi

ROUNDED_UP = 1e-6  # the most the model's time exceeds the float model's, relative


def _days_agree(s, plans) -> int:
    """Each plan CP-SAT admits is feasible in the float model, with the same days rounded up
    (the model may leave out a dominated plan: a smaller batch than the ceiling allows).
    Returns how many were admitted."""
    admitted = 0
    for plan in plans:
        status, solver, form, _ = solve_at(s, plan.config)
        if status == cp_model.OPTIMAL:
            assert plan.feasible, (plan.config, plan.violations)
            admitted += 1
            days = solver.objective_value * form.days_per_unit
            want = plan.evaluation.time_to_train_days
            assert want * (1 - 1e-8) <= days <= want * (1 + ROUNDED_UP), (days, want)
    return admitted


@pytest.mark.parametrize("failures", [False, True], ids=["ideal", "failures"])
def test_the_models_days_are_the_float_models_rounded_up(cat, failures):
    s = prime_scenario(cat).with_changes(no_failures=not failures)
    plans = solve_exhaustive(s, top_k=4).plans
    assert len(plans) == 4
    assert _days_agree(s, plans) == 4  # the reference's best plans are all admitted
    _days_agree(s, [v for p in plans[:2] for v in variants(s, p)[1:]])


def test_the_time_unit_is_fine_and_fits_int64(cat):
    s = prime_scenario(cat)
    plan = solve_exhaustive(s).plans[0]
    status, solver, form, value = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL
    assert form.days_per_unit is not None and form.days_per_unit > 0
    per_seq = value("time_per_sequence")
    assert per_seq == solver.objective_value  # the time objective is T'
    assert per_seq > 1e9  # a unit is under a billionth of the time: rounding is noise
    assert hi(form.objective) < INT_LIMIT


def test_a_cost_question_has_no_days_per_unit(cat):
    s = prime_scenario(cat).with_changes(objective="cost")
    plan = solve_exhaustive(s).plans[0]
    status, _, form, value = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL and form.days_per_unit is None
    assert value("time_per_sequence") > 0  # the time is still modelled (the deadline reads it)


def test_a_reduction_far_shorter_than_its_overlap_window_is_admitted(cat):
    """A 2-layer, 8-wide model: the gradient reduction (a few hundred bytes) hides behind a
    backward of launch overheads with room to spare, so the reduction less its window is
    far below zero. Its variable's domain once stopped at minus the reduction's own bound,
    which cut every plan off: CP-SAT answered infeasible where the exhaustive solver (and
    evaluate) found plans. Both solvers now give the same optimum."""
    from helpers import ideal_scenario
    from models.transformer import TransformerSpec

    toy = TransformerSpec(
        name="toy8", layers=2, hidden=8, heads=1, ffn_hidden=8, vocab=8, seq_len=8
    )
    s = ideal_scenario(
        spec=toy, catalog=cat, tokens=1e9, seq_len=8, gpus=("h100-sxm",),
        nics=("cx6-200g",), objective="time", pricing="capex", budget_usd=30e6,
    )  # fmt: skip
    reference = solve_exhaustive(s)
    assert reference.status == "optimal" and reference.best is not None
    res = solve_cpsat(s)
    assert res.status == "optimal", res.status
    assert res.best.objective == pytest.approx(reference.best.objective, rel=1e-6)
    status, _, _, value = solve_at(s, reference.best.config)
    assert status == cp_model.OPTIMAL
    assert value("dp_time_less_overlap") < -value("dp_intra_part") - 1  # the window is longer
