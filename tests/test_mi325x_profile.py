"""MI325X's own FP8 GEMM efficiency (issue 30, item 1): MI300X's megatron-core profile
but for ``fp8_matmul_efficiency``, fitted on MI325X's published FP8 runs by
bench/calibrate.py (--set published --gpu mi325x --fields fp8_matmul_efficiency)."""

from __future__ import annotations

import dataclasses

import pytest

from calibration import published as pub
from calibration.vtrain import mape
from catalog.catalog import Catalog
from helpers import load_bench
from models.evaluate import Hardware, evaluate
from models.layout import Layout
from models.step import gemm_rates, stage_work_per_microbatch
from models.zoo import zoo

calibrate = load_bench("calibrate.py", "bench_calibrate_for_mi325x")
FIELDS = ("fp8_matmul_efficiency",)
ITERATIONS = 100  # the note's command


def _profile(cat: Catalog, gpu: str):
    return cat.gpu(gpu).stacks["megatron-core"]


def _with_mi300x_profile(cat: Catalog) -> Catalog:
    """``cat`` with MI325X on MI300X's megatron-core profile (as before the fit)."""
    gpu = cat.gpu("mi325x").with_calibration(_profile(cat, "mi300x"))
    return dataclasses.replace(cat, gpus={**cat.gpus, "mi325x": gpu})


def test_the_catalog_holds_the_fit_on_mi325x_runs(cat):
    values, start, fitted = calibrate.fit_published("mi325x", FIELDS, ITERATIONS)
    shipped = _profile(cat, "mi325x")
    assert shipped.fp8_matmul_efficiency == round(values["fp8_matmul_efficiency"], 4) == 0.4964
    # MAPE of the four runs: 5.9% at the fit, which the shipped value already is (the fit
    # from it does not move); 18.4%, all four too fast, on MI300X's profile
    assert start == pytest.approx(fitted, abs=1e-4) and fitted == pytest.approx(0.0592, abs=5e-4)
    runs = [r for r in pub.read_runs(cat)[0] if r.gpu == "mi325x"]
    before = pub.predict(runs, _with_mi300x_profile(cat))
    assert mape(before) == pytest.approx(0.1845, abs=5e-4) and max(p.error for p in before) < 0
    assert cat.gpu("mi325x").evidence.runs == 4
    assert cat.gpu("mi325x").evidence.mape_pct == pytest.approx(100 * fitted, abs=0.01)
    note = shipped.note
    assert "bench/calibrate.py --set published --gpu mi325x --fields fp8_matmul_efficiency" in note
    assert "--iterations 100" in note and "0.4964" in note


def test_each_organisation_held_out_is_scored_at_the_others_fit():
    """AMD's 3 runs against MiTAC's 1: the figures the note quotes (out-of-sample)."""
    out = calibrate.held_out_by_organisation("mi325x", FIELDS, ITERATIONS)
    assert set(out) == {"AMD", "MiTAC"}
    amd_fit, mitac_mape, mitac_bias = out["MiTAC"]  # MiTAC held out: fitted on AMD's
    assert round(amd_fit["fp8_matmul_efficiency"], 4) == 0.4964
    assert mitac_mape == pytest.approx(0.134, abs=5e-4) and mitac_bias < 0  # too fast
    mitac_fit, amd_mape, amd_bias = out["AMD"]  # AMD held out: fitted on MiTAC's one run
    assert round(mitac_fit["fp8_matmul_efficiency"], 4) == 0.3767
    assert amd_mape == pytest.approx(0.223, abs=5e-4) and amd_bias > 0  # too slow


def test_mi325x_differs_from_mi300x_only_in_its_fp8_gemm_efficiency(cat):
    mi300x = _profile(cat, "mi300x").model_dump()
    mi325x = _profile(cat, "mi325x").model_dump()
    assert {k for k in mi300x if mi300x[k] != mi325x[k]} == {"fp8_matmul_efficiency", "note"}
    assert _profile(cat, "mi355x") == _profile(cat, "mi300x")  # MI355X keeps it, unfitted


def test_mi325x_fp8_step_moves_by_the_fitted_ratio_of_its_linear_gemms(cat):
    """One GPU (no collectives): the FP8 linear GEMMs run at 0.4964 / 0.6561 of the rate
    MI300X's profile gives (the same FP8 peak), everything else in the step unchanged, so
    the step grows by exactly those GEMMs' time x (0.6561 / 0.4964 - 1); BF16 steps do
    not move."""
    ratio = _profile(cat, "mi325x").fp8_matmul_efficiency / (
        _profile(cat, "mi300x").fp8_matmul_efficiency
    )
    assert ratio == pytest.approx(0.7566, abs=1e-4)
    before = _with_mi300x_profile(cat)
    spec, seq = zoo()["llama3-8b"], 8192
    lay = Layout(tp=1, pp=1, dp=1, micro_batch=1, global_batch=4, precision="fp8")
    hw_new, hw_old = (Hardware.from_catalog(c, "mi325x") for c in (cat, before))
    new_rate = gemm_rates(hw_new.gpu, spec.hidden, "fp8", 1).linear_flop_s
    old_rate = gemm_rates(hw_old.gpu, spec.hidden, "fp8", 1).linear_flop_s
    assert new_rate / old_rate == pytest.approx(ratio, rel=1e-12)
    linear_old_s = 4 * stage_work_per_microbatch(spec, lay, seq, True).linear / old_rate
    new, old = (evaluate(spec, hw, lay, seq) for hw in (hw_new, hw_old))
    assert new.step_time_s - old.step_time_s == pytest.approx(linear_old_s * (1 / ratio - 1))
    bf16 = dataclasses.replace(lay, precision="bf16")
    assert (
        evaluate(spec, hw_new, bf16, seq).step_time_s
        == evaluate(spec, hw_old, bf16, seq).step_time_s
    )
