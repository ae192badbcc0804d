"""The bounds the CP-SAT driver prunes with (solvers/screen/bounds.py, solvers/cpsat/solve.py).

A bound that is not valid would silently drop the optimum; the differential
test would notice only where it happens to matter, so each bound is checked
here against what it bounds."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from helpers import ideal_scenario, random_scenario
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import best_for_candidate
from solvers.families import active, enforced
from solvers.plan import Config
from solvers.screen.bounds import (
    budget_gpu_limit,
    dp_bounds,
    expected_time_lower_bound,
    gemm_lower_bound,
    least_capex_cents,
    least_per_gpu,
    objective_lower_bound,
    site_gpu_limit,
    time_lower_bound,
)
from solvers.screen.presolve import presolve
from solvers.screen.prune import prune_by_incumbent
from solvers.space import enumerate_candidates, nic_specs


def _catalog(cat, ports: int, oversubscription: float):
    cat = replace(
        cat,
        switches={n: sw.model_copy(update={"ports": ports}) for n, sw in cat.switches.items()},
    )
    return cat.with_facility(oversubscription=oversubscription)


@pytest.mark.parametrize("ports", [4, 8, 36, 64])
@pytest.mark.parametrize("oversubscription", [1.0, 2.0, 3.0])
def test_least_capex_never_falls_as_gpus_are_added(cat, ports, oversubscription):
    """budget_gpu_limit bisects on this."""
    c = _catalog(cat, ports, oversubscription)
    s = random_scenario(3, c).with_changes(catalog=c, nics=tuple(sorted(c.nics)))
    counts = np.arange(0, 5000)
    for name in ("h100-sxm", "gb200", "rtx4090"):
        capex = least_capex_cents(s, c.gpu(name), counts)
        assert np.all(np.diff(capex) >= 0), name


@pytest.mark.parametrize("budget_usd", [1.0, 3e4, 1e6, 7.7e6, 4e7])
def test_budget_gpu_limit_is_the_most_gpus_the_budget_buys(cat, budget_usd):
    c = _catalog(cat, 8, 1.5)
    s = random_scenario(1, c).with_changes(
        catalog=c, nics=tuple(sorted(c.nics)), budget_usd=budget_usd, objective="time"
    )
    for name in ("h100-sxm", "mi300x", "gb200"):
        gpu = c.gpu(name)
        counts = np.arange(0, 3000)
        fits = np.flatnonzero(least_capex_cents(s, gpu, counts) <= budget_usd * 100)
        assert budget_gpu_limit(s, gpu) == int(fits.max()), name


def _sampled_shapes(s):
    """About 40 shapes of the question with a non-empty DP range: (shape, range, the
    shape's best plan by the reference solver's per-shape search or None)."""
    nics = nic_specs(s)
    cands = [c for c in enumerate_candidates(s) if c.allowed(s)]
    for cand in cands[:: max(1, len(cands) // 40)]:
        lo, hi = dp_bounds(s, cand)
        if lo <= hi:
            best = best_for_candidate(s, cand, nics, s.assumptions.dp_overlap, every_m=True)
            yield cand, (lo, hi), best


def _tokens_model(s, on: bool):
    """The question with the batch-tokens model on (models/batch_tokens.py: the tokens grow
    past the critical batch), at a tenth of its critical batch so that small clusters
    pass it, or as it is."""
    if not on:
        return s
    s = s.with_changes(batch_tokens_model="deepseek", max_batch_tokens=None)
    return s.with_changes(tokens=s.tokens / 10.0, max_batch_tokens=None)


@pytest.mark.parametrize("tokens_model", [False, True], ids=["tokens", "batch-tokens"])
@pytest.mark.parametrize("failures", [False, True], ids=["ideal", "failures"])
def test_bounds_never_exceed_a_shapes_best_plan(cat, failures, tokens_model):
    """gemm_lower_bound <= objective_lower_bound <= the shape's best plan (the reference
    solver's per-shape search, every micro-batch count and NIC option), on shapes of
    40 random questions; with failures (x 1,000 the catalog's rates, so that small
    clusters feel them) the ideal bounds stay below the expected objective; with the
    batch-tokens model the bounds' token multiplier stays below the plan's."""
    checked = 0
    for seed in range(40):
        s = _tokens_model(random_scenario(seed, cat), tokens_model)
        if failures:
            s = s.with_changes(no_failures=False, failure_scale=1000.0)
        checked += _bounds_below_best(s)
    assert checked >= 500, checked  # the comparisons above did happen


def _bounds_below_best(s) -> int:
    """gemm_lower_bound <= objective_lower_bound <= the best plan on the question's
    sampled shapes (_sampled_shapes); how many shapes had a plan to compare with."""
    checked = 0
    for cand, dp_range, best in _sampled_shapes(s):
        cheap = gemm_lower_bound(s, cand, dp_range)
        full = objective_lower_bound(s, cand, dp_range)
        assert cheap <= full, cand
        if best is not None:
            assert full <= best[0][0] * (1 + 1e-9), cand
            checked += 1
    return checked


@pytest.mark.parametrize("tokens_model", [False, True], ids=["tokens", "batch-tokens"])
@pytest.mark.parametrize("scale", [1.0, 1000.0], ids=["catalog-rates", "x1000"])
def test_expected_time_bound_never_exceeds_a_shapes_fastest_plan(cat, scale, tokens_model):
    """bounds.expected_time_lower_bound (what a deadline rules shapes out by, too_slow)
    stays at or below the expected days of the shape's fastest plan (the reference
    solver's per-shape search with the time objective, hot spares and storage bought
    as it finds best), with failures on."""
    checked = 0
    for seed in range(40):
        s = _tokens_model(random_scenario(seed, cat), tokens_model).with_changes(
            no_failures=False, failure_scale=scale, objective="time", deadline_days=None
        )
        for cand, (_, hi), best in _sampled_shapes(s):
            if best is not None:
                bound = expected_time_lower_bound(s, cand, hi)
                assert bound >= time_lower_bound(s, cand, hi) * (1 - 1e-12)
                assert bound <= best[0][0] * (1 + 1e-9), (seed, cand)
                checked += 1
    assert checked >= 300, checked


def _config(name: str) -> Config:
    return Config(None, name, 1, 1, 1)  # type: ignore[arg-type]


def test_prune_by_incumbent_keeps_what_may_beat_the_kth_plan():
    incumbents = [(10.0, _config("a")), (12.0, _config("b"))]
    lbs = [5.0, 10.0, 10.0005, 10.01, 11.9, 12.0, 13.0]
    assert prune_by_incumbent(lbs, incumbents, 1) == [0, 1, 2]  # margin 1e-4 relative
    assert prune_by_incumbent(lbs, incumbents, 2) == [0, 1, 2, 3, 4, 5]
    assert prune_by_incumbent(lbs, incumbents, 3) == list(range(len(lbs)))  # too few to prune


def test_pruned_solve_finds_the_same_top_plans_as_the_reference(cat):
    s = random_scenario(11, cat).with_changes(
        objective="time", pricing="capex", budget_usd=5e5, deadline_days=None
    )
    from solvers.exhaustive import solve_exhaustive

    got, ref = solve_cpsat(s, top_k=4), solve_exhaustive(s, top_k=4)
    assert len(got.plans) == len(ref.plans) == 4
    for a, b in zip(got.plans, ref.plans, strict=True):
        assert a.objective == pytest.approx(b.objective, rel=1e-3)


@pytest.mark.parametrize(
    "model", ["llama2-70b", pytest.param("llama3-405b", marks=pytest.mark.slow)]
)
def test_memory_shortcut_agrees_with_the_direct_bound(cat, model):
    """Enumeration marks a micro-batch as never fitting when a smaller one of the same
    shape does not: every shape's bound equals the direct computation."""
    from models.zoo import zoo
    from solvers.space import dp_min_for_memory

    spec = zoo()[model]
    s = ideal_scenario(
        spec=spec,
        catalog=cat,
        tokens=1e12,
        seq_len=spec.seq_len,
        gpus=("rtx4090", "a100-40gb", "h100-sxm", "mi300x"),
        nics=tuple(cat.nics),
        budget_usd=1e8,
        micro_batches=(4, 1, 8, 2),  # out of order on purpose
    )
    cands = enumerate_candidates(s)
    nones = 0
    for c in cands:
        if c.allowed(s.with_changes(disabled=frozenset({"memory"}))):
            direct = dp_min_for_memory(s, c.shape, cat.gpu(c.shape.gpu))
            assert c.dp_min_memory == direct, c
            nones += direct is None
    assert nones > 100  # the shortcut had work to do


