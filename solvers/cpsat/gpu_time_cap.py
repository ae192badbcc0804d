"""The cost's rates per GPU-time unit in the CP-SAT model, and the most GPU-time per
sequence a plan within the budget (or the incumbent's cost cap) can take.

Every priced cost is at least a least rate times the GPU-time per sequence G x T'
(solvers/cpsat/cost.py charges it so): TCO with a lifetime sigma / 1024 x q x G T' with
q >= q_lo the per-GPU weight of capex and power (solvers/screen/bounds.py least_per_gpu, ctx.least_per_gpu), TCO
without one at least the energy eps x W x G T' with W >= p_lo watts per GPU, cloud rent
the hourly price x G T'. So G T' <= cap / least rate on every plan that matters: the cost
bounds its product's range with it, and goodput (solvers/cpsat/goodput.py) the range of the
restart term's G x G T', whose rounding is in steps of 2^-40 of its upper end (with G T'
at its widest instead, 1.6% of the term on tests/test_cpsat_model.py's seed-44 question)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from models.cost import pue_milli
from models.evaluate import cloud_usd
from models.units import HOURS_PER_DAY
from solvers.cpsat.context import BuildContext, gpu_days_per_unit
from solvers.intmath import down


@dataclass(frozen=True)
class TcoRates:
    """TCO in cents per GPU-time unit: energy eps x W, the capex share sigma x capex / G
    (None: no lifetime), kappa = 1024 eps / sigma rounded up; q_lo and p_lo the least
    per-GPU weight (1024 x cents + kappa x W) and watts; cap the cost cap in cents."""

    eps: float
    sigma: float | None
    kappa: int
    q_lo: int
    p_lo: int
    cap: float | None


def tco_rates(ctx: BuildContext) -> TcoRates:
    """The question's TCO rates, computed once per build (after the time part, whose unit
    and GPU-time scale they read) and kept on the context."""
    if ctx.tco is None:
        ctx.tco = _tco_rates(ctx)
    return ctx.tco


def _tco_rates(ctx: BuildContext) -> TcoRates:
    s = ctx.scenario
    fac = s.catalog.facility
    days_per_unit = gpu_days_per_unit(ctx)
    eps = (
        (pue_milli(fac) / 1000.0 * fac.power_draw_fraction * days_per_unit * HOURS_PER_DAY / 1000.0)
        * fac.usd_per_kwh
        * 100.0
    )
    cap: float | None = None
    if "budget" in ctx.enforce:  # the active families (solvers.families.active)
        cap = s.budget * 100.0
    if ctx.cost_cap_usd is not None:
        cap = min(cap if cap is not None else math.inf, ctx.cost_cap_usd * 100.0)
    per_gpu = ctx.least_per_gpu  # set by the model before the time and the cost
    p_lo = max(1, math.floor(min(w for _, w in per_gpu)))
    if fac.lifetime_years is None:
        return TcoRates(eps, None, 0, 0, p_lo, cap)
    sigma = days_per_unit / (365.0 * fac.lifetime_years)  # capex share per GPU-time unit
    kappa = math.ceil(1024 * eps / sigma)  # 1024 x cents per W, rounded up
    q_lo = max(1, math.floor(min(1024 * 100 * usd + kappa * w for usd, w in per_gpu)))
    return TcoRates(eps, sigma, kappa, q_lo, p_lo, cap)


def cloud_cents_per_unit(ctx: BuildContext) -> dict[str, float]:
    """Cloud rent in cents per GPU-time unit, per GPU type (the on-demand price), computed
    once per build and kept on the context (``ctx.coef``)."""
    if not ctx.coef:
        days = gpu_days_per_unit(ctx)
        ctx.coef = {g: cloud_usd(1, days, ctx.gpus[g]) * 100 for g in ctx.gpu_names}
    return ctx.coef


def gpu_time_cap(ctx: BuildContext) -> int | None:
    """The most GPU-time per sequence (units of ``ctx.gpu_time``) any plan within the budget
    or the cost cap has, as the cost (solvers/cpsat/cost.py) enforces it; None: unbounded."""
    s = ctx.scenario
    if s.pricing == "cloud":
        if "budget" not in ctx.enforce:
            return None
        return down(s.budget * 100 / min(cloud_cents_per_unit(ctx).values()))
    if s.pricing != "tco" or not (s.objective == "cost" or "budget" in ctx.enforce):
        return None
    r = tco_rates(ctx)
    if r.cap is None:
        return None
    if r.sigma is None:
        return down(r.cap / (r.eps * r.p_lo)) if r.eps > 0 else None
    return down(r.cap * 1024 / (r.sigma * r.q_lo))
