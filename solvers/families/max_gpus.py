"""max_gpus: at most the overall GPU cap and each type's availability (Scenario.gpu_cap)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from catalog.cloud import cloud_offers
from solvers.families.base import Family, Fix, FixSearch, Grid, bisect, count_fix, violation
from solvers.scenario import GPU_CAP

if TYPE_CHECKING:
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario


class MaxGpus(Family):
    enumerated = True  # solvers/exhaustive.py dp_upper

    def active(self, s: Scenario) -> bool:
        return self.name not in s.disabled and (s.max_gpus is not None or bool(s.gpu_caps))

    def relax(self, s: Scenario) -> Scenario:
        """Every cap +10% or one purchase unit more, whichever is more (caps_stepped)."""
        return caps_stepped(s)

    def relaxation_in(self, s: Scenario) -> str:
        """The step in words: +10% only where 10% buys at least one purchase unit."""
        caps = _caps_with_units(s)
        by_unit = [_step(cap, unit) > _pct_step(cap) for cap, unit in caps]
        if not any(by_unit):
            return self.relaxation
        sizes = {u for _, u in caps}
        size = f"{max(sizes):,} GPUs" if len(sizes) == 1 else f"up to {max(sizes):,} GPUs"
        if all(by_unit):
            return f"GPU caps + one purchase unit ({size})"
        return f"GPU caps +10% or one purchase unit ({size}), whichever is more"

    def encode(self, ctx: BuildContext) -> None:
        for name in ctx.gpu_names:
            cap = ctx.prepared.gpu_caps[name]
            if cap is not None:
                ctx.md.add(ctx.num_gpus <= cap).only_enforce_if(
                    [ctx.enforce[self.name], ctx.gpu_lit[name]]
                )

    def admits(self, s: Scenario, grid: Grid) -> Any:
        cap = _cap(s, grid.gpu.name)
        return True if cap is None else grid.gpus <= cap

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        cap, used = _cap(s, config.shape.gpu), ev.layout.num_gpus
        if cap is not None and used > cap:
            return violation(self.name, f"uses {used:,} GPUs, limit {cap:,}")
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        gpu, used = plan.config.shape.gpu, plan.evaluation.layout.num_gpus
        allowed = _cap(s, gpu)
        if allowed is None:
            return None, "GPUs", f"no cap on {gpu}"
        detail = f"{used:,} of {allowed:,} {gpu} GPUs allowed"
        renting = s.pricing == "cloud" and s.cloud_terms
        if renting and allowed == cloud_offers().rentable_gpus(gpu, s.cloud_max_gpus):
            detail += ", the largest rentable block"
        return allowed - used, "GPUs", detail

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        # the user's own overall cap first, the per-type caps as they are (a user's
        # --gpu-cap that does not bind, a consumer card's catalog max_cluster_gpus): the
        # exact count of --max-gpus, where scaling every cap named a percentage
        if s.max_gpus is not None:
            fix = count_fix(search, self.name, "max_gpus", s.max_gpus, OVERALL, GPU_CAP)
            if fix is not None or not s.gpu_caps:
                return fix
        # the per-type caps bind: every cap scaled (to 1%), then the least whole percentage
        factor = bisect(lambda v: search.ok(s.with_gpu_caps_scaled(v)), 1.0, 2.0**20, False)
        if factor is None:
            return None
        pct = least_pct(s, search, caps_pct(s, s.with_gpu_caps_scaled(factor)))
        return Fix(
            self.name,
            f"raise the GPU caps by {pct:,}%",
            s.with_gpu_caps_scaled(1 + pct / 100),
        )


def caps_stepped(s: Scenario) -> Scenario:
    """Every GPU cap raised by the larger of 10% and its purchase unit (a server, or an NVL72
    rack: catalog ServerSpec.purchase_unit_gpus), so that the step admits at least one more
    unit: +10% of 64 H100s (8 to a server) is 71, which buys no server more, and 144 GB200s
    (72 to a rack) +10% is 159, no rack more; both caps bound the plan, and the explanation
    called them not limiting. The overall cap steps by the largest unit of the question's
    GPU types, a type's own cap by its unit."""
    return s.with_changes(
        max_gpus=None if s.max_gpus is None else _step(s.max_gpus, _overall_unit(s)),
        gpu_caps=tuple((g, _step(c, _unit(s, g))) for g, c in s.gpu_caps),
    )


def _caps_with_units(s: Scenario) -> list[tuple[int, int]]:
    """(cap, the purchase unit it steps by) of each of the question's caps (caps_stepped)."""
    own = [(c, _unit(s, g)) for g, c in s.gpu_caps]
    return ([] if s.max_gpus is None else [(s.max_gpus, _overall_unit(s))]) + own


def _pct_step(cap: int) -> int:
    """The cap +10%, rounded up in integers (800 x 1.1 is 880.0000000000001 in floats)."""
    return -(-cap * 11 // 10)


def _step(cap: int, unit: int) -> int:
    return max(_pct_step(cap), cap + unit)


def _overall_unit(s: Scenario) -> int:
    """The overall cap's step: the largest purchase unit of the question's GPU types."""
    return max((_unit(s, g) for g in s.gpus), default=1)


def _unit(s: Scenario, gpu: str) -> int:
    """GPUs of ``gpu`` bought at once (a server, or an NVL72 rack)."""
    return s.catalog.gpu(gpu).server.purchase_unit_gpus


# what count_fix's "allow at least N ..." names: the option that sets the overall cap
OVERALL = "GPUs (--max-gpus)"


def caps_pct(s: Scenario, scaled: Scenario) -> int:
    """The least whole percentage that raises every cap of ``s`` to at least its value in
    ``scaled`` (in integers: the factor's float could name 13% where the caps it held at,
    1,000 to 1,131, need 13.1%, and a user raising 1,000 by 13% gets 1,130)."""
    pairs = [(s.max_gpus, scaled.max_gpus)] + list(
        zip([c for _, c in s.gpu_caps], [c for _, c in scaled.gpu_caps], strict=True)
    )
    return max(
        (-(-100 * (new - old) // old) for old, new in pairs if old is not None and new), default=0
    )


def least_pct(s: Scenario, search: FixSearch, pct: int) -> int:
    """The least whole percentage at or below ``pct`` (feasible: the float bisection's factor
    rounded up) that makes the question feasible: the float search stops within 1%, and
    rounding its factor up overshot by up to 2 points (the 5-day cloud question named 99%
    where 98% holds). Feasibility only grows with the caps, so whole percents from 3 below
    are bisected: at most two more solves."""
    lo, hi = max(0, pct - 3), pct
    while lo < hi:
        mid = (lo + hi) // 2
        if search.ok(s.with_gpu_caps_scaled(1 + mid / 100)):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _cap(s: Scenario, gpu: str) -> int | None:
    """The question's cap on ``gpu`` (Scenario.gpu_cap), read from the caps it derived when
    it was built: a type its ``gpu_caps`` do not name has the overall cap."""
    return s.gpu_cap_by_type.get(gpu, s.max_gpus)


# the overall cap; gpu_caps adds a cap per GPU type (availability)
FAMILY = MaxGpus("max_gpus", 110, "GPU caps +10%", field="max_gpus")
