"""Accuracy regression: predicted vs measured iteration times on the vTrain calibration set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from calibration.vtrain import mape, predict, read_rows

BASELINE = json.loads(
    (Path(__file__).resolve().parent.parent / "bench" / "accuracy_baseline.json").read_text()
)


@pytest.mark.parametrize("name", ["multi", "single"])
def test_error_does_not_regress(name, catalog):
    preds = predict(read_rows(name), catalog)
    assert len(preds) == {"multi": 109, "single": 1440}[name]
    error_pct = 100 * mape(preds)
    assert error_pct <= BASELINE[name] + 1.0, (
        f"{name} MAPE {error_pct:.2f}% vs recorded {BASELINE[name]}%"
    )


def test_multi_server_target(catalog):
    """The foundation's target: under 15% mean absolute percentage error on the multi-server runs."""
    assert mape(predict(read_rows("multi"), catalog)) < 0.15


def test_predictions_are_positive_and_finite(catalog):
    for p in predict(read_rows("multi"), catalog):
        assert 0 < p.predicted_ms < 1e7


def test_twin_pairs_match_work_per_gpu():
    """Twins share model, GPUs, pipeline depth, global batch and micro-batch / TP."""
    from calibration.vtrain import twin_pairs

    rows = read_rows("multi")
    pairs = twin_pairs(rows)
    assert len(pairs) == 71
    for lo, hi in pairs:
        assert lo.tp < hi.tp and lo.pp == hi.pp and lo.gpus == hi.gpus
        assert lo.global_batch == hi.global_batch and lo.hidden == hi.hidden
        assert lo.micro_batch * hi.tp == hi.micro_batch * lo.tp
        # the same micro-batches per step: global / (micro-batch x DP)
        assert lo.global_batch // (lo.micro_batch * lo.dp) == hi.global_batch // (
            hi.micro_batch * hi.dp
        )
    keys = {(lo.hidden, lo.pp, lo.tp, lo.micro_batch, hi.tp, hi.micro_batch) for lo, hi in pairs}
    assert (8192, 16, 2, 2, 8, 8) in keys


# --- published runs under the modern (megatron-core) profile --------------------------


@pytest.fixture(scope="module")
def published_preds(catalog):
    from calibration import published

    runs, skipped = published.read_runs(catalog)
    return published.predict(runs, catalog), skipped


def _shared_groups(preds):
    from calibration.published import by_group

    return by_group([p for p in preds if p.run.shared])


def test_published_groups_meet_the_targets(published_preds):
    """Issue 14: MAPE at most 10% per platform-and-precision group with 5 or more rows of
    the calibration set, and no row of it worse than 30%."""
    from calibration.vtrain import mape

    preds, _ = published_preds
    groups = _shared_groups(preds)
    assert {"h100-sxm bf16", "h100-sxm fp8", "a100-80gb bf16", "b200 fp8"} <= set(groups)
    for name, ps in groups.items():
        if len(ps) >= 5:
            assert mape(ps) <= 0.10, f"{name}: MAPE {100 * mape(ps):.1f}%"
        assert max(abs(p.error) for p in ps) < 0.30, name


@pytest.mark.parametrize("group", sorted(BASELINE["published"]))
def test_published_error_does_not_regress(published_preds, group):
    from calibration.vtrain import mape

    preds, _ = published_preds
    ps = _shared_groups(preds)[group]
    assert 100 * mape(ps) <= BASELINE["published"][group] + 1.0


def test_every_dense_row_with_a_layout_evaluates(published_preds):
    """Rows of the calibration set are skipped only for a stated reason that is not the
    model's: MoE, another software stack, or a layout the source does not give."""
    _, skipped = published_preds
    allowed = (
        "mixture of experts",
        "JAX/XLA stack",
        "layout not given",
        "interleaved pipeline whose virtual size is not given",
    )
    shared = [s for s in skipped if s.origin == "published_runs.csv"]
    assert shared
    for s in shared:
        assert s.reason.startswith(allowed), (s.name, s.reason)


