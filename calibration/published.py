"""Published training runs on modern hardware: the calibration set of the modern stack.

Data: bench/data/published/published_runs.csv, a copy of
../shared/reference/published-runs (170 runs collected by hand from public
sources, one source per row; its README, copied beside it, explains every
convention), and extra_runs.csv beside it (more platforms, same columns, a
source per row). Each row becomes a model, a layout on a catalog GPU and a
measured step time, or a reason why it cannot be evaluated.

Conventions (the README's): the step time is the row's own, else derived as
global batch x sequence / (tokens/s per GPU x GPUs), else from TFLOP/s per GPU
or MFU with the row's FLOP count: model FLOPs (flops.model_flops_per_token)
for NeMo/Megatron-Core rows, hardware FLOPs with the full recomputation for
Narayanan et al.'s SC'21 table (its eq. 3, 96 B s l h^2 (...)). Where a row
does not give the micro-batch, 1 is assumed; the virtual pipeline size, 1;
the recomputation, none (Megatron-Core's default); each assumption is listed
on the run. Networks are the reference systems': DGX H100 / B200 with eight
400 Gb/s NICs, DGX A100 (Selene) with eight 200 Gb/s. Data parallelism is the
distributed optimizer (ZeRO-1), except where the row's optimizer cell names
PyTorch FSDP2 or ZeRO-3 (Megatron-LM's --use-torch-fsdp2: parameters sharded
and gathered per micro-batch, models.step.zero3_microbatch_s).
"""

from __future__ import annotations

import csv
import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from calibration.error_band import error_band_pct
from calibration.vtrain import evidence_record, padded_vocab
from catalog.catalog import Catalog
from catalog.specs import Evidence
from models import flops
from models.evaluate import Hardware, evaluate
from models.layout import Assumptions, Layout
from models.pipeline import EVEN, uneven_splits
from models.transformer import TransformerSpec
from models.zoo import resolve_model

DATA_DIR = Path(__file__).resolve().parent.parent / "bench" / "data" / "published"
FILES = ("published_runs.csv", "extra_runs.csv")
ORGANISATIONS = "organisations.csv"  # source prefix -> the organisation that published it
MODERN_STACK = "megatron-core"

# the row's GPU as printed -> (catalog GPU, NIC, NICs per server): the scale-out NICs the
# server ships with (catalog ServerSpec.nics / nic_counts; tests check each fits)
_HGX = "cx7-400g", 8  # an HGX-style server: eight 400G NICs
_A100 = ("a100-80gb", "cx6-200g", 8)
GPU_NAMES = {
    **dict.fromkeys(("H100-SXM-80GB", "H100"), ("h100-sxm", *_HGX)),
    "H200": ("h200", *_HGX),
    "B200": ("b200", *_HGX),
    "B300": ("b300", "cx8-800g", 8),  # HGX B300: eight ConnectX-8 on the GPU tray
    "GB200": ("gb200", "cx7-400g", 4),
    **dict.fromkeys(("A100-80GB-SXM", "A100-SXM", "A100-80GB", "A100"), _A100),
    "MI300X": ("mi300x", *_HGX),
    "MI325X": ("mi325x", *_HGX),
    "MI355X": ("mi355x", *_HGX),
    "Gaudi3": ("gaudi3", "gaudi3-roce", 6),
}
# frameworks other than Megatron-Core / NeMo (and vendors' ports of Megatron-LM) are other
# software stacks, with no profile yet
OTHER_STACK = re.compile(r"JAX|MaxText|PaXML", re.IGNORECASE)
MEGATRON_FAMILY = re.compile(r"Megatron|NeMo|Primus", re.IGNORECASE)
MODERN_ASSUMPTIONS = Assumptions()


