"""The `designer` command line: parses options, calls the library, prints.

Exit codes (../shared/CLI-CONTRACT.md): 0 success, 1 no answer (infeasible),
2 bad usage or input, with one line on stderr; tracebacks only with --debug.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from catalog import CatalogError, load_catalog
from catalog.specs import DEFAULT_STACK, FABRICS, STACKS, Calibration, Evidence
from designer import render, report
from designer.errors import Infeasible, UsageError
from designer.launch import FORMATS, Launch, emit, load_megatron
from designer.numbers import Days, Quantity
from designer.questions import (
    DEFAULT_HEADROOM,
    DEFAULT_MODEL,
    DEFAULT_RESERVED_GB,
    EVIDENCE_CHOICES,
    build_scenario,
    evaluate_config,
    load_question_file,
)
from models import Assumptions, Layout, ModelError, resolve_model, zoo
from models.feasibility import divisibility_violations
from models.layout import PRECISIONS, RECOMPUTE_MODES
from models.pipeline import describe_stage_layers, split_options
from solvers import SolveResult, solve
from solvers.scenario import PRICINGS

if TYPE_CHECKING:
    from models.evaluate import Hardware

CATALOG_OPTION = click.option(
    "--catalog",
    "catalog_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="YAML file of entries that add to or override the built-in catalog (repeatable).",
)


def emit_json(obj: Any) -> None:
    click.echo(json.dumps(obj, indent=2, sort_keys=False, default=str))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="designer")
def cli(debug: bool) -> None:
    """Design GPU clusters and parallel layouts for training large language models."""


# ---------------------------------------------------------------- models
@cli.group("models", invoke_without_command=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def models_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the built-in model zoo (`designer models show NAME` for one)."""
    if ctx.invoked_subcommand is not None:
        return
    specs = zoo()
    if as_json:
        emit_json([_model_dict(s) for s in specs.values()])
        return
    rows = [
        (
            s.name,
            s.params() / 1e9,
            s.layers,
            s.hidden,
            s.heads,
            s.kv,
            s.ffn,
            "yes" if s.gated_mlp else "no",
            s.vocab,
            s.seq_len,
        )
        for s in specs.values()
    ]
    click.echo(
        render.table(
            [
                "model",
                "params_b",
                "layers",
                "hidden",
                "heads",
                "kv_heads",
                "ffn",
                "gated",
                "vocab",
                "seq_len",
            ],
            rows,
        )
    )


def _model_dict(spec) -> dict[str, Any]:
    d = spec.model_dump()
    d["kv_heads"] = spec.kv
    d["ffn_hidden"] = spec.ffn
    d["params"] = spec.params()
    return d


@models_cmd.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def models_show(name: str, as_json: bool) -> None:
    """Print every field of one model (zoo name or spec file)."""
    spec = resolve_model(name, "NAME")
    d = _model_dict(spec)
    if as_json:
        emit_json(d)
        return
    for key, value in d.items():
        click.echo(f"{key:20s} {render.fmt(value)}")


# ---------------------------------------------------------------- catalog
@cli.group("catalog", invoke_without_command=True)
@CATALOG_OPTION
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def catalog_cmd(ctx: click.Context, catalog_files: tuple[Path, ...], as_json: bool) -> None:
    """List the hardware catalog (`designer catalog show NAME` for one entry)."""
    ctx.obj = catalog_files
    if ctx.invoked_subcommand is not None:
        return
    cat = load_catalog(list(catalog_files))
    if as_json:
        emit_json(
            {
                "gpus": {k: v.model_dump() for k, v in cat.gpus.items()},
                "nics": {k: v.model_dump() for k, v in cat.nics.items()},
                "switches": {k: v.model_dump() for k, v in cat.switches.items()},
                "facility": cat.facility.model_dump(),
            }
        )
        return
    click.echo("GPUs")
    click.echo(
        render.table(
            [
                "name",
                "memory_gb",
                "bf16_tflops",
                "fp8_tflops",
                "scale_up_gb_s_dir",
                "domain",
                "gpus/server",
                "price",
                "cloud_$/h",
            ],
            [
                (
                    g.name,
                    g.memory_gb,
                    g.dense_bf16_tflops,
                    g.dense_fp8_tflops,
                    g.scale_up_bw_gb_per_s_per_direction,
                    g.server.scale_up_domain_gpus,
                    g.server.gpus_per_server,
                    render.usd(g.price_usd),
                    g.cloud_usd_per_gpu_hour,
                )
                for g in cat.gpus.values()
            ],
        )
    )
    click.echo("\nNICs")
    click.echo(
        render.table(
            ["name", "gbit_s", "gb_s_dir", "price", "per_link", "switch"],
            [
                (
                    n.name,
                    n.speed_gbit_per_s,
                    n.bw_gb_per_s_per_direction,
                    render.usd(n.price_usd),
                    render.usd(2 * n.transceiver_usd + n.cable_usd),
                    n.switch,
                )
                for n in cat.nics.values()
            ],
        )
    )
    click.echo("\nSwitches")
    click.echo(
        render.table(
            ["name", "ports", "gbit_s", "price", "power_w"],
            [
                (s.name, s.ports, s.port_speed_gbit_per_s, render.usd(s.price_usd), s.power_w)
                for s in cat.switches.values()
            ],
        )
    )
    f = cat.facility
    click.echo("\nFacility (designer catalog show facility for the sources)")
    click.echo(
        f"PUE {f.pue:g}; ${f.usd_per_kwh:g}/kWh; average draw {100 * f.power_draw_fraction:g}% of "
        f"nameplate; racks of {f.rack_power_kw:g} kW at {render.usd(f.rack_usd)}; "
        f"oversubscription {f.oversubscription:g}:1"
    )


