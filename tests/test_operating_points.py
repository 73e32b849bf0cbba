"""Both operating points of FPR95 in words (issue 41): "keep 95 % of the correct predictions: how many errors slip
through?" (correct positive) and "catch 95 % of the errors: how many good predictions are lost?" (errors
positive), each with its own paired interval, checked against scikit-learn's ROC curve and the bootstrap run
directly."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_curve

from relu_core import detectors, metrics, operating_points, protocol, stats
from relu_core.errors import InputError


def _fpr95_sklearn(uncertainty: np.ndarray, correct: np.ndarray, positive: str) -> float:
    """FPR at 95 % TPR from scikit-learn's full ROC curve, written from the two questions."""
    if positive == "correct":  # accept the least uncertain: correct predictions are the positives
        fpr, tpr, _ = roc_curve(correct, -uncertainty, drop_intermediate=False)
    else:  # flag the most uncertain: errors are the positives
        fpr, tpr, _ = roc_curve(~correct, uncertainty, drop_intermediate=False)
    return float(fpr[np.argmax(tpr >= 0.95)])


def _logits(seed: int = 0, n: int = 600):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 4, n)
    logits = rng.normal(size=(n, 4)) + 1.6 * np.eye(4)[labels]
    return logits, labels


@pytest.mark.parametrize("reported", ["correct", "error"])
def test_the_result_carries_the_other_convention_per_seed(reported):
    logits, labels = _logits()
    result = protocol.evaluate(
        logits, labels, ["relu", "doctor"], seeds=2, n_resamples=200, fpr_positive=reported, temperature=1.3
    )
    other = operating_points.other(reported)
    correct = logits.argmax(1) == labels
    for s, (_, tune, held_out) in enumerate(protocol.seeded_splits(correct, 0.5, (0, 1))):
        doctor = detectors.Doctor(1.3).fit(logits[tune], labels[tune]).score(logits[held_out])
        relu = detectors.RelU(lam=0.5, temperature=1.3).fit(logits[tune], labels[tune]).score(logits[held_out])
        for key, u in (("relu", relu), ("doctor", doctor)):
            assert result.fpr95_other[key][s] == pytest.approx(_fpr95_sklearn(u, correct[held_out], other))
            assert result.per_seed[key]["fpr95"][s] == pytest.approx(_fpr95_sklearn(u, correct[held_out], reported))
    both = result.fpr95_by_positive("relu")
    assert list(both) == ["correct", "error"]
    assert both[other] == pytest.approx(float(np.mean(result.fpr95_other["relu"])))


def test_the_other_conventions_interval_is_its_own_paired_bootstrap():
    logits, labels = _logits(1)
    result = protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=1, n_resamples=300)
    correct = logits.argmax(1) == labels
    tune, held_out = protocol.split_indices(len(labels), 0.5, 0, stratify=correct)
    relu = detectors.RelU(lam=0.5).fit(logits[tune], labels[tune]).score(logits[held_out])
    doctor = detectors.Doctor().fit(logits[tune], labels[tune]).score(logits[held_out])
    direct = stats.paired_bootstrap(
        relu, doctor, correct[held_out], metrics=("fpr95",), n_resamples=300, fpr_positive="error"
    )["fpr95"]
    got = result.paired_fpr95_other
    assert (got.low, got.high) == pytest.approx((direct.low, direct.high))
    assert got.estimate == pytest.approx(
        metrics.fpr_at_tpr(relu, correct[held_out], positive="error")
        - metrics.fpr_at_tpr(doctor, correct[held_out], positive="error")
    )


