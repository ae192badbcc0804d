"""Units of time the models and the solvers share: days from seconds and back.

The days to train are the seconds of training (step time x steps, or time per
sequence x sequences) over 86,400 s a day; the cloud's prices are per GPU-hour
(24 a day; models/evaluate.py cloud_usd)."""

from __future__ import annotations

from typing import Any

SECONDS_PER_DAY = 86400.0
HOURS_PER_DAY = 24.0


def days_from_seconds(seconds: Any) -> Any:
    """Days in ``seconds`` (a float or a numpy array)."""
    return seconds / SECONDS_PER_DAY


def seconds_from_days(days: Any) -> Any:
    """Seconds in ``days``."""
    return days * SECONDS_PER_DAY
