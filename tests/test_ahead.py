"""designer/ahead.py: optimize's alternatives prepared in a forked process while its own
solve runs, with the answer one process gives."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from dataclasses import replace

import pytest

from designer import ahead as ahead_mod
from designer import alternatives as alt_mod
from designer import cli as cli_mod
from designer.ahead import Ahead
from designer.alternatives import PairQueue, alternatives, as_dicts, beyond_evidence
from designer.question.build import scenario_from_options
from helpers import run_main
from solvers import solve_cpsat

OPTIONS = {"model": "llama2-7b", "tokens": 1e12, "budget": 1e7}

linux_only = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the alternatives fork on Linux only"
)


@pytest.fixture(scope="module")
def question():
    scenario = scenario_from_options(OPTIONS)
    return scenario, solve_cpsat(scenario)


def test_alternatives_started_before_the_answer_are_the_ones_computed_after(question):
    """Ahead forks before the solve and hands the answer on: the same JSON keys and text
    as beyond_evidence in one process, the process gone afterwards."""
    scenario, res = question
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.proc is not None or not sys.platform.startswith("linux")
        got = ahead.result(res)
    assert got == beyond_evidence(OPTIONS, scenario, res, 30.0)
    assert got[0]["alternatives"], "the question should have alternatives"
    assert not multiprocessing.active_children()


def test_pairs_prepared_before_the_answer_is_known_are_solved_as_before(monkeypatch, question):
    """Every pair prepared ahead (none skipped: no answer to bound them against) gives the
    same (pair, cap) solves and the same list: the skips happen at each pair's visit."""
    scenario, res = question
    wide = scenario_from_options({**OPTIONS, "evidence": "any"})
    plain = alt_mod._Pair.solve

    def asked(queue: PairQueue | None) -> tuple[list, list]:
        calls: list[tuple[str, float | None]] = []

        def recorded(self, time_limit_s, cap=None):
            calls.append((self.gpu, cap))
            return plain(self, time_limit_s, cap)

        with monkeypatch.context() as m:
            m.setattr(alt_mod._Pair, "solve", recorded)
            return calls, as_dicts(alternatives(scenario, wide, res, 30.0, queue))

    queue = PairQueue(wide, alt_mod.excluded_pairs(scenario, wide))
    queue.prepare_until(lambda: False)
    assert not queue.order and len(queue.ready) == len(queue.excluded)
    assert asked(queue) == asked(None)


def test_preparing_stops_between_a_pairs_steps_when_the_answer_comes(monkeypatch, question):
    """prepare_until asks ``stop`` between a pair's steps and while its shapes are
    enumerated: stopped before its shapes are enumerated or during the enumeration, the
    pair stays first in the order, unprepared; stopped after its presolve, it is kept
    without its cheap bounds (its visit computes them). Either way the list is the one
    computed with nothing prepared ahead."""
    from solvers import space

    scenario, res = question
    wide = scenario_from_options({**OPTIONS, "evidence": "any"})
    want = as_dicts(alternatives(scenario, wide, res, 30.0))
    monkeypatch.setattr(space, "_SPACES", {})  # enumerated afresh: the stops are asked
    queue = PairQueue(wide, alt_mod.excluded_pairs(scenario, wide))
    first = queue.order[0]
    groups: list[int] = []  # the stops one enumeration of the first pair asks
    space.enumerate_candidates(
        alt_mod._question(wide, *first), blocked=False, stop=lambda: groups.append(1) or False
    )
    assert len(groups) > 2
    cases = (
        ((False, True), 0),  # before the enumeration
        ((False, False, False, True), 0),  # at the enumeration's second group
        ((False, False, *[False] * len(groups), True), 1),  # after the presolve
    )
    for answers, prepared in cases:
        monkeypatch.setattr(space, "_SPACES", {})
        queue = PairQueue(wide, alt_mod.excluded_pairs(scenario, wide))
        asks = iter(answers)
        queue.prepare_until(lambda asks=asks: next(asks, True))
        assert len(queue.ready) == prepared
        if prepared:
            assert queue.ready[0].gpu == first[0] and queue.ready[0].bounds == []
        else:
            assert queue.order[0] == first
        assert as_dicts(alternatives(scenario, wide, res, 30.0, queue)) == want


