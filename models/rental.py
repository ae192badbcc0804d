"""The price a rented plan pays: the one home of it. ``designer evaluate``, the solvers'
cost (solvers/plan.py, solvers/grid_search.py, the CP-SAT model's rounding in
solvers/cpsat/cost.py), the rental sentence, the exports and the evidence band all read
it, so that a plan has one cloud price wherever it is shown.

A plan of one GPU type rented under a term (catalog/data/cloud.yaml, catalog/cloud.py) pays
a rate per GPU-hour for its billed days:

- the rate: on demand, the GPU type's block at the block's own published price where it has
  one (AWS's Capacity Blocks: $4.916 per H100-hour, not the single-server $2.99 the GPU's
  catalog price quotes), moved with the question's price of the GPU (block_price_scale);
  otherwise the term's price_factor x the GPU's on-demand price;
- the billed days (Billing): at least the term's minimum (a reservation is paid in full);
  on demand, a block its provider reserves in whole lengths is paid for the next length at
  or above the job's days (AWS: 1-day increments up to 14 days, 7-day increments up to 182;
  Lambda's 1-Click Clusters: weeks), and a job longer than the block's longest reservation
  cannot rent it (182 days at AWS: a longer plan rents under a reserved term).

The block's size (--cloud-max-gpus, or the catalog's) caps the GPUs and never the price: a
plan of a GPU type pays its block's rate and lengths whatever size of block it rents
(designer/question/fields.py, --cloud-max-gpus). A plan of a GPU type without a block entry
is billed by use, to the minute (the on-demand term's source)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from catalog.cloud import CloudTerm, cloud_offers, shipped_on_demand_usd_per_gpu_hour
from catalog.specs import GPUSpec
from models.units import HOURS_PER_DAY

# a job that ends within a billionth of its days past a length is billed that length
# (models.feasibility.TOL: float noise, never a whole minute); the CP-SAT model's rounding
# (solvers/cpsat/cost.py) takes the same margin
LENGTH_TOL = 1e-9


@dataclass(frozen=True)
class Billing:
    """How a rented plan's days are billed: at least ``min_days`` (its term's minimum),
    rounded up to the block's reservation lengths (``steps``: (up_to_days, step_days) per
    stretch, each from the previous stretch's end; empty: billed by use), and no longer
    than ``max_days`` (None: no limit)."""

    min_days: float = 0.0
    steps: tuple[tuple[float, int], ...] = ()
    max_days: float | None = None

    @property
    def by_use(self) -> bool:
        """Whether the days are billed as they run (no lengths, no longest)."""
        return not self.steps and self.max_days is None

    def rents(self, days: Any) -> Any:
        """Whether a job of ``days`` can be rented so (numpy arrays too)."""
        if self.max_days is None:
            return days == days  # True, in the shape of ``days``
        return days * (1 - LENGTH_TOL) <= self.max_days

    def billed_days(self, days: Any) -> Any:
        """The days paid for a job of ``days`` (float or numpy array): max(days, the
        minimum), then the next reservation length at or above it; math.inf past the
        longest (a plan that cannot rent the block, rents() says)."""
        if isinstance(days, int | float):
            return self._billed(float(days))
        # lazy: numpy only for the grid search's arrays; evaluate itself never loads it
        import numpy as np

        x = np.maximum(days, self.min_days) if self.min_days > 0 else days
        if self.by_use:
            return x
        if not self.steps:
            return np.where(self.rents(x), x, np.inf)
        y = x * (1 - LENGTH_TOL)
        out = np.full(np.shape(y), np.inf)
        start, left = 0.0, np.ones(np.shape(y), dtype=bool)
        for up_to, step in self.steps:  # each stretch as _rounded
            here = left & (y <= up_to)
            out = np.where(here, start + np.ceil((y - start) / step) * step, out)
            left &= ~here
            start = up_to
        return np.where(self.rents(x), out, np.inf)

    def _billed(self, days: float) -> float:
        return self._rounded(max(days, self.min_days))

    def _rounded(self, days: float) -> float:
        if self.by_use:
            return days
        x = days * (1 - LENGTH_TOL)
        if self.max_days is not None and x > self.max_days:
            return math.inf
        if not self.steps:
            return days
        start = 0.0
        for up_to, step in self.steps:
            if x <= up_to:
                return start + math.ceil((x - start) / step) * step
            start = up_to
        return math.inf

    def lengths_to(self, top: float) -> list[float]:
        """The reservation lengths in order, up to the first at or above ``top`` days (the
        longest, past it)."""
        out: list[float] = []
        start = 0.0
        for up_to, step in self.steps:
            length = start
            while length < up_to and (not out or out[-1] < top):
                length += step
                out.append(length)
            start = up_to
        return [d for d in out if self.max_days is None or d <= self.max_days]

    def lengths(self) -> str:
        """The lengths in words: "1-day increments up to 14 days, then 7-day increments up
        to 182 days" ("" when billed by use)."""
        parts = []
        for up_to, step in self.steps:
            end = "" if math.isinf(up_to) else f" up to {up_to:,.0f} days"
            parts.append(f"{step}-day increments{end}")
        said = ", then ".join(parts)
        if self.max_days is not None and not any(u == self.max_days for u, _ in self.steps):
            said += f", at most {self.max_days:,.0f} days"
        return said


