"""`designer report` (issue 21): one data structure from a saved answer, a compare result or a
sweep's CSV; the page (self-contained, under 5 MB) and the workbook (BOM totals that are
formulas) lay it out. The browser test is tests/test_report_browser.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from designer import sweep
from designer.report.command import load
from helpers import REPO, SMALL_STUDY, one_line, run_cli, run_main

pytest.importorskip(
    "plotly", reason="the report extra is not installed: pip install -e '.[report]'"
)
openpyxl = pytest.importorskip("openpyxl", reason="the report extra is not installed")

QUESTION = ["--model", "llama2-7b", "--gpu", "h100-sxm", "--gpu", "h200", "--tokens", "20B"]
QUESTION += ["--max-batch-tokens", "1M", "--budget", "1M"]
UNCERTAIN = """\
base:
  model: llama2-7b
  tokens: 20B
  max_batch_tokens: 1M
  budget: 1M
  gpus: [h100-sxm, h200]
axes:
  max_gpus: [64]
uncertainty:
  samples: 6
  seed: 3
  price_scale:
    h100-sxm: [0.6, 1.4]
    h200: [0.6, 1.4]
"""
MB = 5_000_000


def _json(args: list[str], path: Path) -> Path:
    result = run_cli([*args, *QUESTION, "--json"])
    assert result.exit_code == 0, result.output
    path.write_text(result.output, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """An optimize answer (two plans), a compare result, a budget study and a Monte-Carlo
    study, each with its file beside it."""
    d = tmp_path_factory.mktemp("inputs")
    out = {
        "answer": _json(["optimize", "--top", "2"], d / "answer.json"),
        "compare": _json(["compare"], d / "compare.json"),
    }
    result = run_cli(
        ["breakeven", *QUESTION[:2], *QUESTION[6:], "--gpu", "h200", "--against", "h100-sxm"]
        + ["--json"]
    )
    assert result.exit_code == 0, result.output
    out["breakeven"] = d / "breakeven.json"
    out["breakeven"].write_text(result.output, encoding="utf-8")
    for name, text in (("study", SMALL_STUDY), ("uncertain", UNCERTAIN)):
        (d / f"{name}.yaml").write_text(text, encoding="utf-8")
        result = run_cli(["sweep", str(d / f"{name}.yaml"), "--workers", "1"])
        assert result.exit_code == 0, result.output
        out[name] = d / f"{name}.csv"
    return out


# ---------------------------------------------------------------- one data structure
def test_an_answer_report_holds_the_answer_as_saved(inputs):
    doc = json.loads(inputs["answer"].read_text())
    data = load(inputs["answer"])
    assert data.kind == "answer"
    assert data.recommendation == doc["explanation"]
    assert [p["num_gpus"] for p in data.plans] == [p["num_gpus"] for p in doc["plans"]]
    assert data.binding == doc["binding"]
    assert data.bom == doc["bom"]
    # each plan re-evaluated: its parts add up to the step time the answer saved
    assert len(data.breakdown) == len(doc["plans"])
    for entry, plan in zip(data.breakdown, doc["plans"], strict=True):
        assert sum(entry["parts"].values()) == pytest.approx(plan["step_time_s"], rel=1e-9)
    gpu = next(e for e in data.catalog if e["kind"] == "GPU")
    fields = dict(gpu["fields"])
    assert gpu["name"] == doc["plans"][0]["gpu"]
    assert fields["price_source"] and fields["price_date"]
    assert data.notes == []


def test_a_compare_report_has_one_plan_per_gpu_type_and_their_boms(inputs):
    doc = json.loads(inputs["compare"].read_text())
    data = load(inputs["compare"])
    assert data.kind == "compare"
    assert [p["gpu"] for p in data.plans] == [p["gpu"] for p in doc["plans"]]
    assert data.recommendation.startswith(f"Best GPU type: {doc['plans'][0]['gpu']}")
    assert data.bom is not None and data.bom["total_usd"] == pytest.approx(
        doc["plans"][0]["cost_usd"]
    )
    assert {e["label"] for e in data.breakdown} == {p["gpu"] for p in doc["plans"]}
    # every other GPU type's bill of materials, its total that plan's capex
    others = {o["gpu"]: o["bom"]["total_usd"] for o in data.other_boms}
    assert others == {p["gpu"]: pytest.approx(p["cost_usd"]) for p in doc["plans"][1:]}


def test_a_study_report_draws_its_rows(inputs):
    data = load(inputs["study"])
    st = data.study
    assert data.kind == "study" and st is not None
    rows = [r for r in st["rows"] if r["time_to_train_days"] is not None]
    assert len(st["rows"]) == 4 and st["axes"] == ["budget", "gpus"]
    # the Pareto front: no plan is both faster and cheaper than one on it
    for f in st["pareto"]:
        assert not any(
            r["time_to_train_days"] < f["time_to_train_days"] and r["cost_usd"] < f["cost_usd"]
            for r in rows
        )
    # one time-against-budget series per GPU type, budgets in order
    assert {c["name"] for c in st["budget_curves"]} == {r["gpu"] for r in rows}
    for c in st["budget_curves"]:
        assert [p["budget_usd"] for p in c["points"]] == sorted(
            p["budget_usd"] for p in c["points"]
        )
    # one winner per budget, the fastest of that budget's rows
    for w in st["winners"]:
        same = [r for r in rows if r["budget"] == w["budget"]]
        assert w["time_to_train_days"] == min(r["time_to_train_days"] for r in same)
    # the study file beside the CSV gives the question, catalog, BOM and breakdowns
    assert data.question["axes.budget"] == ["300K", "1M"]
    assert data.bom is not None and data.catalog and data.breakdown


def test_a_monte_carlo_study_reports_win_shares_and_prices(inputs):
    data = load(inputs["uncertain"])
    st = data.study
    assert st["win_shares"] == sweep.summary(inputs["uncertain"])
    assert len(st["price_points"]) == 6
    assert {e["gpu"] for e in st["price_wins"]} == {"h100-sxm", "h200"}
    for e in st["price_wins"]:
        assert e["won_up_to"] is not None or e["lost_from"] is not None
    assert "wins" in data.recommendation and "%" in data.recommendation


def test_a_study_csv_without_its_study_file_still_reports(inputs, tmp_path):
    lone = tmp_path / "lone.csv"
    lone.write_bytes(inputs["study"].read_bytes())
    data = load(lone)
    assert data.study and data.study["pareto"] and data.bom is None
    assert any("--study" in n for n in data.notes)
    explicit = load(lone, study_file=inputs["study"].with_suffix(".yaml"))
    assert explicit.bom is not None


def test_a_breakeven_report_shows_the_price_and_both_plans(inputs, tmp_path):
    doc = json.loads(inputs["breakeven"].read_text())
    data = load(inputs["breakeven"])
    assert data.kind == "breakeven"
    assert data.breakeven[0]["breakeven_price_usd"] == doc["breakeven_price_usd"]
    assert [p["gpu"] for p in data.plans] == ["h200", "h100-sxm"]
    assert data.recommendation.startswith("h200 wins the job against h100-sxm at or below")
    book = tmp_path / "b.xlsx"
    assert run_cli(["report", str(inputs["breakeven"]), "--xlsx", str(book)]).exit_code == 0
    rows = list(openpyxl.load_workbook(book)["break-even"].iter_rows(values_only=True))
    assert rows[1][4] == pytest.approx(doc["breakeven_price_usd"])
    assert rows[1][5] == pytest.approx(
        100 * (doc["breakeven_price_usd"] / doc["catalog_price_usd"] - 1)
    )


def test_a_study_file_that_did_not_write_the_csv_is_refused_or_noted(inputs, tmp_path, capsys):
    other = tmp_path / "other.yaml"
    other.write_text(SMALL_STUDY.replace("20B", "30B"), encoding="utf-8")
    args = ["report", str(inputs["study"]), "--xlsx", str(tmp_path / "o.xlsx")]
    code, _, err = run_main(capsys, [*args, "--study", str(other)])
    assert code == 2 and "did not write" in one_line(err) and "--study" in err
    beside = tmp_path / "beside.csv"
    beside.write_bytes(inputs["study"].read_bytes())
    other.rename(beside.with_suffix(".yaml"))
    data = load(beside)
    assert data.bom is None and any("not the study that wrote" in n for n in data.notes)


def test_a_damaged_results_csv_exits_2_naming_its_line(inputs, tmp_path, capsys):
    lines = inputs["study"].read_text(encoding="utf-8").splitlines()
    head = lines[0].split(",")
    cells = lines[1].split(",")
    cells[head.index("num_gpus")] = "many"
    bad = tmp_path / "bad.csv"
    bad.write_text("\n".join([lines[0], ",".join(cells), *lines[2:]]) + "\n", encoding="utf-8")
    code, _, err = run_main(capsys, ["report", str(bad), "--xlsx", str(tmp_path / "o.xlsx")])
    assert code == 2 and f"{bad}: line 2" in one_line(err)


def test_a_results_csv_of_more_rows_than_its_study_or_a_report_holds_exits_2(
    inputs, tmp_path, capsys, monkeypatch
):
    """150,000 rows for a study of 100,000 scenarios were read (3.8 GB, 100 s): rows beyond
    the study's scenarios, or beyond MAX_REPORT_ROWS, exit 2 before anything is built."""
    from designer.report import study as study_report

    lines = inputs["study"].read_text(encoding="utf-8").splitlines()
    extra = tmp_path / "extra.csv"
    extra.write_text("\n".join([*lines, lines[1]]) + "\n", encoding="utf-8")
    (tmp_path / "extra.yaml").write_bytes(inputs["study"].with_suffix(".yaml").read_bytes())
    code, _, err = run_main(capsys, ["report", str(extra), "--html", str(tmp_path / "o.html")])
    assert code == 2
    assert f"{extra}: {len(lines):,} rows, more than the {len(lines) - 1:,} scenarios" in err
    monkeypatch.setattr(study_report, "MAX_REPORT_ROWS", len(lines) - 2)
    args = ["report", str(inputs["study"]), "--html", str(tmp_path / "p.html")]
    code, _, err = run_main(capsys, args)
    assert code == 2 and f"more than the {len(lines) - 2:,} a report holds" in one_line(err)


