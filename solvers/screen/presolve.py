"""Presolve: the candidates whose literal survives when every enforced family is fixed true.

Exactly what CP-SAT's presolve derives from the shape rules, the memory family and each
shape's DP range (bounds.dp_bounds), computed over the whole space at once: the
explanation code presolves one space many times (each relaxed or reduced question), so
the shapes' columns are gathered once per space and filled lazily (memory bounds and
stage times only for the shapes a question lets through). bounds.dp_bounds stays the
one statement of the range; tests/test_bounds.py checks both agree shape by shape.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from solvers.families import SHAPE_RULES, enforced
from solvers.intmath import expert_folding_step, whole_units_step
from solvers.scenario import GPU_CAP, Scenario
from solvers.screen.bounds import (
    BoundTerms,
    dp_limits,
    gemm_lower_bounds,
    prepare_bounds,
    ruled_out,
    stage_times_lower,
    too_slow_by_gemm,
)
from solvers.space import Candidate


@dataclass(frozen=True)
class Presolved:
    """The candidates whose literal survives presolve, with each one's DP range."""

    candidates: list[Candidate]
    dp_ranges: list[tuple[int, int]]
    # False: a cheap_only presolve left out shapes whose memory bound was not cheap (the
    # whole presolve may keep more); True: it is the whole presolve
    complete: bool = True


_RULE_BITS = {f.name: 1 << i for i, f in enumerate(SHAPE_RULES)}


@dataclass
class _Columns:
    """One space's shapes as arrays (the list is held so that its id stays its own)."""

    cands: list[Candidate]
    rules: np.ndarray  # bit i: the shape breaks SHAPE_RULES[i]
    gpu: np.ndarray  # index into gpu_names
    gpu_names: list[str]
    replica: np.ndarray
    dp_step: np.ndarray  # bounds.dp_step: d is a multiple of it (whole purchase units)
    micro_batch: np.ndarray
    m_min: np.ndarray  # micro-batches a step needs with pipeline_fill (or interleaving)
    interleaved: np.ndarray  # vp > 1 and pp > 1: at least pp micro-batches regardless
    dp_min: np.ndarray = field(init=False)  # -1: not computed; 0: fits at no DP degree
    stage_lower: np.ndarray = field(init=False)  # NaN: not computed
    gemm: np.ndarray = field(init=False)  # Candidate.gemm_mb_s; NaN: not computed

    def __post_init__(self) -> None:
        self.dp_min = np.full(len(self.cands), -1, dtype=np.int64)
        self.stage_lower = np.full(len(self.cands), np.nan)
        self.gemm = np.full(len(self.cands), np.nan)

    def memory_floor(self, ok: np.ndarray) -> np.ndarray:
        missing = np.flatnonzero(ok & (self.dp_min < 0))
        cands = self.cands
        self.dp_min[missing] = [cands[i].dp_min_memory or 0 for i in missing.tolist()]
        return self.dp_min

    def memory_cheap(self, ok: np.ndarray) -> np.ndarray:
        """Which shapes' memory bounds are known or cheap to know (Candidate.memory_cheap)."""
        cheap = self.dp_min >= 0
        for i in np.flatnonzero(ok & ~cheap):
            cheap[i] = self.cands[i].memory_cheap
        return cheap

    def gemm_times(self, ok: np.ndarray) -> np.ndarray:
        missing = np.flatnonzero(ok & np.isnan(self.gemm))
        cands = self.cands
        self.gemm[missing] = [cands[i].gemm_mb_s for i in missing.tolist()]
        return self.gemm

    def stage_times(self, ok: np.ndarray) -> np.ndarray:
        missing = np.flatnonzero(ok & np.isnan(self.stage_lower))
        if len(missing):  # bounds.stage_time_lower of each, in one call
            self.stage_lower[missing] = stage_times_lower([self.cands[i] for i in missing])
        return self.stage_lower


