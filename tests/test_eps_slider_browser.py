"""Real-browser test: the ε slider moves on every arrow press (issue 43: a second press did not move it).

An ε pass ran in a fragment of its own that reran the whole page when the pass ended; that rebuilt the controls
and took the keyboard focus off the slider, so the next ArrowRight went nowhere. The panel now polls its own
fragment while a pass runs (``explore_ui.EPS_POLL_S``). Skips where /usr/bin/chromium or playwright is missing.
"""

from __future__ import annotations

import pytest

from relu_core import explore
from studio.headless import wait_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]

_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""


def test_three_arrow_presses_move_epsilon_three_steps(app_url, chromium):
    page = chromium.new_context(viewport={"width": 1600, "height": 1400}).new_page()
    page.goto(f"{app_url}/Explore?lam=0.5&eps=0")
    page.wait_for_function(
        "() => document.querySelectorAll('.js-plotly-plot').length >= 4 "
        "&& document.querySelectorAll('.relu-studio-html table').length >= 2",
        timeout=wait_ms(180_000),
    )
    page.wait_for_function(_IDLE, timeout=wait_ms(120_000))
    slider = page.locator('[data-testid="stSlider"]').filter(has_text="pre-processing").get_by_role("slider")
    slider.focus()
    for step in (1, 2, 3):
        page.keyboard.press("ArrowRight")
        wanted = f"eps={explore.EPSILONS[step]:g}&"
        page.wait_for_url(f"**{wanted}**", timeout=wait_ms(120_000))
        # the pass of that ε ends (its bar full or gone), the panel idle: the moment the focus used to be lost
        page.wait_for_function("() => !document.body.innerText.includes('updating')", timeout=wait_ms(300_000))
        page.wait_for_function(_IDLE, timeout=wait_ms(120_000))
    assert f"eps={explore.EPSILONS[3]:g}&" in page.url
    assert not page.get_by_test_id("stException").count()
