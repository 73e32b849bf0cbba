"""Real-browser test of the Studies page (the app served by test_browser's fixture, Debian's Chromium).

Switching to a study that does not draw the tuning-fraction slider and back must keep its value: the browser
(unlike AppTest) showed the slider's first option, 10 %, after the round trip.
"""

from __future__ import annotations

import tempfile
import time

import pytest
from test_browser import CHROMIUM, CHROMIUM_ARGS, app_url  # noqa: F401  (app_url is a fixture)

playwright_sync = pytest.importorskip("playwright.sync_api")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian chromium (/usr/bin/chromium) is not installed"),
]


def _settle(page, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    time.sleep(1.0)
    while page.locator('[data-testid="stStatusWidget"]').count() and time.monotonic() < deadline:
        time.sleep(0.3)
    time.sleep(0.5)


def test_round_trip_between_studies_keeps_the_tuning_fraction(app_url) -> None:  # noqa: F811
    with playwright_sync.sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="studies_browser"), executable_path=str(CHROMIUM), headless=True,
            args=CHROMIUM_ARGS)
        try:
            page = context.new_page()
            page.goto(f"{app_url}/Studies", timeout=120_000)
            page.get_by_text("Calibration", exact=True).wait_for(timeout=120_000)
            _settle(page)
            slider = page.locator('[data-testid="stSlider"]').first
            page.get_by_text("Calibration", exact=True).click()
            _settle(page)
            assert slider.get_by_role("slider").get_attribute("aria-valuetext") == "50%"
            page.get_by_text("Tuning-split size", exact=True).click()
            _settle(page)
            page.get_by_text("Calibration", exact=True).click()
            _settle(page)
            assert slider.get_by_role("slider").get_attribute("aria-valuetext") == "50%"
        finally:
            context.close()
