"""solvers/cpsat/batch_tokens.py: tokens that depend on the batch in the CP-SAT model. At one
plan (every decision fixed), T' becomes T' + ceil(T' x over / (2 c)) with over = max(0,
GB - c), c the critical batch in sequences: the model's days are the float model's at the
tokens the batch needs (models/batch_tokens.py), rounded up; at or below the critical
batch nothing changes; with the model off no term is added."""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from helpers import small_batch_scenario, solve_at
from solvers.exhaustive import solve_exhaustive
from solvers.intmath import INT_LIMIT


def _names(form) -> set[str]:
    return {v.name for v in form.model.proto.variables}


def _hi(form, name: str) -> int:
    (var,) = [v for v in form.model.proto.variables if v.name == name]
    return int(var.domain[len(var.domain) - 1])


def _extra(form, ideal: int, over: int, crit: int) -> int:
    """ceil(T' x over / (2 c)), or with T' coarsened to steps of 2 c k where the product
    would leave int64: k x ceil(T' / (2 c k)) x over (an upper bound)."""
    if "time_per_sequence_tokens_coarse" not in _names(form):
        return math.ceil(ideal * over / (2 * crit))
    fit = (INT_LIMIT // 4) // max(1, _hi(form, "batch_over_critical"))
    k = -(-_hi(form, "time_per_sequence") // (fit * 2 * crit))
    return k * math.ceil(ideal / (2 * crit * k)) * over


def test_the_days_are_the_float_models_at_the_batchs_tokens(cat):
    s = small_batch_scenario(cat, batch_tokens_model="deepseek")
    crit = s.critical_batch_seq
    assert crit is not None and crit > 1
    plans = solve_exhaustive(s, top_k=3).plans
    batches = [p.evaluation.layout.global_batch for p in plans]
    assert any(b > crit for b in batches) and any(b <= crit for b in batches)
    for plan in plans:
        status, solver, form, value = solve_at(s, plan.config)
        assert status == cp_model.OPTIMAL
        days, want = solver.objective_value * form.days_per_unit, plan.evaluation.time_to_train_days
        assert want * (1 - 1e-8) <= days <= want * (1 + 1e-6), (days, want)
        gb = plan.evaluation.layout.global_batch
        assert value("global_batch") == gb
        over = value("batch_over_critical")
        assert over == max(0, gb - crit)
        ideal = value("time_per_sequence")
        assert value("time_per_sequence_tokens") == ideal + _extra(form, ideal, over, crit)


def test_the_tokens_term_scales_the_time_by_the_multiplier(cat):
    """The time per sequence with the batch's tokens over the ideal one is the multiplier
    max(1, (c + GB) / (2 c)), to the rounding."""
    s = small_batch_scenario(cat, batch_tokens_model="deepseek")
    crit = s.critical_batch_seq
    for plan in solve_exhaustive(s, top_k=3).plans:
        status, solver, _, value = solve_at(s, plan.config)
        assert status == cp_model.OPTIMAL
        gb = plan.evaluation.layout.global_batch
        ratio = solver.objective_value / value("time_per_sequence")
        assert math.isclose(ratio, max(1.0, (crit + gb) / (2 * crit)), rel_tol=1e-6)


def test_with_the_model_off_no_term_is_added(cat):
    s = small_batch_scenario(cat, batch_tokens_model="off")
    assert s.critical_batch_seq is None
    plan = solve_exhaustive(s).plans[0]
    status, solver, form, value = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL
    assert not {"batch_over_critical", "time_per_sequence_tokens"} & _names(form)
    assert solver.objective_value == value("time_per_sequence")
