"""The app's chart and HTML components (studio.live_chart): the figure and config they send, the neighbouring
views of a followed slider, the plotly.js served offline, and the server settings the live updates rely on.
The browser side of following is tested in test_browser.py."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import plotly.graph_objects as go
import plotly.offline
from apptest_charts import charts
from streamlit.testing.v1 import AppTest

from studio import live_chart

REPO = Path(__file__).resolve().parent.parent


def test_payload_is_the_figure_with_a_responsive_config() -> None:
    fig = go.Figure(go.Scatter(x=[0.0, 0.5, 1.0], y=[0.1, 0.2, 0.9], name="Rel-U"), layout={"title": "ROC"})
    payload = json.loads(live_chart.figure_payload(fig, {"displaylogo": False}, clickable=True))
    assert payload["data"] == json.loads(fig.to_json())["data"]
    assert payload["layout"] == json.loads(fig.to_json())["layout"]
    assert payload["config"] == {"displaylogo": False, "responsive": True}
    assert payload["clickable"] is True


def test_neighbouring_views_carry_the_id_they_will_have_when_shown() -> None:
    """A neighbour's view and the same view sent later as the current one share an id (the browser then
    redraws nothing); different content, different ids. The slider is named by Streamlit's key class."""
    at_51 = go.Figure(go.Heatmap(z=[[0.0, 0.51]]), layout={"title": "D* (λ = 0.51)"})
    at_49 = go.Figure(go.Heatmap(z=[[0.0, 0.49]]), layout={"title": "D* (λ = 0.49)"})
    follow = live_chart.Follow("ex_lam", "0.50", {"0.49": at_49, "0.51": at_51}, run=7)
    now = json.loads(live_chart.figure_payload(go.Figure(go.Heatmap(z=[[0.0, 0.5]])), {}, follow=follow))
    assert now["follow"]["slider"] == "st-key-ex_lam" and now["follow"]["current"] == "0.50"
    assert now["follow"]["run"] == 7 and now["follow"]["decimals"] == 2
    views = now["follow"]["views"]
    assert set(views) == {"0.49", "0.51"}
    assert json.loads(views["0.51"]["body"]) == json.loads(at_51.to_json())
    again = go.Figure(go.Heatmap(z=[[0.0, 0.51]]), layout={"title": "D* (λ = 0.51)"})  # built again, the same way
    later = json.loads(live_chart.figure_payload(again, {}))  # λ = 0.51 sent as the current view
    assert "follow" not in later
    assert later["view"] == views["0.51"]["id"] != views["0.49"]["id"] != now["view"]
    html = json.loads(
        live_chart.html_payload("<p>λ = 0.5</p>", follow=live_chart.Follow("a b", "0.50", {"0.51": "<p>x</p>"}, run=1))
    )
    assert html["html"] == "<p>λ = 0.5</p>" and html["follow"]["slider"] == "st-key-a-b"
    assert html["view"] == json.loads(live_chart.html_payload("<p>λ = 0.5</p>"))["view"]
    assert html["follow"]["views"]["0.51"] == {
        "id": json.loads(live_chart.html_payload("<p>x</p>"))["view"],
        "body": "<p>x</p>",
    }
    assert [live_chart.value_key(v) for v in (0.5, 0.51, 1.0, 0.0)] == ["0.50", "0.51", "1.00", "0.00"]
    assert live_chart.value_key(0.125, 3) == "0.125"
    assert json.loads(live_chart.html_payload("<p>…</p>", poll_s=0.5))["poll_ms"] == 500
    assert "poll_ms" not in json.loads(live_chart.html_payload("<p>…</p>"))


def test_plotly_js_is_the_installed_packages_and_rewritten_when_different(tmp_path, monkeypatch) -> None:
    target = tmp_path / "static" / "plotly.min.js"
    monkeypatch.setattr(live_chart, "PLOTLY_JS", target)
    live_chart.ensure_plotly_js.cache_clear()
    try:
        assert live_chart.ensure_plotly_js() == target
        assert target.read_bytes() == plotly.offline.get_plotlyjs().encode()
        assert target.stat().st_mode & 0o777 == 0o644  # the server process may run as another user
        target.write_text("stale")
        live_chart.ensure_plotly_js.cache_clear()
        live_chart.ensure_plotly_js()
        assert target.read_bytes() == plotly.offline.get_plotlyjs().encode()
    finally:
        live_chart.ensure_plotly_js.cache_clear()