@dataclass(frozen=True)
class PublishedRun:
    """One measured run, ready to evaluate."""

    name: str
    source: str
    gpu: str  # catalog name
    nic: str
    nics_per_node: int
    precision: str
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    measured_step_s: float
    derived: str  # how the measured step time was obtained
    assumed: tuple[str, ...] = ()
    origin: str = "published_runs.csv"  # the data file: the shared calibration set or extra_runs
    organisation: str = ""  # who published it (organisations.csv; models.evidence_rule)

    @property
    def shared(self) -> bool:
        """From the project's shared calibration set (the acceptance targets apply to it)."""
        return self.origin == FILES[0]

    @property
    def group(self) -> str:
        """Platform and precision, e.g. 'h100-sxm fp8'."""
        return f"{self.gpu} {self.precision}"


@dataclass(frozen=True)
class Skipped:
    name: str
    gpu: str
    reason: str
    origin: str = "published_runs.csv"


@dataclass(frozen=True)
class Prediction:
    run: PublishedRun
    predicted_step_s: float
    breakdown: dict[str, float] = field(default_factory=dict)

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return (self.predicted_step_s - self.run.measured_step_s) / self.run.measured_step_s


def _num(value: str) -> float | None:
    """The leading number of a cell ('128 (derived 2048/16)' -> 128), None when empty."""
    m = re.match(r"\s*([-+]?\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?)", value or "")
    return float(m.group(1).replace(",", "")) if m else None


def _int(value: str) -> int | None:
    x = _num(value)
    return None if x is None else int(round(x))


def _precision(text: str) -> str:
    return "fp8" if "FP8" in (text or "").upper() else "bf16"


def _recompute(text: str, gpu: str, assumed: list[str]) -> str:
    """The row's recomputation; when not given, the era's practice: full recomputation
    for the 2021-22 A100 runs (before selective recomputation), none for Megatron-Core."""
    t = (text or "").lower()
    for mode in ("full", "selective", "none"):
        if t.startswith(mode):
            return mode
    if gpu.startswith("a100"):
        assumed.append("recompute not given: full (2021-22 A100 practice)")
        return "full"
    assumed.append("recompute not given: none (Megatron-Core default)")
    return "none"


def _spec(row: dict[str, str], tp: int) -> TransformerSpec | str:
    """The row's model, or the reason it cannot be built."""
    family = row["model_family"]
    layers, hidden, heads = _int(row["layers"]), _int(row["hidden"]), _int(row["heads"])
    if layers is None and "llama2-7b" in row["name"].lower():
        # the row names the model but not its shape: Llama 2 7B's published config
        return resolve_model("llama2-7b").model_copy(update={"seq_len": _int(row["seq_len"])})
    if layers is None or hidden is None or heads is None:
        return "model dimensions not given"
    gated = "SwiGLU" in family or "Llama" in family
    ffn = _int(row["ffn_hidden"])
    if ffn is None:
        ffn = 4 * hidden  # GPT-3 and Nemotron-4 (squared ReLU) use 4h
    vocab = padded_vocab(_int(row["vocab"]) or 51200, tp)
    return TransformerSpec(
        name=re.sub(r"\s+", "-", row["name"].strip())[:60],
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=_int(row["kv_heads"]),
        ffn_hidden=ffn,
        gated_mlp=gated,
        vocab=vocab,
        seq_len=_int(row["seq_len"]) or 2048,
        tied_embeddings="GPT" in family and "GPT-3" not in family,
    )


def _measured_step(
    row: dict[str, str], spec: TransformerSpec, gb: int, seq: int, gpus: int, peak: float | None
) -> tuple[float, str] | None:
    step = _num(row["step_time_s"])
    if step:
        return step, "step time as published"
    tps = _num(row["tokens_per_sec_per_gpu"])
    if tps:
        return gb * seq / (tps * gpus), "global batch x sequence / (tokens/s per GPU x GPUs)"
    tflops = _num(row["achieved_tflops_per_gpu"])
    how = "TFLOP/s per GPU"
    if not tflops:
        mfu = _num(row["mfu_percent"])
        if mfu is None or peak is None:
            return None
        tflops, how = mfu / 100.0 * peak, "MFU x peak"
    per_token = flops.model_flops_per_token(spec, seq)
    if row["source"].startswith("Narayanan"):
        # eq. 3 counts the recomputed forward: 4 passes of the layers, 3 of the logits
        per_token += flops.recompute_flops_per_token(spec, seq, "full")
        how += " (hardware FLOPs, full recomputation)"
    else:
        how += " (model FLOPs)"
    return gb * seq * per_token / (tflops * 1e12 * gpus), how


