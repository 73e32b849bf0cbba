"""Plotly figures of the studies, each with one plain-language sentence saying what it shows.

:func:`figures_for` lists every figure of a :class:`~relu_core.studies.base.StudyResult` as
``(slug, figure, sentence)``; the page draws them and the CLI writes them (``--out``) as HTML and CSV.
Static PNG/SVG export through plotly needs the ``kaleido`` package, which is not a dependency: the page
offers the chart's camera button (PNG, drawn by the browser), the HTML and the CSV.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from relu_core import detector_comparison, metric_info
from relu_core import figures as core_figures
from relu_core.studies import base

STUDY_METRICS = ("fpr95", "auroc")


def _rgba(hex_color: str, alpha: float) -> str:
    r, g, b = (int(hex_color[i : i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r},{g},{b},{alpha})"


def _x_axis(info: dict) -> dict:
    axis = {"title": info.get("x_label", "x")}
    if info.get("log_x"):
        axis["type"] = "log"
    if info.get("x_range"):  # a quantity with a natural range (fractions): never an axis past it
        axis["range"] = list(info["x_range"])
    ticks = info.get("ticks")
    if ticks:  # named points (e.g. before / after calibration): room for the outer labels inside the plot
        values = [float(k) for k in ticks]
        pad = 0.35 * (max(values) - min(values) or 1.0)
        axis.update(
            tickmode="array",
            tickvals=values,
            ticktext=list(ticks.values()),
            range=[min(values) - pad, max(values) + pad],
        )
    return axis


def band_figure(result: base.StudyResult, series: str, metric: str) -> go.Figure:
    """Mean line per detector with a ±1 std band over seeds, against the series' x; marks as dotted lines."""
    info = result.series.get(series, {})
    fig = core_figures.new_figure()
    rows = result.curves[(result.curves["series"] == series) & (result.curves["metric"] == metric)]
    for detector in dict.fromkeys(rows["detector"]):
        line = rows[rows["detector"] == detector]
        x, mean, std = line["x"].to_numpy(float), line["mean"].to_numpy(float), line["std"].to_numpy(float)
        color = core_figures.detector_color(detector)
        # the ±1 std band: two invisible edges, the lower one filled up to the upper one
        edge = {"x": x, "mode": "lines", "line": {"width": 0}, "showlegend": False, "hoverinfo": "skip"}
        fig.add_trace(go.Scatter(y=mean + std, name=f"{detector} +1 std", legendgroup=detector, **edge))
        fig.add_trace(
            go.Scatter(
                y=mean - std,
                name=f"{detector} −1 std",
                legendgroup=detector,
                fill="tonexty",
                fillcolor=_rgba(color, 0.18),
                **edge,
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=mean,
                name=detector,
                mode="lines+markers",
                legendgroup=detector,
                line={"color": color, "width": 3 if detector in core_figures.PROMINENT else 1.5},
                customdata=np.stack([std, line["n_seeds"].to_numpy(float)], axis=1),
                hovertemplate=f"{detector}<br>{info.get('x_label', 'x')} = %{{x:.4g}}<br>"
                f"{metric_info.get(metric).name} = %{{y:.4f}} ± %{{customdata[0]:.4f}}"
                "<br>%{customdata[1]} seeds<extra></extra>",
            )
        )
    for label, value in info.get("marks", {}).items():
        fig.add_vline(x=value, line_dash="dot", line_color="#555")
        # the label as its own annotation: plotly.js reads an annotation's x on a log axis as log10(x), which
        # add_vline's annotation_text does not do (the "T = 1" label sat at T = 10)
        fig.add_annotation(
            x=float(np.log10(value)) if info.get("log_x") else value,
            xref="x",
            y=1,
            yref="paper",
            yanchor="bottom",
            xanchor="right" if metric == "auroc" else "left",
            text=label,
            showarrow=False,
        )
    shown = metric_info.get(metric)
    fig.update_layout(
        title=f"{shown.title} against {info.get('x_label', series)}",
        xaxis=_x_axis(info),
        yaxis={"title": shown.name},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.2},
    )
    return fig


