"""Does `designer evaluate`, given a row's documented options, predict the bench's step time?

Usage: python bench/cli_parity.py [--set all|dense|grok|moe|deepseek|vtrain] [--every]
                                  [--show-args] [--variants]

The accuracy benches call the library directly (bench/accuracy.py's published rows through
calibration/published.py, bench/moe_accuracy.py's Grok-1 proxy, independent and
DeepSeek-V3 report rows, calibration/vtrain.py's vTrain rows). A held-out set is scored by
``designer evaluate`` with the options README.md documents, so each row is rebuilt here as
the argument list a README reader would write from the row's fields, run in-process
(click's CliRunner on designer.cli's group, ``--json --no-failures``), and its
``step_time_s`` compared with the bench's prediction for the row.

The row's model is a spec file (``--model FILE``, the README's "designer spec file"): the
bench's TransformerSpec of the row written as JSON, its non-default fields only (the
published rows' vocabulary as calibration/published.py pads it, 128 x TP, Megatron-LM's
--make-vocab-size-divisible-by; the Grok-1 proxy's layers and recipe). MoE rows of the
zoo use its name. Everything else is an option: the layout, batch, sequence, precision,
recompute and ZeRO, the NIC and its count, the stack, and the MoE options
(--ep/--etp, --dispatcher, --moe-overlap, --recompute-modules, --fused-attention,
--router-fp32, --permute-fusion, --capacity-factor, --pipeline-layout, --mtp-layers,
--fp8-dispatch, --fp8-activations).

Where the bench sets a knob no option reaches, the case carries ``knob`` (why) and
``neutral`` (the bench's own prediction with that knob at its default): a difference the
neutral prediction closes is that knob's, printed as its cause.

--variants also runs, for the published rows, what a README reader might write instead of
the bench's setting where the row leaves it unsaid (the recompute the CLI defaults to, the
printed vocabulary, the CLI's default NIC, --stack pytorch-fsdp2 for an FSDP2 row) and, for
every row with CP, --cp-across-servers (the CLI marks TP x CP past the scale-up domain
infeasible unless it is given), and prints how many rows each changes (a row with a
bench-only knob against the bench at that knob's default).

Prints every row whose relative difference exceeds TOLERANCE, with its cause, the rows the
CLI refuses (exit 2, with the error line) or marks infeasible (exit 1, still priced), and a
summary. Exit status 0 when no row is refused and every difference has a known cause, else 1.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shlex
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/moe_accuracy.py

import deepseek_v3 as v3  # noqa: E402
import moe_accuracy as moe  # noqa: E402
from click.testing import CliRunner  # noqa: E402

from calibration import published, vtrain  # noqa: E402
from catalog import load_catalog  # noqa: E402
from designer.cli import cli  # noqa: E402
from models import Hardware, Layout, TransformerSpec, evaluate  # noqa: E402
from models.expert import ExpertLayout  # noqa: E402
from models.pipeline import split_options  # noqa: E402
from models.zoo import moe_zoo  # noqa: E402

TOLERANCE = 1e-6  # relative: a row differs beyond it
SETS = ("dense", "grok", "moe", "deepseek", "vtrain")


@dataclass
class Case:
    """One bench row as `designer evaluate` arguments, with the bench's step seconds."""

    set: str
    name: str
    args: list[str]
    bench_s: float
    spec: TransformerSpec | None = None  # written to a file, passed as --model FILE
    knob: str = ""  # a bench-only setting no option reaches (why), if any
    neutral: Callable[[], float] | None = None  # the bench's step with that knob at default
    # what a README reader might write instead (label, arguments, spec): --variants runs them
    variants: list[tuple[str, list[str], TransformerSpec | None]] = field(default_factory=list)


@dataclass
class Outcome:
    case: Case
    code: int
    cli_s: float | None
    error: str = ""

    @property
    def rel(self) -> float | None:
        if self.cli_s is None:
            return None
        return (self.cli_s - self.case.bench_s) / self.case.bench_s


