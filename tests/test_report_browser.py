"""The report page as a person sees it (issue 21): opened from file:// in headless Chromium
(Debian's ``chromium``, driven by Playwright) with every network request refused; no console
errors, every chart drawn, hovering a point shows the plan behind it, a screenshot saved
under the test's folder. Skipped, saying why, only where no browser exists."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers import SMALL_STUDY, run_cli

pytest.importorskip(
    "plotly", reason="the report extra is not installed: pip install -e '.[report]'"
)
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright is not installed: pip install -e '.[test]'"
)

CHROMIUM_ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip("no Chromium on this machine (apt-get install chromium; .ci/run installs it)")


@pytest.fixture(scope="module")
def browser():
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    """The page of an optimize answer with two plans and of a budget study."""
    d = tmp_path_factory.mktemp("pages")
    answer = d / "answer.json"
    q = ["--model", "llama2-7b", "--gpu", "h100-sxm", "--gpu", "h200", "--tokens", "20B"]
    result = run_cli(
        ["optimize", *q, "--max-batch-tokens", "1M", "--budget", "1M", "--top", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    answer.write_text(result.output, encoding="utf-8")
    (d / "study.yaml").write_text(SMALL_STUDY, encoding="utf-8")
    assert run_cli(["sweep", str(d / "study.yaml"), "--workers", "1"]).exit_code == 0
    out = {}
    for name, src in (("answer", answer), ("study", d / "study.csv")):
        out[name] = d / f"{name}.html"
        assert run_cli(["report", str(src), "--html", str(out[name])]).exit_code == 0
    return out


def _open(browser, path: Path):
    """The page opened offline: console errors and refused requests are collected."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    def refuse(route):
        if route.request.url.startswith("file://"):
            return route.continue_()
        problems.append(f"network request: {route.request.url}")
        return route.abort()

    page.route("**/*", refuse)
    page.goto(path.as_uri())
    page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length > 0")
    return page, problems


@pytest.mark.parametrize("name, hover_chart", [("answer", "pareto"), ("study", "budget")])
def test_the_page_renders_offline_and_hover_shows_the_plan(
    browser, pages, tmp_path, name, hover_chart
):
    page, problems = _open(browser, pages[name])
    charts = page.locator("div.chart")
    assert charts.count() >= 3
    for i in range(charts.count()):
        chart = charts.nth(i)
        label = chart.get_attribute("data-chart")
        # drawn: an SVG with marks (points, lines or bars)
        marks = chart.locator(".main-svg .scatterlayer path, .main-svg .barlayer path")
        assert marks.count() > 0, f"chart {label} drew nothing"
        box = chart.locator(".main-svg").first.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 100, label
    # hovering a point shows the plan behind it (Plotly's hover label)
    point = page.locator(f"#chart-{hover_chart} .scatterlayer .point").first
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    hover = page.locator(f"#chart-{hover_chart} .hoverlayer .hovertext")
    hover.first.wait_for(timeout=5000)
    text = hover.first.text_content() or ""
    assert (
        (" servers (" in text or " in 1 server (" in text) and "TP " in text and "days" in text
    ), text
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    assert (tmp_path / f"{name}.png").stat().st_size > 10_000
    assert problems == []
    page.close()
