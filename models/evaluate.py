"""Evaluate one layout on one GPU type: memory, step time, throughput, time and cost.

This is the single source of truth for every number the solvers use.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from catalog.catalog import Catalog
from catalog.errors import CatalogError
from catalog.specs import Facility, GPUSpec, NICSpec, SwitchSpec
from models import flops
from models.cost import Cluster
from models.expert import (
    ExpertLayout,
    expert_memory,
    gdn_core_per_step_s,
    moe_step_coefficients,
)
from models.feasibility import Violation, check_layout
from models.goodput import FailureModel, Goodput, goodput
from models.layout import Assumptions, Layout, Network
from models.memory import MemoryBreakdown, memory_per_gpu
from models.pipeline import stage_layers
from models.rental import Billing, Rental, cheapest_rental
from models.step import (
    StepBreakdown,
    cp_ring_on_nics,
    ep_overlap_capped_s,
    step_coefficients,
    step_from_coefficients,
)
from models.transformer import TransformerSpec
from models.units import HOURS_PER_DAY, days_from_seconds


@dataclass(frozen=True)
class Hardware:
    """A GPU type with its scale-out NICs, their switch and the facility."""

    gpu: GPUSpec
    nic: NICSpec
    nics_per_node: int
    switch: SwitchSpec
    facility: Facility

    @classmethod
    def from_catalog(
        cls, catalog: Catalog, gpu: str, nic: str | None = None, nics_per_node: int | None = None
    ) -> Hardware:
        g = catalog.gpu(gpu)
        n = catalog.nic(nic) if nic else default_nic(catalog, g)
        if not catalog.nic_fits(g, n):
            raise CatalogError(nic_misfit(catalog, g, n))
        count = nics_per_node if nics_per_node is not None else max(g.server.allowed_nic_counts())
        return cls(g, n, count, catalog.switch_for(n), catalog.facility)

    def cluster(self, num_gpus: int) -> Cluster:
        return Cluster(self.gpu, self.nic, self.switch, self.facility, num_gpus, self.nics_per_node)

    @property
    def network(self) -> Network:
        return Network(self.nic.name, self.nics_per_node, self.nic.bw_gb_per_s_per_direction)


def default_nic(catalog: Catalog, gpu: GPUSpec) -> NICSpec:
    """The fastest catalog NIC the GPU's server takes (catalog.Catalog.nic_fits)."""
    fitting = catalog.nics_for(gpu)
    if not fitting:
        raise CatalogError(f"gpus.{gpu.name}: no catalog NIC fits its server; add one")
    return max(
        fitting,
        key=lambda n: (
            n.speed_gbit_per_s,
            -n.price_usd,
            catalog.fabric_of(n) == "infiniband",  # on a tie, the reference designs' fabric
            n.name,
        ),
    )


def nic_misfit(catalog: Catalog, gpu: GPUSpec, nic: NICSpec) -> str:
    """Why ``gpu``'s server cannot take ``nic``, and what it takes."""
    takes = ", ".join(n.name for n in catalog.nics_for(gpu)) or "none in the catalog"
    if gpu.server.nics is not None:
        why = f"{gpu.name} servers ship only with {', '.join(gpu.server.nics)}"
    elif nic.integrated:
        why = f"{nic.name} are ports built into another accelerator"
    else:
        why = (
            f"{nic.name} needs PCIe Gen {nic.pcie_gen} and {gpu.name} servers have "
            f"Gen {gpu.host_pcie_gen} slots"
        )
    return f"NIC {nic.name} does not fit: {why}; choose one of {takes}"


def nodes_for(num_gpus: int, gpu: GPUSpec) -> int:
    return math.ceil(num_gpus / gpu.server.gpus_per_server)


def cloud_usd(num_gpus: Any, days: Any, gpu: GPUSpec) -> Any:
    """GPU-hours x the GPU's hourly price, by use (the bounds' and the CP-SAT model's rate
    per GPU-time; a rented plan's bill, with its term's rate and billed days, is
    models.rental.Rental.cost; ``num_gpus`` and ``days`` may be numpy arrays)."""
    return num_gpus * days * HOURS_PER_DAY * gpu.cloud_usd_per_gpu_hour


