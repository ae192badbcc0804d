"""What the evidence rule kept out of an answer (issue 30): the thin and extrapolated
(GPU, precision) pairs that would change it, each re-solved on its own.

The answer searches the pairs ``--evidence`` admits (models.evidence_rule). Every pair
the same question would search under ``--evidence any`` but this one did not is solved
alone (its GPU, its precisions), as ``designer compare`` does; the pairs whose best plan
beats the answer's objective are the alternatives (every thin one, the best
MAX_ALTERNATIVES extrapolated ones), best first, each with its evidence
band and one sentence computed from the two plans: how much it would win by, whether it
still wins at the slow (or dear) end of its band, and what more evidence would make it
eligible (``PairEvidence.to_eligible``). Only the pairs that may enter the list are
solved: the others are skipped by valid bounds against the answer and against what the
pairs visited first reach (their optima, or their incumbents before they are solved), the
least incumbent first (_solved).
"""

from __future__ import annotations

import heapq
import math
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from designer.output import text as render
from designer.output.formats import layout_cell, plan_entry, with_range
from designer.question.build import scenario_from_options
from designer.question.fields import evidence_spares
from models.evidence_range import catalog_band
from models.evidence_rule import RULE_TEXT, pair_evidence
from solvers import Scenario, SolveResult, cloud_terms
from solvers.cpsat.solve import Resolve, capped_search_limit, resolve_cpsat
from solvers.families import active
from solvers.gc_pause import without_gc_pauses
from solvers.pair_bound import pair_lower_bound
from solvers.purchase_rule import PURCHASE_TOLERANCE
from solvers.screen.bounds import (
    BoundTerms,
    dense_part_lower_bounds,
    dp_split_lower_bounds,
    gemm_lower_bounds,
    objective_lower_bound,
    prepare_bounds,
)
from solvers.screen.presolve import Presolved, presolve
from solvers.screen.prune import PRUNE_MARGIN, add_incumbents
from solvers.space import Candidate, EnumerationStopped, enumerate_candidates

MAX_ALTERNATIVES = 3
"""Extrapolated alternatives shown, best first (every thin pair that wins is shown too)."""

LEADING_SHARE = 0.5
"""A pair leads when its catalog promise (_promise: peak FLOP/s, per dollar under the cost
objective) is at least this share of the most promising excluded pair's: only leading pairs
are prepared before the first wave and stand for their incumbents (PairQueue.settle); the
others are visited after them (on the buyer questions: H100 PCIe, H200, L40S, the A100s
and the RTX 4090 against Blackwell and MI355X)."""

INCUMBENT_SHAPES = 3
"""Shapes whose best plans give a pair its incumbent (_Pair.incumbent): the first this many
feasible ones in the order of their cheap bounds (about 10 ms a pair on the MoE questions,
within 0-17% of the pair's optimum on GPT-OSS-120B's $100M question)."""


@dataclass(frozen=True)
class Alternative:
    """A pair outside the answer's evidence level whose best plan beats the answer."""

    gpu: str
    scenario: Scenario
    result: SolveResult
    tier: str
    gain_pct: float  # how much better its objective is than the answer's, percent
    sentence: str


def excluded_pairs(scenario: Scenario, wide: Scenario) -> dict[str, tuple[str, ...]]:
    """Per GPU, the precisions ``wide`` searches and ``scenario`` does not."""

    def pairs(s: Scenario) -> set[tuple[str, str]]:
        return {(g, p) for g in s.gpus for p in s.precisions} - set(s.unmeasured)

    out: dict[str, tuple[str, ...]] = {}
    for g, p in sorted(pairs(wide) - pairs(scenario)):
        out[g] = (*out.get(g, ()), p)
    return out


