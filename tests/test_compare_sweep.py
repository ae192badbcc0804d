"""designer compare, designer explain and designer sweep through the CLI."""

from __future__ import annotations

import csv
import json

import pytest

from designer.cli import main
from designer.output.formats import CSV_COLUMNS, EVIDENCE_COLUMNS
from helpers import run_cli

SMALL = ["--model", "llama2-7b", "--tokens", "100B", "--budget", "2M", "--max-batch-tokens", "1M"]
COMPARE_H100_H200 = ["compare", *SMALL, "--gpu", "h100-sxm", "--gpu", "h200"]


def exit_code(args, capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main(args)
    return info.value.code, capsys.readouterr().err


def test_compare_one_plan_per_gpu_best_first(tmp_path):
    out = run_cli(
        [*COMPARE_H100_H200, "--gpu", "a100-80gb", "--json", "--csv", str(tmp_path / "c.csv")]
    )
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    gpus = [p["gpu"] for p in doc["plans"]]
    assert sorted(gpus) == ["a100-80gb", "h100-sxm", "h200"]
    days = [p["time_to_train_days"] for p in doc["plans"]]
    assert days == sorted(days)
    assert all(p["status"] == "optimal" for p in doc["plans"])
    assert all(p["top_binding"] for p in doc["plans"])  # a budget-bound question: something binds
    assert doc["objective"]["value"] == pytest.approx(days[0])
    rows = list(csv.DictReader((tmp_path / "c.csv").open()))
    assert [r["gpu"] for r in rows] == gpus


def test_compare_plot_is_a_real_image(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "compare.png"
    out = run_cli([*COMPARE_H100_H200, "--no-explain", "--plot", str(png)])
    assert out.exit_code == 0, out.output
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    from matplotlib.image import imread

    img = imread(str(png))
    assert img.shape[0] > 100 and img.shape[1] > 100
    assert img.std() > 0.01  # not blank


def test_explain_a_saved_plan_and_a_question_file(tmp_path):
    saved = run_cli(["optimize", *SMALL, "--gpu", "h100-sxm", "--json", "--no-explain"])
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(saved.output)
    first = json.loads(saved.output)["plans"][0]
    out = run_cli(["explain", str(plan_file), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["plans"][0]["num_gpus"] == first["num_gpus"]
    assert doc["plans"][0]["time_to_train_days"] == pytest.approx(first["time_to_train_days"])
    assert {b["constraint"] for b in doc["binding"]} >= {"budget", "memory"}
    question = tmp_path / "q.yaml"
    question.write_text(
        "model: llama2-7b\ntokens: 100B\nbudget: 2M\ngpus: [h100-sxm]\nmax_batch_tokens: 1M\n"
    )
    out = run_cli(["explain", str(question), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["plans"][0]["time_to_train_days"] == pytest.approx(
        first["time_to_train_days"]
    )


def test_explain_rejects_unknown_fields(tmp_path, capsys):
    bad = tmp_path / "q.yaml"
    bad.write_text("model: llama2-7b\nbudgt: 2M\n")
    code, err = exit_code(["explain", str(bad)], capsys)
    assert code == 2 and err.count("\n") == 1 and "budgt" in err and str(bad) in err


STUDY = """
base:
  model: llama2-7b
  tokens: 100B
  max_batch_tokens: 1M
axes:
  budget: [1M, 2M]
  gpus: [[h100-sxm], [h200]]
"""


def test_sweep_writes_one_row_per_scenario_and_resumes(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    out_csv = tmp_path / "out.csv"
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--workers", "1"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4
    assert {r["status"] for r in rows} == {"optimal"}
    # the contract's CSV: every row names its top binding constraint (priced by default)
    assert all(r["top_binding"] for r in rows), [r["top_binding"] for r in rows]
    assert {(r["budget"], r["gpu"]) for r in rows} == {
        ("1M", "h100-sxm"),
        ("1M", "h200"),
        ("2M", "h100-sxm"),
        ("2M", "h200"),
    }
    # interrupted sweep: keep two rows, resume runs only the other two
    lines = out_csv.read_text().splitlines()
    out_csv.write_text("\n".join(lines[:3]) + "\n")
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--resume", "--workers", "1"])
    assert "2 scenarios run" in res.output
    again = list(csv.DictReader(out_csv.open()))
    assert sorted(r["scenario"] for r in again) == sorted(r["scenario"] for r in rows)
    assert len({r["scenario"] for r in again}) == 4
    # nothing left: a second resume runs nothing
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--resume", "--workers", "1"])
    assert "0 scenarios run" in res.output


def test_sweep_explain_false_leaves_top_binding_empty(tmp_path):
    """explain: false, the speed benchmark's setting, skips the pricing: the column stays."""
    study = tmp_path / "study.yaml"
    study.write_text("explain: false\n" + STUDY)
    out_csv = tmp_path / "out.csv"
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--workers", "1"])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4 and {r["top_binding"] for r in rows} == {""}


def test_sweep_csv_has_the_plans_rank_column_in_the_plan_columns_order(tmp_path):
    """The contract's sweep rows carry "the plan's columns", but the CSV left out ``rank``:
    it is there, where the plan columns put it (after status, before gpu), 1 for a
    scenario's plan and empty for one without; no other column moved or went."""
    study = tmp_path / "study.yaml"
    study.write_text(
        "explain: false\nbase: {model: llama2-7b, tokens: 100B, max_batch_tokens: 1M, "
        "gpus: [h100-sxm]}\naxes:\n  budget: [1K, 1M]\n"
    )
    out_csv = tmp_path / "out.csv"
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--workers", "1"])
    assert res.exit_code == 0, res.output
    with out_csv.open(newline="") as fh:
        header = next(csv.reader(fh))
    assert header[header.index("status") + 1 :][: len(CSV_COLUMNS)] == CSV_COLUMNS
    assert CSV_COLUMNS[:2] == ["rank", "gpu"]
    assert [c for c in header if c != "rank"] == [
        "scenario", "budget", "status", *CSV_COLUMNS[1:], "error", *EVIDENCE_COLUMNS, "study",
    ]  # fmt: skip
    ranks = {r["budget"]: (r["status"], r["rank"]) for r in csv.DictReader(out_csv.open())}
    assert ranks == {"1K": ("infeasible", ""), "1M": ("optimal", "1")}


def test_sweep_parallel_matches_serial(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    serial, parallel = tmp_path / "s.csv", tmp_path / "p.csv"
    run_cli(["sweep", str(study), "--csv", str(serial), "--workers", "1"])
    run_cli(["sweep", str(study), "--csv", str(parallel), "--workers", "2"])

    def by_id(path):
        return {r["scenario"]: r for r in csv.DictReader(path.open())}

    assert by_id(serial) == by_id(parallel)


def test_sweep_schema_and_bad_studies(tmp_path, capsys):
    schema = json.loads(run_cli(["sweep", "--schema"]).output)
    assert "axes" in schema["properties"]
    cases = {
        "axes:\n  budgett: [1M]\n": "budgett",
        "axes:\n  budget: []\n": "empty",
        "axes:\n  budget: [1M]\nextra: 1\n": "extra",
        "base:\n  objective: fastest\naxes:\n  budget: [1M]\n": "objective",
        "axes: {}\n": "axes",
    }
    for i, (text, word) in enumerate(cases.items()):
        path = tmp_path / f"bad{i}.yaml"
        path.write_text(text)
        code, err = exit_code(["sweep", str(path)], capsys)
        assert code == 2, text
        assert err.count("\n") == 1 and word in err and str(path) in err, err


def test_breakeven_price_is_where_the_winner_changes():
    from designer.breakeven import _priced, breakeven
    from designer.question.build import build_scenario
    from solvers import solve_cpsat

    s = build_scenario(model="llama2-7b", tokens=1e12, budget=5e6, gpus=("h200", "h100-sxm"))
    be = breakeven(s, "h200", "h100-sxm")
    assert be.price is not None and be.rival.best is not None
    rival = be.rival.best.objective
    at = solve_cpsat(_priced(s, "h200", be.price)).best.objective
    above = solve_cpsat(_priced(s, "h200", be.price * 1.01)).best.objective
    assert at <= rival < above
    out = run_cli(
        [
            "breakeven",
            "--model",
            "llama2-7b",
            "--tokens",
            "1T",
            "--budget",
            "5M",
            "--gpu",
            "h200",
            "--against",
            "h100-sxm",
            "--json",
        ]
    )
    doc = json.loads(out.output)
    assert doc["breakeven_price_usd"] == pytest.approx(be.price)
    # a JSON boolean, not the string of a numpy bool
    assert doc["wins_at_catalog_price"] is be.wins_at_catalog_price is False
    assert doc["plans"]["gpu"]["gpu"] == "h200" and doc["plans"]["against"]["gpu"] == "h100-sxm"


def test_breakeven_needs_one_gpu(capsys):
    code, err = exit_code(["breakeven", "--budget", "5M", "--against", "h100-sxm"], capsys)
    assert code == 2 and "--gpu" in err and err.count("\n") == 1


@pytest.mark.slow
def test_sweep_on_a_local_ray_instance_matches_local(tmp_path):
    pytest.importorskip("ray")
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    local, on_ray = tmp_path / "local.csv", tmp_path / "ray.csv"
    run_cli(["sweep", str(study), "--csv", str(local), "--workers", "1"])
    res = run_cli(["sweep", str(study), "--csv", str(on_ray), "--executor", "ray"])
    assert res.exit_code == 0, res.output

    def by_id(path):
        return {r["scenario"]: r for r in csv.DictReader(path.open())}

    assert len(by_id(on_ray)) == 4
    assert by_id(on_ray) == by_id(local)


MC_STUDY = """
base:
  model: llama2-7b
  tokens: 100B
  budget: 2M
  max_batch_tokens: 1M
  gpus: [h100-sxm, h200]
axes:
  precision: [bf16]
uncertainty:
  samples: 6
  seed: 3
  price_scale:
    h100-sxm: [0.5, 1.5]
    h200: [0.5, 1.5]
"""


def test_monte_carlo_study_draws_reproducible_prices_and_reports_win_shares(tmp_path):
    pytest.importorskip("matplotlib")
    study = tmp_path / "mc.yaml"
    study.write_text(MC_STUDY)
    first, second, png = tmp_path / "a.csv", tmp_path / "b.csv", tmp_path / "wins.png"
    res = run_cli(["sweep", str(study), "--csv", str(first), "--workers", "2", "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert "win_share" in res.output
    run_cli(["sweep", str(study), "--csv", str(second), "--workers", "1"])
    rows = list(csv.DictReader(first.open()))
    assert len(rows) == 6 and sorted(int(r["sample"]) for r in rows) == list(range(6))
    scales = [json.loads(r["price_scales"]) for r in rows]
    assert all(0.5 <= v <= 1.5 for s in scales for v in s.values())
    assert len({json.dumps(s, sort_keys=True) for s in scales}) == 6  # every sample draws anew

    def by_id(path):
        return {r["scenario"]: r for r in csv.DictReader(path.open())}

    assert by_id(first) == by_id(second)  # the same draws, whatever the workers
    from designer.sweep import summary

    stats = summary(first)
    assert sum(v["wins"] for v in stats.values()) == 6
    assert sum(v["win_share"] for v in stats.values()) == pytest.approx(1.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def sweep_rows(tmp_path, study_text: str) -> list[dict]:
    """Run ``designer sweep`` on a study (one worker) and read back its CSV rows."""
    study, out_csv = tmp_path / "study.yaml", tmp_path / "sweep.csv"
    study.write_text(study_text)
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--workers", "1"])
    assert res.exit_code == 0, res.output
    return list(csv.DictReader(out_csv.open()))


def test_price_scale_axis_changes_the_winner(tmp_path, capsys):
    rows = sweep_rows(
        tmp_path,
        "base:\n  model: llama2-7b\n  tokens: 100B\n  budget: 2M\n  max_batch_tokens: 1M\n"
        "  gpus: [h100-sxm, h200]\naxes:\n  price_scale: [{h200: 0.5}, {h200: 3.0}]\n",
    )
    winners = {json.loads(r["price_scale"])["h200"]: r["gpu"] for r in rows}
    assert winners == {0.5: "h200", 3.0: "h100-sxm"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("axes:\n  price_scale: [{h200: -1}]\n")
    code, err = exit_code(["sweep", str(bad)], capsys)
    assert code == 2 and "price_scale" in err and err.count("\n") == 1


def test_killed_sweep_resumes_without_recomputing(tmp_path):
    """Kill a real sweep process after its first rows, then --resume: only the rest run."""
    import os
    import signal
    import subprocess
    import sys
    import time

    study = tmp_path / "study.yaml"
    study.write_text(
        "base:\n  model: llama2-7b\n  tokens: 100B\n  max_batch_tokens: 1M\n"
        "axes:\n  budget: [1M, 1.5M, 2M, 2.5M, 3M, 3.5M, 4M, 4.5M]\n  gpus: [[h100-sxm], [h200]]\n"
    )
    out_csv = tmp_path / "out.csv"
    cmd = [
        sys.executable,
        "-m",
        "designer",
        "sweep",
        str(study),
        "--csv",
        str(out_csv),
        "--workers",
        "1",
    ]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    deadline = time.time() + 120
    while time.time() < deadline:
        if out_csv.exists() and len(out_csv.read_text().splitlines()) >= 4:  # header + 3 rows
            break
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = [r["scenario"] for r in csv.DictReader(out_csv.open())]
    assert 3 <= len(done_before) < 16
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--resume", "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert f"{16 - len(done_before)} scenarios run" in res.output
    after = [r["scenario"] for r in csv.DictReader(out_csv.open())]
    assert len(after) == len(set(after)) == 16
    assert after[: len(done_before)] == done_before


def test_resume_drops_a_row_cut_off_mid_write(tmp_path):
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    out_csv = tmp_path / "out.csv"
    run_cli(["sweep", str(study), "--csv", str(out_csv), "--workers", "1"])
    lines = out_csv.read_text().splitlines()
    out_csv.write_text("\n".join(lines[:3]) + "\n" + lines[3][:20])  # a kill in the middle of row 3
    res = run_cli(["sweep", str(study), "--csv", str(out_csv), "--resume", "--workers", "1"])
    assert "2 scenarios run" in res.output
    rows = list(csv.DictReader(out_csv.open()))
    assert len(rows) == 4 and all(r["status"] == "optimal" for r in rows)


def test_price_scale_axis_takes_nic_prices_too(tmp_path):
    rows = sweep_rows(
        tmp_path,
        "base:\n  model: llama2-7b\n  tokens: 100B\n  budget: 2M\n  max_batch_tokens: 1M\n  gpus: [h100-sxm]\n"
        "axes:\n  price_scale: [{cx7-400g: 1.0}, {cx7-400g: 20.0}]\n",
    )
    nic = {json.loads(r["price_scale"])["cx7-400g"]: r["nic"] for r in rows}
    assert nic[1.0] == "cx7-400g" and nic[20.0] != "cx7-400g"


def test_compare_with_no_gpu_type_answering_explains_the_conflict(capsys):
    """The contract: exit 1 'with its explanation printed'. When every GPU type is proved
    infeasible, compare explains the whole question as optimize does: the conflict and its
    smallest fix in the text, in JSON `conflict`, and in the one stderr line."""
    args = ["compare", "--budget", "100K", "--gpu", "h100-sxm", "--gpu", "gb200"]
    code, err = exit_code([*args, "--json"], capsys)
    assert code == 1
    main_out = run_cli([*args, "--json"])
    assert main_out.exit_code == 1
    doc = json.loads(main_out.stdout)
    assert doc["status"] == "infeasible" and {p["status"] for p in doc["plans"]} == {"infeasible"}
    assert doc["conflict"]["constraints"] == ["budget"]
    (fix,) = doc["conflict"]["fixes"]
    assert fix["constraint"] == "budget" and fix["change"].startswith("budget must be at least $")
    assert err.count("\n") == 1 and err.startswith("designer: infeasible: no GPU type answers")
    assert fix["change"] in err
    text = run_cli(args)
    assert text.exit_code == 1
    assert f"Nothing fits: budget alone rules out every plan. Smallest fix: {fix['change']}." in (
        text.stdout
    )
    # --no-explain: no explanation computed, the line says only that nothing answers
    quiet = run_cli([*args, "--json", "--no-explain"])
    assert json.loads(quiet.stdout)["conflict"] is None


def test_compare_takes_optimizes_top_and_solver():
    """The contract: compare 'takes optimize's options', --top and --solver among them.
    --top K gives the K best distinct plans of each GPU type, one row each, best first;
    --solver exhaustive answers each type with the exhaustive solver, to the same plan."""
    top = run_cli([*COMPARE_H100_H200, "--top", "2", "--no-explain", "--json"])
    assert top.exit_code == 0, top.output
    plans = json.loads(top.stdout)["plans"]
    assert sorted(p["gpu"] for p in plans) == ["h100-sxm", "h100-sxm", "h200", "h200"]
    days = [p["time_to_train_days"] for p in plans]
    assert days == sorted(days) and [p["rank"] for p in plans] == [1, 2, 3, 4]
    for gpu in ("h100-sxm", "h200"):
        mine = [p for p in plans if p["gpu"] == gpu]
        keys = ("num_gpus", "tp", "pp", "dp", "cp", "vp", "micro_batch", "recompute", "nic")
        shapes = {tuple(p[k] for k in (*keys, "nics_per_node", "zero")) for p in mine}
        assert len(mine) == 2 and mine[0]["time_to_train_days"] <= mine[1]["time_to_train_days"]
        assert len(shapes) == 2  # distinct layouts, as optimize --top gives
    one = json.loads(run_cli([*COMPARE_H100_H200, "--no-explain", "--json"]).stdout)
    assert [p["gpu"] for p in one["plans"]] == [
        plans[0]["gpu"],
        "h200" if plans[0]["gpu"] == "h100-sxm" else "h100-sxm",
    ]
    ex = run_cli([*COMPARE_H100_H200, "--solver", "exhaustive", "--no-explain", "--json"])
    assert ex.exit_code == 0, ex.output
    doc = json.loads(ex.stdout)
    assert doc["solve"]["solver"] == "exhaustive" and one["solve"]["solver"] == "cpsat"
    assert [p["gpu"] for p in doc["plans"]] == [p["gpu"] for p in one["plans"]]
    for a, b in zip(doc["plans"], one["plans"], strict=True):
        assert a["time_to_train_days"] == pytest.approx(b["time_to_train_days"], rel=1e-6)


def test_sweep_on_a_missing_file_asks_for_a_study_file(tmp_path, capsys):
    """Not 'a question file or optimize --json output', which sweep does not take."""
    missing = tmp_path / "nonexist.yaml"
    code, err = exit_code(["sweep", str(missing)], capsys)
    assert code == 2 and err.count("\n") == 1
    assert (
        f"{missing}: file not found; pass a study file (its format: designer sweep --schema)" in err
    )
