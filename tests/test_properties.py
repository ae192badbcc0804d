"""Property tests (hypothesis) of the optimiser and the CLI on small, fast questions.

Monotonicity: relaxing a question (more budget, a later deadline, more GPU memory, a higher
batch ceiling, more NIC slots, cheaper GPUs) never makes the optimum worse. Every returned
plan passes the evaluator. Through the CLI: numbers with different suffixes that mean the same
quantity give the same answer, and the same command gives byte-identical output twice.

Questions stay small (llama2-7b or an 8-layer model, one or two GPU types, batch ceilings of
256K-1M tokens) and examples are few and derandomized, so the file runs in well under a minute.
The solver properties are marked slow: they run with --run-slow (CI), not by default.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from catalog import load_catalog
from designer.numbers import parse_days, parse_quantity
from helpers import TINY, ideal_scenario, run_main
from models import TransformerSpec, zoo
from solvers import Scenario, SolveResult, solve_cpsat, solve_exhaustive

# "Never worse" is checked to 1e-9 relative on the float objectives re-evaluated from the plans
# (res.best.objective). CP-SAT optimises integer-rounded times and cents, so two optima can
# differ by rounding (a near-tie broken the other way); a violation under 1e-3 relative would be
# that rounding, anything larger a bug. None was seen at 1e-9, here or in a deeper run of 150
# examples per property (DESIGNER_PROPERTY_EXAMPLES=150, about 3 minutes).
REL = 1e-9
TIME_LIMIT_S = 30.0

CAT = load_catalog()
SPECS = {
    "llama2-7b": zoo()["llama2-7b"],
    "small": TransformerSpec(
        name="small",
        layers=8,
        hidden=1024,
        heads=16,
        kv_heads=4,
        ffn_hidden=2816,
        gated_mlp=True,
        vocab=32000,
        seq_len=2048,
    ),
}
GPU_SETS = [
    ("h100-sxm",),
    ("a100-80gb",),
    ("l40s",),
    ("h100-sxm", "a100-80gb"),
    ("rtx4090", "l40s"),
]
CEILINGS = [2**18, 2**19, 2**20]

# DESIGNER_PROPERTY_EXAMPLES=200 for a deeper (slower) search than CI's
EXAMPLES = int(os.environ.get("DESIGNER_PROPERTY_EXAMPLES", "12"))
PROPERTY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)


# --- questions -------------------------------------------------------------------------------


@st.composite
def questions(draw, objective: str | None = None, pricing: str | None = None) -> Scenario:
    """A small question: model, GPU types, tokens, pricing, batch ceiling, budget or deadline."""
    spec = SPECS[draw(st.sampled_from(sorted(SPECS)))]
    objective = objective or draw(st.sampled_from(["time", "cost"]))
    pricing = pricing or draw(st.sampled_from(["capex", "cloud"]))
    limits: dict = {}
    if objective == "time":
        # capex budgets of $100K-$30M; GPU-hours cost far less than the cluster
        low, high = (5.0, 7.5) if pricing == "capex" else (2.5, 5.0)
        limits["budget_usd"] = round(10 ** draw(st.floats(low, high)), 2)
    else:
        limits["deadline_days"] = round(draw(st.floats(0.2, 60.0)), 3)
    return ideal_scenario(
        spec=spec,
        catalog=CAT,
        tokens=draw(st.sampled_from([1e10, 2e10, 5e10])),
        seq_len=spec.seq_len,
        gpus=draw(st.sampled_from(GPU_SETS)),
        nics=tuple(CAT.nics),
        objective=objective,
        pricing=pricing,
        max_batch_tokens=draw(st.sampled_from(CEILINGS)),
        **limits,
    )


def solve(s: Scenario, top_k: int = 1) -> SolveResult:
    res = solve_cpsat(s, top_k=top_k, time_limit_s=TIME_LIMIT_S)
    assert res.status in ("optimal", "infeasible"), res.status  # small: always solved to the end
    for plan in res.plans:  # every returned plan passes the evaluator
        assert plan.feasible, plan.violations
        assert plan.violations == ()
    return res


def assert_never_worse(tight: Scenario, loose: Scenario) -> None:
    """The looser question is feasible whenever the tighter one is, and its optimum no worse."""
    a, b = solve(tight), solve(loose)
    if a.best is None:
        return
    assert b.best is not None, "relaxing the question made it infeasible"
    worse = b.best.objective - a.best.objective
    assert worse <= REL * abs(a.best.objective), (a.best.objective, b.best.objective)


def scaled_catalog(names, **factors):
    """A catalog copy with fields of the named GPUs multiplied (memory_gb=2.0, ...)."""
    gpus = dict(CAT.gpus)
    for name in names:
        g = gpus[name]
        gpus[name] = g.model_copy(update={k: getattr(g, k) * f for k, f in factors.items()})
    return dataclasses.replace(CAT, gpus=gpus)


# --- monotonicity ----------------------------------------------------------------------------


@pytest.mark.slow
@PROPERTY
@given(questions("time"), st.floats(1.05, 10.0))
def test_larger_budget_never_slower(s, factor):
    assert_never_worse(s, s.with_changes(budget_usd=s.budget_usd * factor))


@pytest.mark.slow
@PROPERTY
@given(questions("cost"), st.floats(1.05, 10.0))
def test_later_deadline_never_costlier(s, factor):
    assert_never_worse(s, s.with_changes(deadline_days=s.deadline_days * factor))


@pytest.mark.slow
@PROPERTY
@given(questions(), st.floats(1.1, 3.0))
def test_more_gpu_memory_never_worse(s, factor):
    bigger = scaled_catalog(s.gpus, memory_gb=factor)
    assert_never_worse(s, s.with_changes(catalog=bigger))


@pytest.mark.slow
@PROPERTY
@given(questions(), st.sampled_from([2, 4]))
def test_higher_batch_ceiling_never_worse(s, factor):
    loose = s.with_changes(max_batch_tokens=s.max_batch_tokens * factor)
    assert_never_worse(s, loose)


@pytest.mark.slow
@PROPERTY
@given(questions(), st.integers(1, 8))
def test_more_nic_slots_never_worse(s, extra):
    assert_never_worse(s, s.with_changes(extra_nic_slots=extra))


@pytest.mark.slow
@PROPERTY
@given(questions(), st.floats(0.3, 0.95))
def test_cheaper_gpus_never_worse(s, factor):
    """Lower purchase and rental prices: never costlier by a deadline, never slower on a budget."""
    cheaper = scaled_catalog(s.gpus, price_usd=factor, cloud_usd_per_gpu_hour=factor)
    assert_never_worse(s, s.with_changes(catalog=cheaper))


@pytest.mark.slow
@PROPERTY
@given(questions(), st.sampled_from([0.02, 0.05, 0.2]), st.floats(1.2, 4.0))
def test_higher_power_cap_never_worse(s, cap_mw, factor):
    assert_never_worse(
        s.with_changes(power_cap_mw=cap_mw), s.with_changes(power_cap_mw=cap_mw * factor)
    )


@pytest.mark.slow
@PROPERTY
@given(questions(), st.integers(1, 4), st.integers(1, 4))
def test_more_racks_never_worse(s, racks, extra):
    assert_never_worse(s.with_changes(max_racks=racks), s.with_changes(max_racks=racks + extra))


@pytest.mark.slow
@PROPERTY
@given(questions(), st.sampled_from([1.25, 1.5, 2.0]))
def test_lower_pue_never_worse_under_tco_and_a_power_cap(s, pue):
    """A better facility (lower PUE) draws less: never slower or costlier under TCO pricing."""
    s = s.with_changes(pricing="tco", power_cap_mw=0.1)
    worse_site = s.with_changes(catalog=CAT.with_facility(pue=pue))
    assert_never_worse(worse_site, s.with_changes(catalog=CAT.with_facility(pue=1.0)))


# --- every plan passes the evaluator ---------------------------------------------------------


def check_top_plans(s: Scenario) -> None:
    res = solve(s, top_k=3)  # solve() checks that each plan passes the evaluator
    objectives = [p.objective for p in res.plans]
    for better, worse in zip(objectives, objectives[1:], strict=False):
        assert worse >= better * (1 - REL), objectives  # best first
    for plan in res.plans:
        if s.objective == "time":
            assert plan.cost_usd <= s.budget_usd * (1 + 1e-6)
        else:
            assert plan.evaluation.time_to_train_days <= s.deadline_days * (1 + 1e-6)
        assert plan.evaluation.layout.global_batch * s.seq_len <= s.max_batch_tokens


@pytest.mark.slow
@PROPERTY
@given(st.one_of(questions("time"), questions("cost", "capex")))
def test_top_plans_pass_the_evaluator(s):
    check_top_plans(s)


@pytest.mark.slow
@PROPERTY
@given(questions("cost", "cloud"))
def test_top_plans_in_order_cloud_cost(s):
    check_top_plans(s)


def test_top_plans_cloud_cost_example():
    """The smallest reproduction: the exhaustive oracle's 2nd and 3rd best cost $1,009 and $1,031."""
    s = ideal_scenario(
        spec=SPECS["llama2-7b"],
        catalog=CAT,
        tokens=1e10,
        seq_len=4096,
        gpus=("h100-sxm",),
        nics=tuple(CAT.nics),
        objective="cost",
        pricing="cloud",
        deadline_days=1.0,
        max_batch_tokens=2**18,
    )
    res = solve(s, top_k=3)
    ref = solve_exhaustive(s, top_k=3)
    assert len(res.plans) == len(ref.plans) == 3
    for have, want in zip(res.plans, ref.plans, strict=True):
        assert abs(have.objective - want.objective) <= 1e-3 * want.objective, (
            [p.objective for p in res.plans],
            [p.objective for p in ref.plans],
        )


