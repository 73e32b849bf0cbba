"""The README's two screenshots, taken of the real app in Debian's Chromium at 1280 x 720.

Every run checks that the Start page and Explore can be photographed at that size once their content has landed
(the scorecard's first verdict and the matrices; Explore's four charts and the server idle) and that each PNG
stays under the manual's 300 KB; with ``RELU_STUDIO_SCREENSHOTS=1`` the PNGs are also written to ``docs/img/``
(``start.png``, ``explore.png``), which README.md and the manual show. To take them of the default run a user
sees (Fashion-MNIST + cnn28 rather than the tests' digits run)::

    RELU_STUDIO_SCREENSHOTS=1 RELU_STUDIO_DEFAULT=fashion-mnist RELU_STUDIO_DEFAULT_SEED=0 \\
        RELU_STUDIO_DATA=../shared/data .venv/bin/python -m pytest -q tests/test_screenshots.py

When writing, each page is photographed once its background work is done (the scorecard's rows, Explore's paired
bootstrap: minutes on two cores); when only checking, as soon as its content has landed.
"""

from __future__ import annotations

import os
import re
import struct
from pathlib import Path

import pytest

from studio.headless import wait_ms

IMG = Path(__file__).resolve().parent.parent / "docs" / "img"
VIEWPORT = {"width": 1280, "height": 720}
MAX_BYTES = 300 * 1024
WRITE = os.environ.get("RELU_STUDIO_SCREENSHOTS") == "1"
_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _kept(png: bytes, name: str) -> None:
    """Checks one screenshot (a PNG of the viewport's size, under the size limit) and writes it when asked."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (VIEWPORT["width"], VIEWPORT["height"]), (width, height)
    assert len(png) < MAX_BYTES, f"{name}: {len(png)} bytes"
    if WRITE:
        IMG.mkdir(parents=True, exist_ok=True)
        (IMG / name).write_bytes(png)


#: No job running in this session: no progress line in the page, no Cancel button in the jobs panel.
_NO_JOBS = """() => !/Computing: |Running: /.test(document.body.innerText)
    && ![...document.querySelectorAll('button')].some(b => b.innerText.trim() === 'Cancel')"""


#: Resolves once the browser has painted two more frames (what is on screen is what was laid out).
_PAINTED = "() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => done(true))))"


def _settled(page) -> None:
    """The server idle and the page painted, twice (a rerun landing in between restarts the wait); when the
    screenshots are written, the session's jobs done first. The pointer is moved off the page's controls, so
    that no tooltip shows."""
    if WRITE:
        page.wait_for_function(_NO_JOBS, timeout=wait_ms(900_000))
    page.mouse.move(1279, 0)
    for _ in range(2):
        page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
        page.evaluate(_PAINTED)


def test_start_and_explore_can_be_photographed_at_1280x720(app_url, chromium):
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(app_url)
    page.get_by_text("Rel-U vs Doctor on this run, in each setting").wait_for(timeout=wait_ms(150_000))
    main = page.get_by_test_id("stMain")
    main.get_by_text(
        re.compile("tells errors from correct predictions better|No clear difference between|Mixed: ")
    ).first.wait_for(timeout=wait_ms(120_000))
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2", timeout=wait_ms(60_000)
    )
    _settled(page)
    _kept(page.screenshot(), "start.png")

    assert page.get_by_role("button", name="Explore this run").is_visible()

    # a session of its own, opened on Explore: the Start page's scorecard jobs belong to the first one
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{app_url}/Explore")
    page.wait_for_function(
        "document.querySelectorAll('.js-plotly-plot .main-svg').length >= 4", timeout=wait_ms(120_000)
    )
    _settled(page)
    assert page.get_by_text("D*").first.is_visible()
    _kept(page.screenshot(), "explore.png")