def test_the_script_is_served_from_where_the_component_loads_it() -> None:
    config = tomllib.loads((REPO / ".streamlit" / "config.toml").read_text())
    assert config["server"]["enableStaticServing"] is True
    # Streamlit serves static/ beside the main script (app.py) at app/static/
    assert live_chart.PLOTLY_JS == REPO / "static" / "plotly.min.js"
    assert "app/static/plotly.min.js" in live_chart._CHART_JS
    # a full garbage collection after every rerun held the GIL while the deltas were still being sent
    assert config["runner"]["postScriptGC"] is False


def test_the_components_code_is_the_files_of_studio_frontend_from_any_working_directory(tmp_path) -> None:
    """Each component's module is Streamlit's markup, the shared code, then its own file; read beside the module,
    so a server started from another directory finds them."""
    frontend = REPO / "studio" / "frontend"
    assert live_chart.FRONTEND == frontend
    shared = [(frontend / name).read_text() for name in ("streamlit_markup.js", "shared.js")]
    assert live_chart._CHART_JS == "\n".join([*shared, (frontend / "chart.js").read_text()])
    assert live_chart._HTML_JS == "\n".join([*shared, (frontend / "html.js").read_text()])
    assert live_chart._HTML_CSS == (frontend / "html.css").read_text()
    code = "from studio import live_chart; print(len(live_chart._CHART_JS), live_chart.FRONTEND)"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.stdout.split() == [str(len(live_chart._CHART_JS)), str(frontend)], out.stderr


def test_a_page_mounts_one_component_per_chart_under_its_key(tmp_path) -> None:
    script = tmp_path / "page.py"
    script.write_text(
        "import plotly.graph_objects as go\n"
        "import streamlit as st\n"
        "from studio import page\n"
        "page.chart(st, go.Figure(go.Bar(y=[1, 2])), 'bars', key='bars')\n"
        "left, _ = st.columns(2)\n"
        "clicked = page.chart(left, go.Figure(go.Heatmap(z=[[1, 2]])), 'cells', key='cells', clickable=True)\n"
        "st.write(repr(clicked))\n"
    )
    at = AppTest.from_file(str(script), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    drawn = charts(at)
    assert [c["data"][0]["type"] for c in drawn] == ["bar", "heatmap"]
    assert [c["clickable"] for c in drawn] == [False, True]
    assert drawn[0]["config"]["toImageButtonOptions"]["filename"] == "bars"
    assert at.markdown[-1].value == "None"  # no click yet


def test_a_figure_is_serialised_once_while_it_lives() -> None:
    fig = go.Figure(go.Heatmap(z=[[1, 2], [3, 4]]))
    first = live_chart.figure_payload(fig, {})
    fig.data[0].z = [[0, 0], [0, 0]]  # the pages never do this; it shows the cache is per object
    assert live_chart.figure_payload(fig, {}) == first
    other = go.Figure(go.Heatmap(z=[[0, 0], [0, 0]]))
    assert json.loads(live_chart.figure_payload(other, {}))["data"][0]["z"] == [[0, 0], [0, 0]]
    key = id(fig)
    del fig
    gc.collect()  # a figure holds reference cycles (its traces point back at it)
    assert key not in live_chart._JSON_BY_FIGURE


def test_saved_files_are_tagged_with_the_run(tmp_path) -> None:
    """Files saved from two runs ("roc.csv") neither collide nor get mixed up: each name carries the run."""
    script = tmp_path / "tagged.py"
    script.write_text(
        "import plotly.graph_objects as go\n"
        "import streamlit as st\n"
        "from studio import page\n"
        "st.session_state['run_id'] = '0123456789abcdef'\n"
        "page.chart(st, go.Figure(go.Bar(y=[1, 2])), 'bars', key='bars')\n"
        "class Place:  # records what the button is asked to save as (AppTest's media URLs drop the name)\n"
        "    def download_button(self, *args, **kwargs):\n"
        "        st.session_state['saved_as'] = kwargs['file_name']\n"
        "page.download_button(Place(), 'Table', 'a,b', 'table.csv', key='dl')\n"
    )
    at = AppTest.from_file(str(script), default_timeout=120).run()
    assert not at.exception, [e.value for e in at.exception]
    assert charts(at)[0]["config"]["toImageButtonOptions"]["filename"] == "bars_run-01234567"
    assert at.session_state["saved_as"] == "table_run-01234567.csv"
