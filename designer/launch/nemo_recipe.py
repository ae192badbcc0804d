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
from designer.launch.pipeline_layout import layout_string, needs_layout
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
    text = None
    if lay.pp > 1 and needs_layout(job.spec.layers, lay):
        text = layout_string(job.spec.layers, lay)
        if text is None:
            raise Infeasible(
                f"NeMo cannot run this pipeline split: the ranks' layers "
                f"{'/'.join(map(str, job.stage_layers))} do not divide over vp {lay.vp} chunks; "
                "re-run optimize without --ignore divisibility"
            )
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
    out += [
        f("fp8", "hybrid" if lay.precision == "fp8" else None),
        f("grad_reduce_in_fp32", not job.grad_reduce_bf16),
        f("distributed_optimizer", lay.zero >= 1),
        f("micro_batch", lay.micro_batch),
        f("global_batch", lay.global_batch),
        f("seq_len", job.seq_len),
        f("model_seq_len", job.seq_len),
        f("layers", spec.layers),
        f("hidden", spec.hidden),
        f("ffn_hidden", spec.ffn),
        f("heads", spec.heads),
        f("query_groups", spec.kv),
        f("kv_channels", spec.head_dim),
        f("gated_mlp", spec.gated_mlp),
        f("tied_embeddings", spec.tied_embeddings),
        f("position_embedding", spec.position_embedding),
    ]
    if spec.position_embedding == "rope":
        out += [f("rope_base", spec.rope_base), f("rope_percent", spec.rope_percent)]
        if spec.rope_scaling is not None and spec.rope_scaling.factor is not None:
            out.append(f("rope_scaling_factor", spec.rope_scaling.factor))
    out += [
        f("normalization", NORMALIZATION[spec.normalization]),
        f("norm_eps", spec.norm_eps),
        f("linear_bias", spec.linear_bias),
        f("qkv_bias", spec.qkv_bias and not spec.linear_bias),
        f("attention_dropout", spec.attention_dropout),
        f("hidden_dropout", spec.hidden_dropout),
        f("vocab", spec.vocab),
        f("recompute_granularity", recompute[0]),
        f("recompute_method", recompute[1]),
        f("recompute_num_layers", recompute[2]),
    ]
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
