"""Megatron-Bridge ConfigContainer overrides for a plan (--emit nemo).

The snippet calls the Bridge recipe function of the plan's model family nearest in size
(designer/data/launch/nemo_recipes.yaml: llama31_405b_pretrain_config for a 405B Llama,
not llama3_70b; vanilla_gpt for a family Bridge has no recipe for) and then sets, on the
ConfigContainer it returns, the model's shape and architecture and every parallel and
pipeline-split field, so what the recipe would have done differently from the plan
never survives (the 405B recipe accounts for the embedding and the loss; a plan that does
not clears both). Field paths are designer/data/launch/nemo.yaml; the release is the
megatron-bridge one of designer/data/launch/frameworks.yaml.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

import yaml

from designer.errors import FormatRefused
from designer.launch.megatron_model import NORMALIZATION, unsupported
from designer.launch.pipeline_layout import required_layout
from designer.launch.platform import platform_notes
from designer.launch.settings import Launch
from designer.launch.vocab import checked_against, checked_release, vocabulary
from models import TransformerSpec

OPTION = FormatRefused.OPTION  # the command's option that picks the format


class Code(str):
    """A Python expression written as is (not quoted) in the snippet."""


ACTIVATIONS = {
    "silu": ("import torch.nn.functional as F", "F.silu"),
    "gelu": ("import torch.nn.functional as F", "F.gelu"),
    "squared_relu": ("from megatron.core.activations import squared_relu", "squared_relu"),
}
# training/mixed_precision.py recipes: bf16, and FP8 with the hybrid (E4M3 forward,
# E5M2 backward) delayed-scaling recipe the megatron format emits (--fp8-format hybrid)
PRECISION = {"bf16": "bf16_mixed", "fp8": "bf16_with_fp8_delayed_scaling_mixed"}


@cache
def recipes() -> dict[str, Any]:
    path = resources.files("designer") / "data" / "launch" / "nemo_recipes.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def arch(spec: TransformerSpec) -> str | None:
    """The model family a Bridge recipe builds for this kind of model, or None."""
    if spec.position_embedding == "learned_absolute" and spec.activation == "gelu":
        return "gpt"
    if spec.position_embedding == "rope" and spec.activation == "squared_relu":
        return "nemotron"
    if spec.position_embedding == "rope" and spec.gated_mlp and spec.activation == "silu":
        return "llama"
    return None


def choose_recipe(spec: TransformerSpec) -> str:
    """The recipe of the spec's family nearest in size (log scale); at equal size, the one
    whose RoPE scaling matches the spec's; the bare vanilla_gpt recipe for a family Bridge
    has no recipe for."""
    family = arch(spec)
    if family is None or spec.activation not in ACTIVATIONS:
        raise FormatRefused(
            f"no Megatron-Bridge recipe builds {spec.name} ({spec.position_embedding} "
            f"positions, {'gated ' if spec.gated_mlp else ''}{spec.activation} MLP); "
            f"use {OPTION} megatron"
        )
    table = recipes()["recipes"]
    candidates = [name for name, r in table.items() if r["arch"] == family]
    if not candidates:
        return str(recipes()["fallback"]["name"])
    size = spec.params() / 1e9
    scaled = spec.rope_scaling is not None
    return min(
        candidates,
        key=lambda n: (
            round(abs(math.log(table[n]["params_b"] / size)), 1),
            table[n]["rope_scaling"] != scaled,
        ),
    )


def recipe_entry(name: str) -> dict[str, Any]:
    table = recipes()
    return table["recipes"].get(name) or table["fallback"]


def split_settings(job: Launch) -> dict[str, object]:
    """Every pipeline-split setting, as the plan has it (None clears a recipe default)."""
    lay = job.layout
    text = required_layout(job.spec.layers, lay, "Megatron-Bridge") if lay.pp > 1 else None
    return {
        "pp": lay.pp,
        "vp": lay.vp if lay.vp > 1 else None,
        "first_stage_layers": lay.first_stage_layers if text is None else None,
        "last_stage_layers": lay.last_stage_layers if text is None else None,
        "embedding_in_split": lay.embedding_in_split and text is None,
        "loss_in_split": lay.loss_in_split and text is None,
        "pipeline_layout": text,
    }


def model_values(spec: TransformerSpec, seq_len: int) -> dict[str, object]:
    """The model's shape and architecture, every field written (GPTModelProvider)."""
    values: dict[str, object] = {
        "model_seq_len": seq_len,
        "layers": spec.layers,
        "hidden": spec.hidden,
        "ffn_hidden": spec.ffn,
        "heads": spec.heads,
        "query_groups": spec.kv,
        "kv_channels": spec.head_dim,
        "gated_mlp": spec.gated_mlp,
        "activation": Code(ACTIVATIONS[spec.activation][1]),
        "tied_embeddings": spec.tied_embeddings,
        "position_embedding": spec.position_embedding,
    }
    if spec.position_embedding == "rope":
        scaling = spec.rope_scaling
        values.update(rope_base=spec.rope_base, rope_percent=spec.rope_percent)
        values["rope_scaling"] = scaling is not None
        if scaling is not None:
            values["rope_scaling_factor"] = scaling.factor
    values.update(
        normalization=NORMALIZATION[spec.normalization],
        norm_eps=spec.norm_eps,
        linear_bias=spec.linear_bias,
        qkv_bias=spec.qkv_bias and not spec.linear_bias,
        attention_dropout=spec.attention_dropout,
        hidden_dropout=spec.hidden_dropout,
        vocab=spec.vocab,
    )
    return values


