"""torchtitan's launch command for a plan (torchtitan 0.3.0: `-m torchtitan.train --module M
--config F` plus `--section.field value` overrides; the TOML job file is gone).

The model comes from a config_registry function (designer/data/launch/torchtitan.yaml
`configs`): torchtitan 0.3.0 has no command-line model shape and no FP8 switch, so a model
without a function, or a precision its function does not train in, is refused in one line.
The pipeline split is written so that torchtitan builds exactly the plan's stages, by
torchtitan's own rule (torchtitan 0.3.0 torchtitan/distributed/pipeline_parallel.py
_get_pipeline_metadata and _generate_llm_fqn_per_model_part): it counts the input and
output modules as pipeline_parallel_first/last_stage_less_layers layers each (default 1)
and makes ceil((layers + first + last) / pipeline_parallel_layers_per_stage) stages. An
even split or Megatron's embedding/loss accounting is that rule with first/last 0 or 1; any
other split (first/last-stage layers, a pipeline that does not divide the layers) is
written as module_fqns_per_model_part, every stage's modules spelled out.
"""

from __future__ import annotations

from designer.errors import FormatRefused
from designer.launch.pipeline_layout import chunks_or_refuse, needs_layout
from designer.launch.platform import platform_notes
from designer.launch.settings import Launch
from designer.launch.vocab import checked_against, checked_release, releases, vocabulary
from models.zoo import zoo

OPTION = FormatRefused.OPTION  # the command's option that picks the format


def compact_split(job: Launch) -> bool:
    """torchtitan's layers-per-stage rule reproduces the plan's split."""
    lay = job.layout
    return (
        lay.first_stage_layers is None
        and lay.last_stage_layers is None
        and not needs_layout(job.spec.layers, lay)
    )


def torchtitan_model(job: Launch) -> dict[str, object]:
    """The config_registry function of the plan's model and precision, or a one-line refusal."""
    doc = vocabulary("torchtitan")
    release = f"torchtitan {doc['release']}"
    entry = doc["configs"].get(job.spec.name)
    if entry is None:
        raise FormatRefused(
            f"{release} has no config for {job.spec.name} (it sets model shapes in code and has "
            f"configs for {', '.join(sorted(doc['configs']))} only): use {OPTION} megatron"
        )
    _same_shape_or_refuse(job, release, str(entry["config"]))
    fp8 = job.layout.precision == "fp8"
    if fp8 != entry["fp8"]:
        has = "trains in FP8 (its Float8 converter)" if entry["fp8"] else "has no FP8 converter"
        raise FormatRefused(
            f"{release} sets FP8 only inside a config function, and {entry['config']} "
            f"{has}: a plan of {job.spec.name} in {job.layout.precision} cannot be expressed; "
            f"use {OPTION} megatron or the other precision"
        )
    return entry


def _same_shape_or_refuse(job: Launch, release: str, config: str) -> None:
    """A config function builds the zoo model of its name, whatever the plan's model file
    says: a model that only shares the name (a custom YAML called llama3-8b, or named by
    its file) is refused, naming the fields that differ."""
    built = zoo()[job.spec.name].architecture()
    planned = job.spec.architecture()
    differ = [k for k in built if built[k] != planned.get(k)]
    if differ:
        shown = ", ".join(f"{k} {planned.get(k)} (builds {built[k]})" for k in differ[:4])
        more = f" and {len(differ) - 4} more" if len(differ) > 4 else ""
        raise FormatRefused(
            f"{release}'s {config} builds the zoo's {job.spec.name}, not this plan's model of "
            f"that name: {shown}{more}; use {OPTION} megatron, which writes every shape field"
        )


def torchtitan_sections(job: Launch) -> dict[str, dict[str, object]]:
    """section -> {field: value} of torchtitan's --section.field overrides."""
    lay = job.layout
    known = vocabulary("torchtitan")["sections"]
    pipelined = lay.pp > 1
    training: dict[str, object] = {
        # with PP one step is one pass of every micro-batch through the pipeline; without
        # it torchtitan accumulates global / (local x DP) micro-batches
        "local_batch_size": lay.global_batch // lay.dp if pipelined else lay.micro_batch,
        "global_batch_size": lay.global_batch,
        "seq_len": job.seq_len,
    }
    if job.train_iters is not None:
        training["steps"] = job.train_iters
    if pipelined:  # torchtitan 0.3.0 captures no CUDA graph with pipeline parallelism
        training["disable_cuda_graphs"] = True
    training["mixed_precision_param"] = "bfloat16"
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
    sections = {"training": training, "parallelism": par}
    for name, values in sections.items():  # the vocabulary is the contract: no invented fields
        unknown = set(values) - set(known[name])
        if unknown:
            raise KeyError(f"torchtitan [{name}] has no field {sorted(unknown)}")
    return sections


def torchtitan_model_parts(job: Launch) -> list[list[str]]:
    """Module names of every model chunk in stage order (virtual stage s on rank s mod p,
    as Interleaved1F1B and Megatron-LM place them); torchtitan 0.3.0's Llama 3 names."""
    chunks = chunks_or_refuse(job.spec.layers, job.layout, "torchtitan")
    parts: list[list[str]] = []
    layer = 0
    for s, n in enumerate(chunks):
        names = [f"layers.{i}" for i in range(layer, layer + n)]
        layer += n
        if s == 0:
            names.insert(0, "tok_embeddings")
        if s == len(chunks) - 1:
            names += ["norm", "lm_head"]
        parts.append(names)
    return parts


def override_words(section: str, name: str, value: object) -> str:
    """One `--section.field value` override as torchtitan's tyro parser reads it: booleans
    are bare flags, a list of lists is space-separated comma-joined groups."""
    opt = f"--{section}.{name.replace('_', '-')}"
    if value is True:
        return opt
    if isinstance(value, list):
        return opt + " " + " ".join(",".join(group) for group in value)
    return f"{opt} {value}"


def torchtitan(job: Launch) -> str:
    spec, lay = job.spec, job.layout
    model = torchtitan_model(job)
    release = releases()["releases"]["torchtitan"]
    lines = [
        f"# {job.summary}",
        f"# for torchtitan {release}: fields checked against {checked_against('torchtitan')}",
        *([line] if (line := checked_release("torchtitan")) else []),
        *platform_notes(job, "torchtitan"),
        f"# model: --config {model['config']} builds {spec.name}: {spec.layers} layers, "
        f"dim {spec.hidden}, {spec.heads} heads, {spec.kv} KV heads, ffn {spec.ffn}, "
        f"vocab {spec.vocab}",
    ]
    if lay.zero >= 1 and lay.dp > 1:
        lines.append(
            "# torchtitan's FSDP2 shards weights and gradients as well as optimizer state "
            "(ZeRO 3): less memory than the plan's ZeRO 1, more data-parallel traffic"
        )
    words = [
        f"torchrun --nnodes {job.nodes} --nproc-per-node {job.procs_per_node} "
        f"-m torchtitan.train --module {model['module']} --config {model['config']}"
    ]
    for section, values in torchtitan_sections(job).items():
        words += [override_words(section, k, v) for k, v in values.items()]
    words.append(vocabulary("torchtitan")["activation_checkpoint"][lay.recompute])
    lines.append(f"# on each of {job.nodes} servers:")
    lines.append(" \\\n  ".join(words))
    return "\n".join(lines) + "\n"