# ---------------------------------------------------------------- the page
@pytest.mark.parametrize(
    "name, charts",
    [
        ("answer", {"binding", "pareto", "breakdown"}),
        ("compare", {"binding", "pareto", "breakdown"}),
        ("study", {"budget", "pareto", "breakdown"}),
        ("uncertain", {"pareto", "win_share", "breakeven", "breakdown"}),
        ("breakeven", {"pareto"}),
    ],
)
def test_the_page_is_self_contained_and_small(inputs, tmp_path, name, charts):
    page = tmp_path / "r.html"
    code = run_cli(["report", str(inputs[name]), "--html", str(page)])
    assert code.exit_code == 0, code.output
    text = page.read_text(encoding="utf-8")
    assert page.stat().st_size < MB
    assert set(re.findall(r"data-chart='(\w+)'", text)) == charts
    assert text.count("Plotly.newPlot") == len(charts)
    # no network: nothing loaded from elsewhere, Plotly's library inlined once
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=|@import", text)
    assert text.count("plotly.js v") == 1
    data = load(inputs[name])
    assert data.plans[0]["label"] in text.replace("&#x27;", "'")


# ---------------------------------------------------------------- the workbook
def _value(ws, ref: str, cache: dict[str, float]) -> float:
    """A BOM cell's value, its formula (=Bn*Cn or =SUM(Dn:Dm)) evaluated."""
    if ref in cache:
        return cache[ref]
    v = ws[ref].value
    if isinstance(v, str) and (m := re.fullmatch(r"=([A-Z]+\d+)\*([A-Z]+\d+)", v)):
        out = _value(ws, m[1], cache) * _value(ws, m[2], cache)
    elif isinstance(v, str) and (m := re.fullmatch(r"=SUM\(([A-Z])(\d+):\1(\d+)\)", v)):
        out = sum(_value(ws, f"{m[1]}{r}", cache) for r in range(int(m[2]), int(m[3]) + 1))
    else:
        assert isinstance(v, (int, float)), f"{ref}: {v!r} is neither a number nor a formula"
        out = float(v)
    cache[ref] = out
    return out


