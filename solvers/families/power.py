"""power: facility power (IT power x PUE, nameplate; models/cost.py facility_power_w) at
most the cap. Switches draw power, so renting's fastest-NIC dominance does not hold."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from models.feasibility import TOL
from solvers.families.base import Family, Fix, FixSearch, Grid, LeastPerGpu, bisect_fix, violation
from solvers.intmath import down

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat.context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario


class Power(Family):
    needs_cluster = True
    keeps_nic_dominance = False

    def gpu_limit(self, s: Scenario, gpu: GPUSpec, least: LeastPerGpu) -> int | None:
        """Each GPU draws at least its share of a server with one NIC (``least``: the bounds'
        least_per_gpu), times the PUE."""
        # lazy: models.cost loads numpy, which commands that never solve do not load
        from models.cost import pue_milli

        _, watts = least(s, gpu)
        facility_w = watts * pue_milli(s.catalog.facility) / 1000.0
        return math.floor(s.power_cap_w * (1 + 1e-9) / facility_w)

    def relax(self, s: Scenario) -> Scenario:
        return s.with_changes(power_cap_mw=s.power_cap_w / 1e6 * 1.1)

    def encode(self, ctx: BuildContext) -> None:
        # lazy: models.cost loads numpy, which commands that never solve do not load
        from models.cost import pue_milli

        s, cluster = ctx.scenario, ctx.cluster
        assert cluster is not None
        cap = down(s.power_cap_w * 1000.0)  # IT x PUE in thousandths
        ctx.md.add(pue_milli(s.catalog.facility) * cluster.it_power_w <= cap).only_enforce_if(
            ctx.enforce[self.name]
        )

    def admits(self, s: Scenario, grid: Grid) -> Any:
        # lazy: models.cost loads numpy, which commands that never solve do not load
        from models.cost import facility_power_w

        drawn = facility_power_w(grid.cluster.it_power_w, s.catalog.facility)
        return drawn <= s.power_cap_w * (1 + TOL)

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        drawn = ev.cluster.facility_power_w
        if drawn > s.power_cap_w * (1 + TOL):
            return violation(
                self.name, f"draws {drawn / 1e6:,.3f} MW, cap {s.power_cap_w / 1e6:,.3f} MW"
            )
        return None

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        used_mw = plan.evaluation.cluster.facility_power_w / 1e6
        cap_mw = s.power_cap_w / 1e6
        return cap_mw - used_mw, "MW", f"{used_mw:,.3f} of {cap_mw:,.3f} MW facility power"

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        cap_mw = s.power_cap_w / 1e6
        return bisect_fix(
            search,
            self.name,
            lambda v: s.with_changes(power_cap_mw=v),
            cap_mw,
            cap_mw * 1e6,
            False,
            lambda x: f"raise the power cap to {math.ceil(x * 1000) / 1000:,.3f} MW",  # kW up
            POWER_FIX_REL,
        )


POWER_FIX_REL = 1e-3
"""The power fix's bisection tolerance: the cap it names, printed to the kW, lies within
0.1% above the least cap that works (at 1% it named 1.304 to 1.310 MW for a question whose
plan draws 1.298 MW, by the cap the search started from); about three more probes."""

FAMILY = Power("power", 120, "power cap +10%", field="power_cap_mw")
