"""Extreme questions: a correct plan or a clear infeasible answer, never an overflow or a crash."""

from __future__ import annotations

from helpers import ideal_scenario
from models import zoo
from models.spec import TransformerSpec
from solvers import Scenario, solve_cpsat


def question(cat, spec, **kw) -> Scenario:
    base = dict(spec=spec, catalog=cat, tokens=2e12, seq_len=spec.seq_len, nics=tuple(cat.nics))
    base.update(kw)
    return ideal_scenario(**base)


def check(res) -> None:
    assert res.status in ("optimal", "feasible", "infeasible")
    for plan in res.plans:
        assert plan.feasible, plan.violations
        ev = plan.evaluation
        assert ev.step_time_s > 0 and ev.time_to_train_days > 0
        # the plan re-evaluates consistently: GPUs, batch and cost add up
        assert ev.layout.num_gpus == plan.config.dp * plan.config.shape.replica_gpus
        assert (
            ev.layout.global_batch
            == ev.layout.micro_batch * plan.config.microbatches * plan.config.dp
        )
        assert 0 < float(ev.mfu) < 1


def test_a_million_gpu_budget(cat):
    """$40B buys about a million GPUs (the decision space's cap is 2**20); with a 1B-token batch
    ceiling the plan uses well over a hundred thousand of them, within the budget."""
    s = question(
        cat,
        zoo()["llama3-405b"],
        tokens=1e15,
        budget_usd=40e9,
        gpus=("b200",),
        max_batch_tokens=2**30,
    )
    res = solve_cpsat(s)
    check(res)
    assert res.status == "optimal"
    assert res.best.num_gpus > 100_000
    assert res.best.cost_usd <= 40e9


def test_a_one_gpu_budget(cat):
    """$45K buys one H100 server's worth of a GPU: a 7B model fits on one GPU slowly, or not at all."""
    res = solve_cpsat(
        question(cat, zoo()["llama2-7b"], tokens=1e9, budget_usd=45e3, gpus=("h100-sxm",))
    )
    check(res)
    if res.best is not None:
        assert res.best.num_gpus == 1


def test_ten_trillion_parameters_on_a_small_budget_is_infeasible(cat):
    spec = TransformerSpec(
        name="10t", layers=200, hidden=65536, heads=512, vocab=256000, seq_len=8192
    )
    assert spec.params() > 1e13
    res = solve_cpsat(question(cat, spec, tokens=1e15, budget_usd=1e6, gpus=("h100-sxm",)))
    assert res.status == "infeasible" and not res.plans
