"""Time issue 17's DeepSeek-V3 question as a user runs it, explanation included.

Usage: python bench/moe_optimize.py [--against REV] [--repeat N] [--model NAME ...]

``designer optimize --model deepseek-v3 --tokens 15T --budget 100M`` (the default
explanation: every family priced by a relaxed re-solve) and the same with
``--no-explain``, each in fresh processes: the median wall and CPU time (user +
system) in this tree, and with ``--against`` the wall times side by side with another
revision, interleaved (bench/side_by_side.py). Issue 17's target: under 5 s on 2 cores.
``--model`` times other MoE zoo models on the same question (issue 34 names
qwen3-30b-a3b and gpt-oss-120b besides deepseek-v3).
"""

from __future__ import annotations

import argparse
import statistics

from side_by_side import ROOT, compare, run_timed

QUESTION = ["optimize", "--model", "deepseek-v3", "--tokens", "15T", "--budget", "100M"]
COMMANDS = [QUESTION, [*QUESTION, "--no-explain"]]


def commands_for(models: list[str]) -> list[list[str]]:
    """The question and its --no-explain form for each model."""
    out = []
    for model in models:
        q = [*QUESTION[:2], model, *QUESTION[3:]]
        out += [q, [*q, "--no-explain"]]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", default=None, help="a git revision to compare with")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--model", nargs="+", default=["deepseek-v3"], help="MoE zoo models")
    args = parser.parse_args()
    commands = commands_for(args.model)
    for cmd in commands:
        runs = [run_timed(ROOT, cmd) for _ in range(args.repeat)]
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"designer {' '.join(cmd)}: median {wall:.2f} s wall, {cpu:.2f} s CPU")
    if args.against:
        compare(commands, args.against, args.repeat)


if __name__ == "__main__":
    main()
