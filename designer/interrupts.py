"""Ctrl-C (SIGINT) and SIGTERM: a command stops cleanly, says so in one line, and exits as a
shell reports a signal, 128 + its number: 130 for Ctrl-C, 143 for SIGTERM (issue 20).

``handled()`` wraps each command (designer.cli): SIGTERM raises ``Terminated``, a
KeyboardInterrupt, so that it unwinds as Ctrl-C does and every ``finally`` runs (a sweep
stops its worker processes and keeps the rows it wrote, an output's temporary file is
removed); a running CP-SAT search stops at once on either signal (solvers/stop.py) instead
of running to its time limit. An interrupted ``optimize`` prints no plan: the contract's
statuses are ``optimal``, ``feasible`` (the time limit hit) and ``infeasible``, and an
incumbent cut short by a signal is none of them; ``--time-limit`` is the way to bound a
search and keep its best plan.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

import click

EXIT_SIGINT = 128 + signal.SIGINT  # 130
EXIT_SIGTERM = 128 + signal.SIGTERM  # 143


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: unwinds like Ctrl-C; the CLI exits 143."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


@contextlib.contextmanager
def handled() -> Iterator[None]:
    """SIGTERM raises Terminated, and both signals stop CP-SAT searches, while inside (the
    main thread only: signal handlers are the main thread's)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # lazy: solvers.stop loads socket (~80 ms), which designer --help does not need
    from solvers.stop import watch

    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        with watch((signal.SIGINT, signal.SIGTERM)):
            yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def leave_signals_to(parent_pid: int) -> None:
    """In a worker process (a sweep's, optimize's explanation): Ctrl-C (sent to the whole
    terminal's process group) is ignored, so the parent decides and stops its workers;
    SIGTERM ends it at once; and on Linux it dies with its parent (PR_SET_PDEATHSIG), so
    a parent killed even by SIGKILL leaves no worker behind, adopted by PID 1."""
    signal.set_wakeup_fd(-1)  # the parent's stop watcher (solvers/stop.py) is not ours
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != parent_pid:  # the parent died before the line above: go too
                os._exit(1)


_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def interrupt_of(err: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``err``, if any: pybind11 (OR-Tools) turns a KeyboardInterrupt
    raised while a module initialises into ImportError("initialization failed") from it."""
    seen: BaseException | None = err
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, KeyboardInterrupt):
            return seen
        visited.add(id(seen))
        seen = seen.__cause__ or seen.__context__
    return None


def describe(err: KeyboardInterrupt) -> tuple[str, int]:
    """The one line (after ``designer: ``) and the exit code of an interrupt."""
    stop = sys.modules.get("solvers.stop")
    term = isinstance(err, Terminated)
    head = "terminated (SIGTERM)" if term else "interrupted (SIGINT)"
    detail = str(err)
    if not detail and stop is not None and stop.stopped():
        detail = (
            "the CP-SAT search was stopped before its end, so no plan is reported "
            "(--time-limit bounds a search and reports the best plan it found)"
        )
    return head + (f": {detail}" if detail else ""), EXIT_SIGTERM if term else EXIT_SIGINT


class Stopped(click.ClickException):
    """Stopped by Ctrl-C: one line on stderr, exit code 130."""

    exit_code = EXIT_SIGINT

    def show(self, file: Any = None) -> None:
        click.echo(f"designer: {self.message}", err=True)


class StoppedByTerm(Stopped):
    """Stopped by SIGTERM: one line on stderr, exit code 143."""

    exit_code = EXIT_SIGTERM


def stopped(err: KeyboardInterrupt) -> Stopped:
    """The error the CLI reports for an interrupt."""
    message, code = describe(err)
    return StoppedByTerm(message) if code == EXIT_SIGTERM else Stopped(message)


def exit_stopped(err: KeyboardInterrupt) -> None:
    """Report an interrupt and exit with its code."""
    report = stopped(err)
    report.show()
    sys.exit(report.exit_code)