@dataclass(frozen=True)
class Rental:
    """What a rented plan of one GPU type pays: ``usd_per_gpu_hour`` for its billed days
    (``billing``) under the term named ``term``; ``block_price``: the rate is its block's
    own published price."""

    term: str
    usd_per_gpu_hour: float
    billing: Billing = Billing()
    block_price: bool = False

    def cost(self, num_gpus: Any, days: Any) -> Any:
        """USD for ``num_gpus`` over a job of ``days`` (numpy arrays too), in the order
        of models.evaluate.cloud_usd: GPUs x billed days x 24 x the rate."""
        return num_gpus * self.billing.billed_days(days) * HOURS_PER_DAY * self.usd_per_gpu_hour


def block_price_scale(gpu: GPUSpec) -> float:
    """The question's on-demand price of ``gpu`` over the shipped catalog's: a question
    that prices the GPU otherwise (breakeven's bisection, a sweep's price_scale, a
    --catalog override) moves its block's own price with it, so every rate it rents at
    moves together (breakeven bisected a price that no on-demand plan paid, and reported
    1,000 times the catalog's). 1.0 for a GPU type the shipped catalog lacks."""
    shipped = shipped_on_demand_usd_per_gpu_hour(gpu.name)
    if not shipped:
        return 1.0
    return gpu.cloud_usd_per_gpu_hour / shipped


def rental(gpu: GPUSpec, term: CloudTerm) -> Rental:
    """``gpu`` (the question's spec: its on-demand price) rented under ``term`` (module
    docstring: the rate and the billed days)."""
    offers = cloud_offers()
    on_demand = term.min_days <= 0
    own = offers.block_usd_per_gpu_hour(gpu.name) if on_demand else None
    if own is not None:
        rate = own * block_price_scale(gpu)
    else:
        rate = gpu.cloud_usd_per_gpu_hour * term.price_factor
    block = offers.block_billing(gpu.name) if on_demand else None
    billing = Billing(term.min_days)
    if block is not None:
        billing = Billing(term.min_days, block.steps(), block.max_days)
    return Rental(term.name, rate, billing, own is not None)


def by_the_hour(gpu: GPUSpec) -> Rental:
    """``gpu`` rented by the hour at its catalog price, without terms or blocks (a question
    with Scenario.cloud_terms off)."""
    return Rental("by the hour", gpu.cloud_usd_per_gpu_hour)


def cheapest_rental(gpu: GPUSpec, num_gpus: int, days: float) -> Rental:
    """The term that bills ``num_gpus`` of ``gpu`` for a job of ``days`` the least, among
    those that can rent it (on demand, the block's longest reservation): what optimize
    bills the plan, which for a plan's days and GPUs picks the cheapest term (the terms'
    plans of one layout tie on time). On demand first on a tie."""
    rentals = [rental(gpu, t) for t in cloud_offers().terms]
    fits = [r for r in rentals if r.billing.rents(days)] or rentals
    return min(fits, key=lambda r: r.cost(num_gpus, days))


def rental_words(r: Rental, days: float) -> str:
    """How ``r`` bills a job of ``days``: "paid for 10 days (reserved in 1-day increments up
    to 14 days, then 7-day increments up to 182 days; the job takes 9.5)"."""
    billed = r.billing.billed_days(days)
    notes = []
    if r.billing.steps:
        notes.append(f"reserved in {r.billing.lengths()}")
    if r.billing.min_days > days:
        notes.append("the term's minimum")
    if billed > days * (1 + LENGTH_TOL):
        notes.append(f"the job takes {days:,.1f}")
    return f"paid for {billed:,.1f} days" + (f" ({'; '.join(notes)})" if notes else "")