def test_both_sentences_answer_the_two_questions_with_their_intervals():
    logits, labels = _logits(2)
    result = protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=200)
    first, second = result.operating_points()
    assert first.startswith("Keep 95 % of the correct predictions:") and "of the errors slip through" in first
    assert second.startswith("Catch 95 % of the errors:") and "of the good predictions are lost" in second
    for text, diff in ((first, result.paired["fpr95"]), (second, result.paired_fpr95_other)):
        assert "95 % CI" in text and diff.outcome() in text
    row = result.to_dict()["relu"]
    assert row["operating_points"] == [first, second]
    assert set(row["fpr95_by_positive"]) == {"correct", "error"}
    without = protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=1, n_resamples=0)
    assert all("no paired interval computed" in line for line in without.operating_points())
    assert protocol.evaluate(logits, labels, ["msp"], seeds=1).operating_points() == []


def test_a_sentence_says_no_significant_difference_when_the_interval_covers_zero():
    diff = stats.PairedDifference("fpr95", 0.004, -0.012, 0.02, False, 1000)
    text = operating_points.sentence("correct", {"Rel-U": 0.612, "Doctor": 0.608}, diff)
    assert text == (
        "Keep 95 % of the correct predictions: 61.2 % of the errors slip through with Rel-U, 60.8 % with Doctor; "
        "no significant difference (Rel-U − Doctor +0.4 points, 95 % CI -1.2 to +2.0)."
    )
    better = stats.PairedDifference("fpr95", -0.05, -0.08, -0.02, False, 1000)
    assert "Rel-U better" in operating_points.sentence("error", {"Rel-U": 0.3, "Doctor": 0.35}, better)
    with pytest.raises(InputError):
        operating_points.sentence("wrong", {"Rel-U": 0.3, "Doctor": 0.35})


@pytest.mark.slow
def test_the_objectives_table_states_both_operating_points(monkeypatch):
    from relu_core.studies import objectives

    def study():
        return objectives.objectives_study("digits", "cnn8", objectives=("cross-entropy",), epochs=1, seeds=1)

    first = study()
    summary = first.summary_table()
    assert "Rel-U − Doctor FPR95, errors positive [95 % CI]" in summary.columns
    assert "verdict (errors positive)" in summary.columns
    lines = first.operating_points()
    assert len(lines) == 2 and lines[0].startswith("cross-entropy: Keep 95 %") and "Catch 95 %" in lines[1]
    again = study().rows[0].result  # read back from the study's cache
    np.testing.assert_allclose(again.fpr95_other["relu"], first.rows[0].result.fpr95_other["relu"])
    assert again.paired_fpr95_other == first.rows[0].result.paired_fpr95_other


def test_explore_and_start_state_both_operating_points_with_intervals():
    from relu_core import explore
    from relu_core.runs import Run

    logits, labels = _logits(3, 1200)
    run = Run.from_logits(logits.astype(np.float32), labels, ("a", "b", "c", "d"))
    view = explore.view(run, explore.Setting())
    assert view.paired_other is None and explore.operating_points_html(view) == ""  # until the bootstrap lands
    explore.ensure_paired(view)
    other = view.paired_other
    correct = view.correct_eval
    relu, doctor = (view.detectors[k].eval_uncertainty for k in protocol.PAIRED)
    expected = _fpr95_sklearn(relu, correct, "error") - _fpr95_sklearn(doctor, correct, "error")
    assert other.estimate == pytest.approx(expected) and other.low <= other.estimate <= other.high
    assert view.fpr95_by_positive("relu")["correct"] == pytest.approx(_fpr95_sklearn(relu, correct, "correct"))
    lines = explore.operating_points_lines(view)
    assert lines[0].startswith("Keep 95 % of the correct predictions") and lines[1].startswith(
        "Catch 95 % of the errors"
    )
    assert other.outcome() in lines[1] and view.paired["fpr95"].outcome() in lines[0]
    assert "Catch 95 % of the errors" in explore.operating_points_html(view)
    assert all(line in explore.start_verdict(view) for line in lines)


