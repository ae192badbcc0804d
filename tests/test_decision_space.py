"""The decision space covers the virtual-stage counts and micro-batch sizes published
runs use (issue 22): PP 8 x VP 5 for a 40-layer model, Llama 3's 126 layers on 16
stages, and micro-batches above 8 while memory allows."""

from __future__ import annotations

import json

import pytest

from helpers import PRIME, one_line, prime_scenario, run_main
from solvers import space
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.scenario import Scenario

FORTY = PRIME.model_copy(
    update={"name": "forty", "layers": 40, "hidden": 16384, "heads": 128, "ffn_hidden": 53248}
)


def forty_scenario(cat, **kw) -> Scenario:
    base = prime_scenario(cat).with_changes(
        spec=FORTY, budget_usd=1e8, max_batch_tokens=65536, max_gpus=128, micro_batches=None
    )
    return base.with_changes(**kw)


def test_vp_options_cover_megatron_counts_up_to_the_cap():
    assert space.vp_options(40, 8) == [1, 2, 5]
    assert space.vp_options(40, 1) == [1]
    assert space.vp_options(40, 40) == [1]
    assert all(v <= 5 for p in (2, 4) for v in space.vp_options(96, p))
    assert 3 in space.vp_options(96, 2) and 4 in space.vp_options(96, 2)
    # Llama 3 405B's published PP 8 x VP 8 (126 layers + embedding and loss = 128 slots),
    # searched when the question asks for up to 8 virtual stages
    assert 8 not in space.vp_options(126, 8)
    assert 8 in space.vp_options(126, 8, most=8)
    assert max(space.vp_options(126, 7, most=64)) == 18  # one layer a chunk at most


def test_pp8_vp5_for_forty_layers_is_in_the_space_and_chosen(cat):
    s = forty_scenario(cat)
    shapes = {(c.shape.pp, c.shape.vp) for c in space.enumerate_candidates(s)}
    assert (8, 5) in shapes
    got = solve_cpsat(s, time_limit_s=30)
    assert got.status == "optimal"
    lay = got.best.evaluation.layout
    assert (lay.pp, lay.vp) == (8, 5)
    ref = solve_exhaustive(s)
    assert ref.plans[0].objective == pytest.approx(got.plans[0].objective, rel=1e-3)


def test_max_virtual_stages_widens_the_space_and_both_solvers_search_it(cat):
    s = forty_scenario(cat, max_virtual_stages=10)
    shapes = {(c.shape.pp, c.shape.vp) for c in space.enumerate_candidates(s)}
    assert (4, 10) in shapes and (4, 10) not in {
        (c.shape.pp, c.shape.vp) for c in space.enumerate_candidates(forty_scenario(cat))
    }
    got = solve_cpsat(s, time_limit_s=30)
    assert got.status == "optimal"
    # the wider space can only help, and both solvers agree on it
    assert got.plans[0].objective <= solve_cpsat(forty_scenario(cat)).plans[0].objective * (
        1 + 1e-9
    )
    ref = solve_exhaustive(s)
    assert ref.plans[0].objective == pytest.approx(got.plans[0].objective, rel=1e-3)


def test_126_layers_on_16_stages_are_in_the_space(cat):
    spec = FORTY.model_copy(update={"name": "llama3-shape", "layers": 126})
    s = forty_scenario(cat, spec=spec, max_gpus=None, max_batch_tokens=16 * 2**20)
    splits = {
        (c.shape.vp, c.shape.split)
        for c in space.enumerate_candidates(s)
        if c.shape.pp == 16 and "divisibility" not in c.structural
    }
    assert any(split != space.EVEN for _, split in splits)
    assert {vp for vp, _ in splits} >= {1}


def test_micro_batches_grow_while_memory_allows(cat):
    small = PRIME.model_copy(
        update={"name": "small", "layers": 8, "hidden": 1024, "heads": 16, "kv_heads": 16}
    )
    small = small.model_copy(update={"ffn_hidden": 4096, "gated_mlp": False, "seq_len": 1024})
    s = forty_scenario(cat, spec=small, seq_len=1024, max_batch_tokens=None, max_gpus=None)
    cands = space.enumerate_candidates(s)
    sizes = {c.shape.micro_batch for c in cands}
    fit = {c.shape.micro_batch for c in cands if c.dp_min_memory}
    assert max(fit) > 32  # a small model fits micro-batches far beyond the old cap of 32
    # the search stops one size past the largest that fits, or at the sanity cap
    assert max(sizes) == min(2 * max(fit), space.MICRO_BATCH_CAP)
    # the batch ceiling bounds the sizes tried: b <= ceiling / seq_len at DP 1, m 1
    capped = forty_scenario(cat, spec=small, seq_len=1024, max_batch_tokens=64 * 1024)
    assert max(c.shape.micro_batch for c in space.enumerate_candidates(capped)) == 64
    big = forty_scenario(cat, max_gpus=None, max_batch_tokens=None)
    fits = {c.shape.micro_batch for c in space.enumerate_candidates(big) if c.dp_min_memory}
    tried = {c.shape.micro_batch for c in space.enumerate_candidates(big)}
    # the enumeration stops one size past the largest that fits (or at 8, as before)
    assert max(tried) <= max(2 * max(fits), 8)


def test_max_virtual_stages_option_reaches_the_plan_and_the_saved_answer(capsys, tmp_path):
    """`--max-virtual-stages 8` finds Llama 3 405B's faster interleaved layout (README "What
    the space leaves out"), saves the option, and out-of-range values exit 2 naming it."""
    q = ["optimize", "--model", "llama3-405b", "--tokens", "15T", "--budget", "500M"]
    q += ["--gpu", "mi300x", "--json"]
    code, out, _ = run_main(capsys, q)
    default = json.loads(out)
    code8, out8, _ = run_main(capsys, [*q, "--max-virtual-stages", "8"])
    wide = json.loads(out8)
    assert code == code8 == 0
    assert default["plans"][0]["vp"] <= 5 < wide["plans"][0]["vp"] <= 8
    assert wide["plans"][0]["time_to_train_days"] < default["plans"][0]["time_to_train_days"]
    assert wide["question"]["max_virtual_stages"] == 8
    saved = tmp_path / "plan.json"
    saved.write_text(out8)
    code, out, _ = run_main(capsys, ["explain", str(saved), "--json"])
    assert code == 0 and json.loads(out)["question"]["max_virtual_stages"] == 8
    code, _, err = run_main(capsys, ["optimize", "--max-virtual-stages", "0"])
    assert code == 2 and "--max-virtual-stages" in one_line(err)
