"""Every chart of the app, and the tables that follow a slider: small Streamlit components
(``st.components.v2``) that draw once and then update in place when a rerun brings a changed view.

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

# What both components share: plotly.js, their own element, and the following of a slider.
_SHARED_JS = """
function loadPlotly() {
  // one script element per page; resolves to the plotly.js of app/static, whoever else set window.Plotly
  if (!window.__reluStudioPlotly) {
    window.__reluStudioPlotly = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = new URL("app/static/plotly.min.js", document.baseURI).href;
      script.onload = () => resolve(window.Plotly);
      script.onerror = () => reject(new Error("Rel-U Studio: app/static/plotly.min.js could not be loaded"));
      document.head.appendChild(script);
    });
  }
  return window.__reluStudioPlotly;
}

// The component's element in ``parent``, made on the first mount and kept across reruns.
function ownElement(parent, className) {
  let element = parent.querySelector(`.${className}`);
  if (!element) {
    element = document.createElement("div");
    element.className = className;
    parent.appendChild(element);
  }
  return element;
}

// The value a keyed st.slider shows (its thumb's label), as the server names views. A rerun may leave an old copy
// of the slider on the page for a moment: the last copy not marked stale is the live one.
function sliderValue(follow) {
  const labels = [...document.querySelectorAll(`.${follow.slider} [data-testid="stSliderThumbValue"]`)];
  const live = labels.filter((label) => !label.closest('[data-stale="true"]'));
  const label = (live.length ? live : labels).at(-1);
  return label ? Number(label.textContent).toFixed(follow.decimals) : null;
}

// What a user changes settings with (in the page or the sidebar): an interaction there may make the neighbours'
// views wrong. Tabs and expanders only show or hide, and a chart's zoom or hover changes no setting.
const CONTROLS = "input, textarea, select, button, label, [role=slider], [role=checkbox], [role=radio], "
  + "[role=switch], [role=combobox], [role=option], [role=listbox]";
const NOT_SETTINGS = ".js-plotly-plot, [role=tab], summary";

// One registry per page: the elements following a slider, and whether following is on.
function followers() {
  if (window.__reluStudioFollow) return window.__reluStudioFollow;
  const registry = { targets: new Set(), blockedAt: null, lastRun: -1 };
  // Another control touched: its rerun, or one already under way (which started before the touch and may
  // still bring views of the old settings), come first. Following resumes with the run after those two.
  const interaction = (event) => {
    const element = event.target instanceof Element ? event.target : null;
    if (!element || element.closest(NOT_SETTINGS) || !element.closest(CONTROLS)) return;
    for (const target of registry.targets) if (target.follow && element.closest(`.${target.follow.slider}`)) return;
    registry.blockedAt = registry.lastRun;
  };
  for (const type of ["pointerdown", "keydown", "change"]) document.addEventListener(type, interaction, true);
  // Streamlit's slider sets its input's aria-valuetext on every render of the slider, the user's moves included
  new MutationObserver((records) => {
    if (registry.blockedAt !== null) return;
    for (const target of registry.targets) {
      if (target.follow && records.some((r) => r.target.closest(`.${target.follow.slider}`))) target.update(false);
    }
  }).observe(document.body, { subtree: true, attributes: true, attributeFilter: ["aria-valuetext"] });
  window.__reluStudioFollow = registry;
  return registry;
}

// Registers ``element`` (drawn by ``show(view)``, which returns false when drawing failed) for this render's
// payload and shows the view its slider's value asks for, else the server's own. Returns the cleanup.
function follow(element, payload, current, show) {
  const registry = followers();
  let target = element.reluFollowTarget;
  if (!target) {
    target = element.reluFollowTarget = { shown: null };
    // rendered: the server's answer, its own view unless the slider has moved on to a neighbour's; a value
    // without a neighbour's view keeps what is shown until the server answers for it
    target.update = (rendered) => {
      const follow = target.follow, value = follow && sliderValue(follow);
      const ahead = value && value !== follow.current;  // the slider left the value this answer is for
      const own = rendered && (!ahead || target.shown === null) ? target.current : null;
      const view = (value && follow.views[value]) || own;
      if (view && view.id !== target.shown) {
        target.shown = view.id;
        Promise.resolve(show(view)).then((drawn) => { if (drawn === false) target.shown = null; });
      }
    };
  }
  target.follow = payload.follow || null;
  target.current = current;
  if (target.follow) {
    if (target.follow.run < registry.lastRun) registry.blockedAt = null;  // a new session (a restarted server)
    registry.lastRun = target.follow.run;
    if (registry.blockedAt !== null && target.follow.run >= registry.blockedAt + 2) registry.blockedAt = null;
  }
  registry.targets.add(target);
  target.update(true);
  // called when Streamlit unmounts the element; an element still on the page is being updated, not removed
  return () => setTimeout(() => element.isConnected || registry.targets.delete(target), 0);
}
"""

_CHART_JS = (
    _SHARED_JS
    + """
