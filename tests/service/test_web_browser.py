"""The tenant's web page in headless Chromium (Debian's chromium + chromium-driver, driven by Selenium):
log in with a token, see the live quote, buy MRG for a VM, see the purchase and the VM's live rate,
show the invoice. A screenshot is kept in ``out/screenshots/service-page.png``.

Skipped with a reason when chromium, chromedriver or selenium is missing.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from svc_procs import AgentProc, Controller, wait_for

REPO = Path(__file__).resolve().parents[2]
SHOT = REPO / "out" / "screenshots" / "service-page.png"


def _browser() -> Any:
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (pip extra dev)")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.skip("headless browser test needs Debian's chromium and chromium-driver (apt-get install)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,900"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)


def test_tenant_buys_on_the_web_page_and_sees_rate(tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    ctl = Controller(tmp_path).start()
    ag: AgentProc | None = None
    drv = _browser()
    try:
        tok = ctl.admin("POST", "/v1/admin/tenants", json={"name": "acme", "model": "vbp"})["token"]
        for i in (1, 2):
            ctl.admin(
                "POST",
                "/v1/admin/vms",
                json={"name": f"vm{i}", "tenant": "acme", "host": "h1", "cgroup": f"/vm{i}"},
            )
        ag = AgentProc(ctl, "h1", tmp_path / "state-h1").start()
        d = drv
        d.get(ctl.url + "/")
        d.find_element(By.ID, "token").send_keys(tok)
        d.find_element(By.ID, "go").click()
        wait_for(lambda: d.find_element(By.ID, "main").is_displayed(), what="the page after login")
        theta = d.find_element(By.ID, "theta")
        theta.clear()
        theta.send_keys("300Mbit")
        quote = ctl.http.get(
            "/v1/quote", params={"cos": "mrg", "theta": "300Mbit", "omega": "2"}, headers=ctl.h(tok)
        ).json()
        wait_for(
            lambda: quote["per_hour"] in d.find_element(By.ID, "quote").text,
            what="the live quote",
        )
        d.find_element(By.ID, "buy").click()
        wait_for(
            lambda: "#1 MRG" in d.find_element(By.ID, "vms").text,
            what=f"the purchase in the table (page error: {d.find_element(By.ID, 'err').text!r})",
        )

        # the agent applied it and reports the rate: the page shows it next to the purchase (live)
        def rate_shown() -> bool:
            # read in one script: the table is redrawn every second, so element handles go stale
            cells = d.execute_script(
                "return [...document.querySelectorAll('tr.vmrow td.rate')].map(e => e.textContent)"
            )
            return any(c.endswith("Mbit/s") and abs(float(c.split()[0]) - 300) < 6 for c in cells)

        wait_for(rate_shown, timeout=20, what="the live rate")
        time.sleep(2.5)  # a few points on the chart
        d.find_element(By.XPATH, "//button[text()='Show']").click()
        wait_for(lambda: "Total" in d.find_element(By.ID, "total").text, what="the invoice")
        assert d.find_element(By.ID, "err").text == ""
        SHOT.parent.mkdir(parents=True, exist_ok=True)
        d.save_screenshot(str(SHOT))
        assert SHOT.stat().st_size > 10_000
        # the token never went into a URL (so never into an access log)
        assert tok not in ctl.log.read_text()
    finally:
        drv.quit()
        if ag is not None:
            ag.stop()
        ctl.stop()
