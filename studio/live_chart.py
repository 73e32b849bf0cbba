"""Every chart of the app: a small Streamlit component (``st.components.v2``) that draws a plotly figure once
and then updates it in place with ``Plotly.react`` when a rerun brings a changed figure.

``st.plotly_chart`` re-mounts a chart whose figure changed (``Plotly.newPlot``: the whole SVG, axes and modebar
rebuilt), three times per λ move on Explore; ``Plotly.react`` diffs and redraws only what changed
(``bench/bench_browser.py``). The component is mounted in the page itself (no iframe, no shadow root: plotly's
modebar and hover styles live in the document). It loads the plotly.js that ships with the installed plotly
package, served by Streamlit's static file serving (``.streamlit/config.toml``) from ``static/``, where
:func:`ensure_plotly_js` puts it: the app needs no internet and draws with the same plotly.js as the HTML report.
"""

from __future__ import annotations

import contextlib
import functools
import json
import weakref
from pathlib import Path

import plotly.offline
import streamlit as st

from relu_core.cache import atomic_write

#: Streamlit serves ``static/`` beside the main script at ``app/static/``.
PLOTLY_JS = Path(__file__).resolve().parent.parent / "static" / "plotly.min.js"

_JS = """
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

export default function ({ parentElement, data, setTriggerValue }) {
  let plot = parentElement.querySelector(".relu-studio-chart");
  if (!plot) {
    plot = document.createElement("div");
    plot.className = "relu-studio-chart";
    parentElement.appendChild(plot);
  }
  // called when Streamlit unmounts the element; a plot still on the page is being updated, not removed
  const cleanup = () =>
    setTimeout(() => plot.isConnected || loadPlotly().then((Plotly) => Plotly.purge(plot)).catch(() => {}), 0);
  plot.reluSetTrigger = setTriggerValue;  // the latest mount's, for the click handler bound once
  if (plot.reluDrawn === data) return cleanup;  // every rerun sends every chart again; most did not change
  plot.reluDrawn = data;
  const figure = JSON.parse(data);
  // a fixed height: with "responsive" and no height of its own plotly measures the empty element (0 px) and
  // flips between 0 and its default on alternate updates
  plot.style.height = `${figure.layout.height || 450}px`;
  loadPlotly().then((Plotly) => {
    Plotly.react(plot, figure.data, figure.layout, figure.config);
    if (figure.clickable && !plot.reluClickBound) {
      plot.reluClickBound = true;
      plot.on("plotly_click", (event) => {
        const point = event.points.find((p) => p.customdata != null) ?? event.points[0];
        plot.reluSetTrigger("click", { x: point.x, y: point.y, customdata: point.customdata ?? null });
      });
    }
  }).catch((error) => { plot.textContent = error.message; });
  return cleanup;
}
"""

_mount = st.components.v2.component("relu_studio_chart", js=_JS, isolate_styles=False)


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


def figure_payload(fig, config: dict, *, clickable: bool = False) -> str:
    """What the component receives: the figure's JSON with its plotly ``config`` (made responsive) and whether
    clicks are reported."""
    body = _figure_json(fig)
    extra = json.dumps({"config": {**config, "responsive": True}, "clickable": clickable})
    return body[:-1] + ", " + extra[1:]


def live_chart(place, fig, config: dict, *, key: str, clickable: bool = False) -> dict | None:
    """``fig`` in ``place`` (``st`` or a column), kept mounted across reruns under ``key``. With ``clickable``
    a click on a point reruns the page and returns ``{"x", "y", "customdata"}`` of that point in that rerun
    (None otherwise)."""
    ensure_plotly_js()
    callbacks = {"on_click_change": lambda: None} if clickable else {}
    with place if place is not st else contextlib.nullcontext():  # the component mounts where ``with`` is
        result = _mount(key=key, data=figure_payload(fig, config, clickable=clickable), **callbacks)
    return result.get("click") if clickable else None
