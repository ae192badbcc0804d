"""designer sweep and compare: inputs refused before any work, with one line naming the field
or option and the fix (exit 2): price multipliers that take a price outside the catalog's
bounds, one axis value given twice in two spellings, a --plot format that cannot be drawn,
and --address without the Ray executor. From the input-handling audit."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import designer.compare
from designer import sweep as sweep_module
from designer.errors import UsageError
from designer.output.files import check_paths
from designer.question.build import build_question
from designer.question.fields import Question
from helpers import SMALL, refused, rows, study, sweep

BASE = "base: {model: llama2-7b, tokens: 100B, budget: %s, gpus: [h100-sxm]}\n"


def _study(tmp_path: Path, text: str, budget: str = "1M") -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(BASE % budget + text)
    return path


def _refused_sweep(capsys, tmp_path: Path, s: Path, *words: str) -> str:
    """The sweep exits 2 naming every word, and writes no results file (nothing ran)."""
    out = tmp_path / "out.csv"
    line = refused(capsys, ["sweep", str(s), "--csv", str(out), "--workers", "1"], *words)
    assert not out.exists()
    return line


# ---------------------------------------------------------------- 1: price multipliers
@pytest.mark.parametrize(
    "scale,budget,allowed",
    [
        ("{h100-sxm: 1.0e-15}", "1M", "from 3.34e-05 to 3.33e+04"),  # ZeroDivisionError
        ("{h100-sxm: 1.0e-12}", "1M", "from 3.34e-05 to 3.33e+04"),  # a price of 3e-8 dollars
        ("{h100-sxm: 1.0e+5}", "1M", "from 3.34e-05 to 3.33e+04"),  # $3e9, over $1e9
        ("{cx6-200g: 1.0e+10}", "10T", "up to 7.59e+03"),  # OverflowError, wrong advice
        ("{cx6-200g: 1.0e+14}", "10T", "up to 7.59e+03"),  # int too large for a C long
    ],
)
def test_a_price_scale_outside_the_catalogs_bounds_is_refused(
    tmp_path, capsys, scale, budget, allowed
):
    """A scaled price must stay within the bounds a --catalog override's price keeps
    (catalog.specs): the axis is refused before any solve, with the multipliers allowed."""
    s = _study(tmp_path, f"axes: {{price_scale: [{scale}]}}\n", budget)
    line = _refused_sweep(capsys, tmp_path, s, f"{s}: axes.price_scale: ", allowed)
    assert "outside the catalog's" in line


def test_an_uncertainty_price_range_outside_the_bounds_is_refused(tmp_path, capsys):
    """The same for the Monte-Carlo block: its lowest draw (1e-300) is checked up front."""
    text = "axes: {budget: [1M, 2M]}\n"
    text += "uncertainty: {samples: 2, price_scale: {h100-sxm: [1.0e-300, 1.0e-299]}}\n"
    s = _study(tmp_path, text)
    _refused_sweep(capsys, tmp_path, s, f"{s}: uncertainty.price_scale: ", "h100-sxm x 1e-300")
    # with the axis's multiplier: a draw of 0.001 times the axis's 0.01 prices it at $0.30
    text = "axes: {price_scale: [{h100-sxm: 0.01}]}\n"
    text += "uncertainty: {samples: 1, price_scale: {h100-sxm: [0.001, 1]}}\n"
    s = _study(tmp_path, text)
    _refused_sweep(capsys, tmp_path, s, "uncertainty.price_scale", "times 0.01 from axes")


def test_the_multipliers_a_refusal_allows_are_allowed():
    """The range a message gives lies inside the allowed one: its ends pass, a step past
    them does not (capex: price_usd, cloud: cloud_usd_per_gpu_hour; a NIC may be free)."""
    for pricing in ("capex", "cloud"):
        q = Question(model="llama2-7b", budget="1M", gpus=["h100-sxm"], pricing=pricing)
        scenario = build_question(q, "study.yaml", Path())
        why = sweep_module.price_scale_error(scenario, "h100-sxm", 1e-15)
        assert why is not None
        least, most = (float(x) for x in re.findall(r"from (\S+) to (\S+)$", why)[0])
        assert sweep_module.price_scale_error(scenario, "h100-sxm", least) is None
        assert sweep_module.price_scale_error(scenario, "h100-sxm", most) is None
        assert sweep_module.price_scale_error(scenario, "h100-sxm", least * 0.99) is not None
        assert sweep_module.price_scale_error(scenario, "h100-sxm", most * 1.01) is not None
    assert sweep_module.price_scale_error(scenario, "cx6-200g", 1e-300) is None


def test_a_combination_not_checked_ahead_is_its_scenarios_error_row(tmp_path, capsys):
    """Each axis value is checked with the first of the others; a multiplier that leaves the
    bounds only under another axis's value (cloud pricing) is that scenario's error row."""
    s = tmp_path / "s.yaml"
    s.write_text(
        SMALL.format(model="llama2-7b").replace(
            "  budget: [1M, 2M]\n",
            "  budget: [1M]\n  pricing: [capex, cloud]\n"
            "  price_scale: [{h100-sxm: 1}, {h100-sxm: 0.001}]\n",
        )
        + "explain: false\n"
    )
    out = tmp_path / "r.csv"
    assert sweep(capsys, s, out)[0] == 0
    errors = [r for r in rows(out) if r["status"] == "error"]
    assert len(errors) == 1 and errors[0]["pricing"] == "cloud"
    assert errors[0]["error"].startswith("price_scale: h100-sxm x 0.001 sets its cloud_usd_")


# ---------------------------------------------------------------- 2: one value, two spellings
@pytest.mark.parametrize(
    "axis,values,shown",
    [
        ("budget", "[1M, 1000000]", "'1M' and 1000000"),
        ("budget", "[1M, 1000K]", "'1M' and '1000K'"),
        ("budget", "[2M, 1M, 1.0e+6]", "'1M' and 1000000.0"),
        ("deadline", "[90d, 2160h]", "'90d' and '2160h'"),
        ("tokens", "[100B, 1.0e+11]", "'100B' and 100000000000.0"),
        ("price_scale", "[{h100-sxm: 1}, {h100-sxm: 1.0}]", "{'h100-sxm': 1} and"),
    ],
)
def test_an_axis_value_given_twice_in_two_spellings_is_refused(
    tmp_path, capsys, axis, values, shown
):
    """Values compared as the scenario reads them, not as written (both ran, two rows of
    the same results under two scenario ids)."""
    s = _study(tmp_path, f"axes: {{{axis}: {values}}}\n")
    line = _refused_sweep(capsys, tmp_path, s, f"{s}: axes.{axis}: ", "give each value once")
    assert shown in line


def test_distinct_values_still_run(tmp_path, capsys):
    """1M and 2M, written alike or not, are two scenarios."""
    s = study(tmp_path)
    s.write_text(s.read_text().replace("[1M, 2M]", "[1M, 2000K]"))
    assert sweep(capsys, s, tmp_path / "r.csv")[0] == 0
    assert len(rows(tmp_path / "r.csv")) == 2


# ---------------------------------------------------------------- 3: --plot's format
def test_a_plot_format_that_cannot_be_drawn_is_refused_before_the_sweep(tmp_path, capsys):
    """--plot out.txt ran the whole sweep and wrote its CSV, then exited 2."""
    s = study(tmp_path)
    out = tmp_path / "r.csv"
    args = ["sweep", str(s), "--csv", str(out), "--plot", str(tmp_path / "out.txt")]
    refused(capsys, args, "--plot: ", "out.txt is a .txt file; name a .png or .svg file")
    assert not out.exists()


def test_compare_refuses_a_plot_format_before_solving(tmp_path, capsys, monkeypatch):
    """The same for compare: refused before any GPU type is solved."""

    def no_solve(*args, **kwargs):
        raise AssertionError("compare solved before checking --plot")

    monkeypatch.setattr(designer.compare, "compare", no_solve)
    args = ["compare", "--model", "llama2-7b", "--budget", "1M", "--gpu", "h100-sxm"]
    refused(capsys, [*args, "--plot", str(tmp_path / "x.txt")], "--plot: ", ".png or .svg")
    assert not (tmp_path / "x.txt").exists()


def test_the_plot_suffix_check(tmp_path):
    """.png and .svg in any case pass; any other suffix, or none, is refused."""
    for name in ("a.png", "a.svg", "a.PNG", "a.Svg"):
        check_paths({"--plot": tmp_path / name}, {})
    for name in ("a.txt", "a.pdf", "a.csv", "a"):
        with pytest.raises(UsageError, match=r"^--plot: .*name a \.png or \.svg file$"):
            check_paths({"--plot": tmp_path / name}, {})


# ---------------------------------------------------------------- 4: --address
def test_address_without_the_ray_executor_is_refused(tmp_path, capsys):
    """--address with the local executor was silently ignored (exit 0)."""
    s, out = study(tmp_path), tmp_path / "r.csv"
    args = ["sweep", str(s), "--csv", str(out), "--address", "foo"]
    refused(capsys, args, "--address: ", "--executor ray")
    refused(capsys, [*args, "--executor", "local"], "--address: ", "--executor ray")
    assert not out.exists()


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "base: {model: llama2-7b, gpu: [h100-sxm]}\naxes: {budget: [1M]}\n",
            ("base.gpu: unknown field; did you mean gpus?",),
        ),
        (
            "base: {model: llama2-7b, budget: 1M, time_limit: 5}\naxes: {budget: [1M]}\n",
            ("base.time_limit: not a question field", "at its top level beside base"),
        ),
        (
            "budget: 1M\nbase: {model: llama2-7b}\naxes: {budget: [1M]}\n",
            ("budget: a question field: put it under base",),
        ),
    ],
)
def test_a_studys_unknown_field_names_the_right_one(tmp_path, capsys, text, words):
    """A study's base said "unknown field; see designer sweep --schema" for `gpu` (the
    field is gpus) and for the study's own time_limit put under base."""
    s = tmp_path / "study.yaml"
    s.write_text(text)
    _refused_sweep(capsys, tmp_path, s, *words)


