"""Predicted against measured iteration times on the vTrain calibration set.

Data: bench/data/vtrain (KAIST VIA Research Group, MIT licence): Megatron-LM
GPT runs on A100 servers of 8 GPUs, full activation recomputation, 1F1B, no
gradient bucketing, 800 Gb/s of NICs per server. Vocabulary not given: GPT-2's
50,257 padded to a multiple of 128 x TP, as Megatron does.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from calibration.error_band import error_band_pct
from catalog.catalog import Catalog
from catalog.specs import Evidence
from models.evaluate import Hardware, evaluate
from models.layout import Assumptions, Layout
from models.transformer import TransformerSpec

DATA_DIR = Path(__file__).resolve().parent.parent / "bench" / "data" / "vtrain"
VTRAIN_GPU = "a100-80gb"
VTRAIN_NIC = "cx6-200g"
VTRAIN_NICS_PER_NODE = 4  # 800 Gb/s per server
VTRAIN_ASSUMPTIONS = Assumptions(dp_overlap=0.0)
VTRAIN_STACK = "vtrain-2022"  # the profile fitted on (and judged by) this set
VTRAIN_ORGANISATION = "KAIST VIA Research Group"  # who measured the vTrain set (its README)


@dataclass(frozen=True)
class Row:
    params_b: float | None
    gpus: int
    global_batch: int
    micro_batch: int
    hidden: int
    heads: int
    layers: int
    seq_len: int
    tp: int
    dp: int
    pp: int
    measured_ms: float


@dataclass(frozen=True)
class Prediction:
    row: Row
    predicted_ms: float

    @property
    def error(self) -> float:
        """Signed relative error (predicted - measured) / measured."""
        return (self.predicted_ms - self.row.measured_ms) / self.row.measured_ms


def read_rows(name: str = "multi") -> list[Row]:
    path = DATA_DIR / f"ground_truth_{name}.csv"
    rows = []
    with path.open(newline="", encoding="utf-8") as fh:
        reader = csv.reader(fh)
        next(reader)
        for rec in reader:
            vals = [float(x) for x in rec]
            if name == "single":
                vals = [math.nan, *vals]
            p, g, gb, mb, h, a, L, s, t, d, pp, ms = vals
            rows.append(
                Row(
                    None if math.isnan(p) else p,
                    int(g),
                    int(gb),
                    int(mb),
                    int(h),
                    int(a),
                    int(L),
                    int(s),
                    int(t),
                    int(d),
                    int(pp),
                    ms,
                )
            )
    return rows


def padded_vocab(vocab: int, tp: int) -> int:
    """Megatron-LM pads the vocabulary to a multiple of 128 x TP."""
    return math.ceil(vocab / (128 * tp)) * 128 * tp


def row_model(row: Row) -> TransformerSpec:
    return TransformerSpec(
        name=f"gpt-h{row.hidden}-l{row.layers}",
        layers=row.layers,
        hidden=row.hidden,
        heads=row.heads,
        vocab=padded_vocab(50257, row.tp),
        seq_len=row.seq_len,
        tied_embeddings=True,
    )


def vtrain_hardware(catalog: Catalog) -> Hardware:
    """The A100 servers of the calibration set: 8 GPUs, 4 x 200 Gb/s = 800 Gb/s of NICs."""
    return Hardware.from_catalog(
        catalog.with_stack(VTRAIN_STACK), VTRAIN_GPU, VTRAIN_NIC, VTRAIN_NICS_PER_NODE
    )


def predict(rows: list[Row], catalog: Catalog, hw: Hardware | None = None) -> list[Prediction]:
    hw = hw or vtrain_hardware(catalog)
    out = []
    for row in rows:
        layout = Layout(
            tp=row.tp,
            pp=row.pp,
            dp=row.dp,
            micro_batch=row.micro_batch,
            global_batch=row.global_batch,
            recompute="full",
            sequence_parallel=False,
            zero=0,
        )
        ev = evaluate(row_model(row), hw, layout, assumptions=VTRAIN_ASSUMPTIONS)
        out.append(Prediction(row, ev.step_time_s * 1e3))
    return out


class HasError(Protocol):
    @property
    def error(self) -> float: ...


def mape(preds: Sequence[HasError]) -> float:
    """Mean absolute relative error of predictions (vTrain or published runs)."""
    return sum(abs(p.error) for p in preds) / len(preds)


def evidence_record(errors_pct: list[float], sets: str, precisions: tuple[str, ...]) -> Evidence:
    """The catalog's evidence record of a profile from its signed errors (percent, 2 dp)."""
    lo, hi = error_band_pct(errors_pct)
    return Evidence(
        runs=len(errors_pct),
        mape_pct=round(sum(abs(e) for e in errors_pct) / len(errors_pct), 2),
        worst_pct=round(max(abs(e) for e in errors_pct), 2),
        error_lo_pct=round(lo, 2),
        error_hi_pct=round(hi, 2),
        sets=sets,
        precisions=precisions,
    )


def twin_pairs(rows: list[Row]) -> list[tuple[Row, Row]]:
    """Pairs of runs (lower TP first) that differ only in how a replica splits its work.

    Same model, GPU count, pipeline depth and global batch, and the same
    micro-batch / TP: both then run the same number of micro-batches per step,
    the same GEMM FLOPs per GPU, the same pipeline bubble and the same pipeline
    sends per GPU; the higher-TP twin adds TP traffic. A model that counts work
    and traffic predicts the lower-TP twin no slower than about its twin, so
    the measured ratio of a pair tests the data as much as the model."""
    out = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            lo, hi = (a, b) if a.tp < b.tp else (b, a)
            same = (lo.hidden, lo.layers, lo.gpus, lo.pp, lo.global_batch) == (
                hi.hidden,
                hi.layers,
                hi.gpus,
                hi.pp,
                hi.global_batch,
            )
            if same and lo.tp < hi.tp and lo.micro_batch * hi.tp == hi.micro_batch * lo.tp:
                out.append((lo, hi))
    return out


def vtrain_evidence(catalog: Catalog) -> tuple[str, str, Evidence]:
    """(GPU, stack, evidence) of the vtrain-2022 profile on both vTrain sets."""
    preds = predict(read_rows("multi"), catalog) + predict(read_rows("single"), catalog)
    return (
        VTRAIN_GPU,
        VTRAIN_STACK,
        evidence_record(
            [100.0 * p.error for p in preds],
            "vTrain A100 (bench/data/vtrain): 109 multi-server, 1,440 single-server",
            ("bf16",),
        ).model_copy(update={"sources": {"bf16": {VTRAIN_ORGANISATION: len(preds)}}}),
    )
