"""A parallel layout and the software assumptions a step is evaluated under."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

RECOMPUTE_MODES = ("none", "selective", "full")
PRECISIONS = ("bf16", "fp8")

FP8_RECIPES = {
    "mxfp8": "Megatron-LM --fp8-recipe mxfp8, Blackwell's block-scaled FP8",
    "fp8-mx": "MXFP8, Megatron-LM --fp8-recipe mxfp8",
    "fp8-cs": "FP8 with current scaling, Megatron-LM --fp8-recipe tensorwise",
    "fp8-tensorwise": "Megatron-LM --fp8-recipe tensorwise",
    "fp8-ds": "FP8 with delayed scaling, Megatron-LM --fp8-recipe delayed",
    "fp8-delayed": "Megatron-LM --fp8-recipe delayed",
    "fp8-blockwise": "Megatron-LM --fp8-recipe blockwise, DeepSeek-V3's 1x128 / 128x128 tiles",
    "fp8-sc": "FP8 with sub-channel (blockwise) scaling, Megatron-LM --fp8-recipe blockwise",
}
"""The FP8 recipes ``--precision`` takes by name (the names of Megatron-LM's
``--fp8-recipe`` and of NeMo / Megatron-Bridge's precision tables: FP8-CS, FP8-DS, FP8-MX,
FP8-SC), each priced as fp8: the model has the FP8 tensor-core rate and bytes, not a
recipe's scaling work."""
MX_RECIPES = ("mxfp8", "fp8-mx")  # block-scaled: Blackwell's tensor cores only
FOUR_BIT = ("nvfp4", "mxfp4", "fp4")


def precision_spelling(value: str) -> str:
    """--precision as given, in the spelling ``FP8_RECIPES`` keys it: lower case, ``_``
    as ``-`` (FP8_CS, fp8-cs)."""
    return value.strip().lower().replace("_", "-")


@dataclass(frozen=True)
class Layout:
    """Parallel degrees and batch of one training configuration (Megatron-LM terms).

    Rank order is Megatron's: TP fastest, then CP, then DP, then PP, so TP and CP
    groups sit inside a server and pipeline stages are farthest apart.
    """

    tp: int
    pp: int
    dp: int
    micro_batch: int
    global_batch: int
    cp: int = 1
    vp: int = 1
    recompute: str = "selective"
    sequence_parallel: bool | None = None  # None: on when tp > 1
    zero: int = 1
    precision: str = "bf16"
    # Megatron-LM's uneven pipeline split (models/pipeline.py): transformer layers on the
    # first / last pipeline rank (--decoder-first/last-pipeline-num-layers; None: an even
    # share), and the input embedding / the loss counted as one layer each in the split
    # (--account-for-embedding/loss-in-pipeline-split)
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    embedding_in_split: bool = False
    loss_in_split: bool = False
    # Megatron-Core's --pipeline-model-parallel-layout: transformer layers of every
    # virtual stage in stage order (pp x vp of them; stage s on rank s mod pp), for splits
    # the four fields above do not express (None: they decide; models/pipeline.py)
    stage_counts: tuple[int, ...] | None = None
    # the pipeline rank of a MoE model's MTP layers (the layout string's "m"; None: the
    # last rank, Megatron-Core's default); their logits stay with the loss on the last
    mtp_rank: int | None = None
    # Megatron-Core's --microbatch-group-size-per-virtual-pipeline-stage: micro-batches the
    # interleaved schedule runs together on one virtual stage (None: pp, its default;
    # ModelParallelConfig.__post_init__); read only with vp > 1 (models/pipeline.py)
    microbatch_group_size: int | None = None

    @property
    def microbatch_group(self) -> int:
        """The micro-batch group size in effect: ``microbatch_group_size``, else pp."""
        return self.pp if self.microbatch_group_size is None else self.microbatch_group_size

    @property
    def custom_microbatch_group(self) -> bool:
        """A group size other than Megatron-Core's default (pp) that the schedule reads
        (only the interleaved one does, vp > 1)."""
        return self.vp > 1 and self.pp > 1 and self.microbatch_group != self.pp

    def holds_mtp(self, rank: int) -> bool:
        """Whether pipeline rank ``rank`` builds the MTP layers."""
        return rank == (self.pp - 1 if self.mtp_rank is None else self.mtp_rank)

    @property
    def uneven(self) -> bool:
        """Any of Megatron-LM's uneven-split options in use."""
        return (
            self.stage_counts is not None
            or self.first_stage_layers is not None
            or self.last_stage_layers is not None
            or self.embedding_in_split
            or self.loss_in_split
        )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.pp * self.dp * self.cp

    @property
    def sp(self) -> bool:
        """Sequence parallelism in effect (only meaningful with tp > 1)."""
        if self.tp == 1:
            return False
        return True if self.sequence_parallel is None else self.sequence_parallel

    @property
    def grad_accum(self) -> float:
        """Micro-batches per optimizer step per pipeline (E8: global = micro x accum x DP)."""
        return self.global_batch / (self.micro_batch * self.dp)

    def as_dict(self, seq_len: int) -> dict[str, int | float | str | bool | list[int] | None]:
        """The layout at a sequence length, as the JSON reports write it.

        The pipeline split is four flat keys, always present: ``first_stage_layers``
        and ``last_stage_layers`` (int, or null for an even share) and
        ``embedding_in_split``, ``loss_in_split`` (bool); ``stage_counts`` and
        ``mtp_rank`` only when a --pipeline-layout sets them; ``microbatch_group_size``
        only when it is not the default (``custom_microbatch_group``)."""
        d: dict[str, int | float | str | bool | list[int] | None] = {
            "tp": self.tp,
            "pp": self.pp,
            "dp": self.dp,
            "cp": self.cp,
            "vp": self.vp,
            "micro_batch": self.micro_batch,
            "global_batch": self.global_batch,
            "grad_accum": self.grad_accum,
            "seq_len": seq_len,
            "recompute": self.recompute,
            "sequence_parallel": self.sp,
            "zero": self.zero,
            "precision": self.precision,
            "first_stage_layers": self.first_stage_layers,
            "last_stage_layers": self.last_stage_layers,
            "embedding_in_split": self.embedding_in_split,
            "loss_in_split": self.loss_in_split,
        }
        if self.stage_counts is not None:
            d["stage_counts"] = list(self.stage_counts)
        if self.mtp_rank is not None:
            d["mtp_rank"] = self.mtp_rank
        if self.custom_microbatch_group:
            d["microbatch_group_size"] = self.microbatch_group
        return d


