"""ep_domain: the expert-parallel group fits the groups Megatron-Core folds it into and,
where the question asks for it (``--ep-in-domain``), one scale-up domain.

Megatron-Core's parallel folding (Liu et al. 2025, arXiv 2504.14960;
``parallel_state.initialize_model_parallel``) re-folds each pipeline stage's
TP x CP x DP ranks into ETP x EP x expert-DP, so EP x ETP must divide TP x CP x DP
(models.memory.expert_data_parallel; EP dividing the experts is the decision space's,
solvers.space.expert_options). For a shape that is a rule on the DP degree: d a
multiple of ``Shape.dp_step``. Active for mixture-of-experts questions only (a dense
question's decision space is unchanged). Switching it off (``--ignore ep_domain``, the
explanation's relaxation) drops no folding: Megatron-Core runs no other, so both solvers
keep d a multiple of the step whatever the families say (CP-SAT's
solvers/cpsat/model.py, the exhaustive solver's enumeration), as they keep whole
purchase units.

The request (``Scenario.ep_in_domain``): the EP group, its members ETP ranks apart
(models.expert.ep_ranks_in_domain), lies inside one scale-up domain, so the token
dispatch and combine never cross the NICs. It depends on the GPU, EP and ETP alone: a
rule on the shape (``violated_by``; Candidate.structural), forbidden in both solvers
as the other shape rules are (CP-SAT's literal sum, the exhaustive solver's
Candidate.allowed, presolve's rule bits). Switching the family off drops the request
(the relaxation "EP across scale-up domains allowed"); without the request switching it
off changes no answer (the relaxation "off: changes nothing").

Its slack reports where the EP group lies: inside one scale-up domain, or across
several, where the token dispatch crosses the NICs (then nic_slots prices one more NIC
per server)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from solvers.families.base import (  # noqa: F401  (ep_domains: its home before base.py)
    Fix,
    FixSearch,
    Grid,
    Rule,
    ep_domains,
    shape_ep_domains,
    violation,
)

if TYPE_CHECKING:
    from catalog.specs import GPUSpec
    from models.evaluate import Evaluation
    from models.feasibility import Violation
    from solvers.cpsat.context import BuildContext, IntVar
    from solvers.plan import Config, Plan
    from solvers.scenario import Scenario
    from solvers.space import Shape

# the relaxation with the request on: the family off lets the EP group leave the domain
REQUEST_RELAXATION = "EP across scale-up domains allowed"


def add_folding(ctx: BuildContext, on: IntVar | None = None) -> None:
    """Megatron-Core's folding in CP-SAT: d a multiple of the chosen shape's ``dp_step``
    (EP x ETP divides TP x CP x DP), enforced if ``on`` (this family's literal), or always
    (solvers/cpsat/model.py; no MoE shape: nothing added)."""
    steps: dict[int, list[IntVar]] = {}
    for x, shape in zip(ctx.x, ctx.shapes, strict=True):
        if shape.dp_step > 1:
            steps.setdefault(shape.dp_step, []).append(x)
    for step, lits in sorted(steps.items()):
        chosen = ctx.md.new_bool_var(f"dp_step[{step}]")
        ctx.md.add(chosen == sum(lits))
        k = ctx.md.new_int_var(1, max(1, ctx.dp_max // step), f"dp_over_step[{step}]")
        ctx.md.add(ctx.dp == step * k).only_enforce_if([chosen] if on is None else [on, chosen])


class EpDomain(Rule):
    enumerated = True  # the exhaustive solver's DP degrees are multiples of Shape.dp_step
    # the request is a rule on the shape (Candidate.structural); the folding is on d
    shape_rule = True

    def active(self, s: Scenario) -> bool:
        return s.spec.is_moe and super().active(s)

    def relaxation_in(self, s: Scenario) -> str:
        return REQUEST_RELAXATION if s.ep_in_domain else self.relaxation

    def violated_by(self, s: Scenario, shape: Shape, gpu: GPUSpec) -> bool:
        """The request broken: the shape's EP group spans more than one scale-up domain."""
        return s.ep_in_domain and shape.ep > 1 and shape_ep_domains(shape, gpu) > 1

    def encode(self, ctx: BuildContext) -> None:
        on = ctx.enforce[self.name]
        add_folding(ctx, on)
        bad = [ctx.x[i] for i, c in enumerate(ctx.candidates) if self.name in c.structural]
        if bad:
            ctx.md.add(sum(bad) == 0).only_enforce_if(on)

    def admits(self, s: Scenario, grid: Grid) -> Any:
        if self.name in grid.cand.structural:
            return False
        return grid.dps % grid.cand.shape.dp_step == 0

    def violation(self, s: Scenario, ev: Evaluation, config: Config) -> Violation | None:
        shape = config.shape
        group = shape.tp * shape.cp * config.dp
        if group % (shape.ep * shape.etp) != 0:
            return violation(
                self.name,
                f"EP {shape.ep} x ETP {shape.etp} does not divide TP x CP x DP = {group}",
            )
        gpu = s.catalog.gpu(shape.gpu)
        if self.violated_by(s, shape, gpu):
            return violation(
                self.name,
                f"EP {shape.ep} x ETP {shape.etp} spans {shape_ep_domains(shape, gpu)} "
                f"{gpu.server.scale_up_domain_gpus}-GPU scale-up domains; --ep-in-domain "
                "keeps the EP group inside one",
            )
        return None

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
        if not s.ep_in_domain:
            return None  # switching it off admits no other plan (module docstring)
        return super().smallest_fix(s, search)


FAMILY = EpDomain("ep_domain", 35, "off: changes nothing, Megatron-Core folds no other way")