def spec_doc(spec: TransformerSpec) -> dict:
    """The spec file a reader writes: the model's fields that are not TransformerSpec's
    defaults (plus the five the README asks for)."""
    doc = spec.model_dump(mode="json", exclude_defaults=True)
    for key in ("name", "layers", "hidden", "heads", "vocab", "seq_len"):
        doc[key] = getattr(spec, key)
    return doc


def layout_args(lay: Layout, vp: bool = True) -> list[str]:
    """The Layout as evaluate's options (``vp`` False: a --pipeline-layout sets it)."""
    args = []
    for key in ("tp", "pp", "dp", "cp", *(("vp",) if vp else ())):
        args += [f"--{key}", str(getattr(lay, key))]
    args += ["--micro-batch", str(lay.micro_batch), "--global-batch", str(lay.global_batch)]
    args += ["--recompute", lay.recompute, "--zero", str(lay.zero), "--precision", lay.precision]
    if vp:  # (a layout string's rows pass their own --pipeline-layout, vp False)
        args += shlex.split(split_options(lay))
    if lay.sequence_parallel is not None:
        args.append("--sequence-parallel" if lay.sequence_parallel else "--no-sequence-parallel")
    return args


COMMON = ["evaluate", "--json", "--no-failures"]


# ---------------------------------------------------------------- the benches' rows
def dense_cases() -> Iterator[Case]:
    """bench/accuracy.py --set published: calibration/published.py's evaluated runs."""
    catalog = load_catalog()
    runs, _ = published.read_runs(catalog)
    vocab = printed_vocab()
    for pred in published.predict(runs, catalog):
        run = pred.run
        args = [*COMMON, "--model", "SPEC", "--gpu", run.gpu, "--stack", published.MODERN_STACK]
        args += ["--nic", run.nic, "--nics-per-node", str(run.nics_per_node)]
        args += ["--seq-len", str(run.seq_len), *layout_args(run.layout)]
        case = Case("dense", run.name, args, float(pred.predicted_step_s), run.spec)
        case.variants = dense_variants(run, args, vocab.get(run.name))
        yield case


def printed_vocab() -> dict[str, int]:
    """Each published row's vocabulary as printed (calibration/published.py pads it)."""
    out = {}
    for fname in published.FILES:
        with (published.DATA_DIR / fname).open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                out[row["name"].strip()] = published._int(row["vocab"]) or 51200
    return out


def dense_variants(
    run: published.PublishedRun, args: list[str], vocab: int | None
) -> list[tuple[str, list[str], TransformerSpec | None]]:
    """What a README reader might write instead for a published row (module docstring)."""
    out: list[tuple[str, list[str], TransformerSpec | None]] = []
    if any(a.startswith("recompute not given") for a in run.assumed):
        i = args.index("--recompute")
        out.append(("recompute not given: the CLI's default", args[:i] + args[i + 2 :], run.spec))
    if run.layout.zero == 3:
        i = args.index("--stack") + 1
        fsdp = [*args[:i], "pytorch-fsdp2", *args[i + 1 :]]
        out.append(("FSDP2 row under --stack pytorch-fsdp2", fsdp, run.spec))
    if vocab is not None and run.spec.name != "llama2-7b" and vocab != run.spec.vocab:
        raw = run.spec.model_copy(update={"vocab": vocab})
        out.append(("the printed vocabulary, not padded to 128 x TP", args, raw))
    i = args.index("--nic")
    out.append(("the NIC and count left at the CLI's default", args[:i] + args[i + 4 :], run.spec))
    return out


