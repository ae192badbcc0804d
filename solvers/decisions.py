"""What a solver decides and answers: the shape (hardware and layout choices fixed before
the search), the configuration (the shape plus DP degree, micro-batches per step, NICs and
purchases) and the plan (a configuration re-evaluated by the float model).

The bottom of solvers/ (issue 32: shared types on a bottom floor): it imports only models/,
solvers/intmath.py and solvers/purchases.py's column names, so that every module of the
solver stack can build and read these without importing the space or the plan builder
(solvers/space.py enumerates shapes, solvers/plan.py builds plans)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from models.evaluate import Evaluation
from models.expert import ExpertLayout
from models.feasibility import Violation
from models.layout import Layout
from models.pipeline import EVEN, Split
from solvers.intmath import expert_folding_step
from solvers.purchases import purchase_columns


def question_experts(ep: int, etp: int, dispatcher: str) -> ExpertLayout:
    """A MoE shape's expert layout under a question: its EP and ETP and the question's
    dispatcher (Scenario.dispatcher: "deepep" dispatches per scale-up domain); the other
    mechanisms at their defaults."""
    return ExpertLayout(ep, etp, dispatch_per_domain=dispatcher == "deepep")


class Shape(NamedTuple):
    """A tuple (cheap to create: the space has tens of thousands), ordered field by field."""

    gpu: str
    tp: int
    cp: int
    pp: int
    vp: int
    micro_batch: int
    recompute: str
    precision: str
    split: Split = EVEN  # Megatron-LM's pipeline split (models.pipeline)
    ep: int = 1  # expert parallelism (mixture-of-experts models only; models/expert.py)
    etp: int = 1  # expert tensor parallelism

    @property
    def replica_gpus(self) -> int:
        return self.tp * self.cp * self.pp

    @property
    def dp_step(self) -> int:
        """The DP degrees Megatron-Core's folding allows are the multiples of this: EP x ETP
        divides TP x CP x DP (solvers.intmath.expert_folding_step); 1 for a dense model."""
        return expert_folding_step(self.tp, self.cp, self.ep, self.etp)

    @property
    def experts(self) -> ExpertLayout:
        """The shape's EP and ETP alone (what the families read); its step is priced with
        the question's dispatcher too (``question_experts``)."""
        return ExpertLayout(self.ep, self.etp)

    def probe_layout(self) -> Layout:
        """A layout of the shape at its smallest DP degree and full pipelines (m = p), for
        the coefficients and memory terms that do not depend on d and m."""
        return self.layout(self.dp_step, max(1, self.pp))

    def layout(self, dp: int, microbatches: int) -> Layout:
        first, last, emb, loss = self.split
        return Layout(
            tp=self.tp,
            pp=self.pp,
            dp=dp,
            cp=self.cp,
            vp=self.vp,
            micro_batch=self.micro_batch,
            global_batch=self.micro_batch * microbatches * dp,
            recompute=self.recompute,
            sequence_parallel=None,
            zero=1,
            precision=self.precision,
            first_stage_layers=first or None,
            last_stage_layers=last or None,
            embedding_in_split=emb,
            loss_in_split=loss,
        )


@dataclass(frozen=True)
class Config:
    """What a solver decides: a shape plus DP degree, micro-batches per step and NICs."""

    shape: Shape
    nic: str
    nics_per_node: int
    dp: int
    microbatches: int
    # issue 18 item 4 (solvers/purchases.py): hot spares per 100 servers and checkpoint
    # storage GB/s per server bought; None: the facility's storage (nothing bought)
    spares_per_100: float = 0.0
    storage_gb_per_s: float | None = None


@dataclass(frozen=True)
class Plan:
    config: Config
    evaluation: Evaluation
    violations: tuple[Violation, ...]  # everything violated, evaluator and scenario limits
    objective: float  # days (time) or USD (cost)

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def cost_usd(self) -> float:
        return self.evaluation.extra["cost_usd"]

    @property
    def num_gpus(self) -> int:
        return self.evaluation.layout.num_gpus

    def as_dict(self, rank: int) -> dict[str, Any]:
        ev, lay, cfg = self.evaluation, self.evaluation.layout, self.config
        return {
            "rank": rank,
            "gpu": ev.gpu,
            "num_gpus": lay.num_gpus,
            "nodes": ev.nodes,
            "gpus_per_node": ev.extra["gpus_per_node"],
            "tp": lay.tp,
            "pp": lay.pp,
            "dp": lay.dp,
            "cp": lay.cp,
            "vp": lay.vp,
            "ep": ev.ep,
            "etp": ev.etp,
            "micro_batch": lay.micro_batch,
            "grad_accum": cfg.microbatches,
            "global_batch": lay.global_batch,
            "recompute": lay.recompute,
            "sequence_parallel": lay.sp,
            "zero": lay.zero,
            "precision": lay.precision,
            "nic": cfg.nic,
            "nics_per_node": cfg.nics_per_node,
            "memory_gb_per_gpu": ev.memory.total,
            "step_time_s": ev.step_time_s,
            "time_to_train_days": ev.time_to_train_days,
            "cost_usd": self.cost_usd,
            "mfu": ev.mfu,
            "first_stage_layers": lay.first_stage_layers,
            "last_stage_layers": lay.last_stage_layers,
            "embedding_in_split": lay.embedding_in_split,
            "loss_in_split": lay.loss_in_split,
            **ev.goodput_dict(),
            **purchase_columns(ev, cfg),
            "cloud_term": ev.extra.get("cloud_term"),
            "effective_tokens": ev.tokens,
            "critical_batch_tokens": ev.extra.get("critical_batch_tokens"),
            "dispatcher": ev.extra.get("dispatcher"),
        }
