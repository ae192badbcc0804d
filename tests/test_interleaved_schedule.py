"""The interleaved schedule's micro-batch rule (issue 29): with VP > 1, megatron-core 0.19's
``forward_backward_pipelining_with_interleaving`` runs the micro-batches of a step in groups of
PP per virtual stage and raises at the first step when the last group is smaller, so the
micro-batches per step must be a multiple of PP. ``evaluate`` names it; both solvers keep it."""

from __future__ import annotations

import json

import pytest

from designer.question.build import build_scenario
from helpers import run_main
from solvers import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.space import enumerate_candidates


def test_evaluate_names_the_rule_and_the_option(capsys):
    """A layout that breaks it is a usage error naming --global-batch, in one line."""
    base = ["evaluate", "--model", "llama2-13b", "--gpu", "h100-sxm", "--tp", "1", "--dp", "36"]
    base += ["--pp", "2", "--vp", "2", "--micro-batch", "1", "--json"]
    code, out, err = run_main(capsys, [*base, "--global-batch", str(36 * 113)])
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("designer: error: --global-batch: ")
    assert "interleaved schedule (vp 2)" in err and "(113)" in err and "multiple of pp 2" in err
    code, out, err = run_main(capsys, [*base, "--global-batch", str(36 * 112)])
    assert code == 0, err
    assert not [v for v in json.loads(out)["violations"] if "interleaved" in v["detail"]]


def _vp2_shape(s):
    return [
        c
        for c in enumerate_candidates(s)
        if c.shape.gpu == "h100-sxm"
        and (c.shape.tp, c.shape.pp, c.shape.vp, c.shape.micro_batch) == (1, 2, 2, 1)
        and c.shape.recompute == "none"
        and c.shape.precision == "bf16"
    ]


def test_both_solvers_take_the_largest_multiple_of_pp():
    """Under the 16M-token ceiling, DP 36 allows 113 micro-batches of 4,096 tokens; the
    interleaved shape takes 112 (CP-SAT's ceiling dominance steps by PP: it took DP 32 with
    128 while the rule was a plain constraint, 12% slower). The 16M ceiling is the default
    with the batch-tokens model off (its own default ceiling is 3 critical batches)."""
    s = build_scenario(
        model="llama2-13b",
        tokens=1e12,
        budget=3e6,
        gpus=("h100-sxm",),
        batch_tokens_model="off",
    )
    cands = _vp2_shape(s)
    assert len(cands) == 1
    ref = solve_exhaustive(s, candidates=cands)
    got = solve_cpsat(s, candidates=cands)
    assert (ref.best.config.dp, ref.best.config.microbatches) == (36, 112)
    assert (got.best.config.dp, got.best.config.microbatches) == (36, 112)
    assert got.best.objective == pytest.approx(ref.best.objective, rel=1e-6)


def test_both_solvers_agree_on_the_shape_with_the_batch_tokens_model():
    """With the batch-tokens model on, the dominance holds up to the critical batch only
    (solvers/families/batch_ceiling.py): both solvers still agree on the shape's best."""
    s = build_scenario(model="llama2-13b", tokens=1e12, budget=3e6, gpus=("h100-sxm",))
    cands = _vp2_shape(s)
    ref = solve_exhaustive(s, candidates=cands)
    got = solve_cpsat(s, candidates=cands)
    assert got.status == ref.status == "optimal"
    assert got.best.objective == pytest.approx(ref.best.objective, rel=1e-6)
    assert got.best.config.microbatches % 2 == 0


@pytest.mark.parametrize("budget", [3e6, 8e6])
def test_optimizer_plans_keep_the_rule(budget):
    s = build_scenario(model="llama2-13b", tokens=1e12, budget=budget, gpus=("h100-sxm",))
    res = solve_cpsat(s, top_k=5)
    for plan in res.plans:
        lay = plan.evaluation.layout
        if lay.vp > 1:
            assert plan.config.microbatches % lay.pp == 0, plan.config
        assert plan.feasible