def test_a_studys_evidence_applies_to_its_named_gpus_only_when_given(tmp_path, capsys):
    """As in a question file: a base that names GPUs and leaves evidence out searches them
    whatever their evidence (in the workers too, which get the study as written); one
    that gives it keeps the pairs below the level out."""
    s = tmp_path / "study.yaml"
    base = "explain: false\nbase: {model: llama2-7b, tokens: 100B, gpus: [rtx4090]%s}\n"
    s.write_text(base % "" + "axes: {budget: [1M]}\n")
    out = tmp_path / "out.csv"
    code, _, err = sweep(capsys, s, out)
    assert code == 0, err
    assert [(r["status"], r["gpu"]) for r in rows(out)] == [("optimal", "rtx4090")]
    s.write_text(base % ", evidence: measured" + "axes: {budget: [1M]}\n")
    out.unlink()
    _refused_sweep(capsys, tmp_path, s, "base.evidence: none of the GPUs named (rtx4090)")


def test_the_local_pool_holds_a_few_scenarios_per_worker_not_the_study():
    """A 1,000,000-scenario study was submitted whole (2.4 GB, 15 rows in 25 s); now at
    most the window (IN_FLIGHT_PER_WORKER x workers) is submitted ahead of the rows
    yielded: submitted minus yielded, at every submission, stays within it."""
    from concurrent.futures import Future

    from designer import sweep

    yielded = [0]

    class Pool:
        submitted = 0
        most = 0

        def submit(self, fn, study_json, values, origin):
            self.submitted += 1
            self.most = max(self.most, self.submitted - yielded[0])
            fut: Future = Future()
            fut.set_result({"scenario": values["i"]})
            return fut

    pool = Pool()
    rows = []
    for row in sweep._in_flight(pool, "{}", [{"i": i} for i in range(1000)], "s.yaml", 8):  # type: ignore[arg-type]
        rows.append(row)
        yielded[0] += 1
    assert sorted(r["scenario"] for r in rows) == list(range(1000))
    assert pool.submitted == 1000 and pool.most <= 8


