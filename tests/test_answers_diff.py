"""bench/answers_diff.py: the same-answers check of issue 32 (two revisions, timing aside)."""

from __future__ import annotations

import sys

from helpers import REPO, load_bench

sys.path.insert(0, str(REPO / "bench"))  # the script imports its neighbours, as when run
diff = load_bench("answers_diff.py", "bench_answers_diff")


def test_differences_name_each_path_and_both_values():
    a = {"plans": [{"gpus": 8, "days": 10.0}], "solve": {"status": "optimal"}}
    assert diff.differences(a, a) == []
    b = {"plans": [{"gpus": 8, "days": 10.5}], "solve": {"status": "optimal"}}
    assert diff.differences(a, b) == [".plans[0].days: 10.0 against 10.5"]
    assert diff.differences(a, {**a, "plans": []}) == [".plans: 1 items against 0"]
    assert diff.differences({"x": 1}, {}) == [".x: only in A"]
    assert diff.differences({"x": 1}, {"x": "1"}) == [".x: 1 against '1'"]


def test_a_plan_that_moved_is_shown_before_its_evidence(capsys):
    """An answer whose evidence differs in many fields and whose plan also moved: the plan's
    difference is printed first and counted; evidence alone is not a moved plan."""
    evidence = {f"f{i:02d}": i for i in range(30)}
    a = {"answer": {"plans": [{"tp": 2, "evidence": evidence}]}}
    b = {"answer": {"plans": [{"tp": 1, "evidence": {k: v + 1 for k, v in evidence.items()}}]}}
    diffs = diff.differences(a, b)
    assert len(diffs) == 31 and diffs[0].startswith(".answer.plans[0].evidence")
    assert diff.plan_differences(diffs) == [".answer.plans[0].tp: 2 against 1"]
    assert diff.report("q", diffs) is True
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "q: 31 differences, 1 in its plans"
    assert out[1] == "    .answer.plans[0].tp: 2 against 1" and len(out) == 21
    only_evidence = {"answer": {"plans": [{"tp": 2, "evidence": {"f00": 5}}]}}
    assert diff.report("q", diff.differences(a, only_evidence)) is False
    study = [".answer[3].gpus: 8 against 16", ".answer[3].evidence: 'x' against 'y'"]
    assert diff.plan_differences(study) == [".answer[3].gpus: 8 against 16"]
    # a plan column one side lacks (added by the change) is no move of the plan
    added = diff.differences(a, {"answer": {"plans": [{"tp": 2, "evidence": evidence, "x": 1}]}})
    assert added == [".answer.plans[0].x: only in B"]
    assert diff.plan_differences(added) == [] and diff.report("q", added) is False


def test_the_readmes_buyer_questions_are_asked():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    asked = {" ".join(args[1:]) for args in diff.questions().values() if args[0] == "optimize"}
    for question in (
        "--budget 30M",
        "--model llama3-405b --tokens 15T --budget 500M",
        "--model deepseek-v3 --tokens 15T --budget 100M",
        "--model llama3-70b --tokens 15T --deadline 90d",
    ):
        assert question in asked
        assert f"`designer optimize {question}`" in readme or f"`{question}`" in readme


def test_the_suites_questions_are_all_asked():
    names = diff.questions()
    assert sum(n.startswith("suite/") for n in names) >= 10
    assert sum(n.startswith("moe-suite/") for n in names) >= 1
    assert "study/budgets-100" in names