def _skip_reason(row: dict[str, str], catalog: Catalog) -> str | None:
    """Why a row names no run the designer can evaluate (its model, stack or GPU)."""
    printed_gpu = row["gpu"].strip()
    if "moe" in row["model_family"].lower() or _int(row["ep"]):
        return "mixture of experts: not modelled yet (issue 17)"
    if "FP4" in (row.get("precision") or "").upper():
        return "4-bit training (NVFP4, MXFP4): the model covers BF16 and FP8 only"
    framework = (row.get("framework") or "").strip()
    if OTHER_STACK.search(row["model_family"]) or OTHER_STACK.search(framework):
        return "JAX/XLA stack (MaxText, PaXML): no profile"
    if framework and not MEGATRON_FAMILY.search(framework):
        return f"stack {framework.split('(')[0].strip()}: no profile"
    if printed_gpu not in GPU_NAMES or GPU_NAMES[printed_gpu][0] not in catalog.gpus:
        return f"GPU {printed_gpu!r} is not in the catalog"
    return None


def _degrees(row: dict[str, str], assumed: list[str]) -> dict[str, int] | str:
    """GPUs, TP, PP, CP, DP, micro-batch, VP, global batch and sequence of a row (what it
    leaves out assumed, and noted), or why they cannot be read."""
    gpus, tp, pp = _int(row["num_gpus"]), _int(row["tp"]), _int(row["pp"])
    gb, seq = _int(row["global_batch"]), _int(row["seq_len"])
    if gpus is None or tp is None or pp is None or gb is None or seq is None:
        return "layout not given (GPUs, TP, PP, global batch or seq)"
    cp = _int(row["cp"]) or 1
    printed_dp = _int(row["dp"])
    if gpus % (tp * pp * cp) and printed_dp is None:
        return f"{gpus} GPUs are not a multiple of TP x PP x CP"
    dp = gpus // (tp * pp * cp)
    if printed_dp is not None and printed_dp != dp:
        if _num(row["step_time_s"]):
            # a published step time goes with the GPU count (the row's MFU uses it)
            assumed.append(f"dp {dp} = GPUs / (TP x PP x CP), printed {printed_dp}")
        else:
            # per-GPU rates do not depend on the GPU count: trust the printed layout
            assumed.append(f"GPUs {tp * pp * printed_dp * cp} = printed TP x PP x DP x CP")
            dp, gpus = printed_dp, tp * pp * printed_dp * cp
    mb = _int(row["micro_batch"])
    if mb is None:
        mb = 1
        assumed.append("micro-batch not given: 1")
    vp = _int(row["virtual_pp"])
    if vp is None and pp > 1 and "interleaved pp schedule" in row["notes"].lower():
        return "interleaved pipeline whose virtual size is not given"
    if vp is None:
        vp = 1
        if pp > 1:
            assumed.append("virtual pipeline not given: 1")
    if gb % (mb * dp):
        return f"global batch {gb} is not a multiple of mb x dp"
    return {
        "gpus": gpus,
        "tp": tp,
        "pp": pp,
        "cp": cp,
        "dp": dp,
        "mb": mb,
        "vp": vp,
        "gb": gb,
        "seq": seq,
    }


FULL_SHARD = re.compile(r"FSDP2|ZeRO-3", re.IGNORECASE)
"""An optimizer cell that shards the parameters too (evaluated as ZeRO-3)."""


def _zero(row: dict[str, str]) -> int:
    """The row's ZeRO stage: 3 where its optimizer cell says the parameters are sharded
    (PyTorch FSDP2, ZeRO-3), else the distributed optimizer (1)."""
    return 3 if FULL_SHARD.search(row["zero_or_distributed_optimizer"] or "") else 1


