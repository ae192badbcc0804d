"""Evidence behind every plan: the measured ranges a profile's residuals imply, in every output."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from catalog import load_catalog
from catalog.specs import STACKS, Evidence, GPUSpec
from designer.output.formats import CSV_COLUMNS, EVIDENCE_COLUMNS
from helpers import aws_block_days, run_cli, run_main
from models import Hardware, Layout, evaluate, resolve_model
from models.evidence_range import (
    band,
    cost_range,
    evidence_line,
    extrapolated_band,
    measured_range,
    ratio_bounds,
    time_independent_cost_usd,
)
from solvers import PLAN_COLUMNS

MEASURED_GPU = "h100-sxm"
EV = {
    "runs": 40,
    "mape_pct": 6.1,
    "worst_pct": 18.0,
    "error_lo_pct": -12.0,
    "error_hi_pct": 18.0,
    "sets": "test runs",
}
QUESTION = [
    "--model",
    "llama2-7b",
    "--tokens",
    "100B",
    "--budget",
    "2M",
    "--max-batch-tokens",
    "1M",
    "--no-explain",
]


def _evidence(**changes) -> Evidence:
    return Evidence.model_validate({**EV, **changes})


def _override_doc(gpu: str, ev: dict) -> dict:
    """A --catalog file that gives ``gpu`` measured runs under every stack (whichever way the
    catalog stores evidence: per stack in ``measured``, or in each profile)."""
    if "measured" in GPUSpec.model_fields:
        return {"gpus": {gpu: {"measured": dict.fromkeys(STACKS, ev)}}}
    return {"gpus": {gpu: {"stacks": {s: {"evidence": ev} for s in STACKS}}}}


@pytest.fixture(scope="module")
def override(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("evidence") / "measured.yaml"
    path.write_text(yaml.safe_dump(_override_doc(MEASURED_GPU, EV)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def extrapolated() -> str:
    """A catalog GPU without measured runs under the default stack."""
    cat = load_catalog([])
    for name in ("l40s", "rtx4090", "h100-pcie", "a100-40gb", *sorted(cat.gpus)):
        if name != MEASURED_GPU and cat.gpus[name].evidence is None:
            return name
    pytest.skip("every catalog GPU has measured runs")


def run_json(args: list[str]) -> dict:
    res = run_cli([*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


# ---------------------------------------------------------------- the rule, in numbers
def test_measured_range_inverts_the_signed_errors():
    lo, hi = measured_range(100.0, -12.0, 18.0)
    # measured = predicted / (1 + error): too slow by 18% -> 100/1.18; too fast by 12% -> 100/0.88
    assert lo == pytest.approx(84.745763, rel=1e-6)
    assert hi == pytest.approx(113.636364, rel=1e-6)
    assert ratio_bounds(-12.0, 18.0) == pytest.approx((1 / 1.18, 1 / 0.88))
    # a model too slow on every run: the whole range lies below the prediction
    assert measured_range(10.0, 5.0, 25.0) == pytest.approx((8.0, 10.0 / 1.05))
    # an error of -100% would allow any measurement: the upper end is unbounded
    assert measured_range(10.0, -100.0, 10.0)[1] == float("inf")
    with pytest.raises(ValueError):
        ratio_bounds(10.0, -10.0)


def test_cost_range_scales_only_the_time_proportional_part():
    assert cost_range(1000.0, 400.0, 0.8, 1.25) == pytest.approx((880.0, 1150.0))
    assert cost_range(1000.0, 1000.0, 0.8, 1.25) == pytest.approx((1000.0, 1000.0))
    assert cost_range(1000.0, 0.0, 0.8, 1.25) == pytest.approx((800.0, 1250.0))


def test_time_independent_cost_by_pricing():
    cat = load_catalog([])
    spec = resolve_model("llama2-7b")
    layout = Layout(tp=1, pp=1, dp=8, micro_batch=1, global_batch=64)
    ev = evaluate(spec, Hardware.from_catalog(cat, MEASURED_GPU), layout, tokens=1e11)
    assert time_independent_cost_usd(ev, "capex") == pytest.approx(ev.capex)  # bought outright
    assert time_independent_cost_usd(ev, "cloud") == 0.0  # GPU-hours
    assert time_independent_cost_usd(ev, "tco") == pytest.approx(ev.capex)  # capex + energy
    leased = cat.with_facility(lifetime_years=5.0)
    ev5 = evaluate(spec, Hardware.from_catalog(leased, MEASURED_GPU), layout, tokens=1e11)
    assert time_independent_cost_usd(ev5, "tco") == 0.0  # lifetime share and energy scale


def test_extrapolated_band_doubles_the_widest_measured_band_on_the_ratio_scale():
    wide, narrow = _evidence(), _evidence(error_lo_pct=-3.0, error_hi_pct=4.0)
    b = extrapolated_band([("narrow", narrow), ("wide", wide)])
    assert b.status == "extrapolated" and b.evidence is None
    assert b.error_lo_pct == pytest.approx(100 * (0.88**2 - 1))  # -22.56%
    assert b.error_hi_pct == pytest.approx(100 * (1.18**2 - 1))  # +39.24%
    assert "wide" in b.basis
    lo, hi = b.scale(10.0)
    assert (lo, hi) == pytest.approx((10.0 / 1.18**2, 10.0 / 0.88**2))
    # a -50% error doubles to -75% (a finite band), not to -100%
    assert extrapolated_band([("x", _evidence(error_lo_pct=-50.0))]).error_lo_pct == -75.0
    # a band that misses zero error is widened to contain the prediction first
    skewed = extrapolated_band([("x", _evidence(error_lo_pct=2.0, error_hi_pct=10.0))])
    assert skewed.error_lo_pct == 0.0 and skewed.error_hi_pct == pytest.approx(21.0)
    # no GPU measured: +/-35%
    none = extrapolated_band([])
    assert (none.error_lo_pct, none.error_hi_pct) == (-35.0, 35.0)
    assert "35%" in none.basis


def test_measured_band_is_the_gpus_own_and_lines_say_so():
    ev = _evidence()
    b = band(ev, [("other", _evidence(error_lo_pct=-40.0))])
    assert b.status == "measured" and (b.error_lo_pct, b.error_hi_pct) == (-12.0, 18.0)
    assert evidence_line(ev) == "measured: 40 runs, mean error 6.1%, worst 18.0%"
    assert evidence_line(None) == "extrapolated: no measured training run"
    assert band(None, []).line.startswith("extrapolated: no measured training run")


# ---------------------------------------------------------------- optimize
def _check_ranges(plan: dict, lo_pct: float, hi_pct: float) -> None:
    e = plan["evidence"]
    step, days = plan["step_time_s"], plan["time_to_train_days"]
    assert e["step_time_s_range"] == pytest.approx(
        [step / (1 + hi_pct / 100), step / (1 + lo_pct / 100)]
    )
    assert e["days_range"] == pytest.approx([days / (1 + hi_pct / 100), days / (1 + lo_pct / 100)])


def test_optimize_json_has_the_evidence_object(override):
    doc = run_json(
        ["optimize", *QUESTION, "--gpu", MEASURED_GPU, "--catalog", str(override), "--top", "2"]
    )
    assert doc["question"]["stack"] == "megatron-core"
    assert doc["question"]["evidence"] == "measured"
    for plan in doc["plans"]:
        e = plan["evidence"]
        assert plan["gpu"] == MEASURED_GPU
        assert {
            "stack",
            "status",
            "runs",
            "mape_pct",
            "worst_pct",
            "step_time_s_range",
            "days_range",
            "cost_usd_range",
            "sets",
        } <= set(e)
        assert (e["stack"], e["status"], e["runs"], e["mape_pct"], e["worst_pct"]) == (
            "megatron-core",
            "measured",
            40,
            6.1,
            18.0,
        )
        assert e["sets"] == "test runs"
        _check_ranges(plan, -12.0, 18.0)
        # capex is bought whatever the run takes
        assert e["cost_usd_range"] == pytest.approx([plan["cost_usd"], plan["cost_usd"]])
    # the contract's plan keys are all still there
    assert set(PLAN_COLUMNS) <= set(doc["plans"][0])


def test_cloud_cost_range_scales_with_time(override):
    doc = run_json(
        [
            "optimize",
            *QUESTION,
            "--gpu",
            MEASURED_GPU,
            "--catalog",
            str(override),
            "--pricing",
            "cloud",
        ]
    )
    plan = doc["plans"][0]
    # each end of the days band billed as the plan's rental bills it: AWS's H100 block on
    # demand, in whole days then weeks (models/rental.py)
    days = plan["time_to_train_days"]
    per_day = plan["cost_usd"] / aws_block_days(days)
    assert plan["evidence"]["cost_usd_range"] == pytest.approx(
        [per_day * aws_block_days(days / 1.18), per_day * aws_block_days(days / 0.88)]
    )


def test_optimize_csv_appends_the_evidence_columns(override, tmp_path):
    path = tmp_path / "plans.csv"
    res = run_cli(
        [
            "optimize",
            *QUESTION,
            "--gpu",
            MEASURED_GPU,
            "--catalog",
            str(override),
            "--top",
            "2",
            "--csv",
            str(path),
        ]
    )
    assert res.exit_code == 0, res.output
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        header = reader.fieldnames
    assert header == [*PLAN_COLUMNS, "top_binding", *EVIDENCE_COLUMNS, "status"]
    assert EVIDENCE_COLUMNS == [
        "evidence",
        "evidence_runs",
        "evidence_mape_pct",
        "step_time_s_lo",
        "step_time_s_hi",
        "days_lo",
        "days_hi",
        # the contract's "CSV gains the matching columns": every key of the evidence object
        "evidence_stack",
        "evidence_worst_pct",
        "evidence_error_lo_pct",
        "evidence_error_hi_pct",
        "cost_usd_lo",
        "cost_usd_hi",
        "evidence_basis",
        "evidence_line",
    ]
    doc = run_json(["optimize", *QUESTION, "--gpu", MEASURED_GPU, "--catalog", str(override)])
    ev = doc["plans"][0]["evidence"]
    first = rows[0]
    assert first["evidence_stack"] == ev["stack"] == "megatron-core"
    for key in ("worst_pct", "error_lo_pct", "error_hi_pct"):
        assert float(first[f"evidence_{key}"]) == pytest.approx(ev[key])
    assert [float(first["cost_usd_lo"]), float(first["cost_usd_hi"])] == pytest.approx(
        ev["cost_usd_range"]
    )
    assert (first["evidence_basis"], first["evidence_line"]) == (ev["basis"], ev["line"])
    for r in rows:
        assert (r["evidence"], r["evidence_runs"], r["evidence_mape_pct"]) == (
            "measured",
            "40",
            "6.1",
        )
        step, days = float(r["step_time_s"]), float(r["time_to_train_days"])
        assert float(r["step_time_s_lo"]) == pytest.approx(step / 1.18)
        assert float(r["step_time_s_hi"]) == pytest.approx(step / 0.88)
        assert float(r["days_lo"]) == pytest.approx(days / 1.18)
        assert float(r["days_hi"]) == pytest.approx(days / 0.88)


def test_optimize_text_shows_evidence_and_ranges(override):
    doc = run_json(["optimize", *QUESTION, "--gpu", MEASURED_GPU, "--catalog", str(override)])
    days = doc["plans"][0]["time_to_train_days"]
    res = run_cli(["optimize", *QUESTION, "--gpu", MEASURED_GPU, "--catalog", str(override)])
    assert res.exit_code == 0
    out = res.stdout
    assert "measured: 40 runs, mean error 6.1%, worst 18.0%" in out
    assert "evidence" in out.split("\n\n")[1].splitlines()[0]  # the plans table's column
    assert f"{days:,.2f} ({days / 1.18:.1f}-{days / 0.88:.1f})" in out  # days with its range
    assert "40 runs, 6.1%" in out
    assert "(extrapolated)" not in out


def test_optimize_marks_an_extrapolated_gpu(override, extrapolated):
    args = ["optimize", *QUESTION, "--catalog", str(override), "--gpu", extrapolated]
    plan = run_json(args)["plans"][0]
    e = plan["evidence"]
    assert e["status"] == "extrapolated"
    assert e["runs"] is None and e["mape_pct"] is None and e["worst_pct"] is None
    assert e["line"].startswith("extrapolated: no measured training run")
    # at least twice as wide (ratio scale) as the override's measured band, which it may
    # be extrapolated from (the widest measured band in the catalog, doubled)
    width = (1 + e["error_hi_pct"] / 100) / (1 + e["error_lo_pct"] / 100)
    assert width >= (1.18 / 0.88) ** 2 - 1e-9
    _check_ranges(plan, e["error_lo_pct"], e["error_hi_pct"])
    out = run_cli(args).stdout
    assert f"{extrapolated} (extrapolated)" in out
    assert "extrapolated: no measured training run" in out


# ---------------------------------------------------------------- evidence filter
def test_default_searches_measured_gpus_only(override, extrapolated):
    doc = run_json(["compare", *QUESTION, "--catalog", str(override)])
    gpus = [p["gpu"] for p in doc["plans"]]
    assert MEASURED_GPU in gpus and extrapolated not in gpus
    assert all(p["evidence"]["status"] == "measured" for p in doc["plans"])
    best = run_json(["optimize", *QUESTION, "--catalog", str(override)])["plans"][0]
    assert best["evidence"]["status"] == "measured"


def test_compare_evidence_any_adds_extrapolated_gpus_marked(override, extrapolated, tmp_path):
    args = ["compare", *QUESTION, "--catalog", str(override), "--evidence", "any"]
    doc = run_json(args)
    assert doc["question"]["evidence"] == "any"
    by_gpu = {p["gpu"]: p for p in doc["plans"]}
    assert by_gpu[MEASURED_GPU]["evidence"]["status"] == "measured"
    assert by_gpu[extrapolated]["evidence"]["status"] == "extrapolated"
    for p in doc["plans"]:
        assert {"status", "top_binding", "evidence"} <= set(p)
    path = tmp_path / "compare.csv"
    res = run_cli([*args, "--csv", str(path)])
    assert res.exit_code == 0
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = {r["gpu"]: r for r in reader}
        assert reader.fieldnames == [*CSV_COLUMNS, "status", *EVIDENCE_COLUMNS]
    assert rows[MEASURED_GPU]["evidence"] == "measured"
    assert rows[MEASURED_GPU]["evidence_runs"] == "40"
    assert rows[extrapolated]["evidence"] == "extrapolated"
    assert rows[extrapolated]["evidence_runs"] == ""
    text = res.stdout
    header = next(line for line in text.splitlines() if line.lstrip().startswith("#"))
    assert header.rstrip().endswith("evidence")
    assert f"{extrapolated} (extrapolated)" in text
    assert f"{MEASURED_GPU} (extrapolated)" not in text


def test_no_measured_gpu_is_a_usage_error_naming_evidence(capsys, monkeypatch):
    import designer.question.build as questions

    real = questions.load_catalog

    def unmeasured(files):
        cat = real(files)
        gpus = {}
        for name, g in cat.gpus.items():
            if "measured" in GPUSpec.model_fields:
                g = g.model_copy(update={"measured": {}})
            else:
                stacks = {k: v.model_copy(update={"evidence": None}) for k, v in g.stacks.items()}
                g = g.model_copy(update={"stacks": stacks})
            assert g.evidence is None
            gpus[name] = g
        return dataclasses.replace(cat, gpus=gpus)

    monkeypatch.setattr(questions, "load_catalog", unmeasured)
    for command in ("optimize", "compare"):
        code, out, err = run_main(capsys, [command, *QUESTION])
        lines = err.strip().splitlines()
        assert code == 2 and len(lines) == 1, err
        assert "--evidence" in lines[0] and "Traceback" not in err
    # --evidence any (or naming GPUs) answers it
    code, out, err = run_main(capsys, ["optimize", *QUESTION, "--evidence", "any"])
    assert code == 0, err


# ---------------------------------------------------------------- explain, evaluate, sweep
def test_explain_keeps_the_stack_and_evidence_of_the_question(override, tmp_path):
    args = ["optimize", *QUESTION, "--catalog", str(override), "--stack", "vtrain-2022"]
    saved = run_json(args)
    assert saved["question"]["stack"] == "vtrain-2022"
    path = tmp_path / "answer.json"
    path.write_text(json.dumps(saved), encoding="utf-8")
    again = run_json(["explain", str(path)])
    assert again["question"]["stack"] == "vtrain-2022"
    assert again["question"]["evidence"] == "measured"
    assert again["plans"][0]["evidence"]["stack"] == "vtrain-2022"
    assert again["plans"][0]["evidence"]["status"] == "measured"


def test_evaluate_shows_evidence_and_step_range(override, extrapolated):
    args = [
        "evaluate",
        "--model",
        "llama2-7b",
        "--gpu",
        MEASURED_GPU,
        "--dp",
        "8",
        "--global-batch",
        "64",
        "--tokens",
        "100B",
        "--catalog",
        str(override),
    ]
    doc = run_json(args)
    e = doc["evidence"]
    step = doc["step_time_s"]
    assert (e["status"], e["runs"]) == ("measured", 40)
    assert e["step_time_s_range"] == pytest.approx([step / 1.18, step / 0.88])
    days = doc["time_to_train_days"]
    assert e["days_range"] == pytest.approx([days / 1.18, days / 0.88])
    costs = doc["cost_usd"]
    assert e["cost_usd_range"]["capex"] == pytest.approx([costs["capex"], costs["capex"]])
    per_day = costs["cloud"] / aws_block_days(days)  # billed as optimize bills it
    assert e["cost_usd_range"]["cloud"] == pytest.approx(
        [per_day * aws_block_days(days / 1.18), per_day * aws_block_days(days / 0.88)]
    )
    res = run_cli(args)
    assert res.exit_code == 0
    assert "measured: 40 runs, mean error 6.1%, worst 18.0%" in res.stdout
    assert f"measured range {step / 1.18:.1f}-{step / 0.88:.1f} s" in res.stdout
    other = run_cli([*args[:4], extrapolated, *args[5:]])
    assert f"x {extrapolated} (extrapolated)" in other.stdout
    assert "extrapolated: no measured training run" in other.stdout


def test_sweep_rows_carry_the_evidence(override, extrapolated, tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(
        yaml.safe_dump(
            {
                "base": {
                    "model": "llama2-7b",
                    "tokens": "100B",
                    "budget": "2M",
                    "max_batch_tokens": "1M",
                    "catalog": [str(override)],
                },
                "axes": {"gpus": [[MEASURED_GPU], [extrapolated]]},
            }
        ),
        encoding="utf-8",
    )
    out = tmp_path / "study.csv"
    res = run_cli(["sweep", str(study), "--csv", str(out), "--workers", "1"])
    assert res.exit_code == 0, res.output
    with out.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        rows = list(reader)
        assert reader.fieldnames is not None
        # the evidence columns, then the study's hash (issue 20), last
        assert reader.fieldnames[-len(EVIDENCE_COLUMNS) - 1 : -1] == EVIDENCE_COLUMNS
        assert reader.fieldnames[-1] == "study"
    by_gpu = {r["gpu"]: r for r in rows}
    measured = by_gpu[MEASURED_GPU]
    assert measured["evidence"] == "measured" and measured["evidence_runs"] == "40"
    assert (
        float(measured["days_lo"])
        < float(measured["time_to_train_days"])
        < float(measured["days_hi"])
    )
    assert by_gpu[extrapolated]["evidence"] == "extrapolated"


def test_default_search_keeps_only_measured_precisions():
    """B200's runs are FP8: a BF16 question leaves it out by default, an FP8-or-BF16 question
    searches it in FP8 only; --evidence any brings its BF16 back, marked extrapolated."""
    from designer.question.build import build_scenario

    bf16 = build_scenario(budget=30e6)
    assert "b200" not in bf16.gpus and "h100-sxm" in bf16.gpus
    both = build_scenario(budget=30e6, precision="any")
    assert "b200" in both.gpus
    assert ("b200", "bf16") in both.unmeasured and ("b200", "fp8") not in both.unmeasured
    anything = build_scenario(budget=30e6, evidence="any")
    assert "b200" in anything.gpus and not anything.unmeasured
    doc = run_json(["compare", "--budget", "30M", "--no-explain", "--precision", "any"])
    rows = {p["gpu"]: p for p in doc["plans"]}
    assert rows["b200"]["precision"] == "fp8"
    assert rows["b200"]["evidence"]["status"] == "measured"
