"""The decision space: hardware and layout "shapes" with their performance-model coefficients.

A shape fixes the small discrete choices (GPU, TP, CP, PP, virtual stages,
micro-batch, recomputation, precision); DP degree, micro-batches per step,
servers, NIC type and NICs per server are left to the solvers. Every number
comes from models/ (one source of truth); both solvers read these candidates.

Choices the space makes, by dominance or convention (README "Decision space"):
sequence parallelism is on whenever TP > 1 (same traffic, less memory); the
ZeRO stage is 1, Megatron-LM's distributed optimizer (stage 0 has the same
traffic and more memory); TP is a power of two up to twice the scale-up domain
(beyond the domain only when ``tp_domain`` is relaxed); CP spans servers (its ring over
the NICs, models.step.cp_nic_mb_s) where the question allows it (--cp-across-servers),
else TP x CP beyond the domain only when ``tp_domain`` is relaxed; PP takes every divisor
of the layer count and every power of two. When p x v does not divide the layers
the shape carries the split Megatron-LM would run (models.pipeline.uneven_splits:
the embedding/loss accounting when it makes the split even, else middle ranks at
the rounded-up share with fewer layers on the first and last ranks; one per
(p, v)), and the even split
that does not divide stays only for a relaxed ``divisibility``; CP only for
sequences of at least 8,192 tokens, at least 4,096 tokens to a rank (up to CP 32). Virtual
stages: every count up to
the question's max_virtual_stages with a Megatron-LM split (vp_options); micro-batches: powers of
two up to the batch ceiling, stopping past the first size that fits at no DP degree.
"""

from __future__ import annotations

import itertools
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from typing import Any

from catalog.specs import GPUSpec
from models.evaluate import with_profile
from models.expert import (
    ExpertLayout,
    MoEGemmWork,
    expert_memory,
    grouped_terms,
    moe_cp_coefficients,
    moe_gemm_at_rates_s,
    moe_gemm_rates,
    moe_gemm_stages,
    moe_step_coefficients,
    routed_elementwise_width,
)
from models.feasibility import TOL
from models.layout import Assumptions, Layout, Network
from models.memory import (
    memory_terms,
    moe_bound_terms_at,
    moe_memory_terms,
    moe_unit_bound_ranks,
    usable_memory_gb,
)
from models.pipeline import (
    EVEN,
    Split,
    bubble_fraction,
    full_pipeline_microbatches,
    uneven_splits,
)
from models.step import (
    StepCoefficients,
    gemm_per_microbatch_s,
    host_issue_per_microbatch_s,
    memory_bound_per_microbatch_s,
    step_coefficients,
)
from solvers.cp_degrees import cp_options
from solvers.decisions import Shape, question_experts
from solvers.families import SHAPE_RULES, active, enforced
from solvers.scenario import (  # noqa: F401  (nic_specs: its home before scenario.py)
    DEFAULT_MAX_VIRTUAL_STAGES,
    GPU_CAP,
    PreparedQuestion,
    Scenario,
    nic_specs,
)


@lru_cache(maxsize=4096)
def pipeline_splits(layers: int, pp: int, vp: int) -> tuple[Split, ...]:
    """The splits the space offers for (p, v): the even one when p x v divides the layers;
    otherwise Megatron-LM's uneven split (models.pipeline.uneven_splits), and the even
    one (which then breaks ``divisibility``) only with vp 1, as before uneven splits
    were modelled."""
    if pp == 1:
        return (EVEN,) if vp == 1 else ()
    if layers % (pp * vp) == 0:
        return (EVEN,)
    return ((EVEN,) if vp == 1 else ()) + uneven_splits(layers, pp, vp)


MICRO_BATCH_CAP = 1024  # a sanity bound: memory or the batch ceiling stops the search first
STRUCTURAL_MICRO_BATCHES = (1, 2, 4, 8)  # always enumerated (blocked shapes, explain)


