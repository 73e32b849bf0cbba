"""Real-browser test of the Studies page (the app served by conftest's ``app_url``, Debian's Chromium).

Switching to a study that does not draw the tuning-fraction slider and back must keep its value: the browser
(unlike AppTest) showed the slider's first option, 10 %, after the round trip.
"""

from __future__ import annotations

import pytest

from studio.headless import wait_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""


def _settle(page, quiet_s: float = 60) -> None:
    """Waits for the rerun an action started to end: its running mark appears (at most 2 s: a quick rerun may
    have ended already), then the page is idle, within ``quiet_s`` scaled to the machine's load."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(f"() => !({_IDLE})()", timeout=2_000, polling="raf")
    except PlaywrightTimeout:
        pass
    page.wait_for_function(_IDLE, timeout=wait_ms(1000 * quiet_s))


@pytest.fixture
def studies(chromium, app_url):
    """A fresh browser session on the Studies page, drawn and settled."""
    page = chromium.new_context().new_page()
    page.goto(f"{app_url}/Studies", timeout=wait_ms(120_000))
    page.get_by_text("Calibration", exact=True).wait_for(timeout=wait_ms(120_000))
    _settle(page)
    return page


def test_round_trip_between_studies_keeps_the_tuning_fraction(studies) -> None:
    page = studies
    slider = page.locator('[data-testid="stSlider"]').first
    page.get_by_text("Calibration", exact=True).click()
    _settle(page)
    assert slider.get_by_role("slider").get_attribute("aria-valuetext") == "50%"
    page.get_by_text("Tuning-split size", exact=True).click()
    _settle(page)
    page.get_by_text("Calibration", exact=True).click()
    _settle(page)
    assert slider.get_by_role("slider").get_attribute("aria-valuetext") == "50%"


def test_a_visit_to_another_page_keeps_each_page_s_options(studies) -> None:
    """A page's own options survive a visit to another page; the seeds are every page's (one shared value)."""
    page = studies
    page.get_by_text("Tuning-split size", exact=True).click()
    _settle(page)
    seeds = page.get_by_label("seeds (splits averaged)")
    seeds.fill("7")
    seeds.press("Enter")
    _settle(page)
    resamples = page.get_by_label("bootstrap resamples per point (0 = none)")
    resamples.fill("300")
    resamples.press("Enter")
    _settle(page)
    page.get_by_role("link", name="Baselines").click()
    page.get_by_text("More baselines").wait_for(timeout=wait_ms(120_000))
    _settle(page)
    bl_seeds = page.locator("input[aria-label='seeds (splits averaged)']")
    assert bl_seeds.input_value() == "7"  # set on Studies
    bl_seeds.fill("5")
    bl_seeds.press("Enter")
    _settle(page)
    page.get_by_role("link", name="Studies").click()
    page.get_by_text("The paper's studies").wait_for(timeout=wait_ms(120_000))
    _settle(page)
    assert page.get_by_label("Tuning-split size").is_checked()
    assert page.get_by_label("bootstrap resamples per point (0 = none)").input_value() == "300"
    assert page.get_by_label("seeds (splits averaged)").input_value() == "5"  # set on Baselines
    page.get_by_role("link", name="Baselines").click()
    page.get_by_text("More baselines").wait_for(timeout=wait_ms(120_000))
    _settle(page)
    assert page.locator("input[aria-label='seeds (splits averaged)']").input_value() == "5"
