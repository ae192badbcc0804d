"""The scenario's walk through one solve (issue 32, acceptance: one ``solve_cpsat`` enters
solvers/screen/bounds.py and solvers/scenario.py at most 3 times each).

An entry is a call into code defined in the file from code outside it (a call from the file
into itself is the same stay), counted with ``sys.setprofile`` on the solving thread during
one ``solve_cpsat`` of a small question with the defaults on (failures, the batch-tokens
model). The counts show how often the stages (space, presolve, prune, the CP-SAT build) ask
the scenario and the bounds again instead of reading what was computed once at the top of
the solve (issue 32 item 2, the prepared question). Today the solve enters the scenario once
(Scenario.prepare) and the bounds twice (bounds.prepare_bounds, then prune's
bounds.screen_bounds: every shape's cheap bound and the head's full ones; the full bounds of
the shapes the incumbents leave are a third call when any are left). WALK_TODAY is a
ratchet: lower it when a change lowers the count, never raise it."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import solvers.scenario
import solvers.screen.bounds
from catalog import load_catalog
from models.transformer import TransformerSpec
from solvers.cpsat.solve import solve_cpsat
from solvers.scenario import Scenario

# entries per file in one solve of walk_question() (python -m pytest tests/test_scenario_walk.py
# -s prints them); issue 32 asks at most WALK_TARGET
# (db91c71: 50 and 164; 38e41eb: 25 and 55; the prepared question and bound terms: 2 and 1)
WALK_TODAY = {"bounds": 2, "scenario": 1}
WALK_TARGET = 3

SPEC = TransformerSpec(name="tiny", layers=4, hidden=1024, heads=16, vocab=32000, seq_len=1024)


def walk_question() -> Scenario:
    """A small question with the library's defaults (failures on): one GPU and NIC type."""
    return Scenario(
        spec=SPEC,
        catalog=load_catalog(),
        tokens=2e10,
        seq_len=SPEC.seq_len,
        gpus=("h100-sxm",),
        nics=("cx7-400g",),
        max_gpus=32,
        budget_usd=1e8,
        micro_batches=(1, 2),
        recompute_modes=("none",),
        max_batch_tokens=2**19,
    )


def entries(files: dict[str, str], run: Callable[[], Any]) -> tuple[Counter, Any]:
    """How often ``run()`` enters each file (path -> label) from outside it, on this thread."""
    paths = {str(Path(p).resolve()): label for p, label in files.items()}
    found: Counter = Counter()

    def profile(frame, event, arg):
        if event != "call":
            return
        label = paths.get(frame.f_code.co_filename)
        back = frame.f_back
        if label and (back is None or back.f_code.co_filename != frame.f_code.co_filename):
            found[label] += 1

    old = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(old)
    return found, result


WALKED = {solvers.screen.bounds.__file__: "bounds", solvers.scenario.__file__: "scenario"}


@pytest.fixture(scope="module")
def walk() -> Counter:
    s = walk_question()
    found, res = entries(WALKED, lambda: solve_cpsat(s))
    assert res.status == "optimal"
    print(f"one solve_cpsat enters: {dict(found)}")
    return found


def test_the_walk_does_not_grow(walk):
    assert all(walk[k] <= WALK_TODAY[k] for k in WALK_TODAY), (
        f"entries {dict(walk)}, at most {WALK_TODAY}"
    )


def test_the_walk_enters_bounds_and_the_scenario_at_most_three_times(walk):
    assert max(walk[k] for k in WALK_TODAY) <= WALK_TARGET, dict(walk)


def test_an_entry_is_a_call_from_outside_the_file(tmp_path):
    """Two calls into a file from here are two entries; its functions calling each other
    add none."""
    path = tmp_path / "walked.py"
    path.write_text("def inner():\n    return 1\n\n\ndef outer():\n    return inner() + inner()\n")
    spec = importlib.util.spec_from_file_location("walked", path)
    assert spec is not None and spec.loader is not None
    walked = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(walked)
    found, got = entries({str(path): "walked"}, lambda: walked.outer() + walked.inner())
    assert got == 3
    assert found == Counter(walked=2)
