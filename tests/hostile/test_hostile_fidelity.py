"""Fidelity against independent computations (issue 28, items 11-12): what a figure or an interval shows is what
the numbers behind it are."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest

from relu_core import cli, detector_comparison, explore, metric_info, metrics, protocol, stats
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


# ------------------------------------------------------------------------------ 12: intervals under selection
def _logits(n: int = 300, c: int = 4, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)).astype(np.float32)
    logits[np.arange(n), labels] += rng.normal(1.5, 1.5, n).astype(np.float32)
    return logits, labels


@pytest.fixture(scope="module")
def logits_file(tmp_path_factory) -> str:
    logits, labels = _logits()
    path = tmp_path_factory.mktemp("fidelity") / "run.npz"
    np.savez(path, logits=logits, labels=labels)
    return str(path)


def _cli_out(argv: list[str], capsys) -> str:
    assert cli.main(argv) == 0
    return capsys.readouterr().out


SELECTED = [["--select"], ["--oracle"]]


@pytest.mark.parametrize("flags", SELECTED + [[]], ids=["select", "oracle", "fixed"])
def test_the_cli_labels_the_interval_conditional_exactly_under_selection(flags, logits_file, capsys):
    selected = bool(flags)
    common = ["evaluate", "--logits", logits_file, "--methods", "relu,doctor", "--seeds", "2", "--bootstrap", "40"]
    minus_doctor = json.loads(_cli_out([*common, *flags, "--json"], capsys))["relu"]["minus_doctor"]
    assert set(minus_doctor) == set(metric_info.PAIRED_KEYS)
    for row in minus_doctor.values():
        assert row["conditional_on_selection"] is selected
        assert (stats.CONDITIONAL_LABEL in row["verdict"]) is selected
    text = _cli_out([*common, *flags], capsys)
    after = text.split("Rel-U − Doctor on the same splits", 1)[1]
    paired_lines, operating_lines = after.split("Both operating points", 1)
    assert (stats.CONDITIONAL_LABEL in paired_lines) is selected
    assert paired_lines.count(stats.CONDITIONAL_LABEL) == (1 + len(metric_info.PAIRED_KEYS) if selected else 0)
    # the two FPR95 questions in words (correct positive, errors positive), each with its own interval
    sentences = [line for line in operating_lines.splitlines() if line.strip().startswith(("Keep 95", "Catch 95"))]
    assert len(sentences) == 2
    assert all((stats.CONDITIONAL_LABEL in line) is selected for line in sentences)


@pytest.mark.parametrize("selection", ["tuning", "oracle"])
def test_a_selected_result_states_its_interval_is_conditional_in_every_form(selection):
    logits, labels = _logits(seed=1)
    options = {"seeds": 2, "n_resamples": 40}
    selected = protocol.evaluate_with_selection(logits, labels, ["relu", "doctor"], selection=selection, **options)
    fixed = protocol.evaluate(logits, labels, ["relu", "doctor"], **options)
    for result, is_selected in ((selected, True), (fixed, False)):
        assert all(d.conditional is is_selected for d in result.paired.values())
        rows = stats.paired_rows({m: result.difference_per_seed(m) for m in result.paired}, result.paired)
        assert all(row["conditional_on_selection"] is is_selected for row in rows)
        # the app's tables: the one-split rows and the rows over seeds
        one_split = detector_comparison.paired_rows(result.paired)
        ci_column = next(c for c in one_split.columns if "CI" in c)
        assert bool(one_split[ci_column].str.contains(stats.CONDITIONAL_LABEL, regex=False).all()) is is_selected
        frame = pd.DataFrame([{k: row[k] for k in stats.PAIRED_ROW_COLUMNS} for row in rows])
        over_seeds = detector_comparison.paired_table(frame)
        assert any(stats.CONDITIONAL_LABEL in column for column in over_seeds.columns) is is_selected
        for diff in result.paired.values():
            assert (stats.CONDITIONAL_LABEL in diff.verdict()) is is_selected
            assert (stats.CONDITIONAL_LABEL in diff.interval_text()) is is_selected


def test_explore_and_its_report_never_call_a_fixed_setting_conditional():
    run, view, setting = _tied_view()
    paired = views.ensure_paired(view)
    assert not any(d.conditional for d in paired.values())
    assert stats.CONDITIONAL_LABEL not in export.report_html(run, view, setting)