# --- the CLI: scale invariance and determinism -----------------------------------------------


def answer(capsys, args: list[str]) -> dict:
    """optimize --json without the "solve" key (it holds the wall time)."""
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code == 0, err
    d = json.loads(out)
    assert d["status"] == "optimal" and d["plans"]
    d.pop("solve")
    return d


def with_option(args: list[str], option: str, value: str) -> list[str]:
    """``args`` with ``option`` set to ``value`` (replaced if present, else appended)."""
    if option in args:
        i = args.index(option)
        return [*args[: i + 1], value, *args[i + 2 :]]
    return [*args, option, value]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(
    st.integers(1, 10**6),
    st.sampled_from([("K", "", 3), ("M", "K", 3), ("B", "M", 3), ("T", "B", 3), ("T", "M", 6)]),
)
def test_parse_quantity_scale_invariant_for_whole_numbers(n, suffixes):
    big, small, digits = suffixes
    assert parse_quantity(f"{n}{big}") == parse_quantity(f"{n}{'0' * digits}{small}")
    assert parse_quantity(f"{n:,}{big}") == parse_quantity(f"{n}{big}")


def test_parse_quantity_examples():
    assert parse_quantity("30000K") == parse_quantity("30M") == 30e6
    assert parse_quantity("2000B") == parse_quantity("2T") == 2e12
    assert parse_days("2160h") == parse_days("90d") == 90.0


