"""NeMo 2.0 recipe overrides for a plan.

The recipe is the one of the plan's model family nearest in size
(designer/data/launch/nemo_recipes.yaml: llama31_405b for a 405B Llama, not llama3_70b);
the overrides set the model's shape and architecture in model.config and set or clear
every pipeline-split default the recipe's trainer() and MegatronStrategy carry (the
405B recipe accounts for the embedding and the loss; a plan that does not must clear
both), so what the recipe would have done differently from the plan never survives.
Field paths are designer/data/launch/nemo.yaml.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from typing import Any

import yaml

from designer.errors import Infeasible
from designer.launch.megatron_model import NORMALIZATION
from designer.launch.pipeline_layout import required_layout
from designer.launch.platform import platform_notes
from designer.launch.settings import Launch
from designer.launch.vocab import checked_against, vocabulary
from models import TransformerSpec


@cache
def recipes() -> dict[str, Any]:
    path = resources.files("designer") / "data" / "launch" / "nemo_recipes.yaml"
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def arch(spec: TransformerSpec) -> str | None:
    """The NeMo recipe family that builds this kind of model, or None."""
    if spec.position_embedding == "learned_absolute" and spec.activation == "gelu":
        return "gpt"
    if spec.position_embedding == "rope" and spec.activation == "squared_relu":
        return "nemotron"
    if spec.position_embedding == "rope" and spec.gated_mlp and spec.activation == "silu":
        return "llama"
    return None


def choose_recipe(spec: TransformerSpec) -> str:
    """The recipe of the spec's family nearest in size (log scale); at equal size, the one
    whose RoPE scaling matches the spec's."""
    family = arch(spec)
    table = recipes()["recipes"]
    candidates = [name for name, r in table.items() if r["arch"] == family]
    if not candidates:
        raise Infeasible(
            f"no NeMo 2.0 recipe builds {spec.name} ({spec.position_embedding} positions, "
            f"{'gated ' if spec.gated_mlp else ''}{spec.activation} MLP); use --emit megatron"
        )
    size = spec.params() / 1e9
    scaled = spec.rope_scaling is not None
    return min(
        candidates,
        key=lambda n: (
            round(abs(math.log(table[n]["params_b"] / size)), 1),
            table[n]["rope_scaling"] != scaled,
        ),
    )


def split_settings(job: Launch) -> dict[str, object]:
    """Every pipeline-split setting, as the plan has it (None clears a recipe default)."""
    lay = job.layout
    text = required_layout(job.spec.layers, lay, "NeMo") if lay.pp > 1 else None
    return {
        "pp": lay.pp,
        "vp": lay.vp if lay.vp > 1 else None,
        "first_stage_layers": lay.first_stage_layers if text is None else None,
        "last_stage_layers": lay.last_stage_layers if text is None else None,
        "embedding_in_split": lay.embedding_in_split and text is None,
        "loss_in_split": lay.loss_in_split and text is None,
        "pipeline_layout": text,
    }


def nemo_fields(job: Launch) -> list[tuple[str, object]]:
    """(recipe attribute path, value) for a NeMo 2.0 recipe."""
    spec, lay = job.spec, job.layout
    fields = vocabulary("nemo")["fields"]

    def f(key: str, value: object) -> tuple[str, object]:
        return fields[key]["path"], value

    recompute = {
        "none": (None, None, None),
        "selective": ("selective", None, None),
        "full": ("full", "uniform", 1),
    }[lay.recompute]
    out = [f("num_nodes", job.nodes), f("devices", job.procs_per_node)]
    if job.train_iters is not None:
        out.append(f("max_steps", job.train_iters))
    out += [f("tp", lay.tp), f("cp", lay.cp), f("sequence_parallel", lay.sp)]
    out += [f(k, v) for k, v in split_settings(job).items()]
    values: dict[str, object] = {
        "fp8": "hybrid" if lay.precision == "fp8" else None,
        "grad_reduce_in_fp32": not job.grad_reduce_bf16,
        "distributed_optimizer": lay.zero >= 1,
        "micro_batch": lay.micro_batch,
        "global_batch": lay.global_batch,
        "seq_len": job.seq_len,
        "model_seq_len": job.seq_len,
        "layers": spec.layers,
        "hidden": spec.hidden,
        "ffn_hidden": spec.ffn,
        "heads": spec.heads,
        "query_groups": spec.kv,
        "kv_channels": spec.head_dim,
        "gated_mlp": spec.gated_mlp,
        "tied_embeddings": spec.tied_embeddings,
        "position_embedding": spec.position_embedding,
    }
    if spec.position_embedding == "rope":
        values.update(rope_base=spec.rope_base, rope_percent=spec.rope_percent)
        if spec.rope_scaling is not None and spec.rope_scaling.factor is not None:
            values["rope_scaling_factor"] = spec.rope_scaling.factor
    values.update(
        normalization=NORMALIZATION[spec.normalization],
        norm_eps=spec.norm_eps,
        linear_bias=spec.linear_bias,
        qkv_bias=spec.qkv_bias and not spec.linear_bias,
        attention_dropout=spec.attention_dropout,
        hidden_dropout=spec.hidden_dropout,
        vocab=spec.vocab,
        recompute_granularity=recompute[0],
        recompute_method=recompute[1],
        recompute_num_layers=recompute[2],
    )
    out += [f(k, v) for k, v in values.items()]
    return out


def _python(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value)


def nemo(job: Launch) -> str:
    recipe = choose_recipe(job.spec)
    entry = recipes()["recipes"][recipe]
    lines = [
        f"# {job.summary}",
        f"# recipe fields checked against {checked_against('nemo')}",
        *platform_notes(job, "nemo"),
        f"# recipe = llm.{recipe}.pretrain_recipe(...)  (model {entry['config']}, the "
        f"{entry['arch']} recipe nearest the plan's {job.spec.params() / 1e9:,.1f}B); then:",
        "# or on the command line: nemo llm pretrain --factory "
        f"{recipe} path=value ...; every pipeline-split default of the recipe is set below",
    ]
    lines += [f"recipe.{path} = {_python(value)}" for path, value in nemo_fields(job)]
    return "\n".join(lines) + "\n"
