"""designer/answer.py: what optimize, explain and export do with a solve. The binding
constraints of the best plan or the conflict of an infeasible question, the one-line error
for no plan (the conflict and its fixes, or the time limit), files written whole, and a
saved answer's plan read back."""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass, field

import pytest

from designer import answer as answer_mod
from designer.alternatives import alternatives, as_dicts
from designer.answer import explain, explain_beside, no_plan, saved_plan, write_file
from designer.errors import Infeasible, Unanswered, UsageError
from designer.exit_codes import report_error
from designer.question.build import scenario_from_options
from helpers import prime_scenario, run_main
from solvers.cpsat.solve import solve_cpsat
from solvers.families import enforced
from solvers.result import SolveResult


@dataclass
class _Fix:
    change: str


@dataclass
class _Conflict:
    constraints: list[str]
    fixes: list[_Fix] = field(default_factory=list)


def _res(status: str) -> SolveResult:
    return SolveResult(status=status, solver="cpsat", wall_s=1.0, gap=None)


@pytest.mark.parametrize(
    "status,conflict,line",
    [
        (
            "unknown",
            None,
            "no plan found within the time limit, and none proved impossible; raise --time-limit",
        ),
        ("infeasible", None, "no plan satisfies the question"),
        ("infeasible", _Conflict([]), "no plan satisfies the question"),
        (
            "infeasible",
            _Conflict(["budget", "deadline"]),
            "no plan satisfies the question: budget and deadline conflict",
        ),
        (
            "infeasible",
            _Conflict(["budget", "deadline"], [_Fix("budget >= $2M"), _Fix("deadline >= 30 d")]),
            "no plan satisfies the question: budget and deadline conflict "
            "(budget >= $2M; or deadline >= 30 d)",
        ),
    ],
)
def test_no_plan_says_the_conflict_and_its_fixes_or_the_time_limit(status, conflict, line):
    err = no_plan(_res(status), conflict)
    assert isinstance(err, Infeasible) and str(err) == line
    # the time limit proved nothing: reported as no answer, not as infeasible (exit 1 both)
    assert isinstance(err, Unanswered) == (status == "unknown")
    assert report_error(err).exit_code == 1
    prefix = "no answer: " if status == "unknown" else "infeasible: "
    assert report_error(err).message == prefix + line


def test_explain_prices_the_best_plan_or_explains_the_conflict(cat):
    s = prime_scenario(cat)
    res = solve_cpsat(s)
    binding, conflict = explain(s, res, 30.0)
    assert conflict is None and binding
    assert {b.constraint for b in binding} <= set(enforced(s))  # the question's families
    broke = s.with_changes(budget_usd=1e3)
    none = solve_cpsat(broke)
    binding, conflict = explain(broke, none, 30.0)
    assert binding is None and "budget" in conflict.constraints
    assert explain(s, _res("unknown"), 1.0) == (None, None)


def test_the_explanation_beside_the_alternatives_is_the_one_alone():
    """optimize explains beside the alternatives (explain_beside: in a forked process on
    Linux, a thread elsewhere): both answers are those each gives alone, and an error in
    the work is raised."""
    options = {"model": "llama2-7b", "tokens": 1e12, "budget": 1e7}
    s = scenario_from_options(options)
    wide = scenario_from_options({**options, "evidence": "any"})
    res = solve_cpsat(s)
    alone = (explain(s, res, 30.0), as_dicts(alternatives(s, wide, res)))
    alts, why = explain_beside(s, res, 30.0, lambda: as_dicts(alternatives(s, wide, res)))
    assert (why, alts) == alone and alts and why[0]

    def broken() -> None:
        raise ValueError("work failed")

    with pytest.raises(ValueError, match="work failed"):
        explain_beside(s, res, 30.0, broken)


linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the explanation forks on Linux only"
)


