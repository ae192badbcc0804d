"""Gated DeltaNet's core measured on a lent H200 (bench/device/gdn_kernels.py, 2026-12-04)
against models/expert.py (bench/gdn_kernels.py): the two constants the model takes from it,
and the figures README's "Gated DeltaNet's core, measured" quotes."""

from __future__ import annotations

import pytest

from helpers import load_bench
from models.expert import GDN_CORE_FIXED_S_PER_PASS, GDN_CORE_PEAK_SHARE

bench = load_bench("gdn_kernels.py", "bench_gdn_kernels")


def test_the_run_records_the_gpu_and_libraries():
    env = (bench.DATA / "environment.txt").read_text()
    assert "NVIDIA H200" in env and "torch: 2.11.0" in env
    assert "fla-core) 0.4.0" in env and "triton 3.6.0" in env


def test_the_kernel_checked_against_the_recurrence():
    """The measured kernel computes the gated delta rule the script feeds it: within bf16's
    rounding of a token-by-token fp32 recurrence."""
    text = (bench.DATA / "gdn_kernels.csv").read_text().splitlines()
    check = [line for line in text if line.startswith("check,")]
    assert len(check) == 1 and float(check[0].split(",")[-1]) < 0.01


def test_the_constants_are_the_line_through_the_measurement():
    fixed_s, share = bench.line(bench.read(bench.DATA))
    assert GDN_CORE_FIXED_S_PER_PASS == pytest.approx(fixed_s, abs=5e-7)
    assert GDN_CORE_PEAK_SHARE == pytest.approx(share, abs=5e-5)


def test_the_model_prices_each_measured_micro_batch_as_it_ran():
    """On the catalog's H200, one layer's core priced within 0.1% of each measured time;
    the FLOPs alone at the profile's attention rate, as before, were 39 and 11 times under."""
    rows = bench.read(bench.DATA)
    for batch, before_ratio in ((1, 39), (4, 11)):
        measured = rows[("core", batch)]["fb_ms"]
        now, before = bench.priced_ms(batch, 4096)
        assert now == pytest.approx(measured, rel=1e-3)
        assert measured / before == pytest.approx(before_ratio, abs=0.5)


def test_the_report_prints(capsys, monkeypatch):
    monkeypatch.setattr("sys.argv", ["gdn_kernels.py"])
    bench.main()
    out = capsys.readouterr().out
    assert "2.055 ms fixed per forward-equivalent" in out and "0.1524 of the bf16 peak" in out
    assert "1 x 4096: 6.513; 6.512; 0.167" in out