def _bom_total(ws) -> tuple[str, float]:
    row = next(r for r in range(1, ws.max_row + 1) if ws.cell(r, 1).value == "total (capex)")
    assert ws.cell(row, 4).value.startswith("=SUM(")
    return f"D{row}", _value(ws, f"D{row}", {})


@pytest.mark.parametrize(
    "name, sheet", [("answer", "BOM"), ("compare", "BOM"), ("compare", "BOM 2"), ("study", "BOM")]
)
def test_the_workbook_totals_are_formulas_that_follow_the_prices(inputs, tmp_path, name, sheet):
    book = tmp_path / "r.xlsx"
    assert run_cli(["report", str(inputs[name]), "--xlsx", str(book)]).exit_code == 0
    data = load(inputs[name])
    wb = openpyxl.load_workbook(book)
    assert {"plans", "BOM", "binding", "assumptions"} <= set(wb.sheetnames)
    bom = data.bom
    if sheet == "BOM 2":  # compare: the second GPU type's own sheet
        sheet, bom = f"BOM {data.other_boms[0]['gpu']}", data.other_boms[0]["bom"]
    ws = wb[sheet]
    ref, total = _bom_total(ws)
    assert total == pytest.approx(bom["total_usd"], abs=0.01)
    # every line total is quantity x unit price
    for r in range(2, int(ref[1:])):
        assert ws.cell(r, 4).value == f"=B{r}*C{r}"
    # a buyer changes the GPU's unit price: the total moves through the formulas
    gpu_row = next(r for r in range(2, ws.max_row) if str(ws.cell(r, 1).value).startswith("GPU "))
    qty, unit = ws.cell(gpu_row, 2).value, ws.cell(gpu_row, 3).value
    ws.cell(gpu_row, 3).value = unit - 1000
    assert _value(ws, ref, {}) == pytest.approx(total - 1000 * qty, abs=0.01)
    # sources beside the prices, the question and catalog in the assumptions
    assert all(ws.cell(r, 5).value for r in range(2, int(ref[1:])))
    fields = {row[1] for row in wb["assumptions"].iter_rows(values_only=True)}
    assert "recommendation" in fields and "price_source" in fields


