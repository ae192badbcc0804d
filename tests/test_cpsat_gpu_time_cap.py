"""solvers/cpsat_gpu_time_cap.py: the cost's rates per GPU-time unit, once per build."""

from __future__ import annotations

import pytest

import solvers.cpsat_gpu_time_cap as cap
from designer.questions import build_scenario
from solvers.cpsat_model import build
from solvers.space import enumerate_candidates


@pytest.mark.parametrize("pricing", ["tco", "cloud"])
def test_rates_are_computed_once_per_build(monkeypatch, pricing):
    """The goodput's GPU-time cap (solvers/cpsat_goodput.py) and the cost
    (solvers/cpsat_cost.py) both read the rates; the build computes them once and both
    get the same object."""
    s = build_scenario(
        model="llama2-7b",
        gpus=("h100-sxm",),
        tokens=1e11,
        budget=2e6,
        pricing=pricing,
        **({"lifetime_years": 4.0} if pricing == "tco" else {}),
    )
    calls = {"tco": 0, "days": 0}
    real_tco, real_days = cap._tco_rates, cap.gpu_days_per_unit

    def tco_once(ctx):
        calls["tco"] += 1
        return real_tco(ctx)

    def days_once(ctx):  # each computation of the rates reads it once
        calls["days"] += 1
        return real_days(ctx)

    monkeypatch.setattr(cap, "_tco_rates", tco_once)
    monkeypatch.setattr(cap, "gpu_days_per_unit", days_once)
    build(s, enumerate_candidates(s)[:20])
    assert calls == {"tco": 1 if pricing == "tco" else 0, "days": 1}
