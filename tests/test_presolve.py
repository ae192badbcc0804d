"""solvers/screen/presolve.py: the shapes the enforced families leave, with their DP ranges.

Presolve may only drop a shape no feasible plan uses, and only cut DP degrees no feasible
plan of that shape takes: checked against the exhaustive solver's best plan per shape."""

from __future__ import annotations

import pytest

from helpers import prime_scenario, random_scenario
from solvers.exhaustive import best_for_candidate
from solvers.screen.presolve import presolve
from solvers.space import enumerate_candidates, nic_specs


def test_nothing_in_nothing_out(cat):
    pre = presolve(prime_scenario(cat), [])
    assert pre.candidates == [] and pre.dp_ranges == []


@pytest.mark.parametrize("seed", [2, 3, 8, 11])
def test_kept_shapes_are_allowed_with_ranges_in_whole_units(cat, seed):
    s = random_scenario(seed, cat)
    cands = enumerate_candidates(s)
    pre = presolve(s, cands)
    assert len(pre.candidates) == len(pre.dp_ranges) <= len(cands)
    for c, (lo, hi) in zip(pre.candidates, pre.dp_ranges, strict=True):
        assert c.allowed(s)
        assert 1 <= lo <= hi
        assert lo % c.shape.dp_step == 0 and hi % c.shape.dp_step == 0
        assert lo >= c.dp_floor(s)


@pytest.mark.parametrize("seed", [3, 4, 11, 17, 27])
def test_presolve_drops_no_feasible_plan(cat, seed):
    """Every allowed shape with a feasible plan (the exhaustive solver's best for that
    shape) is kept, and that plan's DP degree lies in its range."""
    s = random_scenario(seed, cat)
    cands = enumerate_candidates(s)
    pre = presolve(s, cands)
    kept = dict(zip((c.shape for c in pre.candidates), pre.dp_ranges, strict=True))
    nics = nic_specs(s)
    checked = 0
    allowed = [c for c in cands if c.allowed(s)]  # the exhaustive solver's shapes
    for c in allowed[:: max(1, len(allowed) // 60)]:
        best = best_for_candidate(s, c, nics, s.assumptions.dp_overlap)
        if not best:
            continue
        checked += 1
        config = best[1]
        assert c.shape in kept, c.shape
        lo, hi = kept[c.shape]
        assert lo <= config.dp <= hi
    assert checked > 0


def test_switching_families_off_keeps_more(cat):
    s = random_scenario(3, cat)
    cands = enumerate_candidates(s)
    full = {c.shape for c in presolve(s, cands).candidates}
    loose = s.with_changes(disabled=frozenset({"memory", "tp_domain", "tp_bandwidth"}))
    assert full <= {c.shape for c in presolve(loose, cands).candidates}


def test_cheap_only_is_a_subset(cat):
    s = random_scenario(2, cat)
    cands = enumerate_candidates(s)
    full = {c.shape for c in presolve(s, cands).candidates}
    cheap = presolve(s, cands, cheap_only=True)
    assert {c.shape for c in cheap.candidates} <= full
    if cheap.complete:
        assert {c.shape for c in cheap.candidates} == full


@pytest.mark.parametrize("rule", ["tp_domain", "tp_bandwidth", "divisibility"])
def test_breaking_keeps_only_the_shapes_that_break_the_rule(cat, rule):
    s = prime_scenario(cat)
    cands = enumerate_candidates(s)
    off = s.with_changes(disabled=frozenset({rule}))
    pre = presolve(off, cands, breaking=rule)
    assert all(rule in c.structural for c in pre.candidates)
    assert {c.shape for c in pre.candidates} <= {c.shape for c in presolve(off, cands).candidates}


def test_columns_hold_each_shapes_own_numbers(cat):
    """presolve's columns (_gather, on arrays) equal each shape's own numbers: its GPU, GPUs
    per replica, DP step (bounds.dp_step: purchase units and the expert folding), micro-
    batch, pipeline fill and shape rules, over a MoE space of several GPUs."""
    from designer.question.build import build_scenario
    from solvers.screen.bounds import dp_step
    from solvers.screen.presolve import _RULE_BITS, _gather

    gpus = ("rtx4090", "h100-sxm", "gb200")
    s = build_scenario(model="qwen3-30b-a3b", tokens=1e12, budget=1e8, gpus=gpus, evidence="any")
    s = s.with_changes(micro_batches=(1, 2))
    cands = enumerate_candidates(s)
    col = _gather(cands)
    assert len({c.shape.gpu for c in cands}) == 3 and len({c.shape.ep for c in cands}) > 2
    assert any(c.structural for c in cands)
    for i, c in enumerate(cands):
        sh = c.shape
        assert col.gpu_names[col.gpu[i]] == sh.gpu
        assert col.replica[i] == sh.replica_gpus and col.micro_batch[i] == sh.micro_batch
        assert col.dp_step[i] == dp_step(s, c)
        assert col.m_min[i] == max(1, sh.pp) and col.interleaved[i] == (sh.vp > 1 and sh.pp > 1)
        assert col.rules[i] == sum(_RULE_BITS[r] for r in c.structural)


@pytest.mark.parametrize("seed", [2, 3, 8, 11, 17])
def test_under_days_keeps_the_shapes_whose_gemm_bound_lies_under_it(cat, seed):
    """presolve(..., under_days=x): exactly the shapes of the whole presolve whose GEMM-only
    bound (at their range) lies at or under x, with the same ranges; the others are left
    out before their memory bounds (a time question only: another keeps them all)."""
    from solvers.screen.bounds import gemm_lower_bounds

    s = random_scenario(seed, cat)
    cands = enumerate_candidates(s)
    whole = presolve(s, cands)
    if not whole.candidates:
        return
    cheap = gemm_lower_bounds(s, whole.candidates, whole.dp_ranges)
    under = sorted(cheap)[len(cheap) // 3]
    part = presolve(s, cands, under_days=under)
    if s.objective != "time":
        assert part.candidates == whole.candidates and part.dp_ranges == whole.dp_ranges
        return
    pairs = zip(whole.candidates, whole.dp_ranges, cheap, strict=True)
    kept = [(c, r) for c, r, b in pairs if b <= under]
    assert [c for c, _ in kept] == part.candidates
    assert [r for _, r in kept] == part.dp_ranges
    assert 0 < len(part.candidates) < len(whole.candidates)