@dataclass(frozen=True)
class _Pair:
    """An excluded GPU's question and its presolved shapes (None: not bounded here, a
    question solved per rental term), and whether its plan may be called thin (the
    evidence band of one of its precisions is)."""

    gpu: str
    scenario: Scenario
    space: list[Candidate] | None
    pre: Presolved | None
    maybe_thin: bool
    # reaches' shape bounds, filled on first use: bounds_known
    bounds: list = field(default_factory=list, compare=False, repr=False)
    terms: BoundTerms | None = field(default=None, compare=False, repr=False)  # prepare_bounds
    found: list = field(default_factory=list, compare=False, repr=False)  # [incumbent()]

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        """(GPU, precisions): the pair as PairQueue's order names it."""
        return self.gpu, self.scenario.precisions

    def reaches(self, limit: float, strict: bool) -> bool:
        """Whether a plan's objective may lie below ``limit`` (``strict``) or at most at
        it: some shape's valid lower bound (solvers.screen.bounds, the cheap one first) does."""
        return self.pre is None or bool(self.below(limit, strict, stop_at_first=True))

    def below(self, limit: float, strict: bool, stop_at_first: bool = False) -> list[int]:
        """The presolved shapes (indices) whose valid lower bounds, the cheap one and the
        full one, both lie below ``limit`` (``strict``) or at most at it; only the first
        with ``stop_at_first``."""
        assert self.pre is not None
        cheap, full, terms, mids = self.bounds_known()
        pre = self.pre

        def under(lb: float) -> bool:
            return lb < limit if strict else lb <= limit

        def bound(i: int) -> float:
            if i not in full:
                c, r = pre.candidates[i], pre.dp_ranges[i]
                if i not in mids:  # the dense part's bound first: no expert term computed
                    mids[i] = dense_part_lower_bounds(terms, [c], [r])[0]
                if not under(mids[i]):
                    return mids[i]  # the full bound, at least it, is not under either
                full[i] = objective_lower_bound(terms, c, r)
                if under(full[i]):  # the DP-split bound, where the full one leaves it open
                    full[i] = max(full[i], dp_split_lower_bounds(terms, [c], [r])[0])
            return full[i]

        found = (i for i, lb in enumerate(cheap) if under(lb) and under(bound(i)))
        if stop_at_first:
            return [i] if (i := next(found, None)) is not None else []
        return list(found)

    def bounds_known(self) -> list:
        """[cheap bounds, {index: full bound}, terms, {index: dense part's bound}]: the cheap
        bound of every presolved shape (they do not depend on any limit: computed once per
        pair), the full ones and the dense part's (bounds.dense_part_lower_bounds) filled as
        limits ask for them, and the question's bound terms (prepare_bounds)."""
        assert self.pre is not None and self.terms is not None  # _prepared sets both
        if not self.bounds:
            terms = self.terms
            self.bounds.append(gemm_lower_bounds(terms, self.pre.candidates, self.pre.dp_ranges))
            self.bounds.append({})
            self.bounds.append(terms)
            self.bounds.append({})
        return self.bounds

    def incumbent(self) -> float:
        """An objective one of the pair's plans reaches, so its optimum is at most it
        (math.inf: none found, or a pair not bounded here): the best plan of each of the
        first INCUMBENT_SHAPES feasible presolved shapes in the order of their cheap bounds
        (solvers.screen.prune.add_incumbents, CP-SAT's warm start), from the first
        10 x INCUMBENT_SHAPES of them. Computed once."""
        if not self.found:
            self.found.append(math.inf)
            if self.pre is not None and self.pre.candidates:
                cheap, _, terms, _ = self.bounds_known()
                first = heapq.nsmallest(
                    10 * INCUMBENT_SHAPES, range(len(cheap)), key=lambda i: (cheap[i], i)
                )
                got: dict = {}
                cands = [self.pre.candidates[i] for i in first]
                lbs = [cheap[i] for i in first]
                add_incumbents(self.scenario, cands, lbs, INCUMBENT_SHAPES, 1, got, terms.prepared)
                self.found[0] = min((v[0] for v in got.values()), default=math.inf)
        return self.found[0]

    def reached(self) -> float:
        """An objective the pair's solve is known to report at most: its incumbent raised
        by prune's margin PRUNE_MARGIN (CP-SAT's integer objective may return a plan tied
        with it a hair above it) and, where the question decides purchases, by
        1 + PURCHASE_TOLERANCE per purchase step (the solve reports the fastest plan with
        the purchases that pay, solvers/purchase_rule.py: each idle step dropped from the
        fastest plan's costs at most that share of its time). math.inf under a deadline
        with the time objective, where dropping a purchase may break the deadline."""
        u = self.incumbent()
        if u == math.inf or self.pre is None:
            return math.inf
        q, gpu = self.bounds_known()[2].prepared, self.gpu
        steps = 0
        if self.scenario.objective == "time" and q.decides_purchases[gpu]:
            if active(self.scenario, "deadline"):
                return math.inf
            steps = len(q.spare_options[gpu]) + len(q.storage_options[gpu]) - 2
        return u * (1 + PRUNE_MARGIN) * (1 + PURCHASE_TOLERANCE) ** steps

    def solve(self, time_limit_s: float, cap: float | None = None) -> SolveResult:
        """The solve optimize would run (its shapes and presolve, already made, handed on).
        ``cap`` (time objective): only a plan at most that fast can enter the list, so the
        search minimises over the plans at most that fast (Resolve's ``cap_minimises``:
        prune drops the shapes whose lower bounds lie above the cap): the pair's optimum
        when it lies at or below the cap (the cap only prunes; a plan tied with it too:
        solvers.cpsat.solve._time_cap), "infeasible" when no plan does."""
        terms = self.bounds_known()[2] if self.pre is not None else None
        if cap is not None and self.pre is not None:
            how = Resolve(alive=self.pre, terms=terms, time_cap_days=cap, cap_minimises=True)
        else:
            how = Resolve(alive=self.pre, terms=terms)
        return resolve_cpsat(self.scenario, how, time_limit_s=time_limit_s, candidates=self.space)