def billed_days(days: Any, min_days: float) -> Any:
    """The days a plan rented under a term of ``min_days`` pays for, billed by use:
    max(days, ``min_days``), a reservation being paid in full however soon the job ends
    (models.rental.Billing, which also rounds to a block's reservation lengths; ``days``
    may be a numpy array)."""
    return Billing(min_days).billed_days(days)


@dataclass(frozen=True)
class Evaluation:
    model: str
    gpu: str
    layout: Layout
    seq_len: int
    nic: str
    nics_per_node: int
    nodes: int
    memory: MemoryBreakdown
    breakdown: StepBreakdown
    violations: list[Violation]
    model_flops_per_step: float
    peak_tflops: float
    tokens: float | None
    cluster: Cluster
    cloud_per_day: float
    params: float
    extra: dict[str, Any] = field(default_factory=dict)
    stage_layers: tuple[int, ...] = ()  # transformer layers per pipeline rank (models.pipeline)
    ep: int = 1  # expert-parallel degree (models/expert.py; 1 for a dense model)
    etp: int = 1  # expert tensor-parallel degree
    moe: bool = False  # a mixture-of-experts model (its text shows EP, ETP and ep_comm)
    moe_plan: tuple[str, ...] = ()  # the MoE mechanisms in effect (ExpertLayout.described)
    # failures, checkpoints and restarts (models/goodput.py); None: the ideal run
    failure_model: FailureModel | None = None
    # ring attention across servers, per step (models.step.cp_ring_on_nics); None: none
    cp_ring: dict[str, float] | None = None
    # what renting it pays (models/rental.py): its term's, where a solve rented it under one
    # (solvers/plan.py), else None: the term that bills it the least (rented)
    rental: Rental | None = None

    @property
    def feasible(self) -> bool:
        return not self.violations

    @property
    def step_time_s(self) -> float:
        return self.breakdown.total

    @property
    def tokens_per_s(self) -> float:
        return self.layout.global_batch * self.seq_len / self.step_time_s

    @property
    def model_tflops_per_gpu(self) -> float:
        return self.model_flops_per_step / self.step_time_s / self.layout.num_gpus / 1e12

    @property
    def mfu(self) -> float:
        return self.model_tflops_per_gpu / self.peak_tflops

    @property
    def ideal_time_days(self) -> float | None:
        """Days to train if nothing ever failed (tokens / throughput)."""
        if self.tokens is None:
            return None
        return days_from_seconds(self.tokens / self.tokens_per_s)

    @property
    def goodput(self) -> Goodput | None:
        """The expected run with failures, checkpoints and restarts (None: ideal)."""
        ideal = self.ideal_time_days
        if ideal is None or self.failure_model is None:
            return None
        return goodput(self.failure_model, self.layout.num_gpus, ideal)

    @property
    def time_to_train_days(self) -> float | None:
        """Expected wall days: the ideal time plus checkpoint blocking, lost work and
        restarts (models/goodput.py), or the ideal time without a failure model."""
        run = self.goodput
        return self.ideal_time_days if run is None else run.days

    def goodput_dict(self) -> dict[str, Any]:
        """The plan's goodput fields (null without tokens; 1 and 0 failures when ideal)."""
        run, ideal = self.goodput, self.ideal_time_days
        if run is None:
            ideal_only = ideal is not None
            return {
                "ideal_time_days": ideal,
                "goodput": 1.0 if ideal_only else None,
                "failures_expected": 0.0 if ideal_only else None,
                "checkpoint_interval_min": None,
            }
        return {
            "ideal_time_days": ideal,
            "goodput": run.goodput,
            "failures_expected": run.failures_expected,
            "checkpoint_interval_min": run.checkpoint_interval_min,
        }

    @property
    def training_flops_6nd(self) -> float | None:
        """Seed E1: 6 x parameters x tokens (null without tokens)."""
        return None if self.tokens is None else flops.training_flops_6nd(self.params, self.tokens)

    @property
    def unpurchased_failure_model(self) -> FailureModel | None:
        """The failure model before the hot spares and storage a plan buys
        (solvers/purchases.py keeps it in ``extra``); the plan's own when it buys none."""
        return self.extra.get("failure_model_before_purchases", self.failure_model)

    @property
    def rented_days(self) -> float | None:
        """The days a rented run takes: a rented plan keeps no hot spares and the facility's
        storage (solvers/purchases.py), so its failures are those before the purchases a
        capex plan makes (unpurchased_failure_model; None without tokens).
        evaluate --hot-spares 5 billed a rented plan 10 days where optimize bills 11."""
        model = self.unpurchased_failure_model
        ideal = self.ideal_time_days
        if ideal is None or model is None:
            return ideal
        return goodput(model, self.layout.num_gpus, ideal).days

    def rented(self) -> Rental | None:
        """What renting the plan pays (models/rental.py): ``rental`` where a solve set it,
        else the term that bills its days (rented_days) the least (None without tokens)."""
        days = self.rented_days
        if self.rental is not None or days is None:
            return self.rental
        return cheapest_rental(self.cluster.gpu, self.layout.num_gpus, float(days))

    @property
    def cloud_cost(self) -> float | None:
        """The plan's rent (models/rental.py: its term's rate for its billed days), the one
        cloud price evaluate, optimize and the exports show."""
        days, paid = self.rented_days, self.rented()
        return (
            None if days is None or paid is None else float(paid.cost(self.layout.num_gpus, days))
        )

    def rental_dict(self) -> dict[str, Any] | None:
        """How the cloud cost is billed (models/rental.py): the term, its rate and the days
        paid (null without tokens)."""
        days, paid = self.rented_days, self.rented()
        if days is None or paid is None:
            return None
        return {
            "term": paid.term,
            "usd_per_gpu_hour": paid.usd_per_gpu_hour,
            "block_price": paid.block_price,
            "billed_days": float(paid.billing.billed_days(float(days))),
        }

    @property
    def capex(self) -> float:
        """The bill of materials' total (models/cost.py)."""
        return self.cluster.capex_usd

    @property
    def tco_cost(self) -> float | None:
        """Capex (or its lifetime share) plus energy over the training time."""
        days = self.time_to_train_days
        return None if days is None else float(self.cluster.tco_usd(float(days)))

    @property
    def energy_cost(self) -> float | None:
        days = self.time_to_train_days
        return None if days is None else float(self.cluster.energy_usd(float(days)))

    def power_dict(self) -> dict[str, Any]:
        c = self.cluster
        fabric = c.fabric
        return {
            "it_kw": c.it_power_w / 1000.0,
            "facility_kw": c.facility_power_w / 1000.0,
            "racks": c.racks,
            "fabric_tiers": fabric.tiers,
            "switches": fabric.switches,
            "links": fabric.links,
        }

    def as_dict(self) -> dict[str, Any]:
        lay = self.layout
        return {
            "model": self.model,
            "gpu": self.gpu,
            "num_gpus": lay.num_gpus,
            "nodes": self.nodes,
            "ep": self.ep,
            "etp": self.etp,
            "layout": {
                **lay.as_dict(self.seq_len),
                "ep": self.ep,
                "etp": self.etp,
                "nic": self.nic,
                "nics_per_node": self.nics_per_node,
            },
            "stage_layers": list(self.stage_layers),
            **({"moe_plan": list(self.moe_plan)} if self.moe else {}),
            **({"cp_ring_nics": self.cp_ring} if self.cp_ring else {}),
            "feasible": self.feasible,
            "violations": [v.as_dict() for v in self.violations],
            "memory_gb": self.memory.as_dict(),
            "step_time_s": self.step_time_s,
            "breakdown_s": self.breakdown.as_dict(),
            "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "mfu": self.mfu,
            "tokens_per_s": self.tokens_per_s,
            "time_to_train_days": self.time_to_train_days,
            **self.goodput_dict(),
            "training_flops_6nd": self.training_flops_6nd,
            "cost_usd": {
                "capex": self.capex,
                "cloud": self.cloud_cost,
                "tco": self.tco_cost,
                "energy": self.energy_cost,
            },
            "cloud_rental": self.rental_dict(),
            "power": self.power_dict(),
        }


