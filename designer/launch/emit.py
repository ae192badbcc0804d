"""Ready-to-paste launch settings for a plan: Megatron-LM, Megatron-Bridge, torchtitan, Slurm.

Flag and field names come from the vocabularies in designer/data/launch/ (vocab.py);
this module decides only their values and layout on the page.
"""

from __future__ import annotations

import shlex

from designer.errors import FormatRefused, Infeasible, UsageError
from designer.launch.checkpoint import Checkpointing, slurm_time
from designer.launch.megatron_import import PIPELINE_SPLIT_OPTIONS
from designer.launch.megatron_model import model_flags, unsupported
from designer.launch.nemo_recipe import nemo
from designer.launch.pipeline_layout import required_layout
from designer.launch.platform import platform_notes
from designer.launch.settings import Launch
from designer.launch.shell_text import safe_word
from designer.launch.torchtitan_config import torchtitan
from designer.launch.vocab import checked_against, checked_release, flag, vocabulary
from models.feasibility import divisibility_violations
from models.layout import Layout

FORMATS = ("megatron", "nemo", "torchtitan", "slurm")
RDZV_PORT = 29500  # torchrun's default master port


# ---------------------------------------------------------------- Megatron-LM and torchrun
def megatron_args(
    job: Launch, checkpoint: Checkpointing | None = None
) -> list[tuple[str, str | None]]:
    """pretrain_gpt.py's flags for the job, in order: (flag, value or None for a switch).
    Every architecture field is written (megatron_model.model_flags), so the command trains
    the planned model whatever Megatron-LM's defaults are."""
    spec, lay = job.spec, job.layout
    if lay.zero > 1:
        raise UsageError(
            f"--zero: Megatron-LM's flags express ZeRO 0 and 1 (--use-distributed-optimizer), "
            f"not {lay.zero}; use --zero 1"
        )
    why = unsupported(spec)
    if why is not None:
        raise Infeasible(f"Megatron-LM cannot train {spec.name}: {why}")
    broken = [
        v
        for v in divisibility_violations(spec, lay, job.seq_len)
        if v.option not in PIPELINE_SPLIT_OPTIONS  # the layout string runs those
    ]
    if broken:
        raise Infeasible(
            f"Megatron-LM refuses this layout ({broken[0].detail}); re-run optimize "
            "without --ignore divisibility"
        )

    def f(setting: str, value: object = None) -> tuple[str, str | None]:
        return flag("megatron", setting), None if value is None else str(value)

    out = [f(s, v) for s, v in model_flags(spec, max(spec.seq_len, job.seq_len), job.dispatcher)]
    out.insert(-2, f("seq_len", job.seq_len))
    out += [f("tp", lay.tp), f("pp", lay.pp)]
    if spec.is_moe:
        out += [f("ep", job.ep), f("etp", job.etp)]
    out += [f(s, v) for s, v in pipeline_flags(job)]
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
    if job.grad_reduce_bf16:
        out.append(f("grad_reduce_in_bf16"))
    if lay.precision == "fp8":
        out.append(f("fp8_format", "hybrid"))
    if checkpoint is not None:
        out += [
            f("save", "$CKPT_DIR"),
            f("load", "$CKPT_DIR"),
            f("save_interval", checkpoint.interval_iters),
            f("exit_duration", checkpoint.exit_minutes),
            f("exit_signal_handler"),
            f("async_save"),
        ]
    return out


def pipeline_flags(job: Launch) -> list[tuple[str, object]]:
    """The pipeline split in Megatron-LM's newer flag forms: --num-virtual-stages-per-
    pipeline-rank, --decoder-first/last-pipeline-num-layers or the accounting switches;
    --pipeline-model-parallel-layout for a split only it expresses (pp not dividing the
    layers, planned with --ignore divisibility); --microbatch-group-size-per-virtual-
    pipeline-stage where the layout's group size is not Megatron-Core's default, pp
    (Layout.custom_microbatch_group; megatron-core 0.19.2's parser takes it:
    model_parallel_config.py's argparse_meta, designer/data/launch/
    megatron_release_arguments.yaml)."""
    lay = job.layout
    if lay.pp == 1:
        return []
    text = required_layout(job.spec.layers, lay, "Megatron-LM", job.spec.mtp_layers)
    out: list[tuple[str, object]] = (
        [("pipeline_layout", text)] if text is not None else _split_flags(lay)
    )
    if lay.custom_microbatch_group:  # Megatron-Core's default is pp
        out.append(("microbatch_group_size", lay.microbatch_group))
    return out


