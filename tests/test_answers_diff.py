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
