"""Same answers at two git revisions: every benchmark question's JSON, timing aside.

Usage: python bench/answers_diff.py [REV_A] [REV_B] [--only TEXT] [--keep DIR] [--jobs N]

Runs a fixed list of questions as a user asks them (``python -m designer ...
--json`` in a fresh process, the default explanation and alternatives on) at two
revisions (default 2914176 against HEAD), each in a temporary git worktree, and
prints the differences outside the timing fields (``solve.wall_s``; a study's
``wall_s`` column), each answer's plans' first (its layout, time, cost or memory, not
their evidence), the first 20 of each, and how many answers' plans are the same. The
questions: bench/solver.py's suite and its MoE suite (as
``optimize`` options; gpt-1t is no zoo name and is left out), bench/moe_optimize.py's
three MoE questions, the README's four buyer questions and a study
(examples/budgets-100.yaml through ``designer sweep``). Exit 1 when any answer
differs. ``--keep DIR`` stores each revision's answers under DIR/<commit> and reuses
them on a later run (a commit's answers do not change); ``--only`` runs the
questions whose name contains TEXT.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from side_by_side import ROOT, worktree

sys.path.insert(0, str(ROOT / "bench"))

from solver import MOE_SUITE, SUITE  # noqa: E402

BASE = "2914176"
TIMING_KEYS = {("solve", "wall_s")}
STUDY_TIMING_COLUMNS = {"wall_s"}


def _suite_args(row: tuple) -> list[str]:
    """bench/solver.py's row as optimize options."""
    _, model, tokens, budget, deadline, objective, pricing = row
    args = ["optimize", "--model", model, "--tokens", f"{tokens:.0f}"]
    if budget is not None:
        args += ["--budget", f"{budget:.0f}"]
    if deadline is not None:
        args += ["--deadline", f"{deadline:g}"]
    return [*args, "--objective", objective, "--pricing", pricing]


def questions() -> dict[str, list[str]]:
    """Name -> designer arguments (``--json`` added when run)."""
    out = {f"suite/{r[0]}": _suite_args(r) for r in SUITE if r[1] != "gpt-1t"}
    out |= {f"moe-suite/{r[0]}": _suite_args(r) for r in MOE_SUITE}
    for model in ("deepseek-v3", "qwen3-30b-a3b", "gpt-oss-120b"):
        out[f"moe-optimize/{model}"] = [
            *("optimize", "--model", model, "--tokens", "15T", "--budget", "100M")
        ]
    out["buyer/30M"] = ["optimize", "--budget", "30M"]
    out["buyer/405b-500M"] = [
        *("optimize", "--model", "llama3-405b", "--tokens", "15T", "--budget", "500M")
    ]
    # (the DeepSeek-V3 buyer question is moe-optimize/deepseek-v3)
    out["buyer/70b-90d"] = ["optimize", "--model", "llama3-70b", "--tokens", "15T"]
    out["buyer/70b-90d"] += ["--deadline", "90d"]
    out["study/budgets-100"] = ["sweep", "examples/budgets-100.yaml"]
    return out


