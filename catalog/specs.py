"""Pydantic specifications of the hardware the designer can buy or rent.

Every number carries its unit in the field name and every price its source and
date. Bandwidths are per direction unless a name says otherwise (1 GB = 1e9 B).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    computed_field,
    field_validator,
    model_validator,
)

_DATE_PATTERN = r"^\d{4}-\d{2}(-\d{2})?$"
PCIeGen = Annotated[int, Field(ge=3, le=7)]
"""A PCIe generation (a GPU's, a NIC's, a server's NIC slots)."""


# The scale-out fabrics (SwitchSpec.fabric) by the names a question uses (--fabric).
FABRICS = {"ib": "infiniband", "ethernet": "ethernet", "any": "any"}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
"""Control characters (tab and newline aside): a name with ESC or BEL would reach the
terminal (issue 20, 22)."""


class NumbersNotBools(BaseModel):
    """A model whose number fields refuse true and false (pydantic reads ``layers: true`` as
    1) and text (``layers: "80"``, issue 33) and whose text refuses control characters
    (issue 20, 22). The model specs, the
    question and the catalog entries derive from it."""

    @field_validator("*", mode="before")
    @classmethod
    def _plain(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and _CONTROL.search(value):
            raise ValueError("holds a control character; use printable text")
        if isinstance(value, (bool, str)) and info.field_name in cls.model_fields:
            annotation = cls.model_fields[info.field_name].annotation
            kinds = set(get_args(annotation)) or {annotation}
            numeric = bool(kinds & {int, float}) and Any not in kinds
            # true where a number (or a suffixed number's text: 30M) belongs is neither
            if isinstance(value, bool) and numeric and bool not in kinds:
                raise ValueError(f"{str(value).lower()} is not a number; give a number")
            if type(value) not in kinds and numeric and str not in kinds:
                # issue 33: "80" where a number belongs is text, not the number
                raise ValueError(f"{value!r} is text, not a number; give the number unquoted")
        return value


class _Strict(NumbersNotBools):
    """Base for catalog entries: unknown fields are rejected, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


STACKS = ("megatron-core", "vtrain-2022", "pytorch-fsdp2")
"""Software stacks the performance model has a profile for (catalog ``stacks`` keys).

``megatron-core``: Megatron-Core / NeMo with Transformer Engine as NVIDIA's 2024-2025
performance recipes run it (distributed optimizer with overlapped gradient
reduce-scatter and parameter all-gather, TP communication overlap, overlapped
pipeline sends, FlashAttention, fused kernels, FP8 GEMMs); the default for planning.
``vtrain-2022``: 2022-era Megatron-LM as in the vTrain A100 measurements (no
gradient bucketing, no TP overlap, unfused attention, eager kernels).
``pytorch-fsdp2``: PyTorch FSDP2 (``fully_shard``) with torch.compile as OLMo-core,
torchtitan and IBM's fms-fsdp run it: a profile derived from megatron-core's
(``derived_from``), its compute slower by one fitted level (``compute_time_factor``,
gpus.yaml says where it comes from and how it was fitted: python bench/fsdp_level.py);
collectives and overlap as megatron-core's. Only a question that names it uses it.
"""
DEFAULT_STACK = "megatron-core"
MIN_LIFETIME_YEARS = 0.003
"""The shortest lifetime --pricing tco spreads the capex over: about a day (26 hours). The
job's share of the capex is training days / (365 x lifetime); hardware written off in
under a day is no service life, and the share's rate per unit of GPU-time then leaves the
CP-SAT model's 64-bit range (1e-10 years failed inside OR-Tools, 1e-300 turned the GPU-time
cap into NaN)."""

COMPUTE_RATE_FIELDS = ("matmul_efficiency", "attention_efficiency", "fp8_matmul_efficiency")
"""Profile fields a micro-batch's compute time is inversely proportional to
(models.step.work_gemm_s)."""
COMPUTE_TIME_FIELDS = (
    "elementwise_passes",
    "fp8_cast_passes",
    "kernel_overhead_us_per_layer",
    "host_issue_us_per_layer",
)
"""Profile fields a micro-batch's compute time is proportional to
(models.step.memory_bound_per_microbatch_s, host_issue_per_microbatch_s)."""
DERIVED_KEYS = frozenset({"derived_from", "compute_time_factor", "note"})
"""The keys of a derived profile in the catalog (GPUSpec._derive_stacks)."""


def scaled_compute(profile: dict[str, Any], factor: float) -> dict[str, Any]:
    """``profile`` (a Calibration's fields) with every compute constant scaled so that a
    micro-batch's compute (GEMMs, attention, memory-bound kernels, launch overhead, the
    host-issue floor) takes ``factor`` times as long: rates divided by it, passes and
    overheads multiplied; the collectives' and overlap fields are kept. Exact for the
    compute sum; the floor max(compute, host - TP time) scales by ``factor`` up to its TP
    term (models.step.step_coefficients)."""
    if not factor > 0:
        raise ValueError(f"compute_time_factor must be positive (got {factor!r})")
    out = dict(profile)
    for name in COMPUTE_RATE_FIELDS:
        if out.get(name) is not None:
            out[name] = out[name] / factor
    for name in COMPUTE_TIME_FIELDS:
        if out.get(name) is not None:
            out[name] = out[name] * factor
    return out


class Evidence(_Strict):
    """How a (GPU, stack) profile was checked against measured training runs.

    Errors are signed (predicted - measured) / measured step time, in percent,
    recorded by ``python bench/accuracy.py --evidence`` and re-checked by the tests.
    """

    runs: int = Field(ge=1, description="measured runs the profile was checked on")
    mape_pct: float = Field(ge=0, description="mean absolute step-time error, percent")
    worst_pct: float = Field(ge=0, description="largest absolute step-time error, percent")
    error_lo_pct: float = Field(
        description="lower end of the band that holds about 80% of new runs' signed errors "
        "(calibration/error_band.py: the 10th percentile at 9+ runs, a prediction interval "
        "under 9), percent: the model too fast"
    )
    error_hi_pct: float = Field(
        description="upper end of that band (the 90th percentile at 9+ runs), percent: the "
        "model too slow"
    )
    sets: str = Field(min_length=1, description="the measurement sets and precisions")
    precisions: tuple[str, ...] = Field(
        ("bf16",), min_length=1, description="the training precisions the runs used"
    )
    bands: dict[str, tuple[float, float]] = Field(
        default_factory=dict,
        description="per model family and precision ('dense bf16'), the band of the signed "
        "errors of those runs alone (as error_lo_pct and error_hi_pct), percent; a plan of "
        "that family and precision is read with it (models/evidence_range.py)",
    )
    sources: dict[str, dict[str, int]] = Field(
        default_factory=dict,
        description="per precision, the runs of each organisation that published them "
        "(first-party figures are one organisation); empty when not recorded "
        "(models.evidence_rule then counts runs alone)",
    )
    multi_server_runs: dict[str, int] = Field(
        default_factory=dict,
        description="per precision, the runs that spanned more than one server of the GPU "
        "(their scale-out network was in the measurement); empty when not recorded "
        "(models.evidence_rule then asks for none)",
    )
    releases: str = Field(
        "",
        description="the software releases the runs measured, oldest to newest (MoE "
        "profiles: python bench/moe_accuracy.py; MoE speed moves between releases); "
        "empty when not recorded",
    )


class Calibration(_Strict):
    """Achievable-efficiency constants of the performance model for one (GPU, stack).

    Fitted on measured runs (``bench/calibrate.py``; the note says on which).
    The mechanisms of modern stacks are separate named terms whose defaults
    switch them off, so a profile without them is the 2022 model. Bounds are physical:
    efficiencies of at least 1% (a tinier one only overflows the solvers' time units),
    overheads of at most a second, passes of at most a thousand.
    """

    matmul_efficiency: float = Field(
        ge=0.01, le=1, description="fraction of the dense peak reached by large transformer GEMMs"
    )
    matmul_half_width: float = Field(
        ge=0,
        le=1e6,
        description="GEMM width (hidden / TP, in elements) at which efficiency falls to half "
        "of matmul_efficiency: eff = matmul_efficiency * w / (w + matmul_half_width)",
    )
    elementwise_passes: float = Field(
        ge=0,
        le=1000,
        description="HBM passes over a layer's activations (Korthikanti's no-recompute bytes) "
        "made by memory-bound kernels (norms, softmax, dropout, GeLU) per forward",
    )
    kernel_overhead_us_per_layer: float = Field(
        ge=0,
        le=1e6,
        description="fixed launch and synchronisation time per layer per forward, microseconds",
    )
    host_issue_us_per_layer: float = Field(
        0.0,
        ge=0,
        le=1e6,
        description="host (CPU) time to issue one layer's kernels per forward-equivalent, "
        "microseconds: a micro-batch's stage time is at least this floor (launch-bound)",
    )
    scale_up_bus_efficiency: float = Field(
        ge=0.01,
        le=1,
        description="achieved / nominal bandwidth of collectives on the scale-up link",
    )
    network_bus_efficiency: float = Field(
        ge=0.01, le=1, description="achieved / nominal bandwidth of collectives over the NICs"
    )
    collective_latency_us: float = Field(
        ge=0,
        le=1e6,
        description="latency per ring step of a collective (and per send), microseconds",
    )
    attention_efficiency: float | None = Field(
        None,
        ge=0.01,
        le=1,
        description="FlashAttention: fraction of the dense BF16 peak reached by the attention "
        "scores and values (always BF16); None: unfused attention counted with the GEMMs",
    )
    causal_attention_skip: bool = Field(
        False,
        description="FlashAttention skips the fully masked half of the causal score matrix "
        "(Dao 2023): the attention work is s/2 per token instead of s",
    )
    fp8_matmul_efficiency: float | None = Field(
        None,
        ge=0.01,
        le=1,
        description="fraction of the dense FP8 peak reached by the linear layers' FP8 GEMMs "
        "(Transformer Engine: attention and the output layer stay BF16); None: every FLOP of "
        "an FP8 run at matmul_efficiency of the FP8 peak",
    )
    fp8_cast_passes: float = Field(
        0.0,
        ge=0,
        le=1000,
        description="extra HBM passes over a layer's activations per forward-equivalent for "
        "FP8 casts, transposes and amax scaling of the GEMM inputs",
    )
    tp_overlap_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of the tensor-parallel all-gather / reduce-scatter time hidden "
        "behind the GEMMs (Megatron-Core --tp-comm-overlap, userbuffers)",
    )
    pp_overlap_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of the pipeline sends hidden behind compute (overlapped P2P)",
    )
    pp_sync_us_per_send: float = Field(
        0.0,
        ge=0,
        le=1e6,
        description="exposed time per pipeline send of a host-synchronised schedule, "
        "microseconds: 2022 Megatron-LM synchronises the device after each batched P2P "
        "exchange, so the host's relaunch of the next micro-batch's kernels is not hidden",
    )
    grad_overlap_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of one micro-batch's forward + backward that hides the distributed "
        "optimizer's bucketed gradient reduce-scatter and parameter all-gather",
    )
    param_gather_overlap_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of each micro-batch's forward + backward that hides its ZeRO-3 / "
        "FSDP parameter all-gathers (PyTorch FSDP forward and backward prefetch, Megatron-FSDP "
        "overlapped parameter gather); 0: charged in full",
    )
    zero3_microbatch_grad_reduce_bytes: float = Field(
        0.0,
        ge=0,
        le=8,
        description="ZeRO-3 / FSDP: bytes per parameter of the gradient reduce-scatter issued "
        "after every micro-batch's backward (PyTorch FSDP2 reduces each backward unless "
        "set_requires_gradient_sync(False); its MixedPrecisionPolicy reduce_dtype: 4 for "
        "float32, 2 for bfloat16); it shares the gathers' overlap window and the backward's "
        "last reduce-scatter is exposed (models.step.zero3_microbatch_s); 0: off, the "
        "gradients reduce-scattered once a step (before issue 31, and with PP: PyTorch's "
        "pipeline stages turn the per-micro-batch reduction off), accumulated unsharded "
        "until then, in this dtype where it is set (models.memory.zero3_kept_bytes)",
    )
    zero3_overlap_hbm_passes: float = Field(
        0.0,
        ge=0,
        le=16,
        description="ZeRO-3 / FSDP: HBM passes per byte a GPU sends in the collectives that "
        "each micro-batch's compute hides (param_gather_overlap_fraction): NCCL's SM kernels "
        "store what they receive and read it back, plus the user buffers (2 to 3 passes, "
        "NVIDIA/nccl#1428), and that HBM traffic slows the compute it overlaps "
        "(models.step.zero3_contention_s); 0: the hidden collectives cost nothing",
    )
    zero3_pp_unsharded_params: bool = Field(
        False,
        description="ZeRO-3 / FSDP with PP > 1 on PyTorch's pipeline stages: each stage keeps "
        "its parameters unsharded from the step's first forward to its last backward, "
        "gathered once a step, and its gradients until the last backward "
        "(torch.distributed.pipelining's backward_maybe_with_nosync calls "
        "set_reshard_after_backward(False) and set_requires_gradient_sync(False), "
        "torchtitan's apply_fsdp sets reshard_after_forward to not pp_enabled; "
        "models.memory.zero3_kept_bytes, zero3_microbatch_reduce_bytes); False (Megatron-Core's "
        "FSDP): with PP as without, resharded after every pass, gathered and its gradients "
        "reduce-scattered every micro-batch",
    )
    note: str = Field(min_length=1, description="how the constants were fitted")

    @property
    def flash_attention(self) -> bool:
        """Whether the profile runs attention as FlashAttention (``attention_efficiency`` set)."""
        return self.attention_efficiency is not None


def _derive_stacks(data: Any) -> Any:
    """A GPU's stack profile given as ``derived_from`` (another stack of the same GPU, a
    full profile), ``compute_time_factor`` and optionally a note and fields of its own
    becomes that profile with its compute scaled (scaled_compute), then those fields."""
    if not isinstance(data, dict) or not isinstance(data.get("stacks"), dict):
        return data
    stacks = dict(data["stacks"])
    for name, block in stacks.items():
        if not (isinstance(block, dict) and "derived_from" in block):
            continue
        base = stacks.get(block["derived_from"])
        if isinstance(base, Calibration):
            base = base.model_dump()
        if not isinstance(base, dict) or "derived_from" in base:
            raise ValueError(
                f"stacks.{name}.derived_from: {block['derived_from']!r} is not a full profile "
                f"of this GPU; name one of {', '.join(sorted(k for k in stacks if k != name))}"
            )
        factor = block.get("compute_time_factor")
        if isinstance(factor, bool) or not isinstance(factor, (int, float)):
            raise ValueError(f"stacks.{name}.compute_time_factor: give a positive number")
        # the base is checked first, under its own name: a bad value there is the file's,
        # not the derived profile's scaled copy of it (which would name another stack)
        try:
            Calibration.model_validate(base)
        except ValidationError as err:
            first = err.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            raise ValueError(
                f"stacks.{block['derived_from']}.{where}: {first['msg']} "
                f"(got {first.get('input')!r})"
            ) from None
        own = {k: v for k, v in block.items() if k not in ("derived_from", "compute_time_factor")}
        stacks[name] = {**scaled_compute(base, float(factor)), **own}
    return {**data, "stacks": stacks}


class ServerSpec(_Strict):
    """The server (or rack-scale system) the GPU ships in."""

    gpus_per_server: int = Field(ge=1, le=1024)
    scale_up_domain_gpus: int = Field(
        ge=1, le=4096, description="GPUs that share the fast GPU-GPU link (NVLink domain)"
    )
    nic_slots: int = Field(ge=1, le=64, description="scale-out NICs a server can hold")
    # upper bounds: physically meaningful (a larger value only overflows the solvers)
    overhead_usd: float = Field(
        ge=0,
        le=1e8,
        description="server cost beyond its GPUs: host CPUs, memory, chassis, NVSwitch",
    )
    overhead_source: str = Field(min_length=1)
    overhead_date: str = Field(pattern=_DATE_PATTERN)
    host_power_w: float = Field(
        ge=0,
        le=1e6,
        description="server nameplate power beyond its GPUs' TDP and scale-out NICs "
        "(CPUs, memory, fans, scale-up switches)",
    )
    servers_per_rack: int = Field(
        4, ge=1, le=1024, description="servers a rack holds physically (space, not power)"
    )
    rack_power_kw: float | None = Field(
        None,
        gt=0,
        le=10_000,
        description="power limit of the rack this server type needs (e.g. a liquid-cooled "
        "NVL72 rack); None: the facility's rack_power_kw",
    )
    host_power_source: str = Field(
        "see overhead_source", min_length=1, description="where host_power_w comes from"
    )
    purchase_unit_servers: int = Field(
        1,
        ge=1,
        le=1024,
        description="servers sold only together (18 compute trays of a GB200 NVL72 rack); "
        "a plan's GPU count moves in whole units",
    )
    host_pcie_gen: PCIeGen | None = Field(
        None, description="PCIe generation of the slots the scale-out NICs sit in; None: the GPU's"
    )
    nic_counts: tuple[int, ...] | None = Field(
        None,
        description="scale-out NIC counts the vendor's designs ship per server; those "
        "above nic_slots (a smaller server given in an override) are dropped "
        "(None: any count up to nic_slots)",
    )
    nics: tuple[str, ...] | None = Field(
        None,
        description="the only catalog NICs this server takes (a fixed design, or NIC ports "
        "integrated on the accelerator); None: any NIC its PCIe slots can host",
    )
    nic_source: str = Field(
        "not given", min_length=1, description="source of the NIC slots, counts and choices"
    )

    @model_validator(mode="after")
    def _nic_counts_fit(self) -> ServerSpec:
        if self.nic_counts is not None:
            if any(c < 1 for c in self.nic_counts):
                raise ValueError("nic_counts: every count must be at least 1")
            if not any(c <= self.nic_slots for c in self.nic_counts):
                raise ValueError(
                    f"nic_counts: none of {list(self.nic_counts)} fits nic_slots "
                    f"({self.nic_slots}); give a count the slots hold"
                )
        if self.nics is not None and not self.nics:
            raise ValueError("nics: give at least one NIC name, or leave it out")
        return self

    @property
    def purchase_unit_gpus(self) -> int:
        """GPUs bought together: a plan's GPU count is a multiple of this."""
        return self.purchase_unit_servers * self.gpus_per_server

    def allowed_nic_counts(self, extra_slots: int = 0, enforced: bool = True) -> tuple[int, ...]:
        """NIC counts per server a plan may take: the vendor's counts (or 1..slots), plus
        ``extra_slots`` more slots when the nic_slots rule is relaxed by that many, or up
        to twice the slots when it is not enforced at all."""
        shipped = self.nic_counts or tuple(range(1, self.nic_slots + 1))
        base = tuple(c for c in shipped if c <= self.nic_slots)
        top = self.nic_slots + extra_slots if enforced else 2 * self.nic_slots
        return tuple(sorted(set(base) | set(range(self.nic_slots + 1, top + 1))))


class FailureRates(_Strict):
    """Unexpected job interruptions of a platform: each stops a synchronous training job.

    Per GPU-hour for the GPU's own causes (the GPU, its HBM and SRAM, its system
    processor, silent data corruption) and per server-hour for the rest (host, NIC,
    switches and cables, software, maintenance); a cluster's rate is G x the first plus
    servers x the second (models/goodput.py)."""

    per_gpu_hour: float = Field(ge=0, le=1, description="GPU-caused interruptions per GPU-hour")
    per_server_hour: float = Field(
        ge=0, le=10, description="interruptions per server-hour from the other causes"
    )
    source: str = Field(min_length=1)
    date: str = Field(pattern=_DATE_PATTERN)


class GPUSpec(_Strict):
    """One accelerator type with its server, prices and sources."""

    name: str = Field(min_length=1)
    display_name: str = Field(min_length=1)
    vendor: str = Field(min_length=1)
    # lower bounds: no accelerator below them (a tiny value only overflows the solvers)
    memory_gb: float = Field(ge=1, le=100_000)
    memory_bw_tb_per_s: float = Field(ge=0.01, le=1000)
    dense_bf16_tflops: float = Field(ge=1, le=1e6)
    dense_fp8_tflops: float | None = Field(default=None, ge=1, le=1e6)
    scale_up_bw_gb_per_s_per_direction: float = Field(
        gt=0,
        le=1e6,
        description="a GPU's whole scale-up bandwidth (all its links), per direction",
    )
    scale_up_topology: Literal["switched", "mesh"] = Field(
        "switched",
        description="switched: every peer in the domain at the full bandwidth (NVLink with "
        "NVSwitch); mesh: one direct link per peer (AMD Infinity Fabric, Gaudi 3 RoCE)",
    )
    scale_up_link_gb_per_s_per_direction: float | None = Field(
        None,
        gt=0,
        le=1e6,
        description="mesh only: the bandwidth of the link to one peer, per direction",
    )
    scale_up_source: str = Field(
        "see spec_source", min_length=1, description="source of the scale-up topology"
    )
    pcie_gen: PCIeGen
    tdp_w: float = Field(gt=0, le=100_000)
    price_usd: float = Field(ge=1, le=1e9, description="purchase price of one GPU")
    price_source: str = Field(min_length=1)
    price_date: str = Field(pattern=_DATE_PATTERN)
    cloud_usd_per_gpu_hour: float = Field(ge=0.01, le=1e4)
    cloud_price_source: str = Field(min_length=1)
    cloud_price_date: str = Field(pattern=_DATE_PATTERN)
    spec_source: str = Field(min_length=1)
    server: ServerSpec
    for_sale: bool = Field(
        True,
        description="false: a GPU the market no longer offers (kept to evaluate the runs made "
        "on it); searched only when named with --gpu",
    )
    stacks: dict[str, Calibration] = Field(
        min_length=1, description="performance-model profile per software stack (STACKS)"
    )
    stack: str = Field(DEFAULT_STACK, description="the stack whose profile is in effect")
    measured: dict[str, Evidence] = Field(
        default_factory=dict,
        description="per stack, the measured runs its profile was checked on on this GPU; "
        "a stack without an entry is extrapolated",
    )
    max_cluster_gpus: int | None = Field(
        None,
        ge=1,
        description="the largest cluster the part is sold and supported for (a consumer card: "
        "one workstation or server); None: no limit. Whole-catalog searches cap the GPU "
        "count at it; naming the GPU (--gpu) lifts the cap",
    )
    max_cluster_source: str | None = Field(
        None, min_length=1, description="where max_cluster_gpus comes from"
    )
    measured_moe: dict[str, Evidence] = Field(
        default_factory=dict,
        description="per stack, the mixture-of-experts runs its profile was checked on "
        "(python bench/moe_accuracy.py --evidence); a MoE plan reads its band from these, "
        "not from the dense runs of ``measured``",
    )
    failures: FailureRates | None = Field(
        None,
        description="the platform's interruption rates; None takes the facility's default "
        "(Facility.failures, marked [assumed] for platforms without published fleet data)",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_calibration(cls, data: Any) -> Any:
        """A ``calibration`` block (one profile) applies to every stack: it fills the
        stacks a new entry lacks and overrides fields of those it has (a derived profile,
        _derive_stacks, is derived first, then overridden)."""
        data = _derive_stacks(data)
        if not isinstance(data, dict) or "calibration" not in data:
            return data
        data = dict(data)
        block = data.pop("calibration")
        if not isinstance(block, dict):
            data["stacks"] = {name: block for name in STACKS}
            return data
        stacks = data.get("stacks")
        stacks = dict(stacks) if isinstance(stacks, dict) else {}
        active = stacks.get(data.get("stack", DEFAULT_STACK))
        if block == active:  # a dump read back: the computed field echoes the active profile
            return data
        for name in STACKS:
            have = stacks.get(name)
            stacks[name] = {**have, **block} if isinstance(have, dict) else dict(block)
        data["stacks"] = stacks
        return data

    @computed_field  # type: ignore[prop-decorator]
    @property
    def calibration(self) -> Calibration:
        """The profile of the stack in effect."""
        return self.stacks[self.stack]

    @property
    def evidence(self) -> Evidence | None:
        """Measured runs behind the profile in effect (None: extrapolated)."""
        return self.measured.get(self.stack)

    @property
    def moe_evidence(self) -> Evidence | None:
        """Measured mixture-of-experts runs behind the profile in effect (None: none)."""
        return self.measured_moe.get(self.stack)

    def with_stack(self, stack: str) -> GPUSpec:
        """The same GPU under another stack's profile (KeyError if it has none)."""
        if stack not in self.stacks:
            raise KeyError(stack)
        return self.model_copy(update={"stack": stack})

    def with_calibration(self, calibration: Calibration) -> GPUSpec:
        """The same GPU with the profile in effect replaced (calibration scripts, tests)."""
        return self.model_copy(update={"stacks": {**self.stacks, self.stack: calibration}})

    @model_validator(mode="after")
    def _domain_fits(self) -> GPUSpec:
        if self.stack not in self.stacks:
            raise ValueError(
                f"stack {self.stack!r} has no profile; add stacks.{self.stack} or use one of "
                f"{', '.join(sorted(self.stacks))}"
            )
        s = self.server
        if (
            s.scale_up_domain_gpus < s.gpus_per_server
            and s.gpus_per_server % s.scale_up_domain_gpus
        ):
            raise ValueError("server.scale_up_domain_gpus must divide server.gpus_per_server")
        if (
            s.scale_up_domain_gpus > s.gpus_per_server
            and s.scale_up_domain_gpus % s.gpus_per_server
        ):
            raise ValueError("server.gpus_per_server must divide server.scale_up_domain_gpus")
        return self

    @model_validator(mode="after")
    def _cluster_limit_sourced(self) -> GPUSpec:
        if self.max_cluster_gpus is not None and self.max_cluster_source is None:
            raise ValueError("max_cluster_source: say where max_cluster_gpus comes from")
        return self

    @model_validator(mode="after")
    def _topology_complete(self) -> GPUSpec:
        link = self.scale_up_link_gb_per_s_per_direction
        if self.scale_up_topology == "mesh":
            if link is None:
                raise ValueError(
                    "scale_up_link_gb_per_s_per_direction: a mesh needs the per-peer link bandwidth"
                )
            if link > self.scale_up_bw_gb_per_s_per_direction + 1e-9:
                raise ValueError(
                    "scale_up_link_gb_per_s_per_direction: one link cannot exceed the GPU's "
                    "whole scale-up bandwidth"
                )
        elif link is not None:
            raise ValueError(
                "scale_up_link_gb_per_s_per_direction: only a mesh topology has per-peer links"
            )
        return self

    @property
    def host_pcie_gen(self) -> int:
        """PCIe generation of the server's NIC slots."""
        return self.server.host_pcie_gen or self.pcie_gen

    def peak_tflops(self, precision: str) -> float | None:
        """Dense tensor-core peak at ``precision`` ('bf16' or 'fp8'); None if unsupported."""
        if precision == "bf16":
            return self.dense_bf16_tflops
        if precision == "fp8":
            return self.dense_fp8_tflops
        raise ValueError(f"unknown precision {precision!r}")


class SwitchSpec(_Strict):
    """A scale-out switch; its price per port prices the fabric a NIC needs."""

    name: str = Field(min_length=1)
    display_name: str = Field(min_length=1)
    ports: int = Field(ge=4, le=1024, description="radix (a fat tree needs at least 4)")
    port_speed_gbit_per_s: float = Field(ge=1, le=1e5)
    price_usd: float = Field(ge=1, le=1e8)
    price_source: str = Field(min_length=1)
    price_date: str = Field(pattern=_DATE_PATTERN)
    spec_source: str = Field(min_length=1)
    power_w: float = Field(ge=0, le=1e6, default=0.0)
    fabric: Literal["infiniband", "ethernet"] = Field(
        "infiniband", description="the scale-out fabric the switch builds"
    )
    power_source: str = Field("not given", min_length=1)

    @property
    def price_per_port_usd(self) -> float:
        return self.price_usd / self.ports


class NICSpec(_Strict):
    """A scale-out NIC and the fabric it plugs into."""

    name: str = Field(min_length=1)
    display_name: str = Field(min_length=1)
    speed_gbit_per_s: float = Field(ge=1, le=1e5)
    pcie_gen: PCIeGen
    price_usd: float = Field(ge=0, le=1e7, description="one card; 0 for ports on the accelerator")
    price_source: str = Field(min_length=1)
    price_date: str = Field(pattern=_DATE_PATTERN)
    spec_source: str = Field(min_length=1)
    switch: str = Field(min_length=1, description="catalog switch this NIC connects to")
    integrated: bool = Field(
        False,
        description="ports built into the accelerator or its board (Gaudi 3's RoCE): no card "
        "to buy or slot; only servers that list it in server.nics take it",
    )
    transceiver_usd: float = Field(
        ge=0, le=1e6, description="one optical transceiver (one end of one link at this speed)"
    )
    cable_usd: float = Field(ge=0, le=1e6, description="one fibre cable (one link)")
    link_price_source: str = Field(min_length=1)
    power_w: float = Field(
        0.0, ge=0, le=1000, description="one NIC with its transceiver (server side), watts"
    )
    power_source: str = Field("not given", min_length=1)

    @property
    def bw_gb_per_s_per_direction(self) -> float:
        """Gb/s line rate to GB/s per direction (divide by 8)."""
        return self.speed_gbit_per_s / 8.0


def _bandwidth(default: float, description: str) -> Any:
    """A checkpoint bandwidth in GB/s (Facility), positive and finite."""
    return Field(default, gt=0, le=10_000, description=description)


class Facility(_Strict):
    """Data-centre constants: power, racks, energy price and the fabric's oversubscription."""

    pue: float = Field(
        ge=1, le=5, description="power usage effectiveness: facility power / IT power (to 0.001)"
    )
    pue_source: str = Field(min_length=1)
    usd_per_kwh: float = Field(ge=0, le=100, description="electricity price")
    usd_per_kwh_source: str = Field(min_length=1)
    power_draw_fraction: float = Field(
        gt=0, le=1, description="average draw while training / nameplate IT power"
    )
    power_draw_source: str = Field(min_length=1)
    rack_power_kw: float = Field(gt=0, le=10_000, description="power limit per rack")
    rack_usd: float = Field(ge=0, le=1e8, description="one rack with its PDUs and cabling")
    rack_source: str = Field(min_length=1)
    oversubscription: float = Field(
        ge=1, le=16, description="leaf down:up port ratio of the fat tree (1 = non-blocking)"
    )
    oversubscription_source: str = Field(min_length=1)
    failures: FailureRates | None = Field(
        None, description="interruption rates of a platform without its own (GPUSpec.failures)"
    )
    restart_min: float = Field(
        10.0, ge=0, le=10_000, description="detect, reschedule and reinitialise after a failure"
    )
    restart_source: str = Field("[assumed] not given", min_length=1)
    hot_spare_restart_min: float = Field(
        3.0,
        ge=0,
        le=10_000,
        description="restart when a hot spare server replaces the failed one (no rescheduling)",
    )
    hot_spares_per_100_servers: float = Field(
        2.0,
        gt=0,
        le=100,
        description="hot spare servers per 100 training servers that cover the servers in "
        "repair at the facility's own failure rates (with margin); the cover at the rates in "
        "effect is never less (models/goodput.py spare_cover_per_100)",
    )
    hot_spare_repair_hours: float = Field(
        72.0,
        gt=0,
        le=100_000,
        description="hours a failed server is away in repair: with the failure rates in "
        "effect, the servers in repair a spare pool must cover (Little's law; "
        "models/goodput.py spare_cover_per_100); see hot_spare_source",
    )
    hot_spare_source: str = Field("[assumed] not given", min_length=1)
    # issue 18 item 4: hot spares and checkpoint storage as purchase decisions (the plan
    # chooses one option of each: models/goodput.py with_purchases, models/cost.py)
    hot_spare_options_per_100_servers: tuple[float, ...] = Field(
        (0.0, 1.0, 2.0, 5.0),
        min_length=1,
        max_length=8,
        description="hot spare servers per 100 training servers a plan may buy",
    )
    checkpoint_storage_options_gb_per_s_per_server: tuple[float, ...] = Field(
        (0.5, 1.0, 2.0, 4.0),
        min_length=1,
        max_length=8,
        description="checkpoint storage bandwidths per training server a plan may buy",
    )
    storage_usd_per_gb_per_s: float = Field(
        0.0, ge=0, le=1e7, description="checkpoint storage price per GB/s of write bandwidth"
    )
    storage_price_source: str = Field("[assumed] not given", min_length=1)

    @model_validator(mode="after")
    def _options_are_bandwidths(self) -> Facility:
        """Storage options are positive bandwidths and spare options 0 or more; the
        facility's own storage and no spares are always options (solvers/purchases.py
        adds them), so that a plan the decisions cannot help keeps them."""
        if min(self.checkpoint_storage_options_gb_per_s_per_server) <= 0:
            raise ValueError("checkpoint_storage_options_gb_per_s_per_server must be positive")
        if min(self.hot_spare_options_per_100_servers) < 0:
            raise ValueError("hot_spare_options_per_100_servers must be 0 or more")
        return self

    checkpoint_snapshot_gb_per_s_per_gpu: float = _bandwidth(
        25.0, "asynchronous checkpointing's blocking copy of a GPU's shard to host memory"
    )
    checkpoint_snapshot_source: str = Field("[assumed] not given", min_length=1)
    checkpoint_storage_gb_per_s_per_server: float = _bandwidth(
        1.0, "checkpoint storage write (and read) bandwidth per training server"
    )
    checkpoint_storage_source: str = Field("[assumed] not given", min_length=1)
    checkpoint_interval_floor_min: float = Field(
        1.0,
        ge=0,
        le=10_000,
        description="the shortest checkpoint interval Young's optimum is raised to (0: none)",
    )
    checkpoint_interval_floor_source: str = Field("[assumed] not given", min_length=1)
    lifetime_years: float | None = Field(
        None,
        ge=MIN_LIFETIME_YEARS,
        le=50,
        description="--pricing tco: charge the job capex x training time / lifetime; "
        "None charges the whole capex",
    )
