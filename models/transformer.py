"""Transformer architecture spec and its parameter count.

Parameter count follows the decoder-only transformer of Megatron-LM
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21, section 3), generalised to the attention
widths and options of current models: per layer, a query projection
h x (heads x head_dim) and an output projection of the same size, K and V
projections h x (kv_heads x head_dim) each (grouped-query attention, Ainslie et
al. 2023; head_dim may differ from h / heads, as in Gemma 2 and Qwen 3), an MLP
of two (plain) or three (gated, SwiGLU as in Llama) h x ffn matrices, and two
norms of h weights (plus h biases each for LayerNorm); biases of the linear layers
when the model has them (all of them, or QKV only as in Qwen 2); then the input
embedding V x h, learned absolute position embeddings seq_len x h when the model
uses them (GPT-2/GPT-3; Megatron-LM's --max-position-embeddings), an untied output
projection V x h (none when tied) and the final norm.

The architecture fields beyond the shape (position embedding, RoPE base and
scaling, normalization, biases, dropout, activation) are what a launch must
set for the framework to train this model; their defaults are those of a
Llama-style model (RoPE base 10,000, RMSNorm, no biases, no dropout), so a spec
file that only gives the shape keeps the parameter count it always had.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from catalog.specs import NumbersNotBools
from models.moe import total_params

Activation = Literal["gelu", "gelu_tanh", "silu", "relu", "squared_relu"]
PositionEmbedding = Literal["rope", "learned_absolute", "alibi", "none"]
Normalization = Literal["rmsnorm", "layernorm"]


@lru_cache(maxsize=4096)
def _layer_matmul_params(
    hidden: int, q_width: int, kv_width: int, mlp_matrices: int, ffn: int
) -> int:
    return 2 * hidden * q_width + 2 * hidden * kv_width + mlp_matrices * hidden * ffn


class RopeScaling(BaseModel):
    """RoPE frequency scaling for long context (Hugging Face ``rope_scaling``).

    ``llama3`` is Llama 3.1's rule (factor, low/high frequency factors and the original
    context length; Megatron-LM's --use-rope-scaling --rope-scaling-factor applies it
    with low 1, high 4, original 8192); ``linear`` divides positions by the factor."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    type: Literal["llama3", "linear", "dynamic", "yarn", "longrope"]
    factor: float | None = Field(default=None, gt=0, description="none for longrope")
    low_freq_factor: float | None = Field(default=None, gt=0)
    high_freq_factor: float | None = Field(default=None, gt=0)
    original_max_position_embeddings: int | None = Field(default=None, ge=1)
    # YaRN's attention temperature and correction range (DeepSeek-V3 config.json;
    # Megatron-LM --mscale, --mscale-all-dim; beta_fast 32 and beta_slow 1 when not given)
    mscale: float | None = Field(default=None, gt=0)
    mscale_all_dim: float | None = Field(default=None, ge=0)
    beta_fast: float | None = Field(default=None, gt=0)
    beta_slow: float | None = Field(default=None, gt=0)


