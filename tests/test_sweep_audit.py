"""designer sweep: the defects of the sweep audit. An axis named like a plan column
(precision, evidence, dispatcher) keeps its value under a column of its own; a model spec
file missing beside the study is refused rather than read from the working folder; true and
false are not numbers in the study's own fields; --plot on a study with no plan still reports
and exits as without it; axis values equal once parsed (lists of names, paths) are refused."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from designer.question.build import load_question_file
from designer.sweep import AXIS_FIELDS, Study, columns
from helpers import SPEC, one_line, refused, rows, run_main, sweep

FAST = "base: {model: llama2-7b, tokens: 20B, max_batch_tokens: 1M, %s}\nexplain: false\n"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _header(path: Path) -> list[str]:
    with path.open(newline="") as fh:
        return next(csv.reader(fh))


# ---------------------------------------------------------------- 1: axis and plan columns
def test_an_axis_named_like_a_plan_column_keeps_its_value(tmp_path, capsys):
    """precision and evidence axes: one column each, named axes.NAME, beside the plan's own
    precision and evidence columns (the plan wrote over the axis's value, under two columns
    of one name)."""
    s = _write(
        tmp_path / "coll.yaml",
        FAST % "budget: 2M, gpus: [h100-sxm, h200]"
        + "axes: {precision: [bf16, any], evidence: [measured, any]}\n",
    )
    out = tmp_path / "coll.csv"
    code, _, err = sweep(capsys, s, out)
    assert code == 0, err
    head = _header(out)
    assert len(head) == len(set(head)), head
    assert head[1:3] == ["axes.precision", "axes.evidence"]
    got = rows(out)
    assert [(r["axes.precision"], r["axes.evidence"]) for r in got] == [
        ("bf16", "measured"),
        ("bf16", "any"),
        ("any", "measured"),
        ("any", "any"),
    ]
    assert {r["precision"] for r in got} <= {"bf16", "fp8"}  # the plan's, never "any"
    assert {r["evidence"] for r in got} <= {"measured", "thin", "extrapolated"}


def test_the_report_reads_a_renamed_axis_and_the_plans_columns(tmp_path, capsys):
    """designer report takes the axis from its column and the plan's evidence from the
    plan's column (a status, not the axis's "any")."""
    # lazy: the report package loads only for this test
    from designer.report.study import study_report

    s = _write(
        tmp_path / "ev.yaml",
        FAST % "budget: 2M, gpus: [h100-sxm]" + "axes: {evidence: [measured, any]}\n",
    )
    out = tmp_path / "ev.csv"
    assert sweep(capsys, s, out)[0] == 0
    data = study_report(out, s)
    assert data.study["axes"] == ["axes.evidence"]
    got = data.study["rows"]
    assert [r["axes.evidence"] for r in got] == ["measured", "any"]
    assert all(r["evidence"]["status"] == "measured" for r in got)


def test_a_dispatcher_axis_on_a_dense_model_keeps_its_values(tmp_path, capsys):
    s = _write(
        tmp_path / "disp.yaml",
        FAST % "budget: 2M, gpus: [h100-sxm]" + "axes: {dispatcher: [alltoall, deepep]}\n",
    )
    out = tmp_path / "disp.csv"
    assert sweep(capsys, s, out)[0] == 0
    got = rows(out)
    assert [r["axes.dispatcher"] for r in got] == ["alltoall", "deepep"]
    assert [r["dispatcher"] for r in got] == ["", ""]  # a dense plan has no dispatcher
    assert _header(out).count("dispatcher") == 1


@pytest.mark.parametrize("name", AXIS_FIELDS)
def test_every_axis_has_a_column_of_its_own(name):
    study = Study.model_validate({"axes": {name: [1]}})
    cols = columns(study)
    assert len(cols) == len(set(cols)), name
    assert cols[1] in (name, f"axes.{name}")


# ---------------------------------------------------------------- 2: model files
@pytest.mark.parametrize("where", ["axes", "base"])
def test_a_model_file_not_beside_the_study_is_refused(tmp_path, monkeypatch, capsys, where):
    """A path that names a file only from the working folder was read from there, and the
    study's hash (which reads the file beside the study) did not see it: --resume kept
    stale rows. Refused, naming the field and the path tried."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "sub/models/tiny.json", SPEC)
    model = "sub/models/tiny.json"
    text = (
        "base: {tokens: 100B, budget: 1M, gpus: [h100-sxm]}\naxes: {model: [" + model + "]}\n"
        if where == "axes"
        else "base: {model: " + model + ", tokens: 100B, gpus: [h100-sxm]}\naxes: {budget: [1M]}\n"
    )
    s = _write(tmp_path / "q/s.yaml", text)
    out = tmp_path / "s.csv"
    args = ["sweep", str(s), "--csv", str(out), "--workers", "1"]
    refused(capsys, args, f"{s}: {where}.model: ", str(Path("q") / model))
    assert not out.exists()


def test_a_model_file_beside_the_study_is_read(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "q/sub/tiny.json", SPEC)
    s = _write(
        tmp_path / "q/s.yaml",
        "base: {tokens: 100B, budget: 1M, gpus: [h100-sxm]}\naxes: {model: [sub/tiny.json]}\n"
        "explain: false\n",
    )
    code, _, err = sweep(capsys, s, tmp_path / "s.csv")
    assert code == 0, err


