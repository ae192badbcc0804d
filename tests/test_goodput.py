"""Goodput (issue 18): failures, checkpoints and restarts in every plan (models/goodput.py,
solvers/cpsat/goodput.py). The acceptance checks: Llama 3 405B's interruptions, goodput
falling with the GPU count, --no-failures giving the ideal figures exactly, and CP-SAT
proving the expected-time optimum the exhaustive solver finds."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from designer.question.build import build_scenario
from designer.question.fields import Question
from helpers import aws_block_days, random_scenario, run_main
from models.goodput import expected_failures, failure_model, goodput, young_interval_s
from solvers import solve
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive

LLAMA3 = dict(gpus=16_384, days=54.0, reported=419)  # Dubey et al. 2024, Table 5


def test_llama3_405b_interruptions_within_25_percent(cat):
    """16,384 H100 for 54 days: the catalog's rates expect 419 interruptions (Table 5)."""
    model = failure_model(cat.gpu("h100-sxm"), cat.facility, 405e9, 14.0)
    seconds = LLAMA3["days"] * 86400
    got = expected_failures(model.rate_per_gpu_s * LLAMA3["gpus"], seconds)
    assert abs(got - LLAMA3["reported"]) <= 0.25 * LLAMA3["reported"]


def test_llama3_405b_via_evaluate(capsys):
    """evaluate on Llama 3 405B's layout (TP 8, PP 16, DP 128 on 16,384 H100): the expected
    interruptions per day of its run, over 54 days, within 25% of 419; goodput above 90%
    (the paper: 'higher than 90% effective training time')."""
    args = [
        "evaluate", "--model", "llama3-405b", "--gpu", "h100-sxm", "--tp", "8", "--pp", "16",
        "--dp", "128", "--micro-batch", "1", "--global-batch", "2048", "--first-stage-layers",
        "7", "--last-stage-layers", "7", "--recompute", "full", "--tokens", "15T", "--json",
    ]  # fmt: skip
    code, out, err = run_main(capsys, args)
    assert code == 0, err
    doc = json.loads(out)
    per_day = doc["failures_expected"] / doc["time_to_train_days"]
    assert abs(per_day * LLAMA3["days"] - LLAMA3["reported"]) <= 0.25 * LLAMA3["reported"]
    assert 0.9 < doc["goodput"] < 1.0
    assert doc["time_to_train_days"] == pytest.approx(doc["ideal_time_days"] / doc["goodput"])


def test_young_interval_is_the_optimum(cat):
    """Young's interval minimises the first-order lost time, and the model uses it."""
    model = failure_model(cat.gpu("h100-sxm"), cat.facility, 70e9, 14.0)
    g = 1024
    delta = model.checkpoint_bytes / (g * model.snapshot_bytes_per_s_per_gpu)
    mtbf = 1.0 / (model.rate_per_gpu_s * g)
    tau = young_interval_s(delta, mtbf)
    floor_s = model.interval_floor_s
    assert model.interval_s(g) == pytest.approx(max(tau, model.storage_s_times_g() / g, floor_s))
    assert tau > floor_s  # Young's optimum itself at 1,024 GPUs (below the floor from ~4,000)
    fixed = [
        failure_model(cat.gpu("h100-sxm"), cat.facility, 70e9, 14.0, interval_min=tau * f / 60)
        for f in (0.5, 0.9, 1.1, 2.0)
    ]
    best = model.overhead(g)
    assert all(m.overhead(g) >= best - 1e-12 for m in fixed)


def test_the_interval_has_a_floor(cat):
    """Young's optimum falls below a minute on large plans (about 18 s for 405B on 16,384
    H100); the interval is raised to the catalog's floor (a run saves at iteration
    boundaries), and the run loses what the fixed interval at the floor loses, the least
    lost time of any interval at or above it, continuous at G* where the floor starts."""
    floor_s = cat.facility.checkpoint_interval_floor_min * 60.0
    assert floor_s == 60.0
    model = failure_model(cat.gpu("h100-sxm"), cat.facility, 405e9, 14.0)
    g = 16_384
    young_s = math.sqrt(2.0 * model.checkpoint_bytes / model.snapshot_bytes_per_s_per_gpu)
    young_s /= math.sqrt(model.rate_per_gpu_s) * g
    assert young_s < 30.0 and model.interval_s(g) == floor_s
    run = goodput(model, g, 54.0)
    assert run.checkpoint_interval_min == pytest.approx(1.0)
    fixed = [
        failure_model(cat.gpu("h100-sxm"), cat.facility, 405e9, 14.0, interval_min=f)
        for f in (1.0, 1.1, 2.0, 30.0)
    ]
    assert model.overhead(g) == pytest.approx(fixed[0].overhead(g), rel=1e-12)
    assert all(m.overhead(g) >= model.overhead(g) - 1e-15 for m in fixed)
    g_star = model.floor_gpus()
    assert g_star is not None and 1_000 < g_star < g
    below, above = model.overhead(g_star * (1 - 1e-9)), model.overhead(g_star)
    assert float(below) == pytest.approx(float(above), rel=1e-6)
    none = failure_model(
        cat.gpu("h100-sxm"),
        cat.facility.model_copy(update={"checkpoint_interval_floor_min": 0.0}),
        405e9,
        14.0,
    )
    assert none.floor_gpus() is None and none.interval_s(g) == pytest.approx(young_s)


