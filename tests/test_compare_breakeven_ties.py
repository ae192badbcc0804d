"""compare, breakeven and --top agree with optimize on ties (solvers/tie_rule.py), and say
what they found (an audit's eight findings, each reproduced here first):

1. breakeven counted a tie on time as a win where optimize picks the cheaper plan;
2. compare ordered equal plans by GPU name, not as optimize does;
3. compare's rows without a plan showed evidence in every precision, beside the rule;
4. compare --json reported gap 0.0 for a plan not proved optimal;
5. compare --plot with no plan exited 2 and lost the answer;
6. breakeven's text misquoted a never-winning GPU's price and hid the rival's plan, or
   that the rival had none;
7. breakeven's "at or below" price was rounded up;
8. optimize --top K with CP-SAT put the dearer of two equally fast plans first;
and compare names the GPU types the evidence rule left out."""

from __future__ import annotations

import csv
import io
import json
from types import SimpleNamespace

import pytest

from designer.breakeven import Breakeven, breakeven
from designer.compare import CompareRow
from designer.output.breakeven_doc import _money_down, breakeven_dict, breakeven_text
from designer.output.compare_doc import _solve, compare_dict
from designer.question.build import build_scenario, evaluate_config
from helpers import one_line, run_main
from solvers import Config, solve
from solvers.columns import PLAN_COLUMNS
from solvers.result import SolveResult
from solvers.space import Shape

SMALL = ["--model", "llama2-7b", "--tokens", "1T"]


def _catalog(tmp_path, gpu: str, price: float):
    path = tmp_path / f"{gpu}-{price:g}.yaml"
    path.write_text(f"gpus:\n  {gpu}:\n    price_usd: {price}\n")
    return path


def _json(capsys, args: list[str]) -> tuple[int, dict]:
    code, out, err = run_main(capsys, [*args, "--json"])
    assert code in (0, 1), err
    return code, json.loads(out)


# ---------------------------------------------------------------- 1, 8: the tie rule
def test_breakeven_counts_a_tie_on_time_as_optimize_does(capsys, tmp_path):
    """At $30,200 an H800 and an H100 SXM both train llama2-7b in 7.2288 days on 128 GPUs;
    the H100's plan is cheaper, so optimize picks it: the H800 does not win there. Before,
    breakeven said it won at or below $30.4K (a tie on time counted as a win)."""
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=5e6, gpus=("h800", "h100-sxm"))
    be = breakeven(s, "h800", "h100-sxm")
    assert be.price is not None and be.price < 30_200
    both = [*SMALL, "--budget", "5M", "--gpu", "h800", "--gpu", "h100-sxm", "--no-explain"]
    over = _catalog(tmp_path, "h800", 30_200)
    _, doc = _json(capsys, ["optimize", *both, "--catalog", str(over)])
    first = doc["plans"][0]
    assert first["gpu"] == "h100-sxm"
    at = _catalog(tmp_path, "h800", be.price * 0.999)  # at the price found, h800 is picked
    _, doc = _json(capsys, ["optimize", *both, "--catalog", str(at)])
    assert doc["plans"][0]["gpu"] == "h800"


@pytest.mark.parametrize("solver", ["cpsat", "exhaustive"])
def test_top_k_orders_equal_plans_by_cost_with_either_solver(capsys, tmp_path, solver):
    """--top 2 with two equally fast plans: the cheaper first, as --top 1 picks it (CP-SAT's
    per-shape search put the dearer H800 first)."""
    args = [*SMALL, "--budget", "5M", "--gpu", "h800", "--gpu", "h100-sxm", "--no-explain"]
    args += ["--catalog", str(_catalog(tmp_path, "h800", 30_200)), "--solver", solver]
    _, top2 = _json(capsys, ["optimize", *args, "--top", "2"])
    _, top1 = _json(capsys, ["optimize", *args, "--top", "1"])
    plans = top2["plans"]
    assert [p["gpu"] for p in plans] == ["h100-sxm", "h800"]
    assert plans[0]["time_to_train_days"] == plans[1]["time_to_train_days"]
    assert plans[0]["cost_usd"] < plans[1]["cost_usd"]
    assert top1["plans"][0]["gpu"] == "h100-sxm"


# ---------------------------------------------------------------- 2: compare's order
def _fake_row(gpu: str, objective: float, cost: float, days: float, name="time_to_train"):
    plan = SimpleNamespace(
        objective=objective,
        cost_usd=cost,
        num_gpus=128,
        evaluation=SimpleNamespace(time_to_train_days=days),
    )
    res = SolveResult("optimal", "cpsat", 0.0, 0.0, [plan], objective_name=name)
    return CompareRow(gpu, res, None)


