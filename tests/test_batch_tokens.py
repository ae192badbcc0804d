"""Tokens that depend on the batch (models/batch_tokens.py, issue 31 item 1): the critical
batch pinned to its source, McCandlish et al.'s trade-off, both solvers charging the
batch's tokens, the option off giving the old answers, and the CLI's errors."""

from __future__ import annotations

import json
import math

import pytest

from designer.question.build import build_scenario
from helpers import one_line, run_main
from models import batch_tokens as bt
from models import resolve_model, zoo
from models.transformer import TransformerSpec
from solvers import Scenario, solve_cpsat, solve_exhaustive
from solvers.batch_trade import batch_trade


# DeepSeek LLM (Bi et al. 2024), Table 2: the 7B and 67B runs took 2,304 and 4,608
# sequences of 4,096 tokens on 2T tokens, the batches its section 3.1 fit prescribes
@pytest.mark.parametrize(
    "params,sequences", [(7e9, 2304), (67e9, 4608)], ids=["deepseek-7b", "deepseek-67b"]
)
def test_deepseek_fit_gives_the_batches_its_runs_used(params, sequences):
    fit = bt.deepseek_batch_tokens(6.0 * params * 2e12)
    assert fit == pytest.approx(sequences * 4096, rel=0.04)


def test_deepseek_fit_constants_are_the_papers():
    assert (bt.DEEPSEEK_BATCH_COEF, bt.DEEPSEEK_BATCH_EXPONENT) == (0.2920, 0.3271)
    with pytest.raises(ValueError):
        bt.deepseek_batch_tokens(0.0)


def test_multiplier_is_mccandlish_normalised_at_the_critical_batch():
    crit = 1000
    assert bt.token_multiplier(1, crit) == 1.0  # no credit below the critical batch
    assert bt.token_multiplier(crit, crit) == 1.0
    assert bt.token_multiplier(3 * crit, crit) == 2.0  # the model's cap: twice the tokens
    # E(B) = E_min (1 + B / B_crit), S = E / B: (S / S_min - 1)(E / E_min - 1) = 1 with
    # S_min = E_min / B_crit (McCandlish et al. 2018, section 2); E(B_crit) = 2 E_min is
    # the question's tokens, so E_min = tokens / 2
    tokens = 1e12
    e_min = tokens / 2
    s_min = e_min / crit
    for batch in (1500, 2000, 2999):
        e = tokens * bt.token_multiplier(batch, crit)
        s = e / batch
        assert (s / s_min - 1) * (e / e_min - 1) == pytest.approx(1.0, rel=1e-12)


def test_critical_batch_of_llama2_70b_on_2t_tokens():
    spec = zoo()["llama2-70b"]
    crit = bt.critical_batch_tokens("deepseek", spec, 2e12)
    assert crit == pytest.approx(0.2920 * (6 * spec.params() * 2e12) ** 0.3271)
    assert 19e6 < crit < 20e6  # DeepSeek 67B's 18.9M: the same compute, nearly
    assert bt.critical_batch_tokens("off", spec, 2e12) is None
    # a mixture-of-experts model is sized by the parameters a token uses
    v3 = resolve_model("deepseek-v3")
    assert bt.token_params(v3) < 0.1 * v3.params()


def test_question_default_ceiling_is_three_critical_batches_and_off_is_16m():
    on = build_scenario(model="llama2-70b", tokens=2e12, budget=30e6)
    assert on.batch_tokens_model == "deepseek"
    assert on.max_batch_tokens == 3 * on.critical_batch_seq * 4096
    off = build_scenario(model="llama2-70b", tokens=2e12, budget=30e6, batch_tokens_model="off")
    assert off.max_batch_tokens == 16 * 2**20
    assert off.critical_batch_seq is None and off.token_multiplier(10**6) == 1.0
    mine = build_scenario(
        model="llama2-70b", tokens=2e12, budget=30e6, max_batch_tokens=4e6
    )  # an explicit ceiling stays the question's
    assert mine.max_batch_tokens == 4e6


def _small(cat, **kw) -> Scenario:
    """A model small enough for the exhaustive solver, a critical batch of a few dozen
    sequences and a ceiling far above it."""
    spec = TransformerSpec(
        name="tiny", layers=4, hidden=512, heads=8, kv_heads=8, vocab=8000, seq_len=2048
    )
    base = dict(
        spec=spec,
        catalog=cat,
        tokens=2e9,
        seq_len=2048,
        gpus=("h100-sxm",),
        nics=("cx7-400g",),
        budget_usd=2e6,
        max_batch_tokens=2**22,
        batch_tokens_model="deepseek",
    )
    return Scenario(**{**base, **kw})


def test_both_solvers_charge_the_batch_tokens_and_agree(cat):
    s = _small(cat)
    crit = s.critical_batch_seq
    assert crit is not None and crit < s.ceiling_tokens / s.seq_len / 3
    got, ref = solve_cpsat(s, top_k=3), solve_exhaustive(s, top_k=3)
    assert got.status == ref.status == "optimal"
    for x, y in zip(
        [p.objective for p in got.plans], [p.objective for p in ref.plans], strict=True
    ):
        assert x == pytest.approx(y, rel=1e-3)
    for plan in got.plans:
        ev = plan.evaluation
        assert ev.layout.global_batch <= 3 * crit  # the model's cap, under the ceiling
        want = s.tokens * max(1.0, (crit + ev.layout.global_batch) / (2 * crit))
        assert ev.tokens == pytest.approx(want, rel=1e-12)
    # the plan sits past the critical batch here, and its days include the extra tokens
    best = got.best.evaluation
    assert best.layout.global_batch > crit
    off = solve_cpsat(s.with_changes(batch_tokens_model="off"))
    assert off.best.evaluation.tokens == s.tokens
    assert got.best.objective > off.best.objective  # the tokens cost time


