"""Ready-to-paste launch settings for a plan: Megatron-LM, NeMo 2.0, torchtitan, Slurm.

Flag and field names come from the vocabularies in designer/data/launch/ (vocab.py);
this module decides only their values and layout on the page.
"""

from __future__ import annotations

import json
import math
import shlex

from designer.errors import UsageError
from designer.launch.settings import Launch
from designer.launch.vocab import checked_against, flag, vocabulary

FORMATS = ("megatron", "nemo", "torchtitan", "slurm")
RDZV_PORT = 29500  # torchrun's default master port


# ---------------------------------------------------------------- Megatron-LM and torchrun
def megatron_args(job: Launch) -> list[tuple[str, str | None]]:
    """pretrain_gpt.py's flags for the job, in order: (flag, value or None for a switch)."""
    spec, lay = job.spec, job.layout
    if lay.zero > 1:
        raise UsageError(
            f"--zero: Megatron-LM's flags express ZeRO 0 and 1 (--use-distributed-optimizer), "
            f"not {lay.zero}; use --zero 1"
        )

    def f(setting: str, value: object = None) -> tuple[str, str | None]:
        return flag("megatron", setting), None if value is None else str(value)

    out = [
        f("layers", spec.layers),
        f("hidden", spec.hidden),
        f("ffn_hidden", spec.ffn),
        f("heads", spec.heads),
    ]
    if spec.kv != spec.heads:
        out += [f("group_query_attention"), f("query_groups", spec.kv)]
    if spec.gated_mlp:
        out.append(f("swiglu"))
    if not spec.tied_embeddings:
        out.append(f("untie_embeddings"))
    out += [
        f("seq_len", job.seq_len),
        f("max_position_embeddings", max(spec.seq_len, job.seq_len)),
        f("vocab", spec.vocab),
        f("tp", lay.tp),
        f("pp", lay.pp),
    ]
    first_last = lay.first_stage_layers is not None or lay.last_stage_layers is not None
    if lay.vp > 1:
        if first_last:  # Megatron-LM wants the stage count, not the layers, with these
            out.append(f("virtual_stages", lay.vp))
        else:
            out.append(f("layers_per_virtual_stage", job.layers_per_virtual_stage))
    if lay.first_stage_layers is not None:
        out.append(f("first_stage_layers", lay.first_stage_layers))
    if lay.last_stage_layers is not None:
        out.append(f("last_stage_layers", lay.last_stage_layers))
    if lay.embedding_in_split:
        out.append(f("embedding_in_split"))
    if lay.loss_in_split:
        out.append(f("loss_in_split"))
    out.append(f("cp", lay.cp))
    if lay.sp:
        out.append(f("sequence_parallel"))
    if lay.zero == 1:
        out.append(f("distributed_optimizer"))
    out += [f("micro_batch", lay.micro_batch), f("global_batch", lay.global_batch)]
    if job.train_iters is not None:
        out.append(f("train_iters", job.train_iters))
    if lay.recompute == "selective":
        out.append(f("recompute_granularity", "selective"))
    elif lay.recompute == "full":
        out += [
            f("recompute_granularity", "full"),
            f("recompute_method", "uniform"),
            f("recompute_num_layers", 1),
        ]
    out.append(f("bf16"))
    if lay.precision == "fp8":
        out.append(f("fp8_format", "hybrid"))
    return out


def torchrun_args(job: Launch) -> list[tuple[str, str | None]]:
    """torchrun's flags: the servers and GPUs per server, and a rendezvous when multi-node."""
    out: list[tuple[str, str | None]] = [
        (flag("torchrun", "nnodes"), str(job.nodes)),
        (flag("torchrun", "nproc_per_node"), str(job.procs_per_node)),
    ]
    if job.nodes > 1:
        out += [
            (flag("torchrun", "rdzv_id"), "$SLURM_JOB_ID"),
            (flag("torchrun", "rdzv_backend"), "c10d"),
            (flag("torchrun", "rdzv_endpoint"), f"$MASTER_ADDR:{RDZV_PORT}"),
        ]
    return out


def _shell(args: list[tuple[str, str | None]]) -> list[str]:
    out = []
    for name, value in args:
        if value is None:
            out.append(name)
        elif value.startswith("$"):
            out.append(f'{name} "{value}"')
        else:
            out.append(f"{name} {shlex.quote(value)}")
    return out


def torchrun_command(job: Launch, prefix: str = "") -> str:
    """torchrun ... pretrain_gpt.py with one Megatron flag per continued line."""
    script = vocabulary("megatron")["script"]
    head = " ".join([f"{prefix}torchrun", *_shell(torchrun_args(job)), script])
    lines = [head, *("    " + a for a in _shell(megatron_args(job)))]
    return " \\\n".join(lines)