def test_compare_breaks_a_tie_on_the_other_objective_before_the_name():
    dear = _fake_row("a100-80gb", 7.0, 5.0e6, 7.0)
    cheap = _fake_row("h800", 7.0, 4.9e6, 7.0)
    assert sorted([dear, cheap], key=lambda r: r.sort_key)[0] is cheap
    # by a deadline (the cost objective) the faster of two equally cheap plans first
    slow = _fake_row("a100-80gb", 4.9e6, 4.9e6, 7.0, name="cost")
    fast = _fake_row("h800", 4.9e6, 4.9e6, 6.0, name="cost")
    assert sorted([slow, fast], key=lambda r: r.sort_key)[0] is fast
    # fully tied: the name decides; no plan: last
    twin = _fake_row("b200", 7.0, 4.9e6, 7.0)
    none = CompareRow("a", SolveResult("infeasible", "cpsat", 0.0, None), None)
    order = sorted([none, cheap, twin, dear], key=lambda r: r.sort_key)
    assert [r.gpu for r in order] == ["b200", "h800", "a100-80gb", "a"]


def test_compare_first_row_is_optimizes_pick(capsys, tmp_path):
    """The H800 at $29,800: as fast as the H100 SXM and cheaper, so optimize picks it;
    compare listed the H100 first (its name sorts first)."""
    cat = str(_catalog(tmp_path, "h800", 29_800))
    args = [*SMALL, "--budget", "5M", "--gpu", "h800", "--gpu", "h100-sxm", "--no-explain"]
    _, cmp = _json(capsys, ["compare", *args, "--catalog", cat])
    _, opt = _json(capsys, ["optimize", *args, "--catalog", cat])
    assert [p["gpu"] for p in cmp["plans"]] == ["h800", "h100-sxm"]
    assert cmp["plans"][0]["gpu"] == opt["plans"][0]["gpu"]


# ---------------------------------------------------------------- 3: evidence without a plan
EVIDENCE_KEYS = ("status", "precision_runs", "sources", "multi_server_runs", "line")


def test_rows_without_a_plan_carry_a_plans_evidence(capsys, tmp_path):
    """At a $10K budget no GPU type has a plan; each row's evidence is the one its plan has
    at $5M (bf16, judged by the rule), in JSON, CSV and text: mi300x was "measured" with
    all-precision run counts."""
    args = [*SMALL, "--evidence", "thin", "--no-explain"]
    _, none = _json(capsys, ["compare", *args, "--budget", "10K"])
    _, some = _json(capsys, ["compare", *args, "--budget", "5M"])
    assert {p["status"] for p in none["plans"]} == {"infeasible"}
    planned = {p["gpu"]: p["evidence"] for p in some["plans"]}
    for p in none["plans"]:
        got = {k: p["evidence"][k] for k in EVIDENCE_KEYS}
        assert got == {k: planned[p["gpu"]][k] for k in EVIDENCE_KEYS}, p["gpu"]
    tiers = {p["gpu"]: p["evidence"]["status"] for p in none["plans"]}
    assert tiers == {"a100-80gb": "thin", "h100-sxm": "measured", "mi300x": "thin"}
    csv_path = tmp_path / "c.csv"
    code, out, _ = run_main(capsys, ["compare", *args, "--budget", "10K", "--csv", str(csv_path)])
    assert code == 1 and "mi300x (thin)" in out and "2 runs/1 src/1 server" in out
    rows = list(csv.DictReader(io.StringIO(csv_path.read_text())))
    assert {r["gpu"]: r["evidence"] for r in rows} == tiers


# ---------------------------------------------------------------- 4: the gap
def _gap_row(status: str, objective: float | None, gap: float | None):
    plans = [] if objective is None else [SimpleNamespace(objective=objective)]
    return SimpleNamespace(result=SolveResult(status, "cpsat", 0.5, gap, plans))


def test_the_gap_is_null_unless_known():
    assert _solve([_gap_row("optimal", 10.0, 0.0), _gap_row("infeasible", None, None)]) == {
        "solver": "cpsat",
        "wall_s": 1.0,
        "gap": 0.0,
        "proved": True,
    }
    assert _solve([_gap_row("feasible", 10.0, None)])["gap"] is None  # exhaustive, stopped
    # the best plan (10, proved) against the other type's bound (20 x (1 - 0.75) = 5)
    assert _solve([_gap_row("optimal", 10.0, 0.0), _gap_row("feasible", 20.0, 0.75)])[
        "gap"
    ] == pytest.approx(0.5)
    # a type stopped with its bound (20 x 0.75 = 15) above the best plan: gap 0, yet not
    # proved (a stopped type, or one whose tie rule's second key is open: CP-SAT's
    # 'feasible' at gap 0, may hold a faster plan at the same cost)
    assert _solve([_gap_row("optimal", 10.0, 0.0), _gap_row("feasible", 20.0, 0.25)]) == {
        "solver": "cpsat",
        "wall_s": 1.0,
        "gap": 0.0,
        "proved": False,
    }
    assert _solve([_gap_row("feasible", 10.0, 0.0)])["proved"] is False
    # a type whose time ran out with no plan may hold a better one: no gap, not proved
    solved = _solve([_gap_row("optimal", 10.0, 0.0), _gap_row("unknown", None, None)])
    assert solved["gap"] is None and solved["proved"] is False


