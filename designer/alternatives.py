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
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from designer import render
from designer.questions import scenario_from_options
from designer.report import gpu_label, layout_cell, plan_entry, with_range
from models.evidence_rule import pair_evidence
from solvers import Scenario, SolveResult, solve_cpsat

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


def _solve(wide: Scenario, gpu: str, precisions: tuple[str, ...], time_limit_s: float):
    """``wide`` on one GPU in the given precisions: (gpu, scenario, result)."""
    s = wide.with_changes(gpus=(gpu,), precisions=precisions, unmeasured=frozenset())
    return gpu, s, solve_cpsat(s, time_limit_s=time_limit_s)


def alternatives(
    scenario: Scenario, wide: Scenario, res: SolveResult, time_limit_s: float = 60.0
) -> list[Alternative]:
    """The pairs ``wide`` adds to ``scenario`` whose best plan beats ``res``'s, best first
    (every thin one, at most MAX_ALTERNATIVES extrapolated). None when the answer has no
    plan."""
    best = res.best
    excluded = excluded_pairs(scenario, wide)
    if best is None or not excluded:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(excluded), os.cpu_count() or 1))) as pool:
        solved = list(
            pool.map(lambda gp: _solve(wide, gp[0], gp[1], time_limit_s), excluded.items())
        )
    out = []
    for gpu, s, r in solved:
        if r.best is None or r.best.objective >= best.objective:
            continue
        gain = 100.0 * (best.objective - r.best.objective) / best.objective
        doc = plan_entry(s, r.best, 1)["evidence"]
        alt = Alternative(gpu, s, r, doc["status"], gain, "")
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
                gpu_label(a.gpu, doc),
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


def beyond_evidence(
    q: dict[str, Any], scenario: Scenario, res: SolveResult, time_limit_s: float
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """optimize's hook: the JSON keys (``alternatives``) and the text section of the pairs
    the evidence rule kept out of the question ``q`` (command-line options); none when GPUs
    were named, --evidence any searched every pair, or nothing fits."""
    if q.get("gpus") or scenario.evidence == "any" or res.best is None:
        return {"alternatives": []}, ()
    wide = scenario_from_options({**q, "evidence": "any"})
    alts = alternatives(scenario, wide, res, time_limit_s)
    return {"alternatives": as_dicts(alts)}, (text(scenario, alts),)
