"""Memory per GPU during training.

Sources:
- model states: Rajbhandari et al., "ZeRO: Memory Optimizations Toward Training
  Trillion Parameter Models" (SC'20), sections 3.1 and 5: 2 + 2 + 12 bytes per
  parameter for mixed-precision Adam; stage 1 shards the optimizer states, stage 2
  also the gradients, stage 3 also the weights over the data-parallel group.
  Megatron-LM's distributed optimizer is stage 1 and shards over DP x CP.
- activations: Korthikanti et al., "Reducing Activation Recomputation in Large
  Transformer Models" (MLSys'23), eqs. 1-5, in bytes per layer:
  no recompute, TP without SP: s*b*h*(10 + 24/t + 5*a*s/(h*t));
  with SP: s*b*h*(34/t + 5*a*s/(h*t)); selective recompute drops the a*s term;
  full recompute keeps the layer input 2*s*b*h (divided by t with SP).
  The 24 generalises to GQA and other MLP widths term by term (Q 2, K 2*kv/a,
  V 2*kv/a, attention output 2, MLP 4*f/h plain or 6*f/h gated); it is 24 for
  the paper's architecture.
- in-flight micro-batches: with the 1F1B schedule (Narayanan et al. SC'21) the
  first stage holds min(p, m) micro-batches of its layers; interleaving with v
  chunks multiplies this by 1 + (p-1)/(p*v) (Megatron-LM
  theoretical_memory_usage.py); rank r holds min(p - r, m), or with interleaving
  Megatron-LM's warm-up count (models.pipeline.in_flight_at_rank).
- layers per rank: Megatron-LM's split, even or uneven (models.pipeline.stage_layers);
  the most loaded GPU is the largest over the first, middle and last ranks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

from models.layout import Assumptions, Layout
from models.pipeline import StageLoad, in_flight_at_rank, stage_loads
from models.spec import TransformerSpec

GB = 1e9


def split_activation_coeff(spec: TransformerSpec) -> float:
    """The per-layer s*b*h coefficient split by TP (24 for a GPT-3-shaped layer)."""
    mlp = (6.0 if spec.gated_mlp else 4.0) * spec.ffn / spec.hidden
    return 2.0 + 4.0 * spec.kv_ratio + 2.0 + mlp


@lru_cache(maxsize=1 << 16)
def activation_bytes_per_layer(
    spec: TransformerSpec,
    seq_len: int,
    micro_batch: int,
    tp: int = 1,
    sp: bool = False,
    recompute: str = "selective",
    cp: int = 1,
) -> float:
    """Bytes of stored activations of one layer for one micro-batch (Korthikanti eqs. 1-5)."""
    s = seq_len / cp
    b, h, a = micro_batch, spec.hidden, spec.heads
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / (tp if sp else 1)
    attention_scores = 5.0 * a * s / (h * tp) if recompute == "none" else 0.0
    split = split_activation_coeff(spec) / tp
    unsplit = 10.0 / tp if sp else 10.0
    return sbh * (unsplit + split + attention_scores)


def seed_activation_bytes(
    spec: TransformerSpec, seq_len: int, micro_batch: int, tp: int = 1
) -> float:
    """Seed E3's whole-model activations: s*b*h*L*(10 + 24/t), selective recompute, no SP."""
    return seq_len * micro_batch * spec.hidden * spec.layers * (10.0 + 24.0 / tp)


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per GPU on the most loaded pipeline stage, in GB."""

    weights: float
    gradients: float
    optimizer: float
    activations: float
    other: float
    capacity: float  # the GPU's memory
    headroom_fraction: float = 0.0  # kept free (Assumptions.memory_headroom_fraction)

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer + self.activations + self.other

    @property
    def usable(self) -> float:
        """What a plan may fill: the capacity less the headroom."""
        return self.capacity * (1.0 - self.headroom_fraction)

    def as_dict(self) -> dict[str, float]:
        return {
            "weights": self.weights,
            "gradients": self.gradients,
            "optimizer": self.optimizer,
            "activations": self.activations,
            "other": self.other,
            "total": self.total,
            "capacity": self.capacity,
            "usable": self.usable,
            "headroom_fraction": self.headroom_fraction,
        }


def rank_params(spec: TransformerSpec, layout: Layout, load: StageLoad) -> float:
    """Parameters held by one GPU of a pipeline rank: its transformer layers
    (models.pipeline.stage_layers), the input embedding on the first rank and the output
    projection (or, when tied, a copy of the embedding) and final norm on the last."""
    params = load.layers * spec.layer_params()
    if load.embedding:
        params += spec.embedding_params()
    if load.output:
        params += spec.output_params() if layout.pp == 1 else spec.vocab * spec.hidden
        params += spec.hidden
    return params / layout.tp


@lru_cache(maxsize=1 << 16)
def stage_params(spec: TransformerSpec, layout: Layout, stage: str) -> float:
    """Parameters held by one GPU of the first or last pipeline stage, or ("most") of the
    rank that holds the most (its layers as Megatron-LM splits them, models.pipeline)."""
    loads = stage_loads(spec.layers, layout)
    if stage == "most":
        return max(rank_params(spec, layout, load) for load in loads)
    return rank_params(spec, layout, loads[0] if stage == "first" else loads[-1])


def zero_sharded(zero: int) -> tuple[bool, bool, bool]:
    """Which model states the ZeRO stage shards over the data-parallel x CP group, as
    (weights, gradients, optimizer): stage 1 the optimizer states, stage 2 the gradients
    too, stage 3 the weights too (Rajbhandari et al. 2020, ZeRO section 5)."""
    return zero >= 3, zero >= 2, zero >= 1


def model_state_gb(
    params_per_gpu: float, layout: Layout, a: Assumptions
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) GB per GPU under the ZeRO stage (ZeRO section 5)."""
    shard = layout.dp * layout.cp
    on_w, on_g, on_o = zero_sharded(layout.zero)
    weights = params_per_gpu * a.weight_bytes / (shard if on_w else 1)
    grads = params_per_gpu * a.grad_bytes / (shard if on_g else 1)
    optim = params_per_gpu * a.optimizer_bytes / (shard if on_o else 1)
    return weights / GB, grads / GB, optim / GB