@pytest.mark.parametrize("seed", range(12))
def test_presolve_over_the_space_agrees_with_dp_bounds_shape_by_shape(cat, seed):
    """solvers/screen/presolve.py computes the space's DP ranges as arrays; bounds.dp_bounds is
    the one statement of the range: both keep the same shapes with the same ranges, on
    the question and on it with each family switched off (as explanations presolve it),
    reusing the same columns."""
    base = random_scenario(seed, cat)
    base = base.with_changes(deadline_days=None if seed % 3 else 30.0)
    cands = enumerate_candidates(base)
    for off in [frozenset(), *({f} for f in sorted(enforced(base)))]:
        s = base.with_changes(disabled=base.disabled | frozenset(off))
        got = presolve(s, cands)
        want = [(c, dp_bounds(s, c)) for c in cands if c.allowed(s)]
        want = [(c, r) for c, r in want if r[0] <= r[1]]
        assert got.candidates == [c for c, _ in want]
        assert got.dp_ranges == [r for _, r in want]


@pytest.mark.parametrize("tokens_model", [False, True], ids=["tokens", "batch-tokens"])
def test_vectorised_gemm_bounds_equal_the_scalar_ones(cat, tokens_model):
    """bounds.gemm_lower_bounds (prune's cheap bound over all shapes at once) equals
    gemm_lower_bound shape by shape, to the last bit, for every objective."""
    from solvers.screen.bounds import gemm_lower_bounds
    from solvers.screen.presolve import presolve
    from solvers.space import enumerate_candidates

    checked = 0
    for seed in range(12):
        s = _tokens_model(random_scenario(seed, cat), tokens_model)
        pre = presolve(s, enumerate_candidates(s))
        many = gemm_lower_bounds(s, pre.candidates, pre.dp_ranges)
        one = [
            gemm_lower_bound(s, c, r) for c, r in zip(pre.candidates, pre.dp_ranges, strict=True)
        ]
        assert many == one, seed
        checked += len(one) if s.objective == "time" else 0
    assert checked > 0


