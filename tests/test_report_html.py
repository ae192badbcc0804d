"""designer/report/html.py: `designer report --html`'s page built directly from report data
made here (no CliRunner, no solve): Plotly's JavaScript once and each chart in its own div,
the sections an answer, a study and a break-even get (and those left out when empty), the
tables read back cell by cell (numbers right-aligned, empty plan columns dropped, the bill
of materials' total, the question's model spec folded away), and every text escaped."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from plotly.offline import get_plotlyjs

from designer.report.data import ReportData
from designer.report.html import _table, charts, page

PLAN = {
    "rank": 1, "gpu": "h100-sxm", "num_gpus": 1024, "nodes": 128, "nics_per_node": 8,
    "nic": "cx7-400g", "tp": 8, "pp": 4, "dp": 32, "cp": 1, "vp": 1, "micro_batch": 1,
    "grad_accum": 16, "recompute": "selective", "memory_gb_per_gpu": 61.2, "step_time_s": 5.5,
    "time_to_train_days": 30.0, "cost_usd": 2.5e7, "mfu": 0.43, "label": "plan one",
}  # fmt: skip
BINDING = [
    {"constraint": "budget", "detail": "$25M of $25M", "relaxation": "+10% budget",
     "improvement_if_relaxed": 2.5, "improvement_pct": 8.3, "binding": True},
]  # fmt: skip
BOM = {
    "lines": [
        {"item": "GPU h100-sxm", "quantity": 1024, "unit_usd": 20000.0,
         "extended_usd": 20480000.0, "source": "catalog"},
    ],
    "total_usd": 20480000.0,
    "it_kw": 1234.4,
    "racks": 32,
}  # fmt: skip
HOSTILE = "<script>alert(1)</script>"


def answer(**fields) -> ReportData:
    second = {**PLAN, "rank": 2, "gpu": "h200", "num_gpus": 512, "cost_usd": 2.0e7,
              "time_to_train_days": 40.0, "label": "plan two"}  # fmt: skip
    base = dict(
        kind="answer",
        source="answer.json",
        title="llama2-70b on 2T tokens: fastest plan",
        recommendation="Buy 1,024 H100s.",
        objective={"name": "time_to_train", "unit": "days"},
        plans=[dict(PLAN), second],
        binding=[dict(b) for b in BINDING],
        bom=BOM,
        bom_plan="plan one",
        breakdown=[
            {
                "label": "#1",
                "plan": "plan one",
                "step_time_s": 5.5,
                "parts": {"compute": 4.0, "dp_comm": 1.5},
            }
        ],  # fmt: skip
        question={
            "model": "llama2-70b",
            "tokens": 2e12,
            "gpus": ["h100-sxm", "h200"],
            "model_spec": {"layers": 80, "hidden": 8192},
        },  # fmt: skip
        catalog=[
            {
                "kind": "gpu",
                "name": "h100-sxm",
                "fields": [("price_usd", 20000.0), ("source", "a list price")],
            }
        ],  # fmt: skip
    )
    return ReportData(**{**base, **fields})


class _Tables(HTMLParser):
    """Every table of a page: its header texts and its rows of (text, right-aligned)."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: list[dict] = []
        self._cell: list | None = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"class": dict(attrs).get("class"), "head": [], "rows": []})
        elif tag == "tr" and self.tables:
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = [tag, "", ("class", "n") in attrs]

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[1] += data

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            kind, text, right = self._cell
            t = self.tables[-1]
            if kind == "th":
                t["head"].append(text)
            else:
                t["rows"][-1].append((text, right))
            self._cell = None
        if tag == "table":
            t = self.tables[-1]
            t["rows"] = [r for r in t["rows"] if r]  # the header's row holds no cells


def tables(html: str) -> list[dict]:
    parser = _Tables()
    parser.feed(html)
    return parser.tables


def section(html: str, title: str) -> str:
    start = html.index(f"<h2>{title}</h2>")
    return html[start : html.index("</section>", start)]


@pytest.fixture(scope="module")
def answer_page() -> str:
    return page(answer())


# --------------------------------------------------------------------- tables


