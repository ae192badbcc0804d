"""Wall time of explaining infeasible questions, side by side with another revision.

Usage: python bench/explain.py [--against REF] [--repeat N]
       python bench/explain.py --random N [--first F]

Each question below has no plan; ``designer optimize`` proves it and explains the
conflict with its smallest fixes (exit 1). Issue 22's target: under 5 s each.

``--random N``: the questions of ``bench/agreement.py --full`` (seeds F to F+N-1)
that CP-SAT finds infeasible, each run as ``designer optimize OPTIONS`` in a fresh
process and timed (exit 1 expected); prints every wall and CPU time, the medians and
the worst (on a shared machine the CPU time is the steadier figure).
"""

from __future__ import annotations

import argparse
import shlex
import statistics

from agreement import describe, full_question
from side_by_side import ROOT, compare, run_timed

COMMANDS = [
    ["optimize", "--model", "llama3-405b", "--budget", "100K"],
    [
        "optimize",
        "--model",
        "llama3-405b",
        "--budget",
        "100K",
        "--evidence",
        "any",
        "--precision",
        "any",
    ],
]


def infeasible_questions(first: int, count: int) -> list[tuple[int, list[str]]]:
    """(seed, optimize options) of the random questions CP-SAT proves infeasible."""
    from designer.questions import build_scenario
    from solvers.cpsat import solve_cpsat

    found = []
    for seed in range(first, first + count):
        kw, top_k = full_question(seed)
        try:
            scenario = build_scenario(**kw)
        except Exception:  # refused by the CLI (exit 2): not a solver question
            continue
        if solve_cpsat(scenario).status == "infeasible":
            found.append((seed, ["optimize", *shlex.split(describe(kw, top_k))]))
    return found


def main_random(first: int, count: int) -> None:
    times = []
    for seed, args in infeasible_questions(first, count):
        wall, cpu = run_timed(ROOT, args, ok_codes=(1,))
        times.append((wall, cpu, seed))
        print(
            f"{seed:4d} {wall:6.2f} s wall {cpu:6.2f} s CPU  designer {' '.join(args)}", flush=True
        )
    if not times:
        print("no infeasible question among these seeds")
        return
    print(f"\n{len(times)} infeasible questions of {count} (fresh processes):")
    for name, col in (("wall", 0), ("CPU", 1)):
        worst = max(times, key=lambda t: t[col])
        median = statistics.median(t[col] for t in times)
        print(f"  {name}: median {median:.2f} s, worst {worst[col]:.2f} s (seed {worst[2]})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--random", type=int, default=None, help="random questions' seeds")
    parser.add_argument("--first", type=int, default=0)
    args = parser.parse_args()
    if args.random is not None:
        main_random(args.first, args.random)
        return
    compare(COMMANDS, args.against, args.repeat, ok_codes=(1,))


if __name__ == "__main__":
    main()