def with_profile(a: Assumptions, gpu: GPUSpec) -> Assumptions:
    """The assumptions a GPU's stack profile implies: FlashAttention when the profile
    runs attention as FlashAttention (``attention_efficiency`` set), and how its ZeRO-3 /
    FSDP holds gradients and parameters across a step's micro-batches (the profile's
    zero3_microbatch_grad_reduce_bytes and zero3_pp_unsharded_params, which the memory
    model reads: models.memory.zero3_kept_bytes)."""
    cal = gpu.calibration
    want = {
        "flash_attention": cal.flash_attention,
        "zero3_microbatch_grad_reduce_bytes": cal.zero3_microbatch_grad_reduce_bytes,
        "zero3_pp_unsharded_params": cal.zero3_pp_unsharded_params,
    }
    update = {k: v for k, v in want.items() if getattr(a, k) != v}
    return a.model_copy(update=update) if update else a


def moe_plan_described(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    gpu: GPUSpec,
    ex: ExpertLayout,
    capped_s: float = 0.0,
) -> tuple[str, ...]:
    """evaluate's ``moe`` line: the plan's MoE mechanisms in words, the share of the
    all-to-alls an overlap hides (ExpertLayout.hidden_share), the seconds of them a step
    that outlast the compute they overlap (``capped_s``: models.step.ep_overlap_capped_s)
    and a linear-attention model's Gated DeltaNet core as measured, in seconds a step
    (models.expert)."""
    if not spec.is_moe:
        return ()
    out = ex.described()
    if ex.ep_overlap > 0 and not ex.dualpipe:
        out += (
            f"{ex.hidden_share(layout):.0%} of the all-to-alls hidden (the schedule's "
            "warm-up forwards and cool-down backwards run alone)",
        )
    if capped_s > 0:
        out += (
            f"{capped_s:.3g} s a step of the overlapped all-to-alls outlast the compute "
            "beside them (exposed)",
        )
    core_s = gdn_core_per_step_s(spec, layout, seq_len, gpu, ex)
    if core_s > 0:
        out += (
            f"Gated DeltaNet core {core_s:.3g} s a step (measured kernels, bench/gdn_kernels.py)",
        )
    return out