def _split(layers: int, pp: int, vp: int, assumed: list[str]) -> dict[str, Any] | str:
    """The Layout's pipeline-split fields: even, or the first uneven split Megatron-LM runs."""
    first, last, emb, loss = EVEN
    if layers % (pp * vp):
        splits = uneven_splits(layers, pp, vp)
        if not splits:
            return f"no Megatron split of {layers} layers"
        first, last, emb, loss = splits[0]
        assumed.append(f"uneven split as Megatron-LM runs it: {splits[0]}")
    return {
        "first_stage_layers": first or None,
        "last_stage_layers": last or None,
        "embedding_in_split": emb,
        "loss_in_split": loss,
    }


def parse_row(
    row: dict[str, str], catalog: Catalog, origin: str = FILES[0]
) -> PublishedRun | Skipped:
    """A run to evaluate, or why the row cannot be evaluated."""
    name, printed_gpu = row["name"].strip(), row["gpu"].strip()
    assumed: list[str] = []
    reason = _skip_reason(row, catalog)
    d = _degrees(row, assumed) if reason is None else reason
    if isinstance(d, str):
        return Skipped(name, printed_gpu, d)
    gpu, nic, nics = GPU_NAMES[printed_gpu]
    spec = _spec(row, d["tp"])
    if isinstance(spec, str):
        return Skipped(name, printed_gpu, spec)
    split = _split(spec.layers, d["pp"], d["vp"], assumed)
    if isinstance(split, str):
        return Skipped(name, printed_gpu, split)
    precision = _precision(row["precision"])
    layout = Layout(
        tp=d["tp"],
        pp=d["pp"],
        dp=d["dp"],
        cp=d["cp"],
        vp=d["vp"],
        micro_batch=d["mb"],
        global_batch=d["gb"],
        recompute=_recompute(row["recompute"], gpu, assumed),
        zero=_zero(row),
        precision=precision,
        **split,
    )
    seq = d["seq"]
    peak = catalog.gpu(gpu).peak_tflops(precision)
    measured = _measured_step(row, spec, d["gb"], seq, d["gpus"], peak)
    if measured is None:
        return Skipped(name, printed_gpu, "no step time, throughput, TFLOP/s or MFU")
    return PublishedRun(
        name=name,
        source=row["source"],
        gpu=gpu,
        nic=nic,
        nics_per_node=nics,
        precision=precision,
        spec=spec.model_copy(update={"seq_len": seq}),
        layout=layout,
        seq_len=seq,
        measured_step_s=measured[0],
        derived=measured[1],
        assumed=tuple(assumed),
        origin=origin,
        organisation=organisation(row["source"]),
    )


def _organisations() -> list[tuple[str, str]]:
    """(source prefix, organisation) from organisations.csv, longest prefix first."""
    with (DATA_DIR / ORGANISATIONS).open(newline="", encoding="utf-8") as fh:
        pairs = [(r["source_prefix"], r["organisation"]) for r in csv.DictReader(fh)]
    return sorted(pairs, key=lambda p: -len(p[0]))


def organisation(source: str) -> str:
    """The organisation that published a row's source (its longest matching prefix in
    organisations.csv; first-party documents share their vendor's name), or the source
    itself when none matches (tests check that every evaluated run matches one)."""
    for prefix, org in _organisations():
        if source.startswith(prefix):
            return org
    return source


def read_runs(
    catalog: Catalog, files: tuple[str, ...] = FILES
) -> tuple[list[PublishedRun], list[Skipped]]:
    """Every row of the data files as a run or a skipped row with its reason."""
    runs: list[PublishedRun] = []
    skipped: list[Skipped] = []
    for fname in files:
        path = DATA_DIR / fname
        if not path.exists():
            continue
        with path.open(newline="", encoding="utf-8") as fh:
            for row in csv.DictReader(fh):
                out = parse_row(row, catalog, fname)
                if isinstance(out, PublishedRun):
                    runs.append(out)
                else:
                    skipped.append(dataclasses.replace(out, origin=fname))
    return runs, skipped


