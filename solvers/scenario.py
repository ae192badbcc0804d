"""A design question: the model, the hardware on offer, the limits and the objective."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from catalog.catalog import Catalog
from catalog.cloud import cloud_offers
from catalog.specs import DEFAULT_STACK, NICSpec
from models.batch_tokens import (
    DEFAULT_MODEL,
    MAX_CRITICAL_BATCHES,
    MODELS,
    critical_batch_sequences,
    critical_batch_tokens,
    max_batch_tokens,
    token_multiplier,
)
from models.goodput import FailureModel, absorbed_fraction, failure_model, spare_cover_per_100
from models.layout import Assumptions
from models.rental import Billing, Rental, by_the_hour
from models.transformer import TransformerSpec

OBJECTIVES = ("time", "cost")
PRICINGS = ("capex", "cloud", "tco")
DEFAULT_MAX_BATCH_TOKENS = 16 * 2**20  # 16M tokens (Llama 3 405B's final batch; Dubey et al. 2024)
# virtual stages searched by default: the solve-time targets (README "What the space leaves out")
# max_batch_tokens's default: the batch-tokens model's largest batch (3 critical batches,
# models/batch_tokens.py), or DEFAULT_MAX_BATCH_TOKENS with the model off; resolved when the
# Scenario is built, so code and the CLI (designer/question/build.py) get the same ceiling
MODEL_CEILING = -1.0
# the largest batch ceiling the CP-SAT model holds, in tokens: sequences (at least one token
# each) times the DP degree (at most GPU_CAP) in int64 with room for sums of four terms,
# INT_LIMIT / 4 / GPU_CAP rounded down to a power of ten (1e12; solvers/limits.py says how
# each limit is derived, tests/test_scenario.py checks this one). Here, on the scenario's
# floor, so that the default ceiling is clamped to it in one place (model_ceiling_tokens)
MAX_BATCH_TOKENS = 1e12
DEFAULT_MAX_VIRTUAL_STAGES = 5
GPU_CAP = 2**20  # the decision space never exceeds 1,048,576 GPUs


# Planning defaults for memory the tensors do not account for (README "Memory headroom").
# Reserved: CUDA context and cuBLAS/Transformer Engine workspaces (~0.5-1 GB) plus NCCL's
# buffers, measured at 544-688 MB per communicator on 4 x A100 (NVIDIA/nccl#964, 2023-08)
# and 1.6 GB for one communicator, ~6 GB for three or more with default channels
# (NVIDIA/nccl#864, 2023-06); a Megatron job holds TP, PP, DP and (with CP) CP groups.
DEFAULT_RESERVED_GB = 3.0
# Headroom: the PyTorch caching allocator's fragmentation (reserved but unallocated
# blocks) and peaks outside the model's count; 5% of the GPU kept free. The evidence
# (python bench/memory_accuracy.py --published, issue 31 item 5): with the 3 GB reserved, the
# memory model errs by a median 12.1% on the Megatron-Core runs with a measured peak (2
# NeMo runs, +12.7% and -11.5%) and 45.6% on 26 PyTorch FSDP runs (a stack it does not
# model); a margin refuses published runs that did run: 6 of 152 at 0%, 9 at 5%, 16 at
# 12% (the margin that would cover both Megatron peaks). Two runs of one source do not
# outweigh 152 that ran, so the margin stays 5% (HEADROOM_EVIDENCE, --headroom's help).
DEFAULT_HEADROOM = 0.05


def planning_assumptions() -> Assumptions:
    """The planning assumptions of a question that sets none: the seed's tensor rules
    (models.layout.Assumptions) with DEFAULT_RESERVED_GB reserved and DEFAULT_HEADROOM kept
    free (the CLI's --reserved-gb and --headroom defaults)."""
    return Assumptions(
        runtime_reserved_gb=DEFAULT_RESERVED_GB, memory_headroom_fraction=DEFAULT_HEADROOM
    )


# the limits an active family sets (callers check ``active`` first): read while unset, each
# names its family (Scenario.__getattr__)
_LIMITS = {
    "budget": "budget",
    "deadline": "deadline",
    "power_cap_w": "power",
    "rack_cap": "max_racks",
    "ceiling_tokens": "batch_ceiling",
    "floor_tokens": "batch_floor",
}


class _Derived:
    """The values a Scenario derives from its fields, computed once when it is built (it is
    frozen) and then read as plain attributes, never asked again: the limits of its active
    families (unset: reading one raises, naming the family), the training sequences, the
    batch-tokens model's critical batch and cap, the GPU caps by type and whether the cost
    holds the whole capex. Not dataclass fields: ``replace`` recomputes them."""

    budget: float  # USD
    deadline: float  # days
    power_cap_w: float  # facility power (IT x PUE, nameplate), W
    rack_cap: int
    ceiling_tokens: float
    floor_tokens: float
    sequences: float  # training sequences: tokens / seq_len
    # the critical batch in whole sequences (None: the tokens do not depend on it)
    critical_batch_seq: int | None
    # the largest global batch the batch-tokens model admits, in sequences, with or without
    # the ceiling family (models.batch_tokens.MAX_CRITICAL_BATCHES; None: off)
    model_batch_cap_seq: int | None
    # the most GPUs of a type a plan may use (the least of its caps in ``gpu_caps`` and
    # max_gpus), by the types ``gpu_caps`` names: any other type's is max_gpus
    # (Scenario.gpu_cap)
    gpu_cap_by_type: Mapping[str, int | None]
    # whether the cost includes the whole capex (capex, or TCO without a lifetime)
    capex_charged_in_full: bool


@dataclass(frozen=True)
class Scenario(_Derived):
    """Everything the solvers need. Quantities in tokens, USD, days."""

    spec: TransformerSpec
    catalog: Catalog
    tokens: float
    seq_len: int
    gpus: tuple[str, ...]
    nics: tuple[str, ...]
    objective: str = "time"
    pricing: str = "capex"
    budget_usd: float | None = None
    deadline_days: float | None = None
    max_gpus: int | None = None
    gpu_caps: tuple[tuple[str, int], ...] = ()  # availability: at most N GPUs of a type
    power_cap_mw: float | None = None  # facility power (IT x PUE, nameplate)
    max_racks: int | None = None
    max_batch_tokens: float | None = MODEL_CEILING
    min_batch_tokens: float | None = None
    precisions: tuple[str, ...] = ("bf16",)
    recompute_modes: tuple[str, ...] = ("none", "selective", "full")
    # None: powers of two up to what memory and the batch ceiling allow (space.micro_batch_options)
    micro_batches: tuple[int, ...] | None = None
    # None: every count Megatron-LM accepts for the PP degree (solvers.space.vp_options)
    virtual_stages: tuple[int, ...] | None = None
    # the largest virtual-stage count searched (with virtual_stages None); README "What the
    # space leaves out": 8 and more find faster plans for 100+ layer models, at solve time
    max_virtual_stages: int = DEFAULT_MAX_VIRTUAL_STAGES
    assumptions: Assumptions = field(default_factory=planning_assumptions)
    disabled: frozenset[str] = frozenset()
    memory_scale: float = 1.0  # relaxation knob: capacity x scale
    extra_nic_slots: int = 0  # relaxation knob
    catalog_files: tuple[str, ...] = ()  # provenance only: the override files the catalog came from
    stack: str = DEFAULT_STACK  # provenance: the software stack whose profiles the catalog holds
    evidence: str = "measured"  # provenance: "measured" (GPUs with measured runs) or "any"
    # (GPU, precision) pairs the search skips: no measured run in that precision (--evidence)
    unmeasured: frozenset[tuple[str, str]] = frozenset()
    fabric: str = "any"  # scale-out fabric: "any", "infiniband" or "ethernet" (--fabric)
    # failures, checkpoints and restarts (models/goodput.py): on, as in the CLI's question
    # (designer/question/fields.py) unless --no-failures; no_failures=True is the ideal model
    no_failures: bool = False
    checkpoint_every_min: float | None = None  # --checkpoint-every; None: Young's optimum
    failure_scale: float = 1.0  # the catalog's interruption rates times this (a study axis)
    # a MoE plan's EP group inside one scale-up domain (--ep-in-domain; the ep_domain family)
    ep_in_domain: bool = False
    # a MoE plan's token dispatcher (--dispatcher): "alltoall", Megatron-Core's all-to-all,
    # or "deepep", its flex dispatcher with DeepEP (a token crosses the NICs once per remote
    # scale-up domain: models.expert ExpertLayout.dispatch_per_domain)
    dispatcher: str = "alltoall"
    # rentable cloud plans (solvers/cloud_terms.py, issue 31 item 2): a rented plan is one
    # block of the catalog's size (or cloud_max_gpus) paid under a term, as in the CLI's
    # question (designer/question/fields.py); cloud_terms=False rents any GPU count by the hour
    # without terms; cloud_term: the term a split question is fixed to
    cloud_terms: bool = True
    cloud_max_gpus: int | None = None
    cloud_term: str | None = None
    # the least days a rented plan is billed for: the term's minimum (cloud_term's; set
    # with it by solvers.cloud_terms.term_scenario), else 0 (models.evaluate.billed_days)
    cloud_min_days: float = 0.0
    # how the term bills a plan of each GPU type (models.rental.Billing: the minimum, and on
    # demand the block's reservation lengths and longest), set with cloud_term; a type not
    # named is billed by use for at least cloud_min_days (Scenario.billing)
    cloud_billing: tuple[tuple[str, Billing], ...] = ()
    # tokens that depend on the batch (models/batch_tokens.py, issue 31 item 1): the
    # critical-batch model, on by default as in the CLI's question; "off": tokens are fixed
    batch_tokens_model: str = DEFAULT_MODEL

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {OBJECTIVES}")
        if self.pricing not in PRICINGS:
            raise ValueError(f"pricing must be one of {PRICINGS}")
        if self.batch_tokens_model not in MODELS:
            raise ValueError(f"batch_tokens_model must be one of {MODELS}")
        if self.max_batch_tokens == MODEL_CEILING:
            object.__setattr__(self, "max_batch_tokens", self.model_ceiling_tokens())
        # a GPU or NIC named twice is one choice (the CP-SAT model keys its choices by name:
        # a repeated NIC counted its bandwidth twice and made every plan infeasible)
        for name in ("gpus", "nics"):
            names = tuple(getattr(self, name))
            if len(set(names)) != len(names):
                object.__setattr__(self, name, tuple(dict.fromkeys(names)))
        self._derive()

    def _derive(self) -> None:
        """Set the derived values (_Derived), once."""
        limits = {
            "budget": self.budget_usd,
            "deadline": self.deadline_days,
            "power_cap_w": None if self.power_cap_mw is None else self.power_cap_mw * 1e6,
            "rack_cap": None if self.max_racks is None else int(self.max_racks),
            "ceiling_tokens": self.max_batch_tokens,
            "floor_tokens": self.min_batch_tokens,
        }
        crit = critical_batch_tokens(self.batch_tokens_model, self.spec, self.tokens)
        crit_seq = None if crit is None else critical_batch_sequences(crit, self.seq_len)
        caps: dict[str, int | None] = {}
        for name, cap in self.gpu_caps:  # the least of a type's caps and the overall one
            caps[name] = min(c for c in (cap, caps.get(name), self.max_gpus) if c is not None)
        derived = {
            **{k: v for k, v in limits.items() if v is not None},
            "sequences": self.tokens / self.seq_len,
            "critical_batch_seq": crit_seq,
            "model_batch_cap_seq": None
            if crit_seq is None
            else int(MAX_CRITICAL_BATCHES * crit_seq),
            "gpu_cap_by_type": caps,  # a plain dict: a Scenario pickles (study workers)
            "capex_charged_in_full": self.pricing == "capex"
            or (self.pricing == "tco" and self.catalog.facility.lifetime_years is None),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        """Only for an unset limit (a set one, like every derived value, is a plain
        attribute): the error names its family."""
        family = _LIMITS.get(name)
        if family is None:
            raise AttributeError(name)
        raise ValueError(f"the {family} limit is not set")

    def model_ceiling_tokens(self) -> float:
        """The batch ceiling of a question that names none (module function)."""
        return model_ceiling_tokens(self.batch_tokens_model, self.spec, self.tokens, self.seq_len)

    def gpu_cap(self, gpu: str) -> int | None:
        """The most GPUs of this type a plan may use: the overall cap and its availability
        (gpu_cap_by_type, else max_gpus)."""
        return self.gpu_cap_by_type.get(gpu, self.max_gpus)

    def with_gpu_caps_scaled(self, factor: float) -> Scenario:
        """Every GPU cap (overall and per type) times ``factor``, rounded up."""
        import math

        return replace(
            self,
            max_gpus=None if self.max_gpus is None else math.ceil(self.max_gpus * factor),
            gpu_caps=tuple((g, math.ceil(c * factor)) for g, c in self.gpu_caps),
        )

    def billing(self, gpu: str) -> Billing:
        """How a rented plan of ``gpu`` is billed under the question's term (cloud_billing),
        else by use for at least cloud_min_days."""
        return dict(self.cloud_billing).get(gpu) or Billing(self.cloud_min_days)

    def rental(self, gpu: str) -> Rental | None:
        """What a plan of ``gpu`` pays renting, as this question prices it (models/rental.py):
        under its term, the term's rate (the catalog's price of ``gpu`` here: term_scenario
        set it) for the billed days; without terms, by the hour at the catalog's price;
        None for a question that rents under terms not yet fixed (the plan's evaluation
        then bills the cheapest term, Evaluation.rented) or does not rent."""
        if self.pricing != "cloud":
            return None
        if not self.cloud_terms:
            return by_the_hour(self.catalog.gpu(gpu))
        if self.cloud_term is None:
            return None
        rate = self.catalog.gpu(gpu).cloud_usd_per_gpu_hour
        own = self.cloud_min_days <= 0 and cloud_offers().block_usd_per_gpu_hour(gpu) is not None
        return Rental(self.cloud_term, rate, self.billing(gpu), block_price=own)

    def token_multiplier(self, batch_sequences):
        """Tokens to train at a global batch of ``batch_sequences`` per question token
        (1 without the batch-tokens model; floats or numpy arrays)."""
        return token_multiplier(batch_sequences, self.critical_batch_seq)

    def nics_for(self, gpu: str) -> list[NICSpec]:
        """The question's NICs that ``gpu``'s server can take, on the question's fabric
        (catalog.Catalog.nic_fits: PCIe generation, the vendor's fixed or integrated NICs)."""
        return self.catalog.nics_for(self.catalog.gpu(gpu), self.nics, self.fabric)

    def nic_slots(self, gpu: str) -> int:
        """Scale-out NIC slots of ``gpu``'s server, with the relaxation's extra slots."""
        return self.catalog.gpu(gpu).server.nic_slots + self.extra_nic_slots

    def nic_counts(self, gpu: str) -> tuple[int, ...]:
        """NICs per server a plan on ``gpu`` may take (the vendor's counts; relaxed nic_slots
        rule: extra slots, or up to twice the slots when not enforced)."""
        return self.catalog.gpu(gpu).server.allowed_nic_counts(
            # the nic_slots family is on unless ignored (its field, extra_nic_slots, is never
            # None: solvers.families.active, which imports this module, agrees; tests check)
            self.extra_nic_slots,
            "nic_slots" not in self.disabled,
        )

    def failure_model(self, gpu: str) -> FailureModel | None:
        """The failure and checkpoint model of a plan on ``gpu`` (None: the ideal model);
        computed afresh: a solve reads its models from ``prepare()``."""
        if self.no_failures:
            return None
        a = self.assumptions
        return failure_model(
            self.catalog.gpu(gpu),
            self.catalog.facility,
            float(self.spec.params()),
            a.weight_bytes + a.optimizer_bytes,
            self.failure_scale,
            self.checkpoint_every_min,
        )

    # the purchase options (solvers/purchases.py, issue 18 item 4: its module docstring says
    # which options are left out and why)
    def decides_purchases(self, gpu: str) -> bool:
        """Whether the plan on ``gpu`` chooses spares and storage (failures on, purchased)."""
        return self._decides(self.failure_model(gpu))

    def _decides(self, model: FailureModel | None) -> bool:
        return model is not None and model.rate_per_gpu_s > 0 and self.pricing != "cloud"

    def spare_options(self, gpu: str) -> list[float]:
        """Spares per 100 servers a plan on ``gpu`` may buy, 0 first."""
        return self._spare_options(self.failure_model(gpu))

    def _spare_options(self, model: FailureModel | None) -> list[float]:
        fac = self.catalog.facility
        if model is None or not self._decides(model):
            return [0.0]
        if fac.hot_spare_restart_min * 60.0 >= model.restart_s:
            return [0.0]
        cover = spare_cover_per_100(model, fac)  # at the rates in effect (failure scale)
        kept: list[float] = []
        seen: set[float] = set()
        for k in sorted({0.0, *fac.hot_spare_options_per_100_servers}):
            f = absorbed_fraction(k, cover)
            if f not in seen:
                seen.add(f)
                kept.append(float(k))
        return kept

    def storage_options(self, gpu: str) -> list[float]:
        """Checkpoint storage GB/s per server a plan on ``gpu`` may have, the facility's first."""
        return self._storage_options(self.failure_model(gpu))

    def _storage_options(self, model: FailureModel | None) -> list[float]:
        fac = self.catalog.facility
        base = fac.checkpoint_storage_gb_per_s_per_server
        if not self._decides(model):
            return [base]
        faster = sorted(b for b in fac.checkpoint_storage_options_gb_per_s_per_server if b > base)
        return [base, *faster]

    def with_changes(self, **changes) -> Scenario:
        return replace(self, **changes)

    def prepare(self) -> PreparedQuestion:
        """What the stages of one solve read, computed once (PreparedQuestion)."""
        models = {g: self.failure_model(g) for g in self.gpus}
        servers = {g: self.catalog.gpu(g).server for g in self.gpus}
        return PreparedQuestion(
            nic_specs=tuple(nic_specs(self)),
            nics_for={g: tuple(self.nics_for(g)) for g in self.gpus},
            nic_counts={g: self.nic_counts(g) for g in self.gpus},
            # the nic_slots rule ignored: the relaxation's extra slots, or twice the slots
            relaxed_nic_counts={
                g: servers[g].allowed_nic_counts(self.extra_nic_slots, False) for g in self.gpus
            },
            failure_models=models,
            decides_purchases={g: self._decides(models[g]) for g in self.gpus},
            spare_options={g: tuple(self._spare_options(models[g])) for g in self.gpus},
            storage_options={g: tuple(self._storage_options(models[g])) for g in self.gpus},
            gpu_caps={g: self.gpu_cap(g) for g in self.gpus},
            sequences=self.sequences,
            critical_batch_seq=self.critical_batch_seq,
            model_batch_cap_seq=self.model_batch_cap_seq,
            capex_charged_in_full=self.capex_charged_in_full,
            rentals={g: self.rental(g) for g in self.gpus},
        )


@dataclass(frozen=True)
class PreparedQuestion:
    """What the stages of one solve ask the scenario, computed once at its top
    (Scenario.prepare; issue 32 item 2, a first step): the NIC types on offer and, per GPU
    type of the question, its NIC options, its NIC counts (the vendor's, and the relaxed
    rule's that bound CP-SAT's domain), its failure model, its purchase options and its GPU
    cap; the training sequences and the batch-tokens model's terms. Read by the CP-SAT build
    (BuildContext.prepared), the one-shape grid search (solvers/grid_search.py: the warm
    start and the exhaustive solver), the purchase rule and the plans it settles
    (build_plan's ``prepared``); the bounds, the presolve, the space and the families' hooks
    still ask the scenario (README "Not yet done")."""

    nic_specs: tuple[NICSpec, ...]
    nics_for: Mapping[str, tuple[NICSpec, ...]]
    nic_counts: Mapping[str, tuple[int, ...]]
    relaxed_nic_counts: Mapping[str, tuple[int, ...]]  # nic_slots ignored (extra slots)
    failure_models: Mapping[str, FailureModel | None]
    # the purchase options (Scenario.decides_purchases, spare_options, storage_options)
    decides_purchases: Mapping[str, bool]
    spare_options: Mapping[str, tuple[float, ...]]
    storage_options: Mapping[str, tuple[float, ...]]
    gpu_caps: Mapping[str, int | None]
    sequences: float
    critical_batch_seq: int | None
    model_batch_cap_seq: int | None
    capex_charged_in_full: bool
    rentals: Mapping[str, Rental | None]  # Scenario.rental of each GPU type


def nic_specs(scenario: Scenario) -> list[NICSpec]:
    """The question's NIC types (the catalog's specs of ``scenario.nics``)."""
    return [scenario.catalog.nic(n) for n in scenario.nics]


def model_ceiling_tokens(model: str, spec: TransformerSpec, tokens: float, seq_len: int) -> float:
    """The batch ceiling of a question that names none (max_batch_tokens=MODEL_CEILING, the
    CLI's without --max-batch-tokens): 3 critical batches under the batch-tokens model
    (models.batch_tokens.max_batch_tokens), at most MAX_BATCH_TOKENS; 16M tokens with it off."""
    crit = critical_batch_tokens(model, spec, tokens)
    if crit is None:
        return DEFAULT_MAX_BATCH_TOKENS
    return min(max_batch_tokens(crit, seq_len), MAX_BATCH_TOKENS)
