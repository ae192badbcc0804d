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
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import accumulate
from typing import Any, NamedTuple

from models import linear_attention as la
from models import moe
from models.errors import ModelError
from models.layout import Assumptions, Layout
from models.pipeline import StageLoad, in_flight_at_rank, stage_layers, stage_loads
from models.transformer import TransformerSpec

GB = 1e9


def attention_activation_coeff(spec: TransformerSpec) -> float:
    """Korthikanti et al. 2022 (arXiv 2205.05198, section 4.1)'s TP-split attention
    tensors at their own widths, in bytes per hidden channel: the queries and the
    attention output (width heads x head_dim) 2 bytes each, the keys and values (kv heads
    x head_dim) 2 each: (heads x head_dim / h) (4 + 4 kv_ratio), the paper's 2 + 4 + 2
    (8) where heads x head_dim = h and every head has its keys. Qwen 3 (head_dim 128
    beside h / heads 64) and GPT-OSS store twice and 1.4 times the paper's."""
    return spec.q_width / spec.hidden * (4.0 + 4.0 * spec.kv_ratio)


def split_activation_coeff(spec: TransformerSpec) -> float:
    """The per-layer s*b*h coefficient split by TP (24 for a GPT-3-shaped layer)."""
    mlp = (6.0 if spec.gated_mlp else 4.0) * spec.ffn / spec.hidden
    return attention_activation_coeff(spec) + mlp


def attention_score_coeff(spec: TransformerSpec, seq_len: int, tp: int) -> float:
    """Bytes per s b h of one layer's materialised attention scores, Korthikanti et al.
    2022's 5 a s / (h t) (softmax output 2, dropout mask 1 and output 2 bytes per score),
    where s x b x h counts the rank's own s / cp tokens and ``seq_len`` is the whole
    sequence: a CP rank scores its s / cp queries against all s keys
    (activation_bytes_per_layer); the dense and the MoE activations read it."""
    return 5.0 * spec.heads * seq_len / (spec.hidden * tp)


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
    """Bytes of stored activations of one layer for one micro-batch (Korthikanti eqs. 1-5).

    With context parallelism a rank holds s / cp tokens, and its materialised attention
    scores (softmax output, dropout mask and output: 5 a s^2 b bytes at CP 1) are its
    s / cp queries against all s keys (attention_score_coeff): an all-gather CP rank (Llama 3,
    Dubey et al. 2024, section 3.3.2) forms them at once, a ring (Liu et al. 2023) in cp
    chunks of (s / cp)^2, all of which the backward reads, so the stored bytes and the
    HBM traffic over them (memory_bound_per_microbatch_s) halve per CP doubling, as the
    attention FLOPs do (models.step.stage_work_per_microbatch)."""
    s = seq_len / cp
    b, h = micro_batch, spec.hidden
    sbh = s * b * h
    if recompute == "full":
        return 2.0 * sbh / (tp if sp else 1)
    attention_scores = attention_score_coeff(spec, seq_len, tp) if recompute == "none" else 0.0
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


def zero3_microbatch_reduce_bytes(
    layout: Layout, reduce_bytes: float, pytorch_pipelining: bool
) -> float:
    """Bytes per parameter of the gradient reduce-scatter that each micro-batch's backward
    issues under ZeRO-3 / FSDP: the stack's (``reduce_bytes``, its profile's
    zero3_microbatch_grad_reduce_bytes: the reduce dtype, 0 where it reduces once a step);
    0 below ZeRO-3. With PP, 0 where the stack's pipeline stages are PyTorch's
    (``pytorch_pipelining``: the profile's zero3_pp_unsharded_params), which turn it off
    and reduce at the last backward (torch/distributed/pipelining/stage.py@v2.9.0,
    _PipelineStageBase.backward_maybe_with_nosync: set_requires_gradient_sync(False) on
    the FSDP module, its run_post_backward at last_backward); Megatron-Core's FSDP
    reduce-scatters every backward with PP too: its no_sync "for grads shard mode there
    will actually always be gradient sync happening" (custom_fsdp
    fully_sharded_data_parallel.py at NVIDIA/Megatron-LM 1e057005: grad_reduce_every_bprop
    for optim_grads and optim_grads_params). models.step prices it."""
    if layout.zero < 3 or (layout.pp > 1 and pytorch_pipelining):
        return 0.0
    return reduce_bytes


# bytes per parameter of the unsharded copies a ZeRO-3 / FSDP stage gathers: FSDP2's
# MixedPrecisionPolicy param_dtype, bfloat16 in every stack modelled (torchtitan's
# mixed_precision_param, OLMo-core's and fms-fsdp's bf16 policies; FP8 layouts compute in
# bf16 copies too), whatever dtype the sharded parameters are kept in
UNSHARDED_PARAM_BYTES = 2.0


class Zero3Kept(NamedTuple):
    """Bytes per parameter a ZeRO-3 / FSDP stage keeps unsharded across a step's
    micro-batches, on top of its shards (``zero3_kept_bytes``); 0: none."""

    grad_bytes: float  # the accumulated gradients, replacing their shards
    param_bytes: float  # the gathered parameters, beside their shards


