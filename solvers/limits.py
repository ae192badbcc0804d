"""The largest question values the CP-SAT model can hold, derived from its integer scaling.

CP-SAT's integers are 64-bit; the model keeps every bound under ``INT_LIMIT`` (2^62,
solvers/intmath.py) and leaves a factor of 4 for sums of terms. A question value turns
into an integer of the model as follows, which fixes the largest value each may take
(rounded down to a power of ten, so that the message reads well):

- money in cents, and TCO in 1/TCO_UNITS_PER_CENT cents (solvers/cpsat/cost.py): a
  budget of at most INT_LIMIT / 4 / (100 x TCO_UNITS_PER_CENT) USD, 1e13 (10T);
- the batch ceiling in sequences (at least one token each) bounds the micro-batches
  per step, whose product with the DP degree (at most GPU_CAP) is a variable
  (solvers/cpsat/model.py ``_batch``): at most INT_LIMIT / 4 / GPU_CAP tokens, 1e12;
- the power cap in thousandths of a watt of IT power x PUE (solvers/families/power.py):
  at most INT_LIMIT / 4 / 1000 W, 1e9 MW;
- GPU counts (--max-gpus, --gpu-cap) and racks: the decision space never exceeds
  GPU_CAP (1,048,576) GPUs (solvers/scenario.py), and a rack holds at least one GPU;
- the deadline in time units per sequence depends on the question (the time unit and
  the training tokens), so the deadline family leaves out a deadline no plan can reach
  (solvers/families/deadline.py); the question's bound is physical: a million days.

designer/question/fields.py makes these the bounds of the question's fields and options (exit
2 naming the option and the largest value allowed); evaluate's layout degrees take
GPU_CAP too (no plan of the space has a larger degree)."""

from __future__ import annotations

import math

from models.errors import ModelError
from solvers.intmath import INT_LIMIT
from solvers.scenario import GPU_CAP, MAX_BATCH_TOKENS

TCO_UNITS_PER_CENT = 1000  # energy and capex shares are fractions of a cent per unit of time
_SUM_ROOM = 4  # sums of a few terms stay under INT_LIMIT


def _power_of_ten_below(x: float) -> float:
    """The largest power of ten at most ``x``."""
    return 10.0 ** math.floor(math.log10(x))


MAX_GPUS = GPU_CAP
"""--max-gpus and --gpu-cap: the largest cluster the decision space holds."""
MAX_RACKS = GPU_CAP
"""--max-racks: a rack holds at least one GPU."""
MAX_BUDGET_USD = _power_of_ten_below(INT_LIMIT / _SUM_ROOM / (100 * TCO_UNITS_PER_CENT))
"""--budget: cents x TCO units in int64 (1e13 USD)."""
__all__ = ["MAX_BATCH_TOKENS"]
# MAX_BATCH_TOKENS, --max-batch-tokens and --min-batch-tokens: sequences x DP degree in int64,
# _power_of_ten_below(INT_LIMIT / _SUM_ROOM / GPU_CAP) = 1e12 tokens; its value lives in
# solvers/scenario.py, which clamps the default ceiling to it (tests/test_scenario.py checks
# the two agree)
MAX_POWER_CAP_MW = _power_of_ten_below(INT_LIMIT / _SUM_ROOM / 1000 / 1e6)
"""--power-cap: thousandths of a watt in int64 (1e9 MW)."""
MAX_DEADLINE_DAYS = 1e6
"""--deadline: 2,738 years (the model leaves out a deadline no plan can reach)."""
MIN_TOKENS = 1.0
"""--tokens: at least one token (a tinier run only overflows the time units)."""
MAX_TOKENS = 1e18
"""--tokens: a million times the largest training runs published (15T-36T tokens); the
time to train stays a finite float in every unit the reports use."""


class QuestionTooLarge(ModelError, OverflowError):
    """Every value within its limit, the question's numbers together still leave the CP-SAT
    model's 64-bit range at its coarsest time unit (say the most tokens and the largest
    budget under --pricing tco at the dearest electricity and a short lifetime): bad input,
    exit 2, naming the options to change (it was an internal error, exit 1)."""

    def __init__(self, pricing: str, lifetime: bool) -> None:
        tco = ""
        if pricing == "tco":  # a short lifetime widens the capex share, a long one kappa
            tco = "lower --usd-per-kwh" + (" or change --lifetime-years" if lifetime else "")
            tco += ", or "
        super().__init__(
            "the question is too large for 64-bit arithmetic (the solver's integers), though "
            f"each value is within its limit; {tco}lower --tokens, --budget or --deadline, "
            "the GPU cap (--max-gpus, --gpu-cap) or the batch ceiling (--max-batch-tokens)"
        )
