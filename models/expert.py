"""Expert parallelism in the step time of a mixture-of-experts model (issue 17 item 4).

Megatron-Core's parallel folding (Liu et al. 2025, "MoE Parallel Folding", arXiv
2504.14960; ``parallel_state.initialize_model_parallel``) re-folds the TP x CP x DP ranks
of each pipeline stage into ETP x EP x expert-DP for the MoE layers, ETP fastest, so an
EP group's members are ETP ranks apart (``models.memory.expert_data_parallel`` checks the
divisibility). This module prices, per micro-batch on the busiest pipeline rank:

- **Token dispatch and combine** (Megatron-Core's ``MoEAlltoAllTokenDispatcher``,
  megatron/core/transformer/moe/token_dispatcher.py at 000c4ac24f61: ``token_dispatch``
  and ``token_combine`` are one all-to-all each over the EP group; backward runs their
  transposes): 4 all-to-alls per MoE layer and micro-batch, 6 with full recomputation.
  Each GPU sends its T = s b / (TP CP) tokens' top-k copies, T x k x h x 2 bytes (bf16),
  of which (EP-1)/EP leave it under uniform routing; the busiest receiver gets
  ``expert_load`` x the balanced share and every rank waits for it. With k_d of the
  group's EP ranks in one scale-up domain (``scaleup.ranks_in_domain`` at stride ETP):

      EP <= k_d:  V (EP-1)/EP / bw_up(EP)                    all on the scale-up link
      EP >  k_d:  max(V (k_d-1)/EP / bw_up(k_d),             peers in the domain, and
                      V (EP-k_d)/EP / NIC share per GPU)     the rest over the NICs at once

  (bw_up: ``models.scaleup.group_bw_gb_per_s`` at the stack's bus efficiency, as the
  TP/DP collectives of models/step.py; the NIC share ``models.comm.nic_share``, as the
  DP gradient traffic). With ETP > 1 the dispatcher all-gathers the received tokens over
  the ETP group after the all-to-all and reduce-scatters them before the combine
  (``dispatch_postprocess`` / ``combine_preprocess``): a ring all-gather of ETP x the
  received bytes per all-to-all. Moving EP 64 of an 8-GPU server's k_d = 8 off the
  server multiplies the time by (56/64) / (7/8) x bw_up / NIC share = bw_up / NIC share.
- **Per-domain dispatch** ``dispatch_per_domain`` (default off): DeepEP's internode
  kernels (Megatron-Core's ``flex`` dispatcher, ``--moe-enable-deepep``, and its HybridEP
  backend) send a token over the NICs once to each remote scale-up domain that holds one
  of its experts, to the GPU of the same in-domain index, which forwards it over the
  scale-up link (DeepSeek-AI 2024, DeepSeek-V3 Technical Report, section 3.2.2: "we first
  transmit tokens via IB to the GPUs with the same in-node index on their target nodes
  ... then forwarded via NVLink"; deepseek-ai/DeepEP README, NVLink-to-RDMA forwarding).
  With E experts spread evenly over the EP group's n = EP / k_d domains and top-k
  routing uniform over the experts (balanced load), a token reaches
  (n - 1) (1 - C(E - E/n, k) / C(E, k)) remote domains on average, against
  k (EP - k_d) / EP expert copies for Megatron's ``alltoall`` dispatcher: the NIC bytes
  of an all-to-all that leaves the domain scale by that ratio (0.45 for E 128, k 8, EP 32
  over 8-GPU servers). The in-domain part and the forwarding on arrival are priced as
  before (off: every routed copy is sent, as ``alltoall`` does).
- **Exposed share** ``ep_overlap`` (default 0): Megatron-Core runs the all-to-alls on the
  compute stream unless ``--overlap-moe-expert-parallel-comm`` (batch-level overlap in
  the 1F1B stage, off by default at 000c4ac24f61) or ``--moe-shared-expert-overlap``
  (off by default) is set. The overlap pairs each chunk's forward with another
  micro-batch's backward, all but the W warm-up forwards and W cool-down backwards
  (models.pipeline.a2a_overlap_exposed_share: W / (v m) stays exposed, W = 1 with PP 1),
  holds 1F1B's activations (models.pipeline.a2a_overlap_warmup_chunks) and runs only
  where Megatron-Core allows it (``a2a_overlap_violation``). A paired chunk runs its
  all-to-alls on one communication stream beside the other micro-batch's compute on the
  compute stream (Megatron-Core's TransformerLayerSchedulePlan.run; DualPipe's forward and
  backward chunk pairs, DeepSeek-V3 Technical Report section 3.2.1), so it takes at least
  max(compute + the overlap's SM cost, all-to-alls): the hidden seconds per micro-batch are
  min(hidden share x all-to-alls, paired share x compute), the rest exposed
  (models.step.ep_overlap_s), and the compute they take is no window for the ZeRO-3
  gathers, nor, under DualPipe, for the step's gradient reduction.
- **Expert compute** from the active parameters: per token and layer the attention (or
  MLA) projections, the dense MLP of a dense layer, the router, the shared experts and
  the top-k routed experts (``models.moe``); the routed GEMMs run ``expert_load`` x the
  balanced tokens on the busiest GPU at a grouped-GEMM efficiency m / (m + m_half),
  m = T k load EP ETP / experts the rows of one local expert: the additive roofline
  (Williams, Waterman & Patterson 2009, "Roofline") of a GEMM that reads its weights
  once, m_half = the precision's peak / HBM bandwidth x weight bytes / 2 (about 295
  rows for an H100 in bf16) unless ``grouped_gemm_half_tokens`` is given. The weight
  bytes are the mean over the routed GEMM's passes (``weight_bytes_per_pass``): the
  forward, any recomputed forward and the data gradient read the weight (2 bytes, 1 in
  fp8); the weight gradient, under Megatron-Core's gradient-accumulation fusion
  (``--gradient-accumulation-fusion``, on by default; megatron/core/extensions/
  transformer_engine.py ``TEGroupedLinear`` passes ``fuse_wgrad_accumulation`` to
  Transformer Engine's GroupedLinear), is a GEMM with beta = 1 into the fp32
  ``main_grad`` buffer, so it reads and writes 4 bytes per weight element
  (``wgrad_accumulation_bytes`` = 8): (2 + 2 + 8) / 3 = 4 bytes in bf16 without
  recomputation, twice the weight read, and m_half about 590 rows on an H100. The same
  roofline counts the GEMM's activation operands (``routed_activation_bytes``, bf16): a
  pass over m rows of a k x n weight reads and writes m (k + n) activations (the forward
  its input and output, the data gradient the output gradient and the input gradient,
  the weight gradient both inputs) for 2 m k n FLOPs, which adds ridge x bytes / 2 x
  (1/k + 1/n) of the peak-rate seconds whatever m (``routed_activation_units``): 0.53
  for Qwen3-Next's 2,048 x 512 experts on an H100 in bf16, 0.09 for Mixtral's 4,096 x 14,336,
  where the weights' term fades as m grows. (The dense GEMMs' fitted efficiency holds
  their activation traffic at the calibration runs' widths, 4,096 and up: a few percent.)
- **Expert gradients** reduce over the expert-DP group (ranks EP x ETP apart), the other
  parameters over DP x CP as a dense model's; the Adam step shards expert states over
  expert-DP (Megatron-Core's distributed optimizer).

Issue 34 names the rest of the step as the code runs it, each a field of ExpertLayout
(``tests/test_moe_terms.py`` switches each off): ``permute_hbm_passes`` (the
permutation's HBM passes, ``permute_per_microbatch_s``), ``dispatch_bytes`` (fp8
dispatch), ``capacity_factor`` (``ExpertLayout.load``), ``overlap_sm_fraction`` (the
cost of a hidden share, ``overlap_cost_per_microbatch_s``), ``dualpipe``
(``dualpipe_bubble_scale``; stages r and PP-1-r on rank r), ``recompute_modules`` and
``fp8_activations`` (``recompute_module_forwards``; models.memory.StoredActivations),
``routed_elementwise`` (the routed copies' element-wise HBM traffic,
``routed_elementwise_per_microbatch_s``), ``probs_in_combine`` (memory only) and
``routed_activation_bytes`` (the routed GEMMs' activation operands in their roofline,
``routed_activation_units``), ``router_fp32`` (``--moe-router-dtype fp32``: the router's backward GEMMs at the TF32 rate,
``router_fp32_per_microbatch_s``), ``linear_attention_chunk`` (Gated DeltaNet's core between
its projections, as measured: ``gdn_chunk_per_microbatch_s``; models/linear_attention.py) and
``attention_kernel_speedup`` (the attention core's kernel generation, in
``moe_gemm_per_microbatch_s``).

**Attention kernels** ``attention_kernel_speedup`` (default 1.0, the profile's): the H100
profile's attention efficiency was fitted on 2024 NeMo / Megatron-Core runs (0.3172 of the
bf16 peak, 314 TFLOP/s over the 3.5 forward-equivalents of FlashAttention's forward and
backward), which is FlashAttention-2's H100 rate in the FlashAttention-3 paper's benchmark
(312-326 TFLOP/s for a forward and its backward at 4K-16K, head dim 128), where cuDNN's
fused attention, the kernel Transformer Engine's ``FusedAttention`` backend runs on Hopper,
reaches 504-522 (HOPPER_FUSED_ATTENTION_SPEEDUP = 1.61; FlashAttention-3's own 552-576).
A run of a release whose attention runs those kernels prices its attention core at the
profile's seconds / the speedup; nothing else moves. It is a per-run option, not the
profile's: the dense calibration runs keep the fitted rate. It applies to the Hopper GPUs
(HOPPER_GPUS) alone: evaluate's --fused-attention changes nothing elsewhere.

``expert_load`` defaults to 1.0 (balanced): an ASSUMPTION, not a published statistic;
DeepSeek-V3's auxiliary-loss-free balancing (Technical Report, section 2.1.2) aims at
balance; set it from a router's measured max/mean load when one is known.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from catalog.specs import GPUSpec
from models import comm, flops, moe, scaleup
from models import linear_attention as la
from models.flops import attention_core_forward_per_token
from models.layout import Assumptions, Layout, Network
from models.memory import (
    MoEMemory,
    StoredActivations,
    moe_memory_per_gpu,
    moe_rank_counts,
    zero3_microbatch_reduce_bytes,
)
from models.pipeline import a2a_overlap_exposed_share
from models.step import (
    CpCoefficients,
    GemmRates,
    StageWork,
    StepCoefficients,
    cp_coefficients,
    cp_window_per_microbatch_s,
    ep_overlap_s,
    forward_passes,
    gemm_rates,
    group_reduce_s,
    host_issue_per_microbatch_s,
    matmul_efficiency,
    memory_bound_per_microbatch_s,
    nic_share_gb_per_s,
    step_coefficients,
    step_reduction_bytes,
    work_at_rates_s,
    zero3_gathers_once,
)
from models.transformer import TransformerSpec

DISPATCH_BYTES = 2.0  # bf16 token copies in the all-to-all (Megatron's default dtype)
EXPERT_LOAD = 1.0  # ASSUMPTION: busiest GPU's tokens / the balanced share (module docstring)
EP_OVERLAP = 0.0  # --overlap-moe-expert-parallel-comm is off by default (module docstring)
# Megatron-Core's permute + unpermute, forward and backward, each reading and writing the
# k-expanded tokens: 2 x 2 passes forward, the same backward (module docstring)
PERMUTE_HBM_PASSES = 8.0
# Megatron-Core's unfused permutation (the default: --moe-permute-fusion is off; moe_utils
# at 6a6cd478, 2025-06-18: permute an index_select whose backward scatter-adds the k copies
# into their tokens, unpermute a scatter_add_ into them), forward and backward, in HBM
# passes over the k-expanded tokens at the catalog's bandwidth: measured on an H200 with
# PyTorch 2.11's index_select / index_add (bench/device/moe_layer.py, three runs on
# 2026-12-04; bench/moe_kernels.py prints each run's median over six models' shapes and
# three EP degrees at 16,384 tokens, 62.4, 60.6 and 60.6, and their median, this; about 54
# at the copy rate measured beside them; the atomic scatter-adds of colliding rows are
# most of it); the fused kernels' passes are PERMUTE_HBM_PASSES
UNFUSED_PERMUTE_HBM_PASSES = 60.6
# Gated DeltaNet's core between its projections, as Megatron-Core runs it (flash-linear-
# attention's causal_conv1d, l2norm, chunk_gated_delta_rule and gated RMSNorm, with the
# heads' repeat and the gates in PyTorch): measured on an H200 with fla 0.4.0, Triton 3.6 and
# PyTorch 2.11 (bench/device/gdn_kernels.py, bench/data/device/h200-2026-12-04-gdn; python
# bench/gdn_kernels.py derives both): one Qwen3-Next layer's forward + backward took 6.51 ms
# at 1 x 4,096 tokens and 7.56 ms at 4 x 4,096. The line through the two points: a fixed
# 6.17 ms a layer and micro-batch, 3 forward-equivalents of 2.055 ms, and 0.0848 us a
# token, 150.8 TFLOP/s of gdn_layer_flops' count: 0.1524 of the bf16 peak. Four times the
# tokens add 16%: at these sizes the chain's time is set by its many small kernels'
# launches and latencies, not by its FLOPs. The fixed part is one host's and one fla
# release's; it is taken as exposed (the dropless all-to-all dispatcher synchronises the
# host in every MoE layer's forward)
GDN_CORE_FIXED_S_PER_PASS = 2.055e-3
GDN_CORE_PEAK_SHARE = 0.1524
# DeepSeek-V3 Technical Report section 3.3.2: fp8 dispatch with one fp32 scale per 128
# elements (1 + 4/128 bytes per element); the combine stays bf16
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
# DeepSeek-V3 Technical Report section 3.2.2: 20 of the H800's 132 SMs run the
# communication that DualPipe overlaps with compute
OVERLAP_SM_FRACTION = 20.0 / 132.0
# Hopper's fused attention kernels over FlashAttention-2 on the same H100 SXM5, bf16, head
# dim 128 (Shah et al. 2024, "FlashAttention-3", arXiv 2407.08608, figures 5-6: causal
# forward FA2 319 / 333 / 335 and cuDNN 518 / 529 / 539 TFLOP/s at 4K / 8K / 16K;
# backward FA2 310 / 318 / 322 and cuDNN 499 / 518 / 516): one forward and a 2.5 x heavier
# backward (models.step's 3.5 forward-equivalents) give 312 / 322 / 326 TFLOP/s for FA2 and
# 504 / 521 / 522 for cuDNN, x 1.614 / 1.618 / 1.604; the mean, 1.61. FlashAttention-3's
# own kernels give x 1.77 (552 / 571 / 576): cuDNN, Transformer Engine's FusedAttention
# backend, is the lower of the two. The H100 profile's fitted attention rate, 0.3172 x 989
# = 314 TFLOP/s, is FA2's (catalog/data/gpus.yaml; models.expert module docstring)
HOPPER_FUSED_ATTENTION_SPEEDUP = 1.61
# the catalog's Hopper GPUs, whose profiles carry the H100 fit's FA2-class attention rate:
# the only ones the speedup applies to. Blackwell's attention_efficiency was fitted on 2025
# runs that already ran fused attention (bench/moe_accuracy.py, attention_kernels); the
# A100's is 2021-22 unfused attention, for which the H100 ratio is no measurement
HOPPER_GPUS = frozenset({"h100-sxm", "h100-pcie", "h200", "h800", "gh200"})
# Megatron-Core's gradient-accumulation fusion (--gradient-accumulation-fusion, on by
# default; Transformer Engine's fuse_wgrad_accumulation in its grouped linear layers) runs
# each micro-batch's weight-gradient GEMM with beta = 1 into the fp32 main_grad buffer
# (bf16 runs keep their gradient buffers in fp32: accumulate_allreduce_grads_in_fp32):
# the GEMM reads and writes 4 bytes per weight element (module docstring)
WGRAD_ACCUMULATION_BYTES = 8.0
# the routed GEMMs' activation operands (the dispatched tokens, the expert outputs and their
# gradients) are bf16: 2 bytes per element read or written (module docstring)
ROUTED_ACTIVATION_BYTES = 2.0
# TF32 / BF16 dense tensor-core peak: 156 / 312 TFLOP/s on the A100 (NVIDIA A100 datasheet),
# 494.7 / 989.4 on the H100 SXM (NVIDIA H100 datasheet, the sparse figures halved), 1.1 /
# 2.25 PFLOP/s per GPU on the HGX B200 and 1.25 / 2.5 on the GB200 NVL72 (their datasheets'
# 8- and 72-GPU sparse totals, halved and divided); 653.7 / 1,307.4 on the MI300X. The
# catalog gives no TF32 peak: the router's fp32 GEMMs run at this share of the bf16 peak
TF32_PER_BF16 = 0.5
# the fp32 router's casts in backward, HBM bytes per element of its T x h input:
# inp.to(fp32) for the weight gradient reads 2 and writes 4, the data gradient's fp32
# result cast to bf16 reads 4 and writes 2 (Megatron-LM moe_utils.RouterGatingLinearFunction)
ROUTER_FP32_CAST_BYTES = 12.0


@dataclass(frozen=True)
class ExpertLayout:
    """Expert-parallel degrees of a MoE run and the named factors of its step time."""

    ep: int = 1
    etp: int = 1
    expert_load: float = EXPERT_LOAD
    ep_overlap: float = EP_OVERLAP
    grouped_gemm_half_tokens: float | None = None  # None: the roofline's (module docstring)
    dispatch_per_domain: bool = False  # DeepEP / HybridEP (module docstring)
    # HBM passes of the k-expanded tokens per MoE layer and micro-batch (forward and
    # backward): permute and unpermute (module docstring); 0 switches the term off
    permute_hbm_passes: float = PERMUTE_HBM_PASSES
    # Megatron-Core's --moe-permute-fusion (Transformer Engine's fused permute and unpermute
    # kernels, at ``permute_hbm_passes``); False: its unfused PyTorch permutation, at
    # UNFUSED_PERMUTE_HBM_PASSES (``permute_per_microbatch_s``)
    permute_fusion: bool = True
    # bytes per element of the dispatch-direction all-to-alls (forward dispatch, backward
    # combine); 2.0 bf16, FP8_DISPATCH_BYTES for DeepEP's fp8 dispatch (module docstring)
    dispatch_bytes: float = DISPATCH_BYTES
    # tokens an expert takes, x the balanced share (--moe-expert-capacity-factor with
    # --moe-pad-expert-input-to-capacity); None: dropless, ``expert_load`` arrives
    capacity_factor: float | None = None
    # SM share the overlapped all-to-all kernels take from compute while they run: the
    # overlap's cost, x the hidden seconds (module docstring)
    overlap_sm_fraction: float = OVERLAP_SM_FRACTION
    # DualPipe (DeepSeek-V3): the bidirectional schedule's bubble, the all-to-alls hidden
    # at ``overlap_sm_fraction``, stages r and PP-1-r on rank r (models.memory)
    dualpipe: bool = False
    # Megatron-Core's --recompute-modules that the MoE model prices (models.memory.MODULES:
    # layernorm, mla_up_proj, moe_act, moe) and fp8 activation storage (memory only, but
    # ``moe`` and ``mla_up_proj`` re-run their forward GEMMs, ``moe`` its all-to-alls)
    recompute_modules: frozenset[str] = frozenset()
    fp8_activations: bool = False
    # the router probabilities weight the expert outputs in the combine, which then stores
    # them (models.memory.StoredActivations.probs_in_combine; off: Megatron-Core applies
    # them in the experts' activation)
    probs_in_combine: bool = False
    # the element-wise kernels of the MoE layers' MLP run over the routed copies (k x load
    # tokens of expert width) and the shared experts, not over the dense formula's one
    # ``ffn`` (``routed_elementwise_per_microbatch_s``); False leaves the dense formula's
    routed_elementwise: bool = True
    # the Gated DeltaNet layers' core between their projections (convolution, gates, chunked
    # delta rule, gated norm) at its measured cost (``gdn_chunk_per_microbatch_s``); False
    # leaves it out (their projections stay GEMMs)
    linear_attention_chunk: bool = True
    # the attention core's kernels run this many times the profile's fitted attention rate
    # (a ratio; ``moe_gemm_per_microbatch_s``): 1.0 the profile's; HOPPER_FUSED_ATTENTION_SPEEDUP for a
    # Megatron-Core release that runs Transformer Engine's fused attention on Hopper where
    # the profile's fit is FlashAttention-2's rate (module docstring)
    attention_kernel_speedup: float = 1.0
    # HBM bytes per expert-weight element that the weight-gradient GEMM moves: Megatron-Core
    # accumulates it into the fp32 main_grad buffer (read and write, 4 + 4 bytes; module
    # docstring); None: priced as one weight read, as the other passes (the term off)
    wgrad_accumulation_bytes: float | None = WGRAD_ACCUMULATION_BYTES
    # HBM bytes per element of the routed GEMMs' activation operands, each row's input read
    # and output written once a pass (``routed_activation_units``, module docstring); None:
    # the roofline counts the weights' bytes only (the term off)
    routed_activation_bytes: float | None = ROUTED_ACTIVATION_BYTES
    # Megatron-Core's --moe-router-dtype fp32: the router's two backward GEMMs at the TF32
    # rate and its fp32 casts (``router_fp32_per_microbatch_s``); False, Megatron-Core's
    # default (TransformerConfig.moe_router_dtype None), keeps the router at bf16
    router_fp32: bool = False

    @property
    def load(self) -> float:
        """Tokens the busiest expert processes, x the balanced share: ``capacity_factor``
        (dropped beyond it, padded up to it), else ``expert_load`` (dropless)."""
        return self.capacity_factor if self.capacity_factor is not None else self.expert_load

    def described(self) -> tuple[str, ...]:
        """The mechanisms this plan switches on, in words (evaluate's ``moe`` line)."""
        out = []
        if self.dualpipe:
            out.append("DualPipe (all-to-alls hidden, its bubble, two weight copies)")
        elif self.ep_overlap > 0:
            out.append(f"all-to-all overlap {self.ep_overlap:g}")
        if self.dispatch_per_domain:
            out.append("per-domain dispatch (DeepEP)")
        if self.dispatch_bytes != DISPATCH_BYTES:
            out.append(f"dispatch at {self.dispatch_bytes:.3g} bytes per element")
        if self.capacity_factor is not None:
            out.append(f"capacity factor {self.capacity_factor:g}")
        else:
            out.append(f"dropless (load {self.expert_load:g})")
        if self.recompute_modules:
            out.append("recompute modules " + ",".join(sorted(self.recompute_modules)))
        if self.fp8_activations:
            out.append("fp8 activations")
        if self.router_fp32:
            out.append("fp32 router")
        if not self.permute_fusion:
            out.append("unfused permutation")
        if self.attention_kernel_speedup != 1.0:
            out.append(f"fused attention (x{self.attention_kernel_speedup:g} the profile's)")
        return tuple(out)

    def paired_share(self, layout: Layout) -> float:
        """The share of the chunk passes the schedule runs beside another micro-batch's: 1
        under DualPipe; all but the warm-up's forwards and the cool-down's backwards under
        the all-to-all overlap (models.pipeline.a2a_overlap_exposed_share); 0 without one."""
        if self.dualpipe:
            return 1.0
        if self.ep_overlap <= 0:
            return 0.0
        return 1.0 - a2a_overlap_exposed_share(
            layout.pp, layout.vp, layout.grad_accum, layout.microbatch_group_size
        )

    def hidden_share(self, layout: Layout) -> float:
        """The all-to-all share an overlap would hide: 1 under DualPipe; else ep_overlap of
        the paired share (``paired_share``). What it hides is at most the compute of the
        chunks it pairs with (models.step.ep_overlap_s: the rest is exposed)."""
        return 1.0 if self.dualpipe else self.ep_overlap * self.paired_share(layout)


def tokens_per_gpu(layout: Layout, seq_len: int) -> float:
    """Tokens one GPU routes per micro-batch: T = s b / (TP CP) (sequence parallelism)."""
    return seq_len * layout.micro_batch / (layout.tp * layout.cp)


def ep_ranks_in_domain(gpu: GPUSpec, ex: ExpertLayout) -> int:
    """k_d: EP ranks of one EP group inside one scale-up domain (members ETP apart)."""
    return min(ex.ep, scaleup.ranks_in_domain(gpu, ex.etp))


def _up_bytes_s(gpu: GPUSpec, ranks: int) -> float:
    bw = scaleup.group_bw_gb_per_s(gpu, ranks) * gpu.calibration.scale_up_bus_efficiency
    return bw * comm.GB


def all_to_all_s(
    nbytes: float, ranks: int, in_domain: int, up_bytes_s: float, nic_bytes_s: float, lat: float
) -> float:
    """One all-to-all of ``nbytes`` sent per GPU over ``ranks`` GPUs, ``in_domain`` of them
    sharing the GPU's scale-up domain (module docstring)."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    if in_domain >= ranks:
        return nbytes * (ranks - 1) / ranks / up_bytes_s + lat
    inside = nbytes * (in_domain - 1) / ranks / up_bytes_s
    across = nbytes * (ranks - in_domain) / ranks / nic_bytes_s
    return max(inside, across) + lat


def remote_domains_per_token(experts: int, k: int, ep: int, k_d: int) -> float:
    """Expected remote scale-up domains one token's top-k experts fall in: the EP group's
    experts spread evenly over ep / k_d domains, the k picks uniform without replacement
    (module docstring, per-domain dispatch)."""
    domains = ep / k_d
    if domains <= 1 or k <= 0:
        return 0.0
    others = experts - experts / domains  # the experts outside one domain
    miss = 1.0
    for i in range(min(k, experts)):
        miss *= max(others - i, 0.0) / (experts - i)
    return (domains - 1) * (1.0 - miss)


def rank_layers(spec: TransformerSpec, layout: Layout) -> list[tuple[int, int]]:
    """(dense-MLP layers, MoE layers) per pipeline rank, MTP modules on their rank (the
    last unless the layout places them: Layout.mtp_rank)."""
    out = list(moe_rank_counts(spec, layout))
    if spec.mtp_layers:
        r = next(r for r in range(layout.pp) if layout.holds_mtp(r))
        n_dense, n_moe = out[r]
        if moe.moe_layer_pattern(spec)[-1]:
            out[r] = (n_dense, n_moe + spec.mtp_layers)
        else:
            out[r] = (n_dense + spec.mtp_layers, n_moe)
    return out


@dataclass(frozen=True)
class DispatchTerms:
    """One micro-batch's exposed dispatch and combine on the rank with the most MoE layers,
    split by what the NICs change: ``fixed_s + max(up_s, nic_bytes / share) + extra_bytes /
    share`` (share: a GPU's NIC bytes/s). ``up_s`` and ``nic_bytes`` are the in-domain and
    cross-domain parts of an all-to-all that leaves the scale-up domain (0 otherwise);
    ``extra_bytes``: an ETP all-gather over the NICs (ETP beyond the domain)."""

    fixed_s: float = 0.0
    up_s: float = 0.0
    nic_bytes: float = 0.0
    extra_bytes: float = 0.0

    def seconds(self, share_bytes_s: float) -> float:
        if self.nic_bytes <= 0 and self.extra_bytes <= 0 and self.up_s <= 0:
            return self.fixed_s
        return (
            self.fixed_s
            + max(self.up_s, self.nic_bytes / share_bytes_s)
            + self.extra_bytes / share_bytes_s
        )


def dispatch_terms(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex
) -> DispatchTerms:
    """Exposed dispatch and combine of one micro-batch on the rank with the most MoE
    layers: 4 all-to-alls per layer (6 with full recomputation) x (1 - the hidden share,
    ``ExpertLayout.hidden_share``), each
    ``all_to_all_s`` and, with ETP > 1, its all-gather or reduce-scatter over ETP (module
    docstring), split by what depends on the NICs (DispatchTerms). The hidden share's part
    the compute cannot cover is exposed too (models.step.ep_overlap_s)."""
    return dispatch_terms_exposed(spec, layout, seq_len, gpu, ex, 1.0 - ex.hidden_share(layout))


def dispatch_calls_bytes_per_element(layout: Layout, ex: ExpertLayout) -> tuple[float, float]:
    """(all-to-alls per MoE layer and micro-batch, their mean bytes per element): forward
    dispatch and combine, their transposes in backward, the forward pair again under full
    recomputation; the dispatch-direction ones (forward dispatch and its recompute,
    backward combine) at ``dispatch_bytes``, the rest bf16 (module docstring)."""
    again = layout.recompute == "full" or "moe" in ex.recompute_modules
    calls = 4.0 + (2.0 if again else 0.0)
    dispatch_dir = 2.0 + (1.0 if again else 0.0)
    mean = (dispatch_dir * ex.dispatch_bytes + (calls - dispatch_dir) * DISPATCH_BYTES) / calls
    return calls, mean


def dispatch_terms_exposed(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex, exposed: float
) -> DispatchTerms:
    """``dispatch_terms`` with ``exposed`` the share of the all-to-alls on the critical
    path (1 - the hidden share; 1.0 gives the whole traffic, ``overlap_cost_s``)."""
    if not spec.is_moe:
        return DispatchTerms()
    n_moe = max(m for _, m in rank_layers(spec, layout))
    per_layer, bytes_per_element = dispatch_calls_bytes_per_element(layout, ex)
    calls = per_layer * n_moe * exposed
    k = spec.experts_per_token or 0
    nbytes = tokens_per_gpu(layout, seq_len) * k * ex.load * spec.hidden * bytes_per_element
    lat = gpu.calibration.collective_latency_us * 1e-6
    k_d = ep_ranks_in_domain(gpu, ex)
    up = _up_bytes_s(gpu, k_d)
    fixed = up_s = nic_bytes = extra = 0.0
    if ex.ep > 1 and nbytes > 0:
        fixed = lat
        if k_d >= ex.ep:
            fixed += nbytes * (ex.ep - 1) / ex.ep / up
        else:
            up_s = nbytes * (k_d - 1) / ex.ep / up
            nic_bytes = nbytes * (ex.ep - k_d) / ex.ep
            if ex.dispatch_per_domain and spec.experts:
                copies = k * (ex.ep - k_d) / ex.ep
                nic_bytes *= remote_domains_per_token(spec.experts, k, ex.ep, k_d) / copies
    if ex.etp > 1:
        if ex.etp <= scaleup.domain_gpus(gpu):
            fixed += comm.ring_gather_s(
                nbytes * ex.etp, ex.etp, _up_bytes_s(gpu, ex.etp) / comm.GB, lat
            )
        elif nbytes > 0:
            fixed += (ex.etp - 1) * lat
            extra = (ex.etp - 1) / ex.etp * nbytes * ex.etp
    return DispatchTerms(fixed * calls, up_s * calls, nic_bytes * calls, extra * calls)


def ep_comm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, net: Network, ex
) -> float:
    """Exposed dispatch and combine of one micro-batch on the rank with the most MoE
    layers over ``net``'s NICs (``dispatch_terms``)."""
    share = nic_share_gb_per_s(gpu, net.node_bw_gb_per_s) * comm.GB
    return dispatch_terms(spec, layout, seq_len, gpu, ex).seconds(share)


def grouped_gemm_efficiency(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """1 / (1 + m_half / m + a): the rows m of one local expert's GEMM, m_half its weights'
    bytes and a its activations' (``routed_activation_units``; module docstring); m / (m +
    ``grouped_gemm_half_tokens``) when that is given."""
    return _efficiency_at(grouped_terms(spec, layout, seq_len, ex), ridge(gpu, layout.precision))


class GroupedGemmTerms(NamedTuple):
    """``grouped_gemm_efficiency``'s inputs but the GPU's ridge point (``ridge``)."""

    rows: float  # m, one local expert's rows
    fixed: float | None  # the efficiency where no ridge enters (dense: 1; a named m_half)
    weight_bytes: float  # weight_bytes_per_pass
    activation: tuple[float, float, int] | None  # _activation_terms


def grouped_terms(
    spec: TransformerSpec, layout: Layout, seq_len: int, ex: ExpertLayout
) -> GroupedGemmTerms:
    """What ``grouped_gemm_efficiency`` reads of the model and the layout (no GPU)."""
    if not spec.is_moe:
        return GroupedGemmTerms(0.0, 1.0, 0.0, None)
    assert spec.experts and spec.experts_per_token
    rows = tokens_per_gpu(layout, seq_len) * spec.experts_per_token * ex.load
    rows *= ex.ep * ex.etp / spec.experts
    if ex.grouped_gemm_half_tokens is not None:  # a named m_half replaces the roofline
        return GroupedGemmTerms(rows, rows / (rows + ex.grouped_gemm_half_tokens), 0.0, None)
    wb = weight_bytes_per_pass(spec, layout, ex)
    return GroupedGemmTerms(rows, None, wb, _activation_terms(spec, layout, ex))


def ridge(gpu: GPUSpec, precision: str) -> float:
    """The roofline's ridge point: peak FLOP/s at ``precision`` (bf16's where the GPU has
    none) / HBM bytes/s, in FLOPs per byte / 1e12 x 1e12."""
    peak = gpu.peak_tflops(precision) or gpu.dense_bf16_tflops
    return peak / gpu.memory_bw_tb_per_s


def _efficiency_at(t: GroupedGemmTerms, ridge_flop_per_byte: float) -> float:
    """``grouped_gemm_efficiency`` of its terms at a GPU's ridge point."""
    if t.fixed is not None:
        return t.fixed
    half = ridge_flop_per_byte * t.weight_bytes / 2.0
    units = _units(t.activation, ridge_flop_per_byte)
    return t.rows / (t.rows + half + units * t.rows)


def routed_activation_units(
    spec: TransformerSpec, layout: Layout, ex: ExpertLayout, ridge: float
) -> float:
    """The routed GEMMs' activation traffic in units of their peak-rate seconds: a pass over
    m rows of a k x n weight moves m (k + n) activation elements for its 2 m k n FLOPs, so
    the additive roofline adds ridge x bytes / 2 x (1/k + 1/n), whatever m: the
    up-projection k = h, n = (matrices - 1) f and the down-projection k = f, n = h
    (f = expert_ffn / ETP), weighted by their FLOPs. The bytes are the mean over the
    forward (input read at the GEMM's operand width w, output written), the data gradient
    (output gradient read at w, input gradient written) and the weight gradient (both read
    at w): (2 w + a) / 3 per element with a = ``routed_activation_bytes`` (bf16 outputs) and w 1 in
    fp8 (Transformer Engine casts the operands in their own kernels), else a. ``ridge``:
    peak FLOP/s / HBM bytes/s. 0 with ``routed_activation_bytes`` None."""
    return _units(_activation_terms(spec, layout, ex), ridge)


def _activation_terms(
    spec: TransformerSpec, layout: Layout, ex: ExpertLayout
) -> tuple[float, float, int] | None:
    """``routed_activation_units``'s (2 w + a, the FLOP-weighted 1/k + 1/n sum, matrices):
    all but the ridge point; None with ``routed_activation_bytes`` None."""
    if ex.routed_activation_bytes is None:
        return None
    a = ex.routed_activation_bytes
    w = 1.0 if layout.precision == "fp8" else a
    h, f, mats = spec.hidden, spec.expert_ffn / ex.etp, spec.mlp_matrices
    up = (mats - 1) * (1.0 / h + 1.0 / ((mats - 1) * f))
    return 2.0 * w + a, up + 1.0 / f + 1.0 / h, mats


def _units(terms: tuple[float, float, int] | None, ridge_flop_per_byte: float) -> float:
    """``routed_activation_units`` of its terms (the same operations in the same order)."""
    if terms is None:
        return 0.0
    nbytes, widths, mats = terms
    return ridge_flop_per_byte * nbytes / 3.0 / 2.0 * widths / mats


def weight_bytes_per_pass(spec: TransformerSpec, layout: Layout, ex: ExpertLayout) -> float:
    """Mean HBM bytes per expert-weight element of one routed GEMM pass (the roofline's
    m_half, module docstring): the forward-equivalent passes (forward, recomputed forwards,
    data gradient) read the weight once at its precision's width (1 byte fp8, else 2),
    and the weight-gradient pass, with ``wgrad_accumulation_bytes`` set, reads and writes
    the gradient buffer instead: (w (passes - 1) + wgrad bytes) / passes. None: every
    pass reads the weight once (the roofline before the term)."""
    w = 1.0 if layout.precision == "fp8" else 2.0
    if ex.wgrad_accumulation_bytes is None:
        return w
    passes = forward_passes(layout.recompute) + recompute_module_forwards(spec, layout, ex)[0]
    return (w * (passes - 1.0) + ex.wgrad_accumulation_bytes) / passes


@lru_cache(maxsize=256)
def _per_token_forward(spec: TransformerSpec, seq_len: int) -> tuple[float, ...]:
    """Forward FLOPs per token of a dense-MLP layer, of an MoE layer's attention, router
    and shared experts, of its top-k routed experts (balanced), of the attention core, and
    of the logits (the parts moe_gemm_per_microbatch_s prices)."""
    h, m = spec.hidden, spec.mlp_matrices
    attn = moe.mean_attention_params(spec)
    dense_fwd = 2.0 * (attn + m * h * spec.ffn)
    moe_fwd = 2.0 * (attn + m * h * spec.shared_experts * spec.shared_expert_ffn)
    moe_fwd += 2.0 * h * (spec.experts or 0)  # the router (replicated over TP)
    routed = 2.0 * (spec.experts_per_token or 0) * m * h * spec.expert_ffn
    # the quadratic core of the full-attention layers only, at the mean over the layers
    core = attention_core_forward_per_token(spec, seq_len) * (1.0 - la.linear_share(spec))
    return dense_fwd, moe_fwd, routed, core, flops.logit_forward_flops_per_token(spec)


def recompute_module_forwards(
    spec: TransformerSpec, layout: Layout, ex: ExpertLayout
) -> tuple[float, float]:
    """(extra forwards of an MoE layer's MLP part: router, shared and routed experts;
    extra forward FLOPs per token of its MLA up-projections) that ``recompute_modules``
    re-run (Megatron-Core's --recompute-modules: ``moe`` checkpoints the whole MoE layer,
    ``mla_up_proj`` the q_b and kv_b projections); 0 under full recomputation, which
    already re-runs the layer. ``shared_expert`` re-runs the shared experts' forward GEMMs
    (counted with the up-projections' FLOPs; nothing more under ``moe``)."""
    if layout.recompute == "full":
        return 0.0, 0.0
    again = 1.0 if "moe" in ex.recompute_modules else 0.0
    up = 0.0
    if "shared_expert" in ex.recompute_modules and not again:
        width = spec.shared_experts * spec.shared_expert_ffn
        up += 2.0 * spec.mlp_matrices * spec.hidden * width
    if spec.is_mla and "mla_up_proj" in ex.recompute_modules:
        assert spec.kv_lora_rank and spec.qk_head_dim and spec.qk_rope_head_dim
        assert spec.v_head_dim
        qk = spec.heads * (spec.qk_head_dim + spec.qk_rope_head_dim)
        q_in = spec.q_lora_rank or 0
        kv = spec.kv_lora_rank * spec.heads * (spec.qk_head_dim + spec.v_head_dim)
        up += 2.0 * (q_in * qk + kv)
    return again, up


def gdn_chunk_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout, layers: int
) -> float:
    """The Gated DeltaNet layers' core between their projections (convolution, l2norm, gates,
    chunked delta rule, gated norm) on a rank of ``layers`` layers (their linear share of
    them, models.linear_attention), as measured (GDN_CORE_FIXED_S_PER_PASS,
    GDN_CORE_PEAK_SHARE): each layer's forward-equivalents (three, four under full
    recomputation) cost a fixed GDN_CORE_FIXED_S_PER_PASS each, plus T x (2 k_c (2 d_qk +
    d_v') + 8 n_v d_v^2) FLOPs per layer and forward (Megatron-LM ``gdn_layer_flops``) at
    GDN_CORE_PEAK_SHARE of the bf16 peak. 0 without linear attention or with
    ``linear_attention_chunk`` off."""
    work = gdn_chunk_work(spec, layout, seq_len, ex, layers)
    return 0.0 if work is None else gdn_chunk_at_rate_s(work, gdn_flop_s(gpu))


def gdn_core_per_step_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """The Gated DeltaNet core's seconds in a step on the rank with the most layers:
    ``gdn_chunk_per_microbatch_s`` x the step's micro-batches (evaluate's ``moe`` line); 0
    without linear attention, before the ranks' layers are counted."""
    if not spec.has_linear_attention:
        return 0.0
    layers = max(n_dense + n_moe for n_dense, n_moe in rank_layers(spec, layout))
    per_microbatch = gdn_chunk_per_microbatch_s(spec, layout, seq_len, gpu, ex, layers)
    return layout.grad_accum * per_microbatch


class GdnWork(NamedTuple):
    """``gdn_chunk_per_microbatch_s``'s GPU-independent inputs on one rank."""

    flops: float  # T x forward-equivalents x linear layers x FLOPs per token
    passes: float  # forward-equivalents x linear layers: the fixed costs paid


def gdn_chunk_work(
    spec: TransformerSpec, layout: Layout, seq_len: int, ex: ExpertLayout, layers: int
) -> GdnWork | None:
    """``gdn_chunk_per_microbatch_s``'s FLOPs and fixed costs (None: the term is 0)."""
    if not spec.has_linear_attention or not ex.linear_attention_chunk:
        return None
    per_token = la.gdn_conv_forward_per_token(spec) + la.gdn_chunk_forward_per_token(spec)
    passes = (3.0 + (1.0 if layout.recompute == "full" else 0.0)) * layers * la.linear_share(spec)
    return GdnWork(tokens_per_gpu(layout, seq_len) * passes * per_token, passes)


def gdn_chunk_at_rate_s(work: GdnWork, flop_s: float) -> float:
    """``gdn_chunk_per_microbatch_s`` of its work at ``gdn_flop_s``."""
    return work.passes * GDN_CORE_FIXED_S_PER_PASS + work.flops / flop_s


def gdn_flop_s(gpu: GPUSpec) -> float:
    """The rate the Gated DeltaNet core's FLOPs run at beyond its fixed costs on ``gpu``."""
    return gpu.dense_bf16_tflops * 1e12 * GDN_CORE_PEAK_SHARE


def permute_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """Token permutation and unpermutation on the rank with the most MoE layers: the passes
    x the k-expanded tokens T k load x h x 2 bytes per MoE layer, at the GPU's HBM
    bandwidth. Fused (``permute_fusion``, Transformer Engine's kernels behind
    ``--moe-permute-fusion``): ``permute_hbm_passes``, a gather and its weighted sum, each
    reading and writing the expanded tokens, in forward and again in backward. Unfused
    (Megatron-Core's default, moe_utils at 6a6cd478: ``index_select`` and ``scatter_add_``,
    whose scatter-adds of colliding rows run as atomics): UNFUSED_PERMUTE_HBM_PASSES,
    measured. 0 with ``permute_hbm_passes`` 0 (the term off)."""
    if not spec.is_moe or ex.permute_hbm_passes <= 0:
        return 0.0
    passes = ex.permute_hbm_passes if ex.permute_fusion else UNFUSED_PERMUTE_HBM_PASSES
    n_moe = max(m for _, m in rank_layers(spec, layout))
    copies = tokens_per_gpu(layout, seq_len) * (spec.experts_per_token or 0) * ex.load
    nbytes = n_moe * passes * copies * spec.hidden * DISPATCH_BYTES
    return nbytes / (gpu.memory_bw_tb_per_s * 1e12)


def routed_elementwise_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """The element-wise HBM traffic of the MoE layers' MLPs beyond the dense formula's
    (models.step.memory_bound_per_microbatch_s counts every layer's MLP as one MLP of
    width ``ffn``): an MoE layer's activation and bias kernels run over T k load routed
    copies of width ``expert_ffn`` and the tokens' shared experts, Korthikanti et al.'s
    MLP bytes (6 x width gated, 4 plain, per token) each, so per MoE layer on the rank
    with the most MoE layers the dense formula misses
    T x (6 or 4) x (k load expert_ffn + shared x shared_ffn - ffn) bytes, at the same
    ``elementwise_passes`` (+ ``fp8_cast_passes`` in fp8) per forward-equivalent and the
    GPU's HBM bandwidth. It is 0 where the routed width equals ``ffn`` (DeepSeek-V3,
    Qwen3, Llama 4, whose configs give the dense ``intermediate_size`` as k experts' and
    the shared expert's width); Mixtral and Grok-1 (top-2 of experts as wide as ``ffn``)
    run twice the dense formula's MLP bytes, GPT-OSS-120B four times."""
    if not spec.is_moe or not ex.routed_elementwise:
        return 0.0
    cal = gpu.calibration
    n_moe = max(m for _, m in rank_layers(spec, layout))
    per_token = (6.0 if spec.gated_mlp else 4.0) * routed_elementwise_width(spec, ex)
    nbytes = tokens_per_gpu(layout, seq_len) * per_token * n_moe
    passes = cal.elementwise_passes + (cal.fp8_cast_passes if layout.precision == "fp8" else 0)
    return forward_passes(layout.recompute) * passes * nbytes / (gpu.memory_bw_tb_per_s * 1e12)


def routed_elementwise_width(spec: TransformerSpec, ex: ExpertLayout) -> float:
    """The MLP width per token of an MoE layer whose element-wise bytes the dense formula
    misses (routed_elementwise_per_microbatch_s): k load expert_ffn + shared experts x
    their width - ffn; negative where the dense ``ffn`` is the wider."""
    width = (spec.experts_per_token or 0) * ex.load * spec.expert_ffn
    width += spec.shared_experts * spec.shared_expert_ffn - spec.ffn
    return width


def router_fp32_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """What ``--moe-router-dtype fp32`` adds to the rank with the most MoE layers, per MoE
    layer: the router's data- and weight-gradient GEMMs (2 x 2 T h E FLOPs) at the TF32
    rate, TF32_PER_BF16 x the bf16 peak, instead of the bf16 rate the router's FLOPs are
    priced at (both at the GEMM efficiency of width h / TP), and ROUTER_FP32_CAST_BYTES x
    T h of casts at the HBM bandwidth. Megatron-LM's RouterGatingLinearFunction (moe_utils,
    since 0f058666a8, 2025-06-14) runs the forward through Transformer Engine's
    general_gemm with bf16 inputs and an fp32 output (the bf16 rate) and the backward with
    fp32 inputs, which Transformer Engine's cuBLASLt GEMM computes as
    CUBLAS_COMPUTE_32F_FAST_TF32 (common/gemm/cublaslt_gemm.cu: "Use TF32 only for pure
    FP32 GEMM"). The softmax / top-k over T x E scores run in fp32 either way (Megatron's
    score functions take fp32), so only their stored bytes change: not priced. 0 without
    ``router_fp32`` or experts."""
    if not spec.is_moe or not ex.router_fp32 or not spec.experts:
        return 0.0
    n_moe = max(m for _, m in rank_layers(spec, layout))
    t = tokens_per_gpu(layout, seq_len) * n_moe
    bf16 = gpu.dense_bf16_tflops * 1e12 * matmul_efficiency(gpu, spec.hidden, layout.tp)
    gemm_flops = t * 2.0 * 2.0 * spec.hidden * spec.experts
    gemm_s = gemm_flops / (TF32_PER_BF16 * bf16) - gemm_flops / bf16
    cast_s = t * ROUTER_FP32_CAST_BYTES * spec.hidden / (gpu.memory_bw_tb_per_s * 1e12)
    return gemm_s + cast_s


def overlap_cost_per_microbatch_s(c: StepCoefficients, share: float, ex: ExpertLayout) -> float:
    """The cost of hiding the all-to-alls: while the hidden part runs (models.step.
    ep_overlap_s at ``share``, bytes/s per GPU: at most the compute of the chunks it pairs
    with), its kernels hold ``overlap_sm_fraction`` of the SMs, so compute loses that
    fraction of the hidden seconds (DeepSeek-V3 Technical Report section 3.2.2: 20 of 132
    SMs). A paired chunk then takes at least max(compute + this cost, all-to-alls)."""
    if not c.ep_overlapped or ex.overlap_sm_fraction <= 0:
        return 0.0
    hidden, _ = ep_overlap_s(c, share)
    return ex.overlap_sm_fraction * float(hidden)


def overlap_coefficients(
    spec: TransformerSpec,
    layout: Layout,
    seq_len: int,
    gpu: GPUSpec,
    network: Network,
    ex: ExpertLayout,
    c: StepCoefficients,
    compute_s: float,
) -> tuple[float, dict[str, float | bool]]:
    """(the overlap's SM cost per micro-batch, the StepCoefficients fields of the
    all-to-alls it pairs with compute): the hidden share's dispatch terms
    (``dispatch_terms_exposed`` at ``ExpertLayout.hidden_share``), the window
    ``paired_share`` x ``compute_s`` (the micro-batch's kernel seconds before the cost),
    and whether the last micro-batch's compute is one of the windows: under DualPipe, which
    the model pairs whole; Megatron-Core's overlap runs the last backward alone (its
    cool-down, models.pipeline.a2a_overlap_warmup_chunks). The cost is priced at
    ``network``'s NICs (``overlap_cost_per_microbatch_s``; the solvers, whose NICs vary,
    never overlap). (0, {}) without an overlap; ``c``: the dense coefficients, whose ring
    fields are replaced by the MoE stage's own (its window at ``compute_s``, before the
    overlap's cost: moe_cp_coefficients), not the dense stand-in's."""
    hidden = ex.hidden_share(layout)
    if not spec.is_moe or hidden <= 0:
        return 0.0, {}
    c = c.updated(**moe_cp_coefficients(spec, layout, seq_len, gpu, compute_s))
    terms = dispatch_terms_exposed(spec, layout, seq_len, gpu, ex, hidden)
    paired = ex.paired_share(layout)
    fields: dict[str, float | bool] = {
        "ep_hidden_mb_s": terms.fixed_s,
        "ep_hidden_up_mb_s": terms.up_s,
        "ep_hidden_nic_bytes": terms.nic_bytes,
        "ep_hidden_nic_extra_bytes": terms.extra_bytes,
        "ep_window_s": paired * compute_s,
        "ep_paired": paired,
        "ep_window_last": ex.dualpipe,
    }
    share = comm.nic_share(network.node_bw_gb_per_s, c.gpus_per_node, c.network_efficiency)
    return overlap_cost_per_microbatch_s(c.updated(**fields), share, ex), fields


def a2a_overlap_violation(spec: TransformerSpec, layout: Layout, ex: ExpertLayout) -> str | None:
    """Why Megatron-Core refuses its all-to-all overlap (--overlap-moe-expert-parallel-comm,
    ``ep_overlap`` > 0) for this layout, with the change that fixes it; None where it runs.
    The rules of TransformerConfig.__post_init__ (megatron-core 0.19.2,
    transformer_config.py) the designer's layouts can break: expert parallelism, virtual
    stages when PP > 1, no full recomputation and no ``moe`` recompute module, at most one
    MTP layer. (Its others hold for every designer launch: the alltoall or flex
    dispatcher, bf16 parameters, no shared-expert overlap.)"""
    if ex.ep_overlap <= 0 or ex.dualpipe or not spec.is_moe:
        return None
    if ex.ep <= 1:
        return "it needs expert parallelism: set EP above 1"
    if layout.pp > 1 and layout.vp <= 1:
        return f"with PP {layout.pp} it needs virtual stages: set VP above 1"
    if layout.recompute == "full":
        return "it cannot run with full recomputation: use selective or none"
    if "moe" in ex.recompute_modules:
        return "it cannot recompute the moe module: drop moe from the recompute modules"
    if spec.mtp_layers > 1:
        return f"it runs at most one MTP layer, and {spec.name} has {spec.mtp_layers}"
    return None


def dualpipe_violation(layout: Layout, ex: ExpertLayout) -> str | None:
    """Why DualPipe cannot run this layout, with the change that fixes it; None where it
    can (or without DualPipe). deepseek-ai/DualPipe (dualpipe/dualpipe.py at 3da1bbe,
    ``DualPipe.step``): an even number of pipeline ranks, an even number of micro-batches
    and at least two per rank; its two directions are its own interleaving, so no virtual
    stages."""
    if not ex.dualpipe:
        return None
    p, m = layout.pp, layout.grad_accum
    if p < 2 or p % 2:
        return f"it needs an even PP of 2 or more, not {p}"
    if layout.vp > 1:
        return "it runs its own two directions, not virtual stages: set VP to 1"
    if m % 2 or m < 2 * p:
        return (
            f"it needs an even number of micro-batches a step, at least 2 x PP = {2 * p}, "
            f"not {m:g}: raise the global batch"
        )
    return None


def dualpipe_bubble_scale(pp: int) -> float:
    """DualPipe's bubble over 1F1B's: (PP/2 - 1)(F&B + B - 3W) against (PP - 1)(F + B)
    (deepseek-ai/DualPipe README; DeepSeek-V3 Technical Report Table 2), with a
    micro-batch's forward F, backward B = 2F (of which the weight gradients W = F) and the
    overlapped forward-and-backward chunk F&B = F + B: (PP/2 - 1) x 2 / (3 (PP - 1)).
    DualPipe needs an even PP; below 4 ranks it has no bubble to save (1.0)."""
    if pp < 4:
        return 1.0
    return (pp / 2.0 - 1.0) * 2.0 / (3.0 * (pp - 1.0))


def stored_activations(ex: ExpertLayout) -> StoredActivations:
    """The memory model's options of this expert layout (models.memory)."""
    return StoredActivations(
        ex.recompute_modules, ex.fp8_activations, ex.dualpipe, ex.probs_in_combine
    )


def expert_memory(
    spec: TransformerSpec, layout: Layout, seq_len: int, capacity_gb: float, a, ex
) -> MoEMemory:
    """models.memory.moe_memory_per_gpu at this expert layout: EP, ETP, the capacity
    factor or expert load, recompute modules, fp8 storage and DualPipe."""
    return moe_memory_per_gpu(
        spec,
        layout,
        seq_len,
        capacity_gb,
        a,
        ex.ep,
        ex.etp,
        capacity_factor=ex.capacity_factor,
        expert_load=ex.expert_load,
        stored=stored_activations(ex),
    )


def moe_gemm_per_microbatch_s(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, ex: ExpertLayout
) -> float:
    """Tensor-core time of one micro-batch on the slowest pipeline rank of a MoE / MLA /
    MTP model: its layers' active GEMMs (routed ones at the grouped-GEMM efficiency and
    ``expert_load``), attention cores (at ``attention_kernel_speedup`` x the profile's rate)
    and, on the last rank, logits (models.step rules). Computed as ``moe_gemm_work`` (no
    GPU but its FlashAttention) at ``moe_gemm_rates`` (the GPU's, per precision and TP)."""
    work = moe_gemm_work(spec, layout, seq_len, gpu.calibration.flash_attention, ex)
    return moe_gemm_at_rates_s(work, moe_gemm_rates(gpu, spec.hidden, layout.precision, layout.tp))


class MoEGemmWork(NamedTuple):
    """``moe_gemm_per_microbatch_s``'s inputs that do not depend on the GPU but through
    FlashAttention: each kind of pipeline rank's (work but the routed experts', the routed
    experts' FLOPs, the Gated DeltaNet core's GdnWork or None) and the grouped-GEMM terms."""

    stages: tuple[tuple[StageWork, float, GdnWork | None], ...]
    grouped: GroupedGemmTerms


class MoEGemmRates(NamedTuple):
    """``moe_gemm_per_microbatch_s``'s numbers of one GPU at one precision and TP."""

    gemm: GemmRates  # models.step.gemm_rates
    gdn_flop_s: float  # gdn_flop_s
    ridge: float  # ridge


def moe_gemm_work(
    spec: TransformerSpec, layout: Layout, seq_len: int, flash_attention: bool, ex: ExpertLayout
) -> MoEGemmWork:
    """The GPU-independent part of ``moe_gemm_per_microbatch_s`` (a caller pricing one shape
    on many GPUs of the same FlashAttention computes it once)."""
    stages = moe_gemm_stages(spec, layout, seq_len, flash_attention, ex)
    return MoEGemmWork(stages, grouped_terms(spec, layout, seq_len, ex))


def moe_gemm_stages(
    spec: TransformerSpec, layout: Layout, seq_len: int, flash_attention: bool, ex: ExpertLayout
) -> tuple[tuple[StageWork, float, GdnWork | None], ...]:
    """``MoEGemmWork.stages``: each kind of rank's work (_stage_flops) and Gated DeltaNet
    core work (gdn_chunk_work). They read the layout's TP, CP, pipeline split, micro-batch and
    recomputation, and ``ex``'s named factors, not the precision, the DP degree or EP and
    ETP (tests/test_moe_plan.py): a caller may share them between shapes that differ
    only in those."""
    return tuple(
        (work, routed, gdn_chunk_work(spec, layout, seq_len, ex, layers))
        for work, routed, layers in _stage_flops(spec, layout, seq_len, flash_attention, ex)
    )


def moe_gemm_rates(gpu: GPUSpec, hidden: int, precision: str, tp: int) -> MoEGemmRates:
    """The GPU's part of ``moe_gemm_per_microbatch_s`` (depends on the shape only through
    its precision and TP)."""
    return MoEGemmRates(
        gemm_rates(gpu, hidden, precision, tp),
        gdn_flop_s(gpu),
        ridge(gpu, precision),
    )


def moe_gemm_at_rates_s(work: MoEGemmWork, rates: MoEGemmRates) -> float:
    """``moe_gemm_per_microbatch_s`` of its two parts: the slowest rank's GEMM seconds (the
    same operations in the same order as pricing each rank's work on the GPU directly)."""
    gg = _efficiency_at(work.grouped, rates.ridge)
    linear_flop_s = rates.gemm.linear_flop_s
    worst = 0.0
    for stage, routed_flops, gdn in work.stages:
        # the routed experts' work is linear FLOPs only: work_at_rates_s of StageWork(
        # routed_flops / gg, 0.0, 0.0), whose attention and logits seconds are +0.0
        routed_s = routed_flops / gg / linear_flop_s
        seconds = work_at_rates_s(stage, rates.gemm) + routed_s
        seconds += 0.0 if gdn is None else gdn_chunk_at_rate_s(gdn, rates.gdn_flop_s)
        worst = max(worst, seconds)
    return worst


def moe_attention_flop_share(spec: TransformerSpec, seq_len: int) -> float:
    """The attention core's share of a layer's forward FLOPs per token, over the model's
    layers: dense ones, and MoE ones with their router, shared experts and top-k routed
    experts (balanced; _per_token_forward). The share of a MoE stage's compute that hides
    ring attention's sends (models.step.cp_window_per_microbatch_s, whose default is the
    dense layer's share; Liu et al. 2023, section 3), in place of the dense stand-in's,
    whose layers carry one FFN of width ``ffn`` (Mixtral 8x7B at 8K: 14.5% against 23.5%)."""
    dense_fwd, moe_fwd, routed, core, _ = _per_token_forward(spec, seq_len)
    n_moe = moe.moe_layers(spec)
    layer = ((spec.layers - n_moe) * dense_fwd + n_moe * (moe_fwd + routed)) / spec.layers
    return core / (layer + core)


def moe_cp_coefficients(
    spec: TransformerSpec, layout: Layout, seq_len: int, gpu: GPUSpec, compute_mb_s: float
) -> CpCoefficients:
    """A MoE stage's ring-attention fields: models.step.cp_coefficients with the window of
    its own compute ``compute_mb_s`` (moe_step_coefficients', --fused-attention and the
    host floor included) at its layers' attention share (moe_attention_flop_share), as
    step_coefficients prices a dense stage's. The share is under 1, so the compute plus
    the exposed ring never falls as the compute rises (solvers.space's dense_stage)."""
    share = moe_attention_flop_share(spec, seq_len)
    window = cp_window_per_microbatch_s(spec, layout, seq_len, compute_mb_s, share)
    return cp_coefficients(spec, layout, seq_len, gpu, window)


@lru_cache(maxsize=1 << 16)
def _stage_flops(
    spec: TransformerSpec, layout: Layout, seq_len: int, flash_attention: bool, ex: ExpertLayout
) -> tuple[tuple[StageWork, float, int], ...]:
    """moe_gemm_per_microbatch_s's FLOPs of each kind of pipeline rank, which depend on the
    GPU only through FlashAttention (cached: the solvers ask for every shape on every GPU):
    (the work but the routed experts', the routed experts' FLOPs before the grouped-GEMM
    efficiency divides them, the rank's layers)."""
    h = spec.hidden
    t = tokens_per_gpu(layout, seq_len)
    dense_fwd, moe_fwd, routed_one, core, logit_fwd = _per_token_forward(spec, seq_len)
    attn_fwd = 2.0 * moe.mean_attention_params(spec)
    routed_fwd = routed_one * ex.load
    forwards = forward_passes(layout.recompute)
    if flash_attention:
        core_passes = 3.5 + (1.0 if layout.recompute == "full" else 0.0)
    else:
        core_passes = 4.0 if layout.recompute in ("full", "selective") else 3.0
    moe_forwards, attn_again = recompute_module_forwards(spec, layout, ex)
    ranks = rank_layers(spec, layout)
    kinds = {
        (n_dense, n_moe, r == layout.pp - 1, layout.holds_mtp(r))
        for r, (n_dense, n_moe) in enumerate(ranks)
    }
    out = []
    for n_dense, n_moe, last, mtp in sorted(kinds):
        linear = t * forwards * (n_dense * dense_fwd + n_moe * moe_fwd)
        linear += t * n_moe * (moe_forwards * (moe_fwd - attn_fwd) + attn_again)
        if mtp and spec.mtp_layers:
            linear += t * forwards * spec.mtp_layers * 2.0 * 2 * h * h
        logits = t * 3.0 * logit_fwd if last else 0.0
        logits *= 1 + (spec.mtp_layers if last else 0)
        attention = t * (n_dense + n_moe) * core * core_passes / ex.attention_kernel_speedup
        work = StageWork(linear, attention, logits)
        routed_passes = forwards + moe_forwards
        out.append((work, t * routed_passes * n_moe * routed_fwd, n_dense + n_moe))
    return tuple(out)


def expert_dp_group(layout: Layout, ex: ExpertLayout) -> tuple[int, int]:
    """(num, den): the expert-DP group is (DP x CP) x num / den ranks, num / den =
    TP / (EP x ETP) in lowest terms (Megatron-Core's folding: TP x CP x DP / (EP x ETP))."""
    g = math.gcd(layout.tp, ex.ep * ex.etp)
    return layout.tp // g, ex.ep * ex.etp // g


def expert_dp_reduce_s(
    c: StepCoefficients, expert_params: float, edp: int, gpu: GPUSpec, ex, net: Network, zero
) -> float:
    """The expert gradients' reduction over the expert-DP group (ranks EP x ETP apart):
    models.step.group_reduce_s with that group's ranks per scale-up domain."""
    if edp <= 1 or expert_params <= 0:
        return 0.0
    k = scaleup.ranks_in_domain(gpu, ex.ep * ex.etp)
    bw = scaleup.group_bw_gb_per_s(gpu, k) * gpu.calibration.scale_up_bus_efficiency
    ce = replace(c, dp_ranks_per_node=k, scale_up_bw_gb_per_s=bw)
    return float(group_reduce_s(ce, expert_params * zero, edp, net.node_bw_gb_per_s))


def zero3_moe_bytes(
    spec: TransformerSpec, layout: Layout, ex: ExpertLayout, mem: MoEMemory, gpu: GPUSpec, a
) -> dict[str, float]:
    """A MoE rank's data-parallel bytes (StepCoefficients fields): models.step's rules for
    a dense model (step_coefficients, zero3_microbatch_s) applied to its two kinds of
    parameters, the non-expert ones over DP x CP and the routed experts over expert-DP
    (their ZeRO-3 shards: models.memory.moe_memory_per_gpu). Under ZeRO-3 every
    micro-batch all-gathers both, forward and backward (one all-reduce's traffic each:
    ``zero3_gather_bytes``, and in ``expert_zero3_bytes`` the experts' over their group),
    and where the stack reduce-scatters each micro-batch (zero3_microbatch_reduce_bytes:
    PyTorch FSDP2's post_backward reduce-scatters every FSDP group's gradients, the
    experts' over their own mesh, torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py
    @v2.9.0) both reduce-scatter their gradients too, the step's own reduction keeping the
    weights' half (``dp_bytes``, ``expert_dp_bytes``). The backward's last group (the tail,
    exposed every micro-batch) is the root module's embedding, output and norm and the
    stage's first layer, taken at the stage's mean layer (its non-expert and expert
    parameters over its layers, MTP modules included); a DualPipe rank holds two stages.
    Where the stage keeps its parameters unsharded across the micro-batches
    (models.step.zero3_gathers_once), both are gathered once a step instead
    (``zero3_step_gather_bytes``, ``expert_zero3_step_gather_bytes``)."""
    cal = gpu.calibration
    rs = zero3_microbatch_reduce_bytes(
        layout, cal.zero3_microbatch_grad_reduce_bytes, cal.zero3_pp_unsharded_params
    )
    per_param = step_reduction_bytes(layout, gpu, a)
    out = {"dp_bytes": mem.dense_params * per_param}
    out["expert_dp_bytes"] = mem.expert_params * per_param
    if layout.zero < 3:
        return out | dict.fromkeys(ZERO3_FIELDS, 0.0)
    if zero3_gathers_once(layout, gpu):
        out["zero3_step_gather_bytes"] = mem.dense_params * a.weight_bytes / 2.0
        out["expert_zero3_step_gather_bytes"] = mem.expert_params * a.weight_bytes / 2.0
        gather = 0.0
    else:
        out["zero3_step_gather_bytes"] = out["expert_zero3_step_gather_bytes"] = 0.0
        gather = a.weight_bytes
    stages = (mem.rank, layout.pp - 1 - mem.rank) if ex.dualpipe and layout.pp > 1 else (mem.rank,)
    counts = moe_rank_counts(spec, layout)
    layers = sum(sum(counts[r]) + (spec.mtp_layers if layout.holds_mtp(r) else 0) for r in stages)
    root = sum(_root_params(spec, layout, r) for r in stages)
    dense_tail = root + (mem.dense_params - root) / max(layers, 1)
    return out | {
        "zero3_gather_bytes": mem.dense_params * gather,
        "zero3_grad_rs_bytes": mem.dense_params * rs / 2.0,
        "zero3_grad_rs_tail_bytes": dense_tail * rs / 2.0,
        "expert_zero3_bytes": mem.expert_params * (gather + rs / 2.0),
        "expert_zero3_tail_bytes": mem.expert_params / max(layers, 1) * rs / 2.0,
    }


ZERO3_FIELDS = (
    "zero3_gather_bytes",
    "zero3_step_gather_bytes",
    "zero3_grad_rs_bytes",
    "zero3_grad_rs_tail_bytes",
    "expert_zero3_bytes",
    "expert_zero3_tail_bytes",
    "expert_zero3_step_gather_bytes",
)


def _root_params(spec: TransformerSpec, layout: Layout, rank: int) -> float:
    """Parameters per GPU of the root module on pipeline rank ``rank``: the input
    embedding on the first, the output projection (its own copy with PP) and final norm on
    the last (as models.memory's _moe_ranks_at counts them)."""
    root = float(spec.embedding_params()) if rank == 0 else 0.0
    if rank == layout.pp - 1:
        root += spec.output_params() if layout.pp == 1 else spec.vocab * spec.hidden
        root += spec.norm_params
    return root / layout.tp


def moe_step_coefficients(
    spec: TransformerSpec,
    layout: Layout,
    ex: ExpertLayout,
    seq_len: int,
    gpu: GPUSpec,
    network: Network,
    a: Assumptions,
    gemm_s: float | None = None,
    dense: StepCoefficients | None = None,
    mem: MoEMemory | None = None,
    elementwise_s: float | None = None,
    host_s: float | None = None,
) -> StepCoefficients:
    """A MoE / MLA / MTP model's step coefficients: models.step's for the dense parts,
    with the compute, the ring attention's window (moe_cp_coefficients), the
    expert-parallel all-to-alls, the gradient bytes and the Adam step of the layers as
    they are (module docstring). ``gemm_s``: the
    moe_gemm_per_microbatch_s of these arguments, when the caller has it; ``dense``: the
    step_coefficients of these arguments (any DP degree), when the caller has it; ``mem``:
    the expert_memory of these arguments at any GPU capacity (only its parameter counts
    and expert-DP degree are read, and the most loaded rank they come from is chosen by
    the total, which the capacity does not enter), when the caller has it;
    ``elementwise_s`` and ``host_s``: models.step's memory_bound_per_microbatch_s and
    host_issue_per_microbatch_s of these arguments (neither reads the experts or the DP
    degree), when the caller has them."""
    c = dense if dense is not None else step_coefficients(spec, layout, seq_len, gpu, network, a)
    if mem is None:
        mem = expert_memory(spec, layout, seq_len, gpu.memory_gb, a, ex)
    if gemm_s is None:
        gemm_s = moe_gemm_per_microbatch_s(spec, layout, seq_len, gpu, ex)
    gemm = gemm_s
    if elementwise_s is None:
        elementwise_s = memory_bound_per_microbatch_s(spec, layout, seq_len, gpu)
    if host_s is None:
        host_s = host_issue_per_microbatch_s(spec, layout, gpu)
    kernels = gemm + elementwise_s
    kernels += permute_per_microbatch_s(spec, layout, seq_len, gpu, ex)
    kernels += routed_elementwise_per_microbatch_s(spec, layout, seq_len, gpu, ex)
    kernels += router_fp32_per_microbatch_s(spec, layout, seq_len, gpu, ex)
    cost, overlap = overlap_coefficients(spec, layout, seq_len, gpu, network, ex, c, kernels)
    compute = max(kernels + cost, host_s - c.tp_mb_s)
    group = layout.dp * layout.cp
    expert_states = mem.expert_params * (group / mem.expert_dp if layout.zero >= 1 else 1.0)
    disp = dispatch_terms(spec, layout, seq_len, gpu, ex)
    num, den = expert_dp_group(layout, ex)
    k_e = scaleup.ranks_in_domain(gpu, ex.ep * ex.etp)
    return c.updated(
        compute_mb_s=compute,
        gemm_mb_s=gemm,
        ep_mb_s=disp.fixed_s,
        ep_up_mb_s=disp.up_s,
        ep_nic_bytes=disp.nic_bytes,
        ep_nic_extra_bytes=disp.extra_bytes,
        expert_dp_num=num,
        expert_dp_den=den,
        expert_ranks_per_node=k_e,
        expert_scale_up_bw_gb_per_s=scaleup.group_bw_gb_per_s(gpu, k_e)
        * gpu.calibration.scale_up_bus_efficiency,
        optimizer_s=(mem.dense_params + expert_states)
        * a.optimizer_traffic_bytes
        / (gpu.memory_bw_tb_per_s * 1e12),
        **zero3_moe_bytes(spec, layout, ex, mem, gpu, a),
        backward_mb_s=compute * 2.0 / forward_passes(layout.recompute),
        grad_overlap_s=gpu.calibration.grad_overlap_fraction * (compute + c.tp_mb_s)
        if layout.zero >= 1
        else 0.0,
        gather_overlap_s=gpu.calibration.param_gather_overlap_fraction * (compute + c.tp_mb_s)
        if layout.zero >= 3
        else 0.0,
        bubble_scale=dualpipe_bubble_scale(layout.pp) if ex.dualpipe else 1.0,
        **overlap,
        **moe_cp_coefficients(spec, layout, seq_len, gpu, compute),
    )
