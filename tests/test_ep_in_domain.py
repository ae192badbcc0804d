"""--ep-in-domain: a mixture-of-experts plan's EP group inside one scale-up domain
(solvers/families/ep_domain.py; README "Mixture-of-experts").

- The request is a shape rule: both solvers drop the shapes whose EP group spans
  domains (CP-SAT against the exhaustive solver: tests/test_moe_plan.py), and a plan
  that breaks it reports an ep_domain violation (explain of a saved plan exits 1).
- Binding, the explanation prices it: relaxing ep_domain drops the request, and the
  improvement is the optimum without it. Without the request the family's relaxation
  text and answers are today's.
- Nothing fits without EP across domains: the conflict names ep_domain and its fix.
- The option in compare, sweep and saved answers; a dense model is unchanged.
"""

from __future__ import annotations

import csv
import json

import pytest

from helpers import run_main, wide_moe_scenario
from solvers.cpsat.solve import solve_cpsat
from solvers.exhaustive import solve_exhaustive
from solvers.explain import binding_constraints
from solvers.families import BY_NAME
from solvers.families.ep_domain import REQUEST_RELAXATION, ep_domains
from solvers.plan import build_plan

# helpers.WIDE_MOE as a spec file: without the request its best plan spreads EP over servers
WIDE_YAML = (
    "layers: 2\nhidden: 4096\nheads: 32\nvocab: 32000\nseq_len: 2048\n"
    "experts: 128\nexperts_per_token: 8\nexpert_ffn_hidden: 2048\n"
)
WIDE_ARGS = ["--gpu", "rtx4090", "--tokens", "50B", "--budget", "4M", "--max-batch-tokens", "2M"]
# expert weights that fit 24 GB only with EP beyond one 8-GPU server
HUGE_YAML = (
    "layers: 2\nhidden: 8192\nheads: 64\nvocab: 32000\nseq_len: 2048\n"
    "experts: 128\nexperts_per_token: 8\nexpert_ffn_hidden: 32768\n"
)


@pytest.fixture(scope="module")
def wide(cat):
    """(question with the request, its optimum, the optimum without the request)."""
    s = wide_moe_scenario(cat, ep_in_domain=True)
    return s, solve_cpsat(s, time_limit_s=60.0), solve_cpsat(s.with_changes(ep_in_domain=False))


def test_both_solvers_keep_the_ep_group_in_one_domain(wide):
    s, on, off = wide
    ref = solve_exhaustive(s)
    assert on.status == ref.status == "optimal"
    assert on.best.objective == pytest.approx(ref.best.objective, rel=1e-3)
    for plan in (on.best, ref.best):
        assert ep_domains(plan, s) == 1 and plan.feasible
    # without the request the optimum crosses servers: the rule is what kept it inside
    assert ep_domains(off.best, s) > 1
    assert off.best.objective < on.best.objective


def test_a_plan_across_domains_violates_the_request(wide, tmp_path, capsys):
    s, _, off = wide
    plan = build_plan(s, off.best.config)
    found = {v.constraint: v.detail for v in plan.violations}
    assert "spans 2 8-GPU scale-up domains" in found["ep_domain"]
    assert build_plan(s.with_changes(ep_in_domain=False), off.best.config).feasible
    # a saved plan across domains, explained under a question that asks for the request
    spec = tmp_path / "wide.yaml"
    spec.write_text(WIDE_YAML)
    code, out, err = run_main(
        capsys, ["optimize", "--model", str(spec), *WIDE_ARGS, "--json", "--no-explain"]
    )
    assert code == 0, err
    doc = json.loads(out)
    assert doc["question"]["ep_in_domain"] is False
    assert doc["plans"][0]["ep"] > 8  # beyond one server's 8 GPUs
    doc["question"]["ep_in_domain"] = True
    saved = tmp_path / "answer.json"
    saved.write_text(json.dumps(doc))
    code, out, err = run_main(capsys, ["explain", str(saved)])
    assert code == 1
    assert "ep_domain" in err and "--ep-in-domain keeps the EP group inside one" in err
    # an answer saved before the option (no key) asked for no request: the plan holds
    del doc["question"]["ep_in_domain"]
    saved.write_text(json.dumps(doc))
    code, out, err = run_main(capsys, ["explain", str(saved), "--json"])
    assert code == 0, err
    assert json.loads(out)["question"]["ep_in_domain"] is False


def test_the_binding_request_is_priced(wide):
    s, on, off = wide
    rows = {b.constraint: b for b in binding_constraints(s, on.best, on.candidates)}
    row = rows["ep_domain"]
    assert row.relaxation == REQUEST_RELAXATION
    assert row.binding
    assert row.improvement_if_relaxed == pytest.approx(
        on.best.objective - off.best.objective, rel=1e-3
    )
    assert "the EP group in one scale-up domain" in row.detail