def difference_figure(result: base.StudyResult, series: str, metric: str) -> go.Figure:
    """Rel-U − Doctor against x: mean over seeds with its 95 % paired bootstrap interval (when computed)."""
    info = result.series.get(series, {})
    rows = result.paired[(result.paired["series"] == series) & (result.paired["metric"] == metric)]
    x = rows["x"].to_numpy(float)
    fig = core_figures.new_figure()
    low, high = rows["ci_low"].to_numpy(float), rows["ci_high"].to_numpy(float)
    if np.isfinite(low).any():
        fig.add_trace(
            go.Scatter(
                x=x, y=high, name="95 % CI high", mode="lines", line={"width": 0}, showlegend=False, hoverinfo="skip"
            )
        )
        fig.add_trace(
            go.Scatter(
                x=x,
                y=low,
                name="95 % CI low",
                mode="lines",
                line={"width": 0},
                fill="tonexty",
                fillcolor="rgba(80,80,80,0.2)",
                showlegend=False,
                hoverinfo="skip",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=x,
            y=rows["estimate"].to_numpy(float),
            name="Rel-U − Doctor",
            mode="lines+markers",
            line={"color": core_figures.detector_color(base.RELU), "width": 2},
            marker={"symbol": ["circle" if s else "circle-open" for s in rows["significant"]], "size": 9},
        )
    )
    fig.add_hline(y=0.0, line_color="#333", line_width=1)
    fig.update_layout(
        title=f"Rel-U − Doctor, {metric_info.get(metric).name}, with the 95 % paired bootstrap interval",
        xaxis=_x_axis(info),
        yaxis={"title": f"Δ {metric_info.get(metric).name}"},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        legend={"orientation": "h", "y": -0.2},  # under the plot, as the curves' figure above: the x axes line up
    )
    return fig


