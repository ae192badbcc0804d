"""solvers/scenario.py: the design question, its defaults (the CLI's, issue 32 item 4), its
limits and derived values, and which families it enforces (solvers.families.active)."""

from __future__ import annotations

import json
import math
import pickle
from dataclasses import fields
from pathlib import Path

import pytest

from designer.question.build import build_question
from designer.question.fields import Question
from helpers import IDEAL, prime_scenario, run_main
from models.layout import Assumptions
from solvers import FAMILIES, limits
from solvers.cpsat.solve import solve_cpsat
from solvers.families import BY_NAME, active, enforced
from solvers.intmath import INT_LIMIT
from solvers.scenario import (
    DEFAULT_HEADROOM,
    DEFAULT_MAX_BATCH_TOKENS,
    DEFAULT_RESERVED_GB,
    GPU_CAP,
    MAX_BATCH_TOKENS,
    MODEL_CEILING,
    Scenario,
    planning_assumptions,
)

QUESTION = {"model": "llama2-7b", "tokens": "100B", "budget": "1M"}


def cli_question(**changes) -> Scenario:
    """The Scenario the CLI builds for QUESTION (designer optimize's path from a question)."""
    return build_question(Question.model_validate(QUESTION | changes), "q", Path())


def direct(of: Scenario, **changes) -> Scenario:
    """A Scenario built in code with the question's data (model, catalog, hardware, caps,
    limits) and nothing else: every other field is the library's default."""
    return Scenario(
        spec=of.spec,
        catalog=of.catalog,
        tokens=of.tokens,
        seq_len=of.seq_len,
        gpus=of.gpus,
        nics=of.nics,
        gpu_caps=of.gpu_caps,
        unmeasured=of.unmeasured,
        budget_usd=of.budget_usd,
        deadline_days=of.deadline_days,
        objective=of.objective,
        **changes,
    )


def test_scenario_and_the_cli_ask_the_same_question_on_their_defaults():
    """Item 4: built in code or by the CLI from the same inputs, the question is the same,
    every default included (failures on, rented blocks, the memory planning margins)."""
    cli = cli_question()
    code = direct(cli)
    differ = [f.name for f in fields(Scenario) if getattr(cli, f.name) != getattr(code, f.name)]
    assert differ == []
    assert code == cli
    assert not code.no_failures and code.cloud_terms
    assert code.assumptions.runtime_reserved_gb == DEFAULT_RESERVED_GB
    assert code.assumptions.memory_headroom_fraction == DEFAULT_HEADROOM


def test_the_defaults_agree_on_a_deadline_question_too():
    cli = cli_question(budget=None, deadline="90d")
    assert cli.objective == "cost"
    assert direct(cli) == cli


def test_the_ideal_model_is_asked_explicitly():
    """no_failures=True (--no-failures) is the ideal model: no failure model for any GPU;
    with the default a GPU has one."""
    cli = cli_question()
    gpu = cli.gpus[0]
    assert cli.failure_model(gpu) is not None
    assert direct(cli, **IDEAL).failure_model(gpu) is None
    assert cli_question(no_failures=True).failure_model(gpu) is None


def test_planning_assumptions_are_the_seed_rules_with_the_margins():
    a, seed = planning_assumptions(), Assumptions()
    assert a == seed.model_copy(
        update={"runtime_reserved_gb": DEFAULT_RESERVED_GB, "memory_headroom_fraction": 0.05}
    )
    assert planning_assumptions() is not planning_assumptions()  # no shared mutable default


# --- the default batch ceiling, resolved in one place ---------------------------------------


def test_the_batch_limit_is_the_int64_derivation():
    """solvers/scenario.py holds the CP-SAT model's largest batch ceiling (below
    solvers/limits.py, which imports the scenario): sequences x DP degree in int64 with room
    for four terms, rounded down to a power of ten; limits.py hands on the same value."""
    assert MAX_BATCH_TOKENS == 10.0 ** math.floor(math.log10(INT_LIMIT / 4 / GPU_CAP)) == 1e12
    assert limits.MAX_BATCH_TOKENS is MAX_BATCH_TOKENS


