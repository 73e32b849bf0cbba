"""Plotly figures of Rel-U Studio: numpy arrays in, ``plotly.graph_objects.Figure`` out.

No Streamlit here: the app, the CLI and notebooks share these builders. Every figure keeps the
exact numbers it was given (hover texts show them at full precision) so that ``figure_csv`` can
return the data behind any figure.

Conventions shared with :mod:`relu_core.metrics`: an uncertainty score is higher when the sample is
more likely misclassified; on ROC curves the positives are the correctly classified samples, so the
"95 %-TPR point" is where 95 % of the correct predictions are accepted.
"""

from __future__ import annotations

import copy
import html
from collections.abc import Mapping, Sequence

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

from relu_core import csv_text, metric_info
from relu_core.limits import FIGURE_MAX_CLASSES

# One colour per detector everywhere in the app; Rel-U and Doctor are the two being compared, so they
# get strong, distinct colours and thicker lines, the baselines muted ones.
DETECTOR_COLORS: dict[str, str] = {
    "Rel-U": "#d62728",
    "Doctor": "#1f77b4",
    "MSP": "#7f7f7f",
    "ODIN": "#bcbd22",
    "Entropy": "#9467bd",
    "Energy": "#8c564b",
    "MLP": "#e377c2",
    "MC-Dropout": "#2ca02c",
    "Deep Ensembles": "#17becf",
    "Conformal (APS)": "#ff7f0e",
    "Conformal (RAPS)": "#ffbb78",
}
PROMINENT = frozenset({"Rel-U", "Doctor"})
_FALLBACK_COLORS = ("#17becf", "#e377c2", "#2ca02c", "#ff7f0e")

# Plotly's client-side "download as PNG" button (no server, no internet); pass as ``config`` to the chart.
PNG_SCALE = 2


def detector_color(name: str) -> str:
    """The fixed colour of a detector (by display name); unknown names get a stable fallback colour."""
    if name in DETECTOR_COLORS:
        return DETECTOR_COLORS[name]
    return _FALLBACK_COLORS[sum(map(ord, name)) % len(_FALLBACK_COLORS)]


#: The dash of each baseline's thin line, so that lines of near colours (MSP's grey, ODIN's olive) differ in shape
#: too; Rel-U and Doctor are thick and solid.
_BASELINE_DASHES = {"MSP": "dot", "ODIN": "dashdot", "Entropy": "dash", "Energy": "longdash"}


def _line_style(name: str) -> dict:
    if name in PROMINENT:
        return {"color": detector_color(name), "width": 3, "dash": "solid"}
    return {"color": detector_color(name), "width": 1.5, "dash": _BASELINE_DASHES.get(name, "dot")}


#: Modebar buttons no chart offers: selections (they mean nothing on these charts), zoom in / out and autoscale
#: (the box zoom and the reset do it), and plotly.js 4's upload to Plotly Cloud. The four left (camera, zoom,
#: pan, reset) stay clear of a title's end at 1280 px.
MODEBAR_REMOVED = ("lasso2d", "select2d", "zoomIn2d", "zoomOut2d", "autoScale2d", "sendChartToCloud")


def chart_config(filename: str) -> dict:
    """Plotly chart config: the modebar's camera button saves a PNG named ``filename``.png."""
    return {
        "displaylogo": False,
        "toImageButtonOptions": {"format": "png", "filename": filename, "scale": PNG_SCALE},
        "modeBarButtonsToRemove": list(MODEBAR_REMOVED),
    }


def _exact(values: np.ndarray) -> np.ndarray:
    """Full-precision text of each value (shortest repr that round-trips), for hover labels."""
    values = np.asarray(values)
    if np.issubdtype(values.dtype, np.floating):
        return values.astype(np.float64).astype(str)
    return values.astype(np.int64).astype(str)


def _check_square(matrix: np.ndarray, class_names: Sequence[str], what: str) -> np.ndarray:
    matrix = np.asarray(matrix)
    if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1]:
        raise ValueError(f"{what} must be a square matrix, got shape {matrix.shape}")
    if len(class_names) != matrix.shape[0]:
        raise ValueError(f"{what} has {matrix.shape[0]} classes but {len(class_names)} class names were given")
    return matrix


