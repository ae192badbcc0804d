"""solvers/gc_pause.py: the cyclic collector paused while a solver runs, resumed on return
(or on an exception), re-entrant, and a caller's own choice kept."""

from __future__ import annotations

import gc

import pytest

from solvers.gc_pause import without_gc_pauses


def test_gc_is_paused_only_while_solving():
    seen = []

    @without_gc_pauses
    def inner():
        seen.append(gc.isenabled())

    @without_gc_pauses
    def outer():
        inner()
        seen.append(gc.isenabled())
        raise ValueError("boom")

    assert gc.isenabled()
    with pytest.raises(ValueError):
        outer()
    assert seen == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        inner()
        assert not gc.isenabled()  # a caller's choice is kept
    finally:
        gc.enable()


def test_the_wrapped_function_keeps_its_name_arguments_and_result():
    @without_gc_pauses
    def add(a: int, b: int = 2) -> int:
        """Adds."""
        return a + b

    assert add(1) == 3 and add(1, b=5) == 6
    assert add.__name__ == "add" and add.__doc__ == "Adds."
    assert add.__wrapped__(4, 4) == 8  # functools.wraps


def test_reference_counting_still_frees_while_paused():
    import weakref

    class Box:
        pass

    @without_gc_pauses
    def make_and_drop():
        box = Box()
        ref = weakref.ref(box)
        del box
        return ref() is None

    assert make_and_drop()  # no cycle: freed at once, collector or not
