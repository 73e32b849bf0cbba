"""Tests of relu_core.figures: the figures carry exactly the data they were given."""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import plotly.graph_objects as go
import pytest

from relu_core import figures

NAMES = ("cat", "dog", "ship")


def _traces(fig: go.Figure, name_start: str) -> list:
    return [t for t in fig.data if (t.name or "").startswith(name_start)]


def test_dstar_heatmap_axes_colorbar_and_exact_hover():
    rng = np.random.default_rng(0)
    matrix = rng.random((3, 3)) / 7.0
    fig = figures.dstar_heatmap(matrix, NAMES)
    (heat,) = fig.data
    assert heat.type == "heatmap"
    np.testing.assert_array_equal(np.asarray(heat.z), matrix)
    assert list(heat.x) == list(NAMES) and list(heat.y) == list(NAMES)
    assert heat.colorbar.title.text == "D*"
    assert "%{customdata}" in heat.hovertemplate
    # the hover text round-trips to the exact float
    parsed = np.asarray(heat.customdata, dtype=np.float64)
    np.testing.assert_array_equal(parsed, matrix)
    assert fig.layout.yaxis.autorange == "reversed"  # row 0 on top, as a matrix is read


def test_matrix_figures_label_the_same_classes_on_both_axes():
    names = [f"class {k}" for k in range(50)]
    matrix = np.random.default_rng(1).random((50, 50))
    for fig in (figures.dstar_heatmap(matrix, names), figures.confusion_heatmap((matrix * 10).astype(int), names)):
        x, y = fig.layout.xaxis, fig.layout.yaxis
        assert list(x.tickvals) == list(y.tickvals) == list(x.ticktext) == list(y.ticktext)
        step = -(-50 // figures.MAX_CLASS_TICKS)  # every step-th class, the fewest steps that fit
        assert list(x.tickvals) == names[::step] and len(names[:: step - 1]) > figures.MAX_CLASS_TICKS >= step > 1
    small = figures.dstar_heatmap(np.eye(3), NAMES)
    assert list(small.layout.xaxis.tickvals) == list(small.layout.yaxis.tickvals) == list(NAMES)


def test_dstar_heatmap_rejects_bad_shapes():
    with pytest.raises(ValueError, match="square"):
        figures.dstar_heatmap(np.zeros((2, 3)), NAMES)
    with pytest.raises(ValueError, match="class names"):
        figures.dstar_heatmap(np.zeros((2, 2)), NAMES)


def test_confusion_heatmap_separates_diagonal_and_has_clickable_cells():
    cm = np.array([[50, 3, 0], [7, 40, 1], [0, 2, 60]])
    fig = figures.confusion_heatmap(cm, NAMES)
    correct, errors, cells = fig.data
    z_correct, z_errors = np.asarray(correct.z, dtype=float), np.asarray(errors.z, dtype=float)
    np.testing.assert_array_equal(np.diag(z_correct), np.diag(cm))
    assert np.isnan(z_correct[~np.eye(3, dtype=bool)]).all()
    assert np.isnan(np.diag(z_errors)).all()
    np.testing.assert_array_equal(z_errors[~np.eye(3, dtype=bool)], cm[~np.eye(3, dtype=bool)])
    assert correct.showscale is False  # the grey diagonal has no colour scale of its own
    # exact counts in the hover of every cell
    np.testing.assert_array_equal(np.asarray(errors.text, dtype=np.int64), cm)
    # one selectable point per cell whose customdata is (true, predicted)
    pairs = np.asarray(cells.customdata)
    assert pairs.shape == (9, 2)
    for (i, j), x, y in zip(pairs, cells.x, cells.y, strict=True):
        assert (NAMES[i], NAMES[j]) == (y, x)
    # the browser gets [true, predicted] lists (a typed array would reach the selection event as an object)
    assert json.loads(fig.to_json())["data"][2]["customdata"][5] == [1, 2]
    assert fig.layout.xaxis.title.text == "predicted class" and fig.layout.yaxis.title.text == "true class"
    assert (errors.zmin, errors.zmax) == (0, 7)  # the colour bar runs from no errors to the largest count


def test_roc_figure_legend_auroc_and_95_point():
    fpr = np.array([0.0, 0.1, 0.3, 0.6, 1.0])
    tpr = np.array([0.0, 0.5, 0.94, 0.96, 1.0])
    fig = figures.roc_figure(
        {"Rel-U": (fpr, tpr, 0.8123), "MSP": (fpr, tpr**2, 0.7)},
        {"Rel-U": (0.3, 0.94)},
        target_points={"Rel-U": (0.6, 0.96)},
    )
    (line,) = _traces(fig, "Rel-U (AUROC")
    assert line.name == "Rel-U (AUROC 0.8123)"
    np.testing.assert_array_equal(line.x, fpr)
    np.testing.assert_array_equal(line.y, tpr)
    assert line.line.color == figures.detector_color("Rel-U")
    (mark,) = _traces(fig, "Rel-U @ TPR")
    assert (mark.x[0], mark.y[0]) == (0.6, 0.96)  # the given point (metrics.operating_point's), drawn as given
    assert not _traces(fig, "MSP @ TPR")  # no point given, no marker guessed from the (possibly thinned) curve
    (op,) = _traces(fig, "Rel-U operating point")
    assert (op.x[0], op.y[0]) == (0.3, 0.94)
    assert mark.cliponaxis is False and op.cliponaxis is False  # whole on an axis (FPR 0), not halved
    # the open circles are explained on the chart, whatever page draws it, under the plot where no curve runs
    assert fig.layout.xaxis.title.text == "FPR (errors accepted); ○ at TPR 95%" and not fig.layout.annotations
    assert figures.roc_figure({"MSP": (fpr, tpr, 0.7)}).layout.xaxis.title.text == "FPR (errors accepted)"
    assert _traces(fig, "MSP (AUROC 0.7000)")


def test_curves_thinning_keeps_endpoints():
    x = np.linspace(0, 1, 10_001)
    fig = figures.risk_coverage_figure({"Doctor": (x, x / 2, 0.25)}, max_points=500)
    (line,) = _traces(fig, "Doctor (AURC 0.2500)")
    assert len(line.x) <= 500 and line.x[0] == 0.0 and line.x[-1] == 1.0


def test_risk_coverage_legend_and_operating_point():
    coverage = np.linspace(0.01, 1, 100)
    risk = coverage * 0.1
    fig = figures.risk_coverage_figure({"Doctor": (coverage, risk, 0.05)}, {"Doctor": (0.8, 0.08)})
    (line,) = _traces(fig, "Doctor (AURC 0.0500)")
    np.testing.assert_array_equal(line.y, risk)
    (op,) = _traces(fig, "Doctor operating point")
    assert (op.x[0], op.y[0]) == (0.8, 0.08) and op.cliponaxis is False


def test_radar_one_vertex_per_axis_closed_polygon():
    axes = ["fog", "snow", "blur", "noise", "jpeg"]
    values = {"Rel-U": [0.9, 0.8, 0.7, 0.6, 0.5], "Doctor": [0.5, 0.6, 0.7, 0.8, 0.9]}
    fig = figures.radar_figure(axes, values, "AUROC")
    assert len(fig.data) == 2
    for trace, (name, expected) in zip(fig.data, values.items(), strict=True):
        assert trace.name == name
        assert list(trace.theta) == axes + axes[:1]
        np.testing.assert_array_equal(trace.r, expected + expected[:1])
    assert fig.layout.polar.radialaxis.angle == pytest.approx(36)  # tick labels between the first two spokes
    assert list(figures.radar_figure(axes, values, radial_range=(0.5, 1)).layout.polar.radialaxis.range) == [0.5, 1]
    marked = figures.radar_figure(axes, values, better={axes[1]: "Doctor"})
    labels = marked.layout.polar.angularaxis
    assert list(labels.tickvals) == axes
    assert list(labels.ticktext) == [axes[0], f"{axes[1]}<br><b style='color:#1f77b4'>★ Doctor</b>", *axes[2:]]
    (star,) = _traces(marked, "Doctor significantly better")  # on the winner's polygon, at that spoke
    assert list(star.theta) == [axes[1]] and list(star.r) == [0.6] and star.marker.symbol == "star"
    with pytest.raises(ValueError):
        figures.radar_figure(axes, {"x": [1, 2]})
    with pytest.raises(ValueError, match="better"):
        figures.radar_figure(axes, values, better={"fog": "MSP"})


def test_accuracy_bars_reference_line():
    fig = figures.accuracy_bars(["fog", "snow"], [0.5, 0.75], clean_accuracy=0.9, x_title="corruption")
    assert fig.layout.xaxis.title.text == "corruption"
    np.testing.assert_array_equal(fig.data[0].y, [0.5, 0.75])
    assert fig.layout.shapes[0].y0 == 0.9


def test_figure_csv_round_trips_heatmap_and_curves():
    matrix = np.array([[0.0, 0.1], [0.2, 0.0]])
    rows = list(csv.DictReader(io.StringIO(figures.figure_csv(figures.dstar_heatmap(matrix, ["a", "b"])))))
    assert len(rows) == 4
    assert {(r["x"], r["y"], float(r["z"])) for r in rows} == {
        ("a", "a", 0.0),
        ("b", "a", 0.1),
        ("a", "b", 0.2),
        ("b", "b", 0.0),
    }
    cm_rows = list(
        csv.DictReader(io.StringIO(figures.figure_csv(figures.confusion_heatmap(np.eye(2) * 3, ["a", "b"]))))
    )
    assert len(cm_rows) == 4  # diagonal and errors traces together cover each cell once, no click markers
    fpr = np.array([0.0, 0.5, 1.0])
    text = figures.figure_csv(figures.roc_figure({"Rel-U": (fpr, fpr, 0.5)}))
    line_rows = [r for r in csv.DictReader(io.StringIO(text)) if r["trace"].startswith("Rel-U (")]
    assert [float(r["x"]) for r in line_rows] == fpr.tolist()


def test_matrix_csv_exact_values_and_quoting():
    text = figures.matrix_csv(np.array([[1 / 3, 0.0], [0.0, 1.0]]), ["a,b", "c"])
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == ["", "a,b", "c"]
    assert float(rows[1][1]) == 1 / 3


def test_detector_colours_are_stable_and_distinct():
    named = [figures.detector_color(n) for n in ("Rel-U", "Doctor", "MSP", "ODIN", "Entropy", "Energy")]
    assert len(set(named)) == len(named)
    assert figures.detector_color("custom") == figures.detector_color("custom")


def test_figures_built_without_validation_pass_plotlys_validation_unchanged():
    """D*, confusion, ROC and risk-coverage skip plotly.py's validation for speed: rebuilding each with validation on must
    accept every property and leave the figure as it was (no string titles plotly.js 3 would drop, no typo)."""
    rng = np.random.default_rng(0)
    curve = (np.linspace(0, 1, 50), np.sqrt(np.linspace(0, 1, 50)), 0.8)
    built = [
        figures.dstar_heatmap(rng.random((12, 12)), [f"c{k}" for k in range(12)]),
        figures.roc_figure(
            {"Rel-U": curve, "Doctor": curve},
            {"Rel-U": (0.2, 0.9)},
            target_points={"Doctor": (0.3, 0.95)},
            max_points=20,
        ),
        figures.risk_coverage_figure({"Rel-U": curve, "MSP": curve}, {"MSP": (0.5, 0.1)}),
        figures.confusion_heatmap(rng.integers(0, 9, (12, 12)), [f"c{k}" for k in range(12)]),
        figures.confusion_heatmap(rng.integers(0, 9, (30, 30)), [f"class {k}" for k in range(30)]),
    ]
    for fig in built:
        as_built = json.loads(fig.to_json())
        validated = json.loads(go.Figure(as_built).to_json())  # raises on an unknown or invalid property
        for trace in validated["data"] + as_built["data"]:
            trace.pop("colorscale", None)  # validation spells a named colour scale out as its colours
        assert validated == as_built
        assert isinstance(as_built["layout"]["title"], dict)


def test_every_figure_names_plotlys_template_whatever_the_process_default(monkeypatch) -> None:
    """Importing Streamlit makes its placeholder-colour template the process default; figures ignore it."""
    import plotly.io as pio

    monkeypatch.setattr(pio.templates, "default", "plotly_dark")
    names = ["a", "b", "c"]
    built = [
        figures.dstar_heatmap(np.eye(3)[::-1], names),
        figures.confusion_heatmap(np.ones((3, 3), dtype=int), names),
        figures.radar_figure(names, {"Rel-U": [0.1, 0.2, 0.3]}),
        figures.accuracy_bars(names, [0.5, 0.6, 0.7]),
        figures.new_figure(),
    ]
    for fig in built:
        assert fig.layout.template.layout.colorway == pio.templates["plotly"].layout.colorway


def test_every_known_detector_has_its_own_colour() -> None:
    from relu_core import baselines, detectors

    names = sorted(
        {detectors.label(k) for k in detectors.REGISTRY}
        | {
            c.name
            for c in (
                baselines.MLPDetector,
                baselines.MCDropout,
                baselines.DeepEnsemble,
                baselines.ConformalAPS,
                baselines.ConformalRAPS,
            )
        }
    )
    assert len(names) == 11
    colours = [figures.detector_color(name) for name in names]
    assert len(set(colours)) == len(names), dict(zip(names, colours, strict=True))


def test_top_classes_ranks_by_off_diagonal_mass_and_counts_non_finite_entries_as_zero():
    rng = np.random.default_rng(2)
    matrix = rng.random((30, 30))
    np.fill_diagonal(matrix, 100.0)  # the diagonal never counts
    matrix[[4, 9], :] += 5.0
    keep = figures.top_classes(matrix, 5)
    mass = matrix.sum(0) + matrix.sum(1) - 2 * np.diag(matrix)
    np.testing.assert_array_equal(keep, np.sort(np.argsort(-mass, kind="stable")[:5]))
    assert {4, 9} <= set(keep.tolist())
    broken = matrix.copy()
    broken[4, 9], broken[9, 3], broken[1, 2] = np.nan, np.inf, -np.inf
    cleaned = np.nan_to_num(broken)
    mass = cleaned.sum(0) + cleaned.sum(1) - 2 * np.diag(cleaned)
    np.testing.assert_array_equal(figures.top_classes(broken, 5), np.sort(np.argsort(-mass, kind="stable")[:5]))
    np.testing.assert_array_equal(figures.top_classes(matrix[:4, :4], 5), np.arange(4))


def test_thin_baseline_lines_differ_in_shape_not_only_in_colour():
    styles = {name: figures._line_style(name) for name in ("Rel-U", "Doctor", "MSP", "ODIN", "Entropy", "Energy")}
    assert styles["Rel-U"]["dash"] == styles["Doctor"]["dash"] == "solid" and styles["Rel-U"]["width"] == 3
    thin = [styles[name]["dash"] for name in ("MSP", "ODIN", "Entropy", "Energy")]
    assert len(set(thin)) == len(thin) and "solid" not in thin
