"""solvers/cpsat/cluster.py: the cluster around the GPUs in the CP-SAT model (servers,
fabric switches and links, racks, IT power). At one plan (every decision fixed) the servers
are the float model's (models/cost.py Cluster); a larger fabric tree, more racks or more
power are admitted (they only add cost, so no optimum takes them): the time objective
leaves them at or above the float model's, and an objective that pays for them brings
each to the float model's exactly (models/fabric.py size_fabric, models/cost.py)."""

from __future__ import annotations

import pytest
from ortools.sat.python import cp_model

from designer.question.build import build_scenario
from helpers import prime_scenario, solve_at, wide_moe_scenario
from solvers.exhaustive import solve_exhaustive

QUESTIONS = {
    "prime-3M": lambda cat: prime_scenario(cat),
    "prime-30M": lambda cat: prime_scenario(cat).with_changes(budget_usd=3e7, tokens=1e12),
    "wide-moe": lambda cat: wide_moe_scenario(cat),
    # one NVL72 rack: 18 trays, one scale-up domain, no fabric (models/scaleup.py
    # domain_servers); CP-SAT's fabric literal was on from two servers up
    "nvl72-5M": lambda cat: build_scenario(budget=5e6, gpus=("gb200",), evidence="any"),
}


def _counts(value, nic: str) -> tuple[int, int, int, int]:
    return (
        value("racks"),
        value("it_power_w"),
        value(f"switches[{nic}]"),
        value(f"links[{nic}]"),
    )


def _float_counts(plan) -> tuple[int, int, int, int]:
    cl = plan.evaluation.cluster
    return cl.racks, cl.it_power_w, cl.fabric.switches, cl.fabric.links


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_under_the_time_objective_the_cluster_is_at_least_the_float_models(cat, question):
    s = QUESTIONS[question](cat)
    for plan in solve_exhaustive(s, top_k=2).plans:
        status, _, form, value = solve_at(s, plan.config)
        assert status == cp_model.OPTIMAL and form.cluster is not None
        nic = plan.config.nic
        assert value("servers") == plan.evaluation.cluster.servers
        got, want = _counts(value, nic), _float_counts(plan)
        assert all(g >= w for g, w in zip(got, want, strict=True)), (got, want)
        tiers = plan.evaluation.cluster.fabric.tiers
        if tiers == 0:  # one scale-up domain: the fabric is off, not a tree of 0 tiers
            assert value(f"fabric[{nic}]") == 0
        else:
            assert tiers in form.cluster.tiers[nic]


@pytest.mark.parametrize("question", list(QUESTIONS))
def test_under_tco_every_count_is_the_float_models(cat, question):
    s = QUESTIONS[question](cat).with_changes(objective="cost", pricing="tco")
    for plan in solve_exhaustive(s, top_k=2).plans:
        status, _, _, value = solve_at(s, plan.config)
        assert status == cp_model.OPTIMAL
        assert value("servers") == plan.evaluation.cluster.servers
        assert _counts(value, plan.config.nic) == _float_counts(plan)


def test_a_rented_question_models_no_cluster(cat):
    s = prime_scenario(cat).with_changes(pricing="cloud")
    plan = solve_exhaustive(s).plans[0]
    status, _, form, _ = solve_at(s, plan.config)
    assert status == cp_model.OPTIMAL and form.cluster is None


def _saturating_cost(most: float | None) -> tuple[cp_model.CpModel, cp_model.IntVar]:
    """product_cents of two factors fixed at the top of ranges wide enough to saturate: a
    true cost of about 2^66 units (far past any budget)."""
    from solvers.cpsat.cluster import product_cents

    md = cp_model.CpModel()
    amount = md.new_int_var(2**30, 2**30, "amount")
    per_seq = md.new_int_var(2**30, 2**30, "per_seq")
    cost = product_cents(md, "c", amount, (1, 2**30), per_seq, (1, 2**30), 64.0, most=most)
    return md, cost


@pytest.mark.parametrize("budget_units", [1e18, 2**59])
def test_a_saturated_cost_stays_above_the_largest_budget(budget_units):
    """A cost too wide for int64 saturates (min(product, cap)); the cap was 2^59 units,
    under a $10T TCO budget's 1e18 (solvers.limits.MAX_BUDGET_USD): CP-SAT admitted a
    plan the evaluator priced 18% over its budget (751K H100 on 1e18 tokens at $100/kWh,
    an internal error). Saturated, the cost is still over every budget up to the largest."""
    md, cost = _saturating_cost(budget_units)
    md.add(cost <= int(budget_units))
    assert cp_model.CpSolver().solve(md) == cp_model.INFEASIBLE


def test_a_budget_past_the_saturation_level_is_refused_not_admitted():
    from solvers.cpsat.cluster import SATURATED_UNITS

    with pytest.raises(OverflowError, match="saturate"):
        _saturating_cost(float(SATURATED_UNITS))
    md, cost = _saturating_cost(None)  # no budget (the conflict search): it saturates
    assert cp_model.CpSolver().solve(md) == cp_model.OPTIMAL