def top_classes(matrix: np.ndarray, k: int = FIGURE_MAX_CLASSES) -> np.ndarray:
    """Indices (ascending) of the ``k`` classes with the largest off-diagonal row + column mass of a square
    ``matrix`` (the most confused classes, or the largest D* weights); every class when there are ``k`` or
    fewer. Ties go to the lower index. Lets a matrix figure of 1000 classes stay readable and light."""
    n = matrix.shape[0]
    if n <= k:
        return np.arange(n)

    def off_diagonal_mass(values: np.ndarray) -> np.ndarray:
        return values.sum(axis=0) + values.sum(axis=1) - 2 * np.diag(values)

    mass = off_diagonal_mass(np.asarray(matrix, dtype=np.float64))
    if not np.isfinite(mass).all():  # a NaN entry counts as 0, an infinite one as the largest float
        mass = off_diagonal_mass(np.nan_to_num(np.asarray(matrix, dtype=np.float64)))
    return np.sort(np.argsort(-mass, kind="stable")[:k])


def _top_note(title: str, shown: int, n: int, what: str) -> str:
    """The title, with a second, smaller line when only the top ``shown`` of ``n`` classes are drawn (on one
    line it ran past half a 1280 px page and was cut)."""
    return title if shown == n else f"{title}<br><sup>top {shown} of {n} classes {what}</sup>"


#: A matrix figure's height in pixels: two of them side by side under Explore's control bar fit in 1280 x 720.
MATRIX_HEIGHT = 390
#: A matrix figure labels at most this many classes per axis: every k-th class beyond that, the same on both
#: (at :data:`MATRIX_HEIGHT` in half a 1280 px page, about 20 px per label).
MAX_CLASS_TICKS = 13
#: A class tick label longer than this is cut with "…" (the hover text names the class in full): long names
#: took the matrix's room in its margins.
MAX_TICK_CHARS = 12


def short_label(name: str, limit: int = MAX_TICK_CHARS) -> str:
    """``name`` cut to ``limit`` characters, its end replaced by "…" when it was longer."""
    return name if len(name) <= limit else name[: limit - 1] + "…"


