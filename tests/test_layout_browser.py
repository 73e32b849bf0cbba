"""The dashboard at 1280 x 720 in Chromium, as a stakeholder audience sees it: Explore's controls, D* and the
confusion matrix in the first viewport; "Download report" downloads in one click a report that names no
absolute server path; every page drawn without an error (screenshots in test-artifacts/), and a 100-class run's
matrices with their titles whole and their tick labels apart on Start and Explore."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from test_readable_figures import _MEASURE, _overlaps

from relu_core import paths
from studio.headless import wait_ms

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
VIEWPORT = {"width": 1280, "height": 720}
#: Every page by its navigation link and URL path (app.py).
PAGES = {
    "Start": "",
    "Explore": "Explore",
    "Corruptions": "Corruptions",
    "Studies": "Studies",
    "Baselines": "Baselines",
    "Training objectives": "Objectives",
    "Compare runs": "Compare",
}
_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def _matrices(page) -> list[dict]:
    """The page's D* and confusion matrix: title and bounding box."""
    page.wait_for_function(
        """() => [...document.querySelectorAll('.js-plotly-plot')].filter(p => p.layout && p.querySelector('.main-svg')
                 && /^(D\\*|Confusion matrix)/.test(p.layout.title.text)).length >= 2""",
        timeout=wait_ms(150_000),
    )
    return page.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')]
                 .filter(p => /^(D\\*|Confusion matrix)/.test(p.layout.title.text)).map(p => {
                   const b = p.getBoundingClientRect();
                   return {title: p.layout.title.text, left: b.left, top: b.top, right: b.right, bottom: b.bottom}; })"""
    )


def _in_first_viewport(box: dict) -> bool:
    return box["top"] >= 0 and box["left"] >= 0 and box["bottom"] <= VIEWPORT["height"] and box["right"] <= 1280


def test_explore_first_viewport_and_one_click_report(app_url, chromium):
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_context(viewport=VIEWPORT, accept_downloads=True).new_page()
    page.goto(f"{app_url}/Explore")
    boxes = _matrices(page)
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    page.wait_for_timeout(500)
    page.screenshot(path=str(ARTIFACTS / "explore_1280x720.png"))
    boxes = _matrices(page)
    assert [b["title"].split(" (")[0] for b in boxes] == ["D*", "Confusion matrix"]
    assert all(_in_first_viewport(b) for b in boxes), boxes
    assert abs(boxes[0]["top"] - boxes[1]["top"]) < 40 and boxes[0]["right"] <= boxes[1]["left"]  # side by side
    for label in ("weight of the errors", "softmax temperature", "pre-processing", "tuning split"):  # the bar
        slider = page.locator('[data-testid="stSlider"]').filter(has_text=label).bounding_box()
        assert slider and slider["y"] + slider["height"] <= boxes[0]["top"], label
    more = page.get_by_role("button", name="More settings").bounding_box()
    assert more and more["y"] + more["height"] <= boxes[0]["top"]

    # "Download report": one click, the file itself
    with page.expect_download(timeout=wait_ms(120_000)) as download:
        page.get_by_role("button", name="Download report").click()
    assert download.value.suggested_filename.startswith("relu_studio_report")
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "Provenance" in text
    places = {os.environ[paths.DATA_ENV], os.environ[paths.CACHE_ENV], tempfile.gettempdir(), str(Path.home())}
    assert not [p for p in places if p in text]
    assert not page.get_by_test_id("stException").count()


def test_the_guaranteed_risk_controls_fit_the_settings_popover_at_1280x720(app_url, chromium):
    """r* and δ, the last controls of "More settings", are inside the popover's visible part without scrolling it
    (a panel of about 410 pixels at 720: δ below its fold went unseen, with no scrollbar to hint at it)."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{app_url}/Explore")
    _matrices(page)
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    page.get_by_role("button", name="More settings").click()
    body = page.locator('[data-testid="stPopoverBody"]')
    body.get_by_text("guaranteed risk").click()
    page.wait_for_function(
        """() => [...document.querySelectorAll('[data-testid="stPopoverBody"] [data-testid="stSlider"]')]
                 .some(s => s.innerText.includes('δ') && !s.querySelector('input[type=range][disabled]'))""",
        timeout=wait_ms(60_000),
    )
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    page.screenshot(path=str(ARTIFACTS / "explore_risk_settings_1280x720.png"))
    boxes = page.evaluate(
        """() => {const panel = document.querySelector('[data-testid="stPopoverBody"]');
                  const p = panel.getBoundingClientRect();
                  const sliders = [...panel.querySelectorAll('[data-testid="stSlider"]')].map(s => {
                    const b = s.getBoundingClientRect();
                    return {label: s.querySelector('[data-testid="stWidgetLabel"]').innerText, top: b.top, bottom: b.bottom}; });
                  return {panel: {top: p.top, bottom: p.bottom, scrollTop: panel.scrollTop}, sliders: sliders};}"""
    )
    panel = boxes["panel"]
    assert panel["scrollTop"] == 0 and panel["bottom"] <= VIEWPORT["height"], boxes
    for label in ("r*", "δ"):
        (slider,) = [s for s in boxes["sliders"] if s["label"].startswith(label)]
        assert panel["top"] <= slider["top"] and slider["bottom"] <= panel["bottom"], (label, boxes)
    # the guaranteed-risk table (nine columns) stays inside the main column: wider, it scrolls in its own box
    page.keyboard.press("Escape")
    page.wait_for_function(
        """() => [...document.querySelectorAll('.relu-studio-html')].some(e => e.innerText.includes('bound'))""",
        timeout=wait_ms(150_000),
    )
    edges = page.evaluate(
        """() => {const block = document.querySelector('[data-testid="stMainBlockContainer"]');
                  const main = {right: block.getBoundingClientRect().right
                                       - parseFloat(getComputedStyle(block).paddingRight)};
                  const box = [...document.querySelectorAll('.relu-studio-html')]
                    .find(e => e.innerText.includes('bound'));
                  const table = box.querySelector('table').getBoundingClientRect().right;
                  const clipped = getComputedStyle(box).overflowX !== 'visible';
                  return {main: main.right, shown: clipped ? Math.min(table, box.getBoundingClientRect().right)
                                                            : table, table: table};}"""
    )
    assert edges["shown"] <= edges["main"] + 1, edges
    assert not page.get_by_test_id("stException").count()