@pytest.mark.parametrize("short,long", [("4.1M", "4100K"), ("0.27T", "270B"), ("0.067B", "67M")])
def test_parse_quantity_scale_invariant_for_decimals(short, long):
    assert parse_quantity(short) == parse_quantity(long)


@pytest.mark.parametrize(
    "option,first,second,extra",
    [
        ("--budget", "30000K", "30M", []),
        ("--tokens", "2000B", "2T", ["--budget", "30M"]),
        ("--max-batch-tokens", "1000K", "1M", ["--budget", "30M"]),
        ("--max-gpus", "0.064K", "64", ["--budget", "30M"]),
        ("--deadline", "720h", "30d", []),
        pytest.param(
            "--budget",
            "4.1M",
            "4100K",
            [],
        ),
    ],
)
def test_optimize_scale_invariant(capsys, option, first, second, extra):
    args = [*TINY, *extra]
    a = answer(capsys, with_option(args, option, first))
    b = answer(capsys, with_option(args, option, second))
    assert a == b


@pytest.mark.parametrize(
    "extra",
    [
        ["--budget", "3M", "--top", "3"],
        ["--deadline", "30d", "--pricing", "cloud", "--top", "2"],
        ["--budget", "3M", "--explain"],  # binding constraints too
    ],
    ids=["time-top3", "cost-cloud-top2", "time-explain"],
)
def test_optimize_deterministic(capsys, tmp_path: Path, extra):
    outputs, csvs = [], []
    for i in range(2):
        csv_file = tmp_path / f"plans{i}.csv"
        code, out, err = run_main(capsys, [*TINY, *extra, "--json", "--csv", str(csv_file)])
        assert code == 0, err
        d = json.loads(out)
        d.pop("solve")
        outputs.append(json.dumps(d, sort_keys=True).encode())
        csvs.append(csv_file.read_bytes())
    assert outputs[0] == outputs[1]
    assert csvs[0] == csvs[1]
    assert csvs[0].count(b"\n") >= 2  # a header and at least one plan
