"""solvers/pair_bound.py: a (GPU, precisions) pair's lower bound from the catalog and the
question alone never exceeds the GEMM bound of any of its presolved shapes (so it is a
valid bound: solvers.screen.bounds' cheap bound is at most the full one, which is at most
every plan's objective), and it applies only where its argument holds."""

from __future__ import annotations

import math

import pytest

from designer import alternatives as alt_mod
from designer.question.build import scenario_from_options
from solvers.pair_bound import pair_lower_bound
from solvers.screen.bounds import prepare_bounds

QUESTIONS = [
    {"model": "deepseek-v3", "tokens": 15e12, "budget": 100e6},
    {"model": "deepseek-v3", "tokens": 2e12, "budget": 20e6, "seq_len": 8192},
    {"model": "qwen3-30b-a3b", "tokens": 1e12, "budget": 5e6},
    {"model": "gpt-oss-120b", "tokens": 3e12, "budget": 30e6, "precision": "any"},
]


def _pairs(options):
    """Every (GPU, precisions) pair of the question under --evidence any, prepared."""
    wide = scenario_from_options({**options, "evidence": "any"})
    for gpu in wide.gpus:
        precs = tuple(p for p in wide.precisions if (gpu, p) not in wide.unmeasured)
        if precs:
            yield alt_mod._prepared(wide, gpu, precs)


@pytest.mark.parametrize("options", QUESTIONS, ids=lambda o: f"{o['model']}-{o['budget']:g}")
def test_the_pair_bound_never_exceeds_a_shapes_bound(options):
    checked = 0
    for pair in _pairs(options):
        assert pair.pre is not None
        precs = pair.scenario.precisions
        floor = pair_lower_bound(prepare_bounds(pair.scenario), pair.gpu, precs)
        cheap = pair.bounds_known()[0]
        if not cheap:
            continue
        assert 0 < floor <= min(cheap), (pair.gpu, floor, min(cheap))
        # and not far below them: it is the same GEMM time at the layout that prices best
        assert floor >= 0.5 * min(cheap), (pair.gpu, floor, min(cheap))
        checked += 1
    assert checked >= 5


def test_the_pair_bound_is_zero_where_it_does_not_apply():
    """The cost objective and dense models are not bounded here; a GPU of which no unit
    fits the budget has no plan (inf)."""
    cost = scenario_from_options(
        {"model": "deepseek-v3", "tokens": 1e12, "deadline": 60.0, "objective": "cost"}
    )
    dense = scenario_from_options({"model": "llama2-7b", "tokens": 1e12, "budget": 1e6})
    for s in (cost, dense):
        one = s.with_changes(gpus=(s.gpus[0],))
        assert pair_lower_bound(prepare_bounds(one), s.gpus[0], s.precisions) == 0.0
    poor = scenario_from_options({"model": "deepseek-v3", "tokens": 1e12, "budget": 1e3})
    one = poor.with_changes(gpus=("h100-sxm",))
    assert pair_lower_bound(prepare_bounds(one), "h100-sxm", poor.precisions) == math.inf