def _class_ticks(names: Sequence[str], max_ticks: int = MAX_CLASS_TICKS, max_chars: int = MAX_TICK_CHARS) -> dict:
    """The same class names on both axes of a matrix (left to plotly, the x axis of a 50-class matrix would
    label every other class and the y axis every one, so a row's label would not meet its column's)."""
    shown = list(names)[:: -(-len(names) // max_ticks) or 1]
    # the names come as the axes hold them (:func:`_label`): cut the name itself, never an entity in half
    ticktext = [_label(short_label(str(_unlabel(name)), max_chars)) for name in shown]
    return {"tickmode": "array", "tickvals": shown, "ticktext": ticktext}


def matrix_ticks(fig: go.Figure, max_ticks: int, max_chars: int = MAX_TICK_CHARS) -> dict:
    """A layout update labelling at most ``max_ticks`` classes, each cut to ``max_chars``, on both axes of a
    matrix figure (for a smaller copy of it: ``fig.update_layout(**matrix_ticks(fig, 10, 10))``)."""
    ticks = _class_ticks(list(fig.data[0].x), max_ticks, max_chars)
    return {"xaxis": ticks, "yaxis": ticks}


def _matrix_layout(title: str, x_title: str, y_title: str, names: Sequence[str]) -> dict:
    """The layout of a class-by-class matrix: square cells, row 0 at the top, the same class ticks on both axes."""
    return {
        "title": {"text": title},
        "xaxis": {
            "title": {"text": x_title},
            "type": "category",
            "tickangle": -90 if len(names) > 5 else 0,  # upright labels: slanted ones overlapped at 100 classes
            "constrain": "domain",
            **_class_ticks(names),
        },
        "yaxis": {
            "title": {"text": y_title},
            "type": "category",
            "autorange": "reversed",
            "scaleanchor": "x",
            **_class_ticks(names),
        },
        "margin": {"l": 10, "r": 10, "t": 65 if "<br>" in title else 50, "b": 10},
        "height": MATRIX_HEIGHT,
        "plot_bgcolor": "white",
    }


#: The template every figure names. A figure without one takes plotly's process-wide default, which importing
#: Streamlit changes to its own (placeholder colours that only ``st.plotly_chart`` replaces): the dashboard,
#: the CLI and the report must draw the same figure.
TEMPLATE = pio.templates["plotly"]
#: :data:`TEMPLATE` as plain JSON, for :func:`_unvalidated_figure`: a figure given the template object deep-copies
#: it (about 2 ms a figure), one given the same template as a dict does not.
_TEMPLATE_JSON = TEMPLATE.to_plotly_json()


def new_figure(*traces, **layout) -> go.Figure:
    """An empty figure (or one of ``traces``) in :data:`TEMPLATE`, with ``layout``."""
    return go.Figure(data=list(traces), layout={"template": TEMPLATE, **layout})


def _unvalidated_figure(traces: list[dict], layout: dict) -> go.Figure:
    """A figure from plain trace and layout dicts, without plotly.py's property-by-property validation.

    The figures Explore redraws on every slider move (D*, ROC, risk-coverage) are built this way: validating
    them took about 50 ms of each move at 100 classes, more than computing what they show.
    ``tests/test_figures.py`` rebuilds each of them with validation on, so a wrong property still fails there.
    """
    return go.Figure(data=traces, layout={"template": _TEMPLATE_JSON, **layout}, _validate=False)


def copy_figure(fig: go.Figure) -> go.Figure:
    """A copy of ``fig`` to change (``copy_figure(shared).update_layout(...)``), made by reading ``fig`` only.

    The figures the app caches (a view's D* and curves, a run's confusion matrix) are shared by every browser
    session of the server. ``go.Figure(shared)`` is not a read: plotly's validator takes each trace's ``type`` out
    of the *source* while it copies and puts it back after, so a copy made at the same time in another thread
    reads a heatmap as a scatter (``Invalid property ... Scatter: 'colorscale'``) and a serialisation at that
    moment loses the trace's type. This deep-copies the figure's plain trace and layout dicts and builds the
    copy from them (no validation: the source was built and checked by this module).
    ``tests/hostile/test_hostile_threads.py`` copies one figure in several threads; an AST scan there keeps
    ``go.Figure(<figure>)`` out of the library, the glue and the pages."""
    return go.Figure({"data": copy.deepcopy(fig._data), "layout": copy.deepcopy(fig._layout)}, _validate=False)


def _label(name: object) -> str:
    """A class name as a matrix figure's axes and hover show it: plotly reads ``<a href>``, ``<b>``, ``<br>`` in
    its texts, so ``<``, ``>`` and ``&`` are written as entities, which it shows as the characters themselves
    (``figure_csv`` writes the names back as given)."""
    return html.escape(str(name), quote=False)


def _unlabel(value: object) -> object:
    """A matrix figure's axis value as given (:func:`_label` undone; numbers unchanged)."""
    return html.unescape(value) if isinstance(value, str) else value


def dstar_heatmap(matrix: np.ndarray, class_names: Sequence[str], title: str = "D* (Rel-U)") -> go.Figure:
    """Heatmap of a Rel-U matrix D* (or Doctor's implicit all-ones-off-diagonal matrix).

    Row i, column j is ``D[i, j]``, the weight given to probability mass split between classes i and j;
    class names label both axes, a colour bar shows the scale and the hover text the exact value. Beyond
    ``FIGURE_MAX_CLASSES`` classes only the :func:`top_classes` are drawn, and the title says so.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> matrix = np.array([[0.0, 0.8, 0.0], [0.8, 0.0, 0.6], [0.0, 0.6, 0.0]])
    >>> fig = rc.dstar_heatmap(matrix, ["cat", "dog", "ship"])
    >>> fig.data[0].type, list(fig.data[0].x)
    ('heatmap', ['cat', 'dog', 'ship'])
    """
    matrix = np.asarray(_check_square(matrix, class_names, "D*"), dtype=np.float64)
    keep = top_classes(matrix)
    title = _top_note(title, keep.size, matrix.shape[0], "by D* weight")
    matrix = matrix[np.ix_(keep, keep)]
    names = [_label(class_names[k]) for k in keep]
    heatmap = {
        "type": "heatmap",
        "z": matrix,
        "x": names,
        "y": names,
        "customdata": _exact(matrix),
        "colorscale": "Viridis",
        "colorbar": {"title": {"text": "D*"}},
        "hovertemplate": "class i: %{y}<br>class j: %{x}<br>D* = %{customdata}<extra></extra>",
        "name": "D*",
    }
    return _unvalidated_figure([heatmap], _matrix_layout(title, "class j", "class i", names))


def confusion_heatmap(cm: np.ndarray, class_names: Sequence[str], title: str = "Confusion matrix") -> go.Figure:
    """Confusion matrix, rows = true class, columns = predicted class (as ``metrics.confusion_matrix``).

    Errors (off-diagonal) are coloured by count in one trace; the diagonal (correct predictions) is a
    separate grey trace so that the confusions stand out, as in the paper. Every cell shows its count.
    A third, invisible scatter trace puts one selectable point at each cell centre so that a click
    selects a (true, predicted) pair (its ``customdata`` is ``[true_index, predicted_index]``). Beyond
    ``FIGURE_MAX_CLASSES`` classes only the :func:`top_classes` with the most errors are drawn (indices
    stay the original class indices), and the title says so.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> fig = rc.confusion_heatmap(np.array([[5, 1], [2, 7]]), ["cat", "dog"])
    >>> [trace.type for trace in fig.data]
    ['heatmap', 'heatmap', 'scatter']
    """
    cm = _check_square(cm, class_names, "The confusion matrix").astype(np.int64)
    keep = top_classes(cm)
    title = _top_note(title, keep.size, cm.shape[0], "by errors")
    cm = cm[np.ix_(keep, keep)]
    names = [_label(class_names[k]) for k in keep]
    n = len(names)
    diagonal = np.eye(n, dtype=bool)
    errors = np.where(diagonal, np.nan, cm.astype(np.float64))
    correct = np.where(diagonal, cm.astype(np.float64), np.nan)
    text = _exact(cm)
    hover = "true: %{y}<br>predicted: %{x}<br>count: %{text}<extra></extra>"
    # both heatmaps (grey diagonal, red errors) draw the same grid with the same counts and hover text
    cells = {"type": "heatmap", "x": names, "y": names, "text": text, "hovertemplate": hover}
    if n <= 20:
        cells["texttemplate"] = "%{z:d}"
    rows, cols = np.indices((n, n))
    traces = [
        {**cells, "z": correct, "colorscale": [[0, "#d9d9d9"], [1, "#d9d9d9"]], "showscale": False, "name": "correct"},
        {
            **cells,
            "z": errors,
            "colorscale": "Reds",
            "zmin": 0,
            # both ends fixed: with zmin alone plotly rescales, and equal counts would get a 0.6..1.4 bar
            "zmax": max(1.0, float(np.nanmax(errors, initial=0.0))),
            "colorbar": {"title": {"text": "errors"}},
            "name": "errors",
        },
        {
            "type": "scatter",
            "x": np.asarray(names, dtype=object)[cols.ravel()],
            "y": np.asarray(names, dtype=object)[rows.ravel()],
            "mode": "markers",
            "marker": {"size": max(6, 300 // n), "opacity": 0, "symbol": "square"},
            # plain lists, not a numpy array: plotly would send a typed array, and the browser's selection
            # event would then carry each point's pair as an index-keyed object instead of [true, predicted]
            "customdata": np.stack([keep[rows.ravel()], keep[cols.ravel()]], axis=1).tolist(),
            "text": text.ravel(),
            "hovertemplate": hover,
            "name": "cells",
            "showlegend": False,
        },
    ]
    layout = {**_matrix_layout(title, "predicted class", "true class", names), "clickmode": "event+select"}
    return _unvalidated_figure(traces, {**layout, "dragmode": False})


def _thin(n: int, max_points: int | None) -> np.ndarray | slice:
    """Indices keeping at most ``max_points`` evenly spread points of a curve, first and last included."""
    if max_points is None or n <= max_points:
        return slice(None)
    return np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))


#: The ROC and risk-coverage margins, fixed: their tick labels are numbers of a known width, and plotly's
#: automatic margins measure every label again on each redraw (17-29 ms of a λ move in Chromium, docs/results/speed.md).
CURVE_MARGIN = {"l": 60, "r": 10, "t": 50, "b": 50}


def roc_figure(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray, float]],
    operating_points: Mapping[str, tuple[float, float]] | None = None,
    *,
    target_points: Mapping[str, tuple[float, float]] | None = None,
    tpr_target: float = 0.95,
    max_points: int | None = None,
    title: str = "ROC (positives = correct predictions)",
    target_positive: str = "correct",
) -> go.Figure:
    """ROC curves of several detectors, ``name -> (fpr, tpr, auroc)``, AUROC in the legend.

    ``target_points`` (``name -> (fpr, tpr)``, from ``metrics.operating_point(u, correct, "tpr", tpr_target)``)
    marks each curve's FPR-at-``tpr_target`` point, the metrics table's: read off the curve itself, a thinned
    curve can skip that point on tied scores. ``operating_points`` (``name -> (fpr, tpr)``) adds the user's
    chosen point. ``max_points`` thins the drawn line (the markers stay exact). ``target_positive="error"``: the
    open circles are the other operating point, where ``tpr_target`` of the errors are caught (FPR ≤ 1 −
    ``tpr_target`` on this chart: ``metrics.operating_point(u, correct, "errors", tpr_target)``), its guide line
    vertical.

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> fpr, tpr, _ = rc.roc_curve(uncertainty, correct)
    >>> fig = rc.roc_figure({"Rel-U": (fpr, tpr, rc.auroc(uncertainty, correct))})
    >>> fig.data[0].name
    'Rel-U (AUROC 0.8333)'
    """
    traces = []
    for name, (fpr, tpr, auc) in curves.items():
        fpr, tpr = np.asarray(fpr, dtype=np.float64), np.asarray(tpr, dtype=np.float64)
        traces.append(
            _curve_trace(
                name, fpr, tpr, f"{metric_info.AUROC.label} {auc:{metric_info.AUROC.format}}", "FPR", "TPR", max_points
            )
        )
        if target_points is not None and name in target_points:
            fpr_at, tpr_at = target_points[name]
            at = f"TPR {tpr_target:.0%}" if target_positive == "correct" else f"{tpr_target:.0%} of errors caught"
            value = "FPR" if target_positive == "correct" else "good predictions lost (1 − TPR)"
            shown = "%{x:.4f}" if target_positive == "correct" else f"{1 - tpr_at:.4f}"
            traces.append(
                {
                    "type": "scatter",
                    "x": [float(fpr_at)],
                    "y": [float(tpr_at)],
                    "mode": "markers",
                    "name": f"{name} @ {at}",
                    "legendgroup": name,
                    "showlegend": False,
                    "cliponaxis": False,
                    "marker": {
                        "color": detector_color(name),
                        "size": 10,
                        "symbol": "circle-open",
                        "line": {"width": 2},
                    },
                    "hovertemplate": f"{name}: {value} at {at} = {shown}<extra></extra>",
                }
            )
    traces += [
        _operating_marker(name, fpr_op, tpr_op, "FPR", "TPR")
        for name, (fpr_op, tpr_op) in (operating_points or {}).items()
    ]
    traces.append(
        {
            "type": "scatter",
            "x": [0, 1],
            "y": [0, 1],
            "mode": "lines",
            "line": {"color": "#bbbbbb", "dash": "dash", "width": 1},
            "name": "chance",
            "showlegend": False,
            "hoverinfo": "skip",
        }
    )
    target_line = {
        "type": "line",
        "xref": "x domain",
        "x0": 0,
        "x1": 1,
        "yref": "y",
        "y0": tpr_target,
        "y1": tpr_target,
        "line": {"color": "#999999", "width": 1, "dash": "dot"},
    }
    if target_positive != "correct":  # the errors-positive point: at most 1 − target of the errors accepted
        target_line.update(xref="x", x0=1 - tpr_target, x1=1 - tpr_target, yref="y domain", y0=0, y1=1)
    layout = {
        "title": {"text": title},
        "xaxis": {"title": {"text": "FPR (errors accepted)"}, "range": [0, 1], "automargin": False},
        "yaxis": {"title": {"text": "TPR (correct accepted)"}, "range": [0, 1.02], "automargin": False},
        "legend": {"x": 0.98, "y": 0.02, "xanchor": "right"},
        "margin": {**CURVE_MARGIN},
        "shapes": [target_line],
    }
    if target_points:  # the open circles say what they are on the chart itself (under it: never over a curve)
        where = f"TPR {tpr_target:.0%}" if target_positive == "correct" else f"{tpr_target:.0%} of errors caught"
        layout["xaxis"]["title"]["text"] += f"; ○ at {where}"
    return _unvalidated_figure(traces, layout)


