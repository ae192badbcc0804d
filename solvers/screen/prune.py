"""Which shapes the CP-SAT model is built over: incumbents and pruning by bound (presolve,
which drops the shapes the enforced families rule out, is solvers/screen/presolve.py).

None of these filters a constraint family (every family stays a CP-SAT
constraint with its enforcement literal); they drop only literals CP-SAT
would fix to 0 itself, or shapes whose valid lower bound (solvers/screen/bounds.py)
shows they cannot hold one of the k best plans: branch and bound's first step,
done in Python before building because it is cheaper there (README "Before
building"; bench/solver.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from solvers.families import active
from solvers.grid_search import best_for_candidate  # here a heuristic, not the oracle
from solvers.plan import Config, build_plan
from solvers.scenario import PreparedQuestion, Scenario
from solvers.screen.bounds import (
    BoundTerms,
    deadline_cost_bounds,
    dense_part_lower_bounds,
    dp_split_lower_bounds,
    gemm_lower_bounds,
    objective_lower_bounds,
    prepare_bounds,
    screen_bounds,
)

if TYPE_CHECKING:
    from solvers.screen.presolve import Deferred, Presolved
    from solvers.space import Candidate, Shape

WARM_SHAPES = 12  # shapes the warm start tries (bench/solver.py: the fastest of 8, 12, 16, 24)

# Shapes whose objective bound exceeds the k-th incumbent by more than this (relative)
# cannot hold one of the k best plans; far above the model's rounding (about 1e-9).
PRUNE_MARGIN = 1e-4


@dataclass(frozen=True)
class Pruned:
    """The candidates left to CP-SAT, their DP ranges and objective bounds, and the
    incumbents found on the way: (objective, configuration) of distinct shapes, best first."""

    candidates: list[Candidate]
    dp_ranges: list[tuple[int, int]]
    lower_bounds: list[float]
    incumbents: list[tuple[float, Config]]


def may_beat(
    scenario: Scenario, pre: Presolved, objective: float, terms: BoundTerms | None = None
) -> bool:
    """Whether any presolved shape's objective bound lies below ``objective``: the cheap
    bound first, then the dense part's, the full one and the DP-split one
    (bounds.dp_split_lower_bounds) only where none before settles it (``terms``:
    ``bounds.prepare_bounds(scenario)``, when the caller has it)."""
    limit = objective * (1 - 1e-9)
    t = terms if terms is not None else prepare_bounds(scenario)
    cheap = gemm_lower_bounds(t, pre.candidates, pre.dp_ranges)
    return any(
        lb < limit
        and dense_part_lower_bounds(t, [c], [r])[0] < limit
        and objective_lower_bounds(t, [c], [r])[0] < limit
        and dp_split_lower_bounds(t, [c], [r])[0] < limit
        for lb, c, r in zip(cheap, pre.candidates, pre.dp_ranges, strict=True)
    )


def prune(
    scenario: Scenario,
    pre: Presolved,
    top_k: int = 1,
    hint: Config | None = None,
    warm_shapes: int = WARM_SHAPES,
    terms: BoundTerms | None = None,
    ceiling: float = math.inf,
) -> Pruned:
    """The presolved candidates that may hold one of the ``top_k`` best plans (``ceiling``:
    the plans asked for lie at or below it, Resolve's capped minimisation).

    Incumbents: ``hint`` if it is feasible here, and the best plan of each of up
    to ``warm_shapes`` shapes, the most promising first. Three bounds then prune:
    the cheap GEMM-only bound first (most shapes), a MoE shape's dense part's next
    (bounds.dense_part_lower_bounds: no expert term computed), the full bound on the rest.
    ``terms``: ``bounds.prepare_bounds(scenario)``, when the caller has it (once per solve):
    the bounds come in two calls, the cheap ones and the head's full ones first
    (bounds.screen_bounds), then the full ones of the shapes the incumbents leave."""
    t = terms if terms is not None else prepare_bounds(scenario)
    cands, ranges = pre.candidates, pre.dp_ranges
    tries = max(warm_shapes, top_k)
    cheap, head, head_full = screen_bounds(t, cands, ranges, 10 * tries)
    full = dict(zip(head, head_full, strict=True))
    hinted = hint is not None and any(c.shape == hint.shape for c in cands)
    incumbents = _incumbents(scenario, t, cands, full, tries, top_k, hint if hinted else None)
    at = [ranges[i] for i in head]
    cut = _more_incumbents(scenario, t, [cands[i] for i in head], at, incumbents, tries, top_k)
    keep = prune_by_incumbent(cheap, cut, top_k, ceiling)
    got = _by_full_bound(t, cands, ranges, keep, full, cut, top_k, ceiling)
    return _sharper(t, got, incumbents, top_k)


def _incumbents(
    scenario: Scenario,
    t: BoundTerms,
    cands: list[Candidate],
    head: dict[int, float],
    tries: int,
    top_k: int,
    hint: Config | None,
) -> list[tuple[float, Config]]:
    """prune's incumbents: ``hint`` (one of the presolved shapes') if feasible, then the
    warm start over the head's shapes (``head``: position -> full bound) by their full
    bounds, ties by position."""
    found: dict[Shape, tuple[float, Config]] = {}
    if hint is not None:
        plan = build_plan(scenario, hint, t.prepared)  # e.g. the optimum of a tighter question
        if plan.feasible:
            found[hint.shape] = (plan.objective, hint)
    order = sorted(head, key=lambda i: (head[i], i))
    add_incumbents(
        scenario, [cands[i] for i in order], [head[i] for i in order], tries, top_k, found,
        t.prepared,
    )  # fmt: skip
    return sorted(found.values(), key=lambda f: (f[0], f[1].shape))


def _by_full_bound(
    t: BoundTerms,
    cands: list[Candidate],
    ranges: list[tuple[int, int]],
    keep: list[int],
    full: dict[int, float],
    incumbents: list[tuple[float, Config]],
    top_k: int,
    ceiling: float = math.inf,
) -> Pruned:
    """The shapes at positions ``keep`` (which the cheap bound leaves) whose full bound
    (``full``, where known; computed here for the rest) the incumbents and ``ceiling``
    leave."""
    rest = [i for i in keep if i not in full]
    if rest:
        # the dense part's bound first: a shape it prunes, the full bound would too
        mid = dense_part_lower_bounds(t, [cands[i] for i in rest], [ranges[i] for i in rest])
        left = {rest[j] for j in prune_by_incumbent(mid, incumbents, top_k, ceiling)}
        keep = [i for i in keep if i in full or i in left]
        rest = [i for i in rest if i in left]
        got = objective_lower_bounds(t, [cands[i] for i in rest], [ranges[i] for i in rest])
        full.update(zip(rest, got, strict=True))
    lbs = [full[i] for i in keep]
    keep = [keep[j] for j in prune_by_incumbent(lbs, incumbents, top_k, ceiling)]
    return Pruned(
        [cands[i] for i in keep],
        [ranges[i] for i in keep],
        [full[i] for i in keep],
        incumbents,
    )


def prune_deferred(
    scenario: Scenario,
    d: Deferred,
    top_k: int,
    hint: Config | None,
    warm_shapes: int,
    terms: BoundTerms | None,
) -> Pruned | None:
    """prune(presolve(...)) from presolve's screen (presolve.Deferred), the same Pruned, with
    presolve's last steps (the deadline's stage times, the last rule) done only for the
    shapes pruning reads; None where presolve keeps no shape.

    The cheap bound at a weak range (a lower end at most presolve's, the same upper end)
    is at most the cheap bound at presolve's range: the least capex only grows with the
    GPUs, and the time's and the cloud cost's cheap bounds do not read the lower end
    (tests/test_prune.py checks it shape by shape). So the shapes are finished in the order
    of their weak bound until the ``10 x tries`` least cheap bounds among the finished
    (prune's head) lie below every unfinished shape's weak bound; after the warm start, a
    shape whose weak bound exceeds the k-th incumbent (prune_by_incumbent) cannot be kept
    and stays unfinished."""
    t = terms if terms is not None else prepare_bounds(scenario)
    cands, weak = d.candidates, screen_bounds(t, d.candidates, d.weak_ranges, 0)[0]
    tries = max(warm_shapes, top_k)
    done = _Finished(t, d, sorted(range(len(cands)), key=lambda i: (weak[i], i)))
    head = done.head(10 * tries, weak)
    if not done.ranges:
        return None
    got = objective_lower_bounds(t, [cands[i] for i in head], [done.ranges[i] for i in head])
    full = dict(zip(head, got, strict=True))
    hinted = None
    if hint is not None:
        same = [i for i, c in enumerate(cands) if c.shape == hint.shape]
        done.upto(same)
        hinted = hint if any(i in done.ranges for i in same) else None
    incumbents = _incumbents(scenario, t, cands, full, tries, top_k, hinted)
    at = [done.ranges[i] for i in head]
    cut = _more_incumbents(scenario, t, [cands[i] for i in head], at, incumbents, tries, top_k)
    if len(cut) >= top_k:
        cutoff = cut[top_k - 1][0]
        done.upto([i for i in done.order if weak[i] <= cutoff + PRUNE_MARGIN * abs(cutoff)])
    else:
        done.upto(done.order)
    kept = sorted(done.ranges)
    cheap = dict(zip(kept, done.cheap_of(kept), strict=True))
    keep = [kept[j] for j in prune_by_incumbent([cheap[i] for i in kept], cut, top_k)]
    ranges = [done.ranges.get(i, (0, 0)) for i in range(len(cands))]  # (0, 0): not kept
    return _sharper(t, _by_full_bound(t, cands, ranges, keep, full, cut, top_k), incumbents, top_k)


def _sharpens(scenario: Scenario) -> bool:
    """Whether bounds.deadline_cost_bounds is sharper than the full bound: a cost question
    with a deadline."""
    return scenario.objective == "cost" and active(scenario, "deadline")


def _sharper(
    t: BoundTerms, got: Pruned, incumbents: list[tuple[float, Config]], top_k: int
) -> Pruned:
    """``got`` (pruned by the cutoff ``got.incumbents``, _more_incumbents') less the shapes
    whose sharper bound (bounds.deadline_cost_bounds) that cutoff prunes, with the warm
    start's ``incumbents`` (the search's hints)."""
    keep = list(range(len(got.candidates)))
    if _sharpens(t.scenario):
        sharp = deadline_cost_bounds(t, got.candidates, got.dp_ranges)
        keep = prune_by_incumbent(sharp, got.incumbents, top_k)
    return Pruned(
        [got.candidates[j] for j in keep],
        [got.dp_ranges[j] for j in keep],
        [got.lower_bounds[j] for j in keep],
        incumbents,
    )


def _more_incumbents(
    scenario: Scenario,
    t: BoundTerms,
    head: list[Candidate],
    ranges: list[tuple[int, int]],
    incumbents: list[tuple[float, Config]],
    tries: int,
    top_k: int,
) -> list[tuple[float, Config]]:
    """The incumbents and the best plans of up to ``tries`` more of the head's shapes, in
    the order of their sharper bounds (bounds.deadline_cost_bounds), for the cutoff only:
    the search's hints stay the warm start's incumbents (a hint can change which of equal
    plans CP-SAT returns). A cost question with a deadline orders its head by the least
    capex at the deadline's floor without the traffic that crosses the NICs; an expert
    layout whose dispatch crosses them (EP over more GPUs than a server holds) needs far
    more GPUs than that (GPT-OSS-120B at 60 days: the first 12 tied at 32 B200s, their
    best plans 1.7-2.7x the optimum)."""
    if not _sharpens(scenario):
        return incumbents
    found = {cfg.shape: (objective, cfg) for objective, cfg in incumbents}
    sharp = deadline_cost_bounds(t, head, ranges)
    order = sorted(
        (b, j) for j, b in enumerate(sharp) if head[j].shape not in found and b < math.inf
    )
    more = [head[j] for _, j in order]
    add_incumbents(scenario, more, [b for b, _ in order], tries, top_k, found, t.prepared)
    return sorted(found.values(), key=lambda f: (f[0], f[1].shape))


class _Finished:
    """prune_deferred's finished shapes: presolve's range by position (those it keeps)."""

    def __init__(self, t: BoundTerms, d: Deferred, order: list[int]) -> None:
        self.t, self.d, self.order = t, d, order
        self.ranges: dict[int, tuple[int, int]] = {}
        self.cheap: dict[int, float] = {}
        self.seen: set[int] = set()
        self.next = 0  # order[:next] are finished

    def upto(self, positions: list[int]) -> None:
        """Finish the shapes at ``positions``."""
        todo = [i for i in positions if i not in self.seen]
        if todo:
            self.seen.update(todo)
            got = self.d.finish(todo)
            self.ranges.update((i, r) for i, r in zip(todo, got, strict=True) if r is not None)

    def cheap_of(self, positions: list[int]) -> list[float]:
        """The cheap bounds (bounds.screen_bounds') at presolve's ranges."""
        todo = [i for i in positions if i not in self.cheap]
        if todo:
            got = [self.d.candidates[i] for i in todo]
            bounds = screen_bounds(self.t, got, [self.ranges[i] for i in todo], 0)[0]
            self.cheap.update(zip(todo, bounds, strict=True))
        return [self.cheap[i] for i in positions]

    def head(self, size: int, weak: list[float]) -> list[int]:
        """prune's head: the ``size`` finished shapes with the least cheap bounds (ties
        by position), once no unfinished shape's weak bound lies at or below the last."""
        chunk = size
        while True:
            if self.next < len(self.order):
                part = self.order[self.next : self.next + chunk]
                self.next += len(part)
                chunk *= 2
                self.upto(part)
            kept = sorted(self.ranges)
            first = sorted(zip(self.cheap_of(kept), kept, strict=True))[:size]
            if self.next >= len(self.order):
                return [i for _, i in first]
            if len(first) == size and weak[self.order[self.next]] > first[-1][0]:
                return [i for _, i in first]


def add_incumbents(
    scenario: Scenario,
    cands: list[Candidate],
    lbs: list[float],
    shapes_tried: int,
    top_k: int,
    found: dict[Shape, tuple[float, Config]],
    prepared: PreparedQuestion | None = None,
) -> None:
    """Add to ``found`` (objective and configuration by shape) the best plan of each of
    the first ``shapes_tried`` feasible shapes among ``cands`` (sorted by their
    objective bounds ``lbs``). Stops early once the next bound exceeds the k-th best
    plan found: no later shape can beat it."""
    q = prepared if prepared is not None else scenario.prepare()
    nics = list(q.nic_specs)
    tried = 0
    for cand, lb in zip(cands, lbs, strict=True):
        if len(found) >= top_k:
            kth = sorted(v[0] for v in found.values())[top_k - 1]
            if lb > kth + PRUNE_MARGIN * abs(kth):
                break
        best = best_for_candidate(scenario, cand, nics, scenario.assumptions.dp_overlap, prepared=q)
        if best:
            old = found.get(cand.shape)
            if old is None or best[0][0] < old[0]:
                found[cand.shape] = (best[0][0], best[1])
            tried += 1
            if tried >= shapes_tried:
                break


def prune_by_incumbent(
    lbs: list[float],
    incumbents: list[tuple[float, Config]],
    top_k: int,
    ceiling: float = math.inf,
) -> list[int]:
    """Indices of the bounds whose shapes may still hold one of the ``top_k`` best plans.

    The k-th best incumbent (distinct shapes) bounds the k-th best plan from
    above; a shape whose valid lower bound lies above it cannot improve on it. Nor can
    one whose bound lies above ``ceiling``, when the plans asked for lie at or below it
    (Resolve's capped minimisation), with the same margin."""
    cutoff = incumbents[top_k - 1][0] if len(incumbents) >= top_k else math.inf
    cutoff = min(cutoff, ceiling)
    if cutoff == math.inf:
        return list(range(len(lbs)))
    limit = kept_limit(cutoff)
    return [i for i, lb in enumerate(lbs) if lb <= limit]


def kept_limit(cutoff: float) -> float:
    """The largest lower bound a shape may have and be kept against ``cutoff`` (a k-th
    incumbent, or a capped minimisation's ceiling): PRUNE_MARGIN above it."""
    return cutoff + PRUNE_MARGIN * abs(cutoff)