def test_a_question_file_still_finds_its_model_in_the_working_folder(tmp_path, monkeypatch):
    """Unchanged for question files: a model path not beside the file is read from the
    working folder."""
    monkeypatch.chdir(tmp_path)
    _write(tmp_path / "m/tiny.json", SPEC)
    q = _write(tmp_path / "q/ask.yaml", "model: m/tiny.json\ntokens: 100B\nbudget: 1M\n")
    scenario, _ = load_question_file(q)
    assert scenario.spec.layers == 2


# ---------------------------------------------------------------- 3: true and false
BOOL_FIELDS = [
    ("axes: {price_scale: [{h100-sxm: true}]}\n", "axes.price_scale"),
    ("axes: {budget: [1M]}\nuncertainty: {samples: true, price_scale: {h100-sxm: [0.8, 1.2]}}\n",
     "uncertainty.samples"),
    ("axes: {budget: [1M]}\nuncertainty: {samples: 2, seed: true, price_scale: {h100-sxm: [0.8, 1.2]}}\n",
     "uncertainty.seed"),
    ("axes: {budget: [1M]}\nuncertainty: {samples: 2, price_scale: {h100-sxm: [true, 1.2]}}\n",
     "uncertainty.price_scale"),
    ("axes: {budget: [1M]}\nuncertainty: {samples: 2, failure_scale: [false, true]}\n",
     "uncertainty.failure_scale"),
    ("axes: {budget: [1M]}\ntime_limit: true\n", "time_limit"),
]  # fmt: skip


@pytest.mark.parametrize("text,field", BOOL_FIELDS)
def test_true_and_false_are_not_numbers_in_a_study(tmp_path, capsys, text, field):
    s = _write(
        tmp_path / "b.yaml", "base: {model: llama2-7b, tokens: 1T, gpus: [h100-sxm]}\n" + text
    )
    out = tmp_path / "b.csv"
    refused(capsys, ["sweep", str(s), "--csv", str(out), "--workers", "1"], f"{s}: {field}")
    assert not out.exists()


# ---------------------------------------------------------------- 4: --plot with no plan
@pytest.mark.parametrize(
    "more",
    ["axes: {budget: [1K, 2K]}\n", "axes: {max_gpus: [8]}\n"
     "uncertainty: {samples: 2, price_scale: {h100-sxm: [0.9, 1.1]}}\n"],
)  # fmt: skip
def test_plot_without_a_plan_still_reports(tmp_path, capsys, more):
    """As compare does: the rows and the summary printed, the exit code of the sweep
    without --plot, one line on stderr saying that nothing was drawn, no file."""
    s = _write(tmp_path / "none.yaml", FAST % "budget: 1K, gpus: [h100-sxm]" + more)
    out = tmp_path / "none.csv"
    code, plain, plain_err = sweep(capsys, s, out)
    picture = tmp_path / "p.png"
    code2, text, err = sweep(capsys, s, out, "--plot", str(picture))
    assert code == code2 == 0
    assert text == plain and "scenarios run, results in" in text
    assert not plain_err
    assert one_line(err) == "designer: --plot: no scenario has a plan to draw; nothing drawn"
    assert not picture.exists()
    assert all(r["status"] != "optimal" for r in rows(out))


# ---------------------------------------------------------------- 5: values equal once parsed
@pytest.mark.parametrize(
    "axis,field",
    [
        ("gpus: [[h100-sxm], [h100-sxm, h100-sxm]]", "gpus"),
        ("gpus: [[h100-sxm, h200], [h200, h100-sxm]]", "gpus"),
        ("catalog: [[q/cheap.yaml], [./q/cheap.yaml]]", "catalog"),
        ("model: [sub/tiny.json, ./sub/tiny.json]", "model"),
        ("model: [sub/tiny.json, sub/../sub/tiny.json]", "model"),
    ],
)
def test_axis_values_equal_once_parsed_are_refused(tmp_path, capsys, axis, field):
    _write(tmp_path / "q/cheap.yaml", "gpus:\n  h100-sxm:\n    price_usd: 16000\n")
    _write(tmp_path / "sub/tiny.json", SPEC)
    s = _write(
        tmp_path / "st.yaml",
        "base: {tokens: 100B, budget: 1M, gpus: [h100-sxm]}\naxes: {" + axis + "}\n",
    )
    out = tmp_path / "st.csv"
    args = ["sweep", str(s), "--csv", str(out), "--workers", "1"]
    line = refused(capsys, args, f"{s}: axes.{field}: ", "are the same value")
    assert "give each value once" in line
    assert not out.exists()


def test_different_gpu_sets_and_catalog_orders_still_run(tmp_path, capsys):
    """Not every list is a set: [a, b] and [b, a] catalogs differ (a later file overrides)."""
    _write(tmp_path / "a.yaml", "gpus:\n  h100-sxm:\n    price_usd: 16000\n")
    _write(tmp_path / "b.yaml", "gpus:\n  h100-sxm:\n    price_usd: 20000\n")
    s = _write(
        tmp_path / "st.yaml",
        FAST % "budget: 1M, gpus: [h100-sxm]"
        + "axes: {catalog: [[a.yaml, b.yaml], [b.yaml, a.yaml]]}\n",
    )
    code, text, err = sweep(capsys, s, tmp_path / "st.csv")
    assert code == 0, err
    assert text.startswith("2 scenarios run")


def test_a_run_without_plot_is_unchanged(tmp_path, capsys):
    s = _write(tmp_path / "ok.yaml", FAST % "gpus: [h100-sxm]" + "axes: {budget: [1M]}\n")
    code, text, _ = run_main(capsys, ["sweep", str(s), "--csv", str(tmp_path / "ok.csv")])
    assert code == 0 and text == f"1 scenarios run, results in {tmp_path / 'ok.csv'}\n"
