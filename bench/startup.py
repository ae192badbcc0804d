"""Start-up time of commands that never solve, side by side with another revision.

Usage: python bench/startup.py [--against REF] [--repeat N]

Runs ``designer --help``, ``designer catalog`` and ``designer models`` N times each
in fresh processes, alternating between this tree and, with ``--against``, a
temporary git worktree of REF (e.g. 225e902, before OR-Tools was imported lazily),
so that both see the same machine load. Prints the median wall time of each and
the ratio. Machines are noisy: compare the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = (["--help"], ["catalog"], ["models"])


def run_once(tree: Path, args: list[str]) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "designer", *args],
        cwd=tree,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"this tree": ROOT}
        if args.against:
            base = Path(tmp) / "base"
            subprocess.run(
                ["git", "worktree", "add", "--detach", str(base), args.against],
                cwd=ROOT,
                check=True,
                capture_output=True,
            )
            trees[args.against] = base
        try:
            times: dict[tuple[str, str], list[float]] = {}
            for _ in range(args.repeat):
                for cmd in COMMANDS:
                    for name, tree in trees.items():
                        times.setdefault((name, " ".join(cmd)), []).append(run_once(tree, cmd))
        finally:
            if args.against:
                subprocess.run(
                    ["git", "worktree", "remove", "--force", str(trees[args.against])],
                    cwd=ROOT,
                    check=False,
                    capture_output=True,
                )
    print(f"median of {args.repeat} fresh processes each (s):")
    for cmd in COMMANDS:
        label = "designer " + " ".join(cmd)
        here = statistics.median(times[("this tree", " ".join(cmd))])
        line = f"{label:20} this tree {here:.3f}"
        if args.against:
            there = statistics.median(times[(args.against, " ".join(cmd))])
            line += f"  {args.against} {there:.3f}  ratio {here / there:.2f}"
        print(line)


if __name__ == "__main__":
    main()
