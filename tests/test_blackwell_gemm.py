"""Blackwell's BF16 GEMM efficiency comes from the public GEMM microbenchmarks
(bench/blackwell_gemm.py, issue 30): the rows are sourced and physical, the catalog holds
the derived value, and the method reproduces the FP8 ratio that runs were fitted on."""

from __future__ import annotations

import statistics

import pytest

from catalog import load_catalog
from helpers import load_bench

bench = load_bench("blackwell_gemm.py", "bench_blackwell_gemm")
ROWS = bench.read_rows()


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['pair'] or r['source']}-{r['gpu']}")
def test_row_is_sourced_and_below_its_peak(row):
    catalog = load_catalog()
    assert row["source"] and row["url"].startswith("https://") and row["date"]
    assert row["use"] in {"ratio", "context", "fp8-check"}
    gpu = catalog.gpu(row["gpu"])
    # the row's peak is the catalog's dense peak of that GPU and precision
    assert float(row["peak_tflops"]) == gpu.peak_tflops(row["precision"])
    assert 0.0 < bench.share_of_peak(row) < 1.0


def test_every_blackwell_profile_holds_the_derived_bf16_efficiency():
    derived = bench.derived_efficiency()
    h100 = load_catalog().gpu("h100-sxm").stacks["megatron-core"].matmul_efficiency
    assert 0.6 < derived < h100  # Blackwell reaches a smaller share of its peak than Hopper
    for name in bench.BLACKWELL:
        assert load_catalog().gpu(name).stacks["megatron-core"].matmul_efficiency == derived


def test_each_bf16_source_pairs_one_blackwell_and_one_hopper_gpu():
    ratios = bench.pair_ratios(ROWS, "ratio")
    assert set(ratios) == {"xla-bf16", "hpcai-gemm"}
    assert bench.bf16_ratio(ROWS) == pytest.approx(statistics.geometric_mean(ratios.values()))


def test_the_method_reproduces_the_fp8_ratio_fitted_on_runs():
    """Where runs exist (FP8), the microbenchmark ratio is within 5% of the fitted one."""
    measured = statistics.mean(bench.pair_ratios(ROWS, "fp8-check").values())
    assert measured == pytest.approx(bench.fitted_fp8_ratio(), rel=0.05)


def test_check_fails_when_the_catalog_drifts(monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["blackwell_gemm.py", "--check"])
    assert bench.main() == 0
    monkeypatch.setattr(bench, "derived_efficiency", lambda rows=None: 0.5)
    assert bench.main() == 1
    assert "!= derived 0.5" in capsys.readouterr().out