def _promise(s: Scenario, gpu_name: str, precisions: tuple[str, ...]) -> tuple[float, float]:
    """How good the plans of ``s`` on one GPU are likely to be, larger first (a visiting
    order only, so that the best are solved before the rest are bounded against them;
    read from the catalog, before the pair's shapes are enumerated): its peak FLOP/s,
    per dollar when the objective is cost; between equal peaks, the larger memory (B300
    before B200: more room for the same compute fits faster layouts, and solved first it
    lets B200 be bounded against it)."""
    gpu = s.catalog.gpu(gpu_name)
    peak = max(gpu.peak_tflops(p) or 0.0 for p in precisions)
    if s.objective == "cost":
        return peak / gpu.price_usd, gpu.memory_gb
    return peak, gpu.memory_gb


def _question(wide: Scenario, gpu: str, precisions: tuple[str, ...]) -> Scenario:
    """``wide`` on one GPU in the given precisions."""
    return wide.with_changes(gpus=(gpu,), precisions=precisions, unmeasured=frozenset())


def _prepared(
    wide: Scenario,
    gpu: str,
    precisions: tuple[str, ...],
    terms: BoundTerms | None = None,
    stop: Callable[[], bool] | None = None,
) -> _Pair:
    """``wide`` on one GPU in the given precisions, its shapes presolved (``terms``: its
    prepare_bounds, when the caller has them; ``stop``: asked while its shapes are
    enumerated, EnumerationStopped when it says so)."""
    s = _question(wide, gpu, precisions)
    maybe_thin = _maybe_thin(s, gpu, precisions)
    if cloud_terms.applies(s):
        return _Pair(gpu, s, None, None, maybe_thin)
    terms = terms if terms is not None else prepare_bounds(s)
    # (no shape an enforced shape rule rules out: nothing explains the pair's solve)
    space = enumerate_candidates(s, terms.prepared, blocked=False, stop=stop)
    return _Pair(gpu, s, space, presolve(s, space, terms=terms), maybe_thin, terms=terms)


def _prepared_unless(
    wide: Scenario,
    gp: tuple[str, tuple[str, ...]],
    skip: Callable[[Scenario, tuple, BoundTerms | None], bool] | None,
    stop: Callable[[], bool] | None = None,
) -> _Pair | None:
    """The pair ``gp`` of ``wide`` prepared (_prepared), or None where ``skip`` (its
    question, the pair, its bound terms: None for a question solved per rental term)
    skips it unprepared; EnumerationStopped when ``stop()`` says so before or while its
    shapes are enumerated."""
    s = _question(wide, *gp)
    terms = None if cloud_terms.applies(s) else prepare_bounds(s)
    if skip is not None and skip(s, gp, terms):
        return None  # its shapes would all be bounded out: never enumerated
    if stop is not None and stop():
        raise EnumerationStopped
    # (a long enumeration, an A100's memory terms, stops within itself)
    return _prepared(wide, gp[0], gp[1], terms, stop)


def _hopeless(
    s: Scenario,
    pair: tuple[str, tuple[str, ...]],
    terms: BoundTerms,
    standing: list[float],
    best: float,
) -> bool:
    """Whether a pair (its question ``s``) is skipped whatever its shapes are: its lower
    bound (solvers/pair_bound.py, at most every shape's) cannot beat ``best``, or, for a
    pair that cannot be thin, lies above the MAX_ALTERNATIVES-th of the objectives other
    pairs are known to reach (``standing``, best first: _standing)."""
    floor = pair_lower_bound(terms, *pair)
    if floor >= best:
        return True
    return floor > _last_place(standing) and not _maybe_thin(s, *pair)