def _split_flags(lay: Layout) -> list[tuple[str, object]]:
    """The split in the virtual-stage, first/last-stage and accounting flags."""
    out: list[tuple[str, object]] = []
    if lay.vp > 1:
        out.append(("virtual_stages", lay.vp))
    if lay.first_stage_layers is not None:
        out.append(("first_stage_layers", lay.first_stage_layers))
    if lay.last_stage_layers is not None:
        out.append(("last_stage_layers", lay.last_stage_layers))
    if lay.embedding_in_split:
        out.append(("embedding_in_split", None))
    if lay.loss_in_split:
        out.append(("loss_in_split", None))
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


def torchrun_command(job: Launch, prefix: str = "", checkpoint: Checkpointing | None = None) -> str:
    """torchrun ... pretrain_gpt.py with one Megatron flag per continued line."""
    script = vocabulary("megatron")["script"]
    head = " ".join([f"{prefix}torchrun", *_shell(torchrun_args(job)), script])
    lines = [head, *("    " + a for a in _shell(megatron_args(job, checkpoint)))]
    return " \\\n".join(lines)


def device_connections(job: Launch) -> list[str]:
    """Megatron-LM's validate_args requires CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor or
    context parallelism before Blackwell (megatron/training/arguments.py, core_v0.19.0: the
    kernels of a TP/CP communication must queue in issue order); harmless after it."""
    if job.layout.tp > 1 or job.layout.cp > 1:
        return ["export CUDA_DEVICE_MAX_CONNECTIONS=1"]
    return []


def megatron(job: Launch) -> str:
    lines = [
        f"# {job.summary}",
        f"# flags checked against {checked_against('megatron')}",
        str(checked_release("megatron")),
        f"# launcher: {checked_against('torchrun')}",
        *platform_notes(job, "megatron"),
        "# add your data, tokenizer, optimizer and checkpoint flags"
        + ("; set MASTER_ADDR to the first server" if job.nodes > 1 else ""),
        *device_connections(job),
        torchrun_command(job),
    ]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- Slurm
def _interval_source(job: Launch, ckpt: Checkpointing, v) -> str:
    """Where the checkpoint interval comes from: the plan's goodput model or the default."""
    if ckpt.from_plan and job.checkpoint_minutes is not None:
        return f"the plan's interval {job.checkpoint_minutes:.1f} min, models/goodput.py"
    return f"stated default {v['checkpoint_minutes']} min"


def sbatch_options(job: Launch, ckpt: Checkpointing) -> list[tuple[str, str | None]]:
    name = "designer-" + safe_word(job.spec.name)
    out: list[tuple[str, str | None]] = [
        (flag("slurm", "job_name"), name),
        (flag("slurm", "nodes"), str(job.nodes)),
        (flag("slurm", "ntasks_per_node"), "1"),
        (flag("slurm", "gpus_per_node"), str(job.procs_per_node)),
    ]
    if job.days is not None:
        out.append((flag("slurm", "time"), slurm_time(ckpt.segment_minutes)))
    out += [
        (flag("slurm", "requeue"), None),
        (flag("slurm", "signal"), f"B:USR1@{ckpt.signal_lead_s}"),
        (flag("slurm", "exclusive"), None),
    ]
    return out


def _segments_phrase(segments: int) -> str:
    """'one job segment' (the run with its exit margin fits one --time), else about N."""
    return "one job segment" if segments == 1 else f"about {segments:,} job segments"


