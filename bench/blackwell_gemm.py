"""Blackwell's BF16 GEMM efficiency from public GEMM microbenchmarks (issue 30).

Usage: python bench/blackwell_gemm.py [--check]

No BF16 training run on B200, GB200, B300 or GB300 outside the held-out sources was
found, so the Blackwell profile's BF16 GEMM efficiency cannot be fitted on runs. It is
set by a documented ratio instead: where one harness measured the same GEMM on a
Blackwell and a Hopper GPU, the Blackwell share of its dense peak over the Hopper share
(bench/data/published/gemm_microbench.csv, rows with ``use`` = ratio; the largest shape
each source gives). The geometric mean over sources times H100's fitted BF16 GEMM
efficiency is the Blackwell one:

    matmul_efficiency(b200) = matmul_efficiency(h100) x geomean_s(share_blackwell / share_hopper)

The FP8 rows (``use`` = fp8-check) test the method where runs exist: the same ratio
from Azure's cuBLASLt FP8 GEMMs (GB200 against H100) beside the ratio of the two
FP8 GEMM efficiencies fitted on training runs (bench/calibrate.py). ``--check`` exits 1
when the catalog's B200 BF16 efficiency is not the derived one (to 4 decimals).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from catalog import load_catalog  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "published" / "gemm_microbench.csv"
BLACKWELL = ("b200", "gb200", "b300", "gb300")
HOPPER = ("h100-sxm", "h200")
STACK = "megatron-core"


def read_rows(path: Path = DATA) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def share_of_peak(row: dict[str, str]) -> float:
    """Achieved TFLOP/s over the GPU's dense peak in that precision."""
    return float(row["tflops"]) / float(row["peak_tflops"])


def pair_ratios(rows: list[dict[str, str]], use: str) -> dict[str, float]:
    """Per harness pair: the Blackwell GPU's share of peak over the Hopper GPU's."""
    pairs: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row["use"] != use:
            continue
        side = "blackwell" if row["gpu"] in BLACKWELL else "hopper" if row["gpu"] in HOPPER else ""
        if not side or side in pairs[row["pair"]]:
            raise ValueError(
                f"{DATA.name}: pair {row['pair']!r} needs one Blackwell and one Hopper row"
            )
        pairs[row["pair"]][side] = share_of_peak(row)
    ratios = {}
    for name, sides in pairs.items():
        if set(sides) != {"blackwell", "hopper"}:
            raise ValueError(f"{DATA.name}: pair {name!r} lacks a Blackwell or a Hopper row")
        ratios[name] = sides["blackwell"] / sides["hopper"]
    return ratios


def bf16_ratio(rows: list[dict[str, str]]) -> float:
    """Geometric mean over sources of the Blackwell/Hopper BF16 share-of-peak ratio."""
    ratios = pair_ratios(rows, "ratio")
    return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))


def derived_efficiency(rows: list[dict[str, str]] | None = None) -> float:
    """H100's fitted BF16 GEMM efficiency times the microbenchmark ratio, to 4 decimals."""
    h100 = load_catalog().gpu("h100-sxm").stacks[STACK]
    return round(h100.matmul_efficiency * bf16_ratio(rows or read_rows()), 4)


def fitted_fp8_ratio() -> float:
    """Blackwell's FP8 GEMM efficiency fitted on runs over H100's (both bench/calibrate.py)."""
    catalog = load_catalog()
    b200 = catalog.gpu("b200").stacks[STACK].fp8_matmul_efficiency
    h100 = catalog.gpu("h100-sxm").stacks[STACK].fp8_matmul_efficiency
    assert b200 is not None and h100 is not None
    return b200 / h100


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the catalog differs")
    args = ap.parse_args()
    rows = read_rows()
    print("BF16, Blackwell share of peak over Hopper share, same harness:")
    for name, ratio in sorted(pair_ratios(rows, "ratio").items()):
        print(f"  {name:<16} {ratio:.3f}")
    ratio = bf16_ratio(rows)
    derived = derived_efficiency(rows)
    catalog_eff = load_catalog().gpu("b200").stacks[STACK].matmul_efficiency
    print(f"  geometric mean   {ratio:.3f}")
    print(f"Blackwell BF16 matmul_efficiency = H100's x {ratio:.3f} = {derived:.4f}")
    print(f"  catalog (b200, gb200, b300, gb300): {catalog_eff:.4f}")
    print("FP8 check (Azure cuBLASLt, GB200 over H100):")
    for name, r in sorted(pair_ratios(rows, "fp8-check").items()):
        print(f"  {name:<16} {r:.3f}")
    print(
        f"  fitted on training runs (b200 / h100 fp8_matmul_efficiency): {fitted_fp8_ratio():.3f}"
    )
    if args.check and abs(catalog_eff - derived) > 5e-5:
        print(f"catalog b200 matmul_efficiency {catalog_eff} != derived {derived}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
