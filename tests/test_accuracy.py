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