def test_option_off_is_the_old_model(cat):
    """A Scenario built directly is off: the same plan and days as before the model."""
    spec = zoo()["llama2-7b"]
    kw = dict(spec=spec, catalog=cat, tokens=5e10, seq_len=4096, gpus=("h100-sxm",))
    kw |= dict(nics=("cx7-400g",), budget_usd=3e6, max_batch_tokens=2**20)
    plain = solve_cpsat(Scenario(**kw))
    off = solve_cpsat(Scenario(**kw, batch_tokens_model="off"))
    assert plain.best.config == off.best.config
    assert plain.best.objective == off.best.objective
    assert plain.best.evaluation.tokens == 5e10


def test_llama2_70b_at_30m_plans_within_the_model(capsys):
    code, out, _ = run_main(capsys, ["optimize", "--budget", "30M", "--json"])
    assert code == 0
    doc = json.loads(out)
    plan, trade = doc["plans"][0], doc["batch_tokens"]
    crit = plan["critical_batch_tokens"]
    batch = plan["global_batch"] * 4096
    assert crit == pytest.approx(19.45e6, rel=1e-3)
    assert batch <= 3 * crit  # within the critical-batch model (its cap)
    need = 2e12 * max(1.0, (crit + batch) / (2 * crit))
    assert plan["effective_tokens"] == pytest.approx(need, rel=1e-9)
    # the days are the steps the effective tokens take (then failures, through goodput)
    steps = plan["effective_tokens"] / batch
    assert plan["ideal_time_days"] == pytest.approx(steps * plan["step_time_s"] / 86400, rel=1e-9)
    assert plan["time_to_train_days"] >= plan["ideal_time_days"]
    assert trade["effective_tokens"] == pytest.approx(plan["effective_tokens"])
    assert trade["larger_batch_tokens"] == 2 * batch
    assert trade["extra_tokens_fraction"] > 0.4  # twice a batch past the critical one
    assert "more tokens" in doc["explanation"]


def test_batch_trade_prices_twice_the_batch(cat):
    s = _small(cat)
    plan = solve_cpsat(s).best
    trade = batch_trade(s, plan)
    assert trade is not None
    ev = plan.evaluation
    assert trade.larger_batch_tokens == 2 * ev.layout.global_batch * s.seq_len
    crit = s.critical_batch_seq
    grow = (crit + 2 * ev.layout.global_batch) / (crit + ev.layout.global_batch)
    assert trade.extra_tokens_fraction == pytest.approx(grow - 1.0, rel=1e-9)
    assert trade.net_days > 0  # the optimum: twice its batch is slower
    assert "would save" in trade.sentence() and "more tokens" in trade.sentence()
    assert batch_trade(s.with_changes(batch_tokens_model="off"), plan) is None


@pytest.mark.parametrize(
    "args,flag",
    [
        (["--batch-tokens-model", "kaplan"], "--batch-tokens-model"),
        (["--batch-tokens-model"], "--batch-tokens-model"),
        (["--min-batch-tokens", "100M", "--max-batch-tokens", "200M"], "--min-batch-tokens"),
    ],
    ids=["unknown-model", "no-value", "floor-past-the-model"],
)
def test_cli_errors_are_one_line_exit_2(capsys, args, flag):
    code, _, err = run_main(capsys, ["optimize", "--budget", "30M", *args])
    assert code == 2
    assert flag in one_line(err)


def test_scenario_refuses_an_unknown_model(cat):
    with pytest.raises(ValueError, match="batch_tokens_model"):
        _small(cat, batch_tokens_model="kaplan")
    assert math.isclose(bt.MAX_CRITICAL_BATCHES, 3.0)


def test_option_off_gives_the_old_default_answer(capsys, tmp_path):
    """`--batch-tokens-model off` is the answer before the model (README's buyer table before
    issue 31 item 1: 768 H100 on a 16M batch, 25.2 days); the CSV carries the new columns."""
    out_csv = tmp_path / "plans.csv"
    args = ["optimize", "--budget", "30M", "--batch-tokens-model", "off", "--json"]
    code, out, _ = run_main(capsys, [*args, "--csv", str(out_csv)])
    assert code == 0
    doc = json.loads(out)
    plan = doc["plans"][0]
    assert (plan["num_gpus"], plan["global_batch"]) == (768, 4080)
    assert plan["time_to_train_days"] == pytest.approx(25.2, abs=0.05)
    assert plan["effective_tokens"] == 2e12 and plan["critical_batch_tokens"] is None
    assert doc["batch_tokens"] is None and "critical batch" not in doc["explanation"]
    header = out_csv.read_text().splitlines()[0].split(",")
    assert {"effective_tokens", "critical_batch_tokens"} <= set(header)
