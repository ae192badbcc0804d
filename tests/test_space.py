"""solvers/space.py: the decision space's options, shapes and memory bounds, module by
module (tests/test_decision_space.py checks what the solvers choose from it)."""

from __future__ import annotations

import random

import pytest

from designer.question.build import build_scenario
from helpers import prime_scenario, wide_moe_scenario
from solvers.cp_degrees import cp_options
from solvers.families import SHAPE_RULES, enforced
from solvers.screen.presolve import presolve
from solvers.space import (
    EVEN,
    Shape,
    dp_min_from_terms,
    enumerate_candidates,
    expert_options,
    memory_frontier,
    memory_layout,
    micro_batch_options,
    nic_specs,
    pipeline_splits,
    powers_of_two,
    pp_options,
    shape_bound_terms,
    shape_memory_terms,
    structural_violations,
    tp_options,
    vp_options,
    with_memory_scale,
)


def test_option_lists():
    assert powers_of_two(1) == [1]
    assert powers_of_two(100) == [1, 2, 4, 8, 16, 32, 64]
    assert cp_options(2048) == [1]
    assert cp_options(8192) == [1, 2]
    assert cp_options(32768) == [1, 2, 4, 8]
    # every divisor of the layers, and the powers of two up to them (uneven splits)
    assert pp_options(12) == [1, 2, 3, 4, 6, 8, 12]
    assert pp_options(61) == [1, 2, 4, 8, 16, 32, 61]


def test_tp_options_stay_within_twice_the_domain_and_the_heads(cat):
    gpu = cat.gpu("h100-sxm")  # 8-GPU NVLink domain
    spec = prime_scenario(cat).spec  # 64 heads
    assert tp_options(spec, gpu) == [1, 2, 4, 8, 16]
    assert max(tp_options(spec.model_copy(update={"heads": 4}), gpu)) == 4


def test_expert_options_dense_and_moe(cat):
    gpu = cat.gpu("rtx4090")
    assert expert_options(prime_scenario(cat).spec, 4, gpu) == [(1, 1)]
    moe = wide_moe_scenario(cat).spec  # 128 experts
    pairs = expert_options(moe, 1, gpu)
    assert pairs == [(e, 1) for e in powers_of_two(128)]
    assert all(moe.experts % e == 0 for e, _ in pairs)


def test_pipeline_splits_and_virtual_stages():
    assert pipeline_splits(12, 1, 1) == (EVEN,)
    assert pipeline_splits(12, 1, 2) == ()
    assert pipeline_splits(12, 4, 3) == (EVEN,)
    uneven = pipeline_splits(61, 4, 1)
    assert uneven[0] == EVEN and len(uneven) > 1  # the even split breaks divisibility
    assert EVEN not in pipeline_splits(61, 4, 2)
    assert vp_options(12, 1) == [1]
    assert vp_options(12, 4) == [1, 2, 3]  # v 2: an uneven split (8 does not divide 12)
    assert EVEN not in pipeline_splits(12, 4, 2)
    assert all(pipeline_splits(40, 8, v) for v in vp_options(40, 8, 5))
    assert max(vp_options(128, 4, 8)) <= 8


def test_shape_degrees():
    dense = Shape("h100-sxm", 4, 2, 8, 1, 1, "none", "bf16")
    assert dense.replica_gpus == 64 and dense.dp_step == 1
    moe = dense._replace(tp=2, cp=1, ep=8, etp=1)
    assert moe.dp_step == 4  # EP x ETP = 8 divides TP x CP x DP = 2 d when 4 | d
    assert moe.layout(4, 16).global_batch == 4 * 16 * 1


def test_dp_min_from_terms_is_the_least_fitting_degree():
    terms = [(10.0, 300.0), (20.0, 100.0)]  # (fixed GB, sharded GB) per stage

    def fits(d, cp, cap):
        return max(f + s / (d * cp) for f, s in terms) <= cap + 1e-9

    for cp, cap in [(1, 80.0), (2, 40.0), (1, 21.0), (4, 30.0)]:
        d = dp_min_from_terms(terms, cp, cap)
        assert d is not None and fits(d, cp, cap) and (d == 1 or not fits(d - 1, cp, cap))
    assert dp_min_from_terms(terms, 1, 20.0) is None  # a stage's fixed part alone fills it
    assert dp_min_from_terms([(0.0, 0.0)], 1, 1.0) == 1


