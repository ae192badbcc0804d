"""The evidence behind a prediction: what range of measured step times the calibration implies.

A GPU's profile (catalog ``stacks``) records how it was checked against measured
training runs (``catalog.specs.Evidence``): of the signed errors
``e = (predicted - measured) / measured`` of its step times, the band ``[lo, hi]``
built to hold about 80% of new runs' errors (calibration/error_band.py: the 10th and
90th percentiles from 9 runs, a prediction interval under 9). Reading those
residuals backwards, a run predicted at ``p`` seconds per step measures
``p / (1 + e)`` for ``e`` in ``[min(lo, 0), max(hi, 0)]`` (widened to contain the
prediction itself), so the measured step time lies in

    [p / (1 + hi), p / (1 + lo)]

A GPU measured only in another precision than the plan's (e.g. B200 runs in FP8
for a BF16 plan) is extrapolated in that precision: its own band, doubled, and at
least as wide as the band of a GPU without runs.
Time to train is proportional to the step time and scales the same way. Cost
scales in its time-proportional part only (``cost_range``).

A GPU without measured runs (``evidence`` None) is *extrapolated*: its band is the
catalog's widest band (in the ratio measured / predicted, after widening it to contain
the prediction) among the GPUs with a pair on the evidence rule's measured tier
(extrapolation_basis: a thin pair's band is its few runs' scatter), doubled on the
ratio scale, or a signed error of +/-35% when no GPU in the catalog has measured runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from catalog.catalog import Catalog
from catalog.specs import Evidence
from models.evaluate import Evaluation
from models.evidence_rule import PairEvidence, detail_recorded, pair_evidence

DEFAULT_EXTRAPOLATED_ERROR_PCT = 35.0
"""Signed error band (+/- percent) of an extrapolated GPU when no GPU has measured runs."""
EXTRAPOLATION_WIDENING = 2.0
"""How much wider an extrapolated GPU's band is than the widest measured one (ratio scale)."""


def measured_range(
    predicted: float, error_lo_pct: float, error_hi_pct: float
) -> tuple[float, float]:
    """The measured values a prediction implies: ``[p / (1 + hi), p / (1 + lo)]``.

    ``error_lo_pct`` and ``error_hi_pct`` are the signed errors (predicted - measured)
    / measured, in percent, of the runs the model was checked on (lo the most
    negative). Errors at or below -100% would allow an unbounded measurement: the
    upper end is then infinite.
    """
    lo_ratio, hi_ratio = ratio_bounds(error_lo_pct, error_hi_pct)
    return predicted * lo_ratio, predicted * hi_ratio


def ratio_bounds(error_lo_pct: float, error_hi_pct: float) -> tuple[float, float]:
    """The measured / predicted ratios at the two error extremes: ``1 / (1 + hi)``,
    ``1 / (1 + lo)`` (errors as fractions)."""
    if error_lo_pct > error_hi_pct:
        raise ValueError(f"error_lo_pct {error_lo_pct} is above error_hi_pct {error_hi_pct}")
    hi_den = 1.0 + error_lo_pct / 100.0
    lo_den = 1.0 + error_hi_pct / 100.0
    lo_ratio = 1.0 / lo_den if lo_den > 0 else 0.0
    hi_ratio = 1.0 / hi_den if hi_den > 0 else math.inf
    return lo_ratio, hi_ratio


def cost_range(
    cost_usd: float, fixed_usd: float, lo_ratio: float, hi_ratio: float
) -> tuple[float, float]:
    """A cost's range when its time-proportional part scales with the step time.

    ``cost = fixed + variable`` where ``variable = cost - fixed`` is proportional
    to the training time (GPU-hours, energy, a lifetime share of capex) and
    ``fixed`` does not depend on it (capex bought outright): the range is
    ``fixed + variable x [lo_ratio, hi_ratio]``.
    """
    variable = cost_usd - fixed_usd
    return fixed_usd + variable * lo_ratio, fixed_usd + variable * hi_ratio


def time_independent_cost_usd(ev: Evaluation, pricing: str) -> float:
    """The part of a plan's cost that does not change with the training time.

    - ``capex``: all of it. The cluster is bought whatever the run takes, so a
      slower or faster run costs the same (only time to train moves).
    - ``cloud``: none. GPU-hours x the hourly price is proportional to time.
    - ``tco``: the capex when it is charged in full (no ``lifetime_years``); the
      energy, and with a lifetime the job's share ``capex x days / (365 Y)``, are
      proportional to time.
    """
    if pricing == "capex":
        return float(ev.capex)
    if pricing == "tco" and ev.cluster.facility.lifetime_years is None:
        return float(ev.capex)
    return 0.0


