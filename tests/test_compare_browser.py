"""Real-browser test of the comparison page (the app served by conftest's ``app_url``, Debian's Chromium): a
second run of the default data set is uploaded as logits, both are compared, and the table and both overlays
are drawn at 1280 × 720, whole: every column of the table, every legend entry (8 lines told apart), the titles
clear of the modebar, the detectors' chips (screenshot in test-artifacts/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_layout_browser import _IDLE, CLIPPED_TABLES, HIDDEN_CHIPS

from studio.headless import wait_ms

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def test_two_runs_of_one_data_set_compared(app_url, chromium, tmp_path):
    from relu_core import runs

    default = runs.default_run()  # cached by the app_url fixture: the run the server shows first
    noisy = default.logits + np.random.default_rng(0).normal(scale=2.0, size=default.logits.shape)
    upload = tmp_path / "cnn28_regmixup_epoch_12_seed_0_noisy_logits.npz"  # a long name, as real ones are
    np.savez(upload, logits=noisy.astype(np.float32), labels=default.labels)

    page = chromium.new_context(viewport={"width": 1280, "height": 720}).new_page()
    page.goto(app_url)
    page.get_by_text("Rel-U vs Doctor at the default settings").wait_for(timeout=wait_ms(150_000))
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Upload logits").click()
    sidebar.locator('input[type="file"]').first.set_input_files(str(upload))
    sidebar.get_by_role("button", name="Load logits").click()
    sidebar.get_by_text("noisy_logits.npz", exact=False).first.wait_for(timeout=wait_ms(120_000))  # the picker shows it
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))

    sidebar.get_by_role("link", name="Compare runs").click()
    page.wait_for_url("**/Compare**", timeout=wait_ms(60_000))
    page.get_by_role("button", name="Run the study").click()
    page.get_by_text("Each run's detectors (mean ± std over seeds)").wait_for(timeout=wait_ms(180_000))
    page.wait_for_function(
        """() => [...document.querySelectorAll('.js-plotly-plot')]
                 .filter(p => p.layout && /by run/.test(p.layout.title.text)).length === 2""",
        timeout=wait_ms(60_000),
    )
    names = page.evaluate("() => document.querySelectorAll('.js-plotly-plot')[0].data.map(t => t.name)")
    assert len(names) == 8 and names[0].startswith("1 · MSP (") and names[-1].startswith("2 · Rel-U (")
    assert page.get_by_text("noisy_logits.npz (uploaded logits) · red in the charts", exact=False).count() == 1
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    page.wait_for_timeout(500)
    for chart in page.locator(".js-plotly-plot").all()[:2]:
        chart.scroll_into_view_if_needed()
        chart.hover(position={"x": 200, "y": 200})  # the modebar shows on hover
        page.wait_for_timeout(300)
        drawn = chart.evaluate(
            """(p) => { const box = p.getBoundingClientRect(), bar = p.querySelector('.modebar').getBoundingClientRect(),
                         title = p.querySelector('.gtitle').getBoundingClientRect();
                         const texts = [...p.querySelectorAll('.legendtext')].map(t => t.getBoundingClientRect());
                         return {box: [box.left, box.top, box.right, box.bottom], bar: [bar.left, bar.top, bar.right,
                                 bar.bottom], title: [title.left, title.top, title.right, title.bottom],
                                 legend: texts.map(t => [t.left, t.top, t.right, t.bottom])}; }"""
        )
        left, top, right, bottom = drawn["box"]
        assert len(drawn["legend"]) == 8 and all(
            left <= x0 and x1 <= right and top <= y0 and y1 <= bottom for x0, y0, x1, y1 in drawn["legend"]
        ), drawn  # every entry whole, inside the chart
        bar, title = drawn["bar"], drawn["title"]
        assert bar[3] <= title[1] or title[2] <= bar[0], drawn  # the modebar above the title, or right of its end
    assert page.evaluate(CLIPPED_TABLES) == []  # AURC and AUGRC inside the table's width
    assert page.evaluate(HIDDEN_CHIPS) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_1280x720.png"), full_page=True)
