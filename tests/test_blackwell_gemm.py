"""Blackwell's BF16 GEMM efficiency comes from the public GEMM microbenchmarks
(bench/blackwell_gemm.py, issue 30): the rows are sourced and physical, the catalog holds
the derived value, and the method reproduces the FP8 ratio that runs were fitted on.
GB200 gets B200's value times its own same-harness share ratio, which the FP8 pair and the
clocks confirm."""

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
    assert row["use"] in {"ratio", "context", "fp8-check", "gb200-ratio", "gb200-check"}
    gpu = catalog.gpu(row["gpu"])
    # the row's peak is the catalog's dense peak of that GPU and precision
    assert float(row["peak_tflops"]) == gpu.peak_tflops(row["precision"])
    assert 0.0 < bench.share_of_peak(row) < 1.0


def test_every_blackwell_profile_holds_the_derived_bf16_efficiency():
    derived = bench.derived_efficiency()
    h100 = load_catalog().gpu("h100-sxm").stacks["megatron-core"].matmul_efficiency
    assert 0.6 < derived < h100  # Blackwell reaches a smaller share of its peak than Hopper
    for name in bench.B200_PROFILE:
        assert load_catalog().gpu(name).stacks["megatron-core"].matmul_efficiency == derived
    gb200 = load_catalog().gpu("gb200").stacks["megatron-core"].matmul_efficiency
    assert gb200 == bench.derived_gb200_efficiency() < derived


def test_gb200_differs_from_b200_only_in_its_bf16_gemm_efficiency():
    cat = load_catalog()
    b200 = cat.gpu("b200").stacks["megatron-core"].model_dump()
    gb200 = cat.gpu("gb200").stacks["megatron-core"].model_dump()
    assert {k for k in b200 if b200[k] != gb200[k]} == {"matmul_efficiency", "note"}


def test_gb200_ratio_is_one_harness_and_agrees_with_its_cross_checks():
    """GB200's share over B200's (BF16) is within 2% of the same harness's FP8 pair and of
    the clocks' prediction; GB200's absolute GEMM rate stays above B200's."""
    ratios = bench.pair_ratios(ROWS, "gb200-ratio", bench.GB200_PAIR)
    assert set(ratios) == {"mamf-gb200-bf16"}
    ratio = bench.gb200_ratio(ROWS)
    peak = load_catalog().gpu("gb200").peak_tflops("bf16") / load_catalog().gpu("b200").peak_tflops(
        "bf16"
    )
    assert 1.0 < ratio * peak < peak  # faster than B200, by less than the datasheet says
    fp8 = bench.pair_ratios(ROWS, "gb200-check", bench.GB200_PAIR)["mamf-gb200-fp8"]
    assert ratio == pytest.approx(fp8, rel=0.02)
    assert ratio == pytest.approx(bench.clock_ratio(), rel=0.02)


def test_a_pair_of_the_wrong_gpus_is_refused():
    rows = [dict(r) for r in ROWS if r["use"] == "gb200-ratio"]
    rows[0]["gpu"] = "h100-sxm"
    with pytest.raises(ValueError, match="needs one row of"):
        bench.pair_ratios(rows, "gb200-ratio", bench.GB200_PAIR)


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
    monkeypatch.setattr(bench, "derived_gb200_efficiency", lambda rows=None: 0.6)
    assert bench.main() == 1
    assert "catalog gb200 matmul_efficiency 0.6353 != derived 0.6" in capsys.readouterr().out
    monkeypatch.setattr(bench, "derived_efficiency", lambda rows=None: 0.5)
    assert bench.main() == 1
    assert "catalog b200 matmul_efficiency 0.6761 != derived 0.5" in capsys.readouterr().out
