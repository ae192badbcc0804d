"""solvers/stop.py: CP-SAT searches that a stop ends (``stop_all``), the watch that turns a
signal's byte on the wakeup socket into a stop, and the state reset when the watch ends.
No signal is sent here (tests/test_interrupts.py sends real ones): the watch's socket is
written directly, as Python's C signal handler writes it."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time

import pytest
from ortools.sat.python import cp_model

from helpers import hard_knapsack
from solvers import stop


def _trivial() -> cp_model.CpModel:
    md = cp_model.CpModel()
    x = md.new_int_var(0, 10, "x")
    md.maximize(x)
    return md


def _wakeup_fd() -> int:
    """The wakeup fd now set (-1: none), left as it was."""
    fd = signal.set_wakeup_fd(-1)
    if fd != -1:
        signal.set_wakeup_fd(fd)
    return fd


def _searching(solver) -> dict:
    """Start ``solver`` on the slow model in a thread; its status lands in the result."""
    result: dict = {}

    def run() -> None:
        try:
            result["status"] = solver.solve(hard_knapsack())
        except KeyboardInterrupt:
            result["status"] = "refused"

    result["thread"] = threading.Thread(target=run, daemon=True)
    result["thread"].start()
    return result


def _slow_solver():
    solver = stop.stoppable_solver()
    solver.parameters.max_time_in_seconds = 60
    solver.parameters.num_workers = 1
    return solver


def test_a_stoppable_solver_solves_and_never_catches_sigint():
    a, b = stop.stoppable_solver(), stop.stoppable_solver()
    assert a is not b and isinstance(a, cp_model.CpSolver)
    assert a.parameters.catch_sigint_signal is False
    assert a.solve(_trivial()) == cp_model.OPTIMAL and a.objective_value == 10
    assert not stop.stopped()


def test_stop_all_ends_a_running_search_and_refuses_new_ones():
    with stop.watch([]):
        run = _searching(_slow_solver())
        time.sleep(0.5)
        start = time.perf_counter()
        stop.stop_all()
        run["thread"].join(timeout=20)
        assert not run["thread"].is_alive()
        assert time.perf_counter() - start < 20  # not the 60 s time limit
        # stopped while searching (FEASIBLE/UNKNOWN), or refused had it not yet begun
        assert run["status"] in (cp_model.FEASIBLE, cp_model.UNKNOWN, "refused")
        assert stop.stopped() == (run["status"] != "refused")
        with pytest.raises(KeyboardInterrupt):
            stop.stoppable_solver().solve(_trivial())
    assert not stop.stopped()  # the watch's end resets both
    assert stop.stoppable_solver().solve(_trivial()) == cp_model.OPTIMAL


def test_the_watch_sets_its_wakeup_fd_and_restores_none():
    assert _wakeup_fd() == -1
    with stop.watch([signal.SIGINT]):
        assert _wakeup_fd() != -1
    assert _wakeup_fd() == -1


def test_a_watched_signals_byte_stops_and_another_does_not():
    with stop.watch([signal.SIGUSR1]):
        fd = _wakeup_fd()
        os.write(fd, bytes([signal.SIGUSR2]))  # not watched: nothing stops
        time.sleep(0.3)
        assert stop.stoppable_solver().solve(_trivial()) == cp_model.OPTIMAL
        os.write(fd, bytes([signal.SIGUSR1]))
        deadline = time.time() + 5
        while time.time() < deadline:
            try:
                stop.stoppable_solver().solve(_trivial())
            except KeyboardInterrupt:
                break
            time.sleep(0.02)
        else:
            pytest.fail("the watched signal's byte stopped nothing")
    assert stop.stoppable_solver().solve(_trivial()) == cp_model.OPTIMAL


def test_another_wakeup_fd_is_left_alone():
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    signal.set_wakeup_fd(writer.fileno())
    try:
        with stop.watch([signal.SIGINT]):
            assert _wakeup_fd() == writer.fileno()  # an event loop's fd is kept
        assert _wakeup_fd() == writer.fileno()
    finally:
        signal.set_wakeup_fd(-1)
        reader.close()
        writer.close()


def test_the_watch_outside_the_main_thread_changes_nothing():
    seen = []

    def run() -> None:
        with stop.watch([signal.SIGINT]):
            seen.append(stop.stoppable_solver().solve(_trivial()))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=10)
    assert seen == [cp_model.OPTIMAL]
    assert _wakeup_fd() == -1