def _evaluations(runs: list[PublishedRun], catalog: Catalog, stack: str, assumptions: Assumptions):
    """Each run with its evaluation under ``stack`` (the catalog's profiles)."""
    cat = catalog.with_stack(stack)
    for run in runs:
        hw = Hardware.from_catalog(cat, run.gpu, run.nic, run.nics_per_node)
        yield run, evaluate(run.spec, hw, run.layout, run.seq_len, assumptions=assumptions)


def predict(
    runs: list[PublishedRun], catalog: Catalog, stack: str = MODERN_STACK
) -> list[Prediction]:
    """Each run's predicted step time under ``stack`` (the catalog's profiles)."""
    return [
        Prediction(run, ev.step_time_s, ev.breakdown.as_dict())
        for run, ev in _evaluations(runs, catalog, stack, MODERN_ASSUMPTIONS)
    ]


def by_group(preds: list[Prediction]) -> dict[str, list[Prediction]]:
    groups: dict[str, list[Prediction]] = {}
    for p in preds:
        groups.setdefault(p.run.group, []).append(p)
    return groups


def evidence(preds: list[Prediction], sets: str, precisions: tuple[str, ...]) -> Evidence:
    """The evidence record of a profile from its predictions."""
    return evidence_record([100.0 * p.error for p in preds], sets, precisions)


def published_evidence(catalog: Catalog) -> dict[str, Evidence]:
    """Per catalog GPU with published runs, the megatron-core profile's evidence."""
    runs, _ = read_runs(catalog)
    out = {}
    for gpu in sorted({r.gpu for r in runs}):
        preds = predict([r for r in runs if r.gpu == gpu], catalog, MODERN_STACK)
        precisions = sorted({p.run.precision for p in preds})
        counts = ", ".join(f"{sum(p.run.precision == x for p in preds)} {x}" for x in precisions)
        record = evidence(
            preds, f"published runs (bench/data/published): {counts}", tuple(precisions)
        )
        update = {
            "sources": sources_of(preds),
            "bands": bands_of(preds),
            "multi_server_runs": multi_server_of(preds, catalog),
        }
        out[gpu] = record.model_copy(update=update)
    return out


def bands_of(preds: list[Prediction]) -> dict[str, tuple[float, float]]:
    """Per family and precision ('dense fp8'; every published run evaluated here is
    dense), the band of the signed errors that holds about 80% of new runs
    (calibration.error_band), percent (2 dp)."""
    out = {}
    for precision in sorted({p.run.precision for p in preds}):
        errors = [100.0 * p.error for p in preds if p.run.precision == precision]
        lo, hi = error_band_pct(errors)
        out[f"dense {precision}"] = (round(lo, 2), round(hi, 2))
    return out


def sources_of(preds: list[Prediction]) -> dict[str, dict[str, int]]:
    """Per precision, the runs of each organisation (models.evidence_rule)."""
    out: dict[str, dict[str, int]] = {}
    for p in preds:
        orgs = out.setdefault(p.run.precision, {})
        orgs[p.run.organisation] = orgs.get(p.run.organisation, 0) + 1
    return {x: dict(sorted(orgs.items())) for x, orgs in sorted(out.items())}


def multi_server_of(preds: list[Prediction], catalog: Catalog) -> dict[str, int]:
    """Per precision, the runs on more GPUs than one server of theirs holds
    (models.evidence_rule: a measured pair needs one), 0 included."""
    out: dict[str, int] = {}
    for p in preds:
        per_server = catalog.gpu(p.run.gpu).server.gpus_per_server
        beyond = p.run.layout.num_gpus > per_server
        out[p.run.precision] = out.get(p.run.precision, 0) + int(beyond)
    return dict(sorted(out.items()))


def runs_over_memory(
    runs: list[PublishedRun], catalog: Catalog, assumptions: Assumptions = MODERN_ASSUMPTIONS
) -> list[tuple[PublishedRun, float, float]]:
    """The runs whose predicted memory per GPU exceeds the GPU's, with (GB, capacity):
    every run here did run, so each one is a memory-model error."""
    return [
        (run, ev.memory.total, ev.memory.usable)
        for run, ev in _evaluations(runs, catalog, MODERN_STACK, assumptions)
        if ev.memory.total > ev.memory.usable
    ]
