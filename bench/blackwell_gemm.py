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
FP8 GEMM efficiencies fitted on training runs (bench/calibrate.py).

GB200 is the B200 die at 1,200 W with a datasheet peak 11% higher (2,500 against 2,250
dense BF16). Where one harness measured both (rows with ``use`` = gb200-ratio: Stas
Bekman's Maximum Achievable Matmul FLOPS table), GB200 reaches a smaller share of its
peak than B200, so GB200 gets its own BF16 GEMM efficiency:

    matmul_efficiency(gb200) = matmul_efficiency(b200) x share_gb200 / share_b200

Cross-checks, not fitted: the same harness's FP8 pair (``use`` = gb200-check), and the
clocks: GB200's 2,500 is 148 SMs x 8,192 FLOP/clock at its 2,062 MHz maximum SM clock,
B200's 2,250 is quoted at 1,856 MHz, below its 1,965 MHz maximum (BOOST_CLOCK_MHZ), so
at equal shares of their maximum-clock peaks the ratio is (2,062 / 1,965) x (2,250 /
2,500). B300 and GB300 keep B200's efficiency: the harness has B300 at B200's share
and no GB300 row. ``--check`` exits 1 when the catalog's efficiencies are not the
derived ones (to 4 decimals).
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
GB200_PAIR = (("gb200",), ("b200",))
B200_PROFILE = ("b200", "b300", "gb300")  # hold B200's derived BF16 efficiency
STACK = "megatron-core"
# Device-reported maximum SM clock, MHz (ml-engineering accelerator README, clock table,
# notes 5, nvidia-smi; rows added in commit 774ac14, 2025-09-17; the same clocks in
# ByteDance-Seed/VeOmni pull request 986, 2026-07-28). Used only as a cross-check.
BOOST_CLOCK_MHZ = {"b200": 1965.0, "gb200": 2062.0}


def read_rows(path: Path = DATA) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def share_of_peak(row: dict[str, str]) -> float:
    """Achieved TFLOP/s over the GPU's dense peak in that precision."""
    return float(row["tflops"]) / float(row["peak_tflops"])


def pair_ratios(
    rows: list[dict[str, str]],
    use: str,
    sides: tuple[tuple[str, ...], tuple[str, ...]] = (BLACKWELL, HOPPER),
) -> dict[str, float]:
    """Per harness pair: the share of peak of the GPU in ``sides[0]`` (by default a
    Blackwell one) over that of the GPU in ``sides[1]`` (by default a Hopper one)."""
    top, bottom = sides
    pairs: dict[str, dict[str, float]] = defaultdict(dict)
    for row in rows:
        if row["use"] != use:
            continue
        side = "top" if row["gpu"] in top else "bottom" if row["gpu"] in bottom else ""
        if not side or side in pairs[row["pair"]]:
            raise ValueError(
                f"{DATA.name}: pair {row['pair']!r} needs one row of {top} and one of {bottom}"
            )
        pairs[row["pair"]][side] = share_of_peak(row)
    ratios = {}
    for name, found in pairs.items():
        if set(found) != {"top", "bottom"}:
            raise ValueError(f"{DATA.name}: pair {name!r} lacks a row of {top} or of {bottom}")
        ratios[name] = found["top"] / found["bottom"]
    return ratios


def bf16_ratio(rows: list[dict[str, str]]) -> float:
    """Geometric mean over sources of the Blackwell/Hopper BF16 share-of-peak ratio."""
    ratios = pair_ratios(rows, "ratio")
    return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))


def derived_efficiency(rows: list[dict[str, str]] | None = None) -> float:
    """H100's fitted BF16 GEMM efficiency times the microbenchmark ratio, to 4 decimals."""
    h100 = load_catalog().gpu("h100-sxm").stacks[STACK]
    return round(h100.matmul_efficiency * bf16_ratio(rows or read_rows()), 4)


def gb200_ratio(rows: list[dict[str, str]], use: str = "gb200-ratio") -> float:
    """Geometric mean over harnesses of GB200's share of peak over B200's."""
    ratios = pair_ratios(rows, use, GB200_PAIR)
    return math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))