def test_the_cli_hands_on_the_sentinel_and_the_scenario_resolves_it(monkeypatch):
    """Without --max-batch-tokens the CLI passes MODEL_CEILING; the Scenario resolves it
    (3 critical batches, clamped to MAX_BATCH_TOKENS) as it does for a question built in
    code, so both ask the same ceiling, also where the clamp binds."""
    built = []
    real_init = Scenario.__init__

    def spy(self, *args, **kwargs):
        built.append(kwargs.get("max_batch_tokens"))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(Scenario, "__init__", spy)
    cli = cli_question()
    assert built == [MODEL_CEILING]
    monkeypatch.setattr(Scenario, "__init__", real_init)
    assert cli.max_batch_tokens == direct(cli).max_batch_tokens == cli.model_ceiling_tokens()
    assert cli.max_batch_tokens not in (DEFAULT_MAX_BATCH_TOKENS, MAX_BATCH_TOKENS)
    # a critical batch past the int64 limit: both clamp it
    monkeypatch.setattr("solvers.scenario.critical_batch_tokens", lambda *a: 1e13)
    assert cli_question().max_batch_tokens == MAX_BATCH_TOKENS
    assert direct(cli).max_batch_tokens == MAX_BATCH_TOKENS


def test_with_the_model_off_both_take_16m_tokens():
    cli = cli_question(batch_tokens_model="off")
    assert cli.max_batch_tokens == DEFAULT_MAX_BATCH_TOKENS
    assert direct(cli, batch_tokens_model="off").max_batch_tokens == DEFAULT_MAX_BATCH_TOKENS


def test_a_named_ceiling_is_kept():
    assert cli_question(max_batch_tokens="8M").max_batch_tokens == 8e6


# --- which families a question enforces (solvers.families) -----------------------------------


def test_enforced_families_follow_limits_and_ignores():
    s = cli_question()
    on = enforced(s)
    assert "budget" in on and "deadline" not in on and "max_gpus" not in on
    assert set(on) <= set(FAMILIES)
    assert all(active(s, f) == (f in on) for f in FAMILIES)
    off = s.with_changes(disabled=frozenset({"budget", "memory"}))
    assert enforced(off) == on - {"budget", "memory"}
    with pytest.raises(KeyError):
        active(s, "no-such-family")


def test_an_unknown_ignored_family_is_refused():
    s = cli_question().with_changes(disabled=frozenset({"no-such-family"}))
    with pytest.raises(ValueError, match="unknown constraint families"):
        enforced(s)


@pytest.mark.parametrize("ignored", [False, True])
def test_nic_counts_follow_the_nic_slots_family(ignored):
    """Scenario.nic_counts reads the nic_slots rule without importing the registry; it
    agrees with solvers.families.active (a field that is never None: on unless ignored)."""
    s = cli_question()
    if ignored:
        s = s.with_changes(disabled=frozenset({"nic_slots"}))
    assert BY_NAME["nic_slots"].field == "extra_nic_slots"
    gpu = s.gpus[0]
    server = s.catalog.gpu(gpu).server
    assert s.nic_counts(gpu) == server.allowed_nic_counts(0, active(s, "nic_slots"))
    assert active(s, "nic_slots") is not ignored


# --- limits and derived values --------------------------------------------------------------


def test_a_limit_read_when_unset_names_its_family():
    s = cli_question()
    assert s.budget == 1e6
    with pytest.raises(ValueError, match="deadline limit is not set"):
        _ = s.deadline
    with pytest.raises(ValueError, match="power limit is not set"):
        _ = s.power_cap_w