_COLUMNS: dict[int, _Columns] = {}
_COLUMNS_KEPT = 4
_COLUMNS_LOCK = threading.Lock()  # explanations presolve from several threads


def _columns(cands: list[Candidate]) -> _Columns:
    with _COLUMNS_LOCK:
        got = _COLUMNS.get(id(cands))
        if got is None or got.cands is not cands:
            got = _COLUMNS[id(cands)] = _gather(cands)
            while len(_COLUMNS) > _COLUMNS_KEPT:
                _COLUMNS.pop(next(iter(_COLUMNS)))
        return got


def _gather(cands: list[Candidate]) -> _Columns:
    """The columns of ``cands``: one pass over the shapes for their integer fields, the
    rest on arrays (Shape.replica_gpus and Shape.dp_step, the same integer operations)."""
    names = sorted({c.shape.gpu for c in cands})
    index = {g: i for i, g in enumerate(names)}
    shapes = [c.shape for c in cands]
    ints = np.array(
        [(s.tp, s.cp, s.pp, s.vp, s.micro_batch, s.ep, s.etp) for s in shapes], dtype=np.int64
    ).reshape(len(shapes), 7)
    tp, cp, pp, vp, micro_batch, ep, etp = ints.T
    gpu = np.array([index[s.gpu] for s in shapes], dtype=np.int64)
    replica = tp * cp * pp
    # bounds.dp_step on arrays (intmath.whole_units_step): whole purchase units of the GPU (the candidates' own spec),
    # and the expert folding's step (Shape.dp_step)
    units: dict[str, int] = {}
    for c in reversed(cands):  # the last candidate's spec of each name, as a dict display
        if c.shape.gpu not in units:
            units[c.shape.gpu] = c._source.gpu.server.purchase_unit_gpus
    unit = np.array([units[g] for g in names], dtype=np.int64)[gpu]
    folding = expert_folding_step(tp, cp, ep, etp, xp=np)
    bits: dict[frozenset[str], int] = {}
    for c in cands:
        if c.structural not in bits:
            bits[c.structural] = sum(_RULE_BITS[r] for r in c.structural)
    col = _Columns(
        cands=cands,
        rules=np.array([bits[c.structural] for c in cands], dtype=np.int64),
        gpu=gpu,
        gpu_names=names,
        replica=replica,
        dp_step=whole_units_step(unit, replica, folding, xp=np),
        micro_batch=micro_batch.copy(),
        m_min=np.where(pp > 1, pp, 1),
        interleaved=(vp > 1) & (pp > 1),
    )
    return col


def presolve(
    scenario: Scenario,
    candidates: list[Candidate],
    cheap_only: bool = False,
    breaking: str | None = None,
    terms: BoundTerms | None = None,
    under_days: float | None = None,
) -> Presolved:
    """The candidates the enforced shape rules and memory allow and whose DP range
    (bounds.dp_bounds) is not empty, with that range. ``cheap_only``: only among the
    shapes whose memory bound needs no performance-model call (a quick subset, for a
    witness of feasibility before the whole space is bounded). ``breaking``: only among
    the shapes that break that shape rule (switched off in ``scenario``: the shapes it
    admits; every other shape presolves as it did with the rule on). ``terms``:
    ``bounds.prepare_bounds(scenario)``, when the caller has it (once per solve).
    ``under_days`` (time objective): only among the shapes whose GEMM-only bound
    (bounds.gemm_lower_bounds, at the range's upper end, which memory does not move)
    lies at or under it, for a search that asks only for plans that fast: the others'
    memory bounds are never computed. Deferred's screen, then its last steps for every
    shape the screen keeps."""
    if not candidates:
        return Presolved([], [])
    d = _screened(scenario, candidates, cheap_only, breaking, terms, under_days)
    ranges = d.finish(list(range(len(d.candidates))))
    keep = [i for i, r in enumerate(ranges) if r is not None]
    return Presolved(
        [d.candidates[i] for i in keep], [r for r in ranges if r is not None], d.complete
    )