def zero3_kept_bytes(layout: Layout, a: Assumptions) -> Zero3Kept:
    """What a ZeRO-3 stage keeps unsharded across its micro-batches, per parameter.

    Gradients: where no reduce-scatter follows each micro-batch's backward
    (zero3_microbatch_reduce_bytes 0: PP > 1 on PyTorch's pipeline stages, or a stack that
    reduces once a step) and the
    step has more than one micro-batch, they accumulate unsharded until the last backward,
    in the stack's reduce dtype (``a.zero3_microbatch_grad_reduce_bytes``; ``grad_bytes``
    where it is 0). PyTorch's pipeline stages turn the reduction off with
    set_requires_gradient_sync(False) (torch/distributed/pipelining/stage.py@v2.9.0,
    backward_maybe_with_nosync), and FSDP2's post_backward then accumulates each
    parameter's unsharded gradient, upcast to the reduce dtype
    (torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py@v2.9.0,
    FSDPParamGroup.post_backward: accumulate_unsharded_grad_if_needed,
    to_accumulated_grad_if_needed in _fsdp_param.py), reduce-scattered only at the last
    backward (stage.py's run_post_backward).

    Parameters: with PP > 1 under a stack that keeps them (``a.zero3_pp_unsharded_params``:
    pytorch-fsdp2), the stage's gathered copies (UNSHARDED_PARAM_BYTES) stay from the first
    forward to the last backward: the same backward_maybe_with_nosync calls
    set_reshard_after_backward(False), FSDPParamGroup.post_backward then skips its
    reshard(), and torchtitan's apply_fsdp (torchtitan/models/llama3/infra/parallelize.py)
    sets reshard_after_forward to not pp_enabled, so FSDPParamGroup.post_forward's reshard()
    keeps them too (_fsdp_param_group.py@v2.9.0, reshard: no-op in forward without
    reshard_after_forward). models.step gathers them once a step accordingly
    (zero3_step_bytes). Below ZeRO-3, nothing."""
    if layout.zero < 3:
        return Zero3Kept(0.0, 0.0)
    reduce = a.zero3_microbatch_grad_reduce_bytes
    grads = 0.0
    each = zero3_microbatch_reduce_bytes(layout, reduce, a.zero3_pp_unsharded_params)
    if each <= 0 and layout.grad_accum > 1 + 1e-9:
        grads = reduce if reduce > 0 else a.grad_bytes
    params = UNSHARDED_PARAM_BYTES if layout.pp > 1 and a.zero3_pp_unsharded_params else 0.0
    return Zero3Kept(grads, params)


def model_state_gb(
    params_per_gpu: float, layout: Layout, a: Assumptions
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) GB per GPU under the ZeRO stage (ZeRO section 5),
    with what a ZeRO-3 stage keeps unsharded across its micro-batches (zero3_kept_bytes):
    its accumulated gradients instead of their shards, its gathered parameters beside
    theirs."""
    shard = layout.dp * layout.cp
    on_w, on_g, on_o = zero_sharded(layout.zero)
    kept = zero3_kept_bytes(layout, a)
    weights = params_per_gpu * a.weight_bytes / (shard if on_w else 1)
    weights += params_per_gpu * kept.param_bytes
    grads = params_per_gpu * a.grad_bytes / (shard if on_g else 1)
    if kept.grad_bytes:
        grads = params_per_gpu * kept.grad_bytes
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
    held = in_flight_at_rank(
        load.rank, layout.pp, layout.vp, layout.grad_accum, layout.microbatch_group_size
    )
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
    ``memory_per_gpu`` for every DP degree; what a ZeRO-3 stage keeps unsharded
    (zero3_kept_bytes: in ``fixed``) follows the layout's micro-batches per step, its own
    DP degree's (the solvers plan ZeRO-1, which keeps nothing)."""
    out: list[tuple[float, float]] = []
    loads = stage_loads(spec.layers, layout)
    kept = zero3_kept_bytes(layout, a)
    on_w, on_g, on_o = zero_sharded(layout.zero)
    on_g = on_g and not kept.grad_bytes  # accumulated whole: not divided by DP x CP
    for load in loads:
        w, g, o, act, logits, cache = _rank_memory(spec, layout, seq_len, a, load)
        if kept.grad_bytes or kept.param_bytes:
            params = rank_params(spec, layout, load) / GB
            g = params * kept.grad_bytes if kept.grad_bytes else g
            cache += params * kept.param_bytes
        scale = 1.0 + a.memory_overhead_fraction
        shard = (o if on_o else 0.0) + (g if on_g else 0.0) + (w if on_w else 0.0)
        fixed = (w + g + o + act + logits + cache - shard) * scale + a.runtime_reserved_gb
        term = (fixed, shard * scale)
        middle = load.rank not in (0, loads[-1].rank)
        if middle and term[0] <= out[0][0] and term[1] <= out[0][1]:
            continue
        out.append(term)
    return out


