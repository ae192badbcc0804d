"""solvers/cpsat_model.py: the CP-SAT formulation built from its parts. One literal per
candidate shape (exactly one chosen), an enforcement literal per enforced family, a valid
model within int64; at one plan (every decision fixed) the DP degree, micro-batches, batch,
GPUs and servers are the plan's."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from helpers import prime_scenario, solve_at, wide_moe_scenario
from solvers.cpsat_model import build
from solvers.exhaustive import solve_exhaustive
from solvers.families import enforced
from solvers.space import enumerate_candidates


def test_no_candidate_is_refused(cat):
    with pytest.raises(ValueError, match="no candidate shapes"):
        build(prime_scenario(cat), [])


@pytest.mark.parametrize("objective", ["time", "cost"])
def test_the_formulation_holds_a_literal_per_shape_and_family(cat, objective):
    s = prime_scenario(cat).with_changes(objective=objective)
    cands = enumerate_candidates(s)[:25]
    form = build(s, cands)
    assert form.model.validate() == ""
    assert len(form.x) == len(cands) and form.candidates == cands
    assert set(form.enforce) == set(enforced(s))
    assert set(form.nic_lits) == {"cx7-400g"}
    assert (form.days_per_unit is None) == (objective == "cost")
    assert form.cluster is not None  # capex pricing: fabric, racks and power


def test_relaxed_families_get_no_literal(cat):
    s = prime_scenario(cat)
    relaxed = s.with_changes(disabled=s.disabled | {"budget"})
    form = build(relaxed, enumerate_candidates(relaxed)[:10])
    assert (
        "budget" not in form.enforce and "budget" in build(s, enumerate_candidates(s)[:10]).enforce
    )


@pytest.mark.parametrize("question", ["prime", "wide-moe"])
def test_at_a_plan_the_decisions_are_the_plans(cat, question):
    s = prime_scenario(cat) if question == "prime" else wide_moe_scenario(cat)
    for plan in solve_exhaustive(s, top_k=3).plans:
        status, solver, form, value = solve_at(s, plan.config)
        assert status == cp_model.OPTIMAL
        lay, cfg = plan.evaluation.layout, plan.config
        assert (solver.value(form.dp), solver.value(form.m)) == (cfg.dp, cfg.microbatches)
        assert solver.value(form.nics) == cfg.nics_per_node
        assert value("global_batch") == lay.global_batch
        assert value("num_gpus") == lay.num_gpus
        assert solver.value(form.nodes) == plan.evaluation.nodes


def test_only_one_shape_is_chosen(cat):
    s = prime_scenario(cat)
    cands = enumerate_candidates(s)[:6]
    form = build(s, cands)
    form.model.add(form.x[0] == 1)
    form.model.add(form.x[1] == 1)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    assert solver.solve(form.model) == cp_model.INFEASIBLE
