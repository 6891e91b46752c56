"""Screenshots of record for docs/screenshots/: a run's validation page, metrics table and the
Snakemake report (its results view), at 1,400 px, in headless Chromium.

Needs a browser and Playwright, which the project itself does not: `apt-get install chromium` and
`pip install playwright` in a scratch venv (the system Chromium is used; nothing is downloaded).

    python scripts/docs-screenshots.py RESULTS_DIR REPORT_HTML OUT_DIR
"""

from __future__ import annotations

import sys
from pathlib import Path

from playwright.sync_api import sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", "--disable-quic"]
WIDTH = 1400


def main() -> int:
    results, report, out = (Path(a).resolve() for a in sys.argv[1:4])
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=FLAGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})
        for name in ("validation.html", "metrics.html"):
            page.goto((results / name).as_uri())
            page.screenshot(path=str(out / f"{Path(name).stem}-page.png"), full_page=True)
        page.goto(report.as_uri())
        page.wait_for_timeout(1500)  # the report is a script-built page
        page.get_by_text("Results", exact=True).first.click()
        page.wait_for_timeout(800)
        for shown in ("validation.html", "metrics.png"):
            page.locator("tr", has_text=f"{results.name}/{shown}").first.locator("a, button, svg").first.click()
            page.wait_for_timeout(1500)
            page.screenshot(path=str(out / f"report-{Path(shown).stem}.png"))
        browser.close()
    print(f"screenshots: {sorted(p.name for p in out.glob('*.png'))} in {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
