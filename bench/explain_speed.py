"""Wall time of explaining infeasible questions, side by side with another revision.

Usage: python bench/explain_speed.py [--against REF] [--repeat N]
       python bench/explain_speed.py --random N [--first F]
       python bench/explain_speed.py --seeds 170,150,173 [--against REF]

Each question below has no plan; ``designer optimize`` proves it and explains the
conflict with its smallest fixes (exit 1). Issue 22's target: under 5 s each.

``--random N``: the questions of ``bench/agreement.py --full`` (seeds F to F+N-1)
that CP-SAT finds infeasible, each run as ``designer optimize OPTIONS`` in a fresh
process and timed (exit 1 expected); prints every wall and CPU time, the medians and
the worst (on a shared machine the CPU time is the steadier figure).

``--seeds S,S,...``: those seeds' questions only (the same generator; a seed whose
question is feasible or refused is skipped). With ``--against REF`` each question
runs in this tree and in REF, alternately, ``--repeat`` times: the median wall and CPU
times side by side and their ratio.
"""

from __future__ import annotations

import argparse
import shlex
import statistics
from collections.abc import Iterable

from agreement import describe, full_question
from side_by_side import ROOT, compare, run_timed, worktree

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


def infeasible_questions(seeds: Iterable[int]) -> list[tuple[int, list[str]]]:
    """(seed, optimize options) of the random questions CP-SAT proves infeasible."""
    from designer.question.build import build_scenario
    from solvers.cpsat.solve import solve_cpsat

    found = []
    for seed in seeds:
        kw, top_k = full_question(seed)
        try:
            scenario = build_scenario(**kw)
        except Exception:  # refused by the CLI (exit 2): not a solver question
            continue
        if solve_cpsat(scenario).status == "infeasible":
            found.append((seed, ["optimize", *shlex.split(describe(kw, top_k))]))
    return found


def main_random(seeds: list[int]) -> None:
    times = []
    for seed, args in infeasible_questions(seeds):
        wall, cpu = run_timed(ROOT, args, ok_codes=(1,))
        times.append((wall, cpu, seed))
        print(
            f"{seed:4d} {wall:6.2f} s wall {cpu:6.2f} s CPU  designer {' '.join(args)}", flush=True
        )
    if not times:
        print("no infeasible question among these seeds")
        return
    print(f"\n{len(times)} infeasible questions of {len(seeds)} (fresh processes):")
    for name, col in (("wall", 0), ("CPU", 1)):
        worst = max(times, key=lambda t: t[col])
        median = statistics.median(t[col] for t in times)
        print(f"  {name}: median {median:.2f} s, worst {worst[col]:.2f} s (seed {worst[2]})")


def main_seeds(seeds: list[int], against: str, repeat: int) -> None:
    """Each seed's question in this tree and in ``against``, alternately (medians, ratio)."""
    questions = infeasible_questions(seeds)
    with worktree(against) as base:
        print(
            f"seed  {'this tree (wall / CPU s)':>26}  {against + ' (wall / CPU s)':>26}  CPU ratio"
        )
        for seed, args in questions:
            runs: dict[str, list[tuple[float, float]]] = {"this": [], "base": []}
            for _ in range(repeat):
                runs["this"].append(run_timed(ROOT, args, ok_codes=(1,)))
                runs["base"].append(run_timed(base, args, ok_codes=(1,)))
            med = {
                k: tuple(statistics.median(t[i] for t in v) for i in (0, 1))
                for k, v in runs.items()
            }
            ratio = med["this"][1] / med["base"][1]
            print(
                f"{seed:4d}  {med['this'][0]:11.2f} / {med['this'][1]:6.2f}     "
                f"{med['base'][0]:11.2f} / {med['base'][1]:6.2f}     {ratio:6.2f}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--random", type=int, default=None, help="random questions' seeds")
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--seeds", default=None, help="comma-separated seeds of --random's set")
    args = parser.parse_args()
    if args.seeds is not None:
        seeds = [int(x) for x in args.seeds.split(",") if x.strip()]
        if args.against:
            main_seeds(seeds, args.against, args.repeat)
        else:
            main_random(seeds)
        return
    if args.random is not None:
        main_random(list(range(args.first, args.first + args.random)))
        return
    compare(COMMANDS, args.against, args.repeat, ok_codes=(1,))


if __name__ == "__main__":
    main()