@settings(max_examples=200, deadline=None)
@given(
    gpu=st.sampled_from(["h100-sxm", "a100-80gb", "b200", "gb200", "mi300x"]),
    params=st.floats(1e8, 2e12),
    scale=st.floats(0.01, 100.0),
    g1=st.integers(1, 2**20),
    g2=st.integers(1, 2**20),
)
def test_goodput_falls_with_the_gpu_count(cat, gpu, params, scale, g1, g2):
    """At fixed everything else (Young's interval), more GPUs never raise the goodput."""
    model = failure_model(cat.gpu(gpu), cat.facility, params, 14.0, scale)
    lo, hi = sorted((g1, g2))
    assert goodput(model, hi, 10.0).goodput <= goodput(model, lo, 10.0).goodput + 1e-15


def _optimize(capsys, *extra: str) -> dict:
    code, out, err = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain", "--json", *extra],
    )  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_no_failures_reproduces_the_ideal_model_exactly(capsys, cat):
    """--no-failures: the plan the ideal model (a Scenario as the library builds it, failures
    off, the code path of every plan before issue 18) finds, with its exact figures."""
    doc = _optimize(capsys, "--no-failures")
    plan = doc["plans"][0]
    ideal = build_scenario(model="llama2-7b", gpus=("h100-sxm",), tokens=1e12, budget=5e6)
    ideal = ideal.with_changes(no_failures=True)
    ref = solve(ideal).plans[0]
    for key in ("num_gpus", "tp", "pp", "dp", "micro_batch", "grad_accum", "nic"):
        assert plan[key] == ref.as_dict(1)[key]
    ev = ref.evaluation
    assert plan["time_to_train_days"] == ev.ideal_time_days  # exactly
    assert plan["time_to_train_days"] == plan["ideal_time_days"]
    assert (plan["goodput"], plan["failures_expected"]) == (1.0, 0.0)
    assert plan["checkpoint_interval_min"] is None
    assert plan["cost_usd"] == ref.cost_usd
    assert doc["question"]["no_failures"] is True


def test_failures_by_default_lengthen_the_run_and_the_rent(capsys):
    doc = _optimize(capsys, "--pricing", "cloud")
    plan = doc["plans"][0]
    assert doc["question"]["no_failures"] is False
    assert plan["time_to_train_days"] > plan["ideal_time_days"]
    assert plan["goodput"] == pytest.approx(plan["ideal_time_days"] / plan["time_to_train_days"])
    assert plan["failures_expected"] > 0 and plan["checkpoint_interval_min"] > 0
    # GPU-hours include the lost time: the rent is the expected days' GPU-hours, in the
    # block's reservation lengths (whole days here)
    assert (plan["gpu"], plan["cloud_term"]) == ("h100-sxm", "on-demand")
    per_hour = 4.916  # AWS's H100 Capacity Block, on demand (catalog/data/cloud.yaml)
    hours = plan["num_gpus"] * aws_block_days(plan["time_to_train_days"]) * 24
    assert plan["cost_usd"] == pytest.approx(hours * per_hour)


def test_checkpoint_every_fixes_the_interval(capsys):
    plan = _optimize(capsys, "--checkpoint-every", "30")["plans"][0]
    assert plan["checkpoint_interval_min"] == pytest.approx(30.0)
    young = _optimize(capsys)["plans"][0]
    assert plan["time_to_train_days"] > young["time_to_train_days"]


def test_a_large_lost_share_is_called_rough(capsys):
    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain", "--failure-scale", "10000"],
    )  # fmt: skip
    assert code == 0 and "a first-order estimate, rough" in out


def test_an_interval_shorter_than_the_storage_write_is_named(capsys):
    """--checkpoint-every below the storage write time: the text says the writes would queue."""
    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain", "--checkpoint-every", "0.01"],
    )  # fmt: skip
    assert code == 0 and "longer than the interval (the writes would queue" in out
    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain", "--checkpoint-every", "30"],
    )  # fmt: skip
    assert code == 0 and "writes would queue" not in out


def test_failure_scale_zero_is_no_lost_time(capsys):
    plan = _optimize(capsys, "--failure-scale", "0")["plans"][0]
    assert plan["goodput"] == 1.0 and plan["failures_expected"] == 0.0