# ------------------------------------------------------------------ mixture-of-experts


def expert_data_parallel(spec: TransformerSpec, layout: Layout, ep: int, etp: int = 1) -> int:
    """The expert data-parallel degree of Megatron-Core's parallel folding (Liu et al.
    2025, "MoE Parallel Folding", arXiv 2504.14960; Megatron-Core
    ``parallel_state.initialize_model_parallel``): the TP x CP x DP ranks of a pipeline
    stage re-fold into ETP x EP x expert-DP, so EP x ETP must divide TP x CP x DP, and
    EP must divide the experts (each EP rank holds experts / EP whole experts)."""
    group = layout.tp * layout.cp * layout.dp
    if ep < 1 or etp < 1 or group % (ep * etp):
        raise ModelError(
            f"--ep {ep} x --etp {etp} must divide TP x CP x DP = {group} (Megatron-Core's "
            "parallel folding)"
        )
    if spec.experts is not None and spec.experts % ep:
        raise ModelError(f"--ep {ep} must divide experts ({spec.experts})")
    return group // (ep * etp)


def rank_layer_ids(layers: int, layout: Layout, rank: int) -> tuple[int, ...]:
    """The transformer layers (from 0) pipeline rank ``rank`` builds (ranks_layer_ids)."""
    return ranks_layer_ids(layers, layout)[rank]


def ranks_layer_ids(layers: int, layout: Layout) -> list[tuple[int, ...]]:
    """The transformer layers (from 0) each pipeline rank builds: Megatron-LM's contiguous
    split (models.pipeline.stage_layers), or with virtual stages and an even split the
    interleaved chunks rank, rank + p, rank + 2p, ... (an uneven split with virtual stages
    is taken contiguous: the layer counts are exact, which layers not). Every rank in one
    pass, linear in the layers and ranks (asked rank by rank it summed the stages before
    each: a 100,000-stage MoE evaluate took 21 s)."""
    p, v = layout.pp, layout.vp
    if layout.stage_counts is not None:  # stage s holds the next counts[s] layers
        starts = list(accumulate(layout.stage_counts, initial=0))
        out: list[list[int]] = [[] for _ in range(p)]
        for s, n in enumerate(layout.stage_counts):
            out[s % p].extend(range(starts[s], starts[s] + n))
        return [tuple(ids) for ids in out]
    if v > 1 and not layout.uneven and layers % (p * v) == 0:
        chunk = layers // (p * v)
        return [
            tuple(c * chunk + j for c in range(rank, p * v, p) for j in range(chunk))
            for rank in range(p)
        ]
    per = stage_layers(layers, layout)
    starts = list(accumulate(per, initial=0))
    return [tuple(range(starts[r], starts[r] + per[r])) for r in range(p)]


def moe_rank_counts(spec: TransformerSpec, layout: Layout) -> tuple[tuple[int, int], ...]:
    """(dense-MLP layers, MoE layers) of the main model on each pipeline rank (MTP modules
    apart), for the layout's pipeline split (cached on the split alone)."""
    return _moe_rank_counts(
        spec,
        layout.pp,
        layout.vp,
        layout.first_stage_layers,
        layout.last_stage_layers,
        layout.embedding_in_split,
        layout.loss_in_split,
        layout.stage_counts,
    )


@lru_cache(maxsize=1 << 14)
def _moe_rank_counts(
    spec: TransformerSpec,
    pp: int,
    vp: int,
    first: int | None,
    last: int | None,
    emb: bool,
    loss: bool,
    counts: tuple[int, ...] | None = None,
) -> tuple[tuple[int, int], ...]:
    probe = Layout(
        tp=1, pp=pp, dp=1, micro_batch=1, global_batch=pp, vp=vp, first_stage_layers=first,
        last_stage_layers=last, embedding_in_split=emb, loss_in_split=loss, stage_counts=counts,
    )  # fmt: skip
    pattern = moe.moe_layer_pattern(spec)
    out = []
    for ids in ranks_layer_ids(spec.layers, probe):
        n_moe = sum(pattern[i] for i in ids)
        out.append((len(ids) - n_moe, n_moe))
    return tuple(out)


def moe_attention_activation_coeff(spec: TransformerSpec) -> float:
    """The attention part of Korthikanti's TP-split s*b*h coefficient
    (``attention_activation_coeff``), for MLA from its widths: Q and K
    heads x (qk + rope), V and the output heads x v, and the latent inputs; with an
    attention output gate its stored gate, and with Gated DeltaNet layers the mean over
    the layers of theirs and the full-attention layers' (models.linear_attention)."""
    h = spec.hidden
    if not spec.is_mla:
        full = attention_activation_coeff(spec) + la.output_gate_activation_coeff(spec)
        if not spec.has_linear_attention:
            return full
        share = la.linear_share(spec)  # the mean over the layers (models.linear_attention)
        return full + share * (la.gdn_activation_coeff(spec) - full)
    assert spec.kv_lora_rank and spec.qk_head_dim and spec.qk_rope_head_dim and spec.v_head_dim
    qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
    v = spec.heads * spec.v_head_dim
    latent = (spec.q_lora_rank or 0) + spec.kv_lora_rank + spec.qk_rope_head_dim
    return (2.0 * qk + 2.0 * qk + 2.0 * v + 2.0 * v + 2.0 * latent) / h