def test_a_table_escapes_text_and_right_aligns_numbers_not_booleans():
    (t,) = tables(_table(["a", "b", "c"], [[("<b>", None), ("1,024", 1024), ("yes", True)]]))
    assert t["head"] == ["a", "b", "c"]
    assert t["rows"] == [[("<b>", False), ("1,024", True), ("yes", False)]]
    assert "<b>" not in _table(["a"], [[("<b>", None)]])  # escaped in the markup


def test_the_plans_table_drops_columns_with_nothing_to_show():
    rows = [[("1", 1), ("-", None), ("x", "x")], [("2", 2), ("", None), ("-", None)]]
    (t,) = tables(_table(["#", "empty", "some"], rows, "plans"))
    assert t["head"] == ["#", "some"]
    assert t["rows"] == [[("1", True), ("x", False)], [("2", True), ("-", False)]]
    (kept,) = tables(_table(["#", "empty", "some"], rows))  # other tables keep every column
    assert kept["head"] == ["#", "empty", "some"]


# --------------------------------------------------------------------- charts


def test_each_applicable_chart_gets_its_div_without_plotly_js():
    figs = charts(answer())
    assert list(figs) == ["binding", "pareto", "breakdown"]
    for name, div in figs.items():
        assert div.startswith(f"<div class='chart' data-chart='{name}'>")
        assert f'id="chart-{name}"' in div
        assert len(div) < 100_000  # the library is not inlined per chart


# --------------------------------------------------------------------- the page


def test_the_page_inlines_plotly_once(answer_page):
    assert answer_page.startswith("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>")
    assert answer_page.count(get_plotlyjs()) == 1
    assert answer_page.endswith("</main></body></html>")
    for name in ("binding", "pareto", "breakdown"):
        assert answer_page.count(f"data-chart='{name}'") == 1


def test_an_answer_page_has_its_sections_in_order(answer_page):
    heads = ["Recommendation", "Plans", "What limits the best plan", "Time and cost"]
    heads += ["Bill of materials", "Step time", "The question"]
    heads += ["Catalog entries used (prices, sources and dates)"]
    at = [answer_page.index(f"<h2>{h}</h2>") for h in heads]
    assert at == sorted(at)
    assert "<p class=rec>Buy 1,024 H100s.</p>" in section(answer_page, "Recommendation")
    assert "<p class=meta>designer report of answer.json (answer); designer " in answer_page


def test_the_plans_table_holds_the_plans(answer_page):
    (t,) = tables(section(answer_page, "Plans"))
    cells = dict(zip(t["head"], t["rows"][0], strict=True))
    assert cells["gpus"] == ("1,024", True) and cells["cost USD"] == ("$25.00M", True)
    assert cells["tp/pp/dp/cp/vp"] == ("8/4/32/1/1", False)
    assert "cost range" not in t["head"] and "evidence" not in t["head"]  # no evidence saved
    assert [r[1][0] for r in t["rows"]] == ["h100-sxm", "h200"]


def test_the_bill_of_materials_has_its_total_and_facts(answer_page):
    bom = section(answer_page, "Bill of materials")
    (t,) = tables(bom)
    assert t["rows"][0][0] == ("GPU h100-sxm", False)
    assert t["rows"][-1] == [
        ("total (capex)", False), ("", False), ("", False), ("$20,480,000.00", True), ("", False)
    ]  # fmt: skip
    assert "IT power 1,234 kW; 32 racks" in bom
    assert "<p class=src>Plan: plan one</p>" in bom
    assert "Other GPU types" not in bom


def test_other_gpu_types_totals_are_listed():
    other = [{"gpu": "h200", "plan": "plan two", "bom": {"total_usd": 1.5e7, "lines": []}}]
    bom = section(page(answer(other_boms=other)), "Bill of materials")
    assert "Other GPU types' totals (their lines in the workbook): h200 $15.00M" in bom


def test_the_question_folds_the_model_spec_away(answer_page):
    q = section(answer_page, "The question")
    main, spec = tables(q)
    assert ["model", "llama2-70b"] == [c[0] for c in main["rows"][0]]
    assert ["gpus", "h100-sxm, h200"] == [c[0] for c in main["rows"][2]]
    assert "<summary>the model's spec (2 fields)</summary>" in q
    assert [[c[0] for c in r] for r in spec["rows"]] == [
        ["model_spec.layers", "80"],
        ["model_spec.hidden", "8,192"],
    ]


