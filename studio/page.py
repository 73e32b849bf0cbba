"""What the pages draw around their own content: the study pages' header with the sidebar (:func:`page_header`),
download buttons (:func:`download_button`), every chart (:func:`chart`) and a scroll to a place
(:func:`scroll_here`)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from relu_core import figures, protocol
from studio import frame, session
from studio.live_chart import Follow, live_chart
from studio.runs import run_label
from studio.text import plain

#: The mime type of each kind of file the pages offer, by suffix.
MIME_TYPES = {".csv": "text/csv", ".html": "text/html", ".json": "application/json"}


def manual_help(manual_page: str) -> str:
    """The "?" of a page's heading: the page of the manual that explains it (``docs/<manual_page>``, which
    ``./run_docs.sh`` serves); tests/test_docs.py checks that every page names one that exists."""
    return f"Manual: docs/{manual_page} (served by ./run_docs.sh)."


def page_header(title: str, introduction: str, manual_page: str | None = None):
    """The top of a study page: its title with its manual page in the "?" (:func:`manual_help`), the current run
    (``frame.current_run``) and what the page does (markdown). Returns the run."""
    run = frame.current_run()
    st.subheader(
        title, help=manual_help(manual_page) if manual_page else None
    )  # like Explore's heading: a title took 90 px of 1280 x 720
    st.caption(plain(f"Run: {run_label(run)}"))
    st.markdown(introduction)
    return run


def fixed_note(temperature: float = 1.0, lam: float = 0.5) -> str:
    """A sentence for a result computed at a fixed T and λ when the shared ones differ ("" when they agree)."""
    shared = session.shared()
    if (shared.temperature, shared.lam) == (temperature, lam):
        return ""
    return (
        f" Rel-U and Doctor at T = {temperature:g}, λ = {lam:g} here, not the shared T = {shared.temperature:g}, "
        f"λ = {shared.lam:g}."
    )


def run_tagged(file_name: str) -> str:
    """``file_name`` with the current run's id (its first 8 characters) before the suffix,
    "roc.csv" -> "roc_run-1a2b3c4d.csv", so that files saved from two runs neither collide nor get mixed up."""
    run_id = st.session_state.get(session.RUN_ID)
    if not run_id:
        return file_name
    path = Path(file_name)
    return f"{path.stem}_run-{run_id[:8]}{path.suffix}"


def download_button(place, label: str, data, file_name: str, *, key: str) -> None:
    """A download button in ``place`` (``st`` or a column) for ``data`` (text, or a function making it on
    demand) saved as ``file_name`` tagged with the run (:func:`run_tagged`), its mime type from the suffix.
    Pressing it does not rerun the page."""
    place.download_button(
        label,
        data,
        file_name=run_tagged(file_name),
        mime=MIME_TYPES[Path(file_name).suffix],
        on_click="ignore",
        key=key,
    )


def chart(
    place,
    fig,
    stem: str,
    *,
    key: str,
    config: dict | None = None,
    clickable: bool = False,
    follow: Follow | None = None,
):
    """``fig`` in ``place`` (``st`` or a column) as the library built it, in Plotly's own theme (the HTML report's
    look too), kept mounted across reruns and updated in place (:mod:`studio.live_chart`). The camera button
    saves ``stem``.png tagged with the run (:func:`run_tagged`) unless ``config`` replaces the chart config. With
    ``clickable``, returns the clicked point (``{"x", "y", "customdata"}``) in the rerun its click starts, else
    None. ``follow`` (:class:`studio.live_chart.Follow`): the figures of a slider's neighbouring values."""
    config = figures.chart_config(run_tagged(stem)) if config is None else config
    return live_chart(place, fig, config, key=key, clickable=clickable, follow=follow)


def fraction_slider(place, label: str, *, key: str) -> float:
    """A slider over the tuning-split fractions every page offers (``protocol.TUNE_FRACTION_PRESETS``), shown as
    percentages."""
    return place.select_slider(label, options=protocol.TUNE_FRACTION_PRESETS, key=key, format_func=lambda f: f"{f:.0%}")


_SCROLL_JS = """
export default function ({ parentElement, data }) {
  if (parentElement.reluScrolledFor === data) return;
  parentElement.reluScrolledFor = data;
  // after the tabs' own scroll (Streamlit brings a tab selected from code into view at the window's edge)
  setTimeout(() => parentElement.scrollIntoView({ behavior: "smooth", block: "start" }), 350);
}
"""
_scroll = st.components.v2.component("relu_studio_scroll", js=_SCROLL_JS, isolate_styles=False)


def scroll_here(token: str, *, key: str) -> None:
    """Scrolls the browser window to this place once per ``token`` (a new token scrolls again)."""
    _scroll(key=key, data=token)