def test_lifetime_tco_bound_is_positive_and_valid(tco):
    """objective_lower_bound no longer returns 0 for a lifetime TCO, and never exceeds the
    shape's best plan (the reference solver's per-shape search)."""
    pre = presolve(tco, enumerate_candidates(tco))
    nics = nic_specs(tco)
    checked = 0
    for cand, rng in list(zip(pre.candidates, pre.dp_ranges, strict=True))[::40]:
        lb = objective_lower_bound(tco, cand, rng)
        assert lb > 0
        best = best_for_candidate(tco, cand, nics, 0.0, every_m=True)
        if best is not None:
            assert lb <= best[0][0] * (1 + 1e-9), cand.shape
            checked += 1
    assert checked >= 5


def test_least_per_gpu_is_below_every_cluster(tco):
    """Capex and power per GPU never fall below least_per_gpu, at any size, with any NIC
    and NIC count the server takes."""
    from models.cost import Cluster

    cat = tco.catalog
    for name in tco.gpus:
        gpu = cat.gpu(name)
        usd, watts = least_per_gpu(tco, gpu)
        for nic in tco.nics_for(name):
            for n in (1, 7, 8, 9, 100, 1000, 5000):
                for k in tco.nic_counts(name):
                    c = Cluster(gpu, nic, cat.switch_for(nic), cat.facility, n, k)
                    assert c.capex_usd >= usd * n * (1 - 1e-9)
                    assert c.it_power_w >= watts * n * (1 - 1e-9)


