"""CP-SAT against the exhaustive solver where the batch's extra tokens are largest (run by hand).

Usage: python bench/extra_tokens_agreement.py [--first 0] [--count 300] [--jobs 2]
                                              [--against REV]

Toy models (1 to 4 layers, 8 to 8,192 wide, vocabularies of 8 to 256,000) at sequences of
8 to 16 tokens, 3e10 to 1e12 tokens, one GPU type, capex or cloud, fastest under a budget
or cheapest by a deadline: the critical batch is then a few hundred thousand sequences and
the time per sequence's domain reaches 1e16 units, so the extra tokens' term of
solvers/cpsat/batch_tokens.py (T' x the batch's excess) leaves int64 on most questions.
Each question is a pure function of its seed. For each: whether both solvers agree on
feasibility, and the best plan's objective at 1e-7 relative (the exhaustive solver's is
the float model's optimum). Prints every gap and a summary; exits 1 on any.

``--against REV`` runs the same questions on a git worktree of REV too (the solvers of
REV, this file's questions), side by side, so that a fix shows what it changed.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REL_TOL = 1e-7
GPUS = ("mi355x", "h100-sxm", "b200", "a100-80gb", "mi300x", "gb200")


def question(seed: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The toy spec's fields and build_scenario's other keyword arguments for ``seed``."""
    r = random.Random(seed)
    hidden = r.choice([8, 32, 64, 1024, 8192])
    spec = dict(
        name=f"toy-{seed}",
        layers=r.choice([1, 2, 4]),
        hidden=hidden,
        heads=1,
        kv_heads=1,
        ffn_hidden=r.choice([8, hidden]),
        vocab=r.choice([8, 257, 256000]),
        seq_len=r.choice([8, 9, 16]),
    )
    gpu = r.choice(GPUS)
    if r.random() < 0.5:
        limit: dict[str, Any] = {"budget": 10 ** r.uniform(5, 7.5)}
    else:
        limit = {"deadline": 10 ** r.uniform(-2, 0.5)}
    kw = dict(
        tokens=10 ** r.uniform(10.5, 12),
        gpus=(gpu,),
        pricing=r.choice(["cloud", "capex"]),
        no_failures=r.random() < 0.7,
        evidence="any",
        **limit,
    )
    return spec, kw


def run(seed: int) -> str | None:
    """None when the question is refused; else 'agree' or a line describing the gap."""
    from designer.errors import UsageError  # lazy: imported from the tree under test
    from designer.question.build import build_scenario
    from models.transformer import TransformerSpec
    from solvers import solve_cpsat, solve_exhaustive

    fields, kw = question(seed)
    try:
        s = build_scenario(model=TransformerSpec(**fields), **kw)
    except UsageError:
        return None
    ref, got = solve_exhaustive(s), solve_cpsat(s, time_limit_s=60.0)
    if (ref.status == "infeasible") != (got.status == "infeasible"):
        return f"seed {seed}: status {got.status} against the exhaustive solver's {ref.status}"
    if not ref.plans:
        return "agree"
    have, want = got.plans[0].objective, ref.plans[0].objective
    if abs(have - want) <= REL_TOL * abs(want):
        return "agree"
    shown = {k: v for k, v in fields.items() if k in ("layers", "hidden", "vocab", "seq_len")}
    limit = {k: round(v, 4) for k, v in kw.items() if k in ("budget", "deadline")}
    return (
        f"seed {seed}: CP-SAT {100 * (have / want - 1):+.4f}% ({got.status}) on {shown} "
        f"{kw['gpus'][0]} {kw['pricing']} {limit}"
    )


def sample(first: int, count: int, jobs: int) -> tuple[int, list[str]]:
    """The questions answered (not refused) and the gap lines, in seed order."""
    with ProcessPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(run, range(first, first + count)))
    answered = [r for r in results if r is not None]
    return len(answered), [r for r in answered if r != "agree"]


def _against(rev: str, args) -> str:
    """This file's run on a worktree of ``rev``: its summary and gap lines."""
    sys.path.insert(0, str(BENCH))
    from side_by_side import worktree  # lazy: only with --against

    with worktree(rev) as tree:
        cmd = [sys.executable, str(Path(__file__).resolve()), "--tree", str(tree)]
        cmd += ["--first", str(args.first), "--count", str(args.count), "--jobs", str(args.jobs)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=tree)
    return done.stdout + done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--against", default=None, help="a git revision to run beside")
    parser.add_argument("--tree", default=str(BENCH.parent), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.path.insert(0, args.tree)
    label = "this tree" if args.tree == str(BENCH.parent) else f"tree {args.tree}"
    answered, gaps = sample(args.first, args.count, args.jobs)
    for line in gaps:
        print(line)
    print(f"{label}: {answered} questions answered, {len(gaps)} gaps past {REL_TOL:g} relative")
    if args.against:
        print(f"\n{args.against}:")
        print(_against(args.against, args), end="")
    sys.exit(1 if gaps else 0)


if __name__ == "__main__":
    main()
