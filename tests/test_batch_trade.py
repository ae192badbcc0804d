"""solvers/batch_trade.py: the explanation's price of a plan's batch against twice the
batch, its sentence (past or within the critical batch, slower or faster) and its fields.
The trade on a solved plan is checked in tests/test_batch_tokens.py."""

from __future__ import annotations

import pytest

from solvers.batch_trade import BatchTrade


def _trade(**changes) -> BatchTrade:
    base = dict(
        tokens=2e12,
        critical_batch_tokens=4e6,
        batch_tokens=8e6,
        effective_tokens=2.5e12,
        larger_batch_tokens=16e6,
        larger_effective_tokens=3.5e12,
        steps_days_saved=3.25,
        extra_tokens_fraction=0.4,
        net_days=12.5,
    )
    return BatchTrade(**{**base, **changes})


def test_as_dict_holds_every_field():
    trade = _trade()
    assert trade.as_dict() == {
        "tokens": 2e12,
        "critical_batch_tokens": 4e6,
        "batch_tokens": 8e6,
        "effective_tokens": 2.5e12,
        "larger_batch_tokens": 16e6,
        "larger_effective_tokens": 3.5e12,
        "steps_days_saved": 3.25,
        "extra_tokens_fraction": 0.4,
        "net_days": 12.5,
    }
    assert trade.as_dict() is not trade.__dict__  # a copy the caller may change


def test_a_batch_past_the_critical_one_says_the_tokens_it_adds():
    text = _trade().sentence()
    assert text.startswith("Its batch of 8M tokens is past the critical batch of 4M ")
    assert "so it trains on 2.5T tokens (+25%)" in text  # 2.5T / 2T - 1
    assert "a batch of 16M would save 3.2 days of steps" in text
    assert "but cost 40% more tokens (12.5 days slower)." in text
    assert text.endswith(".") and "\n" not in text


def test_a_batch_within_the_critical_one_adds_no_tokens():
    text = _trade(batch_tokens=2e6, effective_tokens=2e12, net_days=-1.5).sentence()
    assert "is within the critical batch of 4M" in text
    assert "trains on" not in text
    assert "(1.5 days faster)." in text


@pytest.mark.parametrize(
    "crit,shown",
    [
        (512.0, "512"),
        (2048.0, "2.048K"),
        (3.5e9, "3.5B"),
        (1.25e12, "1.25T"),
        (123456789.0, "123.5M"),
    ],
)
def test_token_counts_read_with_a_suffix_to_four_digits(crit, shown):
    assert f"critical batch of {shown} " in _trade(critical_batch_tokens=crit).sentence()


@pytest.mark.parametrize(
    ("effective", "share"),
    [(3.992e12, "+100%"), (2.5e12, "+25%"), (2.0246e12, "+1%"), (2.004e12, "+under 1%")],
)
def test_the_tokens_a_batch_adds_read_in_whole_percent(effective, share):
    """.2g printed 99.6% as "(+1e+02%)" (the 8 H100 Llama 3 8B plan trained on 998B tokens
    for 500B): whole percent, and under 1% said so."""
    text = _trade(effective_tokens=effective).sentence()
    assert f"tokens ({share})" in text