def _answer(tree: Path, name: str, args: list[str]) -> Any:
    """The answer of one question in ``tree``: the JSON document, a study's CSV rows, or
    the exit code and error line when the command fails."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with tempfile.TemporaryDirectory() as tmp:
        if args[0] == "sweep":
            out = Path(tmp) / "study.csv"
            cmd = [*args, "--csv", str(out), "--workers", "1"]
        else:
            cmd = [*args, "--json"]
        done = subprocess.run(
            [sys.executable, "-m", "designer", *cmd],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode not in (0, 1):
            return {"exit": done.returncode, "stderr": done.stderr.strip()[-300:]}
        if args[0] == "sweep":
            rows = list(csv.DictReader(io.StringIO(out.read_text())))
            return [{k: v for k, v in r.items() if k not in STUDY_TIMING_COLUMNS} for r in rows]
        try:
            doc = json.loads(done.stdout)
        except json.JSONDecodeError:
            return {"exit": done.returncode, "stdout": done.stdout[-300:]}
        for path in TIMING_KEYS:
            node = doc
            for key in path[:-1]:
                node = node.get(key, {}) if isinstance(node, dict) else {}
            if isinstance(node, dict):
                node.pop(path[-1], None)
        return {"exit": done.returncode, "answer": doc}


def _commit(rev: str) -> str:
    return subprocess.run(
        ["git", "rev-parse", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()


def answers(rev: str, names: list[str], keep: Path | None, jobs: int) -> dict[str, Any]:
    """Every named question's answer at ``rev`` (from ``keep`` when stored there)."""
    commit = _commit(rev)
    store = keep / commit if keep is not None else None
    have: dict[str, Any] = {}
    if store is not None and (store / "answers.json").exists():
        have = json.loads((store / "answers.json").read_text())
    todo = [n for n in names if n not in have]
    if todo:
        qs = questions()
        with worktree(commit) as tree, ThreadPoolExecutor(max_workers=jobs) as pool:
            for name, ans in zip(
                todo, pool.map(lambda n: _answer(tree, n, qs[n]), todo), strict=True
            ):
                have[name] = ans
                print(f"  {commit[:7]} {name}: done", flush=True)
        if store is not None:  # merged with what another run stored meanwhile
            store.mkdir(parents=True, exist_ok=True)
            path = store / "answers.json"
            stored = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps(stored | have, sort_keys=True))
    return {n: have[n] for n in names}


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two answers differ (JSON paths), values shown."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'B' if k not in a else 'A'}")
            else:
                out += differences(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items against {len(b)}"]
        return [
            d
            for i, (x, y) in enumerate(zip(a, b, strict=True))
            for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} against {b!r}"]


def plan_differences(diffs: list[str]) -> list[str]:
    """The differences in an answer's plans outside their evidence: a plan's layout, time,
    cost or memory (``.answer.plans[i]...``, a study's ``.answer[i]...`` rows), which a
    change of evidence alone never moves. A field one side has and the other lacks (a
    plan column added or removed) is a difference of the answer, not a move of its plan."""
    out = []
    for d in diffs:
        path, _, what = d.partition(": ")
        added = what in ("only in A", "only in B")
        if path.startswith((".answer.plans", ".answer[")) and ".evidence" not in path and not added:
            out.append(d)
    return out


def report(name: str, diffs: list[str], shown: int = 20) -> bool:
    """Print one answer's differences, its plans' first (they decide whether a change moved
    an answer; an answer can differ in many evidence fields before them); True when its
    plans moved."""
    moved = plan_differences(diffs)
    rest = [d for d in diffs if d not in moved]
    head = "same" if not diffs else f"{len(diffs)} differences"
    print(f"{name}: {head}" + (f", {len(moved)} in its plans" if moved else ""))
    for d in (moved + rest)[:shown]:
        print(f"    {d}")
    return bool(moved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("rev_a", nargs="?", default=BASE)
    parser.add_argument("rev_b", nargs="?", default="HEAD")
    parser.add_argument("--only", default=None, help="questions whose name contains this")
    parser.add_argument("--keep", type=Path, default=None, help="store answers per commit")
    parser.add_argument("--jobs", type=int, default=1, help="questions run at once")
    args = parser.parse_args()
    names = [n for n in questions() if args.only is None or args.only in n]
    a = answers(args.rev_a, names, args.keep, args.jobs)
    b = answers(args.rev_b, names, args.keep, args.jobs)
    differ = moved = 0
    for name in names:
        diffs = differences(a[name], b[name])
        moved += report(name, diffs)
        differ += bool(diffs)
    print(f"{len(names) - differ} of {len(names)} answers identical (timing fields aside)")
    print(
        f"{len(names) - moved} of {len(names)} answers' plans the same (evidence and added or "
        "removed fields aside)"
    )
    if differ:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
