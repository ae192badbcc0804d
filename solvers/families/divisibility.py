"""divisibility: Megatron-LM's shape rules (models/feasibility.py divisibility_violations)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from models.feasibility import divisibility_violations
from solvers.families.base import ShapeRule

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from solvers.plan import Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape


class Divisibility(ShapeRule):
    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        probe = shape.layout(1, max(1, shape.pp))
        return bool(divisibility_violations(s.spec, probe, s.seq_len))

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        return None, "", "layers, heads and batch split as Megatron allows"


FAMILY = Divisibility("divisibility", 40, "splits Megatron refuses allowed")