class Assumptions(BaseModel):
    """Software-side constants of the performance model, with their sources.

    Defaults follow the seed article (E3: 2 + 2 + 12 bytes per parameter) and
    Megatron-LM's 1F1B schedule.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    weight_bytes: float = Field(2.0, gt=0, description="bf16 weights (seed E3)")
    grad_bytes: float = Field(2.0, gt=0, description="bf16 gradients (seed E3)")
    optimizer_bytes: float = Field(
        12.0, ge=0, description="Adam fp32 master + momentum + variance (seed E3)"
    )
    optimizer_traffic_bytes: float = Field(
        30.0,
        ge=0,
        description="HBM bytes moved per parameter by the Adam step: master, m, v read+write "
        "(24), fp32 grad read (4), bf16 weight write (2)",
    )
    dp_overlap: float = Field(
        0.0,
        ge=0,
        le=1,
        description="fraction of the last micro-batch's backward that hides DP gradient traffic "
        "(0 = no gradient bucketing, as in the calibration set)",
    )
    flash_attention: bool = Field(
        False,
        description="FlashAttention (Dao et al. 2022): the attention score matrix is never "
        "stored, so activations lack Korthikanti's 5as/h term whatever the recomputation; "
        "the callers set it from the stack's profile (its attention_efficiency)",
    )
    fp8_weight_cache_bytes: float = Field(
        1.0,
        ge=0,
        description="bytes per parameter of the FP8 weight copies an FP8 run keeps between "
        "micro-batches (Transformer Engine caches the cast weight on the first micro-batch); "
        "1: the FP8 copy, whose transpose is cast on the fly. Checked on the published runs: "
        "with 2 bytes (a cached transpose too) 7 of 120 runs that ran would not fit, with 1 "
        "byte 4 (bench/memory_accuracy.py --published)",
    )
    runtime_reserved_gb: float = Field(
        0.0,
        ge=0,
        description="fixed per-GPU memory outside the tensors: CUDA context and NCCL "
        "communication buffers, GB (0 by default: the seed's rules count tensors only)",
    )
    memory_overhead_fraction: float = Field(
        0.0,
        ge=0,
        le=1,
        description="allocator fragmentation and temporaries as a fraction of the tensor bytes "
        "(weights, gradients, optimizer, activations, logits); Megatron-LM's "
        "theoretical_memory_usage adds 0.05 to activations; 0 by default (seed rules)",
    )
    memory_headroom_fraction: float = Field(
        0.0,
        ge=0,
        lt=1,
        description="fraction of each GPU's memory a plan keeps free (allocator "
        "fragmentation, peaks the model does not count); usable = memory x (1 - headroom); "
        "0 by default (the seed's rules); the CLI's planning default is "
        "solvers.scenario.DEFAULT_HEADROOM",
    )
    zero3_microbatch_grad_reduce_bytes: float = Field(
        4.0,
        ge=0,
        le=8,
        description="ZeRO-3 / FSDP: the stack profile's bytes per parameter of the gradient "
        "reduce-scatter after every micro-batch's backward (its reduce dtype; 0: reduced once "
        "a step), copied from the profile by models.evaluate.with_profile (4: megatron-core's "
        "and pytorch-fsdp2's, fp32); the memory model keeps the stage's gradients unsharded "
        "at these bytes (grad_bytes where 0) when the reduction waits for the step "
        "(models.memory.zero3_kept_bytes)",
    )
    zero3_pp_unsharded_params: bool = Field(
        False,
        description="ZeRO-3 / FSDP with PP: the stack profile's zero3_pp_unsharded_params (each "
        "stage keeps its parameters unsharded across the step's micro-batches), copied from "
        "the profile by models.evaluate.with_profile (models.memory.zero3_kept_bytes)",
    )
    batch_ceiling_tokens: float | None = Field(None, gt=0)
    batch_floor_tokens: float | None = Field(None, gt=0)
    cp_across_servers: bool = Field(
        False,
        description="context parallelism may leave the scale-up domain, its ring attention "
        "crossing the NICs (models.step.cp_crosses_nics; Llama 3 ran CP 16 across servers, TP "
        "8 inside: Dubey et al. 2024, section 3.3.2); false, the contract's tp_domain rule: TP "
        "x CP inside one scale-up domain (models.feasibility.check_layout; the CLI's "
        "--cp-across-servers)",
    )


@dataclass(frozen=True)
class Network:
    """Scale-out network of one server: NIC count and per-NIC bandwidth."""

    nic_name: str
    nics_per_node: int
    nic_bw_gb_per_s_per_direction: float

    @property
    def node_bw_gb_per_s(self) -> float:
        return self.nics_per_node * self.nic_bw_gb_per_s_per_direction