def test_the_workbook_holds_the_plans_study_rows_and_binding(inputs, tmp_path):
    book = tmp_path / "s.xlsx"
    assert run_cli(["report", str(inputs["study"]), "--xlsx", str(book)]).exit_code == 0
    wb = openpyxl.load_workbook(book)
    data = load(inputs["study"])
    assert wb["study"].max_row == 1 + len(data.study["rows"])
    assert wb["plans"].max_row == 1 + len(data.plans)
    head = [c.value for c in wb["plans"][1]]
    days = [r[head.index("days")] for r in wb["plans"].iter_rows(min_row=2, values_only=True)]
    assert days == pytest.approx([p["time_to_train_days"] for p in data.plans], rel=1e-12)
    answer = tmp_path / "a.xlsx"
    assert run_cli(["report", str(inputs["answer"]), "--xlsx", str(answer)]).exit_code == 0
    binding = openpyxl.load_workbook(answer)["binding"]
    doc = json.loads(inputs["answer"].read_text())
    assert binding.max_row == 1 + len(doc["binding"])


# ---------------------------------------------------------------- the command
def test_the_quick_start_works(tmp_path):
    """README's quick start, as a shell runs it: optimize --budget 30M --json, then report
    it (fresh processes: the default question solved in this process would warm caches that
    tests/test_exhaustive.py's time-limit test needs cold)."""
    answer = tmp_path / "a.json"
    with open(answer, "w", encoding="utf-8") as fh:
        proc = subprocess.run(
            [sys.executable, "-m", "designer", "optimize", "--budget", "30M", "--json"],
            stdout=fh,
            cwd=tmp_path,
        )
    assert proc.returncode == 0
    args = ["report", "a.json", "--html", "a.html", "--xlsx", "a.xlsx"]
    proc = subprocess.run(
        [sys.executable, "-m", "designer", *args], cwd=tmp_path, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    assert "page: a.html" in proc.stdout and "workbook: a.xlsx" in proc.stdout
    assert (tmp_path / "a.html").stat().st_size < MB
    assert openpyxl.load_workbook(tmp_path / "a.xlsx")["BOM"].max_row > 3


@pytest.mark.parametrize("module", ["plotly", "openpyxl"])
def test_without_the_extra_report_names_it(inputs, tmp_path, capsys, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)  # import fails as if not installed
    args = ["report", str(inputs["answer"]), "--html", str(tmp_path / "a.html")]
    code, _, err = run_main(capsys, [*args, "--xlsx", str(tmp_path / "a.xlsx")])
    assert code == 2
    assert "pip install 'designer[report]'" in one_line(err)
    assert not (tmp_path / "a.html").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        ([], "--html"),
        (["--xlsx", "X", "--open"], "--open"),
        (["--html", "{input}"], "destroy"),
        (["--html", "X", "--study", "s.yaml"], "--study"),
    ],
)
def test_report_usage_errors(inputs, tmp_path, capsys, args, needle):
    args = [
        a.replace("X", str(tmp_path / "x")).replace("{input}", str(inputs["answer"])) for a in args
    ]
    code, _, err = run_main(capsys, ["report", str(inputs["answer"]), *args])
    assert code == 2
    assert needle in one_line(err)