def _mlp_activation_coeff(spec: TransformerSpec, width: float) -> float:
    """An MLP's part of the coefficient: 6 f/h gated, 4 f/h plain (Korthikanti)."""
    return (6.0 if spec.gated_mlp else 4.0) * width / spec.hidden


def _stored_bytes(sbh: float, split: float, tp: int, sp: bool, recompute: str, extra: float):
    """Korthikanti's per-layer bytes for a layer of TP-split coefficient ``split``
    (selective or no recomputation; the attention scores of "none" in ``extra``)."""
    unsplit = 10.0 / tp if sp else 10.0
    return sbh * (unsplit + split / tp + extra)


# recompute modules modelled
MODULES = ("layernorm", "mla_up_proj", "moe_act", "moe", "shared_expert")


@dataclass(frozen=True)
class StoredActivations:
    """What a MoE layer stores for backward beyond the ``recompute`` setting (bytes per
    element, Korthikanti et al. 2022's accounting as ``_moe_ranks_at`` uses it).

    - ``modules``: Megatron-Core's ``--recompute-modules`` (transformer_config.py
      ``recompute_modules``; output-discarding checkpoints): ``layernorm`` drops the two
      norm outputs (4 s b h bytes, split over TP with SP); ``mla_up_proj`` drops MLA's
      up-projected Q, K and V (their bytes in ``moe_attention_activation_coeff``, the
      latents and the attention output kept); ``moe_act`` drops the routed experts'
      activation output (2 f of the gated 6 f); ``moe`` re-runs the whole MoE layer,
      keeping its input only (the step time re-runs its forward: models/expert.py);
      ``shared_expert`` drops the shared experts' activations (6 f gated, 4 f plain, per
      token: their input is the norm output kept for the router) and re-runs their
      forward GEMMs (models/expert.py ``recompute_module_forwards``).
    - ``fp8``: activations cached in fp8 (DeepSeek-V3 Technical Report section 3.3.3,
      "Low-Precision Storage"): the routed experts' inputs and SwiGLU inputs and the
      attention output projection's input at 1 byte.
    - ``dualpipe``: rank r holds stages r and PP-1-r (the weights and gradients twice over
      the pipeline, the embedding and output head on rank 0) and PP + 1 micro-batches in
      flight (``_dualpipe_ranks``).
    - ``probs_in_combine``: the router's top-k probabilities weight the expert outputs in
      the combine (unpermute), whose backward then needs each expert output (2 h bytes per
      routed copy) for the probabilities' gradient. Off by default: Megatron-Core
      (megatron/core/transformer/moe/experts.py at 000c4ac24f61, GroupedMLP and
      TEGroupedMLP ``activation_func_with_probs``) multiplies them into the activation
      output before the second GEMM, and ``unpermute`` (token_dispatcher.py
      ``combine_postprocess``) gets no probabilities: the combine is a fixed-index
      scatter-add that stores nothing, and the probabilities' gradient reads the
      activation output the second GEMM stores anyway."""

    modules: frozenset[str] = frozenset()
    fp8: bool = False
    dualpipe: bool = False
    probs_in_combine: bool = False

    def recomputes(self, module: str) -> bool:
        return module in self.modules

    def shared_width(self, spec: TransformerSpec) -> int:
        """The shared experts' width whose activations stay stored (0 when recomputed)."""
        return (
            0
            if self.recomputes("shared_expert")
            else spec.shared_experts * (spec.shared_expert_ffn)
        )

    def norm_saved(self, tp: int, sp: bool) -> float:
        """Korthikanti's unsplit coefficient the ``layernorm`` module drops."""
        return (4.0 / tp if sp else 4.0) if self.recomputes("layernorm") else 0.0

    def attention_saved(self, spec: TransformerSpec) -> float:
        """The TP-split attention coefficient ``mla_up_proj`` and ``fp8`` drop."""
        saved = 0.0
        if spec.is_mla and self.recomputes("mla_up_proj"):
            assert spec.qk_head_dim and spec.qk_rope_head_dim and spec.v_head_dim
            qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
            saved += (4.0 * qk + 2.0 * spec.heads * spec.v_head_dim) / spec.hidden
        if self.fp8:
            v = spec.heads * spec.v_head_dim if spec.is_mla and spec.v_head_dim else spec.q_width
            saved += 1.0 * v / spec.hidden  # the output projection's input, 2 -> 1 byte
        return saved

    def routed_bytes_per_copy(self, spec: TransformerSpec, etp: int) -> float:
        """Stored bytes of one routed token copy: its input h x ETP (gathered), the FFN
        activations (6 f gated: the up/gate output 4 f and activation output 2 f; 4 f
        plain), and with ``probs_in_combine`` its output 2 h for the combine."""
        f, h = spec.expert_ffn, spec.hidden
        per_elem = 1.0 if self.fp8 else 2.0
        up = (2.0 if spec.gated_mlp else 1.0) * f * per_elem
        act = 0.0 if self.recomputes("moe_act") else 2.0 * f
        out = 2.0 * h if self.probs_in_combine else 0.0
        return per_elem * h * etp + up + act + out


