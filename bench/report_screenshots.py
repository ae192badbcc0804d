"""The README's report screenshots: the page of the default question and of the
examples/h100-vs-h200-budgets.yaml study, each rendered in headless Chromium.

Usage: python bench/report_screenshots.py [--out docs] [--height 2400]

Runs ``designer optimize --budget 30M --json`` and ``designer sweep`` on the example in a
temporary folder, ``designer report --html`` on each, and saves the top ``--height``
pixels of each page (1280 wide) as docs/report-default.png and
docs/report-h100-vs-h200.png. Needs the report extra, Playwright and Debian's chromium.
Prints each page's size in bytes.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ARGS = [
    *("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run"),
    *("--disable-background-networking", "--disable-component-update", "--disable-sync"),
]


def designer(tmp: Path, *args: str, stdout=None) -> None:
    """Run the CLI in ``tmp`` (file names relative to it, as the page shows them)."""
    subprocess.run([sys.executable, "-m", "designer", *args], check=True, stdout=stdout, cwd=tmp)


def pages(tmp: Path) -> dict[str, Path]:
    answer = tmp / "default.json"
    with open(answer, "w", encoding="utf-8") as fh:
        designer(tmp, "optimize", "--budget", "30M", "--json", stdout=fh)
    study = tmp / "h100-vs-h200-budgets.yaml"
    shutil.copy(ROOT / "examples" / study.name, study)
    designer(tmp, "sweep", study.name)
    out = {}
    for name, src in (("default", answer), ("h100-vs-h200", study.with_suffix(".csv"))):
        out[name] = tmp / f"{name}.html"
        designer(tmp, "report", src.name, "--html", out[name].name)
        print(f"{name}: {out[name].stat().st_size:,} bytes")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "docs")
    parser.add_argument("--height", type=int, default=2400)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=ARGS)
        for name, html in pages(Path(tmp)).items():
            page = browser.new_page(viewport={"width": 1280, "height": args.height})
            page.goto(html.as_uri())
            page.wait_for_timeout(1500)
            shot = args.out / f"report-{name}.png"
            page.screenshot(path=str(shot))
            print(f"wrote {shot}")
        browser.close()


if __name__ == "__main__":
    main()
