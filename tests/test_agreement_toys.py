"""Differential test on toy models: CP-SAT against the exhaustive solver where the model's
numbers are smallest (widths of 8 to 64, a handful of layers, vocabularies and sequences of
a few tokens, MoE toys). Launch overheads then dwarf every transfer, which is where the CP-SAT
model's integer domains are most stretched: a 2-layer, 8-wide model once had no CP-SAT plan
while the exhaustive solver found one (the gradient reduction less its overlap window,
solvers/cpsat/time.py). bench/agreement.py's small models start at 256 wide; these start at 8."""

from __future__ import annotations

import math
import random

import pytest

from designer.errors import UsageError
from designer.question.build import build_scenario
from models.transformer import TransformerSpec
from solvers import solve_cpsat, solve_exhaustive

pytestmark = pytest.mark.slow  # (CI runs it)

REL_TOL = 1e-3


def _toy(seed: int) -> tuple[TransformerSpec, dict]:
    r = random.Random(1000 + seed)
    hidden = r.choice([8, 16, 24, 64])
    heads = r.choice([h for h in (1, 2, 4, 8) if hidden % h == 0])
    fields = dict(
        name=f"toy-{seed}",
        layers=r.choice([1, 2, 3, 4]),
        hidden=hidden,
        heads=heads,
        kv_heads=r.choice([k for k in (1, 2, 4, 8) if heads % k == 0]),
        ffn_hidden=r.choice([1, hidden, 4 * hidden]),
        gated_mlp=r.random() < 0.5,
        vocab=r.choice([8, 11, 257]),
        seq_len=r.choice([8, 9, 64, 100]),
    )
    if r.random() < 0.3:
        experts = r.choice([2, 4, 8])
        fields |= dict(experts=experts, experts_per_token=r.randint(1, 2), expert_ffn_hidden=8)
    question = dict(
        tokens=10 ** r.uniform(8, 10),
        budget=10 ** r.uniform(5, 7.5),
        gpus=(r.choice(["h100-sxm", "b200", "a100-80gb"]),),
        evidence="any",
    )
    return TransformerSpec(**fields), question


@pytest.mark.parametrize("seed", range(16))
def test_cpsat_matches_exhaustive_on_toy_models(seed):
    spec, question = _toy(seed)
    try:
        s = build_scenario(model=spec, **question)
    except UsageError:  # the CLI refuses it (exit 2)
        return
    ref = solve_exhaustive(s)
    got = solve_cpsat(s, time_limit_s=30.0)
    what = (spec.model_dump(exclude_defaults=True), question)
    assert got.status in ("optimal", "infeasible"), (got.status, what)
    assert (got.status == "infeasible") == (ref.status == "infeasible"), what
    if ref.plans:
        have, want = got.plans[0].objective, ref.plans[0].objective
        assert math.isclose(have, want, rel_tol=REL_TOL), (have, want, what)
        assert got.plans[0].feasible, got.plans[0].violations


def test_the_toys_reach_plans_and_moe():
    """The sample is not vacuous: most toys have plans, and some are MoE."""
    specs = [_toy(seed)[0] for seed in range(16)]
    assert any(s.is_moe for s in specs) and any(not s.is_moe for s in specs)
    assert min(s.hidden for s in specs) == 8
