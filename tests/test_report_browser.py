"""The HTML reports as a reader sees them: headless Chromium (Debian's ``chromium`` and
``chromium-driver``, installed by tools/install-system-deps.sh) opens a scaled-down experiment report and a
comparison report and checks what a reader needs: tables present, a verdict per experiment, no raw JSON
in any cell, every plot loaded and captioned with what it shows. Full-page screenshots are kept in
out/test-artifacts/ (git-ignored) for a person to look at.

Skipped, with the reason, only where Chromium, its driver or selenium is not installed.
"""

from __future__ import annotations

import base64
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from paccp.cli import main

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "out" / "test-artifacts"
RAW_JSON = re.compile(r'^\s*(\{\s*"|\[\s*\{|\[\s*"|\{\s*\})')


def _browser_or_skip() -> tuple[str, str]:
    chrome = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if chrome is None or driver is None:
        pytest.skip("headless Chromium is not installed (apt-get install chromium chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("selenium is not installed (pip install -e '.[dev]')")
    return chrome, driver


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chrome, driver_path = _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chrome
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1300,1000", "--hide-scrollbars"):  # fmt: skip
        opts.add_argument(arg)
    drv = webdriver.Chrome(service=Service(driver_path), options=opts)
    drv.set_page_load_timeout(60)
    try:
        yield drv
    finally:
        drv.quit()


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A scaled-down demo (fig4a, and mptcp-bg for checks and plots in subdirectories) and a comparison."""
    _browser_or_skip()  # no work when the test cannot run
    root = tmp_path_factory.mktemp("reports")
    demo, cmp = root / "demo", root / "compare"
    main(["reproduce", "fig4a", "mptcp-bg", "--quick", "--out", str(demo)])
    main(["report", str(demo)])
    overcommit = REPO / "scenarios" / "compare-overcommit.toml"
    main(["compare", str(overcommit), "--quick", "--workers", "1", "--out", str(cmp)])
    main(["report", str(cmp)])
    return {"demo": demo / "report.html", "compare": cmp / "report.html"}


def _screenshot(drv: Any, name: str) -> Path:
    """A full-page PNG of the current page in out/test-artifacts/."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = drv.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def _page(drv: Any, path: Path) -> dict[str, Any]:
    drv.get(path.as_uri())
    return dict(
        drv.execute_script(
            """
            const cells = [...document.querySelectorAll('td')].map(td => td.innerText);
            const figs = [...document.querySelectorAll('img')].map(img => ({
                loaded: img.complete && img.naturalWidth > 0,
                caption: (img.closest('figure')?.querySelector('figcaption')?.innerText || '').trim(),
            }));
            return {
                tables: document.querySelectorAll('table').length,
                cells: cells,
                figs: figs,
                h2: [...document.querySelectorAll('h2')].map(h => h.innerText),
                h3: [...document.querySelectorAll('h3')].map(h => h.innerText),
                verdicts: [...document.querySelectorAll('.verdict')].map(v => v.innerText),
            };
            """
        )
    )


def _reader_checks(page: dict[str, Any]) -> None:
    assert page["tables"] > 0
    raw = [c for c in page["cells"] if RAW_JSON.match(c)]
    assert not raw, f"raw JSON in cells: {raw[:3]}"
    assert page["figs"], "no plot shown"
    for f in page["figs"]:
        assert f["loaded"], f
        cap = f["caption"]
        assert len(cap) > 30 and not cap.endswith(".png"), f"a plot without a real caption: {cap!r}"


def test_demo_report_reads_as_a_result(browser: Any, reports: dict[str, Path]) -> None:
    page = _page(browser, reports["demo"])
    _screenshot(browser, "report-demo")
    _reader_checks(page)
    h2 = page["h2"]
    assert h2[0].startswith("fig4a") and any(h.startswith("mptcp-bg") for h in h2)
    assert h2.index(next(h for h in h2 if h.startswith("run: "))) > h2.index(h2[0])  # experiments first
    assert any("classes within" in v for v in page["verdicts"])  # fig4a: paper / ours / optimum
    assert any("checks" in v for v in page["verdicts"])  # mptcp-bg's checks
    assert any("[tcp]" in c for c in page["cells"]) and any("[udp]" in c for c in page["cells"])
    assert any("Gb/s" in c for c in page["cells"])  # rates with units
    assert sum("Per-VM delivered rate" in f["caption"] for f in page["figs"]) >= 7  # mptcp-bg's PNGs


def test_comparison_report_is_ordered_by_question(browser: Any, reports: dict[str, Path]) -> None:
    page = _page(browser, reports["compare"])
    _screenshot(browser, "report-compare")
    _reader_checks(page)
    order = ["Guarantees", "Weights", "Utilisation", "Flow completion times", "Price", "Gaming"]
    at = [next(i for i, h in enumerate(page["h3"]) if h.startswith(q)) for q in order]
    assert at == sorted(at), page["h3"]
    assert len(page["verdicts"]) >= len(order)
    # no finite flows in this comparison: said in words, and no empty FCT plot
    assert any("no flow finished" in v for v in page["verdicts"])
    assert not any("completion time of small flows" in f["caption"] for f in page["figs"])