def test_no_calibration_run_breaks_the_tp_rule(catalog):
    """Eight NeMo long-context runs (Llama 2 7B and Llama 3 8B in FP8 at 64K-1M tokens, TP 4
    and 8 with CP) broke the seed's 3h x bw / peak, which counts the linear layers' work
    only: at those lengths the attention core is most of the work between the TP
    collectives (models.scaleup.tp_rule), and every layout here ran."""
    from calibration import published
    from models import Hardware, evaluate

    runs, _ = published.read_runs(catalog)
    for run in runs:
        ev = evaluate(run.spec, Hardware.from_catalog(catalog, run.gpu, run.nic, run.nics_per_node),
                      run.layout, run.seq_len)  # fmt: skip
        assert "tp_bandwidth" not in {v.constraint for v in ev.violations}, run.name


def test_four_bit_rows_are_skipped_not_read_as_bf16(published_preds):
    """MLPerf v5.1 Llama 3.1 8B rows trained in NVFP4 (the submission's logs or config
    say fp4: true) are skipped with their reason; no run evaluated as FP8 or BF16 is one."""
    from calibration import published

    preds, skipped = published_preds
    four_bit = [s for s in skipped if "NVFP4 on" in s.name]
    assert len(four_bit) == 9
    assert all(s.reason.startswith("4-bit training") for s in four_bit)
    assert not [p for p in preds if "FP4" in p.run.name]
    row = {"model_family": "Llama", "ep": "", "precision": "MXFP4", "gpu": "MI355X"}
    assert published._skip_reason(row, None).startswith("4-bit training")  # type: ignore[arg-type]


def test_uneven_and_inconsistent_rows_are_read_as_documented(catalog):
    """The B200 long-sequence rows print a quarter of the GPUs: the printed layout is kept
    (per-GPU rates); a published step time keeps the GPU count (dgxc 405B proxies)."""
    from calibration import published

    runs, _ = published.read_runs(catalog)
    by_name = {r.name: r for r in runs}
    b200 = by_name["NeMo long-seq Llama3-8B 128K on 128xB200 (with CP)"]
    assert b200.layout.num_gpus == 32 and any("printed" in a for a in b200.assumed)
    proxy = by_name["dgxc Llama3.1 405B (NeMo 24.09) BF16 96xH100"]
    assert proxy.layout.num_gpus == 96 and proxy.layout.dp == 2


def test_fsdp2_rows_are_evaluated_with_sharded_parameters(catalog):
    """Rows whose optimizer cell names PyTorch FSDP2 (the MI325X Megatron runs of issue 30)
    are evaluated as ZeRO-3; every other evaluated row keeps the distributed optimizer."""
    from calibration import published

    runs, _ = published.read_runs(catalog)
    fsdp2 = [r for r in runs if r.layout.zero == 3]
    assert len(fsdp2) == 2
    assert all(r.gpu == "mi325x" and "FSDP2" in r.name for r in fsdp2)
    assert {r.layout.zero for r in runs} == {1, 3}
    cell = "zero_or_distributed_optimizer"
    assert published._zero({cell: "distributed optimizer (use_distributed_optimizer True)"}) == 1
    assert published._zero({cell: "torch FSDP2 (use_torch_fsdp2 True)"}) == 3


def test_catalog_evidence_matches_the_calibration_sets(catalog):
    """The catalog's measured: blocks are what bench/accuracy.py --evidence computes now
    (so a model change that moves the errors must refresh them)."""
    from calibration.published import published_evidence
    from calibration.vtrain import vtrain_evidence

    for gpu, ev in published_evidence(catalog).items():
        recorded = catalog.gpu(gpu).with_stack("megatron-core").evidence
        assert recorded is not None, gpu
        assert recorded.runs == ev.runs, gpu
        assert recorded.mape_pct == pytest.approx(ev.mape_pct, abs=0.01), gpu
        assert recorded.worst_pct == pytest.approx(ev.worst_pct, abs=0.01), gpu
    gpu, stack, ev = vtrain_evidence(catalog)
    recorded = catalog.gpu(gpu).with_stack(stack).evidence
    assert recorded.runs == ev.runs
    assert recorded.mape_pct == pytest.approx(ev.mape_pct, abs=0.01)
