"""Metrics against scikit-learn and against naive per-threshold loops, on random and heavily tied data."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn.metrics as skm
import torch

from relu_core import metrics
from relu_core.errors import InputError

SEEDS = range(12)


def _scores(seed: int, tied: bool) -> tuple[np.ndarray, np.ndarray]:
    """Random (uncertainty, correct) with both classes present; ``tied`` draws from a few distinct values."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    if tied:
        uncertainty = rng.integers(0, int(rng.integers(2, 6)), n).astype(np.float64) / 3.0
    else:
        uncertainty = rng.standard_normal(n)
    correct = rng.random(n) < rng.uniform(0.2, 0.95)
    correct[:2] = (True, False)  # both classes, in every draw
    # Make the detector informative but imperfect, as real ones are.
    uncertainty = uncertainty + np.where(correct, 0.0, rng.choice([0.0, 1.0], n))
    return uncertainty, correct


def _naive_risk(uncertainty: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Selective risk at each coverage k/N by a per-threshold loop (expected risk, random tie-break)."""
    n = uncertainty.shape[0]
    ordered = np.sort(uncertainty)
    risks = []
    for k in range(1, n + 1):
        threshold = ordered[k - 1]
        below = uncertainty < threshold
        tied = uncertainty == threshold
        taken_from_tie = k - below.sum()
        errors = (~correct[below]).sum() + (~correct[tied]).sum() * taken_from_tie / tied.sum()
        risks.append(errors / k)
    return np.array(risks)


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_roc_curve_matches_sklearn(seed: int, tied: bool) -> None:
    uncertainty, correct = _scores(seed, tied)
    for drop in (True, False):
        fpr, tpr, thresholds = metrics.roc_curve(uncertainty, correct, drop_intermediate=drop)
        ref_fpr, ref_tpr, ref_thresholds = skm.roc_curve(correct, -uncertainty, drop_intermediate=drop)
        np.testing.assert_array_equal(fpr, ref_fpr)
        np.testing.assert_array_equal(tpr, ref_tpr)
        np.testing.assert_array_equal(thresholds, -ref_thresholds)  # uncertainty scale


def _full_curve_fpr(positives: np.ndarray, scores: np.ndarray, target: float) -> float:
    """FPR at the first point of sklearn's *full* ROC curve (every distinct threshold) with TPR >= target."""
    fpr, tpr, _ = skm.roc_curve(positives, scores, drop_intermediate=False)
    return float(fpr[np.argmax(tpr >= target)])


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_auroc_and_fpr_match_sklearn(seed: int, tied: bool) -> None:
    uncertainty, correct = _scores(seed, tied)
    assert metrics.auroc(uncertainty, correct) == pytest.approx(skm.roc_auc_score(correct, -uncertainty), abs=1e-12)
    for target in (0.95, 0.5, 0.8, 0.07, 0.3, 1.0):
        assert metrics.fpr_at_tpr(uncertainty, correct, target) == _full_curve_fpr(correct, -uncertainty, target)
        assert metrics.fpr_at_tpr(uncertainty, correct, target, positive="error") == _full_curve_fpr(
            ~correct, uncertainty, target
        )
        assert metrics.operating_point(uncertainty, correct, "tpr", target).fpr == metrics.fpr_at_tpr(
            uncertainty, correct, target
        )


def test_fpr95_on_ties_uses_every_threshold() -> None:
    # The example: u <= 2 accepts 19/20 correct (TPR exactly 0.95) and 2/4 errors, so FPR95 = 0.5.
    # sklearn's default (thinned) curve skips that point and gives 0.75, as the authors' scripts would.
    uncertainty = np.array([0.0] * 17 + [1, 1, 2, 2, 3, 3, 4])
    correct = np.array([True] * 17 + [True, False] * 3 + [False])
    assert metrics.fpr_at_tpr(uncertainty, correct, 0.95) == 0.5
    assert metrics.summary(uncertainty, correct)["fpr95"] == 0.5
    assert metrics.operating_point(uncertainty, correct, "tpr", 0.95).fpr == 0.5
    thinned_fpr, thinned_tpr, _ = skm.roc_curve(correct, -uncertainty)
    assert thinned_fpr[np.argmax(thinned_tpr >= 0.95)] == 0.75  # the case really differs
    # Two tied pairs in a row: the thinned curve drops the crossing point in both conventions.
    tied_pairs = np.array([0, 0, 1, 1, 2, 2], dtype=float)
    alternating = np.array([True, False, True, False, True, False])
    for positive, flags, scores in (("correct", alternating, -tied_pairs), ("error", ~alternating, tied_pairs)):
        full = _full_curve_fpr(flags, scores, 0.5)
        fpr, tpr, _ = skm.roc_curve(flags, scores)
        assert fpr[np.argmax(tpr >= 0.5)] != full
        assert metrics.fpr_at_tpr(tied_pairs, alternating, 0.5, positive=positive) == full


def test_auroc_ties_count_one_half() -> None:
    assert metrics.auroc(np.zeros(4), np.array([True, True, False, False])) == 0.5
    assert metrics.auroc(np.array([0.0, 1.0, 1.0]), np.array([True, True, False])) == pytest.approx(0.75)
    assert metrics.auroc(np.array([0.0, 1.0]), np.array([True, False])) == 1.0
    assert metrics.auroc(np.array([1.0, 0.0]), np.array([True, False])) == 0.0


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_risk_coverage_matches_naive_loop_and_is_order_invariant(seed: int, tied: bool) -> None:
    uncertainty, correct = _scores(seed, tied)
    coverage, risk = metrics.risk_coverage_curve(uncertainty, correct)
    n = uncertainty.shape[0]
    np.testing.assert_allclose(coverage, np.arange(1, n + 1) / n)
    naive = _naive_risk(uncertainty, correct)
    np.testing.assert_allclose(risk, naive, rtol=0, atol=1e-12)
    assert metrics.aurc(uncertainty, correct) == pytest.approx(naive.mean(), abs=1e-12)
    permutation = np.random.default_rng(seed + 100).permutation(n)
    assert metrics.aurc(uncertainty[permutation], correct[permutation]) == pytest.approx(naive.mean(), abs=1e-12)
    np.testing.assert_allclose(metrics.risk_coverage_curve(uncertainty[permutation], correct[permutation])[1], risk)


def test_risk_coverage_hand_example() -> None:
    # Sorted: 0.1 correct, then a tie {0.5 error, 0.5 correct}, then 0.9 error.
    uncertainty = np.array([0.5, 0.9, 0.1, 0.5])
    correct = np.array([False, False, True, True])
    coverage, risk = metrics.risk_coverage_curve(uncertainty, correct)
    np.testing.assert_allclose(coverage, [0.25, 0.5, 0.75, 1.0])
    np.testing.assert_allclose(risk, [0.0, 0.5 / 2, 1 / 3, 2 / 4])
    assert metrics.aurc(uncertainty, correct) == pytest.approx((0 + 0.25 + 1 / 3 + 0.5) / 4)


def _naive_augrc(uncertainty: np.ndarray, correct: np.ndarray) -> float:
    """AUGRC as FD-Shifts computes it, by a loop over thresholds: at each distinct uncertainty t (tied samples
    accepted together) the coverage P(u <= t) and the generalised risk P(u <= t and wrong), plus (0, 0); the
    trapezoidal area under those points."""
    points = [(0.0, 0.0)]
    for threshold in np.unique(uncertainty):
        accepted = uncertainty <= threshold
        points.append((accepted.mean(), (accepted & ~correct).mean()))
    coverage, risk = np.array(points).T
    return float(np.sum(np.diff(coverage) * (risk[1:] + risk[:-1]) / 2))


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_augrc_matches_a_loop_over_thresholds(seed: int, tied: bool) -> None:
    uncertainty, correct = _scores(seed, tied)
    expected = _naive_augrc(uncertainty, correct)
    assert metrics.augrc(uncertainty, correct) == pytest.approx(expected, abs=1e-12)
    assert metrics.summary(uncertainty, correct)["augrc"] == pytest.approx(expected, abs=1e-12)
    permutation = np.random.default_rng(seed + 100).permutation(uncertainty.size)
    assert metrics.augrc(uncertainty[permutation], correct[permutation]) == pytest.approx(expected, abs=1e-12)
    # Its curve is the selective risk times the coverage, and its trapezoids from (0, 0) give the same area.
    coverage, generalized = metrics.generalized_risk_coverage_curve(uncertainty, correct)
    np.testing.assert_allclose(generalized, metrics.risk_coverage_curve(uncertainty, correct)[1] * coverage)
    area = np.trapezoid(np.concatenate(([0.0], generalized)), np.concatenate(([0.0], coverage)))
    assert area == pytest.approx(expected, abs=1e-12)
    # Traub et al.'s identity with AUROC (ties one half in both), and the perfect ordering's (1 - acc)² / 2.
    accuracy = correct.mean()
    identity = (1 - metrics.auroc(uncertainty, correct)) * accuracy * (1 - accuracy) + (1 - accuracy) ** 2 / 2
    assert expected == pytest.approx(identity, abs=1e-12)
    perfect = np.where(correct, uncertainty - 100.0, uncertainty + 100.0)
    assert metrics.augrc(perfect, correct) == pytest.approx((1 - accuracy) ** 2 / 2, abs=1e-15)


def test_augrc_hand_example_and_one_class_input() -> None:
    # Sorted: 0.1 correct, then a tie {0.5 error, 0.5 correct}, then 0.9 error; N = 4. Points (coverage, risk):
    # (0, 0), (1/4, 0), (3/4, 1/4), (1, 2/4): area 0 + 1/2 * (0 + 1/4) / 2 + 1/4 * (1/4 + 2/4) / 2 = 5/32.
    uncertainty = np.array([0.5, 0.9, 0.1, 0.5])
    correct = np.array([False, False, True, True])
    assert metrics.augrc(uncertainty, correct) == 5 / 32
    assert metrics.augrc(uncertainty, np.ones(4, dtype=bool)) == 0.0
    assert metrics.augrc(uncertainty, np.zeros(4, dtype=bool)) == 0.5


@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_eaurc_is_nonnegative_and_zero_for_perfect_ordering(seed: int, tied: bool) -> None:
    uncertainty, correct = _scores(seed, tied)
    assert metrics.eaurc(uncertainty, correct) >= 0.0
    perfect = np.where(correct, uncertainty - 100.0, uncertainty + 100.0)
    assert metrics.eaurc(perfect, correct) == 0.0
    optimal_aurc = metrics.aurc(perfect, correct)
    assert metrics.eaurc(uncertainty, correct) == pytest.approx(metrics.aurc(uncertainty, correct) - optimal_aurc)
    # The worst ordering is strictly worse than the best one whenever both classes are present.
    assert metrics.eaurc(-perfect, correct) > 0.0


@pytest.mark.parametrize("seed", SEEDS)
def test_metrics_invariant_under_monotone_transforms(seed: int) -> None:
    uncertainty, correct = _scores(seed, tied=True)
    base = metrics.summary(uncertainty, correct)
    for transform in (lambda u: 3.0 * u + 7.0, np.exp, lambda u: np.arctan(u) ** 3):
        assert metrics.summary(transform(uncertainty), correct) == pytest.approx(base, abs=1e-12)
        np.testing.assert_allclose(
            metrics.risk_coverage_curve(transform(uncertainty), correct)[1],
            metrics.risk_coverage_curve(uncertainty, correct)[1],
        )


def test_summary_keys_and_values() -> None:
    uncertainty, correct = _scores(3, tied=False)
    result = metrics.summary(uncertainty, correct)
    assert set(result) == {"fpr95", "auroc", "aurc", "eaurc", "augrc"}
    assert all(isinstance(value, float) for value in result.values())
    assert result["auroc"] == metrics.auroc(uncertainty, correct)
    assert result["fpr95"] == metrics.fpr_at_tpr(uncertainty, correct)
    assert result["aurc"] == metrics.aurc(uncertainty, correct)
    assert result["eaurc"] == metrics.eaurc(uncertainty, correct)


@pytest.mark.parametrize("all_correct", [True, False])
def test_degenerate_splits(all_correct: bool) -> None:
    uncertainty = np.array([0.3, 0.1, 0.2])
    correct = np.full(3, all_correct)
    for function in (metrics.roc_curve, metrics.auroc, metrics.fpr_at_tpr, metrics.summary):
        with pytest.raises(InputError, match="undefined"):
            function(uncertainty, correct)
    assert metrics.aurc(uncertainty, correct) == (0.0 if all_correct else 1.0)
    assert metrics.eaurc(uncertainty, correct) == 0.0


def test_accepts_torch_and_integer_flags() -> None:
    uncertainty, correct = _scores(5, tied=False)
    expected = metrics.summary(uncertainty, correct)
    assert metrics.summary(torch.from_numpy(uncertainty), torch.from_numpy(correct)) == expected
    assert metrics.summary(uncertainty, correct.astype(int)) == expected


@pytest.mark.parametrize(
    ("uncertainty", "correct", "message"),
    [
        (np.array([0.1, np.nan]), np.array([True, False]), "NaN"),
        (np.array([0.1, np.inf]), np.array([True, False]), "NaN"),
        (np.array([0.1, 0.2, 0.3]), np.array([True, False]), "length"),
        (np.zeros((2, 2)), np.array([True, False]), "1-D"),
        (np.array([]), np.array([], dtype=bool), "empty"),
        (np.array([0.1, 0.2]), np.array([0.5, 1.0]), "booleans"),
        (np.array(["a", "b"]), np.array([True, False]), "real"),
    ],
)
def test_bad_scores_raise(uncertainty, correct, message: str) -> None:
    for function in (metrics.auroc, metrics.aurc, metrics.risk_coverage_curve):
        with pytest.raises(InputError, match=message):
            function(uncertainty, correct)


def test_fpr_at_tpr_rejects_bad_options() -> None:
    uncertainty, correct = _scores(0, tied=False)
    with pytest.raises(InputError, match="positive"):
        metrics.fpr_at_tpr(uncertainty, correct, positive="wrong")
    for bad in (1.5, 0.0, float("nan"), "x"):
        with pytest.raises(InputError, match="tpr"):
            metrics.fpr_at_tpr(uncertainty, correct, tpr=bad)


# --------------------------------------------------------------------------- classifier metrics


def _logits(seed: int, n: int = 400, n_classes: int = 6) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    logits = rng.standard_normal((n, n_classes)) * 2.0
    logits[np.arange(n), labels] += rng.uniform(0, 4, n)
    return logits.astype(np.float32), labels


def test_accuracy() -> None:
    logits, labels = _logits(0)
    assert metrics.accuracy(logits, labels) == pytest.approx(np.mean(logits.argmax(1) == labels))
    assert metrics.accuracy(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([0, 0])) == 0.5


@pytest.mark.parametrize("seed", range(4))
def test_confusion_matrix_matches_sklearn(seed: int) -> None:
    rng = np.random.default_rng(seed)
    labels, predictions = rng.integers(0, 7, 500), rng.integers(0, 7, 500)
    result = metrics.confusion_matrix(predictions, labels, 7)
    assert result.dtype == np.int64
    np.testing.assert_array_equal(result, skm.confusion_matrix(labels, predictions, labels=np.arange(7)))
    # Rows are the true class: one sample of class 2 predicted as 5.
    single = metrics.confusion_matrix(np.array([5]), np.array([2]), 7)
    assert single[2, 5] == 1 and single.sum() == 1


def test_confusion_matrix_rejects_bad_input() -> None:
    with pytest.raises(InputError, match="lie in"):
        metrics.confusion_matrix(np.array([0, 3]), np.array([0, 1]), 3)
    with pytest.raises(InputError, match="length"):
        metrics.confusion_matrix(np.array([0, 1]), np.array([0]), 3)
    with pytest.raises(InputError, match="integer"):
        metrics.confusion_matrix(np.array([0.0, 1.0]), np.array([0, 1]), 3)


def test_ece_matches_hand_computation() -> None:
    # Two classes; confidences 0.9 (right), 0.9 (wrong), 0.6 (right): with 15 bins 0.9 and 0.6 fall in
    # different bins: |1/2 - 0.9| * 2/3 + |1 - 0.6| * 1/3.
    def logit_pair(confidence: float, winner: int) -> list[float]:
        margin = np.log(confidence / (1 - confidence))
        return [margin, 0.0] if winner == 0 else [0.0, margin]

    logits = np.array([logit_pair(0.9, 0), logit_pair(0.9, 1), logit_pair(0.6, 0)])
    labels = np.array([0, 0, 0])
    expected = abs(0.5 - 0.9) * 2 / 3 + abs(1.0 - 0.6) * 1 / 3
    assert metrics.ece(logits, labels) == pytest.approx(expected, abs=1e-12)
    # One bin: |mean accuracy - mean confidence|.
    assert metrics.ece(logits, labels, n_bins=1) == pytest.approx(abs(2 / 3 - (0.9 + 0.9 + 0.6) / 3), abs=1e-12)


def test_ece_bins_are_closed_on_the_right() -> None:
    # Confidence exactly 0.5 (tied logits) belongs to the bin (0, 0.5], not to (0.5, 1].
    logits = np.array([[0.0, 0.0], [np.log(9.0), 0.0]])  # confidences 0.5 (right) and 0.9 (wrong)
    labels = np.array([0, 1])
    assert metrics.ece(logits, labels, n_bins=2) == pytest.approx(0.5 * 0.5 + 0.5 * 0.9, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_ece_matches_loop_over_bins(seed: int) -> None:
    logits, labels = _logits(seed)
    z = logits.astype(np.float64)
    probs = np.exp(z - z.max(1, keepdims=True))
    probs /= probs.sum(1, keepdims=True)
    confidence, hits = probs.max(1), probs.argmax(1) == labels
    expected = 0.0
    edges = np.linspace(0, 1, 16)
    for low, high in zip(edges[:-1], edges[1:]):
        inside = (confidence > low) & (confidence <= high)
        if inside.any():
            expected += inside.mean() * abs(hits[inside].mean() - confidence[inside].mean())
    assert metrics.ece(logits, labels) == pytest.approx(expected, abs=1e-12)


def test_classifier_metrics_validate() -> None:
    logits, labels = _logits(0, n=10)
    with pytest.raises(InputError):
        metrics.ece(logits, labels[:5])
    with pytest.raises(InputError):
        metrics.accuracy(np.full((2, 3), np.nan), np.array([0, 1]))
    with pytest.raises(InputError, match="n_bins"):
        metrics.ece(logits, labels, n_bins=0)


@pytest.mark.parametrize("seed", range(4))
def test_operating_point_matches_the_roc_curve_and_brute_force_counts(seed):
    rng = np.random.default_rng(seed)
    correct = rng.random(500) < 0.8
    uncertainty = np.round(rng.normal(size=500) - correct, 1)  # heavy ties
    point = metrics.operating_point(uncertainty, correct, "tpr", 0.95)
    assert point.fpr == pytest.approx(metrics.fpr_at_tpr(uncertainty, correct, 0.95), abs=1e-12)
    accepted = uncertainty <= point.threshold
    assert np.array_equal(point.accepted, accepted)
    assert point.tpr == accepted[correct].mean() >= 0.95
    assert not (uncertainty[correct] < point.threshold).mean() >= 0.95  # the lowest threshold reaching it
    assert point.coverage == accepted.mean() and point.risk == pytest.approx((~correct[accepted]).mean())
    counts = point.counts(correct)
    assert counts["accepted"] + counts["rejected"] == 500
    assert counts["errors caught"] + counts["errors missed"] == int((~correct).sum())
    cover = metrics.operating_point(uncertainty, correct, "coverage", 0.6)
    assert cover.coverage >= 0.6 and not (uncertainty < cover.threshold).mean() >= 0.6


def test_operating_point_rejects_bad_targets():
    with pytest.raises(InputError):
        metrics.operating_point(np.zeros(3), np.array([True, False, True]), "tpr", 0.0)
    with pytest.raises(InputError):
        metrics.operating_point(np.zeros(3), np.array([True, False, True]), "precision", 0.5)
    with pytest.raises(InputError, match="correctly classified"):
        metrics.operating_point(np.zeros(3), np.zeros(3, dtype=bool), "tpr", 0.5)
