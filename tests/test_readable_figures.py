"""Figures readable at 10, 100 and 1,000 classes and on the 19-spoke radar: titles never cut, class tick labels
thinned and short, radar labels that neither collide nor leave the figure, and marks that say who is better.
The layout rules are checked on the figures; the browser test draws them in Chromium at the width the pages
give them at 1280 x 720 and measures what it drew."""

from __future__ import annotations

import html
import re
from pathlib import Path

import numpy as np
import plotly
import plotly.io as pio
import pytest

from relu_core import corruptions, figures
from studio.headless import wait_ms

#: The longest title line (tags removed) that fits half of Explore's 820 px main column at plotly's 17 px font.
TITLE_CHARS = 40


def _lines(text: str) -> list[str]:
    return [re.sub(r"<[^>]+>", "", line) for line in text.split("<br>")]


def _class_names(n: int) -> list[str]:
    return [f"n{k:08d} great white shark, man-eater" for k in range(n)]  # ImageNet-like: long, with commas


def _matrices(n: int):
    rng = np.random.default_rng(n)
    names = _class_names(n)
    counts = rng.integers(0, 5, (n, n)) + np.diag(rng.integers(20, 50, n))
    return names, (
        figures.dstar_heatmap(rng.random((n, n)), names, title="D* (Rel-U, λ = 0.5)"),
        figures.confusion_heatmap(counts, names, title="Confusion matrix (tuning split)"),
    )


@pytest.mark.parametrize("n", [10, 100, 1000])
def test_matrix_titles_fit_and_ticks_are_thinned_and_short(n):
    names, figs = _matrices(n)
    for fig in figs:
        title = fig.layout.title.text
        assert all(len(line) <= TITLE_CHARS for line in _lines(title)), title
        if n > figures.FIGURE_MAX_CLASSES:  # the "top k of n" note, on its own line, with room in the margin
            assert f"top {figures.FIGURE_MAX_CLASSES} of {n} classes" in _lines(title)[1]
            assert fig.layout.margin.t >= 60
        for axis in (fig.layout.xaxis, fig.layout.yaxis):
            assert len(axis.tickvals) <= figures.MAX_CLASS_TICKS
            assert all(len(text) <= figures.MAX_TICK_CHARS for text in axis.ticktext)
            assert all(v in names for v in axis.tickvals)  # the ticks name the real classes, cut only when shown
        assert list(fig.layout.xaxis.ticktext) == list(fig.layout.yaxis.ticktext)
        fewer = fig.update_layout(**figures.matrix_ticks(fig, 10, 10)).layout  # a smaller copy's (the Start page's)
        assert list(fewer.xaxis.tickvals) == list(fewer.yaxis.tickvals) and 0 < len(fewer.xaxis.tickvals) <= 10
        assert all(len(text) <= 10 for text in fewer.xaxis.ticktext)


def _radar(better: dict[str, str]):
    rng = np.random.default_rng(0)
    axes = list(corruptions.CORRUPTIONS)
    series = {"Doctor": rng.uniform(0.7, 0.9, len(axes)), "Rel-U": rng.uniform(0.7, 0.9, len(axes))}
    return figures.radar_figure(axes, series, "AUROC<br><sup>severity 5</sup>", radial_range=(0.5, 1), better=better)


def test_radar_labels_are_short_and_name_the_better_detector():
    better = {"fog": "Rel-U", "gaussian_noise": "Doctor", "elastic_transform": "Doctor"}
    fig = _radar(better)
    angular = fig.layout.polar.angularaxis
    for axis, text in zip(angular.tickvals, angular.ticktext, strict=True):
        lines = _lines(text)
        assert " ".join(lines[:2]).replace(" ", "_").startswith(axis.split("_")[0])  # the name, in words
        assert all(len(line) <= 12 for line in lines), text
        winner = better.get(axis)
        assert (f"★ {winner}" in text) if winner else ("★" not in text)
    stars = {t.name: set(t.theta) for t in fig.data if t.marker.symbol == "star"}
    assert stars == {"Rel-U significantly better": {"fog"}, "Doctor significantly better": set(better) - {"fog"}}
    assert fig.layout.height >= 600  # large enough to read 19 spokes


