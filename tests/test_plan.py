"""solvers/plan.py: a configuration re-evaluated by the float model. Its cost is the
question's pricing, its objective the days or the cost, its violations those of the active
families, and it trains the tokens its batch needs (models/batch_tokens.py)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from helpers import prime_scenario, small_batch_scenario
from models.batch_tokens import token_multiplier
from solvers.decisions import Config, Shape
from solvers.plan import build_plan, cost_usd

SHAPE = Shape("h100-sxm", 8, 1, 4, 1, 1, "none", "bf16", split=(16, 15, False, False))
CONFIG = Config(SHAPE, "cx7-400g", 8, 2, 64)


def test_the_cost_is_the_questions_pricing(cat):
    s = prime_scenario(cat)
    plans = {p: build_plan(s.with_changes(pricing=p), CONFIG) for p in ("capex", "tco", "cloud")}
    ev = plans["capex"].evaluation
    assert cost_usd(ev, "capex") == ev.capex == plans["capex"].cost_usd
    assert plans["tco"].cost_usd == plans["tco"].evaluation.tco_cost
    assert plans["cloud"].cost_usd == plans["cloud"].evaluation.cloud_cost
    assert len({p.cost_usd for p in plans.values()}) == 3  # three different prices
    for p in plans.values():
        assert p.evaluation.extra["cost_usd"] == p.cost_usd
        assert p.evaluation.extra["gpus_per_node"] == 8


def test_the_objective_is_the_days_or_the_cost(cat):
    s = prime_scenario(cat)
    fast = build_plan(s, CONFIG)
    cheap = build_plan(s.with_changes(objective="cost"), CONFIG)
    assert fast.objective == fast.evaluation.time_to_train_days
    assert cheap.objective == cheap.cost_usd
    assert fast.num_gpus == 8 * 4 * 2 and fast.config is CONFIG


def test_violations_follow_the_active_families(cat):
    s = prime_scenario(cat).with_changes(budget_usd=1e5)  # far under the plan's price
    over = build_plan(s, CONFIG)
    assert "budget" in {v.constraint for v in over.violations} and not over.feasible
    relaxed = build_plan(s.with_changes(disabled=s.disabled | {"budget"}), CONFIG)
    assert "budget" not in {v.constraint for v in relaxed.violations}
    assert relaxed.evaluation.step_time_s == over.evaluation.step_time_s  # the same plan


def test_a_plan_trains_the_tokens_its_batch_needs(cat):
    s = small_batch_scenario(cat, batch_tokens_model="deepseek")
    crit = s.critical_batch_seq
    shape = Shape("h100-sxm", 1, 1, 1, 1, 8, "none", "bf16")
    for m in (4, 48):  # 32 and 384 sequences: under and over the critical batch
        plan = build_plan(s, Config(shape, "cx7-400g", 8, 1, m))
        gb = plan.evaluation.layout.global_batch
        assert plan.evaluation.tokens == pytest.approx(s.tokens * token_multiplier(gb, crit))
        assert plan.evaluation.extra["critical_batch_tokens"] == crit * s.seq_len
    off = build_plan(s.with_changes(batch_tokens_model="off"), Config(shape, "cx7-400g", 8, 1, 48))
    assert off.evaluation.tokens == s.tokens
    assert off.evaluation.extra["critical_batch_tokens"] is None


def test_a_memory_scale_changes_only_the_memory_check(cat):
    s = prime_scenario(cat)
    big = replace(CONFIG, microbatches=64)
    full, half = build_plan(s, big), build_plan(s.with_changes(memory_scale=0.05), big)
    assert "memory" in {v.constraint for v in half.violations}
    assert "memory" not in {v.constraint for v in full.violations}
    assert math.isclose(half.evaluation.step_time_s, full.evaluation.step_time_s)
