"""`designer optimize` against ../shared/CLI-CONTRACT.md: JSON keys, CSV, exit codes, messages.

Questions are kept small (one GPU type, mostly llama2-7b/70b) so the whole file runs in
well under a minute, explanations included."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from designer.cli import cli
from designer.output.formats import EVIDENCE_COLUMNS
from helpers import one_line, run_main
from solvers import FAMILIES as REGISTRY_NAMES
from solvers import PLAN_COLUMNS

PLAN_KEYS = [
    "rank",
    "gpu",
    "num_gpus",
    "nodes",
    "gpus_per_node",
    "tp",
    "pp",
    "dp",
    "cp",
    "vp",
    "micro_batch",
    "grad_accum",
    "global_batch",
    "recompute",
    "sequence_parallel",
    "zero",
    "precision",
    "nic",
    "nics_per_node",
    "memory_gb_per_gpu",
    "step_time_s",
    "time_to_train_days",
    "cost_usd",
    "mfu",
]
BINDING_KEYS = {"constraint", "slack", "unit", "improvement_if_relaxed"}
# the names CLI-CONTRACT.md "Constraint names" lists; the registry may add more (max_racks)
CONTRACT_FAMILIES = {
    "memory",
    "tp_bandwidth",
    "tp_domain",
    "divisibility",
    "pipeline_fill",
    "batch_ceiling",
    "batch_floor",
    "nic_slots",
    "budget",
    "deadline",
    "max_gpus",
    "power",
}
FAMILIES = set(REGISTRY_NAMES)


def test_the_registry_holds_every_contract_family():
    assert CONTRACT_FAMILIES <= FAMILIES


BASE = ["optimize", "--budget", "30M", "--gpu", "h100-sxm"]  # llama2-70b, 2T tokens by default
SMALL = ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "300B"]
INFEASIBLE = ["optimize", "--model", "llama2-70b", "--gpu", "h100-sxm", "--budget", "10K"]


# --- helpers ---------------------------------------------------------------------------------


def invoke_json(runner: CliRunner, args: list[str], code: int = 0) -> dict:
    result = runner.invoke(cli, [*args, "--json"], catch_exceptions=False)
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


@pytest.fixture(scope="module")
def base(runner) -> dict:
    return invoke_json(runner, BASE)


@pytest.fixture(scope="module")
def top3(runner) -> dict:
    return invoke_json(runner, [*BASE, "--top", "3"])


# --- the default question --------------------------------------------------------------------


def test_optimize_json_top_level(base):
    assert base["status"] == "optimal"
    obj = base["objective"]
    assert set(obj) >= {"name", "value", "unit"}
    assert obj["unit"] == "days"
    assert isinstance(obj["value"], float) and obj["value"] > 0
    solve = base["solve"]
    assert set(solve) >= {"solver", "wall_s", "gap"}
    assert solve["solver"] == "cpsat"
    assert solve["wall_s"] >= 0
    assert solve["gap"] == pytest.approx(0.0, abs=1e-9)
    assert base["conflict"] is None
    assert len(base["plans"]) == 1


def test_optimize_json_plan_keys_and_invariants(base):
    plan = base["plans"][0]
    for key in PLAN_KEYS:
        assert key in plan, key
    assert plan["rank"] == 1
    assert plan["gpu"] == "h100-sxm"
    assert plan["cost_usd"] <= 30e6 * (1 + 1e-9)
    assert plan["num_gpus"] == plan["tp"] * plan["pp"] * plan["dp"] * plan["cp"]
    assert plan["global_batch"] == plan["micro_batch"] * plan["grad_accum"] * plan["dp"]
    assert plan["nodes"] * plan["gpus_per_node"] >= plan["num_gpus"]
    assert (plan["nodes"] - 1) * plan["gpus_per_node"] < plan["num_gpus"]
    # the default ceiling: 3 critical batches of the batch-tokens model (models/batch_tokens.py)
    crit_seqs = plan["critical_batch_tokens"] // 4096  # llama2-70b's 4,096
    assert plan["global_batch"] <= 3 * crit_seqs
    need = max(1.0, (crit_seqs + plan["global_batch"]) / (2 * crit_seqs))
    assert plan["effective_tokens"] == pytest.approx(2e12 * need, rel=1e-12)
    assert plan["time_to_train_days"] == pytest.approx(base["objective"]["value"], rel=1e-12)
    assert 0 < plan["mfu"] < 1
    assert 0 < plan["memory_gb_per_gpu"] <= 80.0
    assert plan["precision"] == "bf16"
    assert plan["recompute"] in ("none", "selective", "full")
    assert isinstance(plan["sequence_parallel"], bool)


def test_optimize_json_binding(base):
    binding = base["binding"]
    assert binding, "an optimal plan comes with its binding constraints"
    for b in binding:
        assert set(b) >= BINDING_KEYS
        assert b["constraint"] in FAMILIES
        assert b["improvement_if_relaxed"] >= 0
    gains = [b["improvement_if_relaxed"] for b in binding]
    assert gains == sorted(gains, reverse=True), "binding ones first, largest improvement first"
    names = [b["constraint"] for b in binding]
    assert len(names) == len(set(names))
    # a $30M budget on the fastest plan is spent: it binds, and what is left does not buy
    # the next step of the cluster (one more replica, in whole servers), fabric included
    budget = next(b for b in binding if b["constraint"] == "budget")
    assert budget["unit"] == "USD"
    assert budget["improvement_if_relaxed"] > 0
    plan = base["plans"][0]
    step_gpus = math.lcm(plan["tp"] * plan["pp"] * plan["cp"], plan["gpus_per_node"])
    assert 0 <= budget["slack"] <= 1.5 * step_gpus * plan["cost_usd"] / plan["num_gpus"]


def test_optimize_top3(top3):
    plans = top3["plans"]
    assert [p["rank"] for p in plans] == [1, 2, 3]
    days = [p["time_to_train_days"] for p in plans]
    assert days == sorted(days)
    for p in plans:
        assert p["cost_usd"] <= 30e6 * (1 + 1e-9)
    shapes = {
        (p["gpu"], p["tp"], p["cp"], p["pp"], p["vp"], p["micro_batch"], p["recompute"])
        for p in plans
    }
    assert len(shapes) == 3, "the K best plans have distinct layouts"


def test_optimize_top1_is_top3_first(base, top3):
    assert top3["plans"][0]["time_to_train_days"] == pytest.approx(
        base["plans"][0]["time_to_train_days"], rel=1e-12
    )


def test_optimize_csv(runner, tmp_path: Path):
    path = tmp_path / "plans.csv"
    result = runner.invoke(cli, [*BASE, "--top", "2", "--csv", str(path)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        header = reader.fieldnames
        rows = list(reader)
    assert header is not None
    for key in PLAN_KEYS:
        assert key in header
    assert "top_binding" in header
    # contract's first; then the evidence, then the status ("feasible (not proved; gap X%)")
    assert header == [*PLAN_COLUMNS, "top_binding", *EVIDENCE_COLUMNS, "status"]
    assert len(rows) == 2
    assert [int(r["rank"]) for r in rows] == [1, 2]
    assert rows[0]["gpu"] == "h100-sxm"
    assert rows[0]["top_binding"] in FAMILIES
    assert {r["status"] for r in rows} == {"optimal"}
    for r in rows:
        assert int(r["num_gpus"]) == int(r["tp"]) * int(r["pp"]) * int(r["dp"]) * int(r["cp"])
        assert float(r["cost_usd"]) <= 30e6 * (1 + 1e-9)


def test_optimize_csv_matches_json(runner, tmp_path: Path, base):
    path = tmp_path / "one.csv"
    result = runner.invoke(cli, [*BASE, "--csv", str(path)], catch_exceptions=False)
    assert result.exit_code == 0
    rows = list(csv.DictReader(path.open(newline="", encoding="utf-8")))
    assert len(rows) == 1
    plan = base["plans"][0]
    assert int(rows[0]["num_gpus"]) == plan["num_gpus"]
    assert float(rows[0]["time_to_train_days"]) == pytest.approx(plan["time_to_train_days"])
    top = next(b["constraint"] for b in base["binding"] if b["improvement_if_relaxed"] > 0)
    assert rows[0]["top_binding"] == top


def test_optimize_human_output(runner):
    result = runner.invoke(cli, BASE, catch_exceptions=False)
    assert result.exit_code == 0
    assert "h100-sxm" in result.stdout
    assert "optimal" in result.stdout
    assert "Best plan" in result.stdout
    assert "budget" in result.stdout


# --- other solvers, objectives, pricing -------------------------------------------------------


def test_optimize_exhaustive_matches_cpsat(runner):
    args = [*SMALL, "--budget", "2M", "--no-explain"]
    cp = invoke_json(runner, args)
    ex = invoke_json(runner, [*args, "--solver", "exhaustive"])
    assert cp["status"] == "optimal"
    assert ex["status"] == "optimal"
    assert ex["solve"]["solver"] == "exhaustive"
    assert ex["objective"]["value"] == pytest.approx(cp["objective"]["value"], rel=1e-3)
    assert ex["plans"][0]["cost_usd"] <= 2e6 * (1 + 1e-9)


def test_optimize_cost_objective_under_deadline(runner):
    d = invoke_json(
        runner, ["optimize", "--gpu", "h100-sxm", "--deadline", "90d", "--objective", "cost"]
    )
    assert d["status"] == "optimal"
    assert d["objective"]["name"] == "cost"
    assert d["objective"]["unit"] == "USD"
    plan = d["plans"][0]
    assert plan["time_to_train_days"] <= 90 * (1 + 1e-9)
    assert d["objective"]["value"] == pytest.approx(plan["cost_usd"], rel=1e-12)
    deadline = next(b for b in d["binding"] if b["constraint"] == "deadline")
    assert deadline["unit"] == "days"
    assert deadline["slack"] >= 0


def test_optimize_deadline_alone_defaults_to_cost(runner):
    d = invoke_json(runner, [*SMALL, "--deadline", "30d", "--no-explain"])
    assert d["objective"]["unit"] == "USD"
    assert d["plans"][0]["time_to_train_days"] <= 30 * (1 + 1e-9)


def test_optimize_cloud_pricing_under_budget(runner):
    d = invoke_json(runner, [*BASE, "--pricing", "cloud"])
    assert d["status"] == "optimal"
    assert d["objective"]["unit"] == "days"
    plan = d["plans"][0]
    assert plan["cost_usd"] <= 30e6 * (1 + 1e-9)
    assert d["question"]["pricing"] == "cloud"
    # renting is not buying: GPU-hours x price, far below the capex of the same cluster
    assert plan["cost_usd"] < plan["num_gpus"] * 30_000


def test_optimize_cloud_pricing_cost_objective(capsys):
    code, out, err = run_main(
        capsys, [*SMALL, "--deadline", "90d", "--pricing", "cloud", "--no-explain", "--json"]
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["status"] == "optimal"
    assert d["objective"]["unit"] == "USD"
    assert d["plans"][0]["time_to_train_days"] <= 90 * (1 + 1e-9)


# --- infeasible --------------------------------------------------------------------------------


def test_optimize_infeasible(capsys):
    code, out, err = run_main(capsys, [*INFEASIBLE, "--json"])
    assert code == 1
    d = json.loads(out)
    assert d["status"] == "infeasible"
    assert d["plans"] == []
    assert d["binding"] == []
    assert d["objective"]["value"] is None
    conflict = d["conflict"]
    assert conflict is not None
    assert "budget" in conflict["constraints"]
    assert set(conflict["constraints"]) <= FAMILIES
    assert conflict["fixes"]
    for fix in conflict["fixes"]:
        assert set(fix) >= {"constraint", "change"}
        assert fix["constraint"] in conflict["constraints"]
        assert fix["change"]
    budget_fix = next(f for f in conflict["fixes"] if f["constraint"] == "budget")
    assert "$" in budget_fix["change"]
    line = one_line(err)
    assert line.startswith("designer: infeasible")
    assert "budget" in line


def test_optimize_infeasible_human(capsys):
    code, out, err = run_main(capsys, INFEASIBLE)
    assert code == 1
    assert "budget" in out
    assert one_line(err).startswith("designer: infeasible")


def test_optimize_no_explain(runner, capsys):
    d = invoke_json(runner, [*BASE, "--no-explain"])
    assert d["status"] == "optimal"
    assert d["binding"] == []
    assert d["conflict"] is None
    code, out, err = run_main(capsys, [*INFEASIBLE, "--no-explain", "--json"])
    assert code == 1
    d = json.loads(out)
    assert d["status"] == "infeasible"
    assert d["binding"] == []
    assert d["conflict"] is None
    assert one_line(err).startswith("designer: infeasible")


# --- usage errors ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,option",
    [
        ([], "--budget"),  # the time objective needs a budget (or --max-gpus)
        (["--objective", "time"], "--budget"),
        (["--objective", "cost", "--budget", "30M"], "--deadline"),
        (["--budget", "30Q"], "--budget"),
        (["--budget", "-5"], "--budget"),
        (["--budget", "0"], "--budget"),
        (["--budget", "30M", "--gpu", "nope"], "--gpu"),
        (["--budget", "30M", "--nic", "nope"], "--nic"),
        (["--budget", "30M", "--ignore", "nope"], "--ignore"),
        (["--budget", "30M", "--max-batch-tokens", "10"], "--max-batch-tokens"),
        (["--budget", "30M", "--min-batch-tokens", "64M"], "--min-batch-tokens"),
        (["--deadline", "0"], "--deadline"),
        (["--deadline", "90w"], "--deadline"),
        (["--budget", "30M", "--max-gpus", "1.5"], "--max-gpus"),
        (["--budget", "30M", "--top", "0"], "--top"),
        (["--budget", "30M", "--time-limit", "0"], "--time-limit"),
        (["--budget", "30M", "--solver", "gurobi"], "--solver"),
        (["--budget", "30M", "--model", "no-such-model"], "--model"),
    ],
)
def test_optimize_usage_errors(capsys, args, option):
    code, out, err = run_main(capsys, ["optimize", *args])
    assert code == 2
    assert out == ""
    line = one_line(err)
    assert line.startswith("designer: error:")
    assert option in line, f"{option!r} not named in {line!r}"


def test_optimize_csv_unwritable(capsys, tmp_path: Path):
    target = tmp_path / "missing-dir" / "plans.csv"
    code, out, err = run_main(capsys, [*BASE, "--no-explain", "--csv", str(target)])
    assert code == 2
    assert "--csv" in one_line(err)


# --- time limit, determinism -------------------------------------------------------------------


def test_optimize_tiny_time_limit_never_tracebacks(capsys):
    args = ["optimize", "--model", "llama3-405b", "--budget", "1B", "--time-limit", "0.01"]
    code, out, err = run_main(capsys, args)
    assert "Traceback" not in out + err
    assert "internal error" not in err
    if code == 0:
        assert "optimal" in out or "feasible" in out
    else:
        assert code == 1
        assert "time limit" in one_line(err)


def test_optimize_tiny_time_limit_json(capsys):
    args = ["optimize", "--model", "llama3-405b", "--budget", "1B", "--time-limit", "0.01"]
    code, out, err = run_main(capsys, [*args, "--json"])
    assert "Traceback" not in out + err
    d = json.loads(out)
    if code == 0:
        assert d["status"] in ("optimal", "feasible")
        assert d["plans"]
        assert d["solve"]["gap"] is not None
    else:
        assert code == 1
        assert d["plans"] == []
        assert "time limit" in one_line(err)


def test_optimize_deterministic(runner):
    args = [*SMALL, "--budget", "3M", "--top", "2"]
    first = invoke_json(runner, args)
    second = invoke_json(runner, args)
    first.pop("solve")
    second.pop("solve")
    assert first == second


def test_memory_overhead_and_reserved_memory_reach_the_optimizer():
    base = ["optimize", "--model", "llama2-7b", "--tokens", "200B", "--gpu", "h100-sxm"]
    base += ["--budget", "3M", "--no-explain", "--json", "--headroom", "0"]
    plain = json.loads(CliRunner().invoke(cli, [*base, "--reserved-gb", "0"]).output)
    tight = CliRunner().invoke(cli, [*base, "--memory-overhead", "0.1", "--reserved-gb", "5"])
    assert tight.exit_code == 0, tight.output
    doc = json.loads(tight.output)
    assert doc["question"]["memory_overhead"] == 0.1 and doc["question"]["reserved_gb"] == 5
    p0, p1 = plain["plans"][0], doc["plans"][0]
    assert p1["memory_gb_per_gpu"] <= 80
    assert p1["time_to_train_days"] >= p0["time_to_train_days"] * (1 - 1e-9)
    # the same layout (memory has room here) carries 5 GB reserved + 10% of the tensors
    keys = ("tp", "pp", "dp", "micro_batch", "recompute")
    assert [p1[k] for k in keys] == [p0[k] for k in keys]
    assert p1["memory_gb_per_gpu"] == pytest.approx(p0["memory_gb_per_gpu"] * 1.1 + 5)


def test_cli_says_not_proved_when_the_time_limit_stops_the_search(capsys):
    from helpers import run_main

    args = ["optimize", "--model", "llama2-70b", "--deadline", "90d", "--pricing", "tco"]
    args += ["--lifetime-years", "4", "--time-limit", "0.05", "--no-explain"]
    code, out, err = run_main(capsys, args)
    assert "Traceback" not in out + err
    if "cpsat: optimal" in out:
        pytest.skip("proved within 0.05 s on this machine")
    if code == 0:
        assert "not proved" in out
        assert "cpsat: feasible (not proved; gap" in out
        assert "--time-limit" in out or "--solver exhaustive" in out
    else:
        assert code == 1 and "time limit" in err


def test_json_answer_carries_the_proof(capsys):
    from helpers import run_main

    code, out, _ = run_main(
        capsys,
        ["optimize", "--model", "llama2-7b", "--budget", "2M", "--gpu", "h100-sxm", "--json"],
    )
    assert code == 0
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["status_text"] == "optimal"
    assert doc["solve"]["proved"] is True
    assert cli is not None
