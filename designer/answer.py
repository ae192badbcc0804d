"""What optimize, explain and export do with a solve: price the binding constraints or
explain the conflict, write the files asked for, and say why there is no plan."""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from designer.errors import Infeasible, Unanswered, UsageError
from designer.interrupts import leave_signals_to
from designer.output.files import write_atomic
from designer.question.build import load_question_file
from designer.question.given_plan import evaluate_given
from solvers import Scenario, SolveResult
from solvers.gc_pause import without_gc_pauses

T = TypeVar("T")

EXPLAIN_NICENESS = 10
"""How much the explanation's forked process yields the CPU (os.nice) to the work beside
it when that runs in a process of its own, optimize's alternatives (designer/ahead.py;
alone, as on an infeasible question, it keeps optimize's priority): both are mostly
Python, and on a MoE question the alternatives (a dozen pairs prepared and solved) take
longer, so the command ends when they do. Given way to, they end sooner and the
explanation still ends before them (GPT-OSS-120B's $100M question on 2 cores: 4.53 s
against 4.75 s, medians of 7; the DeepSeek-V3, Qwen3-30B-A3B and default questions
unchanged)."""


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
    scenario: Scenario,
    res: SolveResult,
    time_limit: float,
    work: Callable[[], T],
    yield_cpu: bool = False,
) -> tuple[T, tuple[Any, Any]]:
    """``work()`` (optimize's alternatives, designer/alternatives.py) and ``explain`` side by
    side: on Linux the explanation in a forked process of its own (both are mostly
    Python, so threads would share one core through the GIL; the fork starts from this
    process's shapes and caches, and only the explanation comes back, pickled; with
    ``yield_cpu``, when ``work`` runs in a process of its own, it yields the CPU to it:
    EXPLAIN_NICENESS), elsewhere in a thread. Neither reads what the other computes (the
    shapes' caches hold values, not choices), so the answers are those of running one
    after the other (tests/test_answer.py). An error or interrupt in ``work`` ends the
    explanation."""
    if sys.platform.startswith("linux"):
        return _explain_forked(scenario, res, time_limit, work, yield_cpu)
    with ThreadPoolExecutor(max_workers=1) as pool:
        why = pool.submit(explain, scenario, res, time_limit)
        try:
            done = work()
        finally:  # (on an interrupt, the explanation's next search raises: solvers/stop.py)
            binding_conflict = why.result()
    return done, binding_conflict


def _explain_forked(
    scenario: Scenario, res: SolveResult, time_limit: float, work: Callable[[], T], yield_cpu: bool
) -> tuple[T, tuple[Any, Any]]:
    """explain_beside with the explanation in a forked process; computed here instead
    when that process ends without an answer (killed, or its answer would not pickle)."""
    ctx = multiprocessing.get_context("fork")
    answer, send = ctx.Pipe(duplex=False)
    args = (send, scenario, res, time_limit, os.getpid(), yield_cpu)
    proc = ctx.Process(target=_explain_child, args=args, daemon=True)
    proc.start()
    send.close()
    try:
        done = work()
        try:
            kind, value = answer.recv()
        except (EOFError, OSError):
            kind, value = "ok", explain(scenario, res, time_limit)
    except BaseException:  # (an interrupt too) the explanation is no longer wanted
        proc.kill()
        raise
    finally:
        proc.join()
        answer.close()
    if kind == "error":
        raise value
    return done, value


def _explain_child(
    send, scenario: Scenario, res: SolveResult, time_limit: float, parent: int, yield_cpu: bool
):
    """The forked process: ``explain``, sent back as ("ok", answer) or ("error", error)."""
    leave_signals_to(parent)
    if yield_cpu:  # the alternatives beside it set the wall time
        os.nice(EXPLAIN_NICENESS)
    try:
        out: tuple[str, Any] = ("ok", explain(scenario, res, time_limit))
    except Exception as err:  # raised in optimize's process, as a thread's would be
        out = ("error", err)
    try:
        send.send(out)
    except Exception:  # (an answer that does not pickle: optimize explains in its own)
        pass
    send.close()


def no_plan(res: SolveResult, conflict, lead: str = "no plan satisfies the question") -> Infeasible:
    """The error for a solve without a plan: ``lead``, the conflict and its smallest fixes;
    or, when nothing was proved (the time limit ran out first), the time limit to raise."""
    if res.status != "infeasible":
        return Unanswered(
            "no plan found within the time limit, and none proved impossible; raise --time-limit"
        )
    summary = lead
    if conflict is not None and conflict.constraints:
        # several conflicts (solvers.explain.Conflict.cores): each one's, and its fixes
        # with the earlier ones' applied ("then")
        cores = getattr(conflict, "cores", ()) or [conflict]
        said = []
        for i, core in enumerate(cores):
            part = f"{' and '.join(core.constraints)} conflict"
            if core.fixes:
                then = "then " if i else ""
                part += f" ({then}{'; or '.join(f.change for f in core.fixes)})"
            said.append(part)
        summary += ": " + ", and ".join(said)
    return Infeasible(summary)


def write_file(path: Path | None, text: str, option: str = "--csv") -> None:
    """Write ``text`` to the file an option names (nothing without one), whole or not at
    all: a temporary file in the same folder renamed into place."""
    if path is not None:
        write_atomic(path, text, option)


def saved_plan(path: Path) -> tuple[Scenario, SolveResult]:
    """A saved answer's question and its first plan, re-evaluated (export needs a plan)."""
    scenario, given = load_question_file(path)
    if given is None:
        raise UsageError(
            f"{path}: holds no plan; pass a saved `designer optimize --json` answer with a plan"
        )
    return scenario, evaluate_given(scenario, given)
