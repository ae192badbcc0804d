"""Each alternative pair's incumbent against the optimum its solve reports (ninth session).

Usage: python bench/incumbents.py [--only TEXT]

optimize's alternatives (designer/alternatives.py) visit the pairs the evidence rule kept
out the least incumbent first, and let a pair not yet solved stand against the others for
``_Pair.reached``: its incumbent (the best plans of its first shapes) raised by prune's
margin and the purchase rule's tolerance. That is valid only if no pair's solve reports
more. For every excluded pair of each question below this solves the pair in full and
prints its incumbent, ``reached``, the reported optimum and their ratio; it exits 1 when a
solve reports more than ``reached`` (a violation). The questions: the README's four buyer
questions (DeepSeek-V3's $100M among them), issue 34's Qwen3-30B-A3B question (not its
GPT-OSS-120B one: that question's A100 pairs take 30-40 s each in full) and two small
Llama 2 7B questions.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from designer import alternatives as alt  # noqa: E402
from designer.question.build import scenario_from_options  # noqa: E402

QUESTIONS = {
    "70b-30M": {"model": "llama2-70b", "tokens": 2e12, "budget": 30e6},
    "405b-500M": {"model": "llama3-405b", "tokens": 15e12, "budget": 500e6},
    "70b-90d": {"model": "llama3-70b", "tokens": 15e12, "deadline": 90.0, "objective": "cost"},
    "deepseek-v3-100M": {"model": "deepseek-v3", "tokens": 15e12, "budget": 100e6},
    "qwen3-30b-a3b-100M": {"model": "qwen3-30b-a3b", "tokens": 15e12, "budget": 100e6},
    "7b-1M": {"model": "llama2-7b", "tokens": 1e12, "budget": 1e6},
    "7b-10M": {"model": "llama2-7b", "tokens": 1e12, "budget": 10e6},
}


def check(name: str, options: dict) -> int:
    """Print each excluded pair's figures; the number of violations."""
    scenario = scenario_from_options(options)
    wide = scenario_from_options({**options, "evidence": "any"})
    bad = 0
    print(name)
    for gpu, precisions in alt.excluded_pairs(scenario, wide).items():
        pair = alt._prepared(wide, gpu, precisions)
        got = pair.solve(600.0)
        opt = got.best.objective if got.best is not None else None
        reached = pair.reached()
        wrong = opt is not None and opt > reached
        bad += wrong
        ratio = "" if opt is None or reached == math.inf else f"{reached / opt:.3f}"
        print(
            f"  {gpu:10s} incumbent {pair.incumbent():<11.6g} reached {reached:<11.6g} "
            f"reported {'-' if opt is None else f'{opt:<11.6g}'} ({got.status}) "
            f"reached/reported {ratio}{'  VIOLATION' if wrong else ''}"
        )
    return bad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="", help="the questions whose name contains TEXT")
    args = parser.parse_args()
    bad = sum(check(n, o) for n, o in QUESTIONS.items() if args.only in n)
    print(f"violations: {bad}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