def nemo_fields(job: Launch) -> list[tuple[str, object]]:
    """(ConfigContainer attribute path, value) for a Megatron-Bridge recipe's config."""
    spec, lay = job.spec, job.layout
    fields = vocabulary("nemo")["fields"]

    def f(key: str, value: object) -> tuple[str, object]:
        return fields[key]["path"], value

    recompute = {
        "none": (None, None, None),
        "selective": ("selective", None, None),
        "full": ("full", "uniform", 1),
    }[lay.recompute]
    out = []
    if job.train_iters is not None:
        out.append(f("max_steps", job.train_iters))
    out += [
        f("micro_batch", lay.micro_batch),
        f("global_batch", lay.global_batch),
        f("seq_len", job.seq_len),
        f("tp", lay.tp),
        f("cp", lay.cp),
        f("sequence_parallel", lay.sp),
    ]
    out += [f(k, v) for k, v in split_settings(job).items()]
    out += [
        f("precision", Code(f'get_mixed_precision_config("{PRECISION[lay.precision]}")')),
        f("grad_reduce_in_fp32", not job.grad_reduce_bf16),
        f("distributed_optimizer", lay.zero >= 1),
        f("optimizer_distributed", lay.zero >= 1),
    ]
    out += [f(k, v) for k, v in model_values(spec, job.seq_len).items()]
    out += [
        f("recompute_granularity", recompute[0]),
        f("recompute_method", recompute[1]),
        f("recompute_num_layers", recompute[2]),
    ]
    return out


def _python(value: object) -> str:
    if isinstance(value, Code):
        return str(value)
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value)


def refusal(job: Launch) -> str | None:
    """Why the Bridge snippet cannot build this plan's model, or None."""
    if job.layout.precision not in PRECISION:
        return f"{job.layout.precision} training has no Megatron-Bridge mixed-precision recipe here"
    return unsupported(job.spec)


def nemo(job: Launch) -> str:
    why = refusal(job)
    if why is not None:
        raise FormatRefused(f"{OPTION} nemo: {why}; use {OPTION} torchtitan or another model")
    recipe = choose_recipe(job.spec)
    entry = recipe_entry(recipe)
    function = entry.get("function", f"{recipe}_pretrain_config")
    hf = f"; it reads {entry['hf']}'s config.json from the Hugging Face Hub" if entry["hf"] else ""
    lines = [
        f"# {job.summary}",
        str(checked_release("nemo")),
        f"# ConfigContainer fields checked against {checked_against('nemo')}",
        *platform_notes(job, "nemo"),
        f"# start from the {entry['arch']} recipe nearest the "
        f"plan's {job.spec.params() / 1e9:,.1f}B{hf}; every model, parallel and "
        "pipeline-split setting it has is set below",
        "# then pretrain(cfg, forward_step) (megatron.bridge.training.pretrain, .gpt_step), "
        f"under torchrun --nnodes {job.nodes} --nproc-per-node {job.procs_per_node}",
        ACTIVATIONS[job.spec.activation][0],
        "from megatron.bridge.training.mixed_precision import get_mixed_precision_config",
        f"from megatron.bridge.recipes.{entry['module']} import {function}",
        "",
        f"cfg = {function}()",
    ]
    lines += [f"cfg.{path} = {_python(value)}" for path, value in nemo_fields(job)]
    return "\n".join(lines) + "\n"