@catalog_cmd.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_obj
def catalog_show(catalog_files: tuple[Path, ...], name: str, as_json: bool) -> None:
    """Print every field of one GPU, NIC or switch (or `facility`), with its sources."""
    cat = load_catalog(list(catalog_files or ()))
    for section in (cat.gpus, cat.nics, cat.switches, {"facility": cat.facility}):
        if name in section:
            d = section[name].model_dump()
            break
    else:
        known = sorted([*cat.gpus, *cat.nics, *cat.switches, "facility"])
        raise UsageError(f"NAME: unknown catalog entry {name!r}; choose one of {', '.join(known)}")
    if as_json:
        emit_json(d)
        return
    if name in cat.gpus:
        d.pop("calibration", None)  # the text lists every stack's profile under stacks:
    _print_fields(d)


# units and meaning of the performance-model constants, shown beside their values
_PROFILE_FIELDS = {**Calibration.model_fields, **Evidence.model_fields}


def _print_fields(d: dict[str, Any], indent: int = 0, profile: bool = False) -> None:
    for key, value in d.items():
        if isinstance(value, dict):
            click.echo(" " * indent + f"{key}:")
            _print_fields(value, indent + 2, profile or key in ("stacks", "measured"))
        else:
            text = render.fmt(list(value) if isinstance(value, tuple) else value)
            field = _PROFILE_FIELDS.get(key) if profile else None
            note = f"  ({field.description})" if field is not None and field.description else ""
            if key in ("note", "sets"):
                note = ""
            click.echo(" " * indent + f"{key:32s} {text}{note}")


# ---------------------------------------------------------------- evaluate
def _check_layout_input(spec, layout: Layout, seq_len: int) -> None:
    """Shapes the layout cannot take are usage errors (exit 2), named by option."""
    broken = divisibility_violations(spec, layout, seq_len)
    if broken:
        raise UsageError(f"{broken[0].option}: {broken[0].detail}")