export default function ({ parentElement, data, setTriggerValue }) {
  const plot = ownElement(parentElement, "relu-studio-chart");
  plot.reluSetTrigger = setTriggerValue;  // the latest mount's, for the click handler bound once
  if (plot.reluPayload !== data) {  // every rerun sends every chart again; most did not change
    plot.reluPayload = data;
    const payload = JSON.parse(data);
    plot.reluConfig = payload.config;
    plot.reluClickable = payload.clickable;
    plot.reluUnfollow = follow(plot, payload, { id: payload.view, figure: payload }, (view) => draw(plot, view));
  }
  const unfollow = plot.reluUnfollow;
  return () => {
    unfollow();
    setTimeout(() => plot.isConnected || loadPlotly().then((Plotly) => Plotly.purge(plot)).catch(() => {}), 0);
  };
}

function draw(plot, view) {
  const figure = view.figure || JSON.parse(view.body);
  // a fixed height: with "responsive" and no height of its own plotly measures the empty element (0 px) and
  // flips between 0 and its default on alternate updates
  plot.style.height = `${figure.layout.height || 450}px`;
  return loadPlotly().then((Plotly) => {
    Plotly.react(plot, figure.data, figure.layout, plot.reluConfig);
    if (plot.reluClickable && !plot.reluClickBound) {
      plot.reluClickBound = true;
      plot.on("plotly_click", (event) => {
        const point = event.points.find((p) => p.customdata != null) ?? event.points[0];
        plot.reluSetTrigger("click", { x: point.x, y: point.y, customdata: point.customdata ?? null });
      });
    }
    return true;
  }).catch((error) => {
    plot.textContent = error.message;
    return false;
  });
}
"""
)

_HTML_JS = (
    _SHARED_JS
    + """
export default function ({ parentElement, data, setTriggerValue }) {
  const box = ownElement(parentElement, "relu-studio-html");
  if (box.reluPayload !== data) {
    box.reluPayload = data;
    const payload = JSON.parse(data);
    box.reluPollMs = payload.poll_ms || 0;
    box.reluUnfollow = follow(box, payload, { id: payload.view, body: payload.html }, (view) => {
      box.innerHTML = view.body;
      return true;
    });
  }
  // while the server waits on something, ask it again (a rerun of this element's fragment only) in a moment
  clearTimeout(box.reluPoll);
  if (box.reluPollMs) box.reluPoll = setTimeout(() => setTriggerValue("poll", Date.now()), box.reluPollMs);
  const unfollow = box.reluUnfollow;
  return () => {
    unfollow();
    setTimeout(() => box.isConnected || clearTimeout(box.reluPoll), 0);
  };
}
"""
)

#: The tables' look, close to Streamlit's own (its theme's text colour and font); significant differences
#: coloured as in the report.
_HTML_CSS = """
.relu-studio-html table { border-collapse: collapse; font-size: 0.875rem; margin: 0.25rem 0 0.5rem; }
.relu-studio-html th, .relu-studio-html td { border: 1px solid rgba(128, 128, 128, 0.25); padding: 0.25rem 0.75rem;
  text-align: right; font-variant-numeric: tabular-nums; }
.relu-studio-html th { font-weight: 600; background: rgba(128, 128, 128, 0.08); }
.relu-studio-html td:first-child, .relu-studio-html th:first-child { text-align: left; }
.relu-studio-html .better { background: #c7e9c0; color: #111; font-weight: 700; }
.relu-studio-html .worse { background: #fcbba1; color: #111; font-weight: 700; }
.relu-studio-html p { margin: 0.25rem 0; font-size: 0.875rem; opacity: 0.75; }
"""

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


def _view_id(body: str) -> str:
    return hashlib.blake2b(body.encode(), digest_size=8).hexdigest()


def _follow_payload(follow: Follow | None, body_of) -> dict:
    if follow is None:
        return {}
    views = {}
    for value, view in follow.views.items():
        body = body_of(view)
        views[value] = {"id": _view_id(body), "body": body}
    slider = "st-key-" + re.sub(r"[^a-zA-Z0-9_-]", "-", follow.slider.strip())  # as Streamlit names its class
    return {
        "follow": {
            "slider": slider,
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
    after drawing it (they copy it first, as ``go.Figure(fig).update_layout(...)`` does)."""
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
