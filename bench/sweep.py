"""Time a 100-scenario study on the local executor.

Usage: python bench/sweep.py [--workers N]
Runs examples/budgets-100.yaml (25 budgets x 4 GPU types) into a temporary CSV and
prints the wall time and the scenarios per second.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from designer import sweep  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    study_path = ROOT / "examples" / "budgets-100.yaml"
    study = sweep.load_study(study_path)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out.csv"
        start = time.perf_counter()
        rows = sweep.run_study(study, str(study_path), out, False, args.workers)
        wall = time.perf_counter() - start
    ok = sum(1 for r in rows if r.get("status") == "optimal")
    print(
        f"{len(rows)} scenarios ({ok} optimal) in {wall:.1f} s with {args.workers} workers: "
        f"{len(rows) / wall:.2f} scenarios/s"
    )


if __name__ == "__main__":
    main()