def derived_gb200_efficiency(rows: list[dict[str, str]] | None = None) -> float:
    """B200's derived BF16 GEMM efficiency times the GB200/B200 share ratio, to 4 decimals."""
    rows = rows or read_rows()
    return round(derived_efficiency(rows) * gb200_ratio(rows), 4)


def clock_ratio() -> float:
    """GB200/B200 share ratio if both reach one share of their maximum-clock peaks: the
    maximum-clock ratio times the datasheet-peak ratio (catalog), a cross-check."""
    catalog = load_catalog()
    peaks = {g: catalog.gpu(g).peak_tflops("bf16") for g in BOOST_CLOCK_MHZ}
    clocks = BOOST_CLOCK_MHZ
    return (clocks["gb200"] / clocks["b200"]) * (peaks["b200"] / peaks["gb200"])


def fitted_fp8_ratio() -> float:
    """Blackwell's FP8 GEMM efficiency fitted on runs over H100's (both bench/calibrate.py)."""
    catalog = load_catalog()
    b200 = catalog.gpu("b200").stacks[STACK].fp8_matmul_efficiency
    h100 = catalog.gpu("h100-sxm").stacks[STACK].fp8_matmul_efficiency
    assert b200 is not None and h100 is not None
    return b200 / h100


def print_b200(rows: list[dict[str, str]]) -> None:
    """The Blackwell/Hopper BF16 derivation and its FP8 check."""
    print("BF16, Blackwell share of peak over Hopper share, same harness:")
    for name, ratio in sorted(pair_ratios(rows, "ratio").items()):
        print(f"  {name:<16} {ratio:.3f}")
    ratio = bf16_ratio(rows)
    print(f"  geometric mean   {ratio:.3f}")
    print(
        f"Blackwell BF16 matmul_efficiency = H100's x {ratio:.3f} = {derived_efficiency(rows):.4f}"
    )
    print("FP8 check (Azure cuBLASLt, GB200 over H100):")
    for name, r in sorted(pair_ratios(rows, "fp8-check").items()):
        print(f"  {name:<16} {r:.3f}")
    print(
        f"  fitted on training runs (b200 / h100 fp8_matmul_efficiency): {fitted_fp8_ratio():.3f}"
    )


def print_gb200(rows: list[dict[str, str]]) -> None:
    """GB200's share of peak over B200's, its efficiency and the two cross-checks."""
    print("BF16, GB200 share of peak over B200 share, same harness:")
    for name, ratio in sorted(pair_ratios(rows, "gb200-ratio", GB200_PAIR).items()):
        print(f"  {name:<16} {ratio:.3f}")
    ratio = gb200_ratio(rows)
    print(
        f"GB200 BF16 matmul_efficiency = B200's {derived_efficiency(rows):.4f} x {ratio:.3f}"
        f" = {derived_gb200_efficiency(rows):.4f}"
    )
    print("  cross-checks (not fitted):")
    for name, r in sorted(pair_ratios(rows, "gb200-check", GB200_PAIR).items()):
        print(f"    {name:<16} {r:.3f}  (FP8, same harness)")
    clocks = BOOST_CLOCK_MHZ
    print(
        f"    clocks           {clock_ratio():.3f}  ({clocks['gb200']:,.0f} / {clocks['b200']:,.0f}"
        " MHz maximum SM clock x 2,250 / 2,500 datasheet peak)"
    )


def catalog_drift(rows: list[dict[str, str]]) -> list[str]:
    """One line per Blackwell GPU whose catalog BF16 efficiency is not the derived one."""
    want = {name: derived_efficiency(rows) for name in B200_PROFILE}
    want["gb200"] = derived_gb200_efficiency(rows)
    catalog = load_catalog()
    lines = []
    for name, derived in want.items():
        have = catalog.gpu(name).stacks[STACK].matmul_efficiency
        print(f"  catalog {name:<6} {have:.4f}  derived {derived:.4f}")
        if abs(have - derived) > 5e-5:
            lines.append(f"catalog {name} matmul_efficiency {have} != derived {derived}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the catalog differs")
    args = ap.parse_args()
    rows = read_rows()
    print_b200(rows)
    print_gb200(rows)
    drift = catalog_drift(rows)
    if args.check and drift:
        print("\n".join(drift))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
