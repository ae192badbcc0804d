"""Pausing Python's cyclic garbage collector while a solver runs.

A solve allocates tens of thousands of small objects (shapes, candidates,
tuples) that stay alive until it returns, and none of them form reference
cycles; the collector's full passes over them cost a third of a large
question's solve time (bench/solver.py) and free nothing. Reference counting
still frees everything as usual; the collector resumes on return.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def without_gc_pauses(fn: Callable[P, R]) -> Callable[P, R]:
    """Run ``fn`` with the cyclic collector paused (re-entrant: nested calls keep it paused)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return wrapper