def test_power_and_rack_caps_bound_the_dp_degree(cat):
    """site_gpu_limit never cuts a feasible plan: on random questions with a power or rack
    cap, each shape's best plan (reference search) uses at most that many GPUs."""
    from solvers.scenario import GPU_CAP

    checked = 0
    for seed in range(60):
        s = random_scenario(seed, cat)
        if not (active(s, "power") or active(s, "max_racks")):
            continue
        loose = s.with_changes(power_cap_mw=None, max_racks=None)
        nics = nic_specs(s)
        for cand in [c for c in enumerate_candidates(s) if c.allowed(s)][::25]:
            best = best_for_candidate(s, cand, nics, 0.0, every_m=True)
            if best is None:
                continue
            gpus = best[1].dp * cand.shape.replica_gpus
            assert gpus <= site_gpu_limit(s, s.catalog.gpu(cand.shape.gpu)) <= GPU_CAP
            assert best[1].dp <= dp_bounds(s, cand)[1]
            assert dp_bounds(s, cand)[1] <= dp_bounds(loose, cand)[1]
            checked += 1
    assert checked >= 10


def _time_terms(critical_seqs):
    from solvers.screen.bounds import _TimeTerms

    return _TimeTerms(1e6, None, None, 1.0, critical_seqs)


@pytest.mark.parametrize("critical_seqs", [None, 50, 700, 5_000])
def test_days_lower_is_the_least_over_the_global_batch(critical_seqs):
    """bounds._days_lower: the exact least of sequences f(B) (A / (b d) + F / B) over the
    batch B = b m d (b d <= B <= b W, d <= hi), so at most every integer plan's value and
    at least the bound that took A and F apart (A at b d_max, F at b W), which it
    replaces; strictly above it where a large F and the critical batch pull apart."""
    from models.units import days_from_seconds
    from solvers.screen.bounds import _days_lower

    rng = np.random.default_rng(7)
    terms = _time_terms(critical_seqs)
    strict = 0
    for _ in range(300):
        stage, fixed = rng.uniform(0.01, 2.0), rng.choice([0.0, rng.uniform(0.0, 5.0)])
        b, hi, w = int(rng.integers(1, 9)), int(rng.integers(1, 400)), int(rng.integers(1, 3000))
        got = _days_lower(stage, fixed, b, hi, w, terms)
        apart = days_from_seconds(
            terms.sequences
            * (stage / (b * hi) * terms.tokens_x(b * hi) + fixed / (b * w) * terms.tokens_x(b * w))
        )
        assert got >= apart * (1 - 1e-12)
        if w >= hi:  # (with W < hi, d <= W tightens it too: B >= b d)
            strict += got > apart * (1 + 1e-6)
        d = np.arange(1, min(hi, w) + 1)[:, None]
        m = np.arange(1, w + 1)[None, :]
        batch = b * m * d
        value = terms.tokens_x(batch) * (stage / (b * d) + fixed / batch)
        plans = days_from_seconds(terms.sequences * np.where(m * d <= w, value, np.inf).min())
        assert got <= plans * (1 + 1e-12)
        # the least over the continuous batch, which a fine grid approaches from above
        grid = np.linspace(b * min(hi, w), b * w, 20_001)
        d_of = np.minimum(grid / b, min(hi, w))
        cont = terms.tokens_x(grid) * (stage / (b * d_of) + fixed / grid)
        assert got <= days_from_seconds(terms.sequences * cont.min()) * (1 + 1e-12)
        assert got >= days_from_seconds(terms.sequences * cont.min()) * (1 - 1e-3)
    assert (strict > 0) == (critical_seqs is not None)