def test_explanation_names_what_failures_cost(capsys):
    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain"],
    )  # fmt: skip
    assert code == 0
    assert "Failures cost " in out and "interruptions expected" in out and "goodput " in out
    assert "hot spare server" in out and "would save" in out
    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "1T", "--budget",
         "5M", "--no-explain", "--no-failures"],
    )  # fmt: skip
    assert "Failures cost" not in out


def test_answers_saved_before_goodput_were_ideal():
    q = Question.from_answer({"model": "llama2-7b", "tokens": 1e12})
    assert q.no_failures is True and q.failure_scale == 1.0


def _failing(seed: int, cat):
    """A random question with failures on: rates x 1,000 or x 100 so that small clusters feel
    them, every fourth with a fixed interval."""
    s = random_scenario(seed, cat)
    every = (None, 1.0, None, None)[seed % 4] if seed % 4 else 10.0
    return s.with_changes(
        no_failures=False,
        failure_scale=(1000.0, 100.0, 1.0)[seed % 3],
        checkpoint_every_min=every,
    )


@pytest.mark.parametrize(
    "seed", [pytest.param(s, marks=[pytest.mark.slow] if s >= 12 else []) for s in range(60)]
)
def test_cpsat_matches_exhaustive_with_failures(seed, cat):
    """The differential test with failures on: the same optimum, proved."""
    s = _failing(seed, cat)
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=60.0)
    assert (got.status == "infeasible") == (ref.status == "infeasible"), (got.status, ref.status)
    if ref.status == "infeasible":
        return
    assert got.status == "optimal"
    want, have = ref.plans[0].objective, got.plans[0].objective
    assert math.isclose(have, want, rel_tol=1e-3), (have, want, got.plans[0].config)
    for plan in got.plans:
        assert plan.feasible, plan.violations
        assert plan.evaluation.goodput is not None


def _sweep_rows(tmp_path, rest: str) -> list[dict[str, str]]:
    """The CSV rows of a study of llama2-7b on H100 with $5M and ``rest`` (axes, ...)."""
    import csv

    from helpers import run_cli

    study = tmp_path / "study.yaml"
    base = "base:\n  model: llama2-7b\n  tokens: 1T\n  budget: 5M\n  gpus: [h100-sxm]\n"
    study.write_text(base + rest, encoding="utf-8")
    out = tmp_path / "out.csv"
    result = run_cli(["sweep", str(study), "--csv", str(out)])
    assert result.exit_code == 0, result.output
    return list(csv.DictReader(out.open(encoding="utf-8")))


def test_a_study_varies_the_failure_rate(tmp_path):
    """--failure-scale is a question field, so a study's axis: more failures, fewer
    goodput and more days, the ideal time unchanged."""

    rows = _sweep_rows(tmp_path, "axes:\n  failure_scale: [0, 1, 100]\n")
    by_scale = {float(r["failure_scale"]): r for r in rows}
    assert sorted(by_scale) == [0.0, 1.0, 100.0]
    goodputs = [float(by_scale[x]["goodput"]) for x in (0.0, 1.0, 100.0)]
    assert goodputs[0] == 1.0 and goodputs[0] > goodputs[1] > goodputs[2]
    days = [float(by_scale[x]["time_to_train_days"]) for x in (0.0, 1.0, 100.0)]
    assert days[0] < days[1] < days[2]


def test_an_uncertainty_block_draws_the_failure_rate(tmp_path):
    """uncertainty.failure_scale: each sample's rates times a uniform draw, in the CSV."""

    rows = _sweep_rows(
        tmp_path,
        "axes:\n  max_batch_tokens: [4M]\n"
        "uncertainty:\n  samples: 3\n  seed: 2\n  failure_scale: [10, 1000]\n",
    )
    draws = [float(r["failure_draw"]) for r in rows]
    assert len(set(draws)) == 3 and all(10 <= d <= 1000 for d in draws)
    by_draw = sorted(rows, key=lambda r: float(r["failure_draw"]))
    goodputs = [float(r["goodput"]) for r in by_draw]
    assert goodputs == sorted(goodputs, reverse=True)


@pytest.mark.parametrize("seed", [2, 4, 11])
def test_top_k_with_failures_agrees_with_the_exhaustive_solver(seed, cat):
    """--top 4 with failures on: the same four best plans (distinct shapes), in order."""
    s = _failing(seed, cat).with_changes(
        objective="time", pricing="capex", budget_usd=5e5, deadline_days=None
    )
    got, ref = solve_cpsat(s, top_k=4), solve_exhaustive(s, top_k=4)
    assert len(got.plans) == len(ref.plans) == 4
    for a, b in zip(got.plans, ref.plans, strict=True):
        assert a.objective == pytest.approx(b.objective, rel=1e-3)
