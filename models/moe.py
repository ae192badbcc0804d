"""Mixture-of-experts and latent attention: which inputs the designer can plan.

Issue 17 adds mixture-of-experts (MoE) models, multi-head latent attention (MLA) and
multi-token prediction (MTP) to the designer in steps. Until the step time and the
solvers model them end to end, a model that uses any of them is refused for planning
(exit 2, one line naming the key and the file). This module is the one place of that
rule: ``models.zoo`` applies it to every model the CLI reads.

Hugging Face config.json keys that look like MoE or MLA keys but that the importer
does not know are refused as well, never silently ignored (``MOE_LOOKING``).
"""

from __future__ import annotations

import re
from typing import Any

from models.errors import ModelError

# HF config.json keys of the contract ("Mixture-of-experts and attention variants")
HF_MOE_KEYS = (
    "num_local_experts",
    "n_routed_experts",
    "num_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
    "n_shared_experts",
    "shared_expert_intermediate_size",
    "first_k_dense_replace",
    "moe_layer_freq",
    "decoder_sparse_step",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_nope_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "num_nextn_predict_layers",
)
# the spec keys of the contract that make a model MoE, MLA or MTP (head_dim is dense too)
SPEC_MOE_KEYS = (
    "experts",
    "experts_per_token",
    "expert_ffn_hidden",
    "shared_experts",
    "shared_expert_ffn_hidden",
    "dense_layers",
    "moe_layer_every",
    "q_lora_rank",
    "kv_lora_rank",
    "qk_head_dim",
    "qk_rope_head_dim",
    "v_head_dim",
    "mtp_layers",
)
# a config.json key that matches this and that the importer does not know is refused
MOE_LOOKING = re.compile(
    r"expert|moe|router|routed|lora_rank|nextn|mtp|sparse_step|topk|top_k|aux_loss"
    r"|capacity_factor|dense_replace|interleave|intermediate_size_mlp",
    re.IGNORECASE,
)

NOT_YET = (
    "mixture-of-experts, latent attention and multi-token prediction are not modelled "
    "end to end yet (issue 17), so the designer does not plan this model"
)


def refuse_hf_moe(cfg: dict[str, Any], origin: str) -> None:
    """Refuse a config.json with any expert, latent-attention or MTP key (set, not null)."""
    keys = [k for k in HF_MOE_KEYS if k in cfg] + [k for k in cfg if MOE_LOOKING.search(k)]
    for key in keys:
        if cfg[key] is not None:
            raise ModelError(f"{origin}: {key}: {NOT_YET}")


def refuse_spec_moe(fields: dict[str, Any], origin: str) -> None:
    """Refuse a designer spec (file or zoo entry) with any of the contract's MoE keys."""
    for key in SPEC_MOE_KEYS:
        if fields.get(key) is not None:
            raise ModelError(f"{origin}: {key}: {NOT_YET}")