@lru_cache(maxsize=1 << 16)
def rank_activation_gb(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    load: StageLoad,
    flash_attention: bool = False,
) -> float:
    """Activations of one GPU of a rank: its layers x per-layer bytes x micro-batches in
    flight on that rank (models.pipeline.in_flight_at_rank; the first rank as
    ``in_flight_microbatches``).

    Full recomputation also materialises one layer's activations during its
    backward (the working set of the recomputed layer).
    """
    # FlashAttention stores no score matrix: its "none" keeps what "selective" keeps
    kept = "selective" if flash_attention and layout.recompute == "none" else layout.recompute
    per_layer = activation_bytes_per_layer(
        spec, seq_len, layout.micro_batch, layout.tp, layout.sp, kept, layout.cp
    )
    held = in_flight_at_rank(load.rank, layout.pp, layout.vp, layout.grad_accum)
    total = per_layer * load.layers * held
    if layout.recompute == "full":
        total += activation_bytes_per_layer(
            spec, seq_len, layout.micro_batch, layout.tp, layout.sp, "selective", layout.cp
        )
    return total / GB


def stage_activation_gb(spec: TransformerSpec, layout: Layout, seq_len: int, stage: str) -> float:
    """Activations of one GPU of the first or last stage (``rank_activation_gb``)."""
    loads = stage_loads(spec.layers, layout)
    return rank_activation_gb(spec, layout, seq_len, loads[0] if stage == "first" else loads[-1])


@lru_cache(maxsize=1 << 16)
def logits_gb(spec: TransformerSpec, layout: Layout, seq_len: int, stage: str) -> float:
    """fp32 logits of one micro-batch on the last stage: s*b*V*4/t bytes (reported as 'other')."""
    if stage != "last" and layout.pp > 1:
        return 0.0
    return 4.0 * (seq_len / layout.cp) * layout.micro_batch * spec.vocab / layout.tp / GB


def min_gpus_for_memory(total_gb: float, capacity_gb: float) -> int:
    """Seed E3: GPUs needed just to hold ``total_gb``, ceil(total / capacity)."""
    return math.ceil(total_gb / capacity_gb - 1e-9)


