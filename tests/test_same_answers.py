"""bench/same_answers.py: the answer comparison behind issue 32's "same answers" check."""

from __future__ import annotations

from helpers import REPO, load_bench

same = load_bench("same_answers.py", "bench_same_answers")


def test_timing_fields_are_left_out_at_any_depth():
    doc = {"solve": {"wall_s": 1.5, "status": "optimal"}, "plans": [{"wall_s": 2, "gpus": 8}]}
    assert same.without_timing(doc) == {"solve": {"status": "optimal"}, "plans": [{"gpus": 8}]}


def test_the_first_difference_is_named_by_its_path():
    a = {"plans": [{"gpus": 8, "days": 10.0}], "solve": {"status": "optimal"}}
    assert same.first_difference(a, a) is None
    b = {"plans": [{"gpus": 8, "days": 10.5}], "solve": {"status": "optimal"}}
    assert same.first_difference(a, b) == "/plans[0]/days: 10.0 != 10.5"
    assert same.first_difference(a, {**a, "plans": []}) == "/plans: 1 items != 0"
    assert same.first_difference({"x": 1}, {}) == "/x: only in this tree"
    assert same.first_difference({"x": 1}, {"x": "1"}) == "/x: 1 != '1'"


def test_the_questions_are_the_readmes():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for question in same.QUESTIONS:
        assert f"`{question}`" in readme or f"`designer optimize {question}`" in readme