def test_compare_json_reports_an_unproved_plans_gap_as_optimize_does(capsys):
    args = ["--model", "deepseek-v3", "--tokens", "2T", "--budget", "100M", "--gpu", "mi300x"]
    args += ["--time-limit", "0.1", "--solver", "exhaustive", "--no-explain"]
    _, doc = _json(capsys, ["compare", *args])
    status = doc["plans"][0]["status"]
    assert doc["status"] == status
    gap = doc["solve"]["gap"]
    if status == "optimal":
        assert gap == 0.0
    elif status == "feasible":  # the gap to the bound of the shapes not searched (exhaustive.py)
        assert gap is not None and 0.0 <= gap <= 1.0
    else:  # a loaded machine: stopped before its first plan
        assert status == "unknown" and gap is None
    assert doc["solve"]["proved"] is (status == "optimal")


def test_compare_dict_status_without_plans_is_unknown_when_a_search_ran_out():
    rows = [
        SimpleNamespace(
            gpu="h200", result=SolveResult("unknown", "cpsat", 0.1, None), top_binding=""
        )
    ]
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=5e6, gpus=("h100-sxm",))
    doc = compare_dict(s, rows)
    assert doc["status"] == "unknown" and doc["solve"]["gap"] is None


def test_a_compare_row_without_a_plan_carries_every_plan_key_null(capsys):
    """compare --json's entry for a GPU type with no plan had only rank, gpu, evidence,
    status and top_binding; the contract gives every entry of ``plans`` the plan keys, so
    it carries each of them, null, in the order a plan has them."""
    args = ["--model", "llama2-7b", "--tokens", "100B", "--budget", "350K", "--no-explain"]
    args += ["--gpu", "h100-sxm", "--gpu", "b200", "--gpu", "a100-80gb"]
    code, doc = _json(capsys, ["compare", *args])
    assert code == 0
    with_plan = [p for p in doc["plans"] if p["num_gpus"] is not None]
    without = [p for p in doc["plans"] if p["status"] == "infeasible"]
    assert with_plan and without
    for p in without:
        assert list(p) == list(with_plan[0])
        assert p["gpu"] and p["rank"] and p["evidence"]["status"]
        nulls = set(p) - {"rank", "gpu", "evidence", "status", "top_binding"}
        assert nulls == set(PLAN_COLUMNS) - {"rank", "gpu"}
        assert all(p[k] is None for k in nulls)


# ---------------------------------------------------------------- 5: --plot without a plan
def test_plot_without_a_plan_still_answers(capsys, tmp_path):
    args = ["compare", *SMALL, "--budget", "10K", "--evidence", "thin"]
    code, plain, plain_err = run_main(capsys, args)
    picture = tmp_path / "p.svg"
    code2, out, err = run_main(capsys, [*args, "--plot", str(picture)])
    assert code == code2 == 1
    assert out == plain and "Smallest fix: budget must be at least $" in out
    note, line = err.strip("\n").split("\n")
    assert note == "designer: --plot: no GPU type has a plan to draw; nothing drawn"
    assert line == one_line(plain_err) and line.startswith("designer: infeasible:")
    assert not picture.exists()


# ---------------------------------------------------------------- 6, 7: breakeven's text
def test_a_never_winning_gpu_quotes_its_catalog_price_and_both_plans(capsys):
    args = ["breakeven", *SMALL, "--budget", "300K", "--pricing", "cloud"]
    code, out, _ = run_main(capsys, [*args, "--gpu", "a100-80gb", "--against", "h100-sxm"])
    assert code == 0
    lead, ours, theirs = out.strip("\n").split("\n")
    assert lead == (
        "a100-80gb does not win the job against h100-sxm even at 1/1000 of its catalog "
        "price ($1.50 per GPU-hour)."
    )
    assert ours.startswith("  a100-80gb at 1/1000 of its price: ")
    assert theirs.startswith("  h100-sxm: 2,048 GPUs, ")
    _, doc = _json(capsys, [*args, "--gpu", "a100-80gb", "--against", "h100-sxm"])
    assert doc["lowest_price_plan"]["gpu"] == "a100-80gb" and doc["plans"]["gpu"] is None


