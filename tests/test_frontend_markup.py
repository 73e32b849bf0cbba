"""Streamlit's page markup that the chart and HTML components rely on, checked on a served Explore page in
Chromium: every entry of ``studio/frontend/streamlit_markup.js`` and the class of a keyed widget
(``studio.live_chart.widget_class``). When a Streamlit upgrade changes one of them, this fails, instead of λ
silently no longer being drawn by the browser. Skips where /usr/bin/chromium or playwright is missing.
"""

from __future__ import annotations

import time

import pytest

from studio import live_chart, session
from studio.headless import wait_ms, wait_s

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# The STREAMLIT object of streamlit_markup.js, as the components see it.
_MARKUP = (
    "() => {\n" + (live_chart.FRONTEND / "streamlit_markup.js").read_text(encoding="utf-8") + "\nreturn STREAMLIT;\n}"
)
_IDLE = """() => !document.querySelector('[data-stale="true"]')
    && !document.querySelector('[data-testid="stStatusWidget"] [data-testid="stStatusWidgetRunningIcon"]')"""


def test_the_markup_the_components_rely_on_is_on_the_explore_page(app_url, chromium):
    held: list = []
    link = {"hold": False}

    def route(ws) -> None:  # the server's messages to the page, held back while link["hold"]
        server = ws.connect_to_server()
        server.on_message(lambda message: held.append(message) if link["hold"] else ws.send(message))
        link["page"] = ws

    page = chromium.new_context(viewport={"width": 1600, "height": 2200}).new_page()
    page.route_web_socket("**/_stcore/stream", route)
    page.goto(f"{app_url}/Explore")
    page.wait_for_function(
        "() => document.querySelectorAll('.relu-studio-html table').length >= 3", timeout=wait_ms(300_000)
    )
    page.wait_for_function(_IDLE, timeout=wait_ms(60_000))
    markup = page.evaluate(_MARKUP)
    assert set(markup) == {"sliderThumbValue", "stale", "sliderValueAttribute", "controls", "showOrHide"}, markup
    slider = "." + live_chart.widget_class(session.EX_LAM)  # how the server names the slider a view follows

    found = page.evaluate(
        """([m, slider]) => {
            const element = document.querySelector(slider);
            const label = element && element.querySelector(m.sliderThumbValue);
            const input = element && element.querySelector(`[${m.sliderValueAttribute}]`);
            return {
                slider: !!element,
                label: label && label.textContent,
                input: input && input.getAttribute(m.sliderValueAttribute),
                inputIsAControl: !!input && !!input.closest(m.controls),
                showOrHide: [...document.querySelectorAll(m.showOrHide)].map(e => e.textContent),
            };
        }""",
        [markup, slider],
    )
    assert found["slider"], f"no element of class {slider}: the λ slider's key class changed"
    assert found["label"] == "0.50", found  # the thumb's label shows λ as the views are keyed
    assert found["input"] == "0.50" and found["inputIsAControl"], found  # the slider's input, its value marked
    shown = " | ".join(found["showOrHide"])
    assert "Samples of a confusion cell" in shown and "Upload logits" in shown, shown  # a tab, an expander
    assert "More settings" in shown, shown  # the control bar's popover: opening it changes no setting

    # a λ move: the slider's input gets its value attribute again, and while the rerun is under way (the
    # server's messages held back, then let through one at a time) the page's element containers are stale
    page.evaluate(
        """([m, slider]) => {
            window.__marked = 0;
            window.__stale = false;
            new MutationObserver((records) => {
                window.__marked += records.filter(r => r.attributeName === m.sliderValueAttribute
                                                       && r.target.closest(slider)).length;
                window.__stale = window.__stale || !!document.querySelector(m.stale);
            }).observe(document.body, { subtree: true, attributes: true, childList: true });
        }""",
        [markup, slider],
    )
    link["hold"] = True
    page.locator(slider).get_by_role("slider").focus()
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => window.__marked > 0", timeout=wait_ms(10_000))
    page.wait_for_function(
        f"() => document.querySelector('{slider} ' + {markup['sliderThumbValue']!r}).textContent === '0.51'",
        timeout=wait_ms(10_000),
    )
    deadline = time.monotonic() + wait_s(30)
    while not held and time.monotonic() < deadline:  # the server's answer to the move, held back
        page.wait_for_timeout(100)
    assert held, "the server sent nothing after the move: nothing was held back"
    link["hold"] = False
    while held and not page.evaluate("() => window.__stale"):
        link["page"].send(held.pop(0))
        page.wait_for_timeout(100)
    while held:
        link["page"].send(held.pop(0))
    assert page.evaluate("() => window.__stale"), f"no element matched {markup['stale']} during the rerun"
    page.wait_for_url("**lam=0.51**", timeout=wait_ms(30_000))
    assert not page.get_by_test_id("stException").count()
