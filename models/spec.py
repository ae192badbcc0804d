"""Transformer architecture spec and its parameter count.

Parameter count follows the decoder-only transformer of Megatron-LM
(Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", SC'21, section 3): per layer, Q and output
projections h*h each, K and V projections h*(kv_heads*head_dim) each
(grouped-query attention, Ainslie et al. 2023), an MLP of two (plain) or three
(gated, SwiGLU as in Llama) h*ffn matrices, and two norms; plus the input
embedding V*h, an untied output projection V*h and the final norm. Biases are
ignored (under 0.1% for the zoo).
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field, model_validator


@lru_cache(maxsize=4096)
def _layer_matmul_params(hidden: int, kv_width: int, mlp_matrices: int, ffn: int) -> int:
    return 2 * hidden * hidden + 2 * hidden * kv_width + mlp_matrices * hidden * ffn


class TransformerSpec(BaseModel):
    """A decoder-only transformer. Sizes are counts, seq_len in tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    name: str = Field(default="custom", min_length=1)
    layers: int = Field(ge=1, le=100_000)
    hidden: int = Field(ge=1, le=10_000_000)
    heads: int = Field(ge=1, le=100_000)
    kv_heads: int | None = Field(default=None, ge=1, le=100_000)
    ffn_hidden: int | None = Field(default=None, ge=1, le=100_000_000)
    gated_mlp: bool = False
    vocab: int = Field(ge=1, le=100_000_000)
    seq_len: int = Field(ge=1, le=100_000_000)
    tied_embeddings: bool = False
    published_params_b: float | None = Field(
        default=None, gt=0, description="the size the authors publish, billions"
    )
    source: str | None = None

    @model_validator(mode="after")
    def _check_shapes(self) -> TransformerSpec:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be divisible by heads ({self.heads})")
        if self.heads % self.kv:
            raise ValueError(f"heads ({self.heads}) must be divisible by kv_heads ({self.kv})")
        return self

    @property
    def kv(self) -> int:
        """KV heads (equal to heads without grouped-query attention)."""
        return self.kv_heads if self.kv_heads is not None else self.heads

    @property
    def ffn(self) -> int:
        """MLP hidden size (4 * hidden when not given)."""
        return self.ffn_hidden if self.ffn_hidden is not None else 4 * self.hidden

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_ratio(self) -> float:
        """KV heads / heads: the size of K (or V) relative to Q."""
        return self.kv / self.heads

    @property
    def mlp_matrices(self) -> int:
        return 3 if self.gated_mlp else 2

    def layer_matmul_params(self) -> int:
        """Weights of one layer's matrix multiplications (QKV, output, MLP)."""
        return _layer_matmul_params(
            self.hidden, self.kv * self.head_dim, self.mlp_matrices, self.ffn
        )

    def layer_params(self) -> int:
        """One layer: matmul weights plus two norms of h each."""
        return self.layer_matmul_params() + 2 * self.hidden

    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    def output_params(self) -> int:
        """Untied output projection (0 when tied to the input embedding)."""
        return 0 if self.tied_embeddings else self.vocab * self.hidden

    def params(self) -> int:
        """Total trainable parameters."""
        return (
            self.layers * self.layer_params()
            + self.embedding_params()
            + self.output_params()
            + self.hidden  # final norm
        )