def test_gpu_caps_take_the_least_and_scale_up():
    s = cli_question().with_changes(max_gpus=100, gpu_caps=(("h100-sxm", 64), ("b200", 500)))
    assert s.gpu_cap("h100-sxm") == 64
    assert s.gpu_cap("b200") == 100
    assert s.gpu_cap("mi300x") == 100
    scaled = s.with_gpu_caps_scaled(1.1)
    assert scaled.max_gpus == math.ceil(100 * 1.1)  # 111: 100 x 1.1 is 110.00000000000001
    assert dict(scaled.gpu_caps) == {"h100-sxm": math.ceil(64 * 1.1), "b200": 550}
    assert cli_question().with_changes(gpu_caps=()).gpu_cap("h100-sxm") is None


def test_sequences_and_validation():
    s = cli_question()
    assert s.sequences == pytest.approx(s.tokens / s.seq_len)
    with pytest.raises(ValueError, match="objective"):
        s.with_changes(objective="speed")
    with pytest.raises(ValueError, match="pricing"):
        s.with_changes(pricing="free")


def test_derived_values_are_plain_attributes_that_with_changes_recomputes():
    """Issue 32 item 2: the scenario keeps no memo; its derived values (the limits, the
    sequences, the critical batch, the GPU caps) are set once when it is built and then
    read as attributes, and a changed question derives its own."""
    s = cli_question()
    assert not hasattr(s, "memo")
    assert {"budget", "sequences", "critical_batch_seq", "gpu_cap_by_type"} <= set(vars(s))
    changed = s.with_changes(budget_usd=2e6, tokens=2 * s.tokens)
    assert (changed.budget, changed.sequences) == (2e6, 2 * s.sequences)
    assert changed == s.with_changes(budget_usd=2e6, tokens=2 * s.tokens)
    assert enforced(changed) == enforced(s)


def test_a_scenario_pickles_with_its_derived_values():
    """A study's workers receive their questions pickled: the derived values travel too."""
    s = cli_question().with_changes(gpu_caps=(("h100-sxm", 64),))
    back = pickle.loads(pickle.dumps(s))
    assert back == s
    assert (back.budget, back.gpu_cap("h100-sxm"), back.sequences) == (1e6, 64, s.sequences)


def test_a_solve_writes_nothing_on_the_scenario():
    """Every stage of a solve reads the prepared question (Scenario.prepare,
    bounds.prepare_bounds): the scenario's attributes are the same after it."""
    from solvers.cpsat.solve import solve_cpsat  # lazy: the one test here that solves

    s = cli_question().with_changes(
        gpus=("h100-sxm",), micro_batches=(1,), recompute_modes=("none",), max_gpus=64
    )
    before = dict(vars(s))
    assert solve_cpsat(s).status == "optimal"
    assert vars(s) == before


def test_a_gpu_or_nic_named_twice_is_one_choice(cat, capsys):
    """A repeated --nic once counted the NIC's bandwidth twice in the CP-SAT model and made
    every plan infeasible; a repeated --gpu gave its plans twice (compare's rows, optimize's
    --top). The Scenario keeps each name once, in the order given, and the CLI answers as
    with one."""
    s = prime_scenario(cat)
    twice = s.with_changes(gpus=("h100-sxm", "h100-sxm"), nics=("cx7-400g", "cx7-400g"))
    assert (twice.gpus, twice.nics) == (("h100-sxm",), ("cx7-400g",))
    assert solve_cpsat(twice).best.objective == solve_cpsat(s).best.objective
    base = ["--model", "llama2-7b", "--tokens", "100B", "--budget", "2M", "--no-explain"]
    one = [*base, "--gpu", "h100-sxm", "--nic", "cx6-200g"]
    code, out_one, _ = run_main(capsys, ["optimize", *one, "--json"])
    code2, out_two, err = run_main(
        capsys, ["optimize", *one, "--gpu", "h100-sxm", "--nic", "cx6-200g", "--json"]
    )
    assert code == code2 == 0, err
    a, b = json.loads(out_one), json.loads(out_two)
    assert a["plans"] == b["plans"]
    code, out, err = run_main(
        capsys, ["compare", *base, "--gpu", "h100-sxm", "--gpu", "h100-sxm", "--json"]
    )
    assert code == 0, err
    assert [p["gpu"] for p in json.loads(out)["plans"]] == ["h100-sxm"]
