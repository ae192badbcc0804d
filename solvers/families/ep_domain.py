"""ep_domain: the expert-parallel group fits the groups Megatron-Core folds it into.

Megatron-Core's parallel folding (Liu et al. 2025, arXiv 2504.14960;
``parallel_state.initialize_model_parallel``) re-folds each pipeline stage's
TP x CP x DP ranks into ETP x EP x expert-DP, so EP x ETP must divide TP x CP x DP
(models.memory.expert_data_parallel; EP dividing the experts is the decision space's,
solvers.space.expert_options). For a shape that is a rule on the DP degree: d a
multiple of ``Shape.dp_step``. Active for mixture-of-experts questions only (a dense
question's decision space is unchanged). Switching it off (``--ignore ep_domain``, the
explanation's relaxation) changes no answer: Megatron-Core runs no other folding, so
both solvers keep d a multiple of the step whatever the families say (CP-SAT's
solvers/cpsat_model.py, the exhaustive solver's enumeration), as they keep whole
purchase units; the family names the rule and reports where the EP group lies.

Its slack reports where the EP group lies: inside one scale-up domain, or across
several, where the token dispatch crosses the NICs (then nic_slots prices one more NIC
per server). Which domain the group may span is the step time's business
(models/expert.py), not a rule of this family."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solvers.families.base import Fix, FixSearch, Grid, Rule, violation

if TYPE_CHECKING:
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat_context import BuildContext
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario


def ep_domains(plan: Plan, s: Scenario) -> int:
    """Scale-up domains one EP group spans (its members ETP apart)."""
    from models.expert import ep_ranks_in_domain

    shape = plan.config.shape
    gpu = s.catalog.gpu(shape.gpu)
    return -(-shape.ep // ep_ranks_in_domain(gpu, shape.experts))


class EpDomain(Rule):
    enumerated = True  # the exhaustive solver's DP degrees are multiples of Shape.dp_step

    def active(self, s: Scenario) -> bool:
        return s.spec.is_moe and super().active(s)

    def encode(self, ctx: BuildContext) -> None:
        from solvers.cpsat_expert import add_folding

        add_folding(ctx, ctx.enforce[self.name])

    def admits(self, s: Scenario, grid: Grid) -> Any:
        return grid.dps % grid.cand.shape.dp_step == 0

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        shape = config.shape
        group = shape.tp * shape.cp * config.dp
        if group % (shape.ep * shape.etp) == 0:
            return None
        return violation(
            self.name,
            f"EP {shape.ep} x ETP {shape.etp} does not divide TP x CP x DP = {group}",
        )

    def slack(self, s: Scenario, plan: Plan) -> tuple[float | None, str, str]:
        shape = plan.config.shape
        group = shape.tp * shape.cp * plan.config.dp
        where = ep_domains(plan, s)
        spans = (
            "one scale-up domain"
            if where <= 1
            else f"{where} scale-up domains: EP traffic crosses the NICs"
        )
        return (
            None,
            "",
            f"EP {shape.ep} x ETP {shape.etp} of TP x CP x DP {group}; the EP group in {spans}",
        )

    def smallest_fix(self, s: Scenario, search: FixSearch) -> Fix | None:
        return None  # switching it off admits no other plan (module docstring)


FAMILY = EpDomain("ep_domain", 35, "off: changes nothing, Megatron-Core folds no other way")
