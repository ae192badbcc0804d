"""How well predicted step times order layouts, and how sure a ranking of two plans is.

Metrics of one group of measured runs (same model, GPUs and batch; only the layout differs),
comparing predicted with measured step times:

- Kendall's tau-b (Kendall 1945, "The treatment of ties in ranking problems"):
  (concordant - discordant) / sqrt((n0 - ties_pred) (n0 - ties_meas)), n0 = n (n - 1) / 2;
  0 when either side is all ties (a constant-MFU predictor within a group of equal FLOPs).
- top-1 regret: measured time of the predicted fastest layout / measured fastest - 1. When
  several layouts tie for the predicted fastest, the expected regret of a uniformly random
  pick among them (their mean regret).
- best in top k: whether the measured fastest is among the k predicted fastest; with ties,
  the probability under a uniformly random order within each tie (its rank is uniform over
  the positions its tie class occupies).

Confidence of a ranking (``ranking_confidence``): the share of measured layout pairs that
the model ordered right, by the predicted margin between them (bins of
models/data/ranking_fidelity.yaml, written by ``python bench/ranking.py
--write-confidence``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import yaml

FIDELITY_FILE = Path(__file__).resolve().parent / "data" / "ranking_fidelity.yaml"
COIN_TOSS_ACCURACY = 0.75  # below this share of pairs ordered right, call it a coin toss


def _sign(x: float, rel_tol: float) -> int:
    return 0 if abs(x) <= rel_tol else (1 if x > 0 else -1)


def _diff_sign(a: float, b: float, rel_tol: float) -> int:
    """Sign of a - b, 0 when they are equal within ``rel_tol`` of the larger."""
    return _sign(a - b, rel_tol * max(abs(a), abs(b)))


def kendall_tau_b(
    predicted: Sequence[float], measured: Sequence[float], rel_tol: float = 1e-9
) -> float:
    """Kendall's tau-b between two sequences (module docstring); 0 when either is all ties."""
    n = len(predicted)
    if n != len(measured):
        raise ValueError("predicted and measured differ in length")
    concordant = discordant = ties_p = ties_m = 0
    for i in range(n):
        for j in range(i + 1, n):
            sp = _diff_sign(predicted[i], predicted[j], rel_tol)
            sm = _diff_sign(measured[i], measured[j], rel_tol)
            ties_p += sp == 0
            ties_m += sm == 0
            concordant += sp * sm > 0
            discordant += sp * sm < 0
    pairs = n * (n - 1) // 2
    denom = math.sqrt((pairs - ties_p) * (pairs - ties_m))
    return (concordant - discordant) / denom if denom else 0.0


def _tied_with_best(values: Sequence[float], rel_tol: float) -> list[int]:
    best = min(values)
    return [i for i, v in enumerate(values) if _diff_sign(v, best, rel_tol) == 0]


def top1_regret(
    predicted: Sequence[float], measured: Sequence[float], rel_tol: float = 1e-9
) -> float:
    """Measured time of the predicted fastest over the measured fastest, minus 1; the mean
    over the layouts tied for predicted fastest (module docstring)."""
    best = min(measured)
    picks = _tied_with_best(predicted, rel_tol)
    return sum(measured[i] / best - 1.0 for i in picks) / len(picks)


def best_in_top_k(
    predicted: Sequence[float], measured: Sequence[float], k: int = 3, rel_tol: float = 1e-9
) -> float:
    """Probability that the measured fastest is among the k predicted fastest (1 or 0 without
    ties; with ties, averaged over the layouts tied for measured fastest and over random
    orders within predicted ties)."""
    winners = _tied_with_best(measured, rel_tol)
    total = 0.0
    for w in winners:
        ahead = sum(_diff_sign(p, predicted[w], rel_tol) < 0 for p in predicted)
        tied = sum(_diff_sign(p, predicted[w], rel_tol) == 0 for p in predicted)
        total += max(0, min(tied, k - ahead)) / tied
    return total / len(winners)