def evidence_line(evidence: Evidence | None, family: str = "") -> str:
    """One line saying what a profile was checked on, e.g.
    ``measured: 40 runs, mean error 6.1%, worst 18.0%`` or
    ``extrapolated: no measured training run`` (``family`` "MoE ": of that kind)."""
    if evidence is None:
        return f"extrapolated: no measured {family}training run"
    runs = f"{evidence.runs:,} {family}run{'s' if evidence.runs != 1 else ''}"
    if evidence.releases:  # the software releases they measured (MoE profiles)
        runs += f" of releases {evidence.releases}"
    return f"measured: {runs}, mean error {evidence.mape_pct:.1f}%, worst {evidence.worst_pct:.1f}%"


@dataclass(frozen=True)
class Band:
    """The signed-error band a prediction on one GPU is read with."""

    status: str  # "measured" | "thin" | "extrapolated" (models.evidence_rule)
    error_lo_pct: float
    error_hi_pct: float
    evidence: Evidence | None  # the GPU's own (None when extrapolated)
    basis: str  # where the band comes from, one phrase
    pair: PairEvidence | None = None  # the plan's (GPU, precision) runs, when known
    family: str = ""  # "MoE ": the runs are mixture-of-experts runs (catalog measured_moe)

    @property
    def measured(self) -> bool:
        """Read with the GPU's own runs (measured or thin), not extrapolated."""
        return self.status != "extrapolated"

    @property
    def ratios(self) -> tuple[float, float]:
        """Measured / predicted at the band's ends (low, high)."""
        return ratio_bounds(self.error_lo_pct, self.error_hi_pct)

    def scale(self, predicted: float) -> tuple[float, float]:
        """The measured range of a step time or a time to train predicted at ``predicted``."""
        return measured_range(predicted, self.error_lo_pct, self.error_hi_pct)

    def cost(self, cost_usd: float, fixed_usd: float) -> tuple[float, float]:
        lo, hi = self.ratios
        return cost_range(cost_usd, fixed_usd, lo, hi)

    @property
    def line(self) -> str:
        """The evidence line; for an extrapolated GPU with the band it is read with."""
        e = self.evidence
        if self.status == "thin" and self.pair is not None and e is not None:
            text = (
                f"thin: {self.pair.summary}, mean error {e.mape_pct:.1f}%, worst "
                f"{e.worst_pct:.1f}% ({self.pair.to_eligible})"
            )
        elif self.measured and e is not None and self.pair is not None and self.pair.recorded:
            text = (
                f"measured: {self.pair.summary}; {e.runs:,} runs in all, mean error "
                f"{e.mape_pct:.1f}%, worst {e.worst_pct:.1f}%"
            )
        elif self.measured or e is None:
            text = evidence_line(e, self.family)
        else:  # measured, but in another precision
            text = (
                f"extrapolated: {e.runs:,} {'/'.join(e.precisions)} {self.family}run"
                f"{'s' if e.runs != 1 else ''}, mean error {e.mape_pct:.1f}%"
            )
        if not self.measured:
            text += f" (read with {self.basis})"
        return text


def _widened(e: Evidence) -> tuple[float, float]:
    """A measured band's signed errors (fractions), widened to contain zero error."""
    return min(e.error_lo_pct, 0.0) / 100.0, max(e.error_hi_pct, 0.0) / 100.0


def _log_width(e: Evidence) -> float:
    """Width of the widened band on the ratio scale: log((1 + hi) / (1 + lo))."""
    lo, hi = _widened(e)
    return math.log((1.0 + hi) / (1.0 + lo)) if lo > -1.0 else math.inf


def extrapolated_band(measured: Iterable[tuple[str, Evidence]]) -> Band:
    """The band of a GPU without measured runs.

    The widest measured band among ``(gpu name, evidence)``, each first widened to
    contain zero error and compared by the width of its ratio interval on a log
    scale, is doubled on the ratio scale: each end's ratio ``1 + e`` is squared, so
    -12%..+18% becomes -22.6%..+39.2%. (Doubling the percentages instead would turn
    a -50% error into -100%, an unbounded step time.) With no measured GPU: +/-35%.
    """
    widest = max(measured, key=lambda item: (_log_width(item[1]), item[0]), default=None)
    if widest is None:
        d = DEFAULT_EXTRAPOLATED_ERROR_PCT
        return Band("extrapolated", -d, d, None, f"+/-{d:g}%: no GPU has measured runs")
    name, e = widest
    lo, hi = _widened(e)
    k = EXTRAPOLATION_WIDENING
    lo_pct = 100.0 * ((1.0 + lo) ** k - 1.0)
    hi_pct = 100.0 * ((1.0 + hi) ** k - 1.0)
    return Band(
        "extrapolated",
        lo_pct,
        hi_pct,
        None,
        f"{lo_pct:+.0f}%..{hi_pct:+.0f}%: the widest measured band ({name}) doubled",
    )