def megatron(job: Launch) -> str:
    lines = [
        f"# {job.summary}",
        f"# flags checked against {checked_against('megatron')}",
        f"# launcher: {checked_against('torchrun')}",
        "# add your data, tokenizer, optimizer and checkpoint flags"
        + ("; set MASTER_ADDR to the first server" if job.nodes > 1 else ""),
        torchrun_command(job),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- NeMo 2.0
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
    out = [
        f("num_nodes", job.nodes),
        f("devices", job.procs_per_node),
    ]
    if job.train_iters is not None:
        out.append(f("max_steps", job.train_iters))
    out += [
        f("tp", lay.tp),
        f("pp", lay.pp),
        f("vp", lay.vp if lay.vp > 1 else None),
        f("cp", lay.cp),
        f("sequence_parallel", lay.sp),
        f("fp8", "hybrid" if lay.precision == "fp8" else None),
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
        f("gated_mlp", spec.gated_mlp),
        f("tied_embeddings", spec.tied_embeddings),
        f("recompute_granularity", recompute[0]),
        f("recompute_method", recompute[1]),
        f("recompute_num_layers", recompute[2]),
    ]
    if lay.first_stage_layers is not None:
        out.append(f("first_stage_layers", lay.first_stage_layers))
    if lay.last_stage_layers is not None:
        out.append(f("last_stage_layers", lay.last_stage_layers))
    if lay.embedding_in_split:
        out.append(f("embedding_in_split", True))
    if lay.loss_in_split:
        out.append(f("loss_in_split", True))
    return out


def _python(value: object) -> str:
    if value is None or isinstance(value, bool):
        return repr(value)
    return json.dumps(value)


def nemo(job: Launch) -> str:
    lines = [
        f"# {job.summary}",
        f"# recipe fields checked against {checked_against('nemo')}",
        "# on a recipe from the matching factory, e.g. recipe = llm.llama3_70b.pretrain_recipe(...);",
        "# or on the command line: nemo llm pretrain --factory NAME path=value ...",
    ]
    lines += [f"recipe.{path} = {_python(value)}" for path, value in nemo_fields(job)]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- torchtitan
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
        if lay.first_stage_layers is not None or lay.last_stage_layers is not None:
            par["module_fqns_per_model_part"] = torchtitan_model_parts(job)
        else:
            # torchtitan counts the embedding and the output as one layer each by default
            par["pipeline_parallel_layers_per_stage"] = job.layers_per_virtual_stage
            par["pipeline_parallel_first_stage_less_layers"] = int(lay.embedding_in_split)
            par["pipeline_parallel_last_stage_less_layers"] = int(lay.loss_in_split)
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
    """Module names of every model chunk in stage order (virtual stage s on rank s mod p, as
    Interleaved1F1B and Megatron-LM place them), each rank's layers split evenly over its
    v chunks; Llama-style names."""
    lay = job.layout
    per_chunk = [n // lay.vp for n in job.stage_layers]
    parts: list[list[str]] = []
    layer = 0
    for chunk in range(lay.vp):
        for rank in range(lay.pp):
            names = [f"layers.{i}" for i in range(layer, layer + per_chunk[rank])]
            layer += per_chunk[rank]
            if chunk == 0 and rank == 0:
                names.insert(0, "tok_embeddings")
            if chunk == lay.vp - 1 and rank == lay.pp - 1:
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
        f"# model shape (torchtitan sets it in code: pick the [model] name and flavor with): "
        f"{spec.layers} layers, dim {spec.hidden}, {spec.heads} heads, {spec.kv} KV heads, "
        f"ffn {spec.ffn}, vocab {spec.vocab}",
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


# ---------------------------------------------------------------- Slurm
def slurm_time(days: float, margin: float) -> str:
    """days-hours:minutes:seconds, rounded up to the minute, with the margin added."""
    minutes = max(1, math.ceil(days * (1 + margin) * 24 * 60 - 1e-9))
    d, rest = divmod(minutes, 24 * 60)
    h, m = divmod(rest, 60)
    return f"{d}-{h:02d}:{m:02d}:00"


def sbatch_options(job: Launch) -> list[tuple[str, str | None]]:
    v = vocabulary("slurm")
    name = "designer-" + "".join(c if c.isalnum() or c in "-_." else "-" for c in job.spec.name)
    out: list[tuple[str, str | None]] = [
        (flag("slurm", "job_name"), name),
        (flag("slurm", "nodes"), str(job.nodes)),
        (flag("slurm", "ntasks_per_node"), "1"),
        (flag("slurm", "gpus_per_node"), str(job.procs_per_node)),
    ]
    if job.days is not None:
        out.append((flag("slurm", "time"), slurm_time(job.days, float(v["time_margin"]))))
    out.append((flag("slurm", "exclusive"), None))
    return out


def slurm(job: Launch) -> str:
    margin = float(vocabulary("slurm")["time_margin"])
    lines = ["#!/bin/bash"]
    lines += [f"#SBATCH {k}" if v is None else f"#SBATCH {k}={v}" for k, v in sbatch_options(job)]
    lines += [
        f"# {job.summary}",
        f"# sbatch options checked against {checked_against('slurm')}",
    ]
    if job.days is not None:
        lines.append(
            f"# --time: the predicted {job.days:,.2f} days plus {100 * margin:.0f}%; clusters "
            "usually cap a job's time, so plan to resume from checkpoints"
        )
    lines += [
        f"# Megatron-LM flags checked against {checked_against('megatron')}",
        "# add your data, tokenizer, optimizer and checkpoint flags",
        "",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        torchrun_command(job, prefix="srun "),
    ]
    return "\n".join(lines) + "\n"


EMITTERS = {"megatron": megatron, "nemo": nemo, "torchtitan": torchtitan, "slurm": slurm}


def emit(job: Launch, fmt: str) -> str:
    """The job's settings in one of FORMATS."""
    if fmt not in EMITTERS:
        raise UsageError(f"--format: unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
    return EMITTERS[fmt](job)
