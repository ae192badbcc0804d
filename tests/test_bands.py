"""Bands that mean what they say (issue 30 item 3): a plan's band comes from the runs of
its platform, precision and model family, and bench/bands.py backtests its coverage."""

from __future__ import annotations

import pytest

from calibration.error_band import error_band_pct
from catalog import load_catalog
from helpers import load_bench
from models.evidence_range import band, catalog_band


@pytest.fixture(scope="module")
def bands():
    return load_bench("bands.py", "bench_bands")


def test_covered_reads_the_others_band_widened_to_zero(bands):
    others = [4.0, 5.0, 6.0]  # 3 runs: a prediction interval around them, widened to 0
    lo, hi = error_band_pct(others)
    assert 0.0 < lo < 4.0 and hi > 6.0
    assert bands.covered(0.0, others) and bands.covered(hi - 1e-9, others)
    assert not bands.covered(hi + 0.01, others) and not bands.covered(-0.1, others)


def test_backtest_by_source_leaves_the_whole_source_out(bands):
    rows = [("g", "A", 1.0), ("g", "A", 1.1), ("g", "B", 10.0), ("g", "B", 9.0)]
    by_run = bands.backtest(rows, "run")[0]
    assert (by_run.runs, by_run.banded) == (4, 4)
    by_source = bands.backtest(rows, "source")[0]
    assert by_source.banded == 4 and by_source.covered == 2  # A's runs inside B's 0..10
    lonely = bands.backtest([("g", "A", 1.0), ("g", "A", 2.0)], "source")[0]
    assert lonely.banded == 0 and lonely.pct is None


def test_left_out_coverage_of_the_published_runs_is_in_the_aim(bands):
    cov = bands.backtest(bands.published_rows(), "run")
    banded = sum(c.banded for c in cov)
    assert banded > 100
    pct = 100.0 * sum(c.covered for c in cov) / banded
    assert 70.0 <= pct <= 90.0, bands.report(cov, "run")


def test_a_plan_reads_the_band_of_its_own_precision():
    cat = load_catalog()
    ev = cat.gpu("h100-sxm").evidence
    assert ev is not None and {"dense bf16", "dense fp8"} <= set(ev.bands)
    for precision in ("bf16", "fp8"):
        b = catalog_band(cat, "h100-sxm", precision)
        lo, hi = ev.bands[f"dense {precision}"]
        assert (b.error_lo_pct, b.error_hi_pct) == pytest.approx((min(lo, 0), max(hi, 0)))


def test_a_family_without_runs_reads_the_dense_band_doubled():
    ev = load_catalog().gpu("h100-sxm").evidence
    dense = band(ev, precision="bf16", gpu="h100-sxm")
    moe = band(ev, precision="bf16", gpu="h100-sxm", family="moe")
    assert moe.error_lo_pct == pytest.approx(100 * ((1 + dense.error_lo_pct / 100) ** 2 - 1))
    assert moe.error_hi_pct == pytest.approx(100 * ((1 + dense.error_hi_pct / 100) ** 2 - 1))
    assert "no moe run" in moe.basis


def test_another_precision_is_never_read_with_a_narrower_band_than_no_run_at_all():
    from models.evidence_range import extrapolated_band, extrapolation_basis

    cat = load_catalog()
    floor = extrapolated_band(extrapolation_basis(cat))
    gb200 = catalog_band(cat, "gb200", "bf16")  # its runs are FP8, within 3%
    assert gb200.status == "extrapolated"
    assert gb200.error_lo_pct <= floor.error_lo_pct and gb200.error_hi_pct >= floor.error_hi_pct


def test_the_extrapolated_band_widens_a_measured_pair_not_a_thin_one():
    # MI300X's 2 runs give a one-degree-of-freedom prediction interval (-67%..+114%):
    # its width is the runs' scatter, not the model's error, and sets no other band
    from models.evidence_range import extrapolated_band, extrapolation_basis
    from models.evidence_rule import pair_evidence

    cat = load_catalog()
    basis = dict(extrapolation_basis(cat))
    assert "h100-sxm" in basis and "mi300x" not in basis
    assert pair_evidence("mi300x", cat.gpu("mi300x").evidence, "bf16").tier == "thin"
    for name, ev in basis.items():
        assert any(pair_evidence(name, ev, p).tier == "measured" for p in ev.precisions)
    widest = extrapolated_band(basis.items())
    assert widest.error_lo_pct > -60.0 and "mi300x" not in widest.basis
    gb200 = catalog_band(cat, "gb200", "bf16")
    assert gb200.error_lo_pct <= widest.error_lo_pct


def test_left_out_coverage_of_the_moe_rows_is_in_the_aim(bands):
    rows = bands.moe_rows()
    assert {g for g, _, _ in rows} >= {"h100-sxm moe", "h800 moe"}
    cov = bands.backtest(rows, "run")
    banded = sum(c.banded for c in cov)
    assert banded >= 50
    pct = 100.0 * sum(c.covered for c in cov) / banded
    assert 70.0 <= pct <= 90.0, bands.report(cov, "run", "MoE rows")
