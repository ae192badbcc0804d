"""solvers/cpsat/expert.py: the mixture-of-experts terms of the CP-SAT model's time (the
token dispatch and combine over the NICs, the expert gradients' reduction). At one plan
(every decision fixed) the model's days are the float model's (models/step.py
``ep_nic_mb_s``, ``expert_reduce_s``) rounded up, for EP inside a server and across
servers; a dense question adds no expert term."""

from __future__ import annotations

from ortools.sat.python import cp_model

from helpers import prime_scenario, solve_at, variants, wide_moe_scenario
from solvers.exhaustive import solve_exhaustive

EP_TERMS = {"ep_time_per_microbatch", "expert_dp_time"}


def _names(form) -> set[str]:
    return {v.name for v in form.model.proto.variables}


def test_moe_days_are_the_float_models_rounded_up(cat):
    s = wide_moe_scenario(cat)
    plans = solve_exhaustive(s, top_k=4).plans
    assert any(p.config.shape.ep > 1 for p in plans)
    gpus_per_server = cat.gpu("rtx4090").server.gpus_per_server
    checked, across = 0, 0
    for plan in [v for p in plans for v in variants(s, p, ms=())]:
        status, solver, form, value = solve_at(s, plan.config)
        if status != cp_model.OPTIMAL:
            continue  # a dominated plan the model leaves out
        assert plan.feasible
        assert EP_TERMS <= _names(form)
        days, want = solver.objective_value * form.days_per_unit, plan.evaluation.time_to_train_days
        assert want * (1 - 1e-8) <= days <= want * (1 + 1e-6), (plan.config, days, want)
        checked += 1
        shape = plan.config.shape
        if shape.ep * shape.tp > gpus_per_server:
            across += 1
            assert value("ep_time_per_microbatch") > 0  # the all-to-all crosses the NICs
    assert checked >= 4 and across >= 1


def test_a_dense_question_has_no_expert_terms(cat):
    s = prime_scenario(cat)
    plan = solve_exhaustive(s).plans[0]
    status, _, form, _ = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL
    assert not EP_TERMS & _names(form)
