"""Memory model against measured peak memory (bench/memory_accuracy.py --measured).

The rows of bench/data/memory/measured_peaks.csv are torchtitan runs published with
their full configuration (torchtitan's benchmarks/ files: Llama 3.1 8B / 70B / 405B on
H100 and H200 with FSDP, TP, PP, CP; torchao's float8 training benchmarks: Llama 3 8B
on 8 H100, MI300X and B200), each torchtitan's peak *reserved* memory in GiB.
Measured when this test was written (2026-11-30), tensor-only model (no reserved
memory): median absolute error over the 26 runs 48.7%; per group, FSDP with per-op
selective AC over-predicted by +15 to +74% (median 30.5%), full AC without PP
under-predicted by -46 to -49%, FSDP + TP + PP under-predicted by -51 to -66%. With
the planning default of 3 GB reserved, 45.6%. The guard is the tensor-only figure
rounded up, 49%: a change to models/memory.py that moves the model further from these
measurements fails it.
"""

from __future__ import annotations

import re

from catalog import load_catalog
from helpers import load_bench
from models.zoo import zoo

bench_memory = load_bench("memory_accuracy.py", "bench_memory_measured")

# tensors only, 26 runs: 48.7% on 2026-11-30, 30.5% once PP stages kept their gradients and
# parameters unsharded across the micro-batches (models.memory.zero3_kept_bytes: the
# torchtitan PP rows from -62% to -21% median)
MEASURED_MEDIAN_ABS_ERROR_PCT = 30.5
GUARD_PCT = 31.0


def test_csv_parses_with_a_source_and_date_per_row():
    rows = bench_memory.read_measured()
    assert len(rows) >= 3
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids))
    for r in rows:
        assert r["source_repo"] and r["source_file"], r["id"]
        assert re.fullmatch(r"[0-9a-f]{40}", r["source_commit"]), r["id"]
        assert re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", r["date"]), r["id"]
        assert float(r["measured_gib"]) > 0
        assert r["metric"] == "max_reserved"


def test_rows_name_known_models_gpus_and_consistent_layouts():
    catalog, models = load_catalog(), zoo()
    for r in bench_memory.read_measured():
        assert r["model"] in models, r["id"]
        assert r["gpu"] in catalog.gpus, r["id"]
        lay = bench_memory.measured_layout(r)
        assert lay.num_gpus == int(r["gpus"]), r["id"]
        assert lay.recompute in ("selective", "full")
        # a run never reports more than its GPU holds (GiB -> GB)
        capacity = float(r["capacity_gb"] or catalog.gpu(r["gpu"]).memory_gb)
        assert float(r["measured_gib"]) * 2**30 / 1e9 < capacity, r["id"]


def test_gib_converted_to_gb():
    rows = bench_memory.compare_measured()
    first = bench_memory.read_measured()[0]
    assert rows[0].measured_gb == float(first["measured_gib"]) * 1.073741824


def test_measured_comparison_median_error_stays_below_guard():
    rows = bench_memory.compare_measured(0.0)
    assert len(rows) == len(bench_memory.read_measured())
    median = bench_memory.median_abs_error_pct(rows)
    assert median < GUARD_PCT, (
        f"median |error| {median:.1f}% (was {MEASURED_MEDIAN_ABS_ERROR_PCT}%)"
    )


def test_reserved_memory_adds_to_every_prediction():
    bare = bench_memory.compare_measured(0.0)
    reserved = bench_memory.compare_measured(3.0)
    for b, r in zip(bare, reserved, strict=True):
        assert abs(r.predicted_gb - b.predicted_gb - 3.0) < 1e-9


def test_measured_mode_prints(capsys):
    bench_memory.measured_check()
    out = capsys.readouterr().out
    assert "median absolute error over" in out
    assert "tt24-t1-fsdp" in out


def test_default_headroom_cites_the_error_on_measured_peaks():
    """Issue 31 item 5: --headroom's default cites the memory model's error on the runs
    with a measured peak (bench/memory_accuracy.py --published) and the runs that ran it refuses;
    the figures in designer.question.fields.HEADROOM_EVIDENCE are the bench's own."""
    from calibration.published import MODERN_ASSUMPTIONS, read_runs, runs_over_memory
    from designer.question.fields import ASSUMPTION_HELP, HEADROOM_EVIDENCE
    from solvers.scenario import DEFAULT_HEADROOM, DEFAULT_RESERVED_GB

    errors = bench_memory.peak_errors()
    megatron = errors["megatron-core"]
    assert len(megatron) == 2 and len(errors["pytorch-fsdp"]) == 26
    median = bench_memory.median_abs_error_pct(megatron)
    assert f"{median:.1f}% median ({len(megatron)} runs)" in HEADROOM_EVIDENCE
    # 12% is the margin that covers both Megatron peaks; the 5% default covers one
    worst = min(r.error_pct for r in megatron)
    assert DEFAULT_HEADROOM * 100 < -worst <= 12.0
    catalog = load_catalog()
    runs, _ = read_runs(catalog)
    refused = []
    for headroom in (DEFAULT_HEADROOM, 0.12):
        a = MODERN_ASSUMPTIONS.model_copy(
            update={
                "runtime_reserved_gb": DEFAULT_RESERVED_GB,
                "memory_headroom_fraction": headroom,
            }
        )
        refused.append(len(runs_over_memory(runs, catalog, a)))
    assert f"{refused[0]} of {len(runs)} published runs that ran refused at 5%" in HEADROOM_EVIDENCE
    assert f"{refused[1]} at 12%" in HEADROOM_EVIDENCE
    assert HEADROOM_EVIDENCE in ASSUMPTION_HELP["--headroom"]


def test_bench_memory_py_is_the_memory_accuracy_report_under_the_issues_name():
    """``python bench/memory.py --published`` (issue 31's command) prints what
    bench/memory_accuracy.py --published prints: the same script, run under either name."""
    import subprocess
    import sys

    from helpers import REPO

    def report(script: str) -> str:
        done = subprocess.run(
            [sys.executable, f"bench/{script}", "--published"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        return done.stdout

    out = report("memory.py")
    assert "refused" in out and "median |error|" in out
    assert out == report("memory_accuracy.py")
