"""MoE plans read their band from MoE runs (issue 34 item 6): the catalog's measured_moe
blocks are what bench/moe_accuracy.py computes; a GPU without them is extrapolated from
the widest MoE band, never read with the dense record; `models show` prints the active
parameters."""

from __future__ import annotations

from catalog import load_catalog
from helpers import load_bench, run_main
from models.evidence_range import catalog_band

bench = load_bench("moe_accuracy.py", "bench_moe_accuracy")


def test_catalog_moe_evidence_is_the_bench_s():
    """python bench/moe_accuracy.py --evidence --write wrote these blocks (GPUs with at
    least MIN_MOE_RUNS scored rows); rerun it when the model or the rows change."""
    cat = load_catalog()
    rows = bench.all_scored()
    blocks = bench.moe_evidence_blocks(rows)
    have = {g for g, spec in cat.gpus.items() if spec.moe_evidence is not None}
    assert have == set(blocks) and "h100-sxm" in have
    for gpu in have:
        e = cat.gpu(gpu).moe_evidence
        lines = "\n".join(blocks[gpu])
        assert f"runs: {e.runs}\n" in lines and f"mape_pct: {e.mape_pct}\n" in lines
        assert f"error_lo_pct: {e.error_lo_pct}\n" in lines
        assert f'releases: "{e.releases}"' in lines  # the software releases measured
    # no layout is refused (issue 34), Qwen3-Next's included: a row left out of the means
    # is one its ``scored`` column lists with its reason, and its error is still printed
    skipped = bench.score_independent(bench.independent_rows())[1]
    assert all(row["scored"].startswith("no: ") for row, _ in skipped)
    assert len(bench.listed_errors(skipped)) == len(skipped)


def test_moe_plans_read_moe_bands_and_dense_plans_the_dense_record():
    cat = load_catalog()
    dense = catalog_band(cat, "h100-sxm", "bf16")
    moe = catalog_band(cat, "h100-sxm", "bf16", "moe")
    assert moe.evidence == cat.gpu("h100-sxm").moe_evidence != dense.evidence
    assert "MoE runs" in moe.line and "MoE" not in dense.line
    none = catalog_band(cat, "b200", "bf16", "moe")  # no MoE run on B200
    assert none.status == "extrapolated" and "no measured MoE training run" in none.line
    assert none.error_hi_pct - none.error_lo_pct > moe.error_hi_pct - moe.error_lo_pct


def test_evaluate_of_a_moe_model_quotes_moe_runs(capsys):
    code, out, _ = run_main(capsys, ["evaluate", "--model", "mixtral-8x7b", "--dp", "8",
                                     "--ep", "8", "--global-batch", "64"])  # fmt: skip
    line = next(x for x in out.splitlines() if x.startswith("evidence"))
    e = load_catalog().gpu("h100-sxm").moe_evidence
    assert f"measured: {e.runs} MoE runs of releases {e.releases}, mean error" in line
    assert e.releases.startswith("2024-08 to 2026-05 (") and "dgxc-benchmarking" in e.releases


def test_moe_evidence_names_the_releases_its_rows_measured():
    """Each scored row's release: the Grok-1 rows dgxc-benchmarking 24.11.1 (2024-11),
    an independent row its source's date; a GPU's span runs oldest to newest."""
    known = bench.row_releases()
    rows = bench.all_scored()
    grok = [r for r in rows if r[2] == "grok-1"]
    assert grok and all(known[r[1]] == ("2024-11", "dgxc-benchmarking 24.11.1") for r in grok)
    mixtral = [r for r in rows if r[1] == "mixtral-8x7b mcore-v0.8 64xH100 bf16"]
    assert bench.release_span(mixtral) == "2024-08 to 2024-08 (Megatron-LM)"
    assert bench.release_span([]) == ""


def test_models_show_prints_total_and_active_parameters(capsys):
    code, out, _ = run_main(capsys, ["models", "show", "tests/data/hf_moe/DeepSeek-V3.json"])
    assert code == 0
    fields = dict(line.split(None, 1) for line in out.splitlines() if line.strip())
    assert fields["params"].strip() == "671,026,404,352"
    assert fields["active_params"].strip() == "37,552,282,624"
    code, out, _ = run_main(capsys, ["models", "show", "llama2-7b"])
    assert "\nactive_params " not in out
