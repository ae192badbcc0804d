"""How sure the ranking of optimize's first two plans is (issue 35).

The margin between plan 1 and plan 2 (plan 2's objective over plan 1's, minus 1) set
against the share of measured layout pairs that designer orders right at such a margin
(models.ranking, from ``python bench/ranking.py --write-confidence``). The measured pairs
are layouts of one model on the same GPUs and batch; when the two plans differ in GPU type
or count, each plan's evidence range (its absolute error) matters as well, and the text
says so.
"""

from __future__ import annotations

from typing import Any

from models.ranking import RankingConfidence, ranking_confidence
from solvers.result import SolveResult


def plan_ranking(res: SolveResult) -> RankingConfidence | None:
    """The confidence in plan 1 over plan 2; None with fewer than two plans."""
    if len(res.plans) < 2:
        return None
    return ranking_confidence(float(res.plans[0].objective), float(res.plans[1].objective))


def _same_hardware(res: SolveResult) -> bool:
    first, second = res.plans[0], res.plans[1]
    return (first.evaluation.gpu, first.num_gpus) == (second.evaluation.gpu, second.num_gpus)


def ranking_dict(res: SolveResult) -> dict[str, Any] | None:
    """The JSON's ``ranking`` object (null with fewer than two plans)."""
    conf = plan_ranking(res)
    if conf is None:
        return None
    return {**conf.as_dict(), "same_hardware": _same_hardware(res)}


def ranking_text(res: SolveResult) -> str | None:
    """The sentence under the plans table (None with fewer than two plans)."""
    conf = plan_ranking(res)
    if conf is None:
        return None
    text = conf.sentence()
    if not _same_hardware(res):
        text += " (The two plans differ in GPU type or count: their evidence ranges matter too.)"
    return text