def _maybe_thin(s: Scenario, gpu: str, precisions: tuple[str, ...]) -> bool:
    """Whether a pair's plan may be called thin: the evidence band of one of its
    precisions is, or the rule's tier of one is (alternatives keeps every pair whose
    tier is thin: such a pair is never crowded out)."""
    return any(_rule_tier(s, gpu, p) == "thin" for p in precisions) or any(
        catalog_band(s.catalog, gpu, p, family).status == "thin"
        for p in precisions
        for family in ("dense", "moe")
    )


class PairQueue:
    """The excluded pairs of a question in the order they are prepared (the most promising
    by the catalog first: _promise), one at a time (their shapes enumerated, presolved and
    cheaply bounded, and their incumbents found). Nothing here depends on the answer:
    optimize starts preparing them before its own solve ends (designer/ahead.py), and
    ``settle`` goes on from where that stopped once the answer is known."""

    def __init__(self, wide: Scenario, excluded: dict[str, tuple[str, ...]]) -> None:
        self.wide = wide
        self.excluded = excluded
        promise = {gp: _promise(wide, *gp) for gp in excluded.items()}
        self.order = sorted(promise, key=lambda gp: (*(-x for x in promise[gp]), gp[0]))
        self.rank = {gp: i for i, gp in enumerate(self.order)}
        most = max((x[0] for x in promise.values()), default=0.0)
        self.leading = {gp for gp, x in promise.items() if x[0] >= LEADING_SHARE * most}
        self.ready: list[_Pair] = []  # prepared, in the order (a prefix of it)

    def prepare_next(
        self,
        skip: Callable[[Scenario, tuple, BoundTerms | None], bool] | None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Prepare the next pair but those ``skip`` (_prepared_unless) skips unprepared;
        False once none is left, or when ``stop()`` says so between its steps or while
        its shapes are enumerated (the pair then stays first
        in the order, to be prepared, or skipped, by ``settle``, as if preparing had
        stopped before it; a pair presolved before ``stop()`` is kept, its cheap bounds
        and incumbent left to ``settle``)."""
        while self.order:
            gp = self.order.pop(0)
            try:
                pair = _prepared_unless(self.wide, gp, skip, stop)
            except EnumerationStopped:
                self.order.insert(0, gp)
                return False
            if pair is None:
                continue
            self.ready.append(pair)
            if pair.pre is not None and not (stop is not None and stop()):
                pair.bounds_known()  # the part of its bounds that no limit changes
                if pair.key in self.leading and not pair.maybe_thin:
                    if not (stop is not None and stop()):
                        pair.incumbent()  # (only these stand against the others: settle)
            return True
        return False

    def prepare_until(self, stop: Callable[[], bool]) -> None:
        """Prepare pairs (none skipped: the answer is not known yet) until ``stop()`` or
        none is left; ``stop()`` is asked between a pair's steps too (prepare_next)."""
        while not stop() and self.prepare_next(None, stop):
            pass

    def settle(self, best: float) -> tuple[list[_Pair], list]:
        """(the pairs that stand against the others for their incumbents, prepared; the
        other pairs, in the order, some not prepared yet): the pairs the answer's objective
        ``best`` leaves a chance, the rest dropped.

        In the preparing order, a pair is dropped when its catalog bound already skips it
        (_hopeless) against the incumbents of the standing pairs before it; a thin pair
        (_maybe_thin, whose visit reads ``best`` alone) or one that does not lead
        (LEADING_SHARE) is kept as it is, to be prepared where it is visited; the others
        are prepared, and stand. A pair prepared before the answer was known is judged by
        the same rule, so what is kept does not depend on how far preparing got (tests)."""
        firm: list[_Pair] = []
        rest: list = []

        def home(s: Scenario, gp: tuple, terms: BoundTerms | None) -> list | None:
            """firm or rest, where the pair belongs; None: dropped."""
            if terms is not None and _hopeless(s, gp, terms, _standing(firm, [], best), best):
                return None
            return firm if gp in self.leading and not _maybe_thin(s, *gp) else rest

        def skip(s: Scenario, gp: tuple, terms: BoundTerms | None) -> bool:
            found = home(s, gp, terms)
            if found is rest:
                rest.append(gp)  # prepared where it is visited
            return found is not firm

        for pair in self.ready:
            found = home(pair.scenario, pair.key, pair.terms)
            if found is not None:
                found.append(pair)
        self.ready = []
        while self.prepare_next(skip):
            firm.append(self.ready.pop())
        return firm, rest


class _Visits:
    """_solved's pairs: those still to visit (``todo``: the standing pairs, ``firm``, least
    incumbent first, then the others in the preparing order, some not prepared yet) and
    the solves done."""

    def __init__(self, queue: PairQueue, best: float) -> None:
        self.queue, self.best = queue, best
        self.firm, rest = queue.settle(best)
        rank = queue.rank
        self.firm.sort(key=lambda p: (p.incumbent(), rank[p.key]))
        self.todo: list = [*self.firm, *rest]  # a pair, or the key of one not prepared yet
        self.done: list[tuple[_Pair, SolveResult]] = []

    def pair(self, at: int, stop: Callable[[], bool] | None = None) -> _Pair | None:
        """The pair ``todo[at]``, prepared if it was not; None when it was not and its
        catalog bound already skips it (_hopeless: it is dropped, never prepared, as its
        visit would skip it), or ``stop()`` stopped its preparation."""
        item = self.todo[at]
        if isinstance(item, _Pair):
            return item

        def skip(s: Scenario, gp: tuple, terms: BoundTerms | None) -> bool:
            return terms is not None and _hopeless(s, gp, terms, self.standing(None), self.best)

        try:
            pair = _prepared_unless(self.queue.wide, item, skip, stop)
        except EnumerationStopped:
            return None
        if pair is None:
            del self.todo[at]
        else:
            self.todo[at] = pair
        return pair

    def standing(self, pair: _Pair | None) -> list[float]:
        return _standing(self.firm, self.done, self.best, pair)

    def own(self, pair: _Pair) -> float:
        """What ``pair``, not yet solved, adds to _standing (math.inf: nothing)."""
        if not any(pair is p for p in self.firm):
            return math.inf
        reached = pair.reached()
        return reached if reached < self.best else math.inf

    def wave(self, workers: int) -> list[tuple[_Pair, float | None]]:
        """The next pairs to solve, at most ``workers``, each with its cap: in the order of
        ``todo``, those whose visit no solve of the wave can change (_settled), each
        skipped or asked as _asked says (a pair whose visit a solve of the wave could
        change waits for the next one)."""
        wave: list[tuple[_Pair, float | None]] = []
        at = 0
        while at < len(self.todo) and len(wave) < workers:
            pair = self.pair(at)
            if pair is None:  # dropped by its catalog bound
                continue
            standing = self.standing(pair)
            pending = [self.own(p) for p, _ in wave if _may_stand(p)]
            if not _settled(pair, standing, pending):
                at += 1
                continue
            del self.todo[at]
            solve, cap = _asked(pair, standing, self.best)
            if solve:
                wave.append((pair, cap))
        return wave

    def prepare_ahead(self, stop: Callable[[], bool]) -> None:
        """Beside a wave, until ``stop()``: the pairs to visit not prepared yet, prepared,
        or dropped where their catalog bound already skips them (``pair``: they would be
        at their visit, as what other pairs are known to reach only falls). Their shapes'
        bounds are left to their visits: read now, against the looser objectives known
        before the wave ends, they would be read for more shapes (DeepSeek-V3's $100M
        question: 0.3 s more of CPU)."""
        at = 0
        while at < len(self.todo) and not stop():
            size = len(self.todo)
            self.pair(at, stop)
            if len(self.todo) == size:
                at += 1


def _solved(queue: PairQueue, best: float, time_limit_s: float) -> list[tuple[_Pair, SolveResult]]:
    """The pairs that may hold an alternative, solved; the others are skipped, each skip
    implied by valid bounds: a pair none of whose shapes' lower bounds beats ``best``,
    or one that cannot be thin and whose shapes' bounds all lie above the objectives
    MAX_ALTERNATIVES other pairs that cannot be thin are known to reach (their optima
    where solved, else their incumbents: _standing), so the list would cut it. The answer
    is the one solving every pair gives. A time question's pair is searched only below
    the time that lets it enter the list (_cap, _Pair.solve's ``cap``): the answer's, or,
    for a pair that cannot be thin, the MAX_ALTERNATIVES-th of those objectives; a pair
    with no plan there is one the list would drop.

    The pairs are visited the least incumbent first (_Visits), so that the pairs that fill
    the list are solved first and the rest bounded against them, a few at a time (CP-SAT
    releases the GIL while it searches): what a wave holds, and what each of its pairs is
    asked, depends only on the waves before it and on the incumbents, not on the machine
    (tests/test_alternatives.py). Beside a wave, the pairs visited later are prepared (or
    dropped by their catalog bound)."""
    workers = max(1, min(len(queue.excluded), os.cpu_count() or 1))
    visits = _Visits(queue, best)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while visits.todo:
            wave = visits.wave(workers)
            running = [pool.submit(p.solve, time_limit_s, cap) for p, cap in wave]

            def solved(running: list = running) -> bool:
                return all(f.done() for f in running)

            if running and all(p.pre is not None for p, _ in wave):
                visits.prepare_ahead(solved)
            visits.done += [(p, f.result()) for (p, _), f in zip(wave, running, strict=True)]
    return visits.done


def _settled(pair: _Pair, standing: list[float], pending: list[float]) -> bool:
    """Whether what ``pair`` is asked (_asked) no longer depends on the solves of the wave
    being formed, ``pending`` what each of its pairs whose solve may add to ``standing``
    adds now (math.inf: nothing yet): a thin pair's never does (it reads the answer's
    objective alone); another's reads the MAX_ALTERNATIVES-th of ``standing``, which a
    pending solve moves only when that pair's own objective is not already below it."""
    if pair.maybe_thin:
        return True
    limit = _last_place(standing)
    return all(own < limit for own in pending)


def _may_stand(pair: _Pair) -> bool:
    """Whether a solve of ``pair`` can add an objective to _standing: one of its
    precisions' rule tier is not thin."""
    return any(_rule_tier(pair.scenario, pair.gpu, p) != "thin" for p in pair.scenario.precisions)


def _asked(pair: _Pair, standing: list[float], best: float) -> tuple[bool, float | None]:
    """Whether ``pair`` is solved, and under which cap (_cap), given the objectives the
    other pairs are known to reach (``standing``: _standing): not when its catalog bound
    skips it (a pair prepared before the answer was known), when no shape's bounds beat
    ``best``, when it is crowded out (_crowded_out), or when its search under the cap
    would be empty."""
    if pair.terms is not None and _hopeless(pair.scenario, pair.key, pair.terms, standing, best):
        return False, None  # (its shapes' bounds agree: they are at least its catalog bound)
    if not pair.reaches(best, strict=True) or _crowded_out(pair, standing):
        return False, None
    cap = _cap(pair, standing, best)
    if cap is not None and not pair.reaches(capped_search_limit(cap), strict=False):
        return False, None
    return True, cap


def _rule_tier(s: Scenario, gpu: str, precision: str) -> str:
    """The evidence rule's tier of (``gpu``, ``precision``) under ``s``'s catalog."""
    return pair_evidence(gpu, s.catalog.gpu(gpu).evidence, precision).tier


def _tier(pair: _Pair, plan: Any) -> str:
    """The rule's tier that kept ``pair`` out at its plan's precision (what alternatives
    ranks it by: every thin one is kept, MAX_ALTERNATIVES of the others)."""
    return _rule_tier(pair.scenario, pair.gpu, plan.evaluation.layout.precision)


def _standing(
    firm: list[_Pair],
    done: list[tuple[_Pair, SolveResult]],
    best: float,
    but: _Pair | None = None,
) -> list[float]:
    """The objectives that compete for the MAX_ALTERNATIVES places, best first, each below
    ``best``, of pairs other than ``but`` that the list cannot call thin: the plan of each
    pair ``done`` solved, where its rule tier is not thin (_tier: what the list ranks it
    by), and the incumbent's bound (_Pair.reached) of each standing pair of ``firm`` not
    solved yet (none of them can be thin)."""
    out = []
    for q, r in done:
        if q is not but and r.best is not None and _tier(q, r.best) != "thin":
            out.append(r.best.objective)
    solved = {id(q) for q, _ in done}
    for q in firm:
        if q is not but and id(q) not in solved and not q.maybe_thin:
            out.append(q.reached())
    return sorted(x for x in out if x < best)


def _cap(pair: _Pair, standing: list[float], best: float) -> float | None:
    """The time a pair's plan must reach to enter the list, for a time question's pair
    (None otherwise: solved in full): the answer's, or, for a pair that cannot be thin
    once MAX_ALTERNATIVES other pairs are known to reach objectives below it
    (``standing``: _standing), the last of them."""
    if pair.pre is None or pair.scenario.objective != "time":
        return None
    return best if pair.maybe_thin else min(best, _last_place(standing))


def _crowded_out(pair: _Pair, standing: list[float]) -> bool:
    """Whether MAX_ALTERNATIVES other pairs that cannot be thin are known to reach
    objectives (``standing``: _standing) that beat every plan ``pair`` may have (a thin
    pair is always shown)."""
    if pair.maybe_thin:
        return False
    limit = _last_place(standing)
    return limit < math.inf and not pair.reaches(limit, strict=False)


def _last_place(standing: list[float]) -> float:
    """The objective a pair that cannot be thin must reach to enter the list: the
    MAX_ALTERNATIVES-th of ``standing`` (_standing, best first), math.inf while fewer
    stand."""
    return standing[MAX_ALTERNATIVES - 1] if len(standing) >= MAX_ALTERNATIVES else math.inf


@without_gc_pauses  # (solvers/gc_pause.py) enumerating the pairs' shapes allocates no cycle
def alternatives(
    scenario: Scenario,
    wide: Scenario,
    res: SolveResult,
    time_limit_s: float = 60.0,
    queue: PairQueue | None = None,
) -> list[Alternative]:
    """The pairs ``wide`` adds to ``scenario`` whose best plan beats ``res``'s, best first
    (every thin one, at most MAX_ALTERNATIVES extrapolated). None when the answer has no
    plan. ``queue``: the excluded pairs, some already prepared (PairQueue)."""
    best = res.best
    if queue is None:
        queue = PairQueue(wide, excluded_pairs(scenario, wide))
    if best is None or not queue.excluded:
        return []
    out = []
    for pair, r in _solved(queue, best.objective, time_limit_s):
        gpu, s = pair.gpu, pair.scenario
        if r.best is None or r.best.objective >= best.objective:
            continue
        gain = 100.0 * (best.objective - r.best.objective) / best.objective
        doc = plan_entry(s, r.best, 1)["evidence"]
        # the rule's tier that kept the pair out (its sentence says the same), not the
        # plan's evidence status: a MoE plan's band may rest on MoE runs the rule does not count
        alt = Alternative(gpu, s, r, _tier(pair, r.best), gain, "")
        out.append(replace(alt, sentence=sentence(scenario, res, alt, doc)))
    out.sort(key=lambda a: (a.result.best.objective, a.gpu))  # type: ignore[union-attr]
    thin = [a for a in out if a.tier == "thin"]
    kept = thin + [a for a in out if a.tier != "thin"][:MAX_ALTERNATIVES]
    return sorted(kept, key=out.index)


def _measure(s: Scenario, plan) -> str:
    """The plan's objective as printed: days, or dollars."""
    if s.objective == "time":
        return f"{plan.objective:,.1f} days"
    return render.usd(plan.objective)


def sentence(s: Scenario, res: SolveResult, alt: Alternative, doc: dict[str, Any]) -> str:
    """``mi300x bf16 (thin: 2 bf16 runs from 1 source (AMD)) would win by 4% (24.1 days
    against 25.2 days) if its runs hold, but not at the slow end of its band (34.0 days); 3
    more runs from a source other than AMD would make it eligible.``"""
    best, plan = res.best, alt.result.best
    assert best is not None and plan is not None
    precision = plan.evaluation.layout.precision
    pair = pair_evidence(alt.gpu, s.catalog.gpu(alt.gpu).evidence, precision)
    theirs, ours = _measure(s, plan), _measure(s, best)
    key = "days_range" if s.objective == "time" else "cost_usd_range"
    end = (doc.get(key) or [None, None])[1]
    if end is None:
        robust = "and its band has no upper end"
    else:
        at = f"{end:,.1f} days" if s.objective == "time" else render.usd(end)
        side = "slow" if s.objective == "time" else "dear"
        verdict = "and still wins" if end < best.objective else "but not"
        robust = f"{verdict} at the {side} end of its band ({at})"
    holds = "if its runs hold" if pair.runs else "if the model's extrapolation holds"
    return (
        f"{alt.gpu} {precision} ({pair.tier}: {pair.summary}) would win by {alt.gain_pct:.0f}% "
        f"({theirs} against {ours}) {holds}, {robust}{_late(s, doc)}{_over_budget(s, doc)}; "
        f"{pair.to_eligible}."
    )


def _over_budget(s: Scenario, doc: dict[str, Any]) -> str:
    """``, though at the slow end it costs $1.58M, over the $1.00M budget`` when a cost
    that moves with the time (rented GPU-hours, energy) exceeds the budget there."""
    dear = (doc.get("cost_usd_range") or [None, None])[1]
    if s.objective != "time" or s.budget_usd is None or dear is None or dear <= s.budget_usd:
        return ""
    over = f"{render.usd(dear)}, over the {render.usd(s.budget_usd)} budget"
    return f", though at the slow end it costs {over}"


def _late(s: Scenario, doc: dict[str, Any]) -> str:
    """``, but the slow end of its band (138 days) misses the 90-day deadline`` when it does."""
    slow = (doc.get("days_range") or [None, None])[1]
    if s.deadline_days is None or slow is None or slow <= s.deadline_days:
        return ""
    return (
        f", but the slow end of its band ({slow:,.1f} days) misses the "
        f"{s.deadline_days:,.0f}-day deadline"
    )


def as_dicts(alts: list[Alternative]) -> list[dict[str, Any]]:
    """The JSON's ``alternatives``: each plan's contract columns and evidence, the tier,
    ``gain_pct`` and the ``sentence``."""
    return [
        {
            "gpu": a.gpu,
            "tier": a.tier,
            "gain_pct": a.gain_pct,
            "sentence": a.sentence,
            "plan": plan_entry(a.scenario, a.result.best, 1),
        }
        for a in alts
    ]


def text(scenario: Scenario, alts: list[Alternative]) -> str:
    """The text section: a table of the alternatives and their sentences."""
    level = scenario.evidence
    if not alts:
        return f"No thin or extrapolated platform beats this answer (--evidence {level})."
    rows = []
    for i, a in enumerate(alts):
        p = a.result.best
        assert p is not None
        doc = plan_entry(a.scenario, p, 1)["evidence"]
        ev = p.evaluation
        rows.append(
            (
                i + 1,
                a.gpu if a.tier == "measured" else f"{a.gpu} ({a.tier})",
                ev.layout.precision,
                ev.layout.num_gpus,
                layout_cell(ev),
                with_range(float(ev.time_to_train_days or 0.0), doc["days_range"]),
                render.usd(p.cost_usd),
                f"{100 * float(ev.mfu):.1f}%",
            )
        )
    head = ["#", "gpu", "precision", "gpus", "tp/pp/dp/cp/vp", "days", "cost", "mfu"]
    lines = [
        f"Beyond the evidence rule (--evidence {level} searched only the pairs it admits; "
        f"{RULE_TEXT}):",
        render.table(head, rows),
    ]
    lines += [f"- {a.sentence}" for a in alts]
    return "\n".join(lines)


def asked_for(q: dict[str, Any], scenario: Scenario) -> bool:
    """Whether optimize's question ``q`` (command-line options) has alternatives to look
    for, whatever its answer: the evidence rule applies (no GPUs named, or --evidence given
    with them), at a level that keeps some out."""
    return not evidence_spares(q) and scenario.evidence != "any"


def wide_question(q: dict[str, Any]) -> Scenario:
    """``q`` under --evidence any: every pair the evidence rule could keep out."""
    return scenario_from_options({**q, "evidence": "any"})


def beyond_evidence(
    q: dict[str, Any],
    scenario: Scenario,
    res: SolveResult,
    time_limit_s: float,
    queue: PairQueue | None = None,
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """optimize's hook: the JSON keys (``alternatives``) and the text section of the pairs
    the evidence rule kept out of the question ``q`` (command-line options); none when GPUs
    were named, --evidence any searched every pair, or nothing fits. ``queue``: the
    excluded pairs of wide_question(q), some prepared already (designer/ahead.py)."""
    if not asked_for(q, scenario) or res.best is None:
        return {"alternatives": []}, ()
    wide = queue.wide if queue is not None else wide_question(q)
    alts = alternatives(scenario, wide, res, time_limit_s, queue)
    return {"alternatives": as_dicts(alts)}, (text(scenario, alts),)