def slurm(job: Launch) -> str:
    ckpt = Checkpointing.for_job(job)
    v = vocabulary("slurm")
    lines = ["#!/bin/bash"]
    lines += [
        f"#SBATCH {k}" if val is None else f"#SBATCH {k}={val}"
        for k, val in sbatch_options(job, ckpt)
    ]
    lines += [
        f"# {job.summary}",
        f"# sbatch options checked against {checked_against('slurm')}",
    ]
    if job.days is not None:
        lines.append(
            f"# the run: {job.days:,.2f} predicted days plus {100 * float(v['time_margin']):.0f}%, "
            f"in {_segments_phrase(ckpt.segments)} of --time {slurm_time(ckpt.segment_minutes)} "
            f"(stated default: {v['segment_hours']} h, a common cap on a job's time)"
        )
    lines += [
        f"# checkpoints: every {ckpt.interval_iters:,} iterations ({ckpt.interval_minutes:.{1 if ckpt.from_plan else 0}f} min "
        f"of training; {_interval_source(job, ckpt, v)}), and Megatron-LM saves and "
        f"exits after {ckpt.exit_minutes:,} min (--exit-duration-in-mins), "
        f"{v['exit_margin_minutes']} min before the limit; Slurm sends USR1 "
        f"{ckpt.signal_lead_s} s before it and the script requeues the job (--requeue)",
        "# resume: sbatch this file again (it requeues itself until the last iteration is "
        "saved); Megatron-LM loads the latest checkpoint in $CKPT_DIR (--load) and continues",
        f"# Megatron-LM flags checked against {checked_against('megatron')}",
        str(checked_release("slurm")),
        *platform_notes(job, "slurm"),
        "# add your data, tokenizer and optimizer flags",
        "",
        f'CKPT_DIR="${{CKPT_DIR:-checkpoints/{safe_word(job.spec.name)}}}"',
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        *device_connections(job),
        "trap 'scontrol requeue \"$SLURM_JOB_ID\"; exit 0' USR1",
        torchrun_command(job, prefix="srun ", checkpoint=ckpt) + " &",
        "wait",
    ]
    if job.train_iters is not None:
        lines += [
            'DONE=$(cat "$CKPT_DIR/latest_checkpointed_iteration.txt" 2>/dev/null || echo 0)',
            f'if [ "$DONE" != release ] && [ "$DONE" -lt {job.train_iters} ]; then '
            'scontrol requeue "$SLURM_JOB_ID"; fi',
        ]
    return "\n".join(lines) + "\n"


EMITTERS = {"megatron": megatron, "nemo": nemo, "torchtitan": torchtitan, "slurm": slurm}


def emit(job: Launch, fmt: str, option: str = "--emit") -> str:
    """The job's settings in one of FORMATS; ``option``: the running command's option that
    picks the format (optimize's --emit, export's --format), which a refusal's fix names."""
    if fmt not in EMITTERS:
        raise UsageError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}", option)
    try:
        if job.layout.custom_microbatch_group and fmt in DENSE_ONLY:
            raise FormatRefused(
                f"the {fmt} emitter writes no micro-batch group size (the layout's "
                f"{job.layout.microbatch_group}, Megatron-LM's --microbatch-group-size-per-"
                f"virtual-pipeline-stage): use {FormatRefused.OPTION} megatron or slurm"
            )
        if not job.spec.is_dense and fmt in DENSE_ONLY:
            raise FormatRefused(
                f"the {fmt} emitter writes dense models only; {job.spec.name} has experts, "
                f"latent attention or multi-token prediction: use {FormatRefused.OPTION} "
                "megatron or slurm"
            )
        return EMITTERS[fmt](job)
    except FormatRefused as err:
        raise Infeasible(err.for_option(option)) from err


# formats whose emitters write no expert, latent-attention or MTP settings (issue 17 covers
# Megatron-LM's flags): a mixture-of-experts plan is refused, never emitted as a dense model
DENSE_ONLY = ("nemo", "torchtitan")
