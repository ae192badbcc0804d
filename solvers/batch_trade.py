"""What the batch costs a plan in tokens, priced against a batch twice as large
(models/batch_tokens.py; the explanation's sentence and the answer's ``batch_tokens``).

The larger batch is the same plan with twice the micro-batches per step (the same
GPUs, NICs and purchases), re-evaluated by the float model past any ceiling: its steps
take fewer days per token (the bubble, the gradient reduction and the optimizer step
are spread over more sequences) and its batch needs more tokens. The days its steps
save are counted at the plan's own tokens; the tokens it adds at its own speed."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from solvers.plan import Plan, build_plan
from solvers.scenario import Scenario


@dataclass(frozen=True)
class BatchTrade:
    """The plan's batch against twice the batch: tokens in tokens, times in days."""

    tokens: float  # the question's
    critical_batch_tokens: float
    batch_tokens: float
    effective_tokens: float
    larger_batch_tokens: float
    larger_effective_tokens: float
    steps_days_saved: float  # the larger batch's speed-up at the plan's own tokens
    extra_tokens_fraction: float  # the larger batch's tokens over the plan's, less 1
    net_days: float  # the larger batch's days less the plan's (positive: slower)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def sentence(self) -> str:
        """The explanation's sentence."""
        crit, used = self.critical_batch_tokens, self.batch_tokens
        where = "past" if used > crit else "within"
        need = self.effective_tokens
        head = (
            f"Its batch of {_tokens(used)} tokens is {where} the critical batch of "
            f"{_tokens(crit)} (DeepSeek LLM's fit; --batch-tokens-model)"
        )
        if used > crit:
            extra = (need / self.tokens - 1.0) * 100  # whole percent (.2g printed 1e+02)
            share = f"{extra:,.0f}%" if extra >= 0.5 else "under 1%"
            head += f", so it trains on {_tokens(need)} tokens (+{share})"
        verdict = "slower" if self.net_days > 0 else "faster"
        return (
            f"{head}; a batch of {_tokens(self.larger_batch_tokens)} would save "
            f"{self.steps_days_saved:,.1f} days of steps but cost "
            f"{self.extra_tokens_fraction * 100:,.0f}% more tokens "
            f"({abs(self.net_days):,.1f} days {verdict})."
        )


def _tokens(n: float) -> str:
    for scale, suffix in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K")):
        if n >= scale:
            return f"{n / scale:,.4g}{suffix}"
    return f"{n:,.0f}"


def batch_trade(scenario: Scenario, plan: Plan) -> BatchTrade | None:
    """The plan's batch priced against twice the batch (None: the model is off, or the
    plan has no time to train)."""
    crit = scenario.critical_batch_seq
    days = plan.evaluation.time_to_train_days
    if crit is None or days is None:
        return None
    s = scenario.with_changes(disabled=scenario.disabled | {"batch_ceiling"})
    cfg = plan.config
    larger = build_plan(s, replace(cfg, microbatches=2 * cfg.microbatches))
    big_days = larger.evaluation.time_to_train_days or 0.0
    ev, big = plan.evaluation, larger.evaluation
    need, big_need = float(ev.tokens or 0.0), float(big.tokens or 0.0)
    seq = scenario.seq_len
    return BatchTrade(
        tokens=scenario.tokens,
        critical_batch_tokens=float(crit * seq),
        batch_tokens=float(ev.layout.global_batch * seq),
        effective_tokens=need,
        larger_batch_tokens=float(big.layout.global_batch * seq),
        larger_effective_tokens=big_need,
        steps_days_saved=days - big_days * need / big_need if big_need else 0.0,
        extra_tokens_fraction=big_need / need - 1.0 if need else 0.0,
        net_days=big_days - days,
    )
