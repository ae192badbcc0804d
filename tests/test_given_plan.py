"""A saved answer given back to explain and export (designer/question/given_plan.py): a
rented plan is billed under the term its solve chose, as optimize billed it, and a plan
saved as proved optimal stays proved while it re-evaluates to the saved objective."""

from __future__ import annotations

import json

import pytest

from designer.question.build import build_scenario
from designer.question.given_plan import GivenPlan, evaluate_given
from helpers import one_line, run_main
from solvers import solve


def saved(capsys, tmp_path, *options: str) -> tuple[dict, object]:
    code, out, err = run_main(capsys, ["optimize", *options, "--json", "--no-explain"])
    assert code == 0, err
    path = tmp_path / "answer.json"
    path.write_text(out)
    return json.loads(out), path


def explained(capsys, path) -> dict:
    code, out, err = run_main(capsys, ["explain", str(path), "--json"])
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(
    "budget, term",
    [("3M", "on-demand"), ("1.5M", "1-year reserved")],  # AWS's block price; a term's minimum
)
def test_explain_bills_a_rented_plan_under_its_term(capsys, tmp_path, budget, term):
    """Before, explain priced the saved plan at the catalog's hourly price for its days
    ($1,389,154 for a plan optimize billed $2,283,973 on AWS's block; $1,282,316 for one
    billed $1,466,774 for a year's reserved minimum), so the budget's slack was wrong."""
    doc, path = saved(capsys, tmp_path, "--budget", budget, "--pricing", "cloud")
    plan = doc["plans"][0]
    assert plan["cloud_term"] == term
    back = explained(capsys, path)
    again = back["plans"][0]
    assert again["cloud_term"] == term
    assert again["cost_usd"] == pytest.approx(plan["cost_usd"], rel=1e-12)
    slack = {b["constraint"]: b["slack"] for b in back["binding"]}
    assert slack["budget"] == pytest.approx(float(budget[:-1]) * 1e6 - plan["cost_usd"])


def test_explain_keeps_a_saved_proof(capsys, tmp_path):
    """A proved answer explained is proved (it was reported 'feasible, gap unknown')."""
    doc, path = saved(capsys, tmp_path, "--budget", "30M")
    assert doc["status"] == "optimal"
    back = explained(capsys, path)
    assert (back["status"], back["solve"]["proved"], back["solve"]["gap"]) == ("optimal", True, 0)
    assert back["solve"]["message"] == (
        f"proved optimal by {doc['solve']['solver']} when saved; re-evaluated here, not re-solved"
    )
    assert back["objective"]["value"] == pytest.approx(doc["objective"]["value"], rel=1e-12)
    assert "not proved optimal" not in back["explanation"]


def test_a_moved_objective_loses_the_saved_proof(capsys, tmp_path):
    doc, path = saved(capsys, tmp_path, "--budget", "30M")
    doc["objective"]["value"] *= 1.01  # as if this release timed the plan differently
    path.write_text(json.dumps(doc))
    back = explained(capsys, path)
    assert (back["status"], back["solve"]["proved"]) == ("feasible", False)
    assert "so the proof no longer holds: re-run optimize" in back["solve"]["message"]


def test_an_unknown_term_is_a_usage_error(capsys, tmp_path):
    doc, path = saved(capsys, tmp_path, "--budget", "3M", "--pricing", "cloud")
    doc["plans"][0]["cloud_term"] = "weekly"
    path.write_text(json.dumps(doc))
    code, _, err = run_main(capsys, ["explain", str(path)])
    assert code == 2
    assert one_line(err).startswith(
        f"designer: error: {path}: plans[0].cloud_term: 'weekly' is not a rental term"
    )


def test_a_plan_without_a_saved_solve_is_unproved():
    s = build_scenario(budget=30e6)
    res = solve(s)
    given = evaluate_given(s, GivenPlan(res.best.config))
    assert (given.status, given.gap, given.message) == ("feasible", None, "")
    assert given.best.objective == res.best.objective
