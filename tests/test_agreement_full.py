"""Differential test over the whole question space: CP-SAT against the exhaustive solver on
questions drawn by bench/agreement.py's generator (full_question), every option the CLI
accepts, with small models so that CI stays fast (``python bench/agreement.py --full``
runs 200 full-size ones)."""

from __future__ import annotations

import math

import pytest

from designer.errors import UsageError
from designer.question.build import build_scenario
from helpers import load_bench
from solvers import FAMILIES, solve_cpsat, solve_exhaustive
from solvers.cpsat.solve import Resolve, resolve_cpsat
from solvers.purchase_rule import idle_purchases

# the heavy differential test: skipped unless --run-slow (CI runs it)
pytestmark = pytest.mark.slow

agreement = load_bench("agreement.py", "bench_agreement")

N_SMALL = 60
TIME_LIMIT_S = 30.0


@pytest.mark.parametrize("seed", range(N_SMALL))
def test_cpsat_matches_exhaustive_over_the_whole_space(seed):
    kw, top_k = agreement.full_question(seed, small=True)
    try:
        s = build_scenario(**kw)
    except UsageError:  # the CLI refuses it (exit 2), e.g. fp8 on GPUs without it
        return
    ref = solve_exhaustive(s, top_k=top_k)
    got = solve_cpsat(s, top_k=top_k, time_limit_s=TIME_LIMIT_S)
    question = agreement.describe(kw, top_k)
    assert got.status in ("optimal", "infeasible"), (got.status, got.gap, question)
    assert (got.status == "infeasible") == (ref.status == "infeasible"), question
    want = [p.objective for p in ref.plans]
    have = [p.objective for p in got.plans]
    assert len(have) == len(want), (have, want, question)
    for x, y in zip(have, want, strict=True):  # values: tied plans may differ in shape
        assert math.isclose(x, y, rel_tol=agreement.REL_TOL), (have, want, question)
    for plan in got.plans:
        assert plan.feasible, plan.violations
    for plan in [*got.plans, *ref.plans]:  # nothing bought without a return (issue 31)
        assert not idle_purchases(s, plan), (plan.config, question)
    assert len({p.config.shape for p in got.plans}) == len(got.plans)


def test_generator_draws_every_option():
    """200 full-size draws (the --full benchmark's) cover every option the issue lists, and
    the CLI's own build_scenario accepts each."""
    draws = [agreement.full_question(seed) for seed in range(200)]
    kws = [kw for kw, _ in draws]
    assert {kw["pricing"] for kw in kws} == {"capex", "cloud", "tco"}
    assert any(kw["pricing"] == "tco" and "lifetime_years" in kw for kw in kws)
    for option in ("pue", "usd_per_kwh", "power_cap", "max_racks", "max_gpus", "gpu_caps"):
        assert any(option in kw for kw in kws), option
    ignored = {f for kw in kws for f in kw.get("ignore", ())}
    assert ignored == set(FAMILIES)
    assert {kw["precision"] for kw in kws} == {"bf16", "fp8", "any"}
    assert {kw["seq_len"] for kw in kws} == set(agreement.SEQ_LENS)
    assert max(k for _, k in draws) == 10 and min(k for _, k in draws) == 1
    budgets = [kw["budget"] for kw in kws if "budget" in kw]
    deadlines = [kw["deadline"] for kw in kws if "deadline" in kw]
    assert max(budgets) / min(budgets) > 1e3 and max(deadlines) / min(deadlines) > 1e2
    accepted = 0
    for kw in kws[:40]:
        try:
            build_scenario(**kw)
            accepted += 1
        except UsageError:  # e.g. fp8 on GPUs without it: the CLI refuses it too
            pass
    assert accepted >= 30


def test_the_draws_plan_past_the_critical_batch():
    """The small draws exercise the batch-tokens model where it charges (issue 31 item 1):
    of the first 60 questions the CLI accepts, 7 have a CP-SAT plan past the critical
    batch (README "Tokens that depend on the batch"), each within the model's cap. (10
    before the warm start tried the micro-batch counts at the critical batch: among plans
    of equal objective, every value still the reference's, CP-SAT now keeps more of those
    at or below it.)"""
    past = 0
    for seed in range(N_SMALL):
        kw, top_k = agreement.full_question(seed, small=True)
        try:
            s = build_scenario(**kw)
        except UsageError:
            continue
        crit = s.critical_batch_seq
        plans = solve_cpsat(s, top_k=top_k, time_limit_s=TIME_LIMIT_S).plans
        batches = [p.evaluation.layout.global_batch for p in plans]
        if crit is not None and any(b > crit for b in batches):
            past += 1
            assert max(batches) <= s.model_batch_cap_seq
    assert past == 7


def test_seed_189_top_7_proved_and_agreeing():
    """Full-size seed 189 (Llama 3 8B at 8K, time objective, TCO, failures x 100, top 7):
    CP-SAT did not prove its top 7 within 60 s and its 5th-7th plans differed from the
    exhaustive solver's. The warm start's largest micro-batch count was far past the
    critical batch (an incumbent 8% off), and each shape's sub-solve left the incumbent to
    CP-SAT's objective bound, which a one-worker fixed search applies only after its start
    (solvers/cpsat/solve.py _solve_shape). CP-SAT's deterministic effort bounds the solve (40,
    each shape's sub-solve a seventh; the slowest take about 2), so that the answer does
    not depend on the machine's load: 46 s of wall time alone on 2 shared cores, and
    about 110 s for the reference."""
    kw, top_k = agreement.full_question(189)
    s = build_scenario(**kw)
    got = resolve_cpsat(s, Resolve(effort=40.0), top_k=top_k, time_limit_s=600.0)
    ref = solve_exhaustive(s, top_k=top_k)
    assert got.status == "optimal", (got.status, got.gap)
    assert agreement.agree([p.objective for p in got.plans], [p.objective for p in ref.plans])