@linux_only
def test_the_explanation_beside_runs_in_a_process_of_its_own(monkeypatch):
    """On Linux the explanation is computed in a forked process (both it and the
    alternatives are mostly Python: threads would share one core through the GIL) and
    comes back pickled; an error there is raised here."""
    here = os.getpid()
    monkeypatch.setattr(answer_mod, "explain", lambda s, r, t: (os.getpid(), (s, r, t)))
    done, (pid, args) = explain_beside("question", "result", 7.0, lambda: "alternatives")
    assert done == "alternatives" and args == ("question", "result", 7.0)
    assert pid != here

    def failing(s, r, t):
        raise ValueError("explanation failed")

    monkeypatch.setattr(answer_mod, "explain", failing)
    with pytest.raises(ValueError, match="explanation failed"):
        explain_beside("question", "result", 7.0, lambda: None)


@linux_only
def test_the_explanation_process_gives_way_to_the_work_beside_it(monkeypatch):
    """With ``yield_cpu`` (work in a process of its own beside it) the forked explanation
    runs EXPLAIN_NICENESS steps nicer than optimize's process (os.nice): the alternatives,
    the longer of the two on a MoE question, get the CPU first. Without it, and in
    optimize's own process, the niceness is unchanged."""
    here = os.nice(0)
    monkeypatch.setattr(answer_mod, "explain", lambda s, r, t: os.nice(0))
    done, there = explain_beside(None, None, 1.0, lambda: os.nice(0), yield_cpu=True)
    assert answer_mod.EXPLAIN_NICENESS > 0
    assert there == min(19, here + answer_mod.EXPLAIN_NICENESS) and done == here == os.nice(0)
    assert explain_beside(None, None, 1.0, lambda: os.nice(0)) == (here, here)  # alone


@linux_only
def test_an_explanation_process_that_dies_is_explained_here(monkeypatch):
    """A forked explanation that ends without an answer (killed) is computed in
    optimize's own process instead."""
    here = os.getpid()

    def dies_there(s, r, t):
        if os.getpid() != here:
            os._exit(3)
        return "explained here"

    monkeypatch.setattr(answer_mod, "explain", dies_there)
    assert explain_beside(None, None, 1.0, lambda: 1) == (1, "explained here")


@linux_only
def test_an_error_in_the_work_ends_the_explanation_process(monkeypatch):
    """The alternatives failing (or interrupted) end the explanation at once: no wait for
    it, no process left behind."""
    monkeypatch.setattr(answer_mod, "explain", lambda s, r, t: time.sleep(60))

    def broken() -> None:
        raise KeyboardInterrupt

    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        explain_beside(None, None, 1.0, broken)
    assert time.perf_counter() - start < 30
    assert not multiprocessing.active_children()


def test_write_file_writes_whole_or_not_at_all(tmp_path):
    out = tmp_path / "a.csv"
    write_file(None, "ignored")  # no option: nothing written
    write_file(out, "x,y\n1,2\n")
    assert out.read_text() == "x,y\n1,2\n"
    with pytest.raises(UsageError, match="--bom"):
        write_file(tmp_path / "missing" / "b.csv", "text", "--bom")


def test_saved_plan_reads_a_saved_answer_and_refuses_one_without_a_plan(tmp_path, capsys):
    args = ["optimize", "--model", "llama2-7b", "--tokens", "20B", "--budget", "1M"]
    args += ["--gpu", "h100-sxm", "--max-batch-tokens", "1M", "--no-explain", "--json"]
    code, out, _ = run_main(capsys, args)
    assert code == 0
    path = tmp_path / "answer.json"
    path.write_text(out)
    scenario, res = saved_plan(path)
    doc = json.loads(out)["plans"][0]
    plan = res.best
    assert (plan.config.dp, plan.config.shape.tp, plan.config.shape.pp) == (
        doc["dp"],
        doc["tp"],
        doc["pp"],
    )
    assert plan.evaluation.time_to_train_days == pytest.approx(doc["time_to_train_days"])
    empty = json.loads(out)
    empty["plans"] = []
    path.write_text(json.dumps(empty))
    with pytest.raises(UsageError, match="holds no plan"):
        saved_plan(path)
