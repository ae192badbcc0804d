"""torchtitan's job-config TOML for a plan.

The pipeline split is written so that torchtitan builds exactly the plan's stages, by
torchtitan's own rule (torchtitan/distributed/pipeline_parallel.py pipeline_llm and
generate_llm_fqn_per_model_part at pytorch/torchtitan e347b1e5e6b6, the last commit with
TOML job configs): it counts the input and output modules as
pipeline_parallel_first/last_stage_less_layers layers each (default 1) and makes
ceil((layers + first + last) / pipeline_parallel_layers_per_stage) stages. An even split
or Megatron's embedding/loss accounting is that rule with first/last 0 or 1; any other
split (first/last-stage layers, a pipeline that does not divide the layers) is written
as module_fqns_per_model_part, every stage's modules spelled out.
"""

from __future__ import annotations

import json

from designer.launch.pipeline_layout import chunks_or_refuse, needs_layout
from designer.launch.platform import platform_notes
from designer.launch.settings import Launch
from designer.launch.vocab import checked_against, vocabulary


def compact_split(job: Launch) -> bool:
    """torchtitan's layers-per-stage rule reproduces the plan's split."""
    lay = job.layout
    return (
        lay.first_stage_layers is None
        and lay.last_stage_layers is None
        and not needs_layout(job.spec.layers, lay)
    )


def torchtitan_sections(job: Launch) -> dict[str, dict[str, object]]:
    """[section] -> {field: value} for torchtitan's job-config TOML."""
    lay = job.layout
    known = vocabulary("torchtitan")["sections"]
    pipelined = lay.pp > 1
    sections: dict[str, dict[str, object]] = {}
    if lay.precision == "fp8":
        sections["model"] = {"converters": ["float8"]}
    sections["training"] = {
        # with PP one step is one pass of every micro-batch through the pipeline; without
        # it torchtitan accumulates global / (local x DP) micro-batches
        "local_batch_size": lay.global_batch // lay.dp if pipelined else lay.micro_batch,
        "global_batch_size": lay.global_batch,
        "seq_len": job.seq_len,
    }
    if job.train_iters is not None:
        sections["training"]["steps"] = job.train_iters
    sections["training"]["mixed_precision_param"] = "bfloat16"
    sharded = lay.zero >= 1
    par: dict[str, object] = {
        "data_parallel_replicate_degree": 1 if sharded else lay.dp,
        "data_parallel_shard_degree": lay.dp if sharded else 1,
        "tensor_parallel_degree": lay.tp,
        "context_parallel_degree": lay.cp,
        "pipeline_parallel_degree": lay.pp,
    }
    if pipelined:
        par["pipeline_parallel_schedule"] = "Interleaved1F1B" if lay.vp > 1 else "1F1B"
        if compact_split(job):
            par["pipeline_parallel_layers_per_stage"] = job.layers_per_virtual_stage
            par["pipeline_parallel_first_stage_less_layers"] = int(lay.embedding_in_split)
            par["pipeline_parallel_last_stage_less_layers"] = int(lay.loss_in_split)
        else:
            par["module_fqns_per_model_part"] = torchtitan_model_parts(job)
        par["pipeline_parallel_microbatch_size"] = lay.micro_batch
    sections["parallelism"] = par
    ac: dict[str, object] = {"mode": lay.recompute}
    if lay.recompute == "selective":
        ac["selective_ac_option"] = "op"
    sections["activation_checkpoint"] = ac
    for name, values in sections.items():  # the vocabulary is the contract: no invented fields
        unknown = set(values) - set(known[name])
        if unknown:
            raise KeyError(f"torchtitan [{name}] has no field {sorted(unknown)}")
    return sections


def torchtitan_model_parts(job: Launch) -> list[list[str]]:
    """Module names of every model chunk in stage order (virtual stage s on rank s mod p,
    as Interleaved1F1B and Megatron-LM place them); Llama-style names."""
    chunks = chunks_or_refuse(job.spec.layers, job.layout, "torchtitan")
    parts: list[list[str]] = []
    layer = 0
    for s, n in enumerate(chunks):
        names = [f"layers.{i}" for i in range(layer, layer + n)]
        layer += n
        if s == 0:
            names.insert(0, "tok_embeddings")
        if s == len(chunks) - 1:
            names += ["norm", "output"]
        parts.append(names)
    return parts


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value)


def torchtitan(job: Launch) -> str:
    spec, lay = job.spec, job.layout
    lines = [
        f"# {job.summary}",
        f"# fields checked against {checked_against('torchtitan')}",
        *platform_notes(job, "torchtitan"),
        f"# model shape (torchtitan sets it in code: pick the [model] name and flavor with): "
        f"{spec.layers} layers, dim {spec.hidden}, {spec.heads} heads, {spec.kv} KV heads, "
        f"head dim {spec.head_dim}, ffn {spec.ffn}, vocab {spec.vocab}, "
        f"{spec.position_embedding} positions (base {spec.rope_base:g}), {spec.normalization}",
        f"# launch on each of {job.nodes} servers: torchrun --nnodes {job.nodes} "
        f"--nproc-per-node {job.procs_per_node} -m torchtitan.train --job.config_file THIS.toml",
    ]
    if lay.zero >= 1 and lay.dp > 1:
        lines.append(
            "# torchtitan's FSDP2 shards weights and gradients as well as optimizer state "
            "(ZeRO 3): less memory than the plan's ZeRO 1, more data-parallel traffic"
        )
    for name, values in torchtitan_sections(job).items():
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {_toml(v)}" for k, v in values.items()]
    return "\n".join(lines) + "\n"
