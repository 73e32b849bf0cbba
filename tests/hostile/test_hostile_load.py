"""Bounded loopback load test: 8 concurrent browser sessions (one Debian Chromium, 8 contexts) each move λ to
their own value on the same run while 200 health and page requests hit the server; every session ends on its
own value without an error, and every request succeeds. Uses the server and Chromium recipe of
tests/conftest.py (``app_url``, ``chromium``: Debian /usr/bin/chromium + playwright, never ``playwright install``)."""

from __future__ import annotations

import concurrent.futures
import urllib.request

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SESSIONS = 8
REQUESTS = 200
TIMEOUT_MS = 240_000


def _get(url: str) -> int:
    with urllib.request.urlopen(url, timeout=60) as response:
        response.read()
        return response.status


def test_eight_sessions_move_lambda_while_the_server_answers(app_url, chromium):
    urllib.request.urlopen(app_url, timeout=60).read()
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=4)
    try:
        pages = [chromium.new_context(viewport={"width": 1400, "height": 1600}).new_page() for _ in range(SESSIONS)]
        ready = "document.querySelectorAll('.js-plotly-plot').length >= 4"
        pages[0].goto(f"{app_url}/Explore")  # the first session prepares the shared default run
        pages[0].wait_for_function(ready, timeout=TIMEOUT_MS)
        for page in pages[1:]:
            page.goto(f"{app_url}/Explore")
        urls = [f"{app_url}/_stcore/health" if k % 2 else app_url for k in range(REQUESTS)]
        statuses = pool.map(_get, urls)  # runs while the sessions load and move λ
        for page in pages[1:]:
            page.wait_for_function(ready, timeout=TIMEOUT_MS)
        wanted = [round(0.5 - 0.03 * (k + 1), 2) for k in range(SESSIONS)]  # 0.47, 0.44, ..., 0.26
        for page, value in zip(pages, wanted):
            thumb = (
                page.locator('[data-testid="stSlider"]').filter(has_text="weight of the errors").get_by_role("slider")
            )
            thumb.focus()
            for _ in range(round((0.5 - value) * 100)):
                page.keyboard.press("ArrowLeft")
        for page, value in zip(pages, wanted):
            page.wait_for_function(
                f"document.querySelectorAll('.js-plotly-plot')[0].layout.title.text.includes('λ = {value:g})')",
                timeout=TIMEOUT_MS,
            )
            # the chart follows the slider in the browser before the server's run that writes the URL has ended:
            # wait for that run, never assume it ended with the chart
            page.wait_for_function(f"window.location.search.includes('lam={value:g}')", timeout=TIMEOUT_MS)
            assert not page.get_by_test_id("stException").count()
            assert not page.get_by_test_id("stAlertContentError").count()
        assert list(statuses) == [200] * REQUESTS
    finally:
        pool.shutdown(wait=True)