def reliability_figure(reliability: pd.DataFrame) -> go.Figure:
    """Accuracy against mean confidence per bin, before and after temperature scaling, with the diagonal."""
    fig = core_figures.new_figure()
    fig.add_trace(
        go.Scatter(
            x=[0, 1],
            y=[0, 1],
            name="chance",
            mode="lines",
            line={"color": "#999", "dash": "dash"},
            hoverinfo="skip",
            showlegend=False,
        )
    )
    for state, color in zip(dict.fromkeys(reliability["state"]), ("#ff7f0e", "#2ca02c")):
        rows = reliability[(reliability["state"] == state) & (reliability["count"] > 0)]
        fig.add_trace(
            go.Scatter(
                x=rows["confidence"],
                y=rows["accuracy"],
                name=state,
                mode="lines+markers",
                line={"color": color, "width": 2},
                customdata=rows["count"],
                hovertemplate="confidence %{x:.3f}<br>accuracy %{y:.3f}<br>%{customdata} samples<extra></extra>",
            )
        )
    fig.update_layout(
        title="Reliability diagram (evaluation splits, all seeds pooled)",
        xaxis={"title": "mean top-1 confidence in the bin", "range": [0, 1]},
        yaxis={"title": "accuracy in the bin", "range": [0, 1.02]},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def _sentence(result: base.StudyResult, series: str, metric: str) -> str:
    info = result.series.get(series, {})
    n = ", ".join(str(int(v)) for v in sorted(set(result.curves.loc[result.curves["series"] == series, "n_seeds"])))
    shown = metric_info.get(metric)
    x_label = info.get("x_label", series)
    text = (
        f"Each line is a detector's {shown.title} on the evaluation splits "
        f"as {x_label} changes, averaged over {n} seed(s); the shaded band is ±1 standard deviation."
    )
    if series == "lambda":
        text += " Doctor has no λ, so its line is flat; the dotted lines mark λ = N₊/(N₊ + N₋) and the default 0.5."
    if series == "calibration":
        text = (
            f"{shown.title} of Doctor and Rel-U at T = 1 and at the "
            f"calibration temperature chosen on the tuning split, averaged over {n} seed(s) with a ±1 std band."
        )
    return text


def ladder_figure(ladder: pd.DataFrame, metric: str = "fpr95") -> go.Figure:
    """The ladder (:mod:`relu_core.studies.ladder`): Rel-U − Doctor per rung, a bar each, with the 95 % paired
    interval where one is valid (rungs 1-4) and none where the rung is a minimum over rows (5-6)."""
    shown = metric_info.get(metric)
    # in percentage points, as the page's ladder table
    low, high = 100 * ladder[f"{metric}_low"].to_numpy(float), 100 * ladder[f"{metric}_high"].to_numpy(float)
    value = 100 * ladder[metric].to_numpy(float)
    has = np.isfinite(low)
    labels = [f"{r}. {n}" for r, n in zip(ladder["rung"], ladder["name"])]
    fig = core_figures.new_figure()
    fig.add_trace(
        go.Bar(
            x=labels,
            y=value,
            name="Rel-U − Doctor",
            marker={
                "color": [core_figures.detector_color(base.RELU) if h else "rgba(120,120,120,0.6)" for h in has],
            },
            error_y={
                "type": "data",
                "symmetric": False,
                "array": np.where(has, high - value, 0.0),
                "arrayminus": np.where(has, value - low, 0.0),
                "visible": True,
            },
            hovertext=list(ladder["changed"]),
        )
    )
    fig.add_hline(y=0.0, line_color="#333", line_width=1)
    fig.update_layout(
        title=f"Rel-U − Doctor, {shown.name}, rung by rung ({'above' if shown.higher_is_better else 'below'} 0: "
        "Rel-U better)",
        yaxis={"title": f"Δ {shown.name} (points)"},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        showlegend=False,
    )
    return fig


def figures_for(result: base.StudyResult) -> list[tuple[str, go.Figure, str]]:
    """Every figure of ``result``: ``(slug, figure, plain-language sentence)``."""
    out = []
    if "ladder" in result.tables:
        out.append(
            (
                "ladder_fpr95",
                ladder_figure(result.tables["ladder"]),
                (
                    "Rel-U − Doctor in FPR at 95 % TPR (rung 1: correct samples positive; from rung 2 on: errors "
                    "positive), one bar a rung, each rung changing one thing from the one "
                    "before (below 0: Rel-U better). Rungs 1-4 carry the 95 % paired bootstrap interval; the grey "
                    "bars (5-6) are the mean of each detector's five best rows, a minimum over settings and seeds "
                    "with no valid interval."
                ),
            )
        )
    for series in result.series:
        for metric in STUDY_METRICS:
            out.append((f"{series}_{metric}", band_figure(result, series, metric), _sentence(result, series, metric)))
        if not result.paired.empty and (result.paired["series"] == series).any():
            out.append(
                (
                    f"{series}_fpr95_difference",
                    difference_figure(result, series, "fpr95"),
                    (
                        "The difference Rel-U − Doctor in FPR at 95 % TPR on the same splits (below 0: Rel-U accepts "
                        "fewer errors); filled markers where the 95 % paired bootstrap interval excludes 0, open "
                        "markers where there is no significant difference."
                    ),
                )
            )
    if "reliability" in result.tables:
        out.append(
            (
                "reliability",
                reliability_figure(result.tables["reliability"]),
                (
                    "Each point is a confidence bin: a calibrated model's points lie on the dashed diagonal "
                    "(accuracy equals confidence). Below it the model is over-confident, above it under-confident."
                ),
            )
        )
    return out


def paired_table(result: base.StudyResult) -> pd.DataFrame:
    """Rel-U − Doctor per series, point and metric in words (:func:`relu_core.detector_comparison.paired_table`)."""
    p = result.paired
    return detector_comparison.paired_table(p, series=p["series"], point=[f"{x:g}" for x in p["x"]])


def figure_html(fig: go.Figure, sentence: str = "") -> str:
    """A standalone HTML page of the figure with plotly.js inlined (opens offline, zoomable), the sentence below."""
    page = fig.to_html(include_plotlyjs=True, full_html=True)
    if sentence:
        page = page.replace("</body>", f"<p>{html.escape(sentence)}</p>\n</body>", 1)
    return page


def figure_csv(fig: go.Figure) -> str:
    """The data behind the figure (:func:`relu_core.figures.figure_csv`)."""
    return core_figures.figure_csv(fig)


#: The settings' keys (and the defaults' names) in words; a key not listed reads with spaces for underscores.
SETTING_WORDS = {
    "tune_fraction": "tuning fraction",
    "fractions": "tuning fractions",
    "lambda": "λ",
    "lambdas": "λ grid",
    "lambda_auto": "λ = N₊/(N₊ + N₋)",
    "temperatures": "T grid",
    "epsilons": "ε grid",
    "eps": "ε",
    "odin_T": "ODIN's T",
    "n_resamples": "bootstrap resamples per point",
    "n_bins": "calibration bins",
    "n_folds": "cross-validation folds",
    "n_per_side": "samples per side",
    "other_kept": "other set's samples kept",
    "in_distribution": "in-distribution set",
}


def settings_text(settings: dict) -> str:
    """The result's settings in one readable line ("tuning fraction: 0.5 · λ grid: 0 … 1 (11 values) · ..."), for
    the page's caption; the seeds are left out (the page shows their count) and long lists are shown by their
    ends. ``calibration_bounds`` ([low, high]) reads as the range T_cal was fitted in."""

    def show(value) -> str:
        if isinstance(value, dict):
            return ", ".join(f"{k} = {show(v)}" for k, v in value.items())
        if isinstance(value, (list, tuple)):
            items = [show(v) for v in value]
            if len(items) > 6:
                return f"{items[0]} … {items[-1]} ({len(items)} values)"
            return ", ".join(items) if items else "none"
        if isinstance(value, float):
            return f"{value:.4g}"
        return str(value)

    def word(key: str) -> str:
        return SETTING_WORDS.get(key, key.replace("_", " "))

    def item(key: str, value) -> str:
        if key == "calibration_bounds":
            low, high = value
            return f"T_cal fitted in: {show(float(low))} … {show(float(high))} (continuous, over log T)"
        if isinstance(value, dict):
            return f"{word(key)}: " + ", ".join(f"{word(k)} = {show(v)}" for k, v in value.items())
        return f"{word(key)}: {show(value)}"

    # the ladder's "rungs" are its result, one object a rung (the page shows them as a table), not a setting
    return " · ".join(item(key, value) for key, value in settings.items() if key not in ("seeds", "seeds_eps", "rungs"))