@dataclass(frozen=True)
class Deferred:
    """Presolve up to its step coefficients: the shapes every rule but the deadline's stage
    time and bounds.dp_bounds' last rule (ruled_out) keeps, in the space's order, with
    ``weak_ranges``: their DP ranges with the GEMM time for the stage time. A GEMM time
    never exceeds the stage time (bounds.too_slow_by_gemm), so each weak lower end is at
    most presolve's, the upper ends are presolve's, and a shape presolve keeps is among
    these. ``finish`` computes presolve's own range of the shapes at some positions (None
    where presolve drops the shape): the stage times and the last rule of those shapes
    only (a cost question's pruning needs them for few shapes: solvers/screen/prune.py
    prune_deferred)."""

    candidates: list[Candidate]
    weak_ranges: list[tuple[int, int]]
    complete: bool
    finish: Callable[[list[int]], list[tuple[int, int] | None]]


def defer_presolve(
    scenario: Scenario, candidates: list[Candidate], terms: BoundTerms | None = None
) -> Deferred:
    """presolve(scenario, candidates) up to its last steps, left to Deferred.finish."""
    return _screened(scenario, candidates, False, None, terms)


def _screened(
    scenario: Scenario,
    candidates: list[Candidate],
    cheap_only: bool,
    breaking: str | None,
    terms: BoundTerms | None,
    under_days: float | None = None,
) -> Deferred:
    """presolve's screen (its arguments), its last steps left to Deferred.finish."""
    if not candidates:
        return Deferred([], [], True, lambda positions: [None for _ in positions])
    t = terms if terms is not None else prepare_bounds(scenario)
    col = _columns(candidates)
    on = enforced(scenario)
    blocked = sum(bit for name, bit in _RULE_BITS.items() if name in on)
    ok = (col.rules & blocked) == 0
    if breaking is not None:
        ok &= (col.rules & _RULE_BITS[breaking]) != 0
    # the upper end first (cheap, per GPU type): a shape it empties needs no memory bound
    # or stage time (each computed lazily), and those only raise the lower end
    limits = [t.per_gpu[g].dp_limits if g in t.per_gpu else dp_limits(t, g) for g in col.gpu_names]
    per_day, ceiling, fill = limits[0][:3]
    hi = np.array([lim[3] for lim in limits], dtype=np.int64)[col.gpu] // col.replica
    if ceiling is not None:
        m_min = np.where(col.interleaved | fill, col.m_min, 1)
        hi = np.minimum(hi, ceiling // (col.micro_batch * m_min))
    hi = hi // col.dp_step * col.dp_step
    ok &= hi >= 1
    if under_days is not None and scenario.objective == "time":
        at = np.flatnonzero(ok)
        bound = gemm_lower_bounds(t, [candidates[i] for i in at], [(1, int(hi[i])) for i in at])
        ok[at[np.asarray(bound) > under_days]] = False
    lo = np.ones(len(candidates))
    complete = True
    if "memory" in on:
        if cheap_only:
            cheap = col.memory_cheap(ok)
            complete = bool(cheap[ok].all())
            ok &= cheap
        floor = col.memory_floor(ok)
        ok &= floor > 0
        lo = np.where(ok, floor, 1).astype(float)
        ok &= lo <= hi
    weak = lo
    if per_day is not None:
        ok &= ~_gemm_screen(t, col, ok, lo, hi, per_day)
        gemm = col.gemm_times(ok)  # (the GEMM screen computed them)
        weak = np.where(ok, _deadline_low(lo, per_day, gemm, col.micro_batch), lo)
    weak = _whole_units(weak, col.dp_step)
    ok &= weak <= hi
    idx = np.flatnonzero(ok)
    last_rule = _last_rule(on, scenario)
    ends = _Ends(t, col, idx, lo, hi, per_day, last_rule)
    return Deferred(
        [candidates[i] for i in idx],
        list(zip(weak[idx].tolist(), hi[idx].tolist(), strict=True)),
        complete,
        ends.finish,
    )


def _last_rule(on: frozenset[str], scenario: Scenario) -> bool:
    """Whether bounds.dp_bounds' last rule (ruled_out) can drop a shape."""
    return "deadline" in on or ("budget" in on and scenario.pricing != "capex")


def finish_is_costly(scenario: Scenario) -> bool:
    """Whether presolve's last steps call the performance model (Deferred.finish: the
    deadline's stage times, the last rule's bounds) for every shape its screen keeps."""
    return _last_rule(enforced(scenario), scenario)


@dataclass(frozen=True)
class _Ends:
    """Deferred.finish: presolve's DP range of the screened shapes at some positions."""

    t: BoundTerms
    col: _Columns
    idx: np.ndarray  # screened position -> index into the space
    lo: np.ndarray  # the lower ends before the deadline's (memory), over the space
    hi: np.ndarray
    per_day: float | None
    last_rule: bool

    def finish(self, positions: list[int]) -> list[tuple[int, int] | None]:
        col, at = self.col, self.idx[np.asarray(positions, dtype=np.int64)]
        lo = self.lo[at]
        if self.per_day is not None:
            want = np.zeros(len(col.cands), dtype=bool)
            want[at] = True
            stage = col.stage_times(want)[at]
            lo = _deadline_low(lo, self.per_day, stage, col.micro_batch[at])
        lo = _whole_units(lo, col.dp_step[at])
        hi = self.hi[at]
        ok = lo <= hi
        if self.last_rule:  # bounds.dp_bounds' last rule, shape by shape
            j = np.flatnonzero(ok)
            got = [col.cands[i] for i in at[j]]
            ok[j] = ~np.array(ruled_out(self.t, got, lo[j].tolist(), hi[j].tolist()), dtype=bool)
        los, his = lo.tolist(), hi.tolist()
        return [(los[k], his[k]) if ok[k] else None for k in range(len(positions))]


def _gemm_screen(
    t: BoundTerms,
    col: _Columns,
    ok: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    per_day: float,
) -> np.ndarray:
    """The shapes the deadline rules out by their GEMM time alone, before their step
    coefficients are computed (a reduced question lets thousands of shapes through,
    and the performance model's step time is most of what bounding them costs). The
    deadline's lower end of the DP range with the GEMM time G for the stage time A
    (A >= G: bounds.too_slow_by_gemm) is at most the one presolve takes, and
    too_slow_by_gemm implies too_slow: a shape it rules out, presolve rules out too."""
    out = np.zeros(len(ok), dtype=bool)
    idx = np.flatnonzero(ok)
    if not len(idx):
        return out
    gemm = col.gemm_times(ok)[idx]
    b = col.micro_batch[idx]
    out[idx] = _whole_units(_deadline_low(lo[idx], per_day, gemm, b), col.dp_step[idx]) > hi[idx]
    for g, name in enumerate(col.gpu_names):
        on = col.gpu[idx] == g
        if on.any():
            slow = too_slow_by_gemm(t, name, gemm[on], b[on], col.replica[idx][on], hi[idx][on])
            out[idx[on]] |= slow
    return out


def _deadline_low(lo: np.ndarray, per_day: float, stage_s: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The DP range's lower end with the deadline's: a sequence takes at least A / (b d)
    (A a micro-batch's stage time, ``stage_s``), so d >= per_day x A / b (bounds.dp_bounds)."""
    return np.maximum(lo, np.floor(per_day * stage_s / b * (1 - 1e-9)))


def _whole_units(lo: np.ndarray, step: np.ndarray) -> np.ndarray:
    """The lower ends, at least 1 and at most past the GPU cap, up to whole purchase units
    (multiples of bounds.dp_step)."""
    lo = np.minimum(np.maximum(lo, 1), GPU_CAP + 1).astype(np.int64)
    return -(-lo // step) * step