def _curve_trace(
    name: str, x: np.ndarray, y: np.ndarray, score: str, x_name: str, y_name: str, max_points: int | None
) -> dict:
    """One detector's curve (thinned to ``max_points`` for drawing), its score in the legend."""
    keep = _thin(x.size, max_points)
    return {
        "type": "scatter",
        "x": x[keep],
        "y": y[keep],
        "mode": "lines",
        "name": f"{name} ({score})",
        "legendgroup": name,
        "line": _line_style(name),
        "hovertemplate": f"{name}<br>{x_name} %{{x:.4f}}<br>{y_name} %{{y:.4f}}<extra></extra>",
    }


def _operating_marker(name: str, x: float, y: float, x_name: str, y_name: str, label: str = "operating point") -> dict:
    return {
        "type": "scatter",
        "x": [x],
        "y": [y],
        "mode": "markers",
        "name": f"{name} {label}",
        "legendgroup": name,
        "showlegend": False,
        "cliponaxis": False,  # a point on an axis (risk 0, FPR 0, coverage 1) shows whole, not halved
        "marker": {"color": detector_color(name), "size": 13, "symbol": "x", "line": {"width": 1, "color": "black"}},
        "hovertemplate": f"{name} {label}<br>{x_name} %{{x:.4f}}<br>{y_name} %{{y:.4f}}<extra></extra>",
    }


