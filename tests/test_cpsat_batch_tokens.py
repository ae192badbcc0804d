"""solvers/cpsat/batch_tokens.py: tokens that depend on the batch in the CP-SAT model. At one
plan (every decision fixed), T' becomes T' + ceil(T' x over / (2 c)) with over = max(0,
GB - c), c the critical batch in sequences: the model's days are the float model's at the
tokens the batch needs (models/batch_tokens.py), rounded up; at or below the critical
batch nothing changes; with the model off no term is added."""

from __future__ import annotations

import math

from ortools.sat.python import cp_model

from helpers import small_batch_scenario, solve_at
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.intmath import INT_LIMIT


def _names(form) -> set[str]:
    return {v.name for v in form.model.proto.variables}


def _hi(form, name: str) -> int:
    (var,) = [v for v in form.model.proto.variables if v.name == name]
    return int(var.domain[len(var.domain) - 1])


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
        extra = -(-ideal * over // (2 * crit))
        assert value("time_per_sequence_tokens") == ideal + extra


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


def _toy_past_the_critical_batch(**question):
    """1 layer 8,192 wide, 8-token sequences on rented MI355X: the time per sequence x the
    batch's excess over the critical batch leaves int64 (a differential fuzz's minimal case)."""
    from designer.question.build import build_scenario
    from models.transformer import TransformerSpec

    spec = TransformerSpec(
        name="toy", layers=1, hidden=8192, heads=1, kv_heads=1, ffn_hidden=8, vocab=8, seq_len=8
    )
    common = dict(gpus=("mi355x",), nics=("cx7-400g",), pricing="cloud", evidence="any")
    return build_scenario(model=spec, tokens=3.5e11, no_failures=True, **common, **question)


def test_the_extra_tokens_are_exact_where_the_product_leaves_int64():
    """Split into two words (_split_extra), the term is ceil(T' x over / (2 c)) to the unit,
    where the single product would overflow."""
    s = _toy_past_the_critical_batch(budget=5e6)
    plan = solve_exhaustive(s).plans[0]
    status, _, form, value = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL
    assert "time_per_sequence_tokens_high_word" in _names(form)
    ideal, over = value("time_per_sequence"), value("batch_over_critical")
    top = _hi(form, "time_per_sequence") * _hi(form, "batch_over_critical")
    assert over > 0 and top >= INT_LIMIT // 4  # the single product's bounds would not fit
    extra = -(-ideal * over // (2 * s.critical_batch_seq))
    assert value("time_per_sequence_tokens") == ideal + extra


def test_cpsat_ranks_the_dp_degrees_of_that_toy_as_the_exhaustive_solver():
    """Both bounds it once took were too coarse for the 0.12% between its two best DP degrees
    (2,048 against 2,040 under a budget) and made the exhaustive plan miss a 0.02-day
    deadline in CP-SAT's model (0.84% dearer)."""
    for question in (dict(budget=5e6), dict(deadline=0.02)):
        s = _toy_past_the_critical_batch(**question)
        want, got = solve_exhaustive(s).plans[0], solve_cpsat(s).plans[0]
        assert got.config.dp == want.config.dp, question
        assert math.isclose(got.objective, want.objective, rel_tol=1e-9), question
