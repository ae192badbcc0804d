"""Same answers: the README's buyer questions, this tree against another git revision.

Usage: python bench/same_answers.py [--against REV] [--timeout S] [ARGS ...]

Runs ``designer optimize ARGS --json`` for each question (the four buyer questions of
README "designer optimize" unless ARGS are given, one question per argument, e.g.
"--budget 30M") in this tree and in REV (default HEAD), extracted with ``git archive``
into a temporary folder, and compares the JSON answers with the timing fields
(``wall_s``) left out. A refactor that changes no answer prints "same" for each; the
first difference of each other question is printed. Exits 1 when any answer differs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shlex
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = (
    "--budget 30M",
    "--model llama3-405b --tokens 15T --budget 500M",
    "--model deepseek-v3 --tokens 15T --budget 100M",
    "--model llama3-70b --tokens 15T --deadline 90d",
)
TIMING_KEYS = ("wall_s",)  # seconds the solve took: the one field two runs may differ in


def without_timing(doc: Any) -> Any:
    """``doc`` with every timing field removed, at any depth."""
    if isinstance(doc, dict):
        return {k: without_timing(v) for k, v in doc.items() if not k.endswith(TIMING_KEYS)}
    if isinstance(doc, list):
        return [without_timing(v) for v in doc]
    return doc


def first_difference(a: Any, b: Any, path: str = "") -> str | None:
    """Where two JSON values first differ, with both values; None when equal."""
    if type(a) is not type(b):
        return f"{path or '/'}: {a!r} != {b!r}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}/{key}: only in {'this tree' if key in a else 'the other'}"
            found = first_difference(a[key], b[key], f"{path}/{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            found = first_difference(x, y, f"{path}[{i}]")
            if found:
                return found
        return None
    return None if a == b else f"{path or '/'}: {a!r} != {b!r}"


def extract(rev: str, into: Path) -> Path:
    """The tree of ``rev`` in ``into`` (git archive: the repository is only read)."""
    archive = subprocess.run(
        ["git", "archive", "--format=tar", rev], cwd=ROOT, check=True, capture_output=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def answer(tree: Path, question: str, timeout_s: float) -> Any:
    """``designer optimize QUESTION --json`` in ``tree``, parsed."""
    done = subprocess.run(
        [sys.executable, "-m", "designer", "optimize", *shlex.split(question), "--json"],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{tree}: optimize {question} exited {done.returncode}: {done.stderr}")
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", default="HEAD", help="the git revision to compare with")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per question")
    parser.add_argument("questions", nargs="*", help="questions (default: README's four)")
    args = parser.parse_args()
    differ = 0
    with tempfile.TemporaryDirectory() as tmp:
        other = extract(args.against, Path(tmp))
        for question in args.questions or QUESTIONS:
            mine = without_timing(answer(ROOT, question, args.timeout))
            theirs = without_timing(answer(other, question, args.timeout))
            found = first_difference(mine, theirs)
            differ += found is not None
            print(f"{question}: {'same' if found is None else 'DIFFERENT at ' + found}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
