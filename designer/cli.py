"""The `designer` command line: each command parses its options, calls one library function
and prints through the report modules.

Exit codes (../shared/CLI-CONTRACT.md): 0 success, 1 no answer (infeasible),
2 bad usage or input, with one line on stderr; tracebacks only with --debug.
"""

from __future__ import annotations

import json
import math
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from catalog import load_catalog
from designer import interrupts
from designer.answer import explain as explain_result
from designer.answer import explain_beside, no_plan, saved_plan, write_file
from designer.errors import UsageError
from designer.exit_codes import report_error as _report
from designer.launch import FORMATS, Launch, emit, load_megatron
from designer.numbers import Finite, check_ascii_numbers
from designer.options import (
    ANSWER_KEYS,
    ANSWER_OPTIONS,
    CATALOG_OPTION,
    EVALUATE_OPTIONS,
    JSON_OPTION,
    REPORT_OPTIONS,
    SOLVE_OPTIONS,
    apply,
    file_option,
    json_wanted,
)
from designer.output import catalog_doc as render_catalog
from designer.output import formats as report
from designer.output.breakeven_doc import breakeven_csv, breakeven_dict, breakeven_text
from designer.output.compare_doc import compare_csv, compare_dict, compare_text
from designer.output.files import check_command_paths
from designer.output.plots import compare_plot, study_plot
from designer.question.build import load_question_file, scenario_from_options
from designer.question.fields import question_options
from designer.question.given_plan import evaluate_given
from models import moe_zoo, resolve_model, zoo
from solvers import solve


def emit_json(obj: Any) -> None:
    """Standard JSON: a quantity that is not finite (a zero-throughput catalog entry's
    infinite days) is null, never the invalid `Infinity` or `NaN`."""
    click.echo(json.dumps(_finite(obj), indent=2, sort_keys=False, default=str, allow_nan=False))


def _finite(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


class DesignerGroup(click.Group):
    """Runs a command; without --debug its errors become one line and an exit code (click's
    own usage errors stay click's, for its usage text in standalone mode)."""

    def invoke(self, ctx: click.Context) -> Any:
        with interrupts.handled():
            try:
                return super().invoke(ctx)
            except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort):
                raise
            except BrokenPipeError:  # the reader closed the output (``| head``): click's
                raise  # main ends quietly with 1, Python's advice for SIGPIPE
            except KeyboardInterrupt as err:  # Ctrl-C, or SIGTERM (interrupts.Terminated)
                raise interrupts.stopped(err) from err
            except Exception as err:
                stop = interrupts.interrupt_of(err)  # Ctrl-C inside an extension's import
                if stop is not None:
                    raise interrupts.stopped(stop) from err
                if ctx.params.get("debug"):
                    raise
                raise _report(err) from err


class DesignerCommand(click.Command):
    """A command whose output files are checked before it runs (writable, none an input)."""

    def invoke(self, ctx: click.Context) -> Any:
        check_command_paths(ctx)
        return super().invoke(ctx)


DesignerGroup.command_class = DesignerCommand