def risk_coverage_figure(
    curves: Mapping[str, tuple[np.ndarray, np.ndarray, float]],
    operating_points: Mapping[str, tuple[float, float]] | None = None,
    *,
    generalized: bool = False,
    max_points: int | None = None,
    title: str = "Risk-coverage",
    point_label: str = "operating point",
    risk_line: tuple[float, str] | None = None,
) -> go.Figure:
    """Risk (error rate among accepted) against coverage (fraction accepted), ``name -> (coverage, risk,
    aurc)``; AURC in the legend, ``operating_points`` (``name -> (coverage, risk)``) marked (hovered as
    ``point_label``); ``risk_line`` (a risk and its name, e.g. a guaranteed r*) drawn across as a dashed line.

    ``generalized``: the curves are the generalised risk instead (accepted errors / all samples,
    ``metrics.generalized_risk_coverage_curve``), ``name -> (coverage, generalised risk, augrc)``, AUGRC in the
    legend, the operating points at ``(coverage, risk * coverage)``.

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> coverage, risk = rc.risk_coverage_curve(uncertainty, correct)
    >>> fig = rc.risk_coverage_figure({"Doctor": (coverage, risk, rc.aurc(uncertainty, correct))})
    >>> fig.data[0].name
    'Doctor (AURC 0.1967)'
    """
    metric, y_name, y_title = (
        (metric_info.AUGRC, "generalised risk", "generalised risk (accepted errors / all samples)")
        if generalized
        else (metric_info.AURC, "risk", "risk (error rate among accepted)")
    )
    traces = []
    for name, (coverage, risk, area) in curves.items():
        coverage, risk = np.asarray(coverage, dtype=np.float64), np.asarray(risk, dtype=np.float64)
        traces.append(
            _curve_trace(name, coverage, risk, f"{metric.label} {area:{metric.format}}", "coverage", y_name, max_points)
        )
    traces += [
        _operating_marker(name, cov_op, risk_op, "coverage", y_name, point_label)
        for name, (cov_op, risk_op) in (operating_points or {}).items()
    ]
    if risk_line is not None:
        level, label = risk_line
        traces.append(
            {
                "type": "scatter",
                "x": [0.0, 1.0],
                "y": [level, level],
                "mode": "lines",
                "name": label,
                "line": {"color": "#555555", "dash": "dot", "width": 1.5},
                "hovertemplate": f"{label}<extra></extra>",
            }
        )
    layout = {
        "title": {"text": title},
        "xaxis": {"title": {"text": "coverage (fraction accepted)"}, "range": [0, 1], "automargin": False},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "automargin": False},
        "legend": {"x": 0.02, "y": 0.98},
        "margin": {**CURVE_MARGIN},
    }
    return _unvalidated_figure(traces, layout)


