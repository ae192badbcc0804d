"""max_gpus: at most the overall GPU cap and each type's availability (Scenario.gpu_cap)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
        return s.with_gpu_caps_scaled(1.1)

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
        return allowed - used, "GPUs", f"{used:,} of {allowed:,} {gpu} GPUs allowed"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        if not s.gpu_caps and s.max_gpus is not None:  # one overall cap: the exact count
            return count_fix(search, self.name, "max_gpus", s.max_gpus, "GPUs", GPU_CAP)
        factor = bisect(lambda v: search.ok(s.with_gpu_caps_scaled(v)), 1.0, 2.0**20, False)
        if factor is None:
            return None
        return Fix(
            self.name,
            f"raise the GPU caps by {100 * (factor - 1):.0f}%",
            s.with_gpu_caps_scaled(factor),
        )


def _cap(s: Scenario, gpu: str) -> int | None:
    """The question's cap on ``gpu`` (Scenario.gpu_cap), read from the caps it derived when
    it was built: a type its ``gpu_caps`` do not name has the overall cap."""
    return s.gpu_cap_by_type.get(gpu, s.max_gpus)


# the overall cap; gpu_caps adds a cap per GPU type (availability)
FAMILY = MaxGpus("max_gpus", 110, "GPU caps +10%", field="max_gpus")