def fp8_weight_cache_gb(params_per_gpu: float, layout: Layout, a: Assumptions) -> float:
    """FP8 runs keep FP8 copies of the weights between micro-batches
    (``fp8_weight_cache_bytes`` per parameter, not sharded by ZeRO); 0 in BF16."""
    if layout.precision != "fp8":
        return 0.0
    return params_per_gpu * a.fp8_weight_cache_bytes / GB


def _rank_memory(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    a: Assumptions,
    load: StageLoad,
) -> tuple[float, float, float, float, float, float]:
    """(weights, gradients, optimizer, activations, logits, FP8 weight copies) GB of one
    GPU of a rank, unsharded."""
    params = rank_params(spec, layout, load)
    act = rank_activation_gb(spec, layout, seq_len, load, a.flash_attention)
    logits = logits_gb(spec, layout, seq_len, "last" if load.output else "first")
    return (
        params * a.weight_bytes / GB,
        params * a.grad_bytes / GB,
        params * a.optimizer_bytes / GB,
        act,
        logits,
        fp8_weight_cache_gb(params, layout, a),
    )


def usable_memory_gb(memory_gb: float, a: Assumptions) -> float:
    """The memory a plan may fill: the GPU's, less the headroom it keeps free."""
    return memory_gb * (1.0 - a.memory_headroom_fraction)


def memory_per_gpu(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    capacity_gb: float,
    a: Assumptions,
) -> MemoryBreakdown:
    """Memory of the most loaded GPU: the largest over the first rank, the middle ranks
    (one per distinct layer count) and the last rank (models.pipeline.stage_loads).

    ``other`` holds what is not a model tensor: the fp32 logits, the fixed
    ``runtime_reserved_gb`` (CUDA context, NCCL communication buffers) and
    ``memory_overhead_fraction`` of all tensor bytes (allocator fragmentation,
    temporaries); both are explicit assumptions, 0 by default."""
    best: MemoryBreakdown | None = None
    for load in stage_loads(spec.layers, layout):
        params = rank_params(spec, layout, load)
        w, g, o = model_state_gb(params, layout, a)
        w += fp8_weight_cache_gb(params, layout, a)  # reported with the weights
        act = rank_activation_gb(spec, layout, seq_len, load, a.flash_attention)
        logits = logits_gb(spec, layout, seq_len, "last" if load.output else "first")
        overhead = a.memory_overhead_fraction * (w + g + o + act + logits)
        other = a.runtime_reserved_gb + logits + overhead
        mem = MemoryBreakdown(w, g, o, act, other, capacity_gb, a.memory_headroom_fraction)
        if best is None or mem.total > best.total:
            best = mem
    assert best is not None
    return best


def memory_terms(
    spec: TransformerSpec, layout: Layout, seq_len: int, a: Assumptions
) -> list[tuple[float, float]]:
    """Per rank that can be the most loaded, memory as ``fixed + sharded / (dp * cp)`` GB.

    The sharded part is what the ZeRO stage divides over the data-parallel x CP
    group; ``layout.dp`` is ignored. The first and the last rank are always listed;
    a middle rank only when neither its fixed nor its sharded part is dominated by the
    first rank's (with an even split, never). The largest over the list equals
    ``memory_per_gpu`` for every DP degree."""
    out: list[tuple[float, float]] = []
    loads = stage_loads(spec.layers, layout)
    for load in loads:
        w, g, o, act, logits, cache = _rank_memory(spec, layout, seq_len, a, load)
        scale = 1.0 + a.memory_overhead_fraction
        on_w, on_g, on_o = zero_sharded(layout.zero)
        shard = (o if on_o else 0.0) + (g if on_g else 0.0) + (w if on_w else 0.0)
        fixed = (w + g + o + act + logits + cache - shard) * scale + a.runtime_reserved_gb
        term = (fixed, shard * scale)
        middle = load.rank not in (0, loads[-1].rank)
        if middle and term[0] <= out[0][0] and term[1] <= out[0][1]:
            continue
        out.append(term)
    return out
