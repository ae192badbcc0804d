"""Accuracy regression: predicted vs measured iteration times on the vTrain calibration set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog import load_catalog
from designer.validation import mape, predict, read_rows

BASELINE = json.loads(
    (Path(__file__).resolve().parent.parent / "bench" / "accuracy_baseline.json").read_text()
)


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


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
    from designer.validation import twin_pairs

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
