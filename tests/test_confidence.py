"""designer/confidence.py: how sure the ranking of optimize's first two plans is (issue 35):
the measured share of layout pairs ordered right at the plans' margin, and a note when the
two plans differ in GPU type or count."""

from __future__ import annotations

from dataclasses import replace

from designer.confidence import plan_ranking, ranking_dict, ranking_text
from helpers import prime_scenario
from models.ranking import ranking_confidence
from solvers.cpsat.solve import solve_cpsat


def test_fewer_than_two_plans_have_no_ranking(cat):
    res = solve_cpsat(prime_scenario(cat))
    assert len(res.plans) == 1
    assert plan_ranking(res) is None and ranking_dict(res) is None and ranking_text(res) is None


def test_the_ranking_is_the_margins_measured_share(cat):
    res = solve_cpsat(prime_scenario(cat), top_k=2)
    first, second = (float(p.objective) for p in res.plans)
    conf = plan_ranking(res)
    assert conf == ranking_confidence(first, second)
    assert conf.margin == second / first - 1.0 >= 0  # plan 2 is no better than plan 1
    doc = ranking_dict(res)
    assert doc == {**conf.as_dict(), "same_hardware": doc["same_hardware"]}
    same = (res.plans[0].evaluation.gpu, res.plans[0].num_gpus) == (
        res.plans[1].evaluation.gpu,
        res.plans[1].num_gpus,
    )
    assert doc["same_hardware"] is same
    text = ranking_text(res)
    assert text.startswith(conf.sentence())
    assert ("evidence ranges matter too" in text) is (not same)


def test_plans_on_other_hardware_say_their_evidence_matters(cat):
    res = solve_cpsat(prime_scenario(cat), top_k=2)
    first, second = res.plans
    bigger = replace(second, evaluation=replace(second.evaluation, gpu="h200"))
    other = replace(res, plans=[first, bigger])
    assert ranking_dict(other)["same_hardware"] is False
    assert ranking_text(other).endswith(
        "(The two plans differ in GPU type or count: their evidence ranges matter too.)"
    )