def test_memory_frontier_keeps_the_least_fitting_degree():
    """memory_frontier drops the dominated terms (and repeats) and dp_min_from_terms gives
    the same degree from what it keeps, at capacities around every term's, over random
    pipelines whose ranks repeat, tie and dominate one another."""
    rng = random.Random(7)
    assert memory_frontier([(1.0, 5.0), (2.0, 5.0), (1.0, 6.0), (2.0, 5.0), (0.5, 1.0)]) == [
        (2.0, 5.0),
        (1.0, 6.0),
    ]
    for _ in range(400):
        pool = [(rng.choice([0.5, 3.0, 7.25]) * rng.random() * 40, rng.random() * 900.0)]
        pool += [(rng.random() * 40, rng.choice([0.0, 1e-3, 450.0]) * rng.random())]
        terms = [
            rng.choice(pool) if rng.random() < 0.3 else (rng.random() * 40, rng.random() * 900)
            for _ in range(rng.randint(1, 12))
        ]
        kept = memory_frontier(terms)
        assert set(kept) <= set(terms) and len(kept) == len(set(kept))
        for fixed, sharded in terms:  # each term is at most a kept one, part by part
            assert any(f >= fixed and s >= sharded for f, s in kept)
        for cp in (1, 2, 8):
            for cap in [f + s / rng.choice([1, 3, 64]) for f, s in terms] + [10.0, 80.0]:
                assert dp_min_from_terms(kept, cp, cap) == dp_min_from_terms(terms, cp, cap)


def test_bound_terms_keep_the_frontier_of_every_rank():
    """A MoE shape's memory bound reads shape_bound_terms (the rank storing the most of
    those equal but for their activations; from its ranks at a micro-batch of 1, cached or
    not, equal to moe_memory_terms(binding=True) at its memory_layout, full pipelines): their
    frontier is that of every rank's terms, over MoE zoo models' pipelines (deep ones,
    uneven splits, MTP, fp8, ZeRO-1), and so is the least DP degree that fits."""
    from models.evaluate import with_profile
    from models.memory import moe_memory_terms
    from models.zoo import moe_zoo

    rng = random.Random(3)
    checked = fewer = 0
    for name in ("deepseek-v3", "gpt-oss-120b", "qwen3-30b-a3b"):
        s = build_scenario(model=moe_zoo()[name], tokens=1e12, budget=1e8, evidence="any")
        s = s.with_changes(gpus=("h100-sxm",), precisions=("bf16", "fp8"))
        cands = [c for c in enumerate_candidates(s) if c.shape.pp > 2]
        a = with_profile(s.assumptions, cands[0]._source.gpu)
        cache: dict = {}  # the ranks at a micro-batch of 1, shared by the micro-batches
        for cand in rng.sample(cands, 40):
            every = shape_memory_terms(s, cand.shape, a)
            bound = shape_bound_terms(s, cand.shape, a, cache)
            layout, ep, etp = memory_layout(cand.shape), cand.shape.ep, cand.shape.etp
            assert bound == moe_memory_terms(s.spec, layout, s.seq_len, a, ep, etp, binding=True)
            assert bound == shape_bound_terms(s, cand.shape, a)  # no cache: the same
            assert set(bound) <= set(every)
            fewer += len(bound) < len(every)
            assert memory_frontier(bound) == memory_frontier(every)
            for cap in (40.0, 80.0, 141.0):
                assert dp_min_from_terms(bound, cand.shape.cp, cap) == dp_min_from_terms(
                    every, cand.shape.cp, cap
                )
            checked += 1
    assert checked == 120 and fewer > 60  # most pipelines repeat their middle ranks