@click.group(cls=DesignerGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show tracebacks for errors.")
@click.version_option(package_name="designer")
def cli(debug: bool) -> None:
    """Design GPU clusters and parallel layouts for training large language models."""


def _given(ctx: click.Context) -> set[str]:
    """Parameters the user set on the command line (not defaults)."""
    return {
        name
        for name in ctx.params
        if ctx.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE
    }


# ---------------------------------------------------------------- models, catalog
@cli.group("models", invoke_without_command=True)
@JSON_OPTION
@click.pass_context
def models_cmd(ctx: click.Context, as_json: bool) -> None:
    """List the built-in model zoo, dense and mixture-of-experts (`models show NAME`: one)."""
    if ctx.invoked_subcommand is not None:
        return
    specs = [*zoo().values(), *moe_zoo().values()]
    if as_json:
        emit_json([render_catalog.model_dict(s) for s in specs])
    else:
        click.echo(render_catalog.models_table(specs))


@models_cmd.command("show")
@click.argument("name")
@JSON_OPTION
def models_show(name: str, as_json: bool) -> None:
    """Print every field of one model (zoo name or spec file)."""
    d = render_catalog.model_dict(resolve_model(name, "NAME"))
    if json_wanted(as_json):
        emit_json(d)
    else:
        click.echo(render_catalog.model_text(d))


@cli.group("catalog", invoke_without_command=True)
@CATALOG_OPTION
@JSON_OPTION
@click.pass_context
def catalog_cmd(ctx: click.Context, catalog_files: tuple[Path, ...], as_json: bool) -> None:
    """List the hardware catalog (`designer catalog show NAME` for one entry)."""
    ctx.obj = catalog_files
    if ctx.invoked_subcommand is not None:
        return
    cat = load_catalog(list(catalog_files))
    if as_json:
        emit_json(render_catalog.catalog_dict(cat))
    else:
        click.echo(render_catalog.catalog_text(cat))


@catalog_cmd.command("show")
@click.argument("name")
@JSON_OPTION
@click.pass_obj
def catalog_show(catalog_files: tuple[Path, ...], name: str, as_json: bool) -> None:
    """Print every field of one GPU, NIC or switch (or `facility`), with its sources."""
    cat = load_catalog(list(catalog_files or ()))
    if json_wanted(as_json):
        emit_json(render_catalog.catalog_entry(cat, name))
    else:
        click.echo(render_catalog.entry_text(cat, name))


# ---------------------------------------------------------------- evaluate
@cli.command("evaluate")
@apply(EVALUATE_OPTIONS)
@click.pass_context
def evaluate_cmd(ctx: click.Context, as_json: bool, **opts: Any) -> None:
    """Analyse one given layout, like a dry run of a training launch."""
    # lazy: designer.dry_run loads numpy; commands that never solve do not
    from designer.dry_run import evaluate_options
    from designer.output.dry_run_doc import evaluate_text

    answer = evaluate_options(opts, _given(ctx))
    if as_json:
        emit_json(answer.as_dict())
    else:
        click.echo(evaluate_text(answer))
    if not answer.ev.feasible:
        raise SystemExit(1)


# ---------------------------------------------------------------- optimize, export, explain
def _answer(
    scenario,
    res,
    explain: bool,
    time_limit: float,
    as_json: bool,
    csv_file: Path | None,
    extra: tuple[dict[str, Any], str] | None = None,
    launch: tuple[str, str] | None = None,
    notes: tuple[dict[str, Any], tuple[str, ...]] = ({}, ()),
    explained: tuple[Any, Any] | None = None,
) -> None:
    """Explain, print and exit as the contract says (shared by optimize and explain).

    ``extra`` (JSON keys, a paragraph) adds what --from-megatron would change; ``launch``
    (format, text) is emitted settings: the JSON's `launch`, or the only text printed;
    ``notes`` (JSON keys, text sections) what else the answer says (designer.alternatives);
    ``explained``: the explanation (binding, conflict) when the caller already has it."""
    if launch is not None and not as_json:
        explain = False  # the text is the settings alone, ready to redirect to a file
    if explained is None:
        explained = explain_result(scenario, res, time_limit) if explain else (None, None)
    binding, conflict = explained
    write_file(csv_file, report.csv_text(res, binding, scenario))
    if as_json:
        doc = report.result_dict(scenario, res, binding, conflict)
        doc.update(extra[0] if extra else {})
        doc.update(notes[0])
        if launch is not None:
            doc["launch"] = {"format": launch[0], "text": launch[1]}
        emit_json(doc)
    elif launch is not None:
        click.echo(launch[1], nl=False)
    else:
        click.echo(
            report.answer_text(scenario, res, binding, conflict, extra and extra[1], notes[1])
        )
    if res.best is None:
        raise no_plan(res, conflict)


@cli.command("optimize")
@question_options
@apply(ANSWER_OPTIONS)
@apply(SOLVE_OPTIONS)
@click.option(
    "--emit",
    "emit_format",
    type=click.Choice(FORMATS),
    default=None,
    help="Print the best plan's launch settings (Megatron-LM flags, a Megatron-Bridge "
    "ConfigContainer snippet, a torchtitan 0.3.0 command or a Slurm batch script) "
    "instead of the report; with --json, add them as `launch`.",
)
@click.option(
    "--from-megatron",
    "from_megatron",
    default=None,
    metavar="ARGS|FILE",
    help="Optimize for an existing Megatron-LM command's model, GPU count and global batch, "
    "and show what would change.",
)
@file_option(
    "--bom",
    "bom_file",
    "Write the best plan's bill of materials as CSV (one line per item, then the total, "
    "equal to the plan's capex).",
)
@click.pass_context
def optimize_cmd(ctx: click.Context, top_k, solver, emit_format, from_megatron, bom_file, **q):
    """Choose the hardware and the layout: fastest under a budget, or cheapest by a deadline."""
    # lazy: the solvers (OR-Tools, numpy) and the performance model (numpy) load on use;
    # commands that never solve do not load them
    from designer.ahead import Ahead
    from designer.launch import diff as megatron_diff

    time_limit, explain, as_json, csv_file = (q.pop(k) for k in ANSWER_KEYS)
    run = load_megatron(from_megatron) if from_megatron is not None else None
    if run is not None:
        q = megatron_diff.question_for(run, q, _given(ctx))
    try:
        scenario = scenario_from_options(q)
    except UsageError as err:
        blamed = megatron_diff.refusal(err, run) if run is not None else None
        if blamed is None:
            raise
        raise blamed from err
    # the alternatives need the answer only to be solved: prepared beside its solve
    with Ahead(q, scenario, time_limit, wanted=emit_format is None) as ahead:
        res = solve(scenario, solver=solver, top_k=top_k, time_limit_s=time_limit)
        extra = megatron_diff.report(scenario, run, res.best) if run is not None else None
        launch = None
        if emit_format is not None and res.best is not None:
            launch = (emit_format, emit(Launch.from_plan(scenario, res.best), emit_format))
        if bom_file is not None and res.best is not None:
            write_file(bom_file, report.bom_csv_text(res.best), "--bom")

        def notes() -> tuple[dict[str, Any], tuple[str, ...]]:
            return ahead.result(res) if launch is None else ({}, ())

        if explain and (launch is None or as_json):  # the alternatives beside the explanation
            beside = ahead.computing(res)
            said, why = explain_beside(scenario, res, time_limit, notes, yield_cpu=beside)
            _answer(scenario, res, True, time_limit, as_json, csv_file, extra, launch, said, why)
        else:
            _answer(scenario, res, False, time_limit, as_json, csv_file, extra, launch, notes())


@cli.command("export")
@click.argument("plan_file", metavar="PLAN.json", type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="megatron",
    show_default=True,
    help="megatron (torchrun + pretrain_gpt.py flags), nemo (Megatron-Bridge "
    "ConfigContainer snippet), torchtitan (torchtitan 0.3.0 command line) or slurm "
    "(batch script).",
)
def export_cmd(plan_file: Path, fmt: str) -> None:
    """Print launch settings for a saved plan (optimize --json output, its first plan)."""
    scenario, res = saved_plan(plan_file)
    click.echo(emit(Launch.from_plan(scenario, res.plans[0]), fmt, "--format"), nl=False)


@cli.command("explain")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--time-limit", type=Finite(min=0.01), default=60.0, show_default=True)
@JSON_OPTION
@click.option("--csv", "csv_file", type=click.Path(dir_okay=False, path_type=Path), default=None)
def explain_cmd(file: Path, time_limit: float, as_json: bool, csv_file: Path | None) -> None:
    """Explain a saved plan (optimize --json output) or a question file (YAML/JSON of optimize's options)."""
    scenario, given = load_question_file(file)
    if given is None:  # the runner-up too: how sure the ranking is (designer/confidence.py)
        res = solve(scenario, top_k=2, time_limit_s=time_limit)
    else:
        res = evaluate_given(scenario, given)
    _answer(scenario, res, True, time_limit, as_json, csv_file)


# ---------------------------------------------------------------- compare, breakeven
@cli.command("compare")
@question_options
@apply(ANSWER_OPTIONS)
@apply(SOLVE_OPTIONS)
@file_option(
    "--plot",
    "plot_file",
    "Draw time to train and cost per GPU type (PNG or SVG; needs matplotlib).",
)
def compare_cmd(
    time_limit, explain, as_json, csv_file, top_k, solver, plot_file, **question
) -> None:
    """The same question once per GPU type: the best plan on each (--top K: the K best), best first."""
    # lazy: designer.compare loads OR-Tools and numpy; commands that never solve do not
    from designer.compare import compare, compare_conflict, left_out  # OR-Tools: on use

    scenario = scenario_from_options(question)
    rows = compare(scenario, explain=explain, time_limit_s=time_limit, top_k=top_k, solver=solver)
    conflict = compare_conflict(scenario, rows, time_limit) if explain else None
    beyond = left_out(question, scenario)  # the GPU types the evidence rule kept out
    write_file(csv_file, compare_csv(rows, scenario))
    drawn = plot_file is None or compare_plot(rows, plot_file, scenario)
    if as_json:
        emit_json(compare_dict(scenario, rows, conflict, beyond))
    else:
        click.echo(compare_text(scenario, rows, conflict, beyond))
    if not drawn:  # the answer says why; the plot's line says only that there is none
        click.echo("designer: --plot: no GPU type has a plan to draw; nothing drawn", err=True)
    if not any(r.result.best for r in rows):  # proved for each, or the first out of time
        first = next((r.result for r in rows if r.result.status != "infeasible"), rows[0].result)
        raise no_plan(first, conflict, "no GPU type answers the question")


@cli.command("breakeven")
@question_options
@apply(ANSWER_OPTIONS)
@click.option("--against", required=True, help="The rival GPU type.")
def breakeven_cmd(time_limit, explain, as_json, csv_file, against, **question) -> None:
    """The price at which --gpu (exactly one) starts to win the job against --against.

    --csv writes the two plans (the candidate at the break-even price, then the rival)."""
    # lazy: designer.breakeven loads OR-Tools and numpy; commands that never solve do not
    from designer.breakeven import breakeven, breakeven_question

    scenario, candidate = breakeven_question(question, against)
    be = breakeven(scenario, candidate, against, time_limit_s=time_limit)
    write_file(csv_file, breakeven_csv(scenario, be))
    if as_json:
        emit_json(breakeven_dict(scenario, be))
    else:
        click.echo(breakeven_text(scenario, be))


# ---------------------------------------------------------------- sweep
def _count_option(flag: str, help: str) -> Any:
    """An optional positive whole-number option (None: the command's default)."""
    return click.option(flag, type=click.IntRange(min=1), default=None, help=help)


@cli.command("sweep")
@click.argument("study_file", type=click.Path(path_type=Path), required=False)
@click.option(
    "--schema", "show_schema", is_flag=True, help="Print the study file's JSON Schema and exit."
)
@file_option(
    "--csv", "csv_file", "Results, one row per scenario [default: STUDY.csv beside the study]."
)
@file_option(
    "--plot",
    "plot_file",
    "Draw cost against time to train per GPU type (PNG or SVG; needs matplotlib).",
)
@click.option("--resume", is_flag=True, help="Skip scenarios already in the CSV.")
@click.option("--executor", type=click.Choice(("local", "ray")), default="local", show_default=True)
@click.option("--address", default=None, help="Ray cluster address (with --executor ray).")
@_count_option("--workers", "Local worker processes [default and most: cores].")
@click.option("--force", is_flag=True, help="Allow more --workers than this machine's cores.")
@click.option("--yes", is_flag=True, help="Run a study larger than --max-scenarios.")
@_count_option("--max-scenarios", "A larger study asks for --yes [default: 100,000].")
def sweep_cmd(
    study_file,
    show_schema,
    csv_file,
    plot_file,
    resume,
    executor,
    address,
    workers,
    force,
    yes,
    max_scenarios,
) -> None:
    """Run a study: a base question and axes, the cross product, one CSV row per scenario."""
    # lazy: the study schema (~75 ms of pydantic models) loads for designer sweep only
    from designer import sweep

    if show_schema:
        emit_json(sweep.schema())
        return
    sweep.check_executor(executor, address)
    if study_file is None:
        raise UsageError("give a study YAML file (see designer sweep --schema)", "STUDY_FILE")
    study = sweep.load_study(study_file, yes, max_scenarios)
    out = csv_file or study_file.with_suffix(".csv")
    sweep.check_paths(study, str(study_file), out, plot_file)
    progress = sweep.print_progress if sys.stderr.isatty() else None
    workers, note = sweep.local_workers(workers, force)
    if note:
        click.echo(f"designer: note: {note}", err=True)
    rows = sweep.run_study(
        study, str(study_file), out, resume, workers, executor, address, progress=progress
    )
    stats = sweep.summary(out) if study.uncertainty is not None else None
    drawn = plot_file is None or study_plot(study, out, plot_file, stats)
    click.echo(sweep.outcome(len(rows), out, stats))
    if not drawn:  # the rows say why; the plot's line says only that there is none
        click.echo("designer: --plot: no scenario has a plan to draw; nothing drawn", err=True)


@cli.command("report")
@click.argument("file", type=click.Path(path_type=Path))
@apply(REPORT_OPTIONS)
def report_cmd(file, html_file, xlsx_file, open_page, study_file, time_limit) -> None:
    """Write a saved answer (optimize, explain, compare or breakeven --json) or a sweep's
    CSV as a page and a workbook."""
    # lazy: designer.report.command loads numpy; commands that never solve do not
    from designer.report.command import write_report

    for line in write_report(file, html_file, xlsx_file, open_page, study_file, time_limit):
        click.echo(line)


# ---------------------------------------------------------------- entry point
def main(argv: list[str] | None = None) -> None:
    """Run the CLI, mapping errors to the contract's exit codes and one-line messages."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        check_ascii_numbers(args)
    except UsageError as err:
        _report(err).show()
        sys.exit(2)
    try:
        cli.main(args=args, prog_name="designer", standalone_mode=False)
    except click.exceptions.Exit as ex:
        sys.exit(ex.exit_code)
    except click.exceptions.Abort as err:  # click's: an interrupt before the command ran
        stop = interrupts.interrupt_of(err)
        if stop is None:
            click.echo("designer: aborted", err=True)
            sys.exit(1)
        interrupts.exit_stopped(stop)
    except KeyboardInterrupt as err:  # after the command gave its handlers back
        interrupts.exit_stopped(err)
    except interrupts.Stopped as err:
        err.show()
        sys.exit(err.exit_code)
    except click.ClickException as err:
        reported = _report(err)
        reported.show()
        sys.exit(reported.exit_code)
    except Exception as err:  # --debug: the traceback, then the contract's exit code
        traceback.print_exc()
        sys.exit(_report(err).exit_code)
