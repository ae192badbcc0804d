"""optimize's alternatives (designer/alternatives.py) started before its own solve.

The pairs the evidence rule keeps out are known from the question alone, and preparing
them (enumerating, presolving and bounding each pair's shapes) is most of their cost and
needs no answer; only their solves do (each is capped at the answer's objective). The
answer's solve is one CP-SAT worker, so on Linux a process forked before it prepares the
pairs on another core (alternatives.PairQueue.prepare_until) until the answer arrives,
pickled, then solves them and sends back the JSON keys and the text section
(beyond_evidence), computed from the same pairs and caps as in one process
(tests/test_ahead.py). Elsewhere, or when that process ends without an answer, they are
computed here once the answer is known.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from dataclasses import replace
from typing import Any

from designer.alternatives import (
    PairQueue,
    asked_for,
    beyond_evidence,
    excluded_pairs,
    wide_question,
)
from designer.interrupts import leave_signals_to
from solvers import Scenario, SolveResult
from solvers.gc_pause import without_gc_pauses

Notes = tuple[dict[str, Any], tuple[str, ...]]


class Ahead:
    """The alternatives of optimize's question ``q`` (command-line options, its scenario
    ``scenario``), started now when ``wanted`` (and asked_for says there are any to look
    for): ``result(res)`` gives beyond_evidence's answer for the answer ``res``. Use as a
    context manager: leaving it ends a process whose answer is not wanted."""

    def __init__(
        self, q: dict[str, Any], scenario: Scenario, time_limit_s: float, wanted: bool = True
    ) -> None:
        self.q, self.scenario, self.time_limit_s = q, scenario, time_limit_s
        self.proc: Any = None  # the forked process (multiprocessing's), while it runs
        self.conn: Any = None  # this end of its pipe
        if wanted and asked_for(q, scenario) and sys.platform.startswith("linux"):
            self._fork()

    def _fork(self) -> None:
        ctx = multiprocessing.get_context("fork")
        here, there = ctx.Pipe(duplex=True)
        for stream in (sys.stdout, sys.stderr):  # nothing of ours is written twice
            stream.flush()
        args = (there, self.q, self.scenario, self.time_limit_s, os.getpid())
        self.proc = ctx.Process(target=_child, args=args, daemon=True)
        self.proc.start()
        there.close()
        self.conn = here

    def computing(self, res: SolveResult) -> bool:
        """Whether ``result(res)`` waits for the forked process's work (a process runs, and
        the answer has a plan to look for alternatives to)."""
        return self.proc is not None and res.best is not None

    def result(self, res: SolveResult) -> Notes:
        """beyond_evidence(q, scenario, res): from the forked process when it answers,
        computed here otherwise (no process, or it ended without an answer; an answer
        with no plan has none to look for: its process is ended, not waited for)."""
        if not self.computing(res):
            self.close()
            return beyond_evidence(self.q, self.scenario, res, self.time_limit_s)
        assert self.conn is not None
        try:
            # only the answer's best plan is read there: not the shapes (``candidates``)
            self.conn.send(replace(res, plans=res.plans[:1], candidates=[]))
            kind, value = self.conn.recv()
        except (EOFError, OSError):
            kind, value = "ok", beyond_evidence(self.q, self.scenario, res, self.time_limit_s)
        finally:
            self.close()
        if kind == "error":
            raise value
        return value

    def close(self) -> None:
        """End the process (its answer, if any, is no longer wanted) and wait for it."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.join()
            self.proc = None
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@without_gc_pauses  # (solvers/gc_pause.py) enumerating the pairs' shapes allocates no cycle
def _child(conn, q: dict[str, Any], scenario: Scenario, time_limit_s: float, parent: int):
    """The forked process: prepare the pairs until the answer comes, then send back
    ("ok", beyond_evidence(...)) or ("error", error)."""
    leave_signals_to(parent)
    try:
        wide = wide_question(q)
        queue = PairQueue(wide, excluded_pairs(scenario, wide))
        queue.prepare_until(conn.poll)
        res = conn.recv()
        out: tuple[str, Any] = ("ok", beyond_evidence(q, scenario, res, time_limit_s, queue))
    except EOFError:  # optimize no longer wants them
        return
    except Exception as err:  # raised in optimize's process, as its own would be
        out = ("error", err)
    try:
        conn.send(out)
    except Exception:  # (an answer that does not pickle: optimize computes its own)
        pass
    conn.close()