def test_micro_batch_options_follow_the_question_and_the_ceiling(cat):
    s = prime_scenario(cat)
    assert micro_batch_options(s) == (1, 2, 4)
    free = s.with_changes(micro_batches=None, max_batch_tokens=4 * 2**20)
    sizes = micro_batch_options(free)
    assert sizes == tuple(powers_of_two(4 * 2**20 // s.seq_len))
    off = free.with_changes(disabled=frozenset({"batch_ceiling"}))
    assert max(micro_batch_options(off)) == 1024


def test_candidates_carry_their_shape_rules(cat):
    s = prime_scenario(cat)
    cands = enumerate_candidates(s)
    assert cands and len({c.shape for c in cands}) == len(cands)
    for c in cands[:: max(1, len(cands) // 200)]:
        gpu = cat.gpu(c.shape.gpu)
        assert c.structural == structural_violations(s, c.shape, gpu)
        assert c.structural <= {f.name for f in SHAPE_RULES}
        assert c.allowed(s) == (not c.structural and c.dp_min_memory is not None)


def test_with_memory_scale_recomputes_only_the_memory_bound(cat):
    s = prime_scenario(cat)
    cands = enumerate_candidates(s)
    bigger = s.with_changes(memory_scale=1.5)
    scaled = with_memory_scale(bigger, cands)
    assert [c.shape for c in scaled] == [c.shape for c in cands]
    fresh = {c.shape: c.dp_min_memory for c in enumerate_candidates(bigger)}
    for old, new in zip(cands, scaled, strict=True):
        assert new.structural == old.structural
        assert new.dp_min_memory == fresh[new.shape]
        if old.dp_min_memory is not None:
            assert new.dp_min_memory is not None and new.dp_min_memory <= old.dp_min_memory


def test_nic_specs_are_the_questions(cat):
    s = prime_scenario(cat)
    assert [n.name for n in nic_specs(s)] == list(s.nics)


def test_space_is_shared_by_questions_that_differ_only_in_limits():
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=2e6, gpus=("h100-sxm",))
    a = enumerate_candidates(s)
    b = enumerate_candidates(s.with_changes(budget_usd=5e6, tokens=2e12))
    assert all(x is y for x, y in zip(a, b, strict=True)) and len(a) == len(b)
    c = enumerate_candidates(s.with_changes(memory_scale=0.5))
    assert c[0] is not a[0]


def test_threads_racing_on_one_space_share_one_and_the_cache_keeps_its_size(monkeypatch):
    """optimize prepares alternatives in one thread while others solve: two threads that
    both miss the cache and enumerate the same question get the one space stored first
    (the same Candidate objects, so their computed coefficients are shared), and the
    cache never holds more than its size."""
    import threading

    from solvers import space

    monkeypatch.setattr(space, "_SPACES", {})
    both_enumerating = threading.Barrier(2)
    real = space._enumerate

    def enumerate_together(scenario, q, *rest):
        out = real(scenario, q, *rest)
        both_enumerating.wait(timeout=30)  # neither stores before the other has enumerated
        return out

    monkeypatch.setattr(space, "_enumerate", enumerate_together)
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=2e6, gpus=("h100-sxm",))
    got: list[list] = []
    threads = [threading.Thread(target=lambda: got.append(enumerate_candidates(s))) for _ in "ab"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(got) == 2 and got[0] and all(x is y for x, y in zip(*got, strict=True))
    assert len(space._SPACES) == 1
    for i in range(space._SPACES_KEPT + 3):
        kept = space._kept(space._SPACES, ("k", i), [i])
        assert kept == [i] and len(space._SPACES) <= space._SPACES_KEPT
    assert space._kept(space._SPACES, ("k", 5), ["other"]) == [5]


def test_a_space_without_blocked_shapes_presolves_as_the_whole_one():
    """enumerate_candidates(blocked=False), as the alternatives' pairs ask: none of the
    shapes an enforced shape rule rules out, and the same presolved shapes, ranges and
    order as the whole space (presolve drops those shapes first)."""
    s = build_scenario(model="gpt-oss-120b", tokens=15e12, budget=1e8, gpus=("h200",))
    whole = enumerate_candidates(s)
    kept = enumerate_candidates(s, blocked=False)
    on = enforced(s)
    assert len(kept) < len(whole) and not any(c.structural & on for c in kept)
    assert [c.shape for c in kept] == [c.shape for c in whole if not c.structural & on]
    a, b = presolve(s, whole), presolve(s, kept)
    assert a.candidates and [c.shape for c in a.candidates] == [c.shape for c in b.candidates]
    assert a.dp_ranges == b.dp_ranges


def test_an_enumeration_stops_when_asked_and_keeps_no_partial_space(monkeypatch):
    """``stop`` is asked between the (TP, CP, PP, VP) groups: True there raises
    EnumerationStopped and stores no space, so the next call enumerates the whole one,
    equal to an enumeration never stopped (its memory terms, computed before the stop,
    reused)."""
    from solvers import space

    monkeypatch.setattr(space, "_SPACES", {})
    s = build_scenario(model="llama2-7b", tokens=1e12, budget=2e6, gpus=("h100-sxm",))
    asked = []

    def stop_at_third() -> bool:
        asked.append(1)
        return len(asked) >= 3

    with pytest.raises(space.EnumerationStopped):
        enumerate_candidates(s, stop=stop_at_third)
    assert len(asked) == 3 and not space._SPACES
    resumed = enumerate_candidates(s, stop=lambda: False)
    monkeypatch.setattr(space, "_SPACES", {})
    assert [c.shape for c in resumed] == [c.shape for c in enumerate_candidates(s)]
    assert [c.dp_min_memory for c in resumed] == [c.dp_min_memory for c in enumerate_candidates(s)]