@dataclass(frozen=True)
class MoEMemory:
    """Memory of the most loaded GPU of a MoE model (``moe_memory_per_gpu``)."""

    memory: MemoryBreakdown  # GB, as the dense planner reports it
    rank: int  # its pipeline rank
    dense_params: float  # non-expert parameters on that GPU
    expert_params: float  # routed-expert parameters on that GPU
    expert_dp: int  # expert data-parallel degree (folding)
    routed_activations_gb: float  # stored expert inputs and outputs (in ``activations``)
    router_activations_gb: float  # stored router logits and gates (in ``activations``)
    dispatch_gb: float  # token dispatch / combine buffers of one layer (in ``other``)


def moe_memory_per_gpu(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    capacity_gb: float,
    a: Assumptions,
    ep: int,
    etp: int = 1,
    capacity_factor: float | None = None,
    expert_load: float = 1.0,
    stored: StoredActivations | None = None,
) -> MoEMemory:
    """Memory of the most loaded GPU of a MoE / MLA / MTP model (a dense model gets the
    dense numbers' model states, with MLA-aware attention activations where used).

    - Non-expert parameters (attention, norms, dense MLPs, shared experts, embeddings;
      the router replicated over TP) are held as ``rank_params`` holds them, with the
      ZeRO stage sharding their states over DP x CP (ZeRO section 5; Megatron-LM's
      distributed optimizer is stage 1).
    - Routed experts: each MoE layer's ``experts`` split over EP x ETP
      (``expert_data_parallel``); their gradients and optimizer states (weights too at
      stage 3) shard over the expert data-parallel group (Megatron-Core's distributed
      optimizer shards expert parameters over expert-DP).
    - MTP modules sit on the last pipeline rank (Megatron-LM), with one more pass of
      fp32 logits each.
    - Activations per layer and micro-batch in flight (``in_flight_at_rank``): the
      attention and shared-expert part as Korthikanti et al. (tokens of a MoE layer
      split over TP: Megatron requires sequence parallelism with MoE and TP); the routed
      part per GPU from the tokens it receives: T x top-k x load of the token copies
      (T = s b / (CP TP)), each storing its input 2h x ETP (the ETP group gathers its
      tokens) and its FFN activations 6f (gated) or 4f (its output 2h only where the
      combine weights it: ``StoredActivations.probs_in_combine``);
      the router's fp32 logits and scores (8 bytes x experts per token) and top-k gates
      and indices (12 bytes x k). Full recomputation keeps only each layer's input.
    - ``load``: with a capacity factor, tokens beyond it are dropped and Megatron pads
      to it (``--moe-expert-capacity-factor``, ``--moe-pad-expert-input-to-capacity``):
      the buffers hold ``capacity_factor`` x the balanced share. Dropless routing
      (``capacity_factor`` None, Megatron-Core's default) holds what arrives:
      ``expert_load`` x the balanced share on the busiest GPU (default 1.0, balanced;
      a named factor for router statistics to set).
    - ``other``: the dense planner's (fp32 logits, reserved, overhead fraction) plus the
      dispatch buffers of the layer in flight: the permuted tokens sent and received,
      2 x T x k x load x ETP x 2h bytes.
    - ``stored`` (``StoredActivations``): Megatron's ``--recompute-modules`` and fp8
      activation storage, and DualPipe's pairing of stages r and PP-1-r on rank r, with
      PP + 1 micro-batches in flight (DeepSeek-V3 Technical Report section 3.2.1, the
      DualPipe table: parameters 2x, activations PP + 1).
    """
    edp = expert_data_parallel(spec, layout, ep, etp)
    opts = stored or StoredActivations()
    best: MoEMemory | None = None
    ranks = _moe_ranks(spec, layout, seq_len, a, ep, etp, capacity_factor, expert_load, opts)
    for rank in ranks:
        w, g, o = model_state_gb(rank.dense_params, layout, a)
        w_e, g_e, o_e = _expert_states_gb(rank.expert_params, layout, a, edp)
        w, g, o = w + w_e, g + g_e, o + o_e
        if opts.dualpipe and layout.pp > 1:
            # ASSUMED: each stage's optimizer states once per pipeline, split between the
            # two ranks that hold the stage (DualPipe states "Parameter 2x" only)
            o /= 2.0
        w += fp8_weight_cache_gb(rank.dense_params + rank.expert_params, layout, a)
        act_gb, logits, disp = rank.act / GB, rank.logits, rank.dispatch
        overhead = a.memory_overhead_fraction * (w + g + o + act_gb + logits + disp)
        other = a.runtime_reserved_gb + logits + disp + overhead
        mem = MemoryBreakdown(w, g, o, act_gb, other, capacity_gb, a.memory_headroom_fraction)
        out = MoEMemory(
            mem,
            rank.rank,
            rank.dense_params,
            rank.expert_params,
            edp,
            rank.routed / GB,
            rank.router / GB,
            disp,
        )
        if best is None or mem.total > best.memory.total:
            best = out
    assert best is not None
    return best