@linux_only
def test_the_alternatives_are_computed_in_a_process_of_their_own(monkeypatch, question):
    """The forked process computes them; an error there is raised here."""
    scenario, res = question
    here = os.getpid()
    monkeypatch.setattr(ahead_mod, "beyond_evidence", lambda q, s, r, t, queue: os.getpid())
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.result(res) != here

    def failing(*args):
        raise ValueError("alternatives failed")

    monkeypatch.setattr(ahead_mod, "beyond_evidence", failing)
    with (
        pytest.raises(ValueError, match="alternatives failed"),
        Ahead(OPTIONS, scenario, 30.0) as a,
    ):
        a.result(res)
    assert not multiprocessing.active_children()


@linux_only
def test_a_process_that_dies_leaves_the_alternatives_to_be_computed_here(monkeypatch, question):
    scenario, res = question
    here = os.getpid()

    def dies_there(q, s, r, t, queue=None):
        if os.getpid() != here:
            os._exit(3)
        return "computed here"

    monkeypatch.setattr(ahead_mod, "beyond_evidence", dies_there)
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.result(res) == "computed here"


@linux_only
def test_leaving_without_asking_ends_the_process_at_once(monkeypatch, question):
    """An answer that needs no alternatives (a launch emitted, an error, an interrupt):
    the process is ended, not waited for."""
    scenario, _ = question
    monkeypatch.setattr(PairQueue, "prepare_until", lambda self, stop: time.sleep(60))
    start = time.perf_counter()
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.proc is not None
    assert time.perf_counter() - start < 30
    assert not multiprocessing.active_children()


@pytest.mark.parametrize(
    "options, wanted",
    [
        ({**OPTIONS, "gpus": ("h100-sxm",)}, True),  # GPUs named: nothing kept out
        ({**OPTIONS, "evidence": "any"}, True),  # every pair searched already
        (OPTIONS, False),  # a launch asked for: no alternatives printed
    ],
)
def test_no_process_when_no_alternatives_are_looked_for(options, wanted):
    scenario = scenario_from_options(options)
    with Ahead(options, scenario, 30.0, wanted=wanted) as ahead:
        assert ahead.proc is None
        assert not ahead.computing(solve_cpsat(scenario))  # the explanation need not yield


@linux_only
def test_the_process_computes_only_for_an_answer_with_a_plan(question):
    """``computing``: the forked process works on for an answer with a plan (optimize's
    explanation then yields it the CPU), not for one without."""
    scenario, res = question
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.computing(res) and not ahead.computing(replace(res, plans=[]))


@linux_only
def test_an_answer_with_no_plan_ends_the_process_without_waiting(monkeypatch, question):
    """Nothing fits: no alternatives to look for, and no wait for the pair the process is
    preparing."""
    scenario, res = question
    monkeypatch.setattr(PairQueue, "prepare_until", lambda self, stop: time.sleep(60))
    start = time.perf_counter()
    with Ahead(OPTIONS, scenario, 30.0) as ahead:
        assert ahead.result(replace(res, plans=[])) == ({"alternatives": []}, ())
    assert time.perf_counter() - start < 30
    assert not multiprocessing.active_children()


@linux_only
@pytest.mark.parametrize(("extra", "yields"), [([], True), (["--gpu", "h100-sxm"], False)])
def test_optimize_s_explanation_yields_only_to_alternatives_being_computed(
    monkeypatch, capsys, extra, yields
):
    """optimize asks its explanation to yield the CPU only while the alternatives are
    computed in their own process; with a GPU named there are none to compute."""
    seen: list[bool] = []
    plain = cli_mod.explain_beside

    def recorded(*args, yield_cpu=False):
        seen.append(yield_cpu)
        return plain(*args, yield_cpu=yield_cpu)

    monkeypatch.setattr(cli_mod, "explain_beside", recorded)
    args = ["optimize", "--model", "llama2-7b", "--tokens", "1T", "--budget", "10M", *extra]
    code, _, _ = run_main(capsys, args)
    assert code == 0 and seen == [yields]
