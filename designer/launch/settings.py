"""A plan as a training job: the model, the layout and the servers it runs on.

Framework-independent: designer/launch/emit.py turns a Launch into Megatron-LM,
NeMo 2.0, torchtitan or Slurm text.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from designer.errors import Infeasible
from designer.launch.shell_text import comment_text
from designer.output import text as render
from models import Layout, TransformerSpec
from models.pipeline import stage_layers
from models.scaleup import domain_gpus

if TYPE_CHECKING:
    from solvers import Plan, Scenario


def _groups_inside_domains_or_refuse(
    lay: Layout, procs: int, nodes: int, per_server: int, domain: int
) -> None:
    """Ranks go TP fastest, then CP (Megatron-LM's order), ``procs`` to a server and the
    servers of one scale-up domain together (``domain`` GPUs: 8 in an HGX server, 72 in an
    NVL72 rack of 4-GPU trays): a TP group (a TP x CP group the plan timed inside the
    domain) must not straddle two domains, or the launch runs what the plan did not time
    (a hand-edited plan of 12 GPUs on two 6-GPU halves of HGX servers at TP 4 put ranks
    4-7 on both). TP 8 over two GB200 trays stays inside their rack's NVLink domain."""
    group = lay.tp * lay.cp if lay.tp * lay.cp <= domain else lay.tp
    in_domain = procs * max(1, domain // per_server)  # launched ranks sharing one domain
    if procs * nodes > in_domain and in_domain % group:
        name = "TP x CP" if group != lay.tp else "TP"
        raise Infeasible(
            f"the launch starts {procs} processes on each of {nodes:,} servers, {in_domain} "
            f"to a scale-up domain, so a {name} group of {group} ranks would span two domains "
            f"where the plan times it inside one; use a plan whose GPUs per domain are a "
            f"multiple of {group}"
        )


@dataclass(frozen=True)
class Launch:
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    tokens: float | None  # the tokens the launch trains (the plan's, batch-dependent)
    nodes: int
    procs_per_node: int  # GPUs (torchrun processes) used on every server
    gpu: str
    days: float | None  # predicted time to train
    summary: str  # one line on what the plan is, for a comment at the top
    step_time_s: float = 0.0  # predicted time of one optimizer step
    vendor: str = "NVIDIA"  # the GPU's maker (catalog), which decides the software fork
    # the plan's gradient bytes are bf16 (Assumptions.grad_bytes 2): the launch reduces
    # gradients in bf16 (--grad-reduce-in-bf16), Megatron's default being fp32
    grad_reduce_bf16: bool = True
    # the plan's checkpoint interval (models/goodput.py); None: the emitter's stated default
    checkpoint_minutes: float | None = None
    ep: int = 1  # expert parallelism of a mixture-of-experts plan (solvers.space.Shape)
    etp: int = 1
    # a mixture-of-experts plan's token dispatcher (the plan column): "alltoall", or
    # "deepep", Megatron-Core's flex dispatcher with its DeepEP backend
    dispatcher: str = "alltoall"

    @classmethod
    def from_plan(cls, scenario: Scenario, plan: Plan) -> Launch:
        """The plan's job. torchrun and Slurm start the same number of processes on every
        server, so a plan whose GPUs do not fill its servers evenly cannot be launched."""
        ev, lay = plan.evaluation, plan.evaluation.layout
        per_server = int(ev.extra["gpus_per_node"])
        n = lay.num_gpus
        if ev.nodes == 1:
            procs = n
        elif n % ev.nodes == 0:
            procs = n // ev.nodes
        else:
            raise Infeasible(
                f"the plan's {n:,} GPUs do not fill {ev.nodes:,} servers of {per_server} evenly, and "
                f"torchrun and Slurm start the same number of processes on every server; re-run "
                f"optimize with --max-gpus {n // per_server * per_server:,} (a multiple of {per_server})"
            )
        domain = domain_gpus(scenario.catalog.gpu(ev.gpu))
        _groups_inside_domains_or_refuse(lay, procs, ev.nodes, per_server, domain)
        days = ev.time_to_train_days
        # the tokens the plan's days train: past the critical batch, more than asked
        # (models/batch_tokens.py), so the launch runs the steps the plan was timed for
        tokens = scenario.tokens if ev.tokens is None else ev.tokens
        trained = f"{render.si(tokens)} tokens" + (
            f" ({render.si(scenario.tokens)} asked; the batch is past the critical batch)"
            if tokens > scenario.tokens * (1 + 1e-12)
            else ""
        )
        summary = (
            f"designer plan: {scenario.spec.name} on {n:,} x {ev.gpu} ({ev.nodes:,} servers x "
            f"{procs} GPUs), tp {lay.tp} pp {lay.pp} dp {lay.dp} cp {lay.cp} vp {lay.vp}, "
            + (f"ep {ev.ep} etp {ev.etp}, " if ev.moe else "")
            + f"micro-batch {lay.micro_batch}, global batch {lay.global_batch:,}; step "
            f"{ev.step_time_s:.2f} s" + (f", {days:,.1f} days for {trained}" if days else "")
        )
        return cls(
            spec=scenario.spec,
            layout=lay,
            seq_len=ev.seq_len,
            tokens=tokens,
            nodes=ev.nodes,
            procs_per_node=procs,
            gpu=ev.gpu,
            days=days,
            summary=comment_text(summary),
            step_time_s=ev.step_time_s,
            vendor=scenario.catalog.gpu(ev.gpu).vendor,
            grad_reduce_bf16=scenario.assumptions.grad_bytes <= 2.0,
            checkpoint_minutes=None if ev.goodput is None else ev.goodput.checkpoint_interval_min,
            ep=ev.ep,
            etp=ev.etp,
            dispatcher=ev.extra.get("dispatcher") or "alltoall",
        )

    @property
    def train_iters(self) -> int | None:
        """Optimizer steps for the token count (rounded up: the last step is whole)."""
        if self.tokens is None:
            return None
        return math.ceil(self.tokens / (self.layout.global_batch * self.seq_len) - 1e-9)

    @property
    def layers_per_virtual_stage(self) -> int:
        """Layers per virtual stage as Megatron-LM and torchtitan count them: the embedding
        and the loss count as one layer each when the split accounts for them."""
        lay = self.layout
        counted = self.spec.layers + int(lay.embedding_in_split) + int(lay.loss_in_split)
        return counted // (lay.pp * lay.vp)

    @property
    def stage_layers(self) -> tuple[int, ...]:
        """Transformer layers of each pipeline rank (models.pipeline.stage_layers)."""
        return stage_layers(self.spec.layers, self.layout)