@pytest.mark.parametrize("tokens_model", [False, True], ids=["tokens", "batch-tokens"])
def test_moe_bounds_never_exceed_a_shapes_best_plan(cat, tokens_model):
    """As test_bounds_never_exceed_a_shapes_best_plan, on random MoE questions: the full
    bound, which counts the expert gradients' reduction over expert-DP at the smallest DP
    degree (bounds._fixed_lower), stays at or below each sampled shape's best plan."""
    from test_moe_plan import random_moe_scenario

    checked = 0
    for seed in range(16):
        checked += _bounds_below_best(_tokens_model(random_moe_scenario(seed, cat), tokens_model))
    assert checked >= 150, checked


@pytest.mark.parametrize("moe", [False, True], ids=["dense", "moe"])
def test_dp_split_bound_lies_between_the_full_bound_and_the_best_plan(cat, moe):
    """bounds.dp_split_lower_bounds (the gradient reduction bounded per half of the DP
    range): never below the full bound over the whole range, never above the shape's best
    plan (the reference solver's per-shape search), with the batch-tokens model; strictly
    above the full bound on some MoE shape (the expert gradients' reduction grows with the
    DP degree)."""
    from solvers.screen.bounds import dp_split_lower_bounds
    from test_moe_plan import random_moe_scenario

    checked = sharper = 0
    for seed in range(24):
        s = random_moe_scenario(seed, cat) if moe else random_scenario(seed, cat)
        s = _tokens_model(s, True)
        for cand, dp_range, best in _sampled_shapes(s):
            split = dp_split_lower_bounds(s, [cand], [dp_range])[0]
            if s.objective != "time":
                assert split == -np.inf
                continue
            full = objective_lower_bound(s, cand, dp_range)
            assert split >= full * (1 - 1e-12), (seed, cand)
            sharper += split > full * (1 + 1e-6)
            if best is not None:
                assert split <= best[0][0] * (1 + 1e-9), (seed, cand)
                checked += 1
    assert checked >= 60, checked
    assert sharper > 0 or not moe


@pytest.mark.slow
@pytest.mark.parametrize(
    ("model", "counts"),
    [("gpt-oss-120b", (5033, 2459, 135, 30)), ("qwen3-30b-a3b", (3137, 675, 30, 12))],
)
def test_how_many_moe_shapes_each_bound_leaves(model, counts):
    """The figures README's speed section quotes: of the H100 shapes of the $100M question
    whose cheap bound lies under the optimum, how many the dense part's bound, the full
    bound and the DP-split bound leave under it."""
    from designer.question.build import scenario_from_options
    from solvers.screen.bounds import (
        dense_part_lower_bounds,
        dp_split_lower_bounds,
        gemm_lower_bounds,
        objective_lower_bounds,
        prepare_bounds,
    )

    s = scenario_from_options({"model": model, "tokens": 15e12, "budget": 100e6})
    assert s.gpus == ("h100-sxm",)
    opt = solve_cpsat(s).best.objective
    t = prepare_bounds(s)
    pre = presolve(s, enumerate_candidates(s), terms=t)
    cheap = gemm_lower_bounds(t, pre.candidates, pre.dp_ranges)
    under = [i for i, lb in enumerate(cheap) if lb < opt]
    cands, ranges = [pre.candidates[i] for i in under], [pre.dp_ranges[i] for i in under]
    left = [
        sum(lb < opt for lb in bound(t, cands, ranges))
        for bound in (dense_part_lower_bounds, objective_lower_bounds, dp_split_lower_bounds)
    ]
    assert (len(under), *left) == counts