class TransformerSpec(NumbersNotBools):
    """A decoder-only transformer. Sizes are counts, seq_len in tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(default="custom", min_length=1)
    layers: int = Field(ge=1, le=100_000)
    hidden: int = Field(ge=1, le=10_000_000)
    heads: int = Field(ge=1, le=100_000)
    kv_heads: int | None = Field(default=None, ge=1, le=100_000)
    head_dim: int = Field(  # filled in by _defaults when not given
        default=0, ge=1, le=1_000_000, description="attention head width; default hidden / heads"
    )
    ffn_hidden: int | None = Field(default=None, ge=1, le=100_000_000)
    gated_mlp: bool = False
    activation: Activation = Field(  # filled in by _defaults when not given
        default="gelu", description="MLP activation; default silu gated, gelu plain"
    )
    vocab: int = Field(ge=1, le=100_000_000)
    seq_len: int = Field(ge=1, le=100_000_000)
    tied_embeddings: bool = False
    position_embedding: PositionEmbedding = "rope"
    rope_base: float = Field(default=10_000.0, gt=0)
    rope_percent: float = Field(default=1.0, gt=0, le=1, description="rotary share of a head")
    rope_scaling: RopeScaling | None = None
    normalization: Normalization = "rmsnorm"
    norm_eps: float = Field(default=1e-5, gt=0, lt=1)
    linear_bias: bool = Field(default=False, description="biases in every linear layer")
    qkv_bias: bool = Field(default=False, description="biases in the QKV projection only")
    attention_dropout: float = Field(default=0.0, ge=0, lt=1)
    hidden_dropout: float = Field(default=0.0, ge=0, lt=1)
    qk_norm: bool = Field(
        default=False, description="a norm of head_dim weights on each query and key (Qwen 3)"
    )
    qk_norm_full: bool = Field(
        default=False,
        description="the query and key norms span the whole projection, heads x head_dim "
        "and kv_heads x head_dim weights, not one head (OLMo 2); needs qk_norm",
    )
    # mixture-of-experts (../shared/CLI-CONTRACT.md, "Mixture-of-experts and attention
    # variants"); a model without experts is dense and keeps every count it always had
    experts: int | None = Field(default=None, ge=1, le=1_000_000, description="routed experts")
    experts_per_token: int | None = Field(default=None, ge=1, description="router top-k")
    expert_ffn_hidden: int | None = Field(
        default=None, ge=1, le=100_000_000, description="one routed expert's FFN width"
    )
    shared_experts: int = Field(default=0, ge=0, le=1_000, description="always-active experts")
    shared_expert_ffn_hidden: int | None = Field(default=None, ge=1, le=100_000_000)
    shared_expert_gate: bool = Field(
        default=False,
        description="a sigmoid gate h x 1 on the shared experts' output per MoE layer "
        "(Qwen2-MoE's shared_expert_gate)",
    )
    dense_layers: int = Field(default=0, ge=0, description="leading layers with a dense MLP")
    moe_layer_every: int = Field(default=1, ge=1, description="every n-th layer after is MoE")
    # multi-head latent attention (DeepSeek-V2/V3); all or none (q_lora_rank may be null)
    q_lora_rank: int | None = Field(default=None, ge=1, le=10_000_000)
    kv_lora_rank: int | None = Field(default=None, ge=1, le=10_000_000)
    qk_head_dim: int | None = Field(default=None, ge=1, le=1_000_000)
    qk_rope_head_dim: int | None = Field(default=None, ge=1, le=1_000_000)
    v_head_dim: int | None = Field(default=None, ge=1, le=1_000_000)
    mtp_layers: int = Field(default=0, ge=0, le=1_000, description="multi-token prediction")
    # per-layer attention types (Qwen3-Next config.json full_attention_interval, layer_types;
    # models/linear_attention.py): layer i (from 0) is full attention when (i + 1) is a
    # multiple of full_attention_every, the others Gated DeltaNet linear attention of the
    # linear_* widths; 1 (the default): every layer full attention, as every other model
    full_attention_every: int = Field(default=1, ge=1, le=100_000)
    linear_key_heads: int | None = Field(default=None, ge=1, le=100_000)
    linear_value_heads: int | None = Field(default=None, ge=1, le=100_000)
    linear_key_head_dim: int | None = Field(default=None, ge=1, le=1_000_000)
    linear_value_head_dim: int | None = Field(default=None, ge=1, le=1_000_000)
    linear_conv_kernel: int | None = Field(default=None, ge=1, le=1_000)
    attention_output_gate: bool = Field(
        default=False, description="a sigmoid gate of the attention output (Qwen3-Next)"
    )
    # the router (DeepSeek-V3 config.json scoring_func, topk_method noaux_tc, n_group,
    # topk_group, routed_scaling_factor): softmax or sigmoid scores, a per-expert score
    # bias for load balancing (a buffer, not a trained parameter), the routed output's
    # scale, and group-limited routing (top router_group_topk of router_groups groups)
    router_score: Literal["softmax", "sigmoid"] = "softmax"
    router_expert_bias: bool = False
    router_topk_scale: float = Field(default=1.0, gt=0)
    router_groups: int | None = Field(default=None, ge=1)
    router_group_topk: int | None = Field(default=None, ge=1)
    published_params_b: float | None = Field(
        default=None, gt=0, description="the size the authors publish, billions"
    )
    published_active_params_b: float | None = Field(
        default=None, gt=0, description="active parameters per token the authors publish"
    )
    published_active_counts_embedding: bool = Field(
        default=True,
        description="whether the published active count includes the input embedding",
    )
    source: str | None = None
    # a sliding window or attention chunk (config.json sliding_window, Llama 4's
    # attention_chunk_size), in tokens: not modelled, so a planned sequence longer than it
    # is refused (windowed_sequence_refusal); at or below it every token attends to all
    # before it, which is the full causal attention the model prices
    attention_window: int | None = Field(
        default=None,
        ge=1,
        description="sliding window or attention chunk, tokens (not modelled: a longer "
        "planned sequence is refused)",
    )
    attention_window_key: str | None = Field(
        default=None, description="the config.json key the window was read from"
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """head_dim = hidden / heads and the activation from gated_mlp, when not given."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        hidden, heads = data.get("hidden"), data.get("heads")
        if data.get("head_dim") is None and isinstance(hidden, int) and isinstance(heads, int):
            if heads >= 1 and hidden % heads:
                raise ValueError(
                    f"hidden ({hidden}) must be divisible by heads ({heads}); or give head_dim"
                )
            data["head_dim"] = hidden // heads if heads >= 1 else None
        if data.get("activation") is None:
            data["activation"] = "silu" if data.get("gated_mlp") else "gelu"
        return data

    @model_validator(mode="after")
    def _check_shapes(self) -> TransformerSpec:
        if self.heads % self.kv:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv})")
        if self.qk_norm_full and not self.qk_norm:
            raise ValueError("qk_norm_full needs qk_norm (it widens the query and key norms)")
        if self.shared_expert_gate and not self.shared_experts:
            raise ValueError("shared_expert_gate needs shared_experts (it gates their output)")
        _check_moe(self)
        _check_linear_attention(self)
        return self

    @property
    def is_moe(self) -> bool:
        """Whether the model has routed experts."""
        return self.experts is not None

    @property
    def is_mla(self) -> bool:
        """Whether the attention is multi-head latent attention."""
        return self.kv_lora_rank is not None

    @property
    def is_dense(self) -> bool:
        """Neither experts, latent attention, multi-token prediction, linear attention nor
        an attention output gate: the model every planning formula of the designer covers."""
        plain_attention = not self.has_linear_attention and not self.attention_output_gate
        return not self.is_moe and not self.is_mla and self.mtp_layers == 0 and plain_attention

    @property
    def has_linear_attention(self) -> bool:
        """Whether some layers are Gated DeltaNet linear attention (full_attention_every)."""
        return self.full_attention_every > 1

    @property
    def kv(self) -> int:
        """KV heads (equal to heads without grouped-query attention)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def ffn(self) -> int:
        """MLP hidden size (4 * hidden when not given)."""
        return self.ffn_hidden if self.ffn_hidden is not None else 4 * self.hidden

    @property
    def kv_ratio(self) -> float:
        """KV heads / heads: the size of K (or V) relative to Q."""
        return self.kv / self.heads

    @property
    def expert_ffn(self) -> int:
        """One routed expert's FFN width (the dense FFN width when not given, as Mixtral)."""
        return self.expert_ffn_hidden if self.expert_ffn_hidden is not None else self.ffn

    @property
    def shared_expert_ffn(self) -> int:
        """One shared expert's FFN width (a routed expert's when not given)."""
        if self.shared_expert_ffn_hidden is not None:
            return self.shared_expert_ffn_hidden
        return self.expert_ffn

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    @property
    def q_width(self) -> int:
        """Width of the queries (and of the attention output): heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_pass_width(self) -> int:
        """Width of one token's keys and values together, as attention reads them: 2 x kv
        heads x head_dim; for MLA the up-projected heads x (qk + rope) keys and heads x v
        values (DeepSeek-AI 2024, arXiv 2405.04434, section 2.1.2), not hidden / heads."""
        if not self.is_mla:
            return 2 * self.kv * self.head_dim
        assert self.qk_head_dim and self.qk_rope_head_dim and self.v_head_dim
        return self.heads * (self.qk_head_dim + self.qk_rope_head_dim + self.v_head_dim)

    def architecture(self) -> dict[str, Any]:
        """Every field that decides what the framework builds and trains, defaults resolved
        (kv heads and FFN width as numbers): what a launch must reproduce. Not the sliding
        window or attention chunk (attention_window): a plan's sequence is at most the
        window (windowed_sequence_refusal), where every token attends to all before it,
        which is the full causal attention a launch builds (Megatron-LM has no chunked
        attention; llama4-scout's attention_chunk_size is in the zoo since 2026-12-05)."""
        out = self.model_dump(
            exclude={
                "name",
                "published_params_b",
                "published_active_params_b",
                "published_active_counts_embedding",
                "source",
                "seq_len",
                "attention_window",
                "attention_window_key",
            }
        )
        out.update(kv_heads=self.kv, ffn_hidden=self.ffn)
        if self.is_moe:  # expert widths resolved too (a launch writes them as numbers)
            shared = self.shared_expert_ffn if self.shared_experts else None
            out.update(expert_ffn_hidden=self.expert_ffn, shared_expert_ffn_hidden=shared)
        return out

    def layer_matmul_params(self) -> int:
        """Weights of one layer's matrix multiplications (QKV, output, MLP)."""
        return _layer_matmul_params(
            self.hidden, self.q_width, self.kv * self.head_dim, self.mlp_matrices, self.ffn
        )

    def layer_bias_params(self) -> int:
        """One layer's biases: every linear layer's, or the QKV projection's only."""
        qkv = self.q_width + 2 * self.kv * self.head_dim
        if self.linear_bias:
            return qkv + self.hidden + (self.mlp_matrices - 1) * self.ffn + self.hidden
        return qkv if self.qkv_bias else 0

    @property
    def qk_norm_params(self) -> int:
        """One layer's query and key norms (qk_norm): one norm of head_dim each, shared by
        the heads (Qwen 3), or with ``qk_norm_full`` one over the whole query projection
        and one over the whole key projection, heads x head_dim and kv_heads x head_dim
        weights (OLMo 2: transformers' Olmo2Attention q_norm and k_norm, modeling_olmo2.py
        at commit 000c33fdfde12e1ffafbfcdb3c926df5727a00b6)."""
        if not self.qk_norm:
            return 0
        widths = self.q_width + self.kv * self.head_dim if self.qk_norm_full else 2 * self.head_dim
        return widths * (2 if self.normalization == "layernorm" else 1)

    @property
    def norm_params(self) -> int:
        """One norm: a scale per channel, and a bias for LayerNorm."""
        return self.hidden * (2 if self.normalization == "layernorm" else 1)

    def layer_params(self) -> int:
        """One layer: matmul weights, biases, two norms and the query/key norms."""
        return (
            self.layer_matmul_params()
            + self.layer_bias_params()
            + 2 * self.norm_params
            + self.qk_norm_params
        )

    def embedding_params(self) -> int:
        """Input embedding, with learned absolute position embeddings when used."""
        positions = self.seq_len if self.position_embedding == "learned_absolute" else 0
        return (self.vocab + positions) * self.hidden

    def output_params(self) -> int:
        """Untied output projection (0 when tied to the input embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def params(self) -> int:
        """Total trainable parameters (for MoE / MLA models, of the main model without its
        multi-token-prediction modules, as the authors publish them: models.moe)."""
        if not self.is_dense:
            return total_params(self)
        return (
            self.layers * self.layer_params()
            + self.embedding_params()
            + self.output_params()
            + self.norm_params  # final norm
        )


_LINEAR_REQUIRED = (
    "linear_key_heads", "linear_value_heads", "linear_key_head_dim", "linear_value_head_dim",
    "linear_conv_kernel",
)  # fmt: skip


def _check_linear_attention(spec: TransformerSpec) -> None:
    """Linear attention's widths all given with full_attention_every > 1, none without;
    the full-attention layers not fewer than one; key heads dividing the value heads."""
    given = [k for k in _LINEAR_REQUIRED if getattr(spec, k) is not None]
    if spec.full_attention_every == 1:
        if given:
            raise ValueError(
                f"{given[0]} needs full_attention_every > 1 (the layers between full-attention "
                "layers are linear attention)"
            )
        return
    if len(given) < len(_LINEAR_REQUIRED):
        missing = next(k for k in _LINEAR_REQUIRED if getattr(spec, k) is None)
        raise ValueError(
            f"{missing}: linear attention (full_attention_every > 1) needs all of "
            f"{', '.join(_LINEAR_REQUIRED)}"
        )
    if spec.full_attention_every > spec.layers:
        raise ValueError(
            f"full_attention_every ({spec.full_attention_every}) leaves no full-attention layer "
            f"in {spec.layers} layers"
        )
    if spec.is_mla:
        raise ValueError("full_attention_every: linear attention with latent attention")
    assert spec.linear_key_heads and spec.linear_value_heads
    if spec.linear_value_heads % spec.linear_key_heads:
        raise ValueError(
            f"linear_value_heads ({spec.linear_value_heads}) must be a multiple of "
            f"linear_key_heads ({spec.linear_key_heads})"
        )


_MLA_REQUIRED = ("kv_lora_rank", "qk_head_dim", "qk_rope_head_dim", "v_head_dim")
_NEEDS_EXPERTS = (
    "experts_per_token", "expert_ffn_hidden", "shared_expert_ffn_hidden", "router_groups",
)  # fmt: skip


def _check_moe(spec: TransformerSpec) -> None:
    """The contract's rules: top-k within the experts, MoE keys only with experts, the
    leading dense layers fewer than the layers, MLA's dimensions all or none."""
    if spec.experts is None:
        for key in _NEEDS_EXPERTS:
            if getattr(spec, key) is not None:
                raise ValueError(f"{key} needs experts (the routed experts per MoE layer)")
        if spec.router_score != "softmax" or spec.router_expert_bias:
            key = "router_expert_bias" if spec.router_expert_bias else "router_score"
            raise ValueError(f"{key} needs experts (the routed experts per MoE layer)")
        if spec.shared_experts:
            raise ValueError("shared_experts needs experts (the routed experts per MoE layer)")
        if spec.dense_layers or spec.moe_layer_every != 1:
            key = "dense_layers" if spec.dense_layers else "moe_layer_every"
            raise ValueError(f"{key} needs experts (a model without experts is all dense)")
    else:
        if spec.experts_per_token is None:
            raise ValueError("experts needs experts_per_token (the router's top-k)")
        if spec.experts_per_token > spec.experts:
            raise ValueError(
                f"experts_per_token ({spec.experts_per_token}) must be at most experts "
                f"({spec.experts})"
            )
        if spec.dense_layers >= spec.layers:
            raise ValueError(
                f"dense_layers ({spec.dense_layers}) must be fewer than layers ({spec.layers})"
            )
        if spec.moe_layer_every > spec.layers - spec.dense_layers:
            raise ValueError(
                f"moe_layer_every ({spec.moe_layer_every}) leaves no MoE layer in the "
                f"{spec.layers - spec.dense_layers} layers after dense_layers"
            )
        if spec.shared_expert_ffn_hidden is not None and not spec.shared_experts:
            raise ValueError("shared_expert_ffn_hidden needs shared_experts (at least 1)")
    given = [k for k in _MLA_REQUIRED if getattr(spec, k) is not None]
    if (given or spec.q_lora_rank is not None) and len(given) < len(_MLA_REQUIRED):
        missing = next(k for k in _MLA_REQUIRED if getattr(spec, k) is None)
        raise ValueError(
            f"{missing}: multi-head latent attention needs all of {', '.join(_MLA_REQUIRED)} "
            "(q_lora_rank may be null)"
        )
    if given and spec.qk_norm:
        raise ValueError("qk_norm: multi-head latent attention has its own latent norms")
    if (spec.router_groups is None) != (spec.router_group_topk is None):
        raise ValueError("router_groups and router_group_topk go together (group-limited routing)")
    _check_router_groups(spec)
    if given and (spec.linear_bias or spec.qkv_bias):
        key = "linear_bias" if spec.linear_bias else "qkv_bias"
        raise ValueError(f"{key}: biases with multi-head latent attention are not modelled")


def _check_router_groups(spec: TransformerSpec) -> None:
    """Group-limited routing as Megatron-Core's router takes it (moe_utils.group_limited_topk:
    the experts split evenly into router_groups groups, the top router_group_topk groups
    kept, the top-k drawn from their experts): the groups divide the experts, at most all
    groups are kept, and the kept groups hold at least top-k experts. A launch emitted with
    other values would fail in the framework, or route a model no one trains."""
    groups, kept = spec.router_groups, spec.router_group_topk
    if groups is None or kept is None:
        return
    if spec.experts is None:
        raise ValueError("router_groups needs experts (group-limited routing of routed experts)")
    if spec.experts % groups:
        raise ValueError(
            f"router_groups ({groups}) must divide experts ({spec.experts}): the experts split "
            "evenly into groups"
        )
    if kept > groups:
        raise ValueError(f"router_group_topk ({kept}) must be at most router_groups ({groups})")
    per_group = spec.experts // groups
    if spec.experts_per_token is not None and kept * per_group < spec.experts_per_token:
        raise ValueError(
            f"router_group_topk ({kept}) groups of {per_group} experts hold fewer than "
            f"experts_per_token ({spec.experts_per_token}); keep more groups"
        )


def windowed_sequence_refusal(spec: TransformerSpec, seq_len: int) -> str | None:
    """Why a sequence cannot be planned on this model (None: it can): longer than the model's
    sliding window or attention chunk, whose attention the performance model does not
    price (../shared/CLI-CONTRACT.md: a key the designer cannot model is refused, never
    read as a different model). At or below the window the attention is full causal
    attention, which it prices."""
    window = spec.attention_window
    if window is None or seq_len <= window:
        return None
    key = spec.attention_window_key or "attention_window"
    return (
        f"{spec.name}: {key}: {window:,} tokens, shorter than the planned sequence "
        f"({seq_len:,}); windowed attention is not modelled: pass --seq-len {window} or less"
    )