@dataclass(frozen=True)
class MarginBin:
    """Measured layout pairs whose predicted margin lies in [low, high): how many, and the
    share the model ordered as measured."""

    low: float
    high: float
    pairs: int
    ordered_right: float


def pair_margins(predicted: Sequence[float], measured: Sequence[float]) -> list[tuple[float, bool]]:
    """Each pair of a group as (predicted margin, ordered right): the margin is the slower
    predicted time over the faster minus 1; pairs measured equal are left out."""
    out = []
    for i in range(len(predicted)):
        for j in range(i + 1, len(predicted)):
            if measured[i] == measured[j]:
                continue
            lo, hi = sorted((predicted[i], predicted[j]))
            margin = hi / lo - 1.0
            right = (predicted[i] - predicted[j]) * (measured[i] - measured[j]) > 0
            out.append((margin, right))
    return out


def margin_bins(margins: list[tuple[float, bool]], edges: Sequence[float]) -> list[MarginBin]:
    """The pairs binned by predicted margin at ``edges`` (the last bin is open-ended); a
    tie in the prediction counts as half right (a coin toss)."""
    bounds = [*edges, math.inf]
    bins = []
    for low, high in zip(bounds, bounds[1:], strict=False):
        inside = [(m, r) for m, r in margins if low <= m < high]
        right = sum(1.0 if r else (0.5 if m == 0 else 0.0) for m, r in inside)
        bins.append(MarginBin(low, high, len(inside), right / len(inside) if inside else 0.0))
    return bins


@dataclass(frozen=True)
class RankingConfidence:
    """How sure the order of the first two plans is."""

    margin: float  # the second plan's objective over the first's, minus 1
    ordered_right: float | None  # share of measured pairs with such a margin ordered right
    pairs: int  # how many measured pairs that share rests on
    coin_toss: bool
    source: str

    def as_dict(self) -> dict:
        return {
            "margin": self.margin,
            "pairs_ordered_right": self.ordered_right,
            "measured_pairs": self.pairs,
            "coin_toss": self.coin_toss,
            "source": self.source,
        }

    def sentence(self) -> str:
        pct = f"{100 * self.margin:.1f}%"
        if self.ordered_right is None:
            return f"Ranking: plan 1 leads plan 2 by {pct}; no measured pairs at that margin."
        verdict = (
            "a coin toss: measure both before choosing"
            if self.coin_toss
            else "the order is likely right"
        )
        return (
            f"Ranking: plan 1 leads plan 2 by {pct}; on {self.pairs:,} measured layout pairs "
            f"with a predicted margin like this the model ordered "
            f"{100 * self.ordered_right:.0f}% right, so this is {verdict}."
        )


@cache
def fidelity_table() -> tuple[tuple[MarginBin, ...], str]:
    """The margin bins of models/data/ranking_fidelity.yaml and the command that wrote them."""
    doc = yaml.safe_load(FIDELITY_FILE.read_text(encoding="utf-8"))
    bins = tuple(
        MarginBin(
            float(b["low"]),
            math.inf if b["high"] is None else float(b["high"]),
            int(b["pairs"]),
            float(b["ordered_right"]),
        )
        for b in doc["bins"]
    )
    return bins, str(doc["source"])


def ranking_confidence(first: float, second: float) -> RankingConfidence:
    """The confidence that a plan of objective ``first`` beats one of ``second`` (lower is
    better), from the measured share of pairs ordered right at that predicted margin."""
    margin = second / first - 1.0 if first > 0 else 0.0
    bins, source = fidelity_table()
    for b in bins:
        if b.low <= margin < b.high and b.pairs:
            return RankingConfidence(
                margin, b.ordered_right, b.pairs, b.ordered_right < COIN_TOSS_ACCURACY, source
            )
    return RankingConfidence(margin, None, 0, False, source)
