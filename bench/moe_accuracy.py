"""Predicted against published step times of mixture-of-experts runs (issue 17 item 7).

Usage: python bench/moe_accuracy.py [--expert-load X]

The calibration set (bench/data/published/published_runs.csv, a copy of the shared
published-runs set; none of its held-out sources is read) has two kinds of MoE rows:

- NVIDIA dgxc-benchmarking v24.11.1 Grok-1 314B proxy runs (8 to 2,048 H100, BF16 and
  FP8): the rows give layers (reduced: 2 to 64), sequence, TP, PP, CP, EP, global batch
  and the step time, not the architecture. The architecture is Grok-1's published one
  (xai-org/grok-1 run.py: 48 x 128 = 6,144 wide, 48 query and 8 KV heads of 128, 8
  experts, top-2, widening factor 8 -> FFN int(8 x 6,144) x 2 / 3 = 32,768 gated
  (model.py ffn_size), 131,072 vocabulary). DP is GPUs / (TP x PP x CP): the printed
  DP column is inconsistent with the GPU count (the set's README says so).
  Recomputation and micro-batch are not given: none and 1 (Megatron-Core's defaults,
  as designer/published.py assumes for the dense rows).
- DeepSeek-V3: the report's 180K H800 GPU-hours per trillion tokens (2,048 H800, PP 16,
  EP 64) and Megatron-LM's 970 TFLOP/s per GB200 with MXFP8: neither gives a step time
  and layout that the model can be compared with (H800 is not in the catalog; the GB200
  row gives no GPU count), so both are listed and not scored.

Each row is evaluated with models.evaluate at its EP and ETP 1 on the megatron-core
profile of the catalog, 8 x 400G NICs per server; the error is (predicted - measured) /
measured, reported per row and as the mean absolute error per precision.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402
from designer.published import MODERN_ASSUMPTIONS, MODERN_STACK  # noqa: E402
from models import Hardware, Layout, TransformerSpec, evaluate  # noqa: E402
from models.expert import ExpertLayout  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published" / "published_runs.csv"
GROK1 = {  # xai-org/grok-1 run.py / model.py (module docstring)
    "hidden": 6144,
    "heads": 48,
    "kv_heads": 8,
    "head_dim": 128,
    "ffn_hidden": 32768,
    "gated_mlp": True,
    "vocab": 131072,
    "experts": 8,
    "experts_per_token": 2,
}


def grok_rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if r["model_family"].startswith("Grok-1")]


def other_moe_rows() -> list[dict[str, str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [
        r for r in rows if "MoE" in r["model_family"] and not r["model_family"].startswith("Grok-1")
    ]


def predict(row: dict[str, str], expert_load: float) -> tuple[float, float, dict]:
    """(predicted, measured step seconds, breakdown) of one Grok-1 proxy row."""
    layers, seq = int(row["layers"]), int(row["seq_len"])
    spec = TransformerSpec(name="grok-1-proxy", layers=layers, seq_len=seq, **GROK1)
    gpus, tp, pp, cp = (int(row[k]) for k in ("num_gpus", "tp", "pp", "cp"))
    vp = int(row["virtual_pp"]) if row["virtual_pp"].isdigit() else 1
    layout = Layout(
        tp=tp,
        pp=pp,
        dp=gpus // (tp * pp * cp),
        cp=cp,
        vp=vp,
        micro_batch=int(row["micro_batch"] or 1),
        global_batch=int(row["global_batch"]),
        recompute="none",
        precision="fp8" if "FP8" in row["precision"].upper() else "bf16",
    )
    cat = load_catalog().with_stack(MODERN_STACK)
    hw = Hardware.from_catalog(cat, "h100-sxm")
    ex = ExpertLayout(ep=int(row["ep"]), etp=1, expert_load=expert_load)
    ev = evaluate(spec, hw, layout, seq, assumptions=MODERN_ASSUMPTIONS, experts=ex)
    return float(ev.step_time_s), float(row["step_time_s"]), ev.breakdown.as_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--expert-load", type=float, default=1.0)
    args = parser.parse_args()
    print(f"Grok-1 proxy rows (dgxc-benchmarking v24.11.1), expert_load {args.expert_load}:")
    print(f"  {'gpus':>5} {'prec':>4} {'L':>3} {'s':>5} {'tp/pp/cp/ep':>12} {'measured':>9} "
          f"{'predicted':>9} {'error':>7}  largest parts")  # fmt: skip
    errors: dict[str, list[float]] = {}
    for row in grok_rows():
        pred, meas, parts = predict(row, args.expert_load)
        err = (pred - meas) / meas
        errors.setdefault(row["precision"].upper(), []).append(abs(err))
        top = sorted(parts.items(), key=lambda kv: -kv[1])[:3]
        where = ", ".join(f"{k} {v:.1f}" for k, v in top)
        layout = f"{row['tp']}/{row['pp']}/{row['cp']}/{row['ep']}"
        print(
            f"  {row['num_gpus']:>5} {row['precision']:>4} {row['layers']:>3} {row['seq_len']:>5} "
            f"{layout:>12} {meas:9.2f} {pred:9.2f} {100 * err:+6.1f}%  {where}"
        )
    for prec, errs in sorted(errors.items()):
        print(
            f"  {prec}: {len(errs)} rows, mean absolute error {100 * statistics.mean(errs):.1f}%, "
            f"worst {100 * max(errs):.1f}%"
        )
    print("Not scored (no step time and layout the model can take):")
    for row in other_moe_rows():
        print(f"  {row['name']}: {row['gpu']}, {row['num_gpus'] or '? GPUs'}")


if __name__ == "__main__":
    main()
