"""The error band a plan is read with: where the next run's signed step-time error lies.

A profile's runs give signed errors e = (predicted - measured) / measured (percent). The
band [lo, hi] is meant to hold the error of a run not among them about 80% of the time
(issue 30 item 3; bench/bands.py backtests it on left-out runs):

- 9 runs or more: the 10th and 90th percentiles at the Weibull plotting positions
  p = i / (n + 1) (Hyndman & Fan 1996, "Sample quantiles in statistical packages",
  definition 6). For independent draws of one continuous distribution the i-th smallest
  of n runs sits at the i / (n + 1) quantile in expectation, so the band between the
  positions 0.1 and 0.9 holds a new run with probability 0.8 on average; linear
  interpolation (positions (i - 1) / (n - 1), numpy's default) puts the extremes at 0
  and 1 and holds about 0.8 (n - 1) / (n + 1) of new runs (68% of them at 12 runs).
- 2 to 8 runs: positions 0.1 and 0.9 fall outside the runs (the extremes hold a new run
  with probability (n - 1) / (n + 1): 60% at 4 runs), so the band is the normal
  prediction interval for one new observation, m +/- t(0.90, n - 1) s sqrt(1 + 1/n)
  (the textbook interval, e.g. Hahn & Meeker 1991, "Statistical Intervals"), taken on
  the log-ratios ln(1 + e) (m their mean, s their sample standard deviation) so that
  neither end passes -100% (a step time without bound), and never narrower than the
  runs themselves.
- 1 run: the run itself (no spread to read), widened to contain 0 where a plan reads it
  (models/evidence_range.py); the evidence rule calls such a pair thin.
"""

from __future__ import annotations

import math
import statistics

import numpy as np

WEIBULL_MIN_RUNS = 9  # from 9 runs the positions 0.1 and 0.9 of i / (n + 1) lie within them

# Student's t at the one-sided 0.90 level (the two-sided 80% interval's), by degrees of
# freedom 1-7 (any table of Student's t distribution)
T_090_BY_DF = {1: 3.078, 2: 1.886, 3: 1.638, 4: 1.533, 5: 1.476, 6: 1.440, 7: 1.415}


def error_band_pct(errors_pct: list[float]) -> tuple[float, float]:
    """(lo, hi): the band of signed errors (percent) that holds a new run's error about
    80% of the time, from the runs' ``errors_pct`` (module docstring)."""
    n = len(errors_pct)
    if n == 0:
        raise ValueError("an error band needs at least one run")
    if n >= WEIBULL_MIN_RUNS:
        lo, hi = np.percentile(errors_pct, [10.0, 90.0], method="weibull")
        return float(lo), float(hi)
    if n == 1:
        return float(errors_pct[0]), float(errors_pct[0])
    return prediction_interval_pct(errors_pct)


def prediction_interval_pct(errors_pct: list[float]) -> tuple[float, float]:
    """The normal 80% prediction interval of one new error on the log-ratio scale,
    exp(m +/- t(0.90, n - 1) s sqrt(1 + 1/n)) - 1 of the runs' ln(1 + e), widened to
    hold every run (2 to 8 runs: error_band_pct)."""
    n = len(errors_pct)
    logs = [math.log1p(e / 100.0) for e in errors_pct]
    mean, s = statistics.fmean(logs), statistics.stdev(logs)
    half = T_090_BY_DF[n - 1] * s * math.sqrt(1.0 + 1.0 / n)
    lo, hi = 100.0 * math.expm1(mean - half), 100.0 * math.expm1(mean + half)
    return min(min(errors_pct), lo), max(max(errors_pct), hi)
