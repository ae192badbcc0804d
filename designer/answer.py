"""What optimize, explain and export do with a solve: price the binding constraints or
explain the conflict, write the files asked for, and say why there is no plan."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from designer.errors import Infeasible, UsageError
from designer.output.files import write_atomic
from designer.question.build import evaluate_config, load_question_file
from solvers import Scenario, SolveResult
from solvers.gc_pause import without_gc_pauses

T = TypeVar("T")


def explain(scenario: Scenario, res: SolveResult, time_limit: float) -> tuple[Any, Any]:
    """(binding, conflict): every constraint's slack and price on the best plan, or the
    conflict that rules out every plan (None where neither applies)."""
    # lazy: solvers.explain loads OR-Tools and numpy; commands that never solve do not
    from solvers.explain import binding_constraints, explain_infeasible  # OR-Tools: on use

    if res.best is not None:
        binding = binding_constraints(
            scenario,
            res.best,
            res.candidates or None,
            time_limit_s=time_limit,
            plan_proved=res.status == "optimal",
        )
        return binding, None
    if res.status == "infeasible":
        return None, explain_infeasible(
            scenario, time_limit_s=time_limit, candidates=res.candidates or None
        )
    return None, None


@without_gc_pauses  # both sides pause the collector; paused here, neither resumes it early
def explain_beside(
    scenario: Scenario, res: SolveResult, time_limit: float, work: Callable[[], T]
) -> tuple[T, tuple[Any, Any]]:
    """``work()`` (optimize's alternatives, designer/alternatives.py) and ``explain`` side by
    side: the explanation in a thread of its own while ``work`` runs in this one. Each
    hands CP-SAT searches, which release the GIL, to threads of its own, so one's
    searches run while the other bounds and enumerates shapes in Python; neither reads
    what the other computes (the shapes' caches they share hold values, not choices), so
    the answers are those of running one after the other (tests/test_answer.py)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        why = pool.submit(explain, scenario, res, time_limit)
        try:
            done = work()
        finally:  # (on an interrupt, the explanation's next search raises: solvers/stop.py)
            binding_conflict = why.result()
    return done, binding_conflict


def no_plan(res: SolveResult, conflict) -> Infeasible:
    """The error for a solve without a plan: the conflict and its smallest fixes, or the
    time limit to raise."""
    if res.status == "unknown":
        return Infeasible("no plan found within the time limit; raise --time-limit")
    summary = "no plan satisfies the question"
    if conflict is not None and conflict.constraints:
        summary += f": {' and '.join(conflict.constraints)} conflict"
        if conflict.fixes:
            summary += f" ({'; or '.join(f.change for f in conflict.fixes)})"
    return Infeasible(summary)


def write_file(path: Path | None, text: str, option: str = "--csv") -> None:
    """Write ``text`` to the file an option names (nothing without one), whole or not at
    all: a temporary file in the same folder renamed into place."""
    if path is not None:
        write_atomic(path, text, option)


def saved_plan(path: Path) -> tuple[Scenario, SolveResult]:
    """A saved answer's question and its first plan, re-evaluated (export needs a plan)."""
    scenario, config = load_question_file(path)
    if config is None:
        raise UsageError(
            f"{path}: holds no plan; pass a saved `designer optimize --json` answer with a plan"
        )
    return scenario, evaluate_config(scenario, config)
