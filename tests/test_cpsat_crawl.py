"""The CP-SAT model's bounds do not crawl (solvers/intmath.py ceil_div): a toy MoE question
whose single search took 9.7 units of deterministic time (25 s) while the division
trunc((num + den - 1) / den) moved its bounds one step at a time (14,000 integer
propagations per branch) is proved in a fifth of one unit. Deterministic time, not the
clock, so the test does not depend on how busy the machine is."""

from __future__ import annotations

from designer.question.build import build_scenario
from models.transformer import TransformerSpec
from solvers.cpsat.solve import Resolve, resolve_cpsat
from solvers.exhaustive import solve_exhaustive

TOY_MOE = dict(
    name="toy-398",
    layers=2,
    hidden=64,
    heads=8,
    kv_heads=8,
    ffn_hidden=64,
    gated_mlp=True,
    vocab=11,
    seq_len=8,
    experts=8,
    experts_per_token=2,
    expert_ffn_hidden=8,
)
QUESTION = dict(
    evidence="any",
    tokens=183390678.63927928,
    gpus=("gb300", "h100-sxm"),
    budget=194772.9201542242,
    objective="time",
    pricing="tco",
    lifetime_years=4.0,
    usd_per_kwh=0.1395,
    precision="fp8",
    max_batch_tokens=4194304,
    dp_overlap=0.91,
    failure_scale=10.0,
)


def test_a_crawling_question_is_proved_within_one_unit_of_deterministic_time():
    s = build_scenario(model=TransformerSpec(**TOY_MOE), **QUESTION)
    got = resolve_cpsat(s, Resolve(effort=1.0))
    assert got.status == "optimal", got.message
    want = solve_exhaustive(s).plans[0].objective
    assert abs(got.plans[0].objective - want) <= 1e-9 * want