# ------------------------------------------------------------------------------- drawn in Chromium

ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"
#: Width of a chart in a half column and in the whole main column at 1280 x 720 with the sidebar open.
HALF, WHOLE = 410, 820

_MEASURE = """() => [...document.querySelectorAll('.js-plotly-plot')].map(plot => {
    const box = plot.getBoundingClientRect();
    const rect = e => { const r = e.getBoundingClientRect();
                        return [r.left - box.left, r.top - box.top, r.right - box.left, r.bottom - box.top]; };
    const texts = selector => [...plot.querySelectorAll(selector)].filter(e => e.textContent.trim()).map(rect);
    return {name: (plot.layout.title || {}).text || '', width: box.width, height: box.height, title: texts('.gtitle'),
            x: texts('.xtick text'), y: texts('.ytick text'), angular: texts('.angularaxistick text'),
            legend: texts('.legend .legendtext')}; })"""


def _overlaps(boxes: list[list[float]]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, a in enumerate(boxes)
        for j, b in enumerate(boxes[i + 1 :], i + 1)
        if a[0] < b[2] - 0.5 and b[0] < a[2] - 0.5 and a[1] < b[3] - 0.5 and b[1] < a[3] - 0.5
    ]


@pytest.mark.browser
@pytest.mark.slow
def test_figures_drawn_at_page_width_are_readable(chromium, tmp_path):
    """At 100 and 1,000 classes the matrices' titles stay inside the figure and no two tick labels overlap; the
    radar's 19 labels (three naming a winner) stay inside the figure and apart."""
    drawn = [*_matrices(100)[1], *_matrices(1000)[1]]
    radar = _radar({"fog": "Rel-U", "gaussian_noise": "Doctor", "elastic_transform": "Doctor", "snow": "Rel-U"})
    parts = [pio.to_html(fig, include_plotlyjs=False, full_html=False, default_width=f"{HALF}px") for fig in drawn]
    parts.append(pio.to_html(radar, include_plotlyjs=False, full_html=False, default_width=f"{WHOLE}px"))
    plotly_js = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    document = tmp_path / "figures.html"
    document.write_text(
        f"<html><head><script src='{plotly_js.as_uri()}'></script></head><body style='margin:0'>"
        + "".join(f"<div>{p}</div>" for p in parts)
        + "</body></html>",
        encoding="utf-8",
    )
    page = chromium.new_context(viewport={"width": 1280, "height": 720}).new_page()
    page.goto(document.as_uri(), timeout=wait_ms(120_000))
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot .main-svg').length >= {2 * len(parts)}", timeout=wait_ms(120_000)
    )
    measured = page.evaluate(_MEASURE)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "figures_100_1000_classes_radar.png"), full_page=True)
    assert len(measured) == len(parts)
    for fig, found in zip([*drawn, radar], measured, strict=True):
        name = _lines(fig.layout.title.text)[0]
        inside = [
            b
            for b in found["title"] + found["angular"]
            if b[0] < 0 or b[1] < 0 or b[2] > found["width"] or b[3] > found["height"]
        ]
        assert found["title"] and not inside, (name, inside)
        for kind in ("x", "y", "angular"):
            assert not _overlaps(found[kind]), (name, kind, _overlaps(found[kind]))
    radar_drawn = measured[-1]
    assert len(radar_drawn["angular"]) == len(corruptions.CORRUPTIONS)
    assert not _overlaps(radar_drawn["angular"] + radar_drawn["legend"])  # the legend clear of the labels


def test_a_cut_tick_label_never_splits_an_escaped_character():
    """Class names reach plotly with ``<``, ``>`` and ``&`` as entities; cutting a long name cuts the name,
    not its entity (a label "&l…" would show as such)."""
    names = [f"<script>{k}</script>-class" for k in range(20)] + ["a&b"]
    fig = figures.confusion_heatmap(np.eye(21, dtype=int), names)
    ticks = fig.layout.xaxis.ticktext
    assert ticks and all(t.startswith("&lt;script&gt;") and t.endswith("…") for t in ticks if "script" in t)
    assert all(html.unescape(t).startswith("<script>") for t in ticks if "script" in t)