@cli.command("evaluate")
@click.option(
    "--model",
    "model_name",
    default="llama2-70b",
    show_default=True,
    help="Zoo name, YAML/JSON spec or HF config.json.",
)
@click.option("--gpu", default="h100-sxm", show_default=True, help="Catalog GPU name.")
@CATALOG_OPTION
@click.option(
    "--tp", type=click.IntRange(min=1), default=1, show_default=True, help="Tensor-parallel degree."
)
@click.option(
    "--pp", type=click.IntRange(min=1), default=1, show_default=True, help="Pipeline stages."
)
@click.option(
    "--dp", type=click.IntRange(min=1), default=1, show_default=True, help="Data-parallel degree."
)
@click.option(
    "--cp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Context-parallel degree.",
)
@click.option(
    "--vp",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Virtual pipeline chunks per stage.",
)
@click.option(
    "--first-stage-layers",
    type=click.IntRange(min=1),
    default=None,
    help="Transformer layers on the first pipeline stage, the rest split evenly "
    "(Megatron-LM --decoder-first-pipeline-num-layers).",
)
@click.option(
    "--last-stage-layers",
    type=click.IntRange(min=1),
    default=None,
    help="Transformer layers on the last pipeline stage "
    "(Megatron-LM --decoder-last-pipeline-num-layers).",
)
@click.option(
    "--embedding-in-split/--no-embedding-in-split",
    default=False,
    show_default=True,
    help="Count the input embedding as one layer when splitting the pipeline "
    "(Megatron-LM --account-for-embedding-in-pipeline-split).",
)
@click.option(
    "--loss-in-split/--no-loss-in-split",
    default=False,
    show_default=True,
    help="Count the output layer and loss as one layer when splitting the pipeline "
    "(Megatron-LM --account-for-loss-in-pipeline-split).",
)
@click.option(
    "--micro-batch",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Sequences per micro-batch.",
)
@click.option(
    "--global-batch",
    type=click.IntRange(min=1),
    default=None,
    help="Sequences per step [default: micro-batch x dp x pp].",
)
@click.option(
    "--seq-len",
    type=click.IntRange(min=1),
    default=None,
    help="Sequence length [default: the model's].",
)
@click.option(
    "--recompute", type=click.Choice(RECOMPUTE_MODES), default="selective", show_default=True
)
@click.option(
    "--sequence-parallel/--no-sequence-parallel", default=None, help="Default: on when tp > 1."
)
@click.option(
    "--zero",
    type=click.IntRange(0, 3),
    default=1,
    show_default=True,
    help="ZeRO stage (1 = distributed optimizer).",
)
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True)
@click.option(
    "--nic", default=None, help="Catalog NIC [default: fastest the server's PCIe supports]."
)
@click.option(
    "--nics-per-node",
    type=click.IntRange(min=1),
    default=None,
    help="NICs per server [default: its slots].",
)
@click.option(
    "--tokens", type=Quantity(), default=None, help="Training tokens, e.g. 2T (for time and cost)."
)
@click.option(
    "--dp-overlap",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Fraction of the last backward that hides DP traffic.",
)
@click.option(
    "--memory-overhead",
    type=click.FloatRange(0, 1),
    default=0.0,
    show_default=True,
    help="Allocator fragmentation and temporaries, fraction of tensor memory "
    "(counted in memory 'other'; Megatron's own estimate uses 0.05).",
)
@click.option(
    "--reserved-gb",
    type=click.FloatRange(min=0),
    default=DEFAULT_RESERVED_GB,
    show_default=True,
    help="Fixed GB per GPU for the CUDA context and NCCL buffers (in memory 'other'); "
    "0 with --headroom 0 gives the seed's tensor-only rule.",
)
@click.option(
    "--headroom",
    type=click.FloatRange(0, 1, max_open=True),
    default=DEFAULT_HEADROOM,
    show_default=True,
    help="Fraction of GPU memory kept free (allocator fragmentation, uncounted peaks).",
)
@click.option(
    "--stack",
    type=click.Choice(STACKS),
    default=DEFAULT_STACK,
    show_default=True,
    help="Software stack whose calibrated profile predicts the step time.",
)
@click.option(
    "--from-megatron",
    "from_megatron",
    default=None,
    metavar="ARGS|FILE",
    help="Take the model and layout from a Megatron-LM launch command (quoted) or a script "
    "file holding one (torchrun ... pretrain_gpt.py --flags).",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.pass_context
def evaluate_cmd(
    ctx: click.Context,
    model_name,
    gpu,
    catalog_files,
    tp,
    pp,
    dp,
    cp,
    vp,
    first_stage_layers,
    last_stage_layers,
    embedding_in_split,
    loss_in_split,
    micro_batch,
    global_batch,
    seq_len,
    recompute,
    sequence_parallel,
    zero,
    precision,
    nic,
    nics_per_node,
    tokens,
    dp_overlap,
    memory_overhead,
    reserved_gb,
    headroom,
    stack,
    from_megatron,
    as_json,
) -> None:
    """Analyse one given layout, like a dry run of a training launch."""
    imported = None
    if from_megatron is not None:
        _reject_given(ctx, IMPORTED_LAYOUT_OPTIONS, "--from-megatron")
        imported = load_megatron(from_megatron)
        spec, layout, s = imported.spec, imported.layout, imported.seq_len
        precision = layout.precision
        if tokens is None:
            tokens = imported.tokens
    else:
        spec = resolve_model(model_name)
        gb = global_batch if global_batch is not None else micro_batch * dp * pp
        layout = Layout(
            tp=tp,
            pp=pp,
            dp=dp,
            cp=cp,
            vp=vp,
            micro_batch=micro_batch,
            global_batch=gb,
            recompute=recompute,
            sequence_parallel=sequence_parallel,
            zero=zero,
            precision=precision,
            first_stage_layers=first_stage_layers,
            last_stage_layers=last_stage_layers,
            embedding_in_split=embedding_in_split,
            loss_in_split=loss_in_split,
        )
        s = seq_len or spec.seq_len
    cat = load_catalog(list(catalog_files))
    try:
        cat = cat.with_stack(stack)
    except CatalogError as err:
        raise UsageError(f"--stack: {err}") from err
    hw = _hardware(cat, gpu, nic, nics_per_node)
    if hw.gpu.peak_tflops(precision) is None:
        option = "--from-megatron: --fp8-format" if imported else "--precision"
        raise UsageError(f"{option}: {gpu} has no {precision} support; use bf16")
    if imported is None:
        _check_layout_input(spec, layout, s)
    a = Assumptions(
        dp_overlap=dp_overlap,
        memory_overhead_fraction=memory_overhead,
        runtime_reserved_gb=reserved_gb,
        memory_headroom_fraction=headroom,
    )
    if imported is not None and imported.grad_reduce_dtype == "fp32":
        # Megatron with --bf16 keeps and reduces fp32 gradients unless --grad-reduce-in-bf16
        a = a.model_copy(update={"grad_bytes": 4.0})
    from models.evaluate import evaluate
    from models.evidence import evaluation_evidence

    ev = evaluate(spec, hw, layout, s, tokens, a)
    evidence = report._plain(evaluation_evidence(cat, ev, stack))
    if as_json:
        doc = ev.as_dict()
        doc["evidence"] = evidence
        if imported is not None:
            doc["from_megatron"] = imported.as_dict()
        emit_json(doc)
    else:
        if imported is not None:
            click.echo(_imported_text(imported))
        click.echo(_evaluation_text(ev, evidence))
    if not ev.feasible:
        raise SystemExit(1)


# evaluate's options that --from-megatron replaces (parameter name -> option)
IMPORTED_LAYOUT_OPTIONS = {
    "model_name": "--model",
    "tp": "--tp",
    "pp": "--pp",
    "dp": "--dp",
    "cp": "--cp",
    "vp": "--vp",
    "first_stage_layers": "--first-stage-layers",
    "last_stage_layers": "--last-stage-layers",
    "embedding_in_split": "--embedding-in-split",
    "loss_in_split": "--loss-in-split",
    "micro_batch": "--micro-batch",
    "global_batch": "--global-batch",
    "seq_len": "--seq-len",
    "recompute": "--recompute",
    "sequence_parallel": "--sequence-parallel",
    "zero": "--zero",
    "precision": "--precision",
}


def _given(ctx: click.Context) -> set[str]:
    """Parameters the user set on the command line (not defaults)."""
    return {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }


def _reject_given(ctx: click.Context, options: dict[str, str], because: str) -> None:
    for name in sorted(_given(ctx) & set(options)):
        raise UsageError(
            f"{options[name]}: comes from the Megatron command with {because}; drop it"
        )


def _imported_text(run) -> str:
    lines = [
        f"from Megatron-LM: {run.world_size:,} GPUs ({run.nnodes} x {run.nproc_per_node}); model "
        f"{run.spec.layers} layers, hidden {run.spec.hidden}, {run.spec.heads} heads, "
        f"{run.spec.kv} KV heads, ffn {run.spec.ffn}, vocab {run.spec.vocab:,}"
    ]
    lines += [f"  note: {n}" for n in run.notes]
    return "\n".join(lines)


def _hardware(cat, gpu: str, nic: str | None, nics_per_node: int | None) -> Hardware:
    from models.evaluate import Hardware

    try:
        return Hardware.from_catalog(cat, gpu, nic, nics_per_node)
    except CatalogError as err:
        option = "--gpu" if "GPU" in str(err) else "--nic"
        raise UsageError(f"{option}: {err}") from err


def _evaluation_text(ev, evidence: dict[str, Any]) -> str:
    """evaluate's report, with the evidence line (models.evidence.evaluation_evidence) and
    the measured ranges of step time and time to train."""
    lay = ev.layout
    m = ev.memory
    lines = [
        f"{ev.model} on {lay.num_gpus:,} x {report.gpu_label(ev.gpu, evidence)} ({ev.nodes:,} servers, {ev.nics_per_node} x {ev.nic} each)",
        f"layout: tp {lay.tp}, pp {lay.pp}, dp {lay.dp}, cp {lay.cp}, vp {lay.vp}; micro-batch {lay.micro_batch}, "
        f"global batch {lay.global_batch:,} ({lay.grad_accum:g} micro-batches/step), seq {ev.seq_len:,}; "
        f"recompute {lay.recompute}, SP {'on' if lay.sp else 'off'}, ZeRO {lay.zero}, {lay.precision}",
    ]
    if lay.uneven:
        opts = split_options(lay)
        lines.append(
            f"pipeline: {describe_stage_layers(ev.stage_layers)}" + (f" ({opts})" if opts else "")
        )
    lines += [
        f"feasible: {'yes' if ev.feasible else 'NO'}",
    ]
    for v in ev.violations:
        lines.append(f"  violation {v.constraint}: {v.detail}")
    lines.append("")
    lines.append(
        render.table(
            [
                "memory per GPU (GB)",
                "weights",
                "gradients",
                "optimizer",
                "activations",
                "other",
                "total",
                "usable",
                "capacity",
            ],
            [
                (
                    "most loaded stage",
                    m.weights,
                    m.gradients,
                    m.optimizer,
                    m.activations,
                    m.other,
                    m.total,
                    m.usable,
                    m.capacity,
                )
            ],
        )
    )
    lines.append("")
    b = ev.breakdown
    lines.append(
        render.table(
            [
                "step time (s)",
                "compute",
                "bubble",
                "tp_comm",
                "cp_comm",
                "pp_comm",
                "dp_comm",
                "optimizer",
                "total",
            ],
            [
                (
                    "exposed",
                    b.compute,
                    b.bubble,
                    b.tp_comm,
                    b.cp_comm,
                    b.pp_comm,
                    b.dp_comm,
                    b.optimizer,
                    b.total,
                )
            ],
        )
    )
    lines.append("")
    lines.append(
        f"throughput: {ev.tokens_per_s:,.0f} tokens/s, {ev.model_tflops_per_gpu:.0f} model TFLOP/s per GPU, MFU {100 * ev.mfu:.1f}%"
    )
    lines.append(report.cluster_line(ev))
    step = evidence["step_time_s_range"]
    lines.append(
        f"evidence ({evidence['stack']} profile): {evidence['line']}; step time "
        f"{float(ev.step_time_s):.2f} s (measured range {report.span(step)} s)"
    )
    days = ev.time_to_train_days
    if days is not None:
        shown = report.with_range(days, evidence["days_range"], ".1f")
        lines.append(
            f"time to train: {shown} days; capex {render.usd(ev.capex)}, cloud {render.usd(ev.cloud_cost)}, "
            f"tco {render.usd(ev.tco_cost)} (energy {render.usd(ev.energy_cost)})"
        )
    else:
        lines.append(
            f"capex {render.usd(ev.capex)} (pass --tokens for time to train and cloud cost)"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- optimize, compare, explain
OBJECTIVES = ("time", "cost")


class GpuCap(click.ParamType):
    """NAME=N: at most N GPUs of type NAME."""

    name = "NAME=N"

    def convert(self, value, param, ctx):
        if isinstance(value, tuple):
            return value
        gpu, sep, count = str(value).partition("=")
        if not sep or not gpu:
            self.fail(f"{value!r} is not NAME=N; e.g. h100-sxm=512", param, ctx)
        try:
            n = Quantity(integer=True).convert(count, param, ctx)
        except click.BadParameter:
            self.fail(f"{value!r}: N must be a positive whole number", param, ctx)
        return (gpu, n)


QUESTION_OPTIONS = [
    click.option(
        "--model",
        "model",
        default=DEFAULT_MODEL,
        show_default=True,
        help="Zoo name, YAML/JSON spec or HF config.json.",
    ),
    click.option(
        "--tokens",
        type=Quantity(),
        default="2T",
        show_default=True,
        help="Training tokens (2T, 300B, ...).",
    ),
    click.option(
        "--seq-len",
        type=click.IntRange(min=1),
        default=None,
        help="Sequence length [default: the model's].",
    ),
    click.option("--budget", type=Quantity(), default=None, help="Budget in USD (30M, 1.5B, ...)."),
    click.option("--deadline", type=Days(), default=None, help="Deadline (90d, 36h, or days)."),
    click.option(
        "--objective",
        type=click.Choice(OBJECTIVES),
        default=None,
        help="time (fastest under the budget) or cost (cheapest by the deadline) "
        "[default: time with a budget, else cost].",
    ),
    click.option(
        "--pricing",
        type=click.Choice(PRICINGS),
        default="capex",
        show_default=True,
        help="capex: buy the cluster; cloud: rent GPU-hours; tco: capex (or its share over "
        "--lifetime-years) plus energy over the training time.",
    ),
    click.option(
        "--power-cap",
        "power_cap",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        metavar="MW",
        help="Facility power cap in MW (IT nameplate x PUE).",
    ),
    click.option(
        "--max-racks", type=Quantity(integer=True), default=None, help="Cap on the number of racks."
    ),
    click.option(
        "--pue",
        type=click.FloatRange(1, 5),
        default=None,
        help="Power usage effectiveness [default: the catalog's facility, 1.25].",
    ),
    click.option(
        "--usd-per-kwh",
        type=click.FloatRange(0, 100),
        default=None,
        help="Electricity price for --pricing tco [default: 0.0826].",
    ),
    click.option(
        "--rack-power-kw",
        type=click.FloatRange(min=0, min_open=True, max=10_000),
        default=None,
        help="Power limit per rack [default: 42 kW].",
    ),
    click.option(
        "--oversubscription",
        type=click.FloatRange(1, 16),
        default=None,
        help="Leaf down:up ratio of the fat tree [default: 1, non-blocking].",
    ),
    click.option(
        "--lifetime-years",
        type=click.FloatRange(min=0, min_open=True, max=50),
        default=None,
        help="--pricing tco charges capex x training time / lifetime [default: all of it].",
    ),
    click.option(
        "--gpu",
        "gpus",
        multiple=True,
        help="Allowed GPU types (repeatable) [default: the whole catalog].",
    ),
    click.option(
        "--nic", "nics", multiple=True, help="Allowed NIC types (repeatable) [default: all]."
    ),
    CATALOG_OPTION,
    click.option(
        "--max-gpus", type=Quantity(integer=True), default=None, help="Cap on the number of GPUs."
    ),
    click.option(
        "--gpu-cap",
        "gpu_caps",
        multiple=True,
        type=GpuCap(),
        help="Availability: at most N GPUs of a type, as NAME=N (repeatable).",
    ),
    click.option(
        "--max-batch-tokens",
        type=Quantity(),
        default=None,
        help="Global batch ceiling in tokens [default: 16M].",
    ),
    click.option(
        "--min-batch-tokens", type=Quantity(), default=None, help="Global batch floor in tokens."
    ),
    click.option(
        "--precision",
        type=click.Choice(("bf16", "fp8", "any")),
        default="bf16",
        show_default=True,
        help="Training precision; 'any' lets the optimizer use fp8 where the GPU has it.",
    ),
    click.option(
        "--ignore",
        "ignore",
        multiple=True,
        help="Switch a constraint family off (repeatable), e.g. tp_bandwidth.",
    ),
    click.option(
        "--stack",
        type=click.Choice(STACKS),
        default=DEFAULT_STACK,
        show_default=True,
        help="Software stack whose calibrated profile predicts the step time.",
    ),
    click.option(
        "--evidence",
        type=click.Choice(EVIDENCE_CHOICES),
        default="measured",
        show_default=True,
        help="Search GPUs with measured training runs only, or any (extrapolated ones marked).",
    ),
    click.option(
        "--dp-overlap",
        type=click.FloatRange(0, 1),
        default=0.0,
        show_default=True,
        help="Fraction of the last backward that hides DP traffic.",
    ),
    click.option(
        "--memory-overhead",
        type=click.FloatRange(0, 1),
        default=0.0,
        show_default=True,
        help="Allocator fragmentation and temporaries, fraction of tensor memory.",
    ),
    click.option(
        "--reserved-gb",
        type=click.FloatRange(min=0),
        default=DEFAULT_RESERVED_GB,
        show_default=True,
        help="Fixed GB per GPU for the CUDA context and NCCL buffers.",
    ),
    click.option(
        "--headroom",
        type=click.FloatRange(0, 1, max_open=True),
        default=DEFAULT_HEADROOM,
        show_default=True,
        help="Fraction of GPU memory a plan keeps free (0 with --reserved-gb 0: the seed's rule).",
    ),
    click.option(
        "--fabric",
        type=click.Choice(tuple(FABRICS)),
        default="any",
        show_default=True,
        help="Scale-out fabric: InfiniBand, Ethernet (RoCE) or either.",
    ),
    click.option(
        "--time-limit",
        type=click.FloatRange(min=0.01),
        default=60.0,
        show_default=True,
        help="Solver time limit per solve, seconds.",
    ),
    click.option(
        "--explain/--no-explain",
        default=True,
        show_default=True,
        help="Price the binding constraints, or explain a conflict.",
    ),
    click.option("--json", "as_json", is_flag=True, help="Machine-readable output."),
    click.option(
        "--csv",
        "csv_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Write the plans as CSV.",
    ),
]


def question_options(f):
    for option in reversed(QUESTION_OPTIONS):
        f = option(f)
    return f


def _write_csv(csv_file: Path | None, text: str, option: str = "--csv") -> None:
    if csv_file is None:
        return
    try:
        csv_file.write_text(text, encoding="utf-8")
    except OSError as err:
        raise UsageError(
            f"{option}: cannot write {csv_file} ({err.strerror}); pass a writable path"
        ) from err


def _answer(
    scenario,
    res,
    explain: bool,
    time_limit: float,
    as_json: bool,
    csv_file: Path | None,
    extra: dict[str, Any] | None = None,
    extra_text: str | None = None,
    launch: tuple[str, str] | None = None,
) -> None:
    """Explain, print and exit as the contract says (shared by optimize and explain).

    ``extra`` adds keys to the JSON and ``extra_text`` a paragraph to the text; ``launch``
    (format, text) is emitted settings: the JSON's `launch`, or the only text printed."""
    if launch is not None and not as_json:
        explain = False  # the text is the settings alone, ready to redirect to a file
    from solvers.explain import binding_constraints, explain_infeasible  # OR-Tools: on use

    binding, conflict = None, None
    if explain and res.best is not None:
        binding = binding_constraints(
            scenario,
            res.best,
            res.candidates or None,
            time_limit_s=time_limit,
            plan_proved=res.status == "optimal",
        )
    elif explain and res.status == "infeasible":
        conflict = explain_infeasible(
            scenario, time_limit_s=time_limit, candidates=res.candidates or None
        )
    _write_csv(csv_file, report.csv_text(res, binding, scenario))
    if as_json:
        doc = report.result_dict(scenario, res, binding, conflict)
        doc.update(extra or {})
        if launch is not None:
            doc["launch"] = {"format": launch[0], "text": launch[1]}
        emit_json(doc)
    elif launch is not None:
        click.echo(launch[1], nl=False)
    else:
        if extra_text:
            click.echo(extra_text)
            click.echo("")
        click.echo(report.paragraph(scenario, res, binding, conflict))
        if res.plans:
            click.echo("")
            click.echo(report.plans_table(res, scenario))
            click.echo(report.cluster_line(res.plans[0].evaluation))
            click.echo(report.evidence_legend(scenario))
        if binding:
            click.echo("")
            click.echo(report.binding_table(binding, res.objective_unit))
        click.echo(f"\n{res.solver}: {res.status_text} in {res.wall_s:.2f} s")
        if res.message:
            click.echo(f"{res.solver}: {res.message}")
    if res.best is None:
        if res.status == "unknown":
            raise Infeasible("no plan found within the time limit; raise --time-limit")
        summary = "no plan satisfies the question"
        if conflict is not None and conflict.constraints:
            summary += f": {' and '.join(conflict.constraints)} conflict"
            if conflict.fixes:
                summary += f" ({'; or '.join(f.change for f in conflict.fixes)})"
        raise Infeasible(summary)


@cli.command("optimize")
@question_options
@click.option(
    "--top",
    "top_k",
    type=click.IntRange(1, 100),
    default=1,
    show_default=True,
    help="The K best plans with distinct layouts.",
)
@click.option(
    "--solver", type=click.Choice(("cpsat", "exhaustive")), default="cpsat", show_default=True
)
@click.option(
    "--emit",
    "emit_format",
    type=click.Choice(FORMATS),
    default=None,
    help="Print the best plan's launch settings (Megatron-LM flags, NeMo 2.0 recipe fields, "
    "torchtitan TOML or a Slurm batch script) instead of the report; with --json, add them "
    "as `launch`.",
)
@click.option(
    "--from-megatron",
    "from_megatron",
    default=None,
    metavar="ARGS|FILE",
    help="Optimize for an existing Megatron-LM command's model, GPU count and global batch, "
    "and show what would change.",
)
@click.option(
    "--bom",
    "bom_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the best plan's bill of materials as CSV (one line per item, then the total, "
    "equal to the plan's capex).",
)
@click.pass_context
def optimize_cmd(
    ctx: click.Context,
    top_k,
    solver,
    emit_format,
    from_megatron,
    bom_file,
    time_limit,
    explain,
    as_json,
    csv_file,
    **question,
) -> None:
    """Choose the hardware and the layout: fastest under a budget, or cheapest by a deadline."""
    question = {**question, "gpu_caps": dict(question.get("gpu_caps") or ())}
    from designer.launch import diff as megatron_diff  # the performance model: on use

    run = None
    if from_megatron is not None:
        run = load_megatron(from_megatron)
        question = megatron_diff.question_for(run, question, _given(ctx))
    scenario = build_scenario(**question)
    res = solve(scenario, solver=solver, top_k=top_k, time_limit_s=time_limit)
    extra, extra_text = None, None
    if run is not None:
        imported = megatron_diff.imported_evaluation(scenario, run)
        extra = {"from_megatron": report._plain(megatron_diff.as_dict(run, imported, res.best))}
        extra_text = megatron_diff.text(run, imported, res.best)
    launch = None
    if emit_format is not None and res.best is not None:
        launch = (emit_format, emit(Launch.from_plan(scenario, res.best), emit_format))
    if bom_file is not None and res.best is not None:
        _write_csv(bom_file, report.bom_csv_text(res.best), "--bom")
    _answer(scenario, res, explain, time_limit, as_json, csv_file, extra, extra_text, launch)


@cli.command("export")
@click.argument("plan_file", metavar="PLAN.json", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="megatron",
    show_default=True,
    help="megatron (torchrun + pretrain_gpt.py flags), nemo (NeMo 2.0 recipe fields), "
    "torchtitan (job-config TOML) or slurm (batch script).",
)
def export_cmd(plan_file: Path, fmt: str) -> None:
    """Print launch settings for a saved plan (optimize --json output, its first plan)."""
    scenario, config = load_question_file(plan_file)
    if config is None:
        raise UsageError(
            f"{plan_file}: holds no plan; pass a saved `designer optimize --json` answer with a plan"
        )
    res = evaluate_config(scenario, config)
    assert res.best is not None
    click.echo(emit(Launch.from_plan(scenario, res.best), fmt), nl=False)


@cli.command("compare")
@question_options
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Draw time to train and cost per GPU type (PNG or SVG; needs matplotlib).",
)
def compare_cmd(time_limit, explain, as_json, csv_file, plot_file, **question) -> None:
    """The same question once per GPU type: the best plan on each, best first."""
    scenario = build_scenario(**{**question, "gpu_caps": dict(question.get("gpu_caps") or ())})
    from designer.compare import compare  # OR-Tools: on use

    rows = compare(scenario, explain=explain, time_limit_s=time_limit)
    _write_csv(csv_file, report.compare_csv(rows, scenario))
    if plot_file is not None:
        report.compare_plot(rows, plot_file, scenario)
    if as_json:
        emit_json(report.compare_dict(scenario, rows))
    else:
        click.echo(report.compare_table(rows, scenario))
    if not any(r.result.best for r in rows):
        raise Infeasible("no GPU type answers the question")


@cli.command("breakeven")
@question_options
@click.option("--against", required=True, help="The rival GPU type.")
def breakeven_cmd(time_limit, explain, as_json, csv_file, against, **question) -> None:
    """The price at which --gpu (exactly one) starts to win the job against --against.

    --csv writes the two plans (the candidate at the break-even price, then the rival)."""
    from designer.breakeven import breakeven

    gpus: tuple[str, ...] = tuple(question.get("gpus") or ())
    if len(gpus) != 1:
        raise UsageError("--gpu: give exactly one GPU type to price (and the rival with --against)")
    candidate = gpus[0]
    if against == candidate:
        raise UsageError("--against: pick a GPU type other than --gpu")
    scenario = build_scenario(
        **{
            **question,
            "gpus": (candidate, against),
            "gpu_caps": dict(question.get("gpu_caps") or ()),
        }
    )
    be = breakeven(scenario, candidate, against, time_limit_s=time_limit)
    unit = "per GPU-hour" if scenario.pricing == "cloud" else "per GPU"
    doc = {
        "gpu": be.gpu,
        "against": be.against,
        "pricing": scenario.pricing,
        "catalog_price_usd": be.catalog_price,
        "breakeven_price_usd": be.price,
        "wins_at_catalog_price": be.wins_at_catalog_price,
        "objective": {"name": be.rival.objective_name, "unit": be.rival.objective_unit},
        "plans": {
            "gpu": report.plan_entry(scenario, be.at_price.best, 1)
            if be.at_price and be.at_price.best
            else None,
            "against": report.plan_entry(scenario, be.rival.best, 1) if be.rival.best else None,
        },
    }
    if csv_file is not None:
        plans = [r.best for r in (be.at_price, be.rival) if r is not None and r.best is not None]
        _write_csv(
            csv_file,
            report.csv_text(
                SolveResult("feasible", "cpsat", 0.0, None, plans=plans), None, scenario
            ),
        )
    if as_json:
        emit_json(doc)
    elif be.price is None:
        click.echo(
            f"{be.gpu} does not win against {be.against} even at 1/1000 of its price "
            f"({render.usd(be.catalog_price)} {unit})."
        )
    else:
        change = 100 * (be.price / be.catalog_price - 1)
        click.echo(
            f"{be.gpu} wins the job against {be.against} at or below {render.usd(be.price)} {unit} "
            f"(catalog {render.usd(be.catalog_price)}, {change:+.1f}%)."
        )
        for label, res in ((f"{be.gpu} at that price", be.at_price), (be.against, be.rival)):
            if res is not None and res.best is not None:
                ev = res.best.evaluation
                evid = report.plan_evidence(scenario, res.best)
                days = report.with_range(
                    float(ev.time_to_train_days or 0), evid["days_range"], ".1f"
                )
                click.echo(
                    f"  {label}: {ev.layout.num_gpus:,} GPUs, {days} days, "
                    f"{render.usd(res.best.cost_usd)}; {evid['line']}"
                )


@cli.command("explain")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--time-limit", type=click.FloatRange(min=0.01), default=60.0, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False, path_type=Path), default=None)
def explain_cmd(file: Path, time_limit: float, as_json: bool, csv_file: Path | None) -> None:
    """Explain a saved plan (optimize --json output) or a question file (YAML/JSON of optimize's options)."""
    scenario, config = load_question_file(file)
    if config is None:
        res = solve(scenario, time_limit_s=time_limit)
    else:
        res = evaluate_config(scenario, config)
    _answer(scenario, res, True, time_limit, as_json, csv_file)


@cli.command("sweep")
@click.argument("study_file", type=click.Path(path_type=Path), required=False)
@click.option(
    "--schema", "show_schema", is_flag=True, help="Print the study file's JSON Schema and exit."
)
@click.option(
    "--csv",
    "csv_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Results, one row per scenario [default: STUDY.csv beside the study].",
)
@click.option(
    "--plot",
    "plot_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Draw cost against time to train per GPU type (PNG or SVG; needs matplotlib).",
)
@click.option("--resume", is_flag=True, help="Skip scenarios already in the CSV.")
@click.option("--executor", type=click.Choice(("local", "ray")), default="local", show_default=True)
@click.option("--address", default=None, help="Ray cluster address (with --executor ray).")
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Local worker processes [default: cores].",
)
def sweep_cmd(
    study_file, show_schema, csv_file, plot_file, resume, executor, address, workers
) -> None:
    """Run a study: a base question and axes, the cross product, one CSV row per scenario."""
    from designer import sweep

    if show_schema:
        emit_json(sweep.schema())
        return
    if study_file is None:
        raise UsageError("STUDY_FILE: give a study YAML file (see designer sweep --schema)")
    study = sweep.load_study(study_file)
    out = csv_file or study_file.with_suffix(".csv")
    import os

    rows = sweep.run_study(
        study,
        str(study_file),
        out,
        resume,
        workers or os.cpu_count() or 1,
        executor,
        address,
        progress=sweep.print_progress if sys.stderr.isatty() else None,
    )
    if plot_file is not None:
        if study.uncertainty is not None:
            report.win_share_plot(sweep.summary(out), plot_file)
        elif "budget" in study.axes and len(study.axes) <= 2:
            report.budget_plot(out, plot_file)
        else:
            report.sweep_plot(out, plot_file)
    click.echo(f"{len(rows)} scenarios run, results in {out}")
    if study.uncertainty is not None:
        stats = sweep.summary(out)
        table_rows = [
            (
                g,
                int(v["wins"]),
                f"{100 * v['win_share']:.0f}%",
                v["days_p10"],
                v["days_p50"],
                v["days_p90"],
                render.usd(v["cost_p50"]),
            )
            for g, v in stats.items()
        ]
        click.echo(
            render.table(
                ["gpu", "wins", "win_share", "days_p10", "days_p50", "days_p90", "cost_p50"],
                table_rows,
            )
        )


# ---------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> None:
    """Run the CLI, mapping errors to the contract's exit codes and one-line messages."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        cli.main(args=args, prog_name="designer", standalone_mode=False)
    except click.exceptions.Exit as ex:
        sys.exit(ex.exit_code)
    except click.exceptions.Abort:
        click.echo("designer: aborted", err=True)
        sys.exit(1)
    except click.ClickException as err:
        if debug:
            raise
        message = err.format_message().replace("\n", " ")
        click.echo(f"designer: error: {message}", err=True)
        sys.exit(2)
    except (UsageError, ModelError, CatalogError) as err:
        if debug:
            raise
        click.echo(f"designer: error: {err}", err=True)
        sys.exit(2)
    except Infeasible as err:
        if debug:
            raise
        click.echo(f"designer: infeasible: {err}", err=True)
        sys.exit(1)
    except SystemExit:
        raise
    except Exception as err:  # a bug: say so in one line unless debugging
        if debug:
            raise
        click.echo(
            f"designer: internal error: {err.__class__.__name__}: {err} (rerun with --debug)",
            err=True,
        )
        sys.exit(1)
