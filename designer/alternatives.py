"""What the evidence rule kept out of an answer (issue 30): the thin and extrapolated
(GPU, precision) pairs that would change it, each re-solved on its own.

The answer searches the pairs ``--evidence`` admits (models.evidence_rule). Every pair
the same question would search under ``--evidence any`` but this one did not is solved
alone (its GPU, its precisions), as ``designer compare`` does; the pairs whose best plan
beats the answer's objective are the alternatives (every thin one, the best
MAX_ALTERNATIVES extrapolated ones), best first, each with its evidence
band and one sentence computed from the two plans: how much it would win by, whether it
still wins at the slow (or dear) end of its band, and what more evidence would make it
eligible (``PairEvidence.to_eligible``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from designer.output import text as render
from designer.output.formats import layout_cell, plan_entry, with_range
from designer.question.build import scenario_from_options
from models.evidence_range import catalog_band
from models.evidence_rule import pair_evidence
from solvers import Scenario, SolveResult, cloud_terms
from solvers.cpsat.solve import Resolve, capped_search_limit, resolve_cpsat
from solvers.gc_pause import without_gc_pauses
from solvers.pair_bound import pair_lower_bound
from solvers.screen.bounds import (
    BoundTerms,
    dense_part_lower_bounds,
    dp_split_lower_bounds,
    gemm_lower_bounds,
    objective_lower_bound,
    prepare_bounds,
)
from solvers.screen.presolve import Presolved, presolve
from solvers.space import Candidate, EnumerationStopped, enumerate_candidates

MAX_ALTERNATIVES = 3
"""Extrapolated alternatives shown, best first (every thin pair that wins is shown too)."""


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


def _hopeless(
    s: Scenario,
    pair: tuple[str, tuple[str, ...]],
    terms: BoundTerms,
    wins: list[float],
    best: float,
) -> bool:
    """Whether a pair (its question ``s``, not yet prepared) is skipped whatever its shapes
    are: its lower bound (solvers/pair_bound.py, at most every shape's) cannot beat
    ``best``, or, for a pair that cannot be thin, lies above the MAX_ALTERNATIVES-th
    extrapolated alternative solved so far (``wins``, best first: _crowded_out)."""
    floor = pair_lower_bound(terms, *pair)
    if floor >= best:
        return True
    crowded = len(wins) >= MAX_ALTERNATIVES and floor > wins[MAX_ALTERNATIVES - 1]
    return crowded and not _maybe_thin(s, *pair)


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
    """The excluded pairs of a question in visiting order (the most promising first:
    _promise), prepared one at a time (their shapes enumerated, presolved and cheaply
    bounded). Nothing here depends on the answer: optimize starts preparing them before
    its own solve ends (designer/ahead.py), and _solved goes on from where that stopped."""

    def __init__(self, wide: Scenario, excluded: dict[str, tuple[str, ...]]) -> None:
        self.wide = wide
        self.excluded = excluded
        self.order = sorted(
            excluded.items(), key=lambda gp: (*(-x for x in _promise(wide, *gp)), gp[0])
        )
        self.ready: list[_Pair] = []  # prepared, not yet visited

    def prepare_next(
        self,
        skip: Callable[[Scenario, tuple, BoundTerms], bool] | None,
        stop: Callable[[], bool] | None = None,
    ) -> bool:
        """Prepare the next pair but those ``skip`` (its question, the pair, its bound
        terms) skips unprepared; False once none is left, or when ``stop()`` says so
        between its steps or while its shapes are enumerated (the pair then stays first
        in the order, to be prepared, or skipped, where _solved's visit reaches it, as if
        preparing had stopped before it; a pair presolved before ``stop()`` is kept, its
        cheap bounds left to its visit)."""
        while self.order:
            gp = self.order.pop(0)
            s = _question(self.wide, *gp)
            terms = None if cloud_terms.applies(s) else prepare_bounds(s)
            if terms is not None and skip is not None and skip(s, gp, terms):
                continue  # its shapes would all be bounded out: never enumerated
            if stop is not None and stop():
                self.order.insert(0, gp)
                return False
            try:  # (a long enumeration, an A100's memory terms, stops within itself)
                pair = _prepared(self.wide, *gp, terms, stop)
            except EnumerationStopped:
                self.order.insert(0, gp)
                return False
            if pair.pre is not None and not (stop is not None and stop()):
                pair.bounds_known()  # the part of its bounds that no limit changes
            self.ready.append(pair)
            return True
        return False

    def prepare_until(self, stop: Callable[[], bool]) -> None:
        """Prepare pairs (none skipped: the answer is not known yet) until ``stop()`` or
        none is left; ``stop()`` is asked between a pair's steps too (prepare_next)."""
        while not stop() and self.prepare_next(None, stop):
            pass


def _solved(queue: PairQueue, best: float, time_limit_s: float) -> list[tuple[_Pair, SolveResult]]:
    """The pairs that may hold an alternative, solved; the others are skipped, each skip
    implied by the valid lower bounds of its shapes: a pair none of whose shapes can beat
    ``best``, or one that cannot be thin and whose shapes all lie above the
    MAX_ALTERNATIVES-th extrapolated alternative solved before it (it would be cut from
    the list). Solved a few at a time (CP-SAT releases the GIL while it searches), the
    most promising first; the answer is the one solving every pair gives. A time
    question's pair is searched only below the time that lets it enter the list
    (_cap, _Pair.solve's ``cap``): the answer's, or, for a pair that cannot be thin
    visited once MAX_ALTERNATIVES extrapolated alternatives are known, the last of them;
    a pair with no plan there is one the list would drop.

    Every pair is prepared in the visiting order (``queue``), and while a wave of solves
    searches, the next pairs are prepared beside it, until its solves end (a pair whose
    enumeration they interrupt is prepared again at its visit); which pairs a wave holds,
    and what each is asked, depends only on the waves before it, as when every pair was
    prepared first (tests/test_alternatives.py): a pair prepared before the answer was
    known (none skipped) is skipped at its visit as its shapes' bounds say. A pair whose lower bound
    from the catalog and the question alone (solvers/pair_bound.py, at most every
    shape's) already skips it, against the waves solved when its turn to be prepared
    comes, is never prepared: the skip its shapes' bounds would imply anyway (wins only
    accumulate), so the waves are the same; one prepared beside an earlier wave is skipped
    by the same bound at its visit, its shapes' bounds unread."""
    workers = max(1, min(len(queue.excluded), os.cpu_count() or 1))
    ready = queue.ready
    done: list[tuple[_Pair, SolveResult]] = []

    def hopeless(s: Scenario, gp: tuple, terms: BoundTerms) -> bool:
        return _hopeless(s, gp, terms, _wins(done, best), best)

    with ThreadPoolExecutor(max_workers=workers) as pool:
        while ready or queue.order:
            wave: list[tuple[_Pair, float | None]] = []
            while len(wave) < workers and (ready or queue.prepare_next(hopeless)):
                pair = ready.pop(0)
                if pair.terms is not None and hopeless(pair.scenario, pair.key, pair.terms):
                    continue  # (prepared beside an earlier wave: its shapes' bounds agree)
                if pair.reaches(best, strict=True) and not _crowded_out(pair, done, best):
                    cap = _cap(pair, done, best)
                    if cap is None or pair.reaches(capped_search_limit(cap), strict=False):
                        wave.append((pair, cap))  # (else its search under the cap is empty)
            running = [pool.submit(p.solve, time_limit_s, cap) for p, cap in wave]
            # (a pair solved per rental term enumerates its shapes in its thread: the
            # space cache is not shared with an enumeration beside it)
            beside = all(p.pre is not None for p, _ in wave)

            def solved(running: list = running) -> bool:
                return all(f.done() for f in running)

            while beside and not solved() and queue.prepare_next(hopeless, solved):
                pass
            done += [(p, f.result()) for (p, _), f in zip(wave, running, strict=True)]
    return done


def _rule_tier(s: Scenario, gpu: str, precision: str) -> str:
    """The evidence rule's tier of (``gpu``, ``precision``) under ``s``'s catalog."""
    return pair_evidence(gpu, s.catalog.gpu(gpu).evidence, precision).tier


def _tier(pair: _Pair, plan: Any) -> str:
    """The rule's tier that kept ``pair`` out at its plan's precision (what alternatives
    ranks it by: every thin one is kept, MAX_ALTERNATIVES of the others)."""
    return _rule_tier(pair.scenario, pair.gpu, plan.evaluation.layout.precision)


def _wins(done: list[tuple[_Pair, SolveResult]], best: float) -> list[float]:
    """The objectives of the alternatives solved so far that compete for the
    MAX_ALTERNATIVES places (their tier not thin: _tier), best first."""
    return sorted(
        r.best.objective
        for p, r in done
        if r.best is not None and r.best.objective < best and _tier(p, r.best) != "thin"
    )


def _cap(pair: _Pair, done: list[tuple[_Pair, SolveResult]], best: float) -> float | None:
    """The time a pair's plan must reach to enter the list, for a time question's pair
    (None otherwise: solved in full): the answer's, or, for a pair that cannot be thin
    once MAX_ALTERNATIVES extrapolated alternatives are solved, the last of them."""
    if pair.pre is None or pair.scenario.objective != "time":
        return None
    wins = _wins(done, best)
    if pair.maybe_thin or len(wins) < MAX_ALTERNATIVES:
        return best
    return wins[MAX_ALTERNATIVES - 1]


def _crowded_out(pair: _Pair, done: list[tuple[_Pair, SolveResult]], best: float) -> bool:
    """Whether MAX_ALTERNATIVES extrapolated alternatives already solved all beat every
    plan ``pair`` may have (a thin pair is always shown)."""
    if pair.maybe_thin:
        return False
    wins = _wins(done, best)
    return len(wins) >= MAX_ALTERNATIVES and not pair.reaches(
        wins[MAX_ALTERNATIVES - 1], strict=False
    )


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
        f"({theirs} against {ours}) {holds}, {robust}{_late(s, doc)}; {pair.to_eligible}."
    )


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
        "5+ runs from 2+ independent sources make a pair measured):",
        render.table(head, rows),
    ]
    lines += [f"- {a.sentence}" for a in alts]
    return "\n".join(lines)


def asked_for(q: dict[str, Any], scenario: Scenario) -> bool:
    """Whether optimize's question ``q`` (command-line options) has alternatives to look
    for, whatever its answer: no GPUs named, and an evidence level that keeps some out."""
    return not q.get("gpus") and scenario.evidence != "any"


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