def vp_options(layers: int, pp: int, most: int = DEFAULT_MAX_VIRTUAL_STAGES) -> list[int]:
    """The virtual-stage counts searched for ``pp`` stages: 1, and with pp > 1 every
    v up to ``most`` (the question's ``max_virtual_stages``) and one layer a chunk for
    which Megatron-LM has a split (pipeline_splits: v divides each rank's layers, the
    even split when p x v divides them, else an uneven one)."""
    if pp == 1:
        return [1]
    top = min(most, layers // pp)
    return [v for v in range(1, top + 1) if pipeline_splits(layers, pp, v)]


def micro_batch_options(scenario: Scenario) -> tuple[int, ...]:
    """The micro-batch sizes tried: the question's own, or every power of two up to what
    the enforced batch ceiling admits at DP 1 and one micro-batch per step (at least the
    structural sizes, at most MICRO_BATCH_CAP), smallest first; the enumeration stops past
    the first size that fits memory at no DP degree, so memory sets the real limit."""
    if scenario.micro_batches is not None:
        return scenario.micro_batches
    limit = MICRO_BATCH_CAP
    if active(scenario, "batch_ceiling"):
        by_ceiling = int(scenario.ceiling_tokens // scenario.seq_len)
        limit = min(limit, max(STRUCTURAL_MICRO_BATCHES[-1], by_ceiling))
    return tuple(powers_of_two(limit))


@dataclass(frozen=True)
class _Source:
    """What a shape's numbers are computed from: the question, the GPU, the nominal network.

    ``terms_cache`` is shared by every GPU of one enumeration: a shape's memory
    terms (their frontier), a MoE shape's ranks at a micro-batch of 1, its expert
    memory and its GEMM FLOPs do not depend on the GPU but through FlashAttention
    (keyed by it, a tag and the other fields of the shape they read)."""

    scenario: Scenario
    gpu: GPUSpec
    network: Network
    terms_cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    # a MoE shape's dense step coefficients, element-wise and host issue times, shared by
    # its EP x ETP variants (keyed by the shape at EP 1, ETP 1: _dense_part; models.step
    # does not look at them or at the DP degree; tests/test_moe_plan.py checks it)
    dense_cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)
    # the GPU's rates of a MoE shape's GEMMs, keyed by (precision, TP) (Candidate.gemm_mb_s)
    rates_cache: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    @cached_property
    def profiled(self) -> Assumptions:
        """The question's assumptions under this GPU's stack profile (with_profile)."""
        return with_profile(self.scenario.assumptions, self.gpu)

    @cached_property
    def capacity_gb(self) -> float:
        """The memory a plan may fill on this GPU (usable_memory_gb x memory_scale)."""
        usable = usable_memory_gb(self.gpu.memory_gb, self.scenario.assumptions)
        return usable * self.scenario.memory_scale


_UNSET: Any = object()


def _dense_part(src: _Source, key: Shape) -> tuple[StepCoefficients, float, float]:
    """What a MoE shape's EP x ETP variants share (``key``: the shape at EP 1, ETP 1): its
    dense step coefficients, element-wise time and host issue time per micro-batch
    (models.step; none of them reads the experts or the DP degree)."""
    spec, seq, layout = src.scenario.spec, src.scenario.seq_len, key.probe_layout()
    dense = step_coefficients(spec, layout, seq, src.gpu, src.network, src.profiled)
    elementwise = memory_bound_per_microbatch_s(spec, layout, seq, src.gpu)
    return dense, elementwise, host_issue_per_microbatch_s(spec, layout, src.gpu)


class Candidate:
    """A shape with everything the solvers need about it.

    ``structural``: the families violated whatever the solver chooses for d, m and
    NICs. ``coeffs`` (the performance model's step coefficients), ``gemm_mb_s``
    (their GEMM part, for a cheap bound) and ``dp_min_memory`` (the smallest DP
    degree whose ZeRO shard fits; None: never fits) are computed on first use,
    from the question the shape was enumerated for: most shapes are ruled out by
    a structural family, by memory or by a bound before anyone needs their step
    time."""

    __slots__ = (
        "shape", "structural", "_source", "_coeffs", "_gemm", "_dp_min", "_origin", "_dense",
    )  # fmt: skip

    def __init__(
        self,
        shape: Shape,
        structural: frozenset[str],
        source: _Source,
        origin: Candidate | None = None,
    ) -> None:
        self.shape = shape
        self.structural = structural
        self._source = source
        self._origin = origin  # the same shape in another question: share its coefficients
        self._coeffs: StepCoefficients | None = None
        self._gemm: float | None = None
        self._dp_min: int | None = _UNSET
        self._dense: tuple[float, float] | None = _UNSET

    @property
    def origin(self) -> Candidate | None:
        """The same shape in the question this one was derived from (with_memory_scale)."""
        return self._origin

    @property
    def coeffs(self) -> StepCoefficients:
        if self._coeffs is None:
            if self._origin is not None:
                self._coeffs = self._origin.coeffs
            else:
                src, shape = self._source, self.shape
                spec, seq = src.scenario.spec, src.scenario.seq_len
                if spec.is_dense:
                    self._coeffs = step_coefficients(
                        spec,
                        shape.layout(1, max(1, shape.pp)),
                        seq,
                        src.gpu,
                        src.network,
                        src.scenario.assumptions,
                    )
                else:
                    a = src.profiled
                    dense, elementwise, host = self._dense_part()
                    layout, ex = shape.probe_layout(), self._experts()
                    # its parameter counts do not depend on the GPU but through the
                    # profile's FlashAttention (as the memory terms): shared across GPUs
                    mkey = ("moe", a.flash_attention, *shape[1:])
                    mem = src.terms_cache.get(mkey)
                    if mem is None:
                        mem = src.terms_cache[mkey] = expert_memory(
                            spec, layout, seq, src.gpu.memory_gb, a, ex
                        )
                    self._coeffs = moe_step_coefficients(
                        spec, layout, ex, seq, src.gpu, src.network, a, self._gemm, dense, mem,
                        elementwise, host,
                    )  # fmt: skip
        return self._coeffs

    @property
    def dense_stage(self) -> tuple[float, float] | None:
        """A MoE shape's stage time per micro-batch without its expert terms, and the share
        of it its pipeline bubble is: (((GEMM + element-wise) + TP) + CP, (p - 1)/v, 0 under
        DualPipe), from its GEMM time (``gemm_mb_s``) and the dense part its EP x ETP
        variants share (_dense_part), CP the in-domain ring's exposed seconds at that GEMM +
        element-wise compute (models.expert.moe_cp_coefficients), none of the expert memory
        or dispatch terms computed. The time is at most ``coeffs.stage_mb_s``, which adds
        only non-negative terms to the compute, in this order
        (models.expert.moe_step_coefficients: permutation, routed element-wise, fp32 router,
        overlap cost; dispatch), when the routed element-wise width is not negative, and
        whose compute + CP never falls as the compute rises. None: a dense shape (its
        coefficients are cheap), or a negative width (screen.bounds.dense_part_lower_bounds).
        Computed once."""
        if self._dense is _UNSET:
            self._dense = (
                self._origin.dense_stage if self._origin is not None else self._dense_stage()
            )
        return self._dense

    def _dense_stage(self) -> tuple[float, float] | None:
        src, shape = self._source, self.shape
        spec = src.scenario.spec
        ex = self._experts()
        if spec.is_dense or (ex.routed_elementwise and routed_elementwise_width(spec, ex) < 0):
            return None
        dense, elementwise, _ = self._dense_part()
        least = self.gemm_mb_s + elementwise
        ring = moe_cp_coefficients(spec, shape.probe_layout(), src.scenario.seq_len, src.gpu, least)
        stage = (least + dense.tp_mb_s) + ring["cp_mb_s"]
        return stage, 0.0 if ex.dualpipe else bubble_fraction(shape.pp, 1, shape.vp)

    def _experts(self) -> ExpertLayout:
        """The shape's expert layout under its question: its EP and ETP and the question's
        dispatcher (solvers.decisions.question_experts)."""
        shape = self.shape
        return question_experts(shape.ep, shape.etp, self._source.scenario.dispatcher)

    def _dense_part(self) -> tuple[StepCoefficients, float, float]:
        """_dense_part of this MoE shape, from (or into) its source's dense_cache."""
        src = self._source
        key = self.shape._replace(ep=1, etp=1)
        shared = src.dense_cache.get(key)
        if shared is None:
            shared = src.dense_cache[key] = _dense_part(src, key)
        return shared

    @property
    def gemm_mb_s(self) -> float:
        """GEMM time of one micro-batch on the slowest stage (a part of ``coeffs``, cheaper)."""
        if self._gemm is None:
            if self._coeffs is not None:
                self._gemm = self._coeffs.gemm_mb_s
            elif self._origin is not None:
                self._gemm = self._origin.gemm_mb_s
            else:
                src, shape = self._source, self.shape
                scenario = src.scenario
                if scenario.spec.is_dense:
                    layout = shape.layout(1, max(1, shape.pp))
                    self._gemm = gemm_per_microbatch_s(
                        scenario.spec, layout, scenario.seq_len, src.gpu
                    )
                else:
                    self._gemm = self._moe_gemm_mb_s()
        return self._gemm

    def _moe_gemm_mb_s(self) -> float:
        """models.expert.moe_gemm_per_microbatch_s of the shape, from its two parts: the
        FLOPs (moe_gemm_work, shared by the GPUs of one FlashAttention, as the memory
        terms) and the GPU's rates (moe_gemm_rates, one per precision and TP)."""
        src, shape = self._source, self.shape
        spec, flash = src.scenario.spec, src.gpu.calibration.flash_attention
        key = ("gemm", flash, *shape[1:])
        work = src.terms_cache.get(key)
        if work is None:
            work = src.terms_cache[key] = self._moe_gemm_work(flash)
        rates = src.rates_cache.get((shape.precision, shape.tp))
        if rates is None:
            rates = src.rates_cache[shape.precision, shape.tp] = moe_gemm_rates(
                src.gpu, spec.hidden, shape.precision, shape.tp
            )
        return moe_gemm_at_rates_s(work, rates)

    def _moe_gemm_work(self, flash: bool) -> MoEGemmWork:
        """models.expert.moe_gemm_work of the shape, its ranks' work shared by the shapes
        that differ only in precision, EP and ETP (moe_gemm_stages reads none of them)."""
        src, shape = self._source, self.shape
        spec, seq = src.scenario.spec, src.scenario.seq_len
        layout, ex = shape.probe_layout(), self._experts()
        key = ("stages", flash, *shape[1:7], shape.split)
        stages = src.terms_cache.get(key)
        if stages is None:
            stages = src.terms_cache[key] = moe_gemm_stages(spec, layout, seq, flash, ex)
        return MoEGemmWork(stages, grouped_terms(spec, layout, seq, ex))

    @property
    def dp_min_memory(self) -> int | None:
        if self._dp_min is _UNSET:
            src, shape = self._source, self.shape
            # all but the GPU: the memory terms depend on it only through FlashAttention
            key = (src.gpu.calibration.flash_attention, *shape[1:])
            terms = src.terms_cache.get(key)
            if terms is None:
                binding = shape_bound_terms(src.scenario, shape, src.profiled, src.terms_cache)
                terms = src.terms_cache[key] = memory_frontier(binding)
            self._dp_min = dp_min_from_terms(terms, shape.cp, src.capacity_gb)
        return self._dp_min

    @property
    def memory_cheap(self) -> bool:
        """Whether ``dp_min_memory`` is known or its memory terms are (no model call)."""
        if self._dp_min is not _UNSET:
            return True
        src = self._source
        return (src.gpu.calibration.flash_attention, *self.shape[1:]) in src.terms_cache

    def never_fits_memory(self) -> None:
        """Record that no DP degree fits the shape in memory, known without computing it:
        a smaller micro-batch of the same shape does not fit (memory grows with the
        micro-batch: activations and logits scale with it, model states do not)."""
        self._dp_min = None

    def __repr__(self) -> str:
        return f"Candidate({self.shape!r}, structural={sorted(self.structural)})"

    def allowed(self, scenario: Scenario) -> bool:
        """Not excluded by an enforced structural family."""
        on = enforced(scenario)
        if self.structural and not self.structural.isdisjoint(on):
            return False
        return not ("memory" in on and self.dp_min_memory is None)

    def dp_floor(self, scenario: Scenario) -> int:
        """Smallest DP degree the enforced memory constraint admits."""
        if "memory" in enforced(scenario):
            return self.dp_min_memory or 1
        return 1


def powers_of_two(limit: int) -> list[int]:
    out, v = [], 1
    while v <= limit:
        out.append(v)
        v *= 2
    return out


def tp_options(spec, gpu: GPUSpec) -> list[int]:
    return powers_of_two(min(64, 2 * gpu.server.scale_up_domain_gpus, spec.heads))


def pp_options(layers: int) -> list[int]:
    divisors = {d for d in range(1, layers + 1) if layers % d == 0}
    return sorted(divisors | set(powers_of_two(layers)))


def expert_options(spec, tp: int, gpu: GPUSpec) -> list[tuple[int, int]]:
    """(EP, ETP) pairs searched with TP ``tp``: (1, 1) for a dense model; for a MoE model
    every power of two EP that divides the experts, with ETP 1 (Megatron-Core's usual
    folding) or ETP = TP (the dense layers' TP kept on the experts) while TP stays inside
    the scale-up domain (README "Mixture-of-experts")."""
    if not spec.is_moe:
        return [(1, 1)]
    eps = [e for e in powers_of_two(spec.experts) if spec.experts % e == 0]
    etps = [1] + ([tp] if 1 < tp <= gpu.server.scale_up_domain_gpus else [])
    return [(e, t) for e in eps for t in etps]


def structural_violations(scenario: Scenario, shape: Shape, gpu: GPUSpec) -> frozenset[str]:
    """The shape rules (solvers/families: tp_bandwidth, tp_domain, divisibility, ep_domain
    with --ep-in-domain) it breaks."""
    return frozenset(f.name for f in SHAPE_RULES if f.violated_by(scenario, shape, gpu))


def shape_memory_terms(
    scenario: Scenario, shape: Shape, profiled: Assumptions | None = None
) -> list[tuple[float, float]]:
    """models.memory.memory_terms of the shape's memory_layout (any DP degree, full
    pipelines; a MoE / MLA / MTP model's moe_memory_terms at the shape's EP and ETP).
    ``profiled``: the question's assumptions under the shape's GPU's profile
    (with_profile), when the caller has them."""
    a = profiled
    if a is None:
        a = with_profile(scenario.assumptions, scenario.catalog.gpu(shape.gpu))
    layout = memory_layout(shape)
    if not scenario.spec.is_dense:
        return moe_memory_terms(scenario.spec, layout, scenario.seq_len, a, shape.ep, shape.etp)
    return memory_terms(scenario.spec, layout, scenario.seq_len, a)


def memory_layout(shape: Shape) -> Layout:
    """The layout the memory terms are priced at: the shape at its smallest DP degree (the
    terms' DP part is read from them for any degree) and with full pipelines, the
    micro-batches per step from which no rank holds more in flight
    (models.pipeline.full_pipeline_microbatches). Memory grows with the micro-batches per
    step, so the terms are the memory of every count from that one and at least the
    memory of any smaller count: exact wherever a plan's m is at least it, an upper bound
    only with the interleaved schedule at m = p (ranks past the first hold fewer chunks
    than their warm-up), where a degree below dp_min_memory may fit. Not Shape.probe_layout
    (m = p): there PP 4, VP 2 and a split of 8/10/10/8 layers hold rank 1's 10 layers at 4
    micro-batches, 4.5 from m = 8, and both solvers took a plan 2.2 GB over its GPU."""
    step = shape.dp_step
    return shape.layout(step, full_pipeline_microbatches(max(1, shape.pp), shape.vp))


def shape_bound_terms(
    scenario: Scenario, shape: Shape, profiled: Assumptions, cache: dict | None = None
) -> list[tuple[float, float]]:
    """shape_memory_terms of the ranks that can bind (a MoE / MLA / MTP model's
    moe_memory_terms' ``binding``: of ranks equal but for their activations, the one storing
    the most); dp_min_from_terms gives the same degree from them as from every rank.
    A MoE shape's come from its ranks at a micro-batch of 1 (moe_unit_bound_ranks),
    kept in ``cache`` for its other micro-batches when given (keyed as the memory terms,
    less the micro-batch)."""
    if scenario.spec.is_dense:
        return shape_memory_terms(scenario, shape, profiled)
    key = ("unit", profiled.flash_attention, *shape[1:5], *shape[6:])
    unit = None if cache is None else cache.get(key)
    if unit is None:
        layout = memory_layout(shape._replace(micro_batch=1))
        ranks = moe_unit_bound_ranks(
            scenario.spec, layout, scenario.seq_len, profiled, shape.ep, shape.etp
        )
        unit = (layout, ranks)
        if cache is not None:
            cache[key] = unit
    layout, ranks = unit
    return moe_bound_terms_at(ranks, shape.micro_batch, layout, profiled, shape.ep, shape.etp)


def dp_min_for_memory(scenario: Scenario, shape: Shape, gpu: GPUSpec) -> int | None:
    """Smallest d with memory(d) <= capacity x memory_scale at full pipelines (memory_layout)."""
    capacity = usable_memory_gb(gpu.memory_gb, scenario.assumptions) * scenario.memory_scale
    return dp_min_from_terms(shape_memory_terms(scenario, shape), shape.cp, capacity)


def memory_frontier(terms: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The terms no other one dominates (a term whose fixed and sharded parts are both at
    most another's, or equal to an earlier one's, is left out), largest fixed part first.

    dp_min_from_terms reads the terms only through a maximum over them and through
    the closed form's largest degree and any stage that never fits, each of which a
    dominated term cannot set: rounded IEEE operations are monotone, so fixed + sharded
    / x of a dominated term never exceeds the dominating one's. It gives the same degree
    from the frontier as from every term, in fewer steps (a pipeline's ranks differ
    mostly by their micro-batches in flight: the first dominates the middle ones)."""
    out: list[tuple[float, float]] = []
    for fixed, sharded in sorted(terms, key=lambda t: (-t[0], -t[1])):
        if not out or sharded > out[-1][1]:
            out.append((fixed, sharded))
    return out


def dp_min_from_terms(terms: list[tuple[float, float]], cp: int, capacity: float) -> int | None:
    """Smallest d with max over stages of fixed + sharded / (d * cp) <= capacity.

    Memory is fixed + sharded / (d * cp) on each rank that can bind (ZeRO-1 shards the
    optimizer states); the bound is solved in closed form and checked against the terms'
    own totals (float rounding), so both solvers agree with it exactly. The terms are
    models.memory's rank totals at full pipelines (memory_layout; tests/
    test_moe_memory_bound.py compares them with the evaluator's), and every plan a solver
    returns is evaluated again (solvers.result.checked)."""

    limit = capacity + TOL

    def fits(dp: int) -> bool:  # the terms' total, stage by stage (models.memory's sums)
        ranks = dp * cp
        for fixed, sharded in terms:  # (their maximum at most the limit: each one is)
            if fixed + sharded / ranks > limit:
                return False
        return True

    need = 1
    for fixed, sharded in terms:
        room = limit - fixed
        if room <= 0:
            return None
        need = max(need, math.ceil(sharded / (room * cp)) if sharded > 0 else 1)
    if need > GPU_CAP:
        return None
    # guard the closed form against float rounding
    while need > 1 and fits(need - 1):
        need -= 1
    while not fits(need):
        need += 1
        if need > GPU_CAP:
            return None
    return need


_SPACES: dict[tuple, list[Candidate]] = {}
_SPACES_KEPT = 8
# optimize prepares the alternatives' GPUs in one thread while others solve and explain
# (designer.alternatives): the two caches below are read and written under this lock
_CACHE_LOCK = threading.Lock()


def _kept(cache: dict, key: tuple, value: Any) -> Any:
    """The value a cache keeps for ``key``: one another thread stored first, else
    ``value`` (stored, the oldest entry evicted past ``_SPACES_KEPT``), so that callers
    racing on one key share one object and the caches never grow past their size."""
    with _CACHE_LOCK:
        if key not in cache:
            while len(cache) >= _SPACES_KEPT:
                cache.pop(next(iter(cache)))
            cache[key] = value
        return cache[key]


def _space_key(scenario: Scenario) -> tuple:
    """Everything a shape's candidate depends on (not the budget, deadline, tokens or prices:
    a sweep over those reuses the space, with the coefficients already computed)."""
    cat = scenario.catalog
    perf = ("price_usd", "cloud_usd_per_gpu_hour", "price_source", "evidence")
    return (
        pipeline_splits,  # the function itself: a replaced one (tests) enumerates afresh
        scenario.spec.model_dump_json(),
        scenario.seq_len,
        tuple(cat.gpu(g).model_dump_json(exclude=set(perf)) for g in scenario.gpus),
        tuple(sorted({cat.nic(n).bw_gb_per_s_per_direction for n in scenario.nics})),
        scenario.precisions,
        tuple(sorted(scenario.unmeasured)),
        scenario.recompute_modes,
        micro_batch_options(scenario),
        scenario.virtual_stages,
        scenario.max_virtual_stages,
        scenario.assumptions.model_dump_json(),
        tuple(f.active(scenario) for f in SHAPE_RULES),
        scenario.ep_in_domain and scenario.spec.is_moe,  # ep_domain's shape rule's request
        scenario.memory_scale,
    )


class EnumerationStopped(Exception):
    """enumerate_candidates stopped by its ``stop`` before the space was whole (nothing
    of it is kept but the memory terms already computed, which a later call reuses)."""


def enumerate_candidates(
    scenario: Scenario,
    prepared: PreparedQuestion | None = None,
    blocked: bool = True,
    stop: Callable[[], bool] | None = None,
) -> list[Candidate]:
    """Every shape of the decision space, in a fixed order.

    The memory bound of every shape the enforced structural families allow is
    computed here (presolve needs each one), skipping the micro-batches above one
    that never fits; the step coefficients wait until a solver asks. The last few
    spaces are kept: questions that differ only in their limits, tokens or prices
    (a sweep) share one space and its computed coefficients. ``prepared``:
    ``scenario.prepare()``, when the caller has it (the NIC options per GPU type).
    ``blocked`` False: without the shapes an enforced shape rule rules out (presolve drops
    them first, so a solve's answer is the same; an explanation, which switches the rules
    off, needs them), the others in the same order. ``stop``: asked between the
    (TP, CP, PP, VP) groups of a space not yet kept; EnumerationStopped when it says so."""
    key = (_space_key(scenario), blocked)
    with _CACHE_LOCK:
        space = _SPACES.get(key)
    if space is None:
        q = prepared if prepared is not None else scenario.prepare()
        space = _kept(_SPACES, key, _enumerate(scenario, q, blocked, stop))
    return list(space)


def enumerate_within(
    scenario: Scenario, time_limit_s: float | None, prepared: PreparedQuestion | None = None
) -> list[Candidate] | None:
    """enumerate_candidates bounded by the solve's time limit (None: unbounded): None when
    the limit runs out first (a spec at its field limits, 100,000 MoE layers, takes about a
    minute). A kept space returns at once, so only a cold enumeration can be stopped."""
    if time_limit_s is None:
        return enumerate_candidates(scenario, prepared)
    deadline = time.perf_counter() + time_limit_s
    try:
        return enumerate_candidates(scenario, prepared, stop=lambda: time.perf_counter() > deadline)
    except EnumerationStopped:
        return None


_TERMS: dict[tuple, dict] = {}


def _terms_cache(scenario: Scenario) -> dict:
    """The memory terms (and the other GPU-independent numbers, _Source) of the shapes of
    every question with this model, sequence length and assumptions (shape_memory_terms
    and moe_gemm_work read nothing else; with_profile's FlashAttention, the one thing they
    take from the GPU, is in each key): the GPUs an explanation's
    alternatives solve one at a time, and the precisions beside the answer's, share them
    instead of recomputing them per question. The last few are kept."""
    key = (
        scenario.spec.model_dump_json(),
        scenario.seq_len,
        # the terms do not read whether CP may cross servers (a shape rule's request)
        scenario.assumptions.model_dump_json(exclude={"cp_across_servers"}),
    )
    with _CACHE_LOCK:
        terms = _TERMS.get(key)
    return terms if terms is not None else _kept(_TERMS, key, {})


def _enumerate(
    scenario: Scenario,
    q: PreparedQuestion,
    keep_blocked: bool,
    stop: Callable[[], bool] | None = None,
) -> list[Candidate]:
    spec = scenario.spec
    out: list[Candidate] = []
    terms_cache = _terms_cache(scenario)
    for gpu_name in scenario.gpus:
        gpu = scenario.catalog.gpu(gpu_name)
        precisions = [
            p
            for p in scenario.precisions
            if gpu.peak_tflops(p) is not None and (gpu_name, p) not in scenario.unmeasured
        ]
        fitting = q.nics_for[gpu_name]
        if not fitting:  # no NIC of the question fits this server (PCIe, design, fabric)
            continue
        nominal = Network(
            "-",
            max(q.nic_counts[gpu_name]),
            max(n.bw_gb_per_s_per_direction for n in fitting),
        )
        source = _Source(scenario, gpu, nominal, terms_cache)
        # with FlashAttention, selective recomputation (of the attention scores) is what the
        # kernel already does: the same time and memory as none, so one of the two is searched
        flash = gpu.calibration.flash_attention
        recompute_modes = [
            rc
            for rc in scenario.recompute_modes
            if not (flash and rc == "selective" and "none" in scenario.recompute_modes)
        ]
        walk = _Walk(scenario, gpu_name, source, recompute_modes, precisions, out, keep_blocked)
        for tp in tp_options(spec, gpu):
            for cp in cp_options(scenario.seq_len):
                for pp in pp_options(spec.layers):
                    vps = scenario.virtual_stages or vp_options(
                        spec.layers, pp, scenario.max_virtual_stages
                    )
                    for vp in vps:
                        if stop is not None and stop():
                            raise EnumerationStopped
                        for split, (ep, etp) in itertools.product(
                            pipeline_splits(spec.layers, pp, vp), expert_options(spec, tp, gpu)
                        ):
                            walk.micro_batches(tp, cp, pp, vp, split, ep, etp)
    return out


class _Walk:
    """_enumerate's shapes of one GPU: for each (TP, CP, PP, VP, split, EP, ETP), every
    micro-batch, recomputation and precision, appended to ``out`` in that order (those an
    enforced shape rule rules out only with ``keep_blocked``)."""

    def __init__(
        self,
        scenario: Scenario,
        gpu_name: str,
        source: _Source,
        recompute_modes: list[str],
        precisions: list[str],
        out: list[Candidate],
        keep_blocked: bool = True,
    ) -> None:
        self.scenario, self.gpu_name, self.source, self.out = scenario, gpu_name, source, out
        self.keep_blocked = keep_blocked
        self.recompute_modes, self.precisions = recompute_modes, precisions
        self.sizes = micro_batch_options(scenario)
        # the structural rules do not look at the micro-batch or the recomputation (nor at EP
        # and ETP, but for ep_domain's --ep-in-domain: then they join the key, ``experts``)
        self.structural: dict[tuple, frozenset[str]] = {}
        self.blocked: dict[tuple, bool] = {}  # by an enforced structural family

    def micro_batches(
        self, tp: int, cp: int, pp: int, vp: int, split: Split, ep: int, etp: int
    ) -> None:
        """The candidates of one shape but its micro-batch, recomputation and precision."""
        gpu_name, source, out = self.gpu_name, self.source, self.out
        sizes, modes = self.sizes, self.recompute_modes
        if not sizes or not modes:
            return
        # fresh: a key first seen here, unblocked for the loop's first stop test (its rules
        # were computed on its first shape, in the loop, before they were known)
        keys, fresh = self._rules(tp, cp, pp, vp, split, ep, etp)
        blocked = self.blocked
        first_past = sizes[0] > STRUCTURAL_MICRO_BATCHES[-1]
        if all(blocked[key] for _, key, _ in keys) and not (fresh and first_past):
            if not self.keep_blocked:
                return
            # no memory bound to ask: the sizes up to the first one past the structural
            # ones (the loop below stops there when every precision is blocked)
            head = itertools.takewhile(lambda mb: mb <= STRUCTURAL_MICRO_BATCHES[-1], sizes)
            out += [
                Candidate(
                    Shape(gpu_name, tp, cp, pp, vp, mb, rc, prec, split, ep, etp), found, source
                )
                for mb in head
                for rc in modes
                for prec, _, found in keys
            ]
            return
        # memory grows with the micro-batch: (recompute, precision) -> the smallest
        # micro-batch that never fits
        never_fits: dict[tuple[str, str], int] = {}
        for i, mb in enumerate(sizes):
            # above the sizes searched before (which explain's diagnoses keep), stop once no
            # unblocked (recompute, precision) fits: memory grows with the micro-batch, so
            # no larger one would
            if (
                mb > STRUCTURAL_MICRO_BATCHES[-1]
                and not (fresh and i == 0)
                and all(
                    blocked[key] or (rc, prec) in never_fits
                    for rc in modes
                    for prec, key, _ in keys
                )
            ):
                break
            for rc in modes:
                for prec, key, found in keys:
                    if blocked[key] and not self.keep_blocked:
                        continue
                    shape = Shape(gpu_name, tp, cp, pp, vp, mb, rc, prec, split, ep, etp)
                    cand = Candidate(shape, found, source)
                    out.append(cand)
                    if blocked[key]:
                        continue  # presolve will not ask for its memory bound
                    smallest = never_fits.get((rc, prec))
                    if smallest is not None and mb >= smallest:
                        cand.never_fits_memory()
                    elif cand.dp_min_memory is None:
                        never_fits[rc, prec] = min(mb, smallest or mb)

    def _rules(
        self, tp: int, cp: int, pp: int, vp: int, split: Split, ep: int, etp: int
    ) -> tuple[list[tuple[str, tuple, frozenset[str]]], bool]:
        """(precision, rule key, shape rules broken) of each precision, and whether a key
        is new: the rules computed on the first shape of a key (its first micro-batch and
        recomputation), kept for the key's other shapes (``structural``, ``blocked``)."""
        scenario, structural = self.scenario, self.structural
        experts = (ep, etp) if scenario.ep_in_domain else ()
        mb, rc = self.sizes[0], self.recompute_modes[0]
        out, fresh = [], False
        for prec in self.precisions:
            key = (tp, cp, pp, vp, prec, split, *experts)
            found = structural.get(key)
            if found is None:
                shape = Shape(self.gpu_name, tp, cp, pp, vp, mb, rc, prec, split, ep, etp)
                found = structural[key] = structural_violations(scenario, shape, self.source.gpu)
                self.blocked[key] = any(active(scenario, f) for f in found)
                fresh = True
            out.append((prec, key, found))
        return out, fresh


def with_memory_scale(
    scenario: Scenario, candidates: list[Candidate], rules: bool = False
) -> list[Candidate]:
    """The same shapes with their memory bound recomputed for ``scenario.memory_scale``
    (everything else about a candidate is independent of the capacity); ``rules``: their
    shape rules (Candidate.structural) recomputed for ``scenario`` too, whose requests
    differ from the candidates' question (for_question)."""
    out = []
    sources: dict[int, _Source] = {}
    found: dict[tuple, frozenset[str]] = {}  # the rules do not read the micro-batch or recompute
    for cand in candidates:
        src = cand._source
        if id(src) not in sources:  # one source per GPU, still sharing the memory cache
            gpu = scenario.catalog.gpu(cand.shape.gpu)
            sources[id(src)] = _Source(scenario, gpu, src.network, src.terms_cache)
        structural = cand.structural
        if rules:
            key = cand.shape._replace(micro_batch=0, recompute="")
            if key not in found:
                found[key] = structural_violations(scenario, cand.shape, sources[id(src)].gpu)
            structural = found[key]
        derived = Candidate(cand.shape, structural, sources[id(src)], cand)
        if scenario.memory_scale == src.scenario.memory_scale:
            derived._dp_min = cand._dp_min  # the same capacity: the same memory bound
        out.append(derived)
    return out


def _rule_requests(s: Scenario) -> tuple[bool, bool]:
    """The question's settings its shape rules read besides the shape: tp_domain's
    --cp-across-servers, ep_domain's --ep-in-domain."""
    return s.assumptions.cp_across_servers, s.ep_in_domain


def for_question(
    scenario: Scenario, base: Scenario, candidates: list[Candidate]
) -> list[Candidate]:
    """``base``'s candidates for ``scenario``, a question derived from it (an explanation's
    relaxation): the same list when their memory scale and shape-rule requests agree, else
    the same shapes with their memory bound or shape rules recomputed (with_memory_scale),
    sharing the step coefficients."""
    rules = _rule_requests(scenario) != _rule_requests(base)
    if scenario.memory_scale == base.memory_scale and not rules:
        return candidates
    return with_memory_scale(scenario, candidates, rules)
