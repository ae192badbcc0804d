"""Per-layer attention types: Gated DeltaNet linear attention and the gated full attention
of Qwen3-Next (issue 34).

Qwen3-Next (Qwen Team 2025, Qwen3-Next blog and Hugging Face config.json:
``full_attention_interval`` 4, ``layer_types``) runs three Gated DeltaNet layers (Yang,
Kautz & Hatamizadeh 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule",
ICLR 2025) to one full-attention layer whose output is gated. ``TransformerSpec`` holds
the pattern as ``full_attention_every`` (layer i, from 0, is full attention when i + 1 is
a multiple of it) and the linear layers' widths: n_k key heads and n_v value heads of
d_k and d_v channels, d_qk = n_k d_k, d_v' = n_v d_v, and a depthwise causal convolution
of kernel k_c.

Parameters of a Gated DeltaNet layer (transformers ``Qwen3NextGatedDeltaNet``, as the
released checkpoint holds them): ``in_proj_qkvz`` h x (2 d_qk + 2 d_v'), ``in_proj_ba``
h x 2 n_v (the per-head write strength beta and decay a), the depthwise ``conv1d``
(2 d_qk + d_v') x k_c without bias, ``A_log`` and ``dt_bias`` n_v each, the gated
RMSNorm of one value head d_v, and ``out_proj`` d_v' x h.

The gated attention's output gate (transformers ``Qwen3NextAttention``: ``q_proj`` is
twice the query width, half of it the gate; Megatron-LM ``--attention-output-gate``)
adds h x heads x head_dim weights per full-attention layer.

FLOPs per token and forward pass, Megatron-LM's ``gdn_layer_flops`` (megatron/training/
training.py at d98e8a64dd, 2026-08-22; the pinned 000c4ac24f61 has none):
2 x (h (2 d_qk + 2 d_v' + 2 n_v) + k_c (2 d_qk + d_v') + 4 n_v d_v^2 + h d_v'): the in
and out projections (GEMMs, ``gdn_projection_params``), the convolution, and the chunked
gated delta rule approximated as 4 n_v d_v^2 multiply-adds per token (no sequence term:
linear in the sequence where attention's core is quadratic). Training is 3 x forward.

Activations a Gated DeltaNet layer stores for backward (bytes per token, bf16, as
Korthikanti et al. 2022 count a layer's saved tensors): the projections' outputs
2 (2 d_qk + 2 d_v' + 2 n_v), the convolution's outputs 2 (2 d_qk + d_v'), the delta
rule's output 2 d_v' and the gated norm's output (out_proj's input) 2 d_v'; the gated
attention stores its gate 2 x heads x head_dim beyond Korthikanti's attention.

Everything a pipeline rank holds is taken at the model's mean over its layers (exact
when each rank holds the pattern's share, as Qwen3-Next's 48 layers in chunks of 4).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # models.transformer imports models.moe, which imports this module
    from models.transformer import TransformerSpec


@lru_cache(maxsize=256)
def full_attention_pattern(spec: TransformerSpec) -> tuple[bool, ...]:
    """Per layer, whether it is full attention (the others Gated DeltaNet)."""
    n = spec.full_attention_every
    return tuple((i + 1) % n == 0 for i in range(spec.layers))


def linear_layers(spec: TransformerSpec) -> int:
    """Layers of Gated DeltaNet linear attention."""
    return spec.layers - sum(full_attention_pattern(spec))


def linear_share(spec: TransformerSpec) -> float:
    """The share of the layers that are linear attention (0 for every other model)."""
    return linear_layers(spec) / spec.layers


def _widths(spec: TransformerSpec) -> tuple[int, int, int, int, int]:
    """(d_qk, d_v', n_v, d_v, k_c) of the linear layers (zeros without them)."""
    if not spec.has_linear_attention:
        return 0, 0, 0, 0, 0
    assert spec.linear_key_heads and spec.linear_key_head_dim and spec.linear_value_heads
    assert spec.linear_value_head_dim and spec.linear_conv_kernel
    d_qk = spec.linear_key_heads * spec.linear_key_head_dim
    d_v = spec.linear_value_heads * spec.linear_value_head_dim
    n_v = spec.linear_value_heads
    return d_qk, d_v, n_v, spec.linear_value_head_dim, spec.linear_conv_kernel


def gdn_projection_params(spec: TransformerSpec) -> int:
    """A Gated DeltaNet layer's GEMM weights: in_proj_qkvz, in_proj_ba and out_proj."""
    d_qk, d_v, n_v, _, _ = _widths(spec)
    return spec.hidden * (2 * d_qk + 2 * d_v + 2 * n_v) + d_v * spec.hidden


def gdn_params(spec: TransformerSpec) -> int:
    """A Gated DeltaNet layer's parameters (module docstring)."""
    d_qk, d_v, n_v, head_v, k_c = _widths(spec)
    if not d_v:
        return 0
    return gdn_projection_params(spec) + (2 * d_qk + d_v) * k_c + 2 * n_v + head_v


def output_gate_params(spec: TransformerSpec) -> int:
    """The gated attention's output gate: h x heads x head_dim (0 without the gate)."""
    return spec.hidden * spec.q_width if spec.attention_output_gate else 0


def gdn_conv_forward_per_token(spec: TransformerSpec) -> float:
    """The depthwise causal convolution: 2 k_c (2 d_qk + d_v') FLOPs per token."""
    d_qk, d_v, _, _, k_c = _widths(spec)
    return 2.0 * k_c * (2 * d_qk + d_v)


def gdn_chunk_forward_per_token(spec: TransformerSpec) -> float:
    """The chunked gated delta rule: 2 x 4 n_v d_v^2 FLOPs per token (Megatron-LM
    ``gdn_layer_flops``' approximation, module docstring)."""
    _, _, n_v, head_v, _ = _widths(spec)
    return 2.0 * 4.0 * n_v * head_v * head_v


def gdn_activation_coeff(spec: TransformerSpec) -> float:
    """A Gated DeltaNet layer's stored bytes per token / h, split over TP (module
    docstring)."""
    d_qk, d_v, n_v, _, _ = _widths(spec)
    stored = 2 * (2 * d_qk + 2 * d_v + 2 * n_v) + 2 * (2 * d_qk + d_v) + 2 * d_v + 2 * d_v
    return stored / spec.hidden


def output_gate_activation_coeff(spec: TransformerSpec) -> float:
    """The output gate's stored values, 2 x heads x head_dim bytes per token / h."""
    return 2.0 * spec.q_width / spec.hidden if spec.attention_output_gate else 0.0