def _upload_logits(page, tmp_path: Path, n_classes: int) -> None:
    """A run of ``n_classes`` classes with long names, loaded through the sidebar's logits upload."""
    rng = np.random.default_rng(n_classes)
    labels = rng.integers(0, n_classes, 3000)
    logits = rng.normal(size=(3000, n_classes)) + 3.0 * np.eye(n_classes)[labels]
    names = np.array([f"class {k:03d} with a long name" for k in range(n_classes)])
    file = tmp_path / f"classes{n_classes}.npz"
    np.savez(file, logits=logits.astype(np.float32), labels=labels, class_names=names)
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("Upload logits").click()
    sidebar.locator('input[type="file"]').first.set_input_files(str(file))
    sidebar.get_by_role("button", name="Load logits").click()
    page.wait_for_function(f"document.body.innerText.includes('× {n_classes} classes')", timeout=wait_ms(150_000))


def test_every_page_at_1280x720_and_100_classes(app_url, chromium, tmp_path):
    """Each page opens without an error (screenshot of its first viewport); then a 100-class run on Start and
    Explore: the matrices' titles inside their figures, their tick labels apart."""
    ARTIFACTS.mkdir(exist_ok=True)
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(app_url)
    page.get_by_text("Explore this run").wait_for(timeout=wait_ms(150_000))
    for link, path in PAGES.items():
        if path:
            page.get_by_role("link", name=link).first.click()
            page.wait_for_url(f"**/{path}**", timeout=wait_ms(60_000))
        page.wait_for_function(_IDLE, timeout=wait_ms(150_000))
        page.wait_for_timeout(1000)
        page.wait_for_function(_IDLE, timeout=wait_ms(150_000))
        page.screenshot(path=str(ARTIFACTS / f"page_{path or 'Start'}_1280x720.png"))
        assert not page.get_by_test_id("stException").count(), link

    page.get_by_role("link", name="Start").first.click()
    _upload_logits(page, tmp_path, 100)
    for link, path in (("Start", ""), ("Explore", "Explore")):
        if path:
            page.get_by_role("link", name=link).first.click()
            page.wait_for_url(f"**/{path}**", timeout=wait_ms(60_000))
        _matrices(page)
        page.wait_for_function(_IDLE, timeout=wait_ms(150_000))
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / f"page_{path or 'Start'}_100_classes.png"))
        drawn = page.evaluate(_MEASURE)
        matrices = [d for d in drawn if d["name"].startswith(("D*", "Confusion matrix"))]
        assert len(matrices) == 2, link
        for found in matrices:
            (title,) = found["title"]
            assert title[0] >= 0 and title[1] >= 0 and title[2] <= found["width"], (link, found["title"])
            assert not _overlaps(found["x"]) and not _overlaps(found["y"]), link
        assert not page.get_by_test_id("stException").count(), link


