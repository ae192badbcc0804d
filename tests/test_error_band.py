"""The band a plan is read with holds about 80% of new runs (calibration/error_band.py)."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from calibration.error_band import T_090_BY_DF, WEIBULL_MIN_RUNS, error_band_pct


def test_nine_runs_or_more_read_the_weibull_positions():
    # i / (n + 1): with 9 runs the 0.1 and 0.9 positions are the 1st and 9th runs, with
    # 19 runs the 2nd and the 18th, with 14 runs 1.5 and 13.5 (halfway between neighbours)
    assert error_band_pct([float(i) for i in range(1, 10)]) == (1.0, 9.0)
    assert error_band_pct([float(i) for i in range(19, 0, -1)]) == (2.0, 18.0)
    assert error_band_pct([float(i) for i in range(1, 15)]) == pytest.approx((1.5, 13.5))
    assert WEIBULL_MIN_RUNS == 9


def test_fewer_runs_read_the_prediction_interval_on_log_ratios():
    runs = [-10.0, -2.0, 3.0, 6.0]
    logs = [math.log1p(e / 100) for e in runs]
    half = T_090_BY_DF[3] * statistics.stdev(logs) * math.sqrt(1 + 1 / 4)
    lo, hi = error_band_pct(runs)
    assert lo == pytest.approx(100 * math.expm1(statistics.fmean(logs) - half))
    assert hi == pytest.approx(100 * math.expm1(statistics.fmean(logs) + half))
    assert lo < min(runs) and hi > max(runs)


def test_a_band_is_never_narrower_than_its_runs_nor_past_minus_100():
    assert error_band_pct([5.0]) == (5.0, 5.0)
    lo, hi = error_band_pct([-60.0, 40.0])  # two runs far apart: one degree of freedom
    assert -100.0 < lo <= -60.0 and hi >= 40.0
    lo, hi = error_band_pct([2.0, 2.0, 2.0])  # no scatter: the runs themselves
    assert (lo, hi) == pytest.approx((2.0, 2.0))
    with pytest.raises(ValueError):
        error_band_pct([])


@pytest.mark.parametrize("runs", [3, 5, 8, 12, 30])
def test_a_new_run_falls_inside_about_80_percent_of_the_time(runs):
    # errors from one distribution (log-normal on the ratio scale, as the model's are
    # roughly): the band of `runs` draws holds the next draw 80% of the time on average
    rng = random.Random(runs)
    trials, inside = 4000, 0
    for _ in range(trials):
        draws = [100 * math.expm1(rng.gauss(-0.02, 0.08)) for _ in range(runs + 1)]
        lo, hi = error_band_pct(draws[:-1])
        inside += lo <= draws[-1] <= hi
    assert 0.77 <= inside / trials <= 0.84, inside / trials
