"""Fidelity against independent computations (issue 28, items 11-12): what a figure or an interval shows is what
the numbers behind it are."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from relu_core import explore, metrics
from relu_core.explore import export, views
from relu_core.runs import Run

# README's tie example: u <= 2 accepts 19/20 correct (TPR 0.95) and 2/4 errors, so FPR95 = 0.5; the thinned ROC
# curve skips that point and its first point at TPR >= 0.95 has FPR 0.75.
TIED_UNCERTAINTY = np.array([0.0] * 17 + [1, 1, 2, 2, 3, 3, 4])
TIED_CORRECT = np.array([True] * 17 + [True, False] * 3 + [False])


def _tied_view() -> tuple[Run, explore.View, explore.Setting]:
    """A run of 48 samples whose evaluation half holds the tie example, Doctor scoring it as the example does and
    Rel-U scoring it reversed within the correct ones (another curve, no ties broken differently)."""
    n = TIED_CORRECT.size
    correct = np.concatenate([TIED_CORRECT, TIED_CORRECT])
    labels = np.zeros(2 * n, dtype=np.int64)
    predictions = np.where(correct, 0, 1)
    logits = np.eye(2, dtype=np.float32)[predictions] * 3.0
    run = Run.from_logits(logits, labels, ("a", "b"), source="tie example")
    setting = explore.Setting()
    tune_idx, eval_idx = np.arange(n), np.arange(n, 2 * n)
    view = explore.View(
        run.run_id, ("a", "b"), setting, tune_idx, eval_idx, predictions, correct, np.ones((2, 2)) - np.eye(2), 0.5,
        False, float(TIED_CORRECT.mean()),
    )  # fmt: skip
    thinned_fpr, thinned_tpr, _ = metrics.roc_curve(TIED_UNCERTAINTY, TIED_CORRECT)
    assert thinned_fpr[np.argmax(thinned_tpr >= 0.95)] == 0.75  # the drawn (thinned) curve skips FPR 0.5
    for key in ("relu", "doctor"):
        scores = np.concatenate([TIED_UNCERTAINTY, TIED_UNCERTAINTY])
        view.detectors[key] = views.detector_view(key, scores, TIED_UNCERTAINTY, TIED_CORRECT)
    return run, view, setting


def _marker(fig, name: str) -> dict:
    (trace,) = [t for t in json.loads(fig.to_json())["data"] if t.get("name") == f"{name} @ TPR 95%"]
    return trace


def test_roc_marker_and_its_hover_say_what_the_table_says_on_ties():
    run, view, setting = _tied_view()
    assert view.detectors["doctor"].summary["fpr95"] == 0.5
    assert "0.5000" in explore.metrics_html(view)
    for name in ("Rel-U", "Doctor"):
        marker = _marker(view.marked(setting).roc, name)
        assert marker["x"] == [0.5] and marker["y"] == [0.95]
        assert marker["hovertemplate"].startswith(f"{name}: FPR at TPR 95% = %{{x:.4f}}")  # 0.5000 on hover
    # Another operating point chosen: the 95 % marker stays at the table's FPR95.
    other = setting.replace(op_kind="coverage", op_target=0.5)
    assert _marker(view.marked(other).roc, "Doctor")["x"] == [0.5]


def test_the_report_marks_the_tables_fpr95_on_ties():
    run, view, setting = _tied_view()
    assert _marker(export.view_figures(run, view, setting)["roc"], "Doctor")["x"] == [0.5]
    page = export.report_html(run, view, setting)
    # The figure inlined in the report: its marker trace holds x = [0.5], never 0.75.
    found = re.findall(r'"name":"Doctor @ TPR 95%",.*?"type":"scatter"', page)
    assert found and all('"x":[0.5],' in trace for trace in found), found


@pytest.mark.parametrize("seed", [0, 1])
def test_roc_marker_equals_operating_point_on_random_ties(seed):
    rng = np.random.default_rng(seed)
    uncertainty = rng.integers(0, 6, 300).astype(float)
    correct = rng.random(300) < 0.8
    run, view, setting = _tied_view()
    view.eval_idx = np.arange(300)
    view.correct = correct
    for key in ("relu", "doctor"):
        view.detectors[key] = views.detector_view(key, uncertainty, uncertainty, correct)
    point = metrics.operating_point(uncertainty, correct, "tpr", 0.95)
    assert _marker(view.marked(setting).roc, "Doctor")["x"] == [point.fpr] == [metrics.fpr_at_tpr(uncertainty, correct)]