#: Every multiselect's chips that its box hides (the part of a chip past the box's right edge, under its clear
#: button): one line per hidden chip, "" when all show.
HIDDEN_CHIPS = """() => [...document.querySelectorAll('[data-testid="stMultiSelect"]')].flatMap(m => {
    const box = [...m.querySelectorAll('div')].find(d => getComputedStyle(d).overflow.includes('hidden')
                                                         && d.querySelector('svg'));
    if (!box) return [];
    const edge = box.getBoundingClientRect().right;
    return [...box.querySelectorAll('svg')].filter(s => s.getBoundingClientRect().right > edge + 0.5)
        .map(s => `${m.innerText.split('\\n')[0]}: ${s.parentElement.parentElement.innerText}`); })"""
#: Every interactive table wider than its box (its columns scroll out of view): [header text, scroll, box] each.
CLIPPED_TABLES = """() => [...document.querySelectorAll('[data-testid="stDataFrame"]')].map(d => {
    const s = d.querySelector('.dvn-scroller');
    return s && s.scrollWidth > s.clientWidth + 1 ? [s.scrollWidth, s.clientWidth] : null; }).filter(x => x)"""


def test_tables_and_chips_fit_at_1280x720(app_url, chromium):
    """Issue 34: Baselines' header "AUGRC (lower is bette" (its table wider than the page) and the mismatch /
    tuning-split study's tuning-fraction chips hidden, at 1280 x 720."""
    page = chromium.new_context(viewport=VIEWPORT).new_page()
    page.goto(f"{app_url}/Studies")
    page.get_by_text("Tuning-split size").first.wait_for(timeout=wait_ms(150_000))
    page.locator('[data-testid="stRadio"] label').filter(has_text="Tuning-split").first.click()
    page.get_by_text("more tuning fractions").wait_for(timeout=wait_ms(60_000))
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    assert page.evaluate(HIDDEN_CHIPS) == []
    page.get_by_role("link", name="Baselines").first.click()
    page.wait_for_url("**/Baselines**", timeout=wait_ms(60_000))
    page.get_by_role("button", name="Run the study").click()
    page.get_by_text("Mean ± std over seeds").wait_for(timeout=wait_ms(300_000))
    page.wait_for_function(_IDLE, timeout=wait_ms(300_000))
    page.wait_for_timeout(500)
    assert page.locator('[data-testid="stDataFrame"]').count() >= 1
    assert page.evaluate(CLIPPED_TABLES) == []
    assert page.evaluate(HIDDEN_CHIPS) == []