def _expert_states_gb(
    expert_params: float, layout: Layout, a: Assumptions, edp: int
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) GB of a rank's routed experts: sharded over the
    expert data-parallel group (``edp``) by the ZeRO stage, and, as the non-expert states
    (model_state_gb), what a ZeRO-3 stage keeps unsharded across its micro-batches
    (zero3_kept_bytes: its accumulated gradients instead of their shards, its gathered
    parameters beside theirs)."""
    zero, kept = layout.zero, zero3_kept_bytes(layout, a)
    w = expert_params * a.weight_bytes / (edp if zero >= 3 else 1) / GB
    w += expert_params * kept.param_bytes / GB
    g = expert_params * a.grad_bytes / (edp if zero >= 2 else 1) / GB
    if kept.grad_bytes:
        g = expert_params * kept.grad_bytes / GB
    o = expert_params * a.optimizer_bytes / (edp if zero >= 1 else 1) / GB
    return w, g, o


def moe_memory_terms(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    a: Assumptions,
    ep: int,
    etp: int = 1,
    expert_load: float = 1.0,
    binding: bool = False,
) -> list[tuple[float, float]]:
    """``memory_terms`` of a MoE / MLA / MTP model at EP and ETP: per pipeline rank,
    memory as ``fixed + sharded / (dp * cp)`` GB (``layout.dp`` ignored), equal to
    ``moe_memory_per_gpu``'s rank total at every DP degree the folding allows. The
    dense states shard over DP x CP by the ZeRO stage; the expert states over expert-DP
    = TP x CP x DP / (EP x ETP), i.e. ``sharded`` holds them times EP x ETP / TP.

    ``binding``: only the terms of the ranks that can hold the most memory (the memory
    bound's terms): of ranks equal but for their stored activations (a pipeline's ranks
    differ mostly by the micro-batches in flight), the one that stores the most. Each
    term grows with every input of its rank (non-negative bytes and factors; rounded IEEE
    operations are monotone), so the kept rank's term is at least each left-out one's,
    part by part: the largest memory at any DP degree, and the least degree that fits
    (solvers.space.dp_min_from_terms), are those of every rank."""
    ranks = _moe_ranks(spec, layout, seq_len, a, ep, etp, None, expert_load, binding=binding)
    return _moe_rank_terms(ranks, layout, a, ep, etp)


def moe_unit_bound_ranks(
    spec: TransformerSpec,
    unit: Layout,
    seq_len: int,
    a: Assumptions,
    ep: int,
    etp: int = 1,
    expert_load: float = 1.0,
) -> tuple[_MoERank, ...]:
    """``moe_memory_terms(..., binding=True)``'s ranks of ``unit``, a layout at a micro-batch of 1: the
    same layout at micro-batch b, its micro-batches per step whole, has them times b
    (``_moe_ranks``), so a caller pricing every micro-batch computes them once
    (``moe_bound_terms_at``)."""
    assert unit.micro_batch == 1
    opts = StoredActivations()
    return _binding_ranks_at(spec, unit, seq_len, a.flash_attention, ep, etp, expert_load, opts)


def moe_bound_terms_at(
    unit_ranks: tuple[_MoERank, ...], b: int, unit: Layout, a: Assumptions, ep: int, etp: int
) -> list[tuple[float, float]]:
    """``moe_memory_terms(..., binding=True)`` of ``unit`` (a layout at a micro-batch of 1) at micro-batch
    ``b`` with whole micro-batches per step, from ``moe_unit_bound_ranks(unit)``: the same
    operations (x 1 at b = 1, exact)."""
    return _moe_rank_terms(_scaled(unit_ranks, b), unit, a, ep, etp)


def _scaled(ranks: tuple[_MoERank, ...], b: int) -> list[_MoERank]:
    """Ranks at a micro-batch of 1 at micro-batch ``b``: every byte of activations, logits
    and buffers times b, the parameters as they are."""
    return [
        _MoERank(
            r.rank,
            r.dense_params,
            r.expert_params,
            r.act * b,
            r.routed * b,
            r.router * b,
            r.logits * b,
            r.dispatch * b,
        )
        for r in ranks
    ]


def _moe_rank_terms(
    ranks: list[_MoERank], layout: Layout, a: Assumptions, ep: int, etp: int
) -> list[tuple[float, float]]:
    """``moe_memory_terms`` of each of ``ranks``."""
    zero, kept = layout.zero, zero3_kept_bytes(layout, a)
    per_expert = ep * etp / layout.tp
    scale = 1.0 + a.memory_overhead_fraction
    parts = (
        (a.weight_bytes, zero >= 3),
        (kept.grad_bytes or a.grad_bytes, zero >= 2 and not kept.grad_bytes),
        (a.optimizer_bytes, zero >= 1),
    )
    out = []
    for rank in ranks:
        dense, expert = rank.dense_params, rank.expert_params
        fixed = sharded = 0.0
        for nbytes, on in parts:
            if on:
                sharded += (dense + expert * per_expert) * nbytes / GB
            else:
                fixed += (dense + expert) * nbytes / GB
        fixed += (dense + expert) * kept.param_bytes / GB  # zero3_kept_bytes
        fixed += fp8_weight_cache_gb(dense + expert, layout, a)
        fixed += rank.act / GB + rank.logits + rank.dispatch
        out.append((fixed * scale + a.runtime_reserved_gb, sharded * scale))
    return out


class _MoERank(NamedTuple):
    """One pipeline rank of a MoE model before the ZeRO sharding (``_moe_ranks``)."""

    rank: int
    dense_params: float  # per GPU, router replicated over TP
    expert_params: float  # per GPU, over EP x ETP
    act: float  # stored activations, bytes
    routed: float  # of which routed-token activations, bytes
    router: float  # of which router logits and gates, bytes
    logits: float  # fp32 logits, GB
    dispatch: float  # dispatch buffers, GB


def _moe_ranks(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    a: Assumptions,
    ep: int,
    etp: int,
    capacity_factor: float | None,
    expert_load: float,
    stored: StoredActivations | None = None,
    binding: bool = False,
) -> list[_MoERank]:
    """Each pipeline rank's parameters, activations, logits and dispatch buffers
    (``moe_memory_per_gpu``'s docstring). Every activation, logit and buffer byte is
    proportional to the micro-batch (s b h, tokens s b / TP), so the ranks are computed
    once per micro-batch of 1 (cached: the solvers ask for every micro-batch of a shape)
    and scaled, whenever the layout's micro-batches per step are whole. ``binding``:
    only the ranks that can bind (``_binding_ranks_at``; scaling by b keeps them so)."""
    load = capacity_factor if capacity_factor is not None else expert_load
    opts = stored or StoredActivations()
    at = _binding_ranks_at if binding else _moe_ranks_at
    b = layout.micro_batch
    if b > 1 and layout.global_batch % (b * layout.dp) == 0:
        unit = _unit_layout(layout)
        return _scaled(at(spec, unit, seq_len, a.flash_attention, ep, etp, load, opts), b)
    return list(at(spec, layout, seq_len, a.flash_attention, ep, etp, load, opts))


@lru_cache(maxsize=1 << 14)
def _binding_ranks_at(*args: Any) -> tuple[_MoERank, ...]:
    """``_moe_ranks_at(*args)``'s ranks that can hold the most memory
    (moe_memory_terms' ``binding``): of ranks equal but for their stored activations, the one that
    stores the most. (Its arguments are ``_moe_ranks_at``'s, passed on as they come.)"""
    heaviest: dict[tuple[float, float, float, float], _MoERank] = {}
    for rank in _moe_ranks_at(*args):
        key = (rank.dense_params, rank.expert_params, rank.logits, rank.dispatch)
        held = heaviest.get(key)
        if held is None or rank.act > held.act:
            heaviest[key] = rank
    return tuple(heaviest.values())


@lru_cache(maxsize=1 << 14)
def _unit_layout(layout: Layout) -> Layout:
    """``layout`` at a micro-batch of 1, its micro-batches per step kept (``_moe_ranks``;
    cached: dataclasses.replace costs more than the lookup)."""
    b = layout.micro_batch
    return replace(layout, micro_batch=1, global_batch=layout.global_batch // b)


@lru_cache(maxsize=1 << 14)
def _moe_ranks_at(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    flash_attention: bool,
    ep: int,
    etp: int,
    load: float,
    opts: StoredActivations = StoredActivations(),
) -> tuple[_MoERank, ...]:
    """``_moe_ranks`` at the layout's own micro-batch."""
    tp, cp, sp = layout.tp, layout.cp, layout.sp
    h, k = spec.hidden, spec.experts_per_token or 0
    pattern = moe.moe_layer_pattern(spec)
    b, s = layout.micro_batch, seq_len / cp
    sbh = s * b * h
    tokens = s * b / tp  # tokens one GPU routes (TP ranks split them: SP)
    scores = 0.0
    if layout.recompute == "none" and not flash_attention:
        scores = attention_score_coeff(spec, seq_len, tp)
    att = moe_attention_activation_coeff(spec) - opts.attention_saved(spec)
    dense_coeff = att + _mlp_activation_coeff(spec, spec.ffn)
    shared_coeff = att + _mlp_activation_coeff(spec, opts.shared_width(spec))
    routed_layer = tokens * k * load * opts.routed_bytes_per_copy(spec, etp)
    router_layer = tokens * (8.0 * (spec.experts or 0) + 12.0 * k)
    extra = scores - opts.norm_saved(tp, sp)
    dense_layer = _stored_bytes(sbh, dense_coeff, tp, sp, "selective", extra)
    moe_layer = _stored_bytes(sbh, shared_coeff, tp, sp, "selective", extra)
    layer_input = 2.0 * sbh / (tp if sp else 1)
    if opts.recomputes("moe"):  # the whole MoE layer re-run: only its input is kept
        moe_layer = _stored_bytes(sbh, att, tp, sp, "selective", extra) + layer_input
        routed_layer = router_layer = 0.0
    dispatch = 2.0 * tokens * k * load * etp * 2.0 * h / GB if spec.is_moe else 0.0
    expert_one = moe.expert_params(spec) * (spec.experts or 0)
    # attention at the mean over the layers (Gated DeltaNet layers: models.linear_attention)
    attn_mean = moe.mean_attention_params(spec) - moe.attention_params(spec)
    moe_non_expert = (
        moe.mean_attention_params(spec) + 2 * spec.norm_params + moe.shared_expert_params(spec)
    )
    dense_one, router_one = moe.dense_layer_params(spec) + attn_mean, moe.router_params(spec)
    stages = []
    for r, (n_dense, n_moe) in enumerate(moe_rank_counts(spec, layout)):
        first, last = r == 0, r == layout.pp - 1
        mtp = layout.holds_mtp(r)
        mtp_moe = spec.mtp_layers if mtp and pattern[-1] else 0
        mtp_dense = spec.mtp_layers if mtp and not pattern[-1] else 0
        dense_params = float((n_dense + mtp_dense) * dense_one)
        dense_params += (n_moe + mtp_moe) * moe_non_expert
        if mtp:
            dense_params += spec.mtp_layers * (3 * spec.norm_params + 2 * h * h)
        if first:
            dense_params += spec.embedding_params()
        if last:
            dense_params += spec.output_params() if layout.pp == 1 else spec.vocab * h
            dense_params += spec.norm_params
        dense_params /= tp
        dense_params += (n_moe + mtp_moe) * router_one  # replicated over TP
        expert_params = (n_moe + mtp_moe) * expert_one / (ep * etp)
        n_all_moe, n_all_dense = n_moe + mtp_moe, n_dense + mtp_dense
        if layout.recompute == "full":
            per_mb = (n_all_moe + n_all_dense) * layer_input
            routed = router = 0.0
            working = dense_layer if n_all_dense else 0.0
            if n_all_moe:
                working = max(working, moe_layer + routed_layer + router_layer)
        else:
            routed, router, working = n_all_moe * routed_layer, n_all_moe * router_layer, 0.0
            per_mb = n_all_dense * dense_layer + n_all_moe * moe_layer + routed + router
        logits = logits_gb(spec, layout, seq_len, "last" if last else "first")
        if last:
            logits *= 1 + spec.mtp_layers
        disp = dispatch if n_all_moe else 0.0
        stage = _MoERank(r, dense_params, expert_params, per_mb, routed, router, logits, disp)
        stages.append((stage, working))
    if opts.dualpipe and layout.pp > 1:
        return _dualpipe_ranks(stages, layout)
    out = []
    for stage, working in stages:
        held = in_flight_at_rank(
            stage.rank, layout.pp, layout.vp, layout.grad_accum, layout.microbatch_group_size
        )
        out.append(
            stage._replace(
                act=stage.act * held + working,
                routed=stage.routed * held,
                router=stage.router * held,
            )
        )
    return tuple(out)


def _dualpipe_ranks(stages: list, layout: Layout) -> tuple[_MoERank, ...]:
    """DualPipe's ranks (deepseek-ai/DualPipe; DeepSeek-V3 Technical Report sections 3.2.1
    and 3.2.3): rank r runs stage r of the forward-direction pipeline and stage PP-1-r of
    the reverse one, so it holds both stages' parameters (the model twice over the
    pipeline: "Parameter 2x"; rank 0 holds the embedding and the output head, the report's
    "shallowest layers (including the embedding layer) and deepest layers (including the
    output head) ... on the same PP rank"), and in each direction the micro-batches a
    1F1B rank at that position holds: min(PP - r, m) of stage r and min(r + 1, m) of stage
    PP-1-r, PP + 1 in all (the README's "Activation PP+1"). ``stages``: each stage's
    (_MoERank with per-micro-batch activations, full recomputation's working set); one
    micro-batch's logits and dispatch buffers at a time (the larger of the two)."""
    p, m = layout.pp, layout.grad_accum
    out = []
    for (own, work_own), (other, work_other) in zip(stages, reversed(stages), strict=True):
        r = own.rank
        held_own, held_other = min(p - r, m), min(r + 1, m)
        out.append(
            _MoERank(
                r,
                own.dense_params + other.dense_params,
                own.expert_params + other.expert_params,
                own.act * held_own + other.act * held_other + max(work_own, work_other),
                own.routed * held_own + other.routed * held_other,
                own.router * held_own + other.router * held_other,
                max(own.logits, other.logits),
                max(own.dispatch, other.dispatch),
            )
        )
    return tuple(out)
