"""Real-browser test of the comparison page (the app served by conftest's ``app_url``, Debian's Chromium): a
second run of the default data set is uploaded as logits, both are compared, and the table and both overlays
are drawn at 1280 × 720 (screenshot in test-artifacts/)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def test_two_runs_of_one_data_set_compared(app_url, chromium, tmp_path):
    from relu_core import runs

    default = runs.default_run()  # cached by the app_url fixture: the run the server shows first
    noisy = default.logits + np.random.default_rng(0).normal(scale=2.0, size=default.logits.shape)
    upload = tmp_path / "noisy_logits.npz"
    np.savez(upload, logits=noisy.astype(np.float32), labels=default.labels)

    page = chromium.new_context(viewport={"width": 1280, "height": 720}).new_page()
    page.goto(app_url)
    page.get_by_text("Rel-U vs Doctor at the default settings").wait_for(timeout=150_000)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Upload logits").click()
    sidebar.locator('input[type="file"]').first.set_input_files(str(upload))
    sidebar.get_by_role("button", name="Load logits").click()
    sidebar.get_by_text("noisy_logits.npz", exact=False).first.wait_for(timeout=120_000)  # the picker shows it

    sidebar.get_by_role("link", name="Compare runs").click()
    page.wait_for_url("**/Compare**", timeout=60_000)
    page.get_by_role("button", name="Run the study").click()
    page.get_by_text("Each run's detectors (mean ± std over seeds)").wait_for(timeout=180_000)
    page.wait_for_function(
        """() => [...document.querySelectorAll('.js-plotly-plot')]
                 .filter(p => p.layout && /by run/.test(p.layout.title.text)).length === 2""",
        timeout=60_000,
    )
    legend = page.evaluate("() => document.querySelectorAll('.js-plotly-plot')[0].data.map(t => t.name).join('|')")
    assert "1. " in legend and "2. " in legend and "noisy_logits.npz" in legend
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "compare_1280x720.png"), full_page=True)
