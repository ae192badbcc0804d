"""tp_bandwidth: TP at most 3h x scale-up bandwidth / peak FLOP/s x the attention core's work x
FP8's traffic factor (models/scaleup.py model_tp_rule).

A shape rule, checked at enumeration (solvers/space.py) and by the performance model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.feasibility import TOL
from models.scaleup import model_tp_rule
from solvers.families.base import ShapeRule

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape


class TpBandwidth(ShapeRule):
    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        if shape.tp == 1:
            return False
        return (
            shape.tp > model_tp_rule(s.spec, s.seq_len, gpu, shape.tp, shape.precision).limit + TOL
        )

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        lay = plan.evaluation.layout
        gpu = s.catalog.gpu(plan.config.shape.gpu)
        rule = model_tp_rule(s.spec, s.seq_len, gpu, lay.tp, lay.precision)
        return (
            rule.limit - lay.tp,
            "TP degree",
            f"TP {lay.tp} of limit {rule.limit:.2f} (3h x bw / peak x the attention core's work"
            f"{' x FP8 traffic' if rule.traffic != 1 else ''})",
        )


FAMILY = TpBandwidth("tp_bandwidth", 20, "TP bandwidth rule off")