def test_without_the_request_the_family_is_unchanged(wide):
    s, _, off = wide
    q = s.with_changes(ep_in_domain=False)
    fam = BY_NAME["ep_domain"]
    assert fam.relaxation_in(q) == fam.relaxation
    assert fam.relaxation.startswith("off: changes nothing")
    assert fam.relaxation_in(s) == REQUEST_RELAXATION
    assert all("ep_domain" not in c.structural for c in off.candidates)
    rows = {b.constraint: b for b in binding_constraints(q, off.best, off.candidates)}
    assert rows["ep_domain"].relaxation == fam.relaxation
    assert not rows["ep_domain"].binding


def test_a_conflict_names_ep_domain_and_its_fix(tmp_path, capsys):
    spec = tmp_path / "huge.yaml"
    spec.write_text(HUGE_YAML)
    args = ["optimize", "--model", str(spec), "--gpu", "rtx4090", "--tokens", "50B"]
    args += ["--budget", "10M"]
    code, out, err = run_main(capsys, [*args, "--ep-in-domain", "--json"])
    assert code == 1, err
    conflict = json.loads(out)["conflict"]
    assert "ep_domain" in conflict["constraints"]
    fixes = {f["constraint"]: f["change"] for f in conflict["fixes"]}
    assert fixes["ep_domain"] == REQUEST_RELAXATION
    code, out, err = run_main(capsys, [*args, "--no-explain"])
    assert code == 0, err  # the same question without the request has a plan


def test_a_dense_question_is_unchanged(capsys):
    args = ["optimize", "--model", "llama2-7b", "--gpu", "h100-sxm", "--tokens", "20B"]
    args += ["--budget", "1M", "--max-batch-tokens", "1M", "--json"]
    code, plain, err = run_main(capsys, args)
    assert code == 0, err
    code, asked, err = run_main(capsys, [*args, "--ep-in-domain"])
    assert code == 0, err
    a, b = json.loads(plain), json.loads(asked)
    assert a["plans"] == b["plans"] and a["binding"] == b["binding"]
    assert b["question"]["ep_in_domain"] is True


def test_compare_and_sweep_take_the_option(tmp_path, capsys):
    spec = tmp_path / "wide.yaml"
    spec.write_text(WIDE_YAML)
    args = ["compare", "--model", str(spec), *WIDE_ARGS, "--gpu", "l40s", "--no-explain"]
    code, out, err = run_main(capsys, [*args, "--ep-in-domain", "--json"])
    assert code == 0, err
    plans = json.loads(out)["plans"]
    assert {p["gpu"] for p in plans} == {"rtx4090", "l40s"}
    assert all(p["ep"] * p["etp"] <= 8 for p in plans)  # 8-GPU scale-up domains
    study = tmp_path / "study.yaml"
    study.write_text(
        f"base:\n  model: {spec}\n  tokens: 50B\n  budget: 4M\n  max_batch_tokens: 2M\n"
        "  gpus: [rtx4090]\naxes:\n  ep_in_domain: [false, true]\n"
    )
    out_csv = tmp_path / "sweep.csv"
    code, out, err = run_main(capsys, ["sweep", str(study), "--csv", str(out_csv)])
    assert code == 0, err
    rows = {r["ep_in_domain"]: r for r in csv.DictReader(out_csv.open())}
    assert set(rows) == {"False", "True"}
    assert int(rows["True"]["ep"]) <= 8 < int(rows["False"]["ep"])
    assert float(rows["True"]["time_to_train_days"]) > float(rows["False"]["time_to_train_days"])


def test_the_cpsat_model_itself_forbids_the_shapes(wide):
    """Presolve drops the shapes the request forbids; the CP-SAT model forbids them too
    (the family's encoding), here given every shape presolve keeps with ep_domain off."""
    from solvers.cpsat.context import Bounds
    from solvers.cpsat.solve import _Search, _solve_built
    from solvers.screen.bounds import prepare_bounds
    from solvers.screen.presolve import presolve

    s, on, _ = wide
    pre = presolve(s.with_changes(disabled=frozenset({"ep_domain"})), on.candidates)
    assert any("ep_domain" in c.structural for c in pre.candidates)
    bounds = Bounds(pre.dp_ranges, [0.0] * len(pre.candidates))
    search = _Search(s, pre.candidates, on.candidates, bounds, [], 1, 60.0, 1, None)
    got = _solve_built(search, prepare_bounds(s))
    assert got.status == "optimal"
    assert ep_domains(got.best, s) == 1
    assert got.best.objective == pytest.approx(on.best.objective, rel=1e-3)