#: One colour per run when runs are overlaid (``runs_curves_figure``); detectors are told apart by the dash.
RUN_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd")
#: Each run colour's name, for the words that say which run a colour is.
RUN_COLOR_NAMES = ("blue", "red", "green", "purple")
#: A comparison's legend: two entries per row, each about this tall in pixels (11 px text); its title's row too.
RUNS_LEGEND_ROW = 19
_DETECTOR_DASHES = {"Rel-U": "solid", "Doctor": "dash", "MSP": "dot", "ODIN": "dashdot"}


def runs_curves_figure(
    curves: Mapping[tuple[str, str], tuple[np.ndarray, np.ndarray, float]],
    kind: str,
    *,
    max_points: int | None = None,
) -> go.Figure:
    """Several runs' curves in one figure, ``(run, detector) -> (x, y, area)``: one colour per run (in order of
    first appearance, :data:`RUN_COLORS`), one dash per detector; ``kind`` "roc" (x FPR, y TPR, AUROC in the legend)
    or "risk_coverage" (x coverage, y risk, AURC).

    The legend names a run by its number (its place in order of appearance: "2 · Doctor (0.9536)", two entries a
    row under the plot), never by its name, which a half-width chart cut until 8 lines could not be told apart;
    the page lists the runs by number and colour, and a curve's hover gives its run's full name. The title sits
    under the modebar, which covered the end of a half-width chart's title."""
    if kind not in ("roc", "risk_coverage"):
        raise ValueError(f"unknown kind {kind!r}")
    roc = kind == "roc"
    metric = metric_info.AUROC if roc else metric_info.AURC
    x_name, y_name = ("FPR", "TPR") if roc else ("coverage", "risk")
    numbers = {run: i + 1 for i, run in enumerate(dict.fromkeys(r for r, _ in curves))}
    traces = []
    for (run, detector), (x, y, area) in curves.items():
        keep = _thin(len(x), max_points)
        color = RUN_COLORS[(numbers[run] - 1) % len(RUN_COLORS)]
        traces.append(
            {
                "type": "scatter",
                "x": np.asarray(x, dtype=np.float64)[keep],
                "y": np.asarray(y, dtype=np.float64)[keep],
                "mode": "lines",
                "name": f"{numbers[run]} · {detector} ({area:{metric.format}})",
                "line": {"color": color, "width": 2, "dash": _DETECTOR_DASHES.get(detector, "longdash")},
                "hovertemplate": f"{run} · {detector}<br>{x_name} %{{x:.4f}}<br>{y_name} %{{y:.4f}}<extra></extra>",
            }
        )
    axes = (
        {
            "xaxis": {"title": {"text": "FPR (errors accepted)"}, "range": [0, 1]},
            "yaxis": {"title": {"text": "TPR (correct accepted)"}, "range": [0, 1.02]},
        }
        if roc
        else {
            "xaxis": {"title": {"text": "coverage (fraction accepted)"}, "range": [0, 1]},
            "yaxis": {"title": {"text": "risk (error rate among accepted)"}, "rangemode": "tozero"},
        }
    )
    legend_height = RUNS_LEGEND_ROW * (1 + -(-len(traces) // 2))  # its title's row, then two entries a row
    top = 36  # the modebar's row (26 px), above the title
    layout = {
        "title": {
            "text": "ROC by run (positives = correct predictions)" if roc else "Risk-coverage by run",
            "yref": "container",
            "y": 1,
            "yanchor": "top",
            "pad": {"t": top},
        },
        **axes,
        # under the plot, in rows of two: up to 4 runs x 4 detectors do not fit inside it
        "legend": {
            "orientation": "h",
            "title": {"text": f"run · detector ({metric.label})", "side": "top"},
            "entrywidth": 0.5,
            "entrywidthmode": "fraction",
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
            "font": {"size": 11},
        },
        "margin": {**CURVE_MARGIN, "t": CURVE_MARGIN["t"] + top, "b": CURVE_MARGIN["b"] + legend_height + 10},
        "height": 420 + top + legend_height,
    }
    return _unvalidated_figure(traces, layout)


#: A radar's height in pixels: 19 spokes' labels need a circle about 450 px across.
RADAR_HEIGHT = 640


#: The mark of a radar spoke where one detector is significantly better, beside its name and on its polygon.
BETTER_MARK = "★"


def radar_label(axis: str) -> str:
    """A radar spoke's name on at most two short lines ("elastic_transform" -> "elastic<br>transform"): one
    line per word made the 19 corruption names collide at the top and bottom of the circle."""
    head, _, tail = axis.replace("_", " ").partition(" ")
    return f"{head}<br>{tail}" if tail else head


def radar_figure(
    axes: Sequence[str],
    series: Mapping[str, Sequence[float]],
    title: str = "",
    *,
    radial_range: tuple[float, float] | None = None,
    better: Mapping[str, str] | None = None,
) -> go.Figure:
    """Radar plot, one vertex per axis (e.g. per corruption), one closed polygon per series (detector).

    ``better`` maps an axis to the series that is significantly better there (e.g. where a paired difference's
    interval excludes 0; say so beside the figure): its label names that series under the axis's name, in its
    colour, after :data:`BETTER_MARK`, and a star sits on that series' vertex (one legend entry, "<series>
    significantly better", per series that wins somewhere)."""
    axes = [str(a) for a in axes]
    better = dict(better or {})
    if len(axes) < 3:
        raise ValueError(f"A radar plot needs at least 3 axes, got {len(axes)}")
    unknown = set(better.values()) - set(series)
    if unknown or not set(better) <= set(axes):
        raise ValueError(f"better names axes or series the radar does not have: {better}")
    fig = new_figure()
    for name, values in series.items():
        values = np.asarray(values, dtype=np.float64)
        if values.shape != (len(axes),):
            raise ValueError(f"Series {name!r} has {values.size} values for {len(axes)} axes")
        fig.add_trace(
            go.Scatterpolar(
                r=np.append(values, values[0]),
                theta=axes + axes[:1],
                mode="lines+markers",
                name=name,
                line=_line_style(name),
                marker={"color": detector_color(name)},
                customdata=_exact(np.append(values, values[0])),
                hovertemplate=f"{name}<br>%{{theta}}: %{{customdata}}<extra></extra>",
            )
        )
    for name, values in series.items():  # the winners' marks, above every polygon
        won = [k for k, axis in enumerate(axes) if better.get(axis) == name]
        if won:
            fig.add_trace(
                go.Scatterpolar(
                    r=np.asarray(values, dtype=np.float64)[won],
                    theta=[axes[k] for k in won],
                    mode="markers",
                    name=f"{name} significantly better",
                    marker={
                        "color": detector_color(name),
                        "symbol": "star",
                        "size": 15,
                        "line": {"color": "black", "width": 1},
                    },
                    hovertemplate=f"%{{theta}}: {name} significantly better<extra></extra>",
                )
            )

    def label(axis: str) -> str:
        winner = better.get(axis)
        if winner is None:
            return radar_label(axis)
        return f"{radar_label(axis)}<br><b style='color:{detector_color(winner)}'>{BETTER_MARK} {winner}</b>"

    # the radial tick labels half-way between the first two spokes, not on the first spoke's label, and grey:
    # they cross the polygons
    polar = {
        "radialaxis": {"angle": 180 / len(axes), "nticks": 6, "tickfont": {"size": 9, "color": "#8c8c8c"}},
        "angularaxis": {
            "tickmode": "array",
            "tickvals": axes,
            "ticktext": [label(a) for a in axes],
            "tickfont": {"size": 11},
        },
    }
    if radial_range:
        polar["radialaxis"]["range"] = list(radial_range)
    # room for the labels beside the circle, the legend under it
    fig.update_layout(
        title=title,
        polar=polar,
        height=RADAR_HEIGHT,
        margin={"l": 70, "r": 70, "t": 90, "b": 100},
        legend={"orientation": "h", "x": 0.5, "xanchor": "center", "y": -0.1, "yanchor": "top"},
    )
    return fig


def accuracy_bars(
    names: Sequence[str],
    accuracies: Sequence[float],
    clean_accuracy: float | None = None,
    title: str = "Accuracy",
    x_title: str = "",
) -> go.Figure:
    """Bar chart of accuracies (e.g. one per corruption, ``x_title`` naming what the bars are), with the clean
    accuracy as a reference line."""
    values = np.asarray(accuracies, dtype=np.float64)
    if values.shape != (len(names),):
        raise ValueError(f"{values.size} accuracies for {len(names)} names")
    fig = new_figure(
        go.Bar(
            x=[str(n) for n in names],
            y=values,
            marker={"color": "#4c78a8"},
            name="accuracy",
            customdata=_exact(values),
            hovertemplate="%{x}: %{customdata}<extra></extra>",
        )
    )
    if clean_accuracy is not None:
        fig.add_hline(
            y=clean_accuracy,
            line={"color": "#d62728", "dash": "dash"},
            annotation_text=f"clean {clean_accuracy:.4f}",
            annotation_position="top right",
        )
    fig.update_layout(
        title=title,
        xaxis={"title": x_title},
        yaxis={"title": "accuracy", "range": [0, 1.05]},
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
    )
    return fig


def matrix_csv(matrix: np.ndarray, row_names: Sequence[str], col_names: Sequence[str] | None = None) -> str:
    """A matrix as CSV text: a header of column names, then one row per row name (exact values; names written
    by ``csv_text``, so a quote or a leading ``=`` in a class name stays text in its own cell)."""
    matrix = np.asarray(matrix)
    col_names = row_names if col_names is None else col_names
    rows = ([str(name), *row] for name, row in zip(row_names, matrix.tolist(), strict=True))
    return csv_text.rows_csv(["", *map(str, col_names)], rows)


def figure_csv(fig: go.Figure) -> str:
    """The data behind a figure as long-format CSV: ``trace,x,y,z`` (radar plots: ``trace,theta,r``).

    Heatmaps write one line per cell (NaN cells, e.g. the diagonal of the errors trace, are left out);
    selection helpers (the invisible cell markers) and decoration lines are skipped.
    """
    rows: list[tuple] = []
    polar = any(trace.type == "scatterpolar" for trace in fig.data)
    for trace in fig.data:
        if trace.type == "scatter" and (trace.name in ("cells", "chance")):
            continue
        if trace.type == "heatmap":
            z = np.asarray(trace.z, dtype=np.float64)
            for i, y in enumerate(trace.y):
                for j, x in enumerate(trace.x):
                    if not np.isnan(z[i, j]):
                        rows.append((trace.name, _unlabel(x), _unlabel(y), z[i, j]))
        elif trace.type == "scatterpolar":
            rows.extend((trace.name, t, r) for t, r in zip(trace.theta[:-1], trace.r[:-1], strict=True))
        else:
            rows.extend((trace.name, x, y, "") for x, y in zip(trace.x, trace.y, strict=True))
    header = ("trace", "theta", "r") if polar else ("trace", "x", "y", "z")
    return csv_text.rows_csv(header, rows)
