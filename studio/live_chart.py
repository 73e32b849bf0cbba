"""Every chart of the app, and the tables that follow a slider: small Streamlit components
(``st.components.v2``) that draw once and then update in place when a rerun brings a changed view. Their
JavaScript and CSS are the files of ``studio/frontend``, read once at import; what a rerun sends them is JSON, the
component's ``data``.

``st.plotly_chart`` re-mounts a chart whose figure changed (``Plotly.newPlot``: the whole SVG, axes and modebar
rebuilt), three times per λ move on Explore; ``Plotly.react`` diffs and redraws only what changed
(``bench/bench_browser.py``). The components are mounted in the page itself (no iframe, no shadow root: plotly's
modebar and hover styles live in the document). They load the plotly.js that ships with the installed plotly
package, served by Streamlit's static file serving (``.streamlit/config.toml``) from ``static/``, where
:func:`ensure_plotly_js` puts it: the app needs no internet and draws with the same plotly.js as the HTML report.

**Following a slider** (:class:`Follow`): a view may come with the views of the slider's neighbouring values,
computed by the server in the same rerun. When the user moves that slider to one of them, the browser shows it at
once, before the server has heard of the move; the rerun the move starts then brings the same view (same
``id``: a hash of its content) and nothing is redrawn. Touching another control (a widget in the page or the
sidebar; not a tab or an expander) stops the following until a rerun that started after the touch
(:attr:`Follow.run`), so that neighbours computed for the old settings are not shown; the first λ move after it
waits for the server, as a value without a neighbour's view does.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
import weakref
from dataclasses import dataclass
from pathlib import Path

import plotly.offline
import streamlit as st

from relu_core.cache import atomic_write

#: Streamlit serves ``static/`` beside the main script at ``app/static/``.
PLOTLY_JS = Path(__file__).resolve().parent.parent / "static" / "plotly.min.js"

#: The components' JavaScript and CSS, beside this module (found whatever the working directory). Each
#: component's code is one module: Streamlit's markup (``streamlit_markup.js``), what both share, then its own.
FRONTEND = Path(__file__).resolve().parent / "frontend"


def _frontend(*names: str) -> str:
    """The files ``names`` of :data:`FRONTEND`, one after the other."""
    return "\n".join((FRONTEND / name).read_text(encoding="utf-8") for name in names)


_CHART_JS = _frontend("streamlit_markup.js", "shared.js", "chart.js")
_HTML_JS = _frontend("streamlit_markup.js", "shared.js", "html.js")
_HTML_CSS = _frontend("html.css")

_mount_chart = st.components.v2.component("relu_studio_chart", js=_CHART_JS, isolate_styles=False)
_mount_html = st.components.v2.component("relu_studio_html", js=_HTML_JS, css=_HTML_CSS, isolate_styles=False)


@dataclass(frozen=True)
class Follow:
    """The views of a slider's neighbouring values, to show as soon as the user moves it there (before the
    server reruns). ``slider`` is the slider's widget key; ``current`` the value the element's own view is for
    and ``views`` maps its neighbours, both as :func:`value_key` writes them with ``decimals``, to what the
    element shows there (a figure for :func:`live_chart`, HTML for :func:`live_html`); ``run`` numbers the
    page's reruns (one more on each), so that after the user touches another control the browser waits for a
    run that started after the touch."""

    slider: str
    current: str
    views: dict[str, object]
    run: int
    decimals: int = 2


def value_key(value: float, decimals: int = 2) -> str:
    """A followed slider's value as views are keyed (and as the browser reads the slider's label)."""
    return f"{value:.{decimals}f}"


def widget_class(key: str) -> str:
    """The class Streamlit gives the element of the widget keyed ``key``: ``st-key-`` and the key, each character
    outside ``[a-zA-Z0-9_-]`` as ``-``. The one rule of Streamlit's page markup on the Python side (the others are
    in ``frontend/streamlit_markup.js``), checked in a browser by ``tests/test_frontend_markup.py``."""
    return "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", key.strip())


def _view_id(body: str) -> str:
    return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()


def _follow_payload(follow: Follow | None, body_of) -> dict:
    if follow is None:
        return {}
    views = {}
    for value, view in follow.views.items():
        body = body_of(view)
        views[value] = {"id": _view_id(body), "body": body}
    return {
        "follow": {
            "slider": widget_class(follow.slider),
            "current": follow.current,
            "views": views,
            "run": follow.run,
            "decimals": follow.decimals,
        }
    }


@functools.cache
def ensure_plotly_js() -> Path:
    """Writes the installed plotly package's plotly.js to :data:`PLOTLY_JS` unless the same is there (once
    per server process). Returns the path."""
    script = plotly.offline.get_plotlyjs().encode()
    if not PLOTLY_JS.is_file() or PLOTLY_JS.read_bytes() != script:
        atomic_write(PLOTLY_JS, lambda stream: stream.write(script), mode=0o644)
    return PLOTLY_JS


_JSON_BY_FIGURE: dict[int, tuple[weakref.ref, str]] = {}


def _figure_json(fig) -> str:
    """``fig.to_json()``, once per figure object while it lives: a cached figure drawn on every rerun (the
    confusion matrix: 10 ms and 174 kB at 100 classes) is serialised once. The pages never change a figure
    after drawing it (they copy it first, as ``figures.copy_figure(fig).update_layout(...)`` does)."""
    key = id(fig)
    held = _JSON_BY_FIGURE.get(key)
    if held is not None and held[0]() is fig:
        return held[1]
    text = fig.to_json()
    _JSON_BY_FIGURE[key] = (weakref.ref(fig, lambda _, key=key: _JSON_BY_FIGURE.pop(key, None)), text)
    return text


def figure_payload(fig, config: dict, *, clickable: bool = False, follow: Follow | None = None) -> str:
    """What the chart component receives: the figure's JSON with its plotly ``config`` (made responsive),
    whether clicks are reported, the view's ``id`` and, with ``follow``, the neighbouring views."""
    body = _figure_json(fig)
    extra = json.dumps(
        {
            "config": {**config, "responsive": True},
            "clickable": clickable,
            "view": _view_id(body),
            **_follow_payload(follow, _figure_json),
        }
    )
    return body[:-1] + ", " + extra[1:]


