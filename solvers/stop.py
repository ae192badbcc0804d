"""Stopping CP-SAT searches when the process is told to stop (Ctrl-C, SIGTERM).

CP-SAT's own Ctrl-C handling (SatParameters.catch_sigint_signal) is switched off: it ended
the search as a time limit would, so an interrupted ``optimize`` went on and reported its
incumbent as ``feasible`` with exit 0, and its handler leaves SIGINT at the default action
after a solve (OR-Tools ``SigintHandler``'s destructor). Without it, Python's handler runs
only when the solve returns (the solve holds the main thread in C++ for up to its time
limit). So:

- every search runs through the solve of ``stoppable_solver()``, which registers the solver while it
  searches (``searching``);
- ``watch(signals)`` (the CLI wraps each command in it: designer/interrupts.py) asks
  Python to write each signal's number to a socket (``signal.set_wakeup_fd``, done in C as
  the signal arrives) and starts a thread that reads it: on one of ``signals`` it stops
  every running search (``CpSolver.stop_search``, safe from another thread: the solve
  releases the GIL) and makes later searches raise KeyboardInterrupt at once, so that
  thread pools (explanations, compare) wind down;
- the signal's Python handler then raises in the main thread as soon as the solve returns
  (KeyboardInterrupt for SIGINT; designer.interrupts.Terminated for SIGTERM).

``stopped()`` says whether a search was stopped so (the CLI's message says so).
"""

from __future__ import annotations

import contextlib
import functools
import signal
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # OR-Tools is loaded on the first solve (designer --help does not pay it)
    from ortools.sat.python import cp_model

_lock = threading.Lock()
_running: set[cp_model.CpSolver] = set()
_stop = threading.Event()  # a stop signal arrived: no search may start
_stopped_one = threading.Event()  # ... and it stopped a running search


def stopped() -> bool:
    """Whether a signal stopped a running CP-SAT search (since ``watch`` began)."""
    return _stopped_one.is_set()


@contextlib.contextmanager
def searching(solver: cp_model.CpSolver) -> Iterator[None]:
    """``solver`` is searching: a stop signal stops it. KeyboardInterrupt if one came."""
    with _lock:
        if _stop.is_set():
            raise KeyboardInterrupt
        _running.add(solver)
    try:
        yield
    finally:
        with _lock:
            _running.discard(solver)


@functools.cache
def _solver_class() -> type:
    from ortools.sat.python import cp_model

    class StoppableSolver(cp_model.CpSolver):
        """A CpSolver that a stop signal stops (``watch``), never catching SIGINT itself."""

        def __init__(self) -> None:
            super().__init__()
            self.parameters.catch_sigint_signal = False

        def solve(self, model: cp_model.CpModel, solution_callback: Any = None) -> Any:
            with searching(self):
                return super().solve(model, solution_callback)

    return StoppableSolver


def stoppable_solver() -> cp_model.CpSolver:
    """A new CpSolver whose searches a stop signal ends (``watch``)."""
    return _solver_class()()


def stop_all() -> None:
    """Stop every running search and refuse new ones; repeated until none runs (a search
    registered a moment before its solve began ignores the first stop)."""
    _stop.set()
    while True:
        with _lock:
            running = list(_running)
        if not running:
            return
        _stopped_one.set()
        for solver in running:
            solver.stop_search()
        time.sleep(0.02)


def _watch(reader: socket.socket, signals: frozenset[int]) -> None:
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return  # the writer closed: the command is over
        if any(b in signals for b in data):
            stop_all()


@contextlib.contextmanager
def watch(signals: Iterable[int]) -> Iterator[None]:
    """While inside, a signal among ``signals`` stops the running searches at once (main
    thread only; elsewhere, and where a wakeup fd is already taken, nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:
        reader.close()
        writer.close()
        yield
        return
    if previous != -1:  # another wakeup fd (an event loop): leave it
        signal.set_wakeup_fd(previous)
        reader.close()
        writer.close()
        yield
        return
    _stop.clear()
    _stopped_one.clear()
    thread = threading.Thread(
        target=_watch, args=(reader, frozenset(int(s) for s in signals)), daemon=True
    )
    thread.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(-1)
        writer.close()
        thread.join(timeout=1.0)
        reader.close()
        _stop.clear()  # searches outside a command (the library, tests) run as before
        _stopped_one.clear()
