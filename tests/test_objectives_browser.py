"""Real-browser test of the training-objectives page (the app served by conftest's ``app_url``, Debian's
Chromium) at 1280 × 720: digits chosen, the table computed (its small models trained in seconds), a row's button
opens that model's run in Explore (screenshot in test-artifacts/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from studio.headless import wait_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def test_objectives_table_on_digits_opens_a_row_in_explore(app_url, chromium):
    page = chromium.new_context(viewport={"width": 1280, "height": 720}).new_page()
    page.goto(f"{app_url}/Objectives")
    page.get_by_text("Training objectives: where does Rel-U help?").wait_for(timeout=wait_ms(300_000))
    main = page.locator('[data-testid="stMain"]')
    main.locator('[data-testid="stSelectbox"]').filter(has_text="data set").first.click()
    page.get_by_role("option", name="digits", exact=True).click()
    main.get_by_text("OpenMix is left out: no registered outlier data set has digits's image size").wait_for(
        timeout=wait_ms(60_000)
    )
    main.get_by_role("button", name="Run the study").click()
    main.get_by_text("FPR95 by detector").wait_for(timeout=wait_ms(600_000))
    # the title's question answered first, in one sentence, and the answer's columns whole in the viewport
    answer = main.get_by_text("paired 95 % intervals over").first.bounding_box()
    controls = main.locator('[data-testid="stSelectbox"]').first.bounding_box()
    assert answer["y"] + answer["height"] <= controls["y"] and answer["y"] >= 0
    for objective in ("cross-entropy", "logitnorm", "mixup", "regmixup"):
        assert main.get_by_role("button", name=objective, exact=True).is_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "objectives_1280x720.png"))
    main.get_by_text("FPR95 by detector").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "objectives_summary_1280x720.png"))
    main.get_by_text("Open a model's run").scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS / "objectives_tables_1280x720.png"))
    main.get_by_role("button", name="logitnorm", exact=True).click()
    page.wait_for_url("**/Explore**", timeout=wait_ms(60_000))
    page.get_by_text("Explore: Rel-U vs Doctor").wait_for(timeout=wait_ms(120_000))
    assert "logitnorm" in page.locator('[data-testid="stMain"]').inner_text()
