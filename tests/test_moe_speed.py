"""Issue 34's MoE speed: an explanation's capped probe stops at a wall-clock backstop
besides its effort (solvers/explain.py PROBE_WALL_FACTOR), and decides nothing there."""

from __future__ import annotations

import pytest

import solvers.explain as explain
from designer.question.build import scenario_from_options
from solvers.plan import Config
from solvers.result import SolveResult
from solvers.space import enumerate_candidates


@pytest.fixture(scope="module")
def gpt_oss():
    """GPT-OSS-120B on H100 under $100M: the plan CP-SAT proves optimal runs 1 micro-batch
    per step where the batch-tokens model's cap allows 2 (README "Solver benchmark")."""
    s = scenario_from_options(
        {"model": "gpt-oss-120b", "tokens": 15e12, "budget": 100e6, "gpus": ("h100-sxm",)}
    )
    want = (1, 1, 1, 1, 2, 32, 1)  # tp, cp, pp, vp, micro-batch, EP, ETP
    cand = next(
        c
        for c in enumerate_candidates(s)
        if (c.shape.tp, c.shape.cp, c.shape.pp, c.shape.vp, c.shape.micro_batch)
        + (c.shape.ep, c.shape.etp)
        == want
        and c.shape.recompute == "none"
        and c.shape.split == (0, 0, False, False)
    )
    return s, cand


def _result(status: str, wall_s: float, plan=None) -> SolveResult:
    return SolveResult(status, "cpsat", wall_s, None, plans=[plan] if plan else [])


def test_a_probe_stops_at_its_wall_backstop_and_then_decides_nothing():
    """_probed hands the probe PROBE_WALL_FACTOR x the wall time of the re-solve it
    follows; a probe stopped there (unknown, no plan) keeps that re-solve's answer."""
    calls: list[tuple] = []
    unproved = _result("feasible", 2.0)

    def run(hint: Config | None, cap: float | None, wall_s: float | None) -> SolveResult:
        calls.append((hint, cap, wall_s))
        return _result("unknown", wall_s)

    assert explain._probed(run, 10.0, unproved) is unproved
    assert calls == [(None, 10.0, explain.PROBE_WALL_FACTOR * 2.0)]
    calls.clear()

    def infeasible(hint, cap, wall_s):
        calls.append((hint, cap, wall_s))
        return _result("infeasible", 0.1)

    assert explain._probed(infeasible, 10.0, unproved) is None  # decided: none is faster
    assert calls[0][2] == pytest.approx(6.0)


@pytest.mark.slow
def test_the_probe_of_gpt_oss_memory_ends_within_its_backstop(gpt_oss, monkeypatch):
    """The relaxed memory question's probe crept through one propagation far past its
    effort (20-30 s, ending unknown); with the backstop every probe ends within a few times
    the re-solve's wall time, and the family is not binding. (Whether the probe now decides,
    "exact", depends on the MoE model's terms: since the weight-gradient term it does.)"""
    import time

    from solvers.cpsat.solve import solve_cpsat
    from solvers.families import BY_NAME

    s, _ = gpt_oss
    res = solve_cpsat(s)
    assert res.status == "optimal" and res.best is not None
    walls: list[tuple[float, float]] = []
    plain = explain.resolve_cpsat

    def timed(*args, **kwargs):
        start = time.perf_counter()
        out = plain(*args, **kwargs)
        walls.append((kwargs["time_limit_s"], time.perf_counter() - start))
        return out

    monkeypatch.setattr(explain, "resolve_cpsat", timed)
    monkeypatch.setattr(explain, "REGISTRY", [BY_NAME["memory"]])
    (memory,) = explain.binding_constraints(s, res.best, res.candidates)
    assert not memory.binding
    assert walls, "the explanation re-solved the relaxed question"
    _, first = walls[0]
    for limit, took in walls[1:]:  # the probes: their wall limit, with the prune and build
        assert limit <= explain.PROBE_WALL_FACTOR * first * 1.2 + 1e-9 or limit == walls[0][0]
        assert took < limit + first + 2.0
