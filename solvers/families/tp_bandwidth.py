"""tp_bandwidth: TP at most 3h x scale-up bandwidth / peak FLOP/s (models/scaleup.py tp_limit).

A shape rule, checked at enumeration (solvers/space.py) and by the performance model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.feasibility import TOL
from models.scaleup import tp_limit
from solvers.families.base import ShapeRule

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape


class TpBandwidth(ShapeRule):
    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        return (
            shape.tp > 1
            and shape.tp > tp_limit(s.spec.hidden, gpu, shape.tp, shape.precision)[0] + TOL
        )

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        lay = plan.evaluation.layout
        gpu = s.catalog.gpu(plan.config.shape.gpu)
        limit = tp_limit(s.spec.hidden, gpu, lay.tp, lay.precision)[0]
        return limit - lay.tp, "TP degree", f"TP {lay.tp} of limit {limit:.2f} (3h x bw / peak)"


FAMILY = TpBandwidth("tp_bandwidth", 20, "TP bandwidth rule off")