def band(
    evidence: Evidence | None,
    measured: Iterable[tuple[str, Evidence]] = (),
    precision: str | None = None,
    gpu: str = "this GPU",
    family: str = "dense",
) -> Band:
    """The band of a GPU with ``evidence`` (its own residuals, widened to contain zero),
    or, without, the extrapolated band from the ``measured`` GPUs of its catalog; a
    ``precision`` its runs did not use is extrapolated from its own band. With a
    precision, the band of the runs of the plan's model ``family`` (dense | moe) and
    precision (``Evidence.bands``) when recorded; a family not measured on the GPU reads
    its dense band of that precision, doubled like an extrapolation."""
    pair = None if precision is None else pair_evidence(gpu, evidence, precision)
    if evidence is None:
        return replace(extrapolated_band(measured), pair=pair)
    if precision is not None and precision not in evidence.precisions:
        # its own band doubled, but never narrower than a GPU with no run at all: a tight
        # band in one precision says little about another (GEMM efficiencies differ)
        other = extrapolated_band([(gpu, evidence)])
        floor = extrapolated_band(measured)
        lo_pct = min(other.error_lo_pct, floor.error_lo_pct)
        hi_pct = max(other.error_hi_pct, floor.error_hi_pct)
        return Band(
            "extrapolated",
            lo_pct,
            hi_pct,
            evidence,
            f"{lo_pct:+.0f}%..{hi_pct:+.0f}%: no {precision} run on {gpu}; its "
            f"{'/'.join(evidence.precisions)} band doubled, at least the catalog's "
            "extrapolated band",
            pair,
        )
    lo, hi = _widened(evidence)
    status = "thin" if pair is not None and pair.tier == "thin" else "measured"
    basis = f"{evidence.sets}"
    bands = evidence.bands if detail_recorded(evidence) else {}
    own = bands.get(f"{family} {precision}")
    dense = bands.get(f"dense {precision}")
    if own is not None:  # the runs of the plan's own family and precision
        lo, hi = min(own[0], 0.0) / 100.0, max(own[1], 0.0) / 100.0
        basis = f"{family} {precision} runs: {evidence.sets}"
    elif dense is not None:  # another family measured only: its band, doubled
        k = EXTRAPOLATION_WIDENING
        lo = (1.0 + min(dense[0], 0.0) / 100.0) ** k - 1.0
        hi = (1.0 + max(dense[1], 0.0) / 100.0) ** k - 1.0
        basis = f"no {family} run on {gpu}: its dense {precision} band doubled"
    return Band(status, 100.0 * lo, 100.0 * hi, evidence, basis, pair)


def catalog_band(
    catalog: Catalog, gpu: str, precision: str | None = None, family: str = "dense"
) -> Band:
    """The band of ``gpu`` (at ``precision``, when given, for a ``family`` of model) under
    the stack in effect. A mixture-of-experts model (``family`` "moe") reads the MoE runs
    alone (``measured_moe``): a GPU without them is extrapolated from the widest MoE band
    of the catalog, doubled, never read with the dense record; the evidence rule's tiers
    (models.evidence_rule) are of the dense runs, so a MoE band is measured or
    extrapolated."""
    if family == "moe":
        runs = [(n, g.moe_evidence) for n, g in catalog.gpus.items() if g.moe_evidence]
        b = band(catalog.gpu(gpu).moe_evidence, runs, precision, gpu)
        status = "extrapolated" if b.status == "extrapolated" else "measured"
        basis = b.basis.replace("measured band", "MoE band")
        return replace(b, status=status, pair=None, family="MoE ", basis=basis)
    return band(catalog.gpu(gpu).evidence, extrapolation_basis(catalog), precision, gpu, family)


def extrapolation_basis(catalog: Catalog) -> list[tuple[str, Evidence]]:
    """The GPUs whose band an extrapolated one widens (extrapolated_band): those with a
    pair on the evidence rule's measured tier (models.evidence_rule: enough runs and
    sources that the band's width is the model's error, not the few runs' scatter: a
    2-run band is a prediction interval with one degree of freedom,
    calibration.error_band); every GPU with runs when none has such a pair."""
    runs = [(n, g.evidence) for n, g in catalog.gpus.items() if g.evidence is not None]
    measured = [
        (n, e)
        for n, e in runs
        if any(pair_evidence(n, e, p).tier == "measured" for p in e.precisions)
    ]
    return measured or runs


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def gpu_evidence(
    catalog: Catalog,
    gpu: str,
    stack: str | None = None,
    precision: str | None = None,
    family: str = "dense",
) -> dict[str, Any]:
    """A GPU's evidence object without a plan: the ranges are null."""
    b = catalog_band(catalog, gpu, precision, family)
    e = b.evidence
    return {
        "stack": stack or catalog.gpu(gpu).stack,
        "status": b.status,
        "runs": e.runs if e else None,
        "mape_pct": e.mape_pct if e else None,
        "worst_pct": e.worst_pct if e else None,
        "sets": e.sets if e else None,
        "error_lo_pct": b.error_lo_pct,
        "error_hi_pct": b.error_hi_pct,
        "step_time_s_range": None,
        "days_range": None,
        "cost_usd_range": None,
        "basis": b.basis,
        "line": b.line,
        **rule_fields(b.pair),
    }