def test_the_catalog_names_each_entry_once(answer_page):
    (t,) = tables(section(answer_page, "Catalog entries used (prices, sources and dates)"))
    assert [[c[0] for c in r] for r in t["rows"]] == [
        ["gpu", "h100-sxm", "price_usd", "20,000"],
        ["", "", "source", "a list price"],
    ]


def test_empty_parts_are_left_out():
    bare = page(answer(plans=[], binding=[], bom=None, breakdown=[], question=None, catalog=[]))
    for head in ("Plans", "What limits the best plan", "Time and cost", "Bill of materials",
                 "Step time", "The question", "Catalog entries used"):  # fmt: skip
        assert f"<h2>{head}" not in bare, head
    assert "<h2>Recommendation</h2>" in bare and "data-chart" not in bare


def test_every_text_is_escaped():
    hostile = answer(
        title=HOSTILE,
        source=HOSTILE,
        recommendation=HOSTILE,
        notes=[HOSTILE],
        plans=[{**PLAN, "gpu": HOSTILE}],
        bom_plan=HOSTILE,
        question={"model": HOSTILE},
    )
    html = page(hostile)
    assert HOSTILE not in html
    assert f"<title>{'&lt;script&gt;alert(1)&lt;/script&gt;'}</title>" in html
    assert "<p class=note>Note: &lt;script&gt;alert(1)&lt;/script&gt;</p>" in html


# --------------------------------------------------------------------- a study, a break-even


def _study(**views) -> ReportData:
    st = {"axes": ["budget", "gpus"], "objective": "time", "rows": [], "pareto": [], **views}
    return answer(kind="study", plans=[], binding=[], bom=None, breakdown=[], study=st)


def test_a_study_lists_the_winner_of_each_scenario():
    winners = [{"budget": "1M", "gpu": "h200", "label": "x"}] * 3
    html = page(_study(winners=winners))
    (t,) = tables(section(html, "Fastest plan per scenario"))
    assert t["head"] == ["budget", "gpu", "plan"]
    assert len(t["rows"]) == 3 and [c[0] for c in t["rows"][0]] == ["1M", "h200", "x"]
    cost = page(_study(winners=winners, objective="cost"))
    assert "<h2>Cheapest plan per scenario</h2>" in cost
    shares = {"h200": {"win_share": 1.0, "wins": 3, "days_p10": 1, "days_p50": 1,
                       "days_p90": 1, "cost_p50": 1}}  # fmt: skip
    monte_carlo = page(_study(winners=winners, win_shares=shares))
    assert "plan per scenario" not in monte_carlo  # the win shares say it instead
    assert "<h2>Study</h2>" in monte_carlo and "data-chart='win_share'" in monte_carlo


def test_a_study_shows_the_prices_each_gpu_won_and_lost_at():
    wins = [
        {"gpu": "h200", "won_up_to": 1.2, "lost_from": 1.5, "clean": True},
        {"gpu": "l4", "won_up_to": None, "lost_from": 0.5, "clean": False},
    ]
    html = page(_study(price_wins=wins, catalog_prices={"h200": 30000.0}))
    st = section(html, "Study")
    assert "<h3>Break-even prices (x catalog price)</h3>" in st
    (t,) = tables(st)
    assert [c[0] for c in t["rows"][0]] == [
        "h200", "x1.200 ($36,000.00)", "x1.500 ($45,000.00)", "a break-even lies between"
    ]  # fmt: skip
    assert [c[0] for c in t["rows"][1]] == [
        "l4", "-", "x0.500", "overlap: the rival's price decides"
    ]  # fmt: skip


def test_a_break_even_result_gets_its_price_table():
    entry = {"gpu": "h100-sxm", "against": "h200", "pricing": "capex",
             "catalog_price_usd": 20000.0, "breakeven_price_usd": 18000.0}  # fmt: skip
    data = answer(kind="breakeven", breakeven=[entry], binding=[], bom=None, breakdown=[])
    html = page(data)
    prices = section(html, "Time and cost")
    assert "<h3>Break-even price</h3>" in prices
    t = tables(prices)[-1]
    assert [c[0] for c in t["rows"][0]] == [
        "h100-sxm", "h200", "capex", "$20,000.00", "$18,000.00", "-10.0%"
    ]  # fmt: skip