def evaluate(
    spec: TransformerSpec,
    hw: Hardware,
    layout: Layout,
    seq_len: int | None = None,
    tokens: float | None = None,
    assumptions: Assumptions | None = None,
    experts: ExpertLayout | None = None,
    failures: FailureModel | None = None,
) -> Evaluation:
    """Analyse one layout like a dry run of a training launch. A mixture-of-experts (or
    latent-attention / MTP) model runs with ``experts``' EP and ETP (models/expert.py);
    a dense model ignores them (and is evaluated exactly as before them)."""
    a = with_profile(assumptions or Assumptions(), hw.gpu)
    s = seq_len or spec.seq_len
    peak = hw.gpu.peak_tflops(layout.precision)
    if peak is None:
        raise ValueError(f"{hw.gpu.name} does not support {layout.precision}")
    ex = experts or ExpertLayout()
    if spec.is_dense:
        ex = ExpertLayout()
        mem = memory_per_gpu(spec, layout, s, hw.gpu.memory_gb, a)
        coeffs = step_coefficients(spec, layout, s, hw.gpu, hw.network, a)
        per_token = flops.model_flops_per_token(spec, s)
    else:
        mem = expert_memory(spec, layout, s, hw.gpu.memory_gb, a, ex).memory
        coeffs = moe_step_coefficients(spec, layout, ex, s, hw.gpu, hw.network, a)
        per_token = flops.moe_model_flops_per_token(spec, s)
    net = hw.network.node_bw_gb_per_s
    brk = step_from_coefficients(coeffs, layout.dp, layout.grad_accum, net, a.dp_overlap)
    violations = check_layout(spec, layout, s, hw.gpu, mem, hw.nics_per_node, a)
    model_flops = per_token * layout.global_batch * s
    return Evaluation(
        model=spec.name,
        gpu=hw.gpu.name,
        layout=layout,
        seq_len=s,
        nic=hw.nic.name,
        nics_per_node=hw.nics_per_node,
        nodes=nodes_for(layout.num_gpus, hw.gpu),
        memory=mem,
        breakdown=brk,
        violations=violations,
        model_flops_per_step=model_flops,
        peak_tflops=peak,
        tokens=tokens,
        cluster=hw.cluster(layout.num_gpus),
        cloud_per_day=cloud_usd(layout.num_gpus, 1.0, hw.gpu),
        params=float(spec.params()),
        stage_layers=stage_layers(spec.layers, layout),
        ep=ex.ep,
        etp=ex.etp,
        moe=spec.is_moe,
        moe_plan=moe_plan_described(
            spec, layout, s, hw.gpu, ex, ep_overlap_capped_s(coeffs, layout.grad_accum, net)
        ),
        failure_model=failures,
        cp_ring=cp_ring_on_nics(coeffs, layout.grad_accum, net),
    )