def test_a_ray_cluster_gets_a_window_of_scenarios_too():
    """On ray the whole study was submitted at once; now the window, the study put once."""
    from designer import sweep

    class Ray:
        submitted = 0
        yielded = 0
        most = 0
        puts = 0

        def remote(self, fn):
            ray = self

            class Remote:
                def remote(self, study, values, origin):
                    ray.submitted += 1
                    ray.most = max(ray.most, ray.submitted - ray.yielded)
                    assert study == "study-ref"
                    return values["i"]

            return Remote()

        def put(self, value):
            self.puts += 1
            return "study-ref"

        def wait(self, pending, num_returns):
            return pending[:num_returns], pending[num_returns:]

        def get(self, ref):
            self.yielded += 1
            return {"scenario": ref}

    ray = Ray()
    todo = [{"i": i} for i in range(500)]
    rows = list(sweep._ray_in_flight(ray, "{}", todo, "s.yaml", 12))
    assert sorted(r["scenario"] for r in rows) == list(range(500))
    assert ray.submitted == 500 and ray.most <= 12 and ray.puts == 1


def test_a_scenario_too_large_for_64_bit_arithmetic_is_its_error_row(tmp_path, capsys):
    """One scenario past the solver's 64-bit range (1e18 tokens at $100/kWh on a 4-day
    lifetime over a 1,000,000-day deadline, solvers.limits.QuestionTooLarge) stopped the
    whole study with exit 2 and a CSV of its header; it is that scenario's error row."""
    s = tmp_path / "s.yaml"
    s.write_text(
        "base:\n  model: llama2-7b\n  gpus: [h100-sxm]\n  tokens: 1e18\n  pricing: tco\n"
        "  usd_per_kwh: 100\n  lifetime_years: 0.01\naxes:\n  deadline: [1000000, 30]\n"
        "explain: false\n"
    )
    out = tmp_path / "r.csv"
    assert sweep(capsys, s, out)[0] == 0
    by_deadline = {r["deadline"]: r for r in rows(out)}
    assert by_deadline["1000000"]["status"] == "error"
    assert "64-bit arithmetic" in by_deadline["1000000"]["error"]
    assert by_deadline["30"]["status"] == "infeasible"
