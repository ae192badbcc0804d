"""The solvers: CP-SAT against the exhaustive oracle, sanity and monotonicity on
realistic questions, and overflow safety on an absurdly large one."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from catalog import load_catalog
from helpers import assert_solvers_agree, ideal_scenario, random_scenario
from models.comm import tp_bandwidth_limit
from models.transformer import TransformerSpec
from models.zoo import zoo
from solvers import unproved_advice
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.scenario import Scenario

# CP-SAT works in integer units (time rounded up to units of unit_s, costs to cents) and
# its plan is re-evaluated by the float model, as is the oracle's; the two optima may
# differ by that rounding (a near-tie broken the other way), never by more than this.
REL_TOL = 1e-3
TIME_LIMIT_S = 20.0
N_RANDOM = 200


# --------------------------------------------------------------------------------------
# 1. Differential test: CP-SAT against the exhaustive reference on random small questions


# Seeds where CP-SAT disagrees with the oracle (solvers as of 2026-11-30).
# Seeds whose solvers disagree, with the reason (none known).
KNOWN_DISAGREEMENTS: dict[int, str] = {}
# Known-bad seeds that otherwise run into the 20 s limit fail either way; a shorter
# limit keeps the file under ~3 minutes (the passing seeds take at most ~10 s, nearly
# all under 1 s). Remove a seed from the table once it passes (strict xfail says so).
KNOWN_TIME_LIMIT_S = 5.0


# The first N_QUICK seeds run by default; the rest are marked slow (--run-slow, as CI runs).
N_QUICK = 20


def _seed_params():
    out = []
    for seed in range(N_RANDOM):
        marks = [pytest.mark.slow] if seed >= N_QUICK else []
        if seed in KNOWN_DISAGREEMENTS:
            marks.append(pytest.mark.xfail(strict=True, reason=KNOWN_DISAGREEMENTS[seed]))
        out.append(pytest.param(seed, marks=marks, id=f"seed{seed}"))
    return out


@pytest.mark.parametrize("seed", _seed_params())
def test_cpsat_matches_exhaustive(seed, cat):
    s = random_scenario(seed, cat)
    limit = KNOWN_TIME_LIMIT_S if seed in KNOWN_DISAGREEMENTS else TIME_LIMIT_S
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=limit)
    assert_solvers_agree(ref, got, REL_TOL)


# --------------------------------------------------------------------------------------
# 2. Sanity and monotonicity on realistic questions


def scenario(spec, cat, **kw) -> Scenario:
    kw.setdefault("nics", tuple(cat.nics))
    return ideal_scenario(spec=spec, catalog=cat, seq_len=spec.seq_len, **kw)


def override(tmp_path, text: str):
    path = tmp_path / "override.yaml"
    path.write_text(text, encoding="utf-8")
    return load_catalog([path])


def test_more_budget_never_slower(cat, models):
    days = []
    for budget in (1e6, 2e6, 4e6):
        s = scenario(
            models["llama2-7b"], cat, tokens=1e11, gpus=("h100-sxm", "a100-80gb"), budget_usd=budget
        )
        res = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
        assert res.status == "optimal"
        assert res.best.feasible
        assert res.best.cost_usd <= budget * (1 + 1e-9)
        days.append(res.best.evaluation.time_to_train_days)
    assert all(days[i + 1] <= days[i] * (1 + 1e-9) for i in range(len(days) - 1)), days


@pytest.mark.parametrize("model", ["llama2-13b", "llama2-70b"])
@pytest.mark.parametrize(
    "question",
    [
        dict(objective="time", budget_usd=3e6),
        dict(objective="cost", deadline_days=90, max_batch_tokens=2**20),
    ],
    ids=["time", "cost"],
)
def test_more_memory_never_worse(tmp_path, cat, models, model, question):
    bigger = override(tmp_path, "gpus:\n  a100-40gb:\n    memory_gb: 80\n")
    assert bigger.gpu("a100-40gb").memory_gb == 80
    objectives = []
    for c in (cat, bigger):
        s = scenario(models[model], c, tokens=1e11, gpus=("a100-40gb",), **question)
        res = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
        assert res.status == "optimal"
        assert res.best.feasible
        objectives.append(res.best.objective)
    assert objectives[1] <= objectives[0] * (1 + 1e-9), objectives


def test_rtx4090_tp_stays_within_bandwidth_limit(tmp_path, models):
    c = override(
        tmp_path,
        "gpus:\n  rtx4090:\n    dense_bf16_tflops: 330\n"
        "    scale_up_bw_gb_per_s_per_direction: 32\n",
    )
    spec = models["llama2-70b"]
    assert spec.hidden == 8192
    assert tp_bandwidth_limit(spec.hidden, 32, 330) == pytest.approx(2.38, abs=0.01)
    s = scenario(spec, c, tokens=1e11, gpus=("rtx4090",), objective="time", budget_usd=5e6)
    best = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
    assert best.status == "optimal"
    assert best.best.config.shape.tp <= 2
    top = solve_cpsat(s, top_k=5, time_limit_s=TIME_LIMIT_S)
    assert len(top.plans) == 5
    for plan in top.plans:
        assert plan.config.shape.tp <= 2
        assert plan.feasible, plan.violations


@pytest.mark.parametrize("gpu", ["h100-sxm", "a100-80gb"])
def test_llama2_70b_model_states_need_14_gpus(cat, models, gpu):
    spec = models["llama2-70b"]
    assert math.ceil(16 * spec.params() / 80e9) == 14
    s = scenario(spec, cat, tokens=1e10, gpus=(gpu,), objective="cost", deadline_days=3650)
    res = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
    assert res.status == "optimal"
    assert res.best.feasible
    assert res.best.num_gpus >= 14


def test_impossible_question_is_infeasible_for_both(cat, models):
    s = scenario(models["llama3-405b"], cat, tokens=1e11, gpus=("h100-sxm", "b200"), budget_usd=1e4)
    for res in (solve_cpsat(s, time_limit_s=TIME_LIMIT_S), solve_exhaustive(s)):
        assert res.status == "infeasible"
        assert res.plans == []
        assert res.best is None


def _top3_scenario(cat, models):
    return scenario(
        models["llama2-7b"], cat, tokens=1e11, gpus=("h100-sxm", "a100-80gb"), budget_usd=2e6
    )


def test_top_k_distinct_shapes_in_order(cat, models):
    s = _top3_scenario(cat, models)
    res = solve_cpsat(s, top_k=3, time_limit_s=TIME_LIMIT_S)
    assert res.status == "optimal"
    assert len(res.plans) == 3
    shapes = [p.config.shape for p in res.plans]
    assert len(set(shapes)) == 3
    obj = [p.objective for p in res.plans]
    assert all(obj[i + 1] >= obj[i] * (1 - 1e-12) for i in range(len(obj) - 1)), obj
    assert all(p.feasible for p in res.plans)
    # the oracle's three best shapes have the same objectives
    ref = solve_exhaustive(s, top_k=3)
    for have, want in zip(obj, [p.objective for p in ref.plans], strict=True):
        assert math.isclose(have, want, rel_tol=REL_TOL), (obj, [p.objective for p in ref.plans])


def test_deterministic(cat, models):
    s = _top3_scenario(cat, models)
    runs = [solve_cpsat(s, top_k=3, time_limit_s=TIME_LIMIT_S) for _ in range(2)]
    dicts = [[p.as_dict(i + 1) for i, p in enumerate(r.plans)] for r in runs]
    assert dicts[0] and dicts[0] == dicts[1]
    assert runs[0].status == runs[1].status


# --------------------------------------------------------------------------------------
# 3. Overflow safety: a ~10T-parameter model, 1e15 tokens, a $5B budget


@pytest.mark.parametrize(
    "question",
    [
        dict(budget_usd=5e9),
        dict(budget_usd=5e9, pricing="cloud"),
        dict(budget_usd=5e9, max_batch_tokens=None),
        dict(budget_usd=5e9, pricing="cloud", max_batch_tokens=None),
        dict(objective="cost", deadline_days=3650),
    ],
    ids=["capex", "cloud", "capex-no-ceiling", "cloud-no-ceiling", "cost"],
)
def test_huge_question_never_raises(cat, question):
    spec = TransformerSpec(
        name="huge", layers=200, hidden=65536, heads=512, vocab=256000, seq_len=8192
    )
    assert spec.params() > 1e13
    s = scenario(spec, cat, tokens=1e15, gpus=("b200", "h100-sxm"), **question)
    res = solve_cpsat(s, time_limit_s=TIME_LIMIT_S)
    if res.plans:
        assert res.status in ("optimal", "feasible")
        assert all(p.feasible for p in res.plans), [p.violations for p in res.plans]
    else:
        assert res.status == "infeasible"


@pytest.mark.parametrize("caps", [(("h200", 64),), (("h100-sxm", 40), ("h200", 24))])
def test_availability_caps_agree_and_hold(cat, caps):
    spec = zoo()["llama2-7b"]
    s = ideal_scenario(
        spec=spec,
        catalog=cat,
        tokens=5e10,
        seq_len=spec.seq_len,
        gpus=("h100-sxm", "h200"),
        nics=("cx7-400g",),
        budget_usd=3e6,
        max_batch_tokens=2**20,
        gpu_caps=caps,
    )
    got, ref = solve_cpsat(s), solve_exhaustive(s)
    assert got.status == ref.status == "optimal"
    assert got.best.objective == pytest.approx(ref.best.objective, rel=1e-3)
    for plan in (got.best, ref.best):
        assert plan.feasible
        assert plan.num_gpus <= dict(caps).get(plan.config.shape.gpu, 10**9)


def test_candidates_equal_a_direct_computation(cat, models):
    """Candidates share structural checks across micro-batches and compute their step
    coefficients and memory bound on first use: the same numbers as computed directly."""
    from models.layout import Network
    from models.step import step_coefficients
    from solvers.space import (
        dp_min_for_memory,
        enumerate_candidates,
        structural_violations,
        with_memory_scale,
    )

    s = scenario(
        models["llama2-70b"],
        cat,
        tokens=2e12,
        gpus=("h100-sxm", "gb200"),
        budget_usd=3e7,
        precisions=("bf16", "fp8"),
    )
    cands = enumerate_candidates(s)
    for c in cands[:: max(1, len(cands) // 400)]:
        gpu = cat.gpu(c.shape.gpu)
        assert c.structural == structural_violations(s, c.shape, gpu)
        assert c.dp_min_memory == dp_min_for_memory(s, c.shape, gpu)
        # the nominal network: the fastest NIC the server takes, at its most NICs
        fastest = max(n.bw_gb_per_s_per_direction for n in s.nics_for(gpu.name))
        net = Network("-", max(s.nic_counts(gpu.name)), fastest)
        layout = c.shape.layout(1, max(1, c.shape.pp))
        direct = step_coefficients(s.spec, layout, s.seq_len, gpu, net, s.assumptions)
        assert c.coeffs == direct
    bigger = s.with_changes(memory_scale=2.0)
    for c, b in list(zip(cands, with_memory_scale(bigger, cands), strict=True))[::97]:
        assert b.coeffs == c.coeffs
        assert b.dp_min_memory == dp_min_for_memory(bigger, c.shape, cat.gpu(c.shape.gpu))


# ---------------------------------------------------------------- solvers.solve (__init__.py)
def test_solve_dispatches_by_solver_name(cat):
    from helpers import prime_scenario
    from solvers import solve

    s = prime_scenario(cat)
    assert solve(s).solver == "cpsat" and solve(s, "exhaustive").solver == "exhaustive"
    with pytest.raises(ValueError, match="unknown solver 'gurobi'"):
        solve(s, "gurobi")


def test_unproved_advice_names_the_faster_way_to_a_proof(cat):
    from dataclasses import replace as changed

    from helpers import prime_scenario
    from solvers import solve

    s = prime_scenario(cat)
    res = solve(s)
    slow = changed(res, status="feasible", wall_s=1e6)  # searched longer than exhaustive takes
    text = unproved_advice(s, slow)
    assert text.startswith("not proved optimal in 1000000.0 s") and "--solver exhaustive" in text
    quick = changed(res, status="unknown", wall_s=0.0, plans=[])
    text = unproved_advice(s, quick)
    assert text.startswith("no plan found in 0.0 s") and "raise --time-limit" in text


def test_advice_names_the_exhaustive_solver_when_it_would_be_faster(tco):
    res = solve_cpsat(tco)
    slow = replace(res, status="feasible", gap=0.5, wall_s=1e6)
    assert "--solver exhaustive" in unproved_advice(tco, slow)
    quick = replace(res, status="feasible", gap=0.5, wall_s=1e-6)
    advice = unproved_advice(tco, quick)
    assert "--time-limit" in advice and "--solver exhaustive" not in advice


@pytest.mark.parametrize("solver", [solve_cpsat, solve_exhaustive])
def test_a_result_without_a_plan_names_the_question_s_objective(solver):
    """An infeasible cheapest-by-deadline answer said time_to_train in days."""
    from designer.question.build import build_scenario

    cost = build_scenario(
        model="llama3-8b", tokens=3e11, gpus=("h100-sxm",), max_gpus=16, deadline=5
    )
    res = solver(cost)
    assert (res.status, res.objective_name, res.objective_unit) == ("infeasible", "cost", "USD")
    time = cost.with_changes(objective="time", deadline_days=None, budget_usd=1e3)
    res = solver(time)
    assert (res.status, res.objective_name, res.objective_unit) == (
        "infeasible",
        "time_to_train",
        "days",
    )