@pytest.mark.parametrize(
    "content, needle",
    [("a,b\n1,2\n", "not a results CSV"), ("{not json", "FILE"), (None, "no such file")],
)
def test_report_refuses_what_is_not_an_answer(tmp_path, capsys, content, needle):
    path = tmp_path / ("in.csv" if content and content.startswith("a,b") else "in.json")
    if content is not None:
        path.write_text(content, encoding="utf-8")
    code, _, err = run_main(capsys, ["report", str(path), "--xlsx", str(tmp_path / "o.xlsx")])
    assert code == 2
    assert str(path) in one_line(err) or needle in one_line(err)


def test_open_uses_the_browser_or_says_there_is_none(inputs, tmp_path, capsys, monkeypatch):
    import webbrowser

    opened: list[str] = []

    class Browser:
        def open(self, url: str) -> bool:
            opened.append(url)
            return True

    page = tmp_path / "p.html"
    monkeypatch.setattr(webbrowser, "get", lambda *a: Browser())
    code, out, _ = run_main(
        capsys, ["report", str(inputs["answer"]), "--html", str(page), "--open"]
    )
    assert code == 0 and opened == [page.resolve().as_uri()] and "opened" in out

    def none(*a):
        raise webbrowser.Error("could not locate runnable browser")

    monkeypatch.setattr(webbrowser, "get", none)
    code, out, _ = run_main(
        capsys, ["report", str(inputs["answer"]), "--html", str(page), "--open"]
    )
    assert code == 0 and "no web browser" in out and page.exists()


def test_help_does_not_import_the_report_libraries():
    code = (
        "import sys\n"
        "from designer.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "try:\n    main(['report', '--help'])\nexcept SystemExit:\n    pass\n"
        "print('LOADED', sorted(m for m in ('plotly', 'openpyxl') if m in sys.modules), file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.stderr.strip().splitlines()[-1] == "LOADED []", proc.stderr


def test_a_question_file_is_answered_then_reported(tmp_path):
    q = tmp_path / "q.yaml"
    q.write_text(
        "model: llama2-7b\ntokens: 20B\nmax_batch_tokens: 1M\nbudget: 1M\ngpus: [h100-sxm]\n",
        encoding="utf-8",
    )
    data = load(q)
    assert data.kind == "answer" and data.plans and data.recommendation.startswith("Best plan")


def test_an_answer_without_a_plan_reports_it(tmp_path):
    """optimize exits 1 but saves its JSON; the report says there is no plan (--no-explain:
    explaining the conflict takes about 10 s)."""
    args = ["optimize", *QUESTION[:4], *QUESTION[6:10], "--budget", "20K", "--json"]
    args.append("--no-explain")
    result = run_cli(args)
    assert result.exit_code == 1
    answer = tmp_path / "none.json"
    answer.write_text(result.output.split("\ndesigner:")[0], encoding="utf-8")
    data = load(answer)
    assert data.plans == [] and data.bom is None
    assert data.recommendation == json.loads(answer.read_text())["explanation"]
    assert data.recommendation.startswith("No plan")
    page = tmp_path / "none.html"
    assert run_cli(["report", str(answer), "--html", str(page)]).exit_code == 0
    assert data.recommendation in page.read_text(encoding="utf-8")


def test_an_explain_answer_is_reported_like_optimize_s(inputs, tmp_path):
    """`designer explain SAVED.json --json` prints optimize's object for the saved plan."""
    result = run_cli(["explain", str(inputs["answer"]), "--json"])
    assert result.exit_code == 0, result.output
    explained = tmp_path / "explained.json"
    explained.write_text(result.output, encoding="utf-8")
    data = load(explained)
    assert data.kind == "answer" and data.recommendation.startswith("The saved plan")
    assert data.bom == json.loads(result.output)["bom"] and data.breakdown