def test_a_rival_without_a_plan_is_said(capsys):
    """By a 7-day deadline h100-sxm has no plan: the price is where h200 stops answering."""
    args = ["breakeven", *SMALL, "--budget", "5M", "--deadline", "7d"]
    code, out, _ = run_main(capsys, [*args, "--gpu", "h200", "--against", "h100-sxm"])
    assert code == 0
    lead, ours, theirs = out.strip("\n").split("\n")
    assert lead.startswith("h100-sxm has no plan for this question; h200 answers it at or below $")
    assert lead.endswith("; above it h200 has no plan either.")
    assert ours.startswith("  h200 at that price: ")
    assert theirs == "  h100-sxm: no plan (infeasible)"
    _, doc = _json(capsys, [*args, "--gpu", "h200", "--against", "h100-sxm"])
    assert doc["against_status"] == "infeasible" and doc["plans"]["against"] is None


@pytest.fixture(scope="module")
def given():
    """A question and a rival result (a given plan, no solve)."""
    s = build_scenario(
        model="llama2-7b",
        tokens=2e10,
        gpus=("h100-sxm", "h200"),
        budget=5e6,
        max_batch_tokens=2**20,
        no_failures=True,
    )
    rival = s.with_changes(gpus=("h200",))
    shape = Shape("h200", 2, 1, 1, 1, 1, "selective", "bf16")
    nic = rival.nics_for("h200")[0].name
    cfg = Config(shape, nic, max(rival.nic_counts("h200")), 8, 16)
    return s, evaluate_config(rival, cfg)


def test_a_gpu_with_no_plan_at_any_price_says_so(given):
    s, rival = given
    nothing = SolveResult("infeasible", "cpsat", 0.0, None)
    be = Breakeven("h100-sxm", "h200", 30e3, None, False, rival, None, (30.0, 30e6), nothing)
    lead, theirs = breakeven_text(s, be).split("\n")
    assert lead == (
        "h100-sxm has no plan for this question even at 1/1000 of its catalog price "
        "($30.0K per GPU), so it never wins the job against h200."
    )
    assert theirs.startswith("  h200: 16 GPUs, ")
    assert breakeven_dict(s, be)["lowest_price_plan"] is None


def test_an_at_or_below_price_is_rounded_down(given):
    s, rival = given
    be = Breakeven("h100-sxm", "h200", 30e3, 30_373.0, True, rival, rival, (30.0, 30e6))
    assert "at or below $30.3K per GPU (catalog $30.0K, +1.2%)." in breakeven_text(s, be)
    assert _money_down(s, 30_373.0) == "$30.3K" and _money_down(s, 30_400.0) == "$30.4K"
    assert _money_down(s, 1_239_999.0) == "$1.23M" and _money_down(s, 999.9) == "$999"
    cloud = s.with_changes(pricing="cloud")
    assert _money_down(cloud, 8.5999) == "$8.59" and _money_down(cloud, 8.6) == "$8.60"


# ---------------------------------------------------------------- the evidence rule's line
def test_compare_names_the_gpu_types_the_evidence_rule_left_out(capsys):
    args = ["compare", *SMALL, "--budget", "5M", "--no-explain"]
    code, out, _ = run_main(capsys, args)
    assert code == 0
    line = out.strip("\n").split("\n")[-1]
    assert line.startswith("Beyond the evidence rule (--evidence measured searched only")
    assert "--evidence thin adds a100-80gb, mi300x; --evidence any adds all " in line
    _, doc = _json(capsys, args)
    left = doc["left_out"]
    assert left["evidence"] == "measured" and set(left["thin"]) <= set(left["gpus"])
    assert f"{len(left['gpus'])} GPU types left out" in line
    assert "h100-sxm" not in left["gpus"]
    _, named = _json(capsys, [*args, "--gpu", "h100-sxm"])  # GPUs named: none left out
    assert named["left_out"] is None
    wide = run_main(capsys, [*args, "--evidence", "any"])[1]
    assert "Beyond the evidence rule" not in wide


def test_plans_of_a_whole_catalog_question_solve_as_compare_shows(capsys):
    """compare's first row is optimize's answer over the same GPU types (the order is
    optimize's: solvers/tie_rule.py)."""
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=5e6, evidence="thin")
    best = solve(s).best
    args = ["compare", *SMALL, "--budget", "5M", "--evidence", "thin", "--no-explain"]
    _, doc = _json(capsys, args)
    assert best is not None and doc["plans"][0]["gpu"] == best.config.shape.gpu