@pytest.mark.parametrize("ties", [False, True])
def test_the_errors_caught_operating_point_is_the_error_positive_fpr95(ties):
    rng = np.random.default_rng(4)
    correct = rng.random(400) < 0.8
    uncertainty = rng.normal(size=400) - correct
    if ties:
        uncertainty = np.round(uncertainty, 1)  # many tied groups: flagged or accepted together
    point = metrics.operating_point(uncertainty, correct, "errors", 0.95)
    assert 1 - point.tpr == pytest.approx(_fpr95_sklearn(uncertainty, correct, "error"))
    assert np.array_equal(point.accepted, uncertainty <= point.threshold)
    caught = (~point.accepted & ~correct).sum() / (~correct).sum()
    assert caught >= 0.95 and point.fpr == pytest.approx(1 - caught)
    # nothing can be accepted when the least uncertain sample is an error and every error must be caught
    none = metrics.operating_point([0.1, 0.2, 0.3], [False, True, True], "errors", 1.0)
    assert none.coverage == 0 and not none.accepted.any() and np.isnan(none.risk)


def test_the_setting_carries_the_convention_to_the_roc_marker_and_the_export_card(digits_run):
    from relu_core import detector_export, explore

    setting = explore.Setting(op_kind="errors", op_target=0.95)
    assert setting.fpr_positive == "error" and setting.target_words() == "errors caught ≥ 95%"
    assert explore.Setting().fpr_positive == "correct"
    view = explore.view(digits_run, setting)
    roc = view.marked(setting).roc
    circles = [t for t in roc.data if str(t.name).endswith("@ 95% of errors caught")]
    assert circles and "95% of errors caught" in roc.layout.xaxis.title.text
    relu = view.detectors["relu"]
    expected = metrics.operating_point(relu.eval_uncertainty, view.correct_eval, "errors", 0.95)
    assert (circles[0].x[0], circles[0].y[0]) == pytest.approx((expected.fpr, expected.tpr))
    default_roc = view.marked(explore.Setting()).roc
    assert any(str(t.name).endswith("@ TPR 95%") for t in default_roc.data)
    fitted = detector_export.from_setting(digits_run, setting, "relu", n_resamples=0)
    card = detector_export._operating_point(fitted)
    assert card["target"] == "errors caught ≥ 95%" and card["fpr95_positives"] == "error"


def test_the_errors_caught_note_and_the_export_flag(digits_run):
    import argparse

    from relu_core import explore
    from relu_core.cli import export

    setting = explore.Setting(op_kind="errors", op_target=0.9)
    note = explore.operating_note(explore.view(digits_run, setting), setting)
    assert note.startswith("Each detector's threshold is the highest still rejecting at least 90% of the errors")
    args = argparse.Namespace(delta=None, risk=None, target_tpr=None, target_coverage=None, target_errors="0.9")
    assert export._operating_point(args)[:2] == ("errors", 0.9)


def test_the_report_states_both_operating_points(digits_run):
    import html

    from relu_core import explore
    from relu_core.explore import export

    setting = explore.Setting()
    view = explore.view(digits_run, setting)
    text = export.report_html(digits_run, view, setting)
    for line in explore.operating_points_lines(view):
        assert html.escape(line) in text


@pytest.mark.slow
def test_explore_draws_the_errors_caught_operating_point_and_both_sentences(pages, digits_run):
    from apptest_charts import charts, html_texts

    from studio import session

    at = pages.open("Explore.py", digits_run, **{session.EX_OP_KIND: session.OP_KINDS["errors"]})
    pages.ok(at)
    roc = next(c for c in charts(at) if c["layout"]["title"]["text"].startswith("ROC"))
    assert any(str(t.get("name", "")).endswith("@ 95% of errors caught") for t in roc["data"])
    assert "95% of errors caught" in roc["layout"]["xaxis"]["title"]["text"]
    texts = " ".join(html_texts(at)) + " ".join(c.value for c in at.caption)
    assert "the highest still rejecting at least 95% of the errors" in texts
    assert at.query_params.get("op") == "errors"