def html_payload(html: str, *, follow: Follow | None = None, poll_s: float | None = None) -> str:
    """What the HTML component receives: the HTML, its view ``id``, with ``follow`` the neighbouring views and
    with ``poll_s`` the delay before the browser asks for a rerun."""
    poll = {"poll_ms": round(1000 * poll_s)} if poll_s else {}
    return json.dumps({"html": html, "view": _view_id(html), **_follow_payload(follow, str), **poll})


def live_chart(
    place, fig, config: dict, *, key: str, clickable: bool = False, follow: Follow | None = None
) -> dict | None:
    """``fig`` in ``place`` (``st`` or a column), kept mounted across reruns under ``key``. With ``clickable``
    a click on a point reruns the page and returns ``{"x", "y", "customdata"}`` of that point in that rerun
    (None otherwise). With ``follow``, the chart shows a neighbour's figure as soon as its slider is moved there."""
    ensure_plotly_js()
    callbacks = {"on_click_change": lambda: None} if clickable else {}
    with place if place is not st else contextlib.nullcontext():  # the component mounts where ``with`` is
        result = _mount_chart(
            key=key, data=figure_payload(fig, config, clickable=clickable, follow=follow), **callbacks
        )
    return result.get("click") if clickable else None


def live_html(place, html: str, *, key: str, follow: Follow | None = None, poll_s: float | None = None) -> None:
    """``html`` (a table, a line of text: the app's own markup, never user input unescaped) in ``place``, kept
    mounted under ``key``; with ``follow``, a neighbour's HTML is shown as soon as its slider is moved there.
    With ``poll_s``, the browser reruns the element's fragment after that many seconds (and again after each
    rerun that asks for it): how a fragment waits for a background job without a rerun of the whole page,
    which would rebuild the widgets and take the keyboard focus off a slider."""
    callbacks = {"on_poll_change": lambda: None} if poll_s else {}
    with place if place is not st else contextlib.nullcontext():
        _mount_html(key=key, data=html_payload(html, follow=follow, poll_s=poll_s), **callbacks)