def rule_fields(pair: PairEvidence | None) -> dict[str, Any]:
    """The evidence rule's keys of an evidence object (models.evidence_rule): the runs and
    organisations in the plan's precision, how many of those runs spanned more than one
    server (null when not recorded) and what would make the pair measured."""
    if pair is None:
        return {
            "precision_runs": None,
            "sources": None,
            "multi_server_runs": None,
            "to_eligible": None,
        }
    return {
        "precision_runs": pair.runs,
        "sources": list(pair.sources),
        "multi_server_runs": pair.multi_server,
        "to_eligible": None if pair.tier == "measured" else pair.to_eligible,
    }


def plan_evidence(
    catalog: Catalog,
    ev: Evaluation,
    pricing: str,
    cost_usd: float,
    stack: str | None = None,
) -> dict[str, Any]:
    """The evidence object of a plan (JSON): the band and the measured ranges it implies.

    Keys: ``stack``, ``status`` (measured | extrapolated), ``runs``, ``mape_pct``,
    ``worst_pct``, ``sets`` (null when extrapolated), ``error_lo_pct`` and
    ``error_hi_pct`` (the band used), ``step_time_s_range``, ``days_range`` (null
    without tokens), ``cost_usd_range`` (``pricing``'s cost; ``time_independent_cost_usd``
    says which part moves; a rented plan is billed as its rental bills each end of its
    days, models/rental.py: at least its term's minimum, in its block's reservation
    lengths), ``basis`` and ``line``. A bound that is unbounded is null (a rented plan's
    slow end past its block's longest reservation, too).
    """
    precision = ev.layout.precision
    family = "moe" if ev.moe else "dense"
    b = catalog_band(catalog, ev.gpu, precision, family)
    days = ev.time_to_train_days
    step = b.scale(float(ev.step_time_s))
    days_range = b.scale(float(days)) if days is not None else None
    cost = b.cost(float(cost_usd), time_independent_cost_usd(ev, pricing))
    if pricing == "cloud" and days_range is not None:
        cost = _rent_band(ev, days_range) or cost
    doc = gpu_evidence(catalog, ev.gpu, stack, precision, family)
    doc["step_time_s_range"] = [_num(step[0]), _num(step[1])]
    doc["days_range"] = None if days_range is None else [_num(days_range[0]), _num(days_range[1])]
    doc["cost_usd_range"] = [_num(cost[0]), _num(cost[1])]
    return doc


def _rent_band(ev: Evaluation, days_range: tuple[float, float]) -> tuple[float, float] | None:
    """A rented plan's cost at each end of its days, as its rental bills them
    (Evaluation.rented: its term's minimum, its block's lengths; inf past the longest)."""
    paid = ev.rented()
    if paid is None:
        return None
    gpus = ev.layout.num_gpus
    return float(paid.cost(gpus, days_range[0])), float(paid.cost(gpus, days_range[1]))


def evaluation_evidence(
    catalog: Catalog, ev: Evaluation, stack: str | None = None
) -> dict[str, Any]:
    """The evidence object of ``designer evaluate``: as ``plan_evidence``, with
    ``cost_usd_range`` per pricing like evaluate's ``cost_usd`` ({capex, cloud, tco};
    cloud and tco null without tokens; capex does not change with time)."""
    doc = plan_evidence(catalog, ev, "capex", float(ev.capex), stack)
    b = catalog_band(catalog, ev.gpu, ev.layout.precision, "moe" if ev.moe else "dense")
    costs: dict[str, list[float | None] | None] = {"capex": doc["cost_usd_range"]}
    days = ev.time_to_train_days
    for pricing, value in (("cloud", ev.cloud_cost), ("tco", ev.tco_cost)):
        if value is None:
            costs[pricing] = None
            continue
        lo, hi = b.cost(float(value), time_independent_cost_usd(ev, pricing))
        if pricing == "cloud" and days is not None:
            lo, hi = _rent_band(ev, b.scale(float(days))) or (lo, hi)
        costs[pricing] = [_num(lo), _num(hi)]
    doc["cost_usd_range"] = costs
    return doc