def grok_cases() -> Iterator[Case]:
    """bench/moe_accuracy.py's Grok-1 proxy rows (the released set), expert_load 1.0."""
    for row in moe.grok_rows():
        layers, seq = int(row["layers"]), int(row["seq_len"])
        spec = moe_zoo()["grok-1"].model_copy(
            update={"name": "grok-1-proxy", "layers": layers, "seq_len": seq, **moe.GROK_RECIPE}
        )
        gpus, tp, pp, cp = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp"))
        vp = row["virtual_pp"] if row["virtual_pp"].isdigit() else "1"
        prec = "fp8" if "FP8" in row["precision"].upper() else "bf16"
        args = [*COMMON, "--model", "SPEC", "--gpu", "h100-sxm", "--stack", moe.MODERN_STACK]
        args += ["--tp", str(tp), "--pp", str(pp), "--cp", str(cp), "--vp", vp]
        args += ["--dp", str(gpus // (tp * pp * cp)), "--micro-batch", row["micro_batch"] or "1"]
        args += ["--global-batch", row["global_batch"], "--seq-len", str(seq)]
        args += ["--recompute", "none", "--precision", prec, "--ep", row["ep"], "--etp", str(tp)]
        args += ["--no-permute-fusion"]

        def neutral(row: dict[str, str] = row) -> float:
            ex = replace(moe.grok_expert_layout(row, 1.0), wgrad_accumulation_bytes=8.0)
            return _grok_with(row, ex)

        name = f"grok-1 proxy {gpus}xH100 {prec} L{layers} s{seq} tp{tp} pp{pp} cp{cp}"
        knob = (
            "wgrad_accumulation_bytes 4 (the recipe's bf16 gradient buffers, "
            "grad_sync_dtype bf16): no option"
        )
        case = Case("grok", name, args, moe.predict(row, 1.0)[0], spec, knob, neutral)
        case.variants = default_variants(case, GROK_UNSAID)
        yield case


# what a Grok-1 row of the released set leaves unsaid (the bench's reading: module docstring
# of bench/moe_accuracy.py) and an independent row states in its own columns: option ->
# what a README reader writes instead (None: leaves the option out)
GROK_UNSAID = {
    "--recompute": None,  # not given: Megatron-Core's none; the CLI's default is selective
    "--etp": None,  # the recipe sets none: ETP = TP; the CLI's default is 1
    "--no-permute-fusion": None,  # NeMo 24.11 predates the fused permutation
}
MOE_UNSAID = {
    "--fused-attention": None,
    "--router-fp32": None,
    "--no-permute-fusion": None,
    "--recompute-modules": None,
}


def default_variants(
    case: Case, unsaid: dict[str, None]
) -> list[tuple[str, list[str], TransformerSpec | None]]:
    """The case with each option in ``unsaid`` left out (the CLI's default), one at a time."""
    out = []
    for flag in unsaid:
        if flag not in case.args:
            continue
        i = case.args.index(flag)
        width = 1 if flag.startswith("--no-") or flag in FLAGS else 2
        args = case.args[:i] + case.args[i + width :]
        out.append((f"{case.set}: {flag} left at the CLI's default", args, case.spec))
    return out


FLAGS = ("--fused-attention", "--router-fp32", "--permute-fusion")  # options without a value


def _grok_with(row: dict[str, str], ex: ExpertLayout) -> float:
    """moe.predict of a Grok-1 row with another ExpertLayout."""
    layers, seq = int(row["layers"]), int(row["seq_len"])
    spec = moe_zoo()["grok-1"].model_copy(
        update={"name": "grok-1-proxy", "layers": layers, "seq_len": seq, **moe.GROK_RECIPE}
    )
    gpus, tp, pp, cp = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp"))
    vp = int(row["virtual_pp"]) if row["virtual_pp"].isdigit() else 1
    layout = Layout(
        tp=tp, pp=pp, dp=gpus // (tp * pp * cp), cp=cp, vp=vp,
        micro_batch=int(row["micro_batch"] or 1), global_batch=int(row["global_batch"]),
        recompute="none", precision="fp8" if "FP8" in row["precision"].upper() else "bf16",
    )  # fmt: skip
    hw = Hardware.from_catalog(load_catalog().with_stack(moe.MODERN_STACK), "h100-sxm")
    ev = evaluate(spec, hw, layout, seq, assumptions=moe.MODERN_ASSUMPTIONS, experts=ex)
    return float(ev.step_time_s)


def independent_args(row: dict[str, str]) -> list[str]:
    """An independent MoE row's options, as its columns read (bench/moe_accuracy.py's
    module docstring maps each column onto the model; this onto the options)."""
    args = [*COMMON, "--model", row["model"], "--gpu", row["gpu"], "--stack", moe.MODERN_STACK]
    for key in ("tp", "pp", "dp", "cp", "ep", "etp"):
        args += [f"--{key}", row[key]]
    if row["pipeline_layout"]:
        args += ["--pipeline-layout", row["pipeline_layout"]]
    else:
        args += ["--vp", row["vp"]]
        if row["embedding_loss_in_split"] == "yes":
            args += ["--embedding-in-split", "--loss-in-split"]
    if row["mtp_layers"]:
        args += ["--mtp-layers", row["mtp_layers"]]
    args += ["--micro-batch", row["micro_batch"], "--global-batch", row["global_batch"]]
    args += ["--seq-len", row["seq_len"], "--precision", row["precision"], "--zero", row["zero"]]
    recompute, modules = moe.recompute_of(row)
    args += ["--recompute", recompute]
    if modules:
        args += ["--recompute-modules", " ".join(sorted(modules))]
    args += ["--dispatcher", row["dispatcher"]]
    if row["ep_overlap"] == "yes":
        args += ["--moe-overlap", "a2a"]
    if row["attention_kernels"] == "fused":
        args.append("--fused-attention")
    if row["router_dtype"] == "fp32":
        args.append("--router-fp32")
    args.append("--permute-fusion" if row["permute_fusion"] == "yes" else "--no-permute-fusion")
    if row["routing"].startswith("capacity-"):
        args += ["--capacity-factor", row["routing"].removeprefix("capacity-")]
    return args


def moe_cases() -> Iterator[Case]:
    """bench/moe_accuracy.py's independent rows, scored (at their fitted dropless load)
    and listed (``scored`` no: their error printed beside the table)."""
    rows = moe.independent_rows()
    scored, skipped = moe.score_independent(rows)
    loads = moe.dropless_loads(rows)
    listed = [(r, p) for r, p, _ in moe.listed_errors(skipped)]
    for row, pred in [(r, p) for r, p, *_ in scored] + listed:
        load = loads.get(row["name"], 1.0)
        knob, neutral = "", None
        if load != 1.0:
            knob = (
                f"expert_load {load:.3f} (FITTED: the mean implied load of the model's other "
                "forced / dropless pairs): no option"
            )

            def neutral(row: dict[str, str] = row) -> float:
                return moe.predict_independent(row, True, 1.0)[0]

        case = Case("moe", row["name"], independent_args(row), pred, None, knob, neutral)
        case.variants = default_variants(case, MOE_UNSAID)
        yield case


def deepseek_cases() -> Iterator[Case]:
    """The released set's DeepSeek-V3 H800 row as bench/deepseek_v3.py prices the report."""
    lay = v3.report_layout()
    args = [*COMMON, "--model", "deepseek-v3", "--gpu", "h800", "--stack", moe.MODERN_STACK]
    args += ["--seq-len", str(v3.SEQ), *layout_args(lay), "--ep", str(v3.REPORT_EXPERTS.ep)]
    args += ["--moe-overlap", "dualpipe", "--dispatcher", "deepep", "--fp8-dispatch"]
    args += ["--recompute-modules", " ".join(sorted(v3.REPORT_EXPERTS.recompute_modules))]
    args += ["--fp8-activations"]
    knob = (
        "REPORT_ASSUMPTIONS: fp32 gradients (grad_bytes 4) and 4 + 2 + 2 optimizer bytes "
        "(the report's section 3.3.3): no option"
    )

    def neutral() -> float:
        return float(v3.predict(lay, a=moe.MODERN_ASSUMPTIONS).step_time_s)

    name = "DeepSeek-V3 report 2048xH800 fp8"
    yield Case("deepseek", name, args, float(v3.predict(lay).step_time_s), None, knob, neutral)


def vtrain_cases() -> Iterator[Case]:
    """calibration/vtrain.py's rows (bench/accuracy.py --set multi, single) on its stack."""
    catalog = load_catalog()
    for name in ("multi", "single"):
        for pred in vtrain.predict(vtrain.read_rows(name), catalog):
            r = pred.row
            lay = Layout(
                tp=r.tp, pp=r.pp, dp=r.dp, micro_batch=r.micro_batch,
                global_batch=r.global_batch, recompute="full", sequence_parallel=False, zero=0,
            )  # fmt: skip
            args = [*COMMON, "--model", "SPEC", "--gpu", vtrain.VTRAIN_GPU]
            args += ["--stack", vtrain.VTRAIN_STACK, "--nic", vtrain.VTRAIN_NIC]
            args += ["--nics-per-node", str(vtrain.VTRAIN_NICS_PER_NODE)]
            args += ["--seq-len", str(r.seq_len), *layout_args(lay)]
            label = (
                f"vtrain {name} h{r.hidden} L{r.layers} s{r.seq_len} tp{r.tp} pp{r.pp} "
                f"dp{r.dp} mb{r.micro_batch} gb{r.global_batch}"
            )
            case = Case("vtrain", label, args, pred.predicted_ms / 1e3, vtrain.row_model(r))
            case.variants = default_variants(case, VTRAIN_UNSAID)
            yield case


# the vTrain set's settings (calibration/vtrain.py) a reader might leave at the CLI's default
VTRAIN_UNSAID = {
    "--recompute": None,
    "--no-sequence-parallel": None,
    "--zero": None,
    "--nics-per-node": None,
}


CASES = {
    "dense": dense_cases,
    "grok": grok_cases,
    "moe": moe_cases,
    "deepseek": deepseek_cases,
    "vtrain": vtrain_cases,
}


def cases(sets: tuple[str, ...] = SETS) -> list[Case]:
    return [c for s in sets for c in CASES[s]()]


# ---------------------------------------------------------------- running the CLI
def with_spec_file(case: Case, folder: Path, index: int) -> list[str]:
    """The case's arguments with SPEC replaced by its spec file's path (written)."""
    if case.spec is None:
        return list(case.args)
    path = folder / f"model-{index}.json"
    path.write_text(json.dumps(spec_doc(case.spec), indent=1), encoding="utf-8")
    return [str(path) if a == "SPEC" else a for a in case.args]


def run_case(case: Case, folder: Path, index: int, runner: CliRunner | None = None) -> Outcome:
    """`designer evaluate` of the case in-process: its step seconds (exit 0, or 1 with the
    layout priced and marked infeasible), or the error line (exit 2 or else)."""
    runner = runner or CliRunner()
    res = runner.invoke(cli, with_spec_file(case, folder, index))
    if res.exit_code in (0, 1) and res.stdout.lstrip().startswith("{"):
        doc = json.loads(res.stdout)
        error = "" if res.exit_code == 0 else infeasible_line(doc)
        return Outcome(case, res.exit_code, float(doc["step_time_s"]), error)
    lines = (res.stderr or res.stdout or repr(res.exception)).strip().splitlines()
    return Outcome(case, res.exit_code, None, lines[-1] if lines else "no output")


def infeasible_line(doc: dict) -> str:
    """Why evaluate marked the layout infeasible (its first violation)."""
    for v in doc.get("violations") or []:
        if isinstance(v, dict):
            return f"infeasible: {v.get('kind', '')} {v.get('detail', '')}".strip()
        return f"infeasible: {v}"
    return "infeasible"


def run_variants(outcomes: list[Outcome]) -> None:
    """Print, per kind of variant, how many rows it changes and the largest changes."""
    found: dict[str, list[tuple[float | None, str, str]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        runner = CliRunner()
        for i, out in enumerate(outcomes):
            c = out.case
            cp = c.args[c.args.index("--cp") + 1] if "--cp" in c.args else "1"
            across = [("CP across servers (--cp-across-servers)", [*c.args, "--cp-across-servers"],
                       c.spec)] if cp != "1" and c.set != "vtrain" else []  # fmt: skip
            for label, args, spec in [*c.variants, *across]:
                alt = Case(c.set, c.name, args, c.bench_s, spec, c.knob, c.neutral)
                got = run_case(alt, Path(tmp), i, runner)
                if c.neutral is not None and got.cli_s is not None:  # against the knob's default
                    got.cli_s *= c.bench_s / c.neutral()
                found.setdefault(label, []).append((got.rel, c.name, got.error))
    print("variants (what a README reader might write instead), against the bench:")
    for label, rows in found.items():
        moved = [r for r in rows if r[0] is None or abs(r[0]) > TOLERANCE]
        print(f"  {label}: {len(rows)} rows, {len(moved)} differ")
        for rel, name, error in sorted(moved, key=lambda r: -abs(r[0] or 1e9))[:5]:
            diff = "refused" if rel is None else f"{100 * rel:+.3f}%"
            print(f"    {diff:>9}  {name[:60]}  {error}")


def infeasible_kinds(rows: list[Outcome]) -> dict[tuple[str, str], int]:
    """(set, reason with its numbers elided) -> rows: the infeasible rows grouped."""
    kinds: dict[tuple[str, str], int] = {}
    for o in rows:
        key = (o.case.set, re.sub(r"\b[0-9][0-9.,]*\b", "N", o.error))
        kinds[key] = kinds.get(key, 0) + 1
    return kinds


def run_all(sets: tuple[str, ...] = SETS) -> list[Outcome]:
    with tempfile.TemporaryDirectory() as tmp:
        runner = CliRunner()
        return [run_case(c, Path(tmp), i, runner) for i, c in enumerate(cases(sets))]


def cause(out: Outcome) -> str:
    """The difference's cause: the bench-only knob when its neutral prediction matches."""
    if out.cli_s is None:
        return ""
    c = out.case
    if c.neutral is not None:
        base = c.neutral()
        if abs(out.cli_s - base) <= TOLERANCE * base:
            return f"bench-only knob: {c.knob}"
        return f"unexplained (bench at the knob's default {base:.4f} s; knob: {c.knob})"
    return "unexplained"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--set", choices=("all", *SETS), default="all")
    parser.add_argument("--every", action="store_true", help="print every row, equal or not")
    parser.add_argument("--show-args", action="store_true", help="print each listed row's args")
    parser.add_argument(
        "--variants", action="store_true", help="also what a README reader might write instead"
    )
    args = parser.parse_args()
    sets = SETS if args.set == "all" else (args.set,)
    outcomes = run_all(sets)
    differing = [o for o in outcomes if o.rel is not None and abs(o.rel) > TOLERANCE]
    refused = [o for o in outcomes if o.cli_s is None]
    infeasible = [o for o in outcomes if o.code == 1 and o.cli_s is not None]
    shown = outcomes if args.every else differing
    print(f"{'set':8} {'row':58} {'bench s':>10} {'cli s':>10} {'diff':>9}  cause")
    unexplained = 0
    for o in shown:
        why = cause(o) if o in differing else ""
        unexplained += why.startswith("unexplained")
        print(f"{o.case.set:8} {o.case.name[:58]:58} {o.case.bench_s:10.4f} {o.cli_s:10.4f} "
              f"{100 * (o.rel or 0):+8.4f}%  {why}")  # fmt: skip
        if args.show_args:
            print("         designer " + " ".join(o.case.args))
    print(f"refused by the CLI: {len(refused)}")
    for o in refused:
        print(f"  {o.case.set:8} {o.case.name[:58]:58} exit {o.code}: {o.error}")
        if args.show_args:
            print("         designer " + " ".join(o.case.args))
    print(f"marked infeasible (exit 1; step_time_s still priced): {len(infeasible)}")
    for (kind, reason), n in sorted(infeasible_kinds(infeasible).items()):
        print(f"  {kind:8} {n:5} x {reason}")
    if args.every:
        for o in infeasible:
            print(f"  {o.case.set:8} {o.case.name[:58]:58} exit {o.code}: {o.error}")
    equal = len(outcomes) - len(differing) - len(refused)
    print(f"summary: {len(outcomes)} rows checked ({', '.join(sets)}), {equal} equal, "
          f"{len(differing)} differing ({unexplained} unexplained), {len(refused)} refused, "
          f"{len(infeasible)} infeasible (exit 1, priced)")  # fmt: skip
    per_set = {s: sum(o.case.set == s for o in outcomes) for s in sets}
    print("  rows per set: " + ", ".join(f"{s} {n}" for s, n in per_set.items()))
    if args.variants:
        run_variants(outcomes)
    return 1 if unexplained or refused else 0


if __name__ == "__main__":
    sys.exit(main())
