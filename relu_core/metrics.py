"""Misclassification-detection metrics, computed from one sort and cumulative sums (O(N log N)).

Conventions (Rel-U paper, Dadalto et al., ICLR 2024, and Doctor, Granese et al., 2021):

* ``uncertainty`` (N,) float: a detector's score, higher = more likely misclassified. A detector
  *accepts* a sample (predicts "correct") when its uncertainty is low: at threshold ``t`` it accepts
  the samples with ``uncertainty <= t``.
* ``correct`` (N,) bool: the classifier's top-1 prediction was right. **Positives are the correctly
  classified samples**: TPR = accepted correct / all correct, FPR = accepted errors / all errors.
  ``fpr_at_tpr(..., positive="error")`` offers the other convention (errors are positives, flagged
  when ``uncertainty >= t``); label it wherever it is shown.
* Ties: the ROC curve puts tied scores on one threshold (a diagonal segment, so AUROC counts a tied
  correct/error pair as one half); the risk-coverage curve takes the *expected* risk under a uniformly
  random order inside each tie group, so no result depends on the order of the input.
* ROC-based metrics (``roc_curve``, ``auroc``, ``fpr_at_tpr``, ``summary``) are undefined unless both
  correct and misclassified samples are present and raise :class:`InputError` otherwise; the
  risk-coverage metrics (``risk_coverage_curve``, ``aurc``, ``eaurc``, ``generalized_risk_coverage_curve``,
  ``augrc``) are defined for any input.

All functions take numpy arrays, array-likes or torch tensors (copied to the CPU) and return numpy
arrays or Python floats. In the docstrings below, ``uncertainty`` and ``correct`` are always the two
(N,) arrays described here, and every function raises :class:`InputError` when they differ in length,
are empty, hold NaN / infinite values, or ``correct`` is not boolean (or 0/1). The metrics only read
the scores they are given: which split fits a detector and which one evaluates it is the caller's
choice (:mod:`relu_core.protocol` fits on the tuning part, evaluates on the evaluation part).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import torch

from relu_core import metric_info, validation
from relu_core.detectors import softmax, validate_labels, validate_logits
from relu_core.errors import InputError
from relu_core.registry import LRURegistry

_POSITIVE_CONVENTIONS = ("correct", "error")


def _to_numpy(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    return np.asarray(values)


def _validate_scores(uncertainty, correct) -> tuple[np.ndarray, np.ndarray]:
    """``(uncertainty float64, correct bool)`` after checking shapes, lengths, finiteness and 0/1 values."""
    scores, flags = _to_numpy(uncertainty), _to_numpy(correct)
    if scores.ndim != 1 or flags.ndim != 1:
        raise InputError(f"uncertainty and correct must be 1-D arrays, got shapes {scores.shape} and {flags.shape}")
    if scores.shape[0] != flags.shape[0]:
        raise InputError(f"uncertainty and correct differ in length: {scores.shape[0]} vs {flags.shape[0]}")
    if scores.shape[0] == 0:
        raise InputError("no samples: uncertainty and correct are empty")
    if scores.dtype.kind not in "iuf":
        raise InputError(f"uncertainty must be real numbers, got dtype {scores.dtype}")
    scores = scores.astype(np.float64, copy=False)
    if not np.isfinite(scores).all():
        raise InputError("uncertainty contains NaN or infinite values")
    if flags.dtype != bool:
        if flags.dtype.kind not in "iuf" or not np.isin(flags, (0, 1)).all():
            raise InputError("correct must be booleans (or 0/1): True where the prediction was right")
        flags = flags.astype(bool)
    return scores, flags


@dataclass(frozen=True)
class _Ranking:
    """Samples sorted by increasing uncertainty, summarised per group of tied values.

    ``values[g]`` is the uncertainty of group g; ``n_accepted[g]``, ``n_correct[g]``, ``n_errors[g]``
    count the samples with ``uncertainty <= values[g]`` (cumulative, int64).
    """

    values: np.ndarray
    n_accepted: np.ndarray
    n_correct: np.ndarray
    n_errors: np.ndarray

    @property
    def total_correct(self) -> int:
        return int(self.n_correct[-1])

    @property
    def total_errors(self) -> int:
        return int(self.n_errors[-1])

    @property
    def size(self) -> int:
        return int(self.n_accepted[-1])


#: The last rankings computed, by content: the curves and metrics of one score vector (a slider move asks for
#: ROC, risk-coverage, FPR95, AUROC, AURC and an operating point of each detector) share one sort.
_RANKINGS = LRURegistry(16)


def _rank(uncertainty, correct) -> _Ranking:
    """The single O(N log N) step every metric shares: one argsort, then cumulative sums at group ends; kept by
    the content of the scores and flags (:data:`_RANKINGS`: a BLAKE2 digest costs a fraction of the sort)."""
    scores, flags = _validate_scores(uncertainty, correct)
    digest = hashlib.blake2b(np.ascontiguousarray(scores), digest_size=16)
    digest.update(np.ascontiguousarray(flags))
    key = digest.digest()
    found = _RANKINGS.get(key)
    if found is None:
        found = _RANKINGS[key] = _ranking(scores, flags)
    return found


def _ranking(scores: np.ndarray, flags: np.ndarray) -> _Ranking:
    order = np.argsort(scores)
    sorted_scores = scores[order]
    group_ends = np.flatnonzero(np.diff(sorted_scores))  # last index of each tie group but the final one
    group_ends = np.append(group_ends, sorted_scores.shape[0] - 1)
    n_correct = np.cumsum(flags[order], dtype=np.int64)[group_ends]
    n_accepted = group_ends + 1
    arrays = (sorted_scores[group_ends], n_accepted, n_correct, n_accepted - n_correct)
    for array in arrays:
        array.flags.writeable = False  # shared by every metric of these scores
    return _Ranking(*arrays)


def _rank_both_classes(uncertainty, correct, what: str) -> _Ranking:
    """:func:`_rank`, refusing input without both correct and misclassified samples (``what`` is undefined)."""
    ranking = _rank(uncertainty, correct)
    if ranking.total_errors == 0:
        raise InputError(f"{what} is undefined: every sample is correctly classified (no errors to detect)")
    if ranking.total_correct == 0:
        raise InputError(f"{what} is undefined: every sample is misclassified (no correct samples)")
    return ranking


def _roc_points(ranking: _Ranking, positive: str, drop_intermediate: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)`` exactly as ``sklearn.metrics.roc_curve`` builds them.

    ``positive="correct"``: sklearn's ``roc_curve(correct, -uncertainty)`` with thresholds mapped back
    to the uncertainty scale (negated: accept when ``uncertainty <= t``, first threshold ``-inf``).
    ``positive="error"``: ``roc_curve(~correct, uncertainty)`` (flag when ``uncertainty >= t``, first ``+inf``).
    """
    if positive == "correct":
        tps, fps, thresholds = ranking.n_correct, ranking.n_errors, ranking.values
        start = -np.inf
    else:
        # Walking the groups from the most uncertain down: flagged = everything at or above a group.
        errors_before = np.concatenate(([0], ranking.n_errors[:-1]))
        correct_before = np.concatenate(([0], ranking.n_correct[:-1]))
        tps = (ranking.total_errors - errors_before)[::-1]
        fps = (ranking.total_correct - correct_before)[::-1]
        thresholds = ranking.values[::-1]
        start = np.inf
    if drop_intermediate and tps.shape[0] > 2:
        # sklearn's rule: keep the end points and every point where either count changes its step size.
        corners = np.logical_or(np.diff(fps, 2), np.diff(tps, 2))
        keep = np.concatenate(([True], corners, [True]))
        tps, fps, thresholds = tps[keep], fps[keep], thresholds[keep]
    tps = np.concatenate(([0.0], tps))
    fps = np.concatenate(([0.0], fps))
    thresholds = np.concatenate(([start], thresholds))
    return fps / fps[-1], tps / tps[-1], thresholds


def roc_curve(
    uncertainty, correct, *, drop_intermediate: bool = True, positive: str = "correct"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ROC curve with the correctly classified samples as positives (or, ``positive="error"``, the errors).

    Identical to ``sklearn.metrics.roc_curve(correct, -uncertainty, drop_intermediate=...)`` except
    that the thresholds are on the uncertainty scale; ``positive="error"``: identical to
    ``sklearn.metrics.roc_curve(~correct, uncertainty, drop_intermediate=...)`` (the authors' code's curve,
    flagging when ``uncertainty >= t``, thresholds decreasing from ``+inf``). Tied uncertainties share one
    threshold.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        The module's conventions; only the order of the uncertainties matters, not their scale.
    drop_intermediate : bool, default True
        Drop the points sklearn drops (collinear ones with equal steps on both sides; the area is unchanged).
    positive : {"correct", "error"}, default "correct"
        Which samples are the positives (label the curve wherever ``"error"`` is shown).

    Returns
    -------
    fpr, tpr, thresholds : ndarray
        Point i accepts the samples with ``uncertainty <= thresholds[i]`` (increasing;
        ``thresholds[0] = -inf`` accepts nothing).

    Raises
    ------
    InputError
        Unless both correct and misclassified samples are present (FPR and TPR divide by their counts).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> fpr, tpr, thresholds = rc.roc_curve(uncertainty, correct, drop_intermediate=False)
    >>> fpr.tolist(), tpr.round(3).tolist()
    ([0.0, 0.0, 0.0, 0.5, 0.5, 1.0], [0.0, 0.333, 0.667, 0.667, 1.0, 1.0])
    """
    if positive not in _POSITIVE_CONVENTIONS:
        raise InputError(f'positive must be "correct" or "error", got {positive!r}')
    return _roc_points(_rank_both_classes(uncertainty, correct, "the ROC curve"), positive, drop_intermediate)


def _auroc(ranking: _Ranking) -> float:
    # Mann-Whitney: pairs (correct, error) where the correct sample is less uncertain, ties one half.
    # Doubled so that everything stays an exact integer until the final division.
    correct_in_group = np.diff(ranking.n_correct, prepend=0)
    errors_in_group = np.diff(ranking.n_errors, prepend=0)
    correct_before = ranking.n_correct - correct_in_group
    doubled_wins = int(np.dot(errors_in_group, 2 * correct_before + correct_in_group))
    return doubled_wins / (2.0 * ranking.total_correct * ranking.total_errors)


def auroc(uncertainty, correct) -> float:
    """Area under the ROC curve.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        Only the ranking matters: any strictly increasing map of ``uncertainty`` gives the same area.

    Returns
    -------
    float
        The probability that a random correct sample gets a lower uncertainty than a random misclassified
        one, ties counting one half (``roc_auc_score(correct, -uncertainty)``). Symmetric in the two
        conventions (errors as positives scored by uncertainty gives the same value).

    Raises
    ------
    InputError
        Unless both correct and misclassified samples are present (there is no pair to compare).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> round(rc.auroc(uncertainty, correct), 4)  # 5 of the 6 (correct, error) pairs are ranked right
    0.8333
    """
    return _auroc(_rank_both_classes(uncertainty, correct, metric_info.AUROC.label))


def _first_reaching(reached: np.ndarray, total: int, target: float) -> int:
    """Index of the first group whose cumulative count / ``total`` is >= ``target`` (float division,
    compared as ``sklearn.metrics.roc_curve``'s ``tpr >= target``). ``reached[-1] == total``, so one exists."""
    return int(np.argmax(reached / total >= target))


def _fpr_at_tpr(ranking: _Ranking, tpr: float, positive: str) -> float:
    # Every distinct threshold is a candidate (never the thinned curve): on tied scores sklearn's default
    # drop_intermediate=True can skip the point where the TPR first reaches the target.
    if positive == "correct":
        g = _first_reaching(ranking.n_correct, ranking.total_correct, tpr)
        return ranking.n_errors[g] / ranking.total_errors
    # Errors as positives, flagged when uncertainty >= t: walk the groups from the most uncertain down.
    errors_from = ranking.total_errors - np.concatenate(([0], ranking.n_errors[:-1]))
    correct_from = ranking.total_correct - np.concatenate(([0], ranking.n_correct[:-1]))
    g = _first_reaching(errors_from[::-1], ranking.total_errors, tpr)
    return correct_from[::-1][g] / ranking.total_correct


def _errors_caught_point(uncertainty, ranking: _Ranking, target: float) -> OperatingPoint:
    """:func:`operating_point` of kind ``"errors"``: flag the groups from the most uncertain down until at least
    ``target`` of the errors are flagged (:func:`_fpr_at_tpr`'s walk), accept the groups below."""
    if ranking.total_errors == 0:
        raise InputError("a target share of errors caught needs misclassified samples")
    errors_from = ranking.total_errors - np.concatenate(([0], ranking.n_errors[:-1]))
    first_flagged = len(ranking.values) - 1 - _first_reaching(errors_from[::-1], ranking.total_errors, target)
    if first_flagged == 0:  # every group is flagged: nothing accepted
        n_acc = n_corr = n_err = 0
        threshold = -np.inf
    else:
        g = first_flagged - 1
        n_acc, n_corr, n_err = int(ranking.n_accepted[g]), int(ranking.n_correct[g]), int(ranking.n_errors[g])
        threshold = float(ranking.values[g])
    return OperatingPoint(
        threshold=threshold,
        accepted=_to_numpy(uncertainty).astype(np.float64, copy=False) <= threshold,
        fpr=n_err / ranking.total_errors,
        tpr=n_corr / ranking.total_correct if ranking.total_correct else 0.0,
        coverage=n_acc / ranking.size,
        risk=n_err / n_acc if n_acc else float("nan"),
    )


def fpr_at_tpr(uncertainty, correct, tpr: float = 0.95, positive: str = "correct") -> float:
    """False positive rate at the lowest threshold whose true positive rate reaches ``tpr``.

    Every distinct uncertainty is a candidate threshold, and tied samples are accepted (or flagged)
    together: the value is ``fpr[np.argmax(tpr >= 0.95)]`` on
    ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``. The authors' scripts read it off the
    default, thinned curve (``drop_intermediate=True``), which on tied scores can skip the crossing point
    and overstate the FPR. Equals ``operating_point(u, c, "tpr", tpr).fpr`` (one computation).

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        The split the FPR is read on; one threshold per distinct uncertainty.
    tpr : float, default 0.95
        The target TPR, in (0, 1].
    positive : {"correct", "error"}
        ``"correct"`` (the paper's FPR at 95 % TPR): positives are the correctly classified samples,
        accepted when ``uncertainty <= t``. ``"error"``: positives are the misclassified samples, flagged
        when ``uncertainty >= t`` (label it wherever it is shown).

    Returns
    -------
    float
        ``"correct"``: the fraction of *misclassified* samples still accepted when at least ``tpr`` of the
        correct ones are; ``"error"``: the fraction of *correct* samples flagged when at least ``tpr`` of the
        errors are caught.

    Raises
    ------
    InputError
        For a target outside (0, 1], an unknown ``positive``, or unless both kinds of samples are present.

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> rc.fpr_at_tpr(uncertainty, correct)  # all 3 correct accepted at 0.4, and 1 of the 2 errors
    0.5
    >>> rc.fpr_at_tpr(uncertainty, correct, positive="error")  # both errors flagged at 0.3, and 1 of 3 correct
    0.3333333333333333
    """
    _check_target(tpr, "tpr")
    if positive not in _POSITIVE_CONVENTIONS:
        raise InputError(f'positive must be "correct" or "error", got {positive!r}')
    ranking = _rank_both_classes(uncertainty, correct, "FPR at TPR")
    return float(_fpr_at_tpr(ranking, float(tpr), positive))


def _check_target(target: float, what: str) -> None:
    try:
        value = float(target)
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number in (0, 1], got {target!r}") from None
    if not 0.0 < value <= 1.0:
        raise InputError(f"{what} must lie in (0, 1], got {target!r}")


def _expected_errors(ranking: _Ranking) -> np.ndarray:
    """Expected number of errors among the k least uncertain samples, k = 1..N.

    A random order inside each tie group spreads its errors evenly over its positions, so the
    cumulative count is linear between group ends.
    """
    k = np.arange(1, ranking.size + 1)
    return np.interp(k, np.concatenate(([0], ranking.n_accepted)), np.concatenate(([0], ranking.n_errors)))


def risk_coverage_curve(uncertainty, correct) -> tuple[np.ndarray, np.ndarray]:
    """Selective risk against coverage, most confident (least uncertain) samples first.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        Samples are kept from the least uncertain upwards; ``correct`` says which kept ones are errors.

    Returns
    -------
    coverage, risk : ndarray, shape (N,)
        ``coverage[k-1] = k / N`` and ``risk[k-1]`` = the fraction of errors among the k least uncertain
        samples, k = 1..N. Inside a group of tied uncertainties the risk is the expectation over a
        uniformly random order (independent of the input order). Defined for any input.

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> coverage, risk = rc.risk_coverage_curve(uncertainty, correct)
    >>> coverage.tolist(), risk.round(3).tolist()
    ([0.2, 0.4, 0.6, 0.8, 1.0], [0.0, 0.0, 0.333, 0.25, 0.4])
    """
    ranking = _rank(uncertainty, correct)
    k = np.arange(1, ranking.size + 1)
    return k / ranking.size, _expected_errors(ranking) / k


def _aurc(ranking: _Ranking) -> float:
    k = np.arange(1, ranking.size + 1)
    return float(np.mean(_expected_errors(ranking) / k))


def _eaurc(ranking: _Ranking) -> float:
    k = np.arange(1, ranking.size + 1)
    optimal_errors = np.maximum(k - ranking.total_correct, 0)  # every correct sample first
    # Pointwise the expected errors are never below the optimum; the clip only absorbs interpolation rounding.
    excess = np.maximum(_expected_errors(ranking) - optimal_errors, 0.0)
    return float(np.mean(excess / k))


def aurc(uncertainty, correct) -> float:
    """Area under the risk-coverage curve (Geifman et al., 2019, with the 0/1 loss).

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        The 0/1 loss is ``~correct``; the area is over all N coverages, ties in expectation.

    Returns
    -------
    float
        The mean selective risk of :func:`risk_coverage_curve` over the coverages k/N, k = 1..N. Lower is
        better; defined even when all samples are correct (0) or all wrong (1).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> round(rc.aurc(uncertainty, correct), 4)  # mean of the risks 0, 0, 1/3, 1/4, 2/5
    0.1967
    """
    return _aurc(_rank(uncertainty, correct))


def eaurc(uncertainty, correct) -> float:
    """Excess AURC: AURC minus the AURC of the perfect ordering (every correct sample first).

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        Compared against the ordering that puts every correct sample before every error.

    Returns
    -------
    float
        >= 0; 0 exactly when every correct sample is strictly less uncertain than every error (or only
        one kind of sample is present).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> round(rc.eaurc(uncertainty, correct), 4)
    0.0667
    >>> rc.eaurc([0.1, 0.2, 0.9], [True, True, False])  # a perfect ordering
    0.0
    """
    return _eaurc(_rank(uncertainty, correct))


def generalized_risk_coverage_curve(uncertainty, correct) -> tuple[np.ndarray, np.ndarray]:
    """Generalised risk against coverage (Traub et al., NeurIPS 2024), most confident samples first.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        Samples are kept from the least uncertain upwards.

    Returns
    -------
    coverage, generalized_risk : ndarray, shape (N,)
        ``coverage[k-1] = k / N`` and ``generalized_risk[k-1]`` = the joint probability that a sample is
        accepted *and* wrong: errors among the k least uncertain samples / N (``risk * coverage`` of
        :func:`risk_coverage_curve`), ties in expectation like it. The curve starts at (0, 0).
    """
    ranking = _rank(uncertainty, correct)
    k = np.arange(1, ranking.size + 1)
    return k / ranking.size, _expected_errors(ranking) / ranking.size


def _augrc(ranking: _Ranking) -> float:
    # Trapezoids between the thresholds (group ends) and (0, 0), as FD-Shifts integrates the curve: group g adds
    # n_g/N * (E_(g-1) + E_g) / (2N), E the cumulative errors. Doubled so that the sum stays an exact integer.
    in_group = np.diff(ranking.n_accepted, prepend=0)
    errors_before = np.concatenate(([0], ranking.n_errors[:-1]))
    doubled = int(np.dot(in_group, errors_before + ranking.n_errors))
    return doubled / (2.0 * ranking.size * ranking.size)


def augrc(uncertainty, correct) -> float:
    """Area under the generalised risk-coverage curve (AUGRC; Traub et al., NeurIPS 2024, as FD-Shifts computes it).

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        One point per distinct uncertainty (tied samples accepted together), plus (0, 0).

    Returns
    -------
    float
        The trapezoidal area under :func:`generalized_risk_coverage_curve`'s points at the thresholds: the
        average over coverages of the risk of an accepted error. Lower is better; in [0, 1/2]: 0 when every
        sample is correct, ``(1 - acc)**2 / 2`` for the perfect ordering, 1/2 when every sample is wrong. With
        both kinds present it equals ``(1 - AUROC) acc (1 - acc) + (1 - acc)**2 / 2`` (ties one half in both).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> round(rc.augrc(uncertainty, correct), 4), round(rc.aurc(uncertainty, correct), 4)
    (0.12, 0.1967)
    """
    return _augrc(_rank(uncertainty, correct))


def summary(uncertainty, correct, fpr_positive: str = "correct") -> dict[str, float]:
    """The five metrics of one detector from a single sort.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        One sort serves all five metrics, so the five always describe the same ranking.
    fpr_positive : {"correct", "error"}
        The convention of ``fpr95`` (:func:`fpr_at_tpr`'s ``positive``); the paper's by default.

    Returns
    -------
    dict
        ``{"fpr95", "auroc", "aurc", "eaurc", "augrc"}``: :func:`fpr_at_tpr` at 95 % TPR, :func:`auroc`,
        :func:`aurc`, :func:`eaurc`, :func:`augrc`.

    Raises
    ------
    InputError
        Unless both correct and misclassified samples are present.
    """
    ranking = _rank_both_classes(uncertainty, correct, "FPR95 and AUROC")
    return {
        "fpr95": _fpr_at_tpr(ranking, 0.95, fpr_positive),
        "auroc": _auroc(ranking),
        "aurc": _aurc(ranking),
        "eaurc": _eaurc(ranking),
        "augrc": _augrc(ranking),
    }


# --------------------------------------------------------------------------- classifier metrics


def _validated_logits_labels(logits, labels) -> tuple[np.ndarray, np.ndarray]:
    logits, labels = _to_numpy(logits), _to_numpy(labels)
    validate_logits(logits)
    validate_labels(labels, logits.shape[0], logits.shape[1])
    return logits, labels


def accuracy(logits, labels) -> float:
    """Top-1 accuracy: the fraction of samples whose largest logit is at the label.

    Parameters
    ----------
    logits : array-like, shape (N, C)
    labels : array-like of int, shape (N,)

    Returns
    -------
    float

    Raises
    ------
    InputError
        For logits or labels :func:`relu_core.detectors.validate_logits` / ``validate_labels`` refuse.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rc.accuracy(np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]), [0, 1, 1])
    0.6666666666666666
    """
    logits, labels = _validated_logits_labels(logits, labels)
    return float(np.mean(logits.argmax(axis=1) == labels))


def confusion_matrix(predictions, labels, n_classes: int) -> np.ndarray:
    """Confusion counts.

    Parameters
    ----------
    predictions, labels : array-like of int, shape (N,)
        Class indices in [0, ``n_classes``).
    n_classes : int

    Returns
    -------
    ndarray of int64, shape (C, C)
        ``matrix[i, j]`` = samples of true class i predicted as class j.

    Raises
    ------
    InputError
        For a bad ``n_classes``, non-integer or out-of-range indices, or lengths that differ.
    """
    validation.integer(n_classes, "n_classes", minimum=1)
    predictions = _to_numpy(predictions)
    labels = _to_numpy(labels)
    for name, values in (("predictions", predictions), ("labels", labels)):
        if values.ndim != 1 or values.dtype.kind not in "iu":
            raise InputError(f"{name} must be a 1-D array of integer class indices")
        if values.size and (values.min() < 0 or values.max() >= n_classes):
            raise InputError(f"{name} must lie in [0, {n_classes - 1}]")
    if predictions.shape != labels.shape:
        raise InputError(f"predictions and labels differ in length: {predictions.shape[0]} vs {labels.shape[0]}")
    flat = labels.astype(np.int64) * n_classes + predictions.astype(np.int64)
    return np.bincount(flat, minlength=n_classes * n_classes).reshape(n_classes, n_classes)


def ece(logits, labels, n_bins: int = 15) -> float:
    """Expected calibration error of the top-1 confidence ``max softmax(logits)`` (T = 1; Guo et al., 2017).

    Parameters
    ----------
    logits : array-like, shape (N, C)
    labels : array-like of int, shape (N,)
    n_bins : int, default 15
        Equal-width bins ``(b/n, (b+1)/n]`` over [0, 1] (the first also holds 0).

    Returns
    -------
    float
        ``sum_b |B_b| / N * |accuracy(B_b) - mean confidence(B_b)|``.

    Raises
    ------
    InputError
        For a bad ``n_bins``, logits or labels.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> round(rc.ece(np.array([[2.0, 0.0], [0.0, 1.0], [1.0, 0.5]]), [0, 1, 1]), 4)
    0.3369
    """
    validation.integer(n_bins, "n_bins", minimum=1)
    logits, labels = _validated_logits_labels(logits, labels)
    probs = softmax(logits)
    confidence = probs.max(axis=1)
    hits = (probs.argmax(axis=1) == labels).astype(np.float64)
    inner_edges = np.linspace(0.0, 1.0, n_bins + 1)[1:-1]
    bins = np.searchsorted(inner_edges, confidence, side="left")  # right-closed bins
    count = np.bincount(bins, minlength=n_bins)
    gap = np.bincount(bins, weights=hits - confidence, minlength=n_bins)
    # |sum(acc - conf)| / N per bin equals |B|/N * |acc(B) - conf(B)|.
    return float(np.abs(gap).sum() / count.sum())


@dataclass(frozen=True)
class OperatingPoint:
    """A detector's decision at a threshold: accept (trust) the predictions with uncertainty <= threshold."""

    threshold: float
    accepted: np.ndarray  # bool per evaluation sample
    fpr: float
    tpr: float
    coverage: float
    risk: float

    def counts(self, correct: np.ndarray) -> dict[str, int]:
        """Accepted, rejected, errors caught (rejected errors), errors missed, correct predictions rejected."""
        errors = ~correct
        return {
            "accepted": int(self.accepted.sum()),
            "rejected": int((~self.accepted).sum()),
            "errors caught": int((errors & ~self.accepted).sum()),
            "errors missed": int((errors & self.accepted).sum()),
            "correct rejected": int((correct & ~self.accepted).sum()),
        }


def operating_point(uncertainty, correct, kind: str, target: float) -> OperatingPoint:
    """The lowest threshold reaching a target TPR or coverage.

    The threshold is looked up over every distinct uncertainty by the same computation as
    :func:`fpr_at_tpr`, so with ``kind="tpr"`` its ``fpr`` equals ``fpr_at_tpr(uncertainty, correct,
    target)``. Ties at the threshold are all accepted, so the reached TPR / coverage can exceed the target.

    Parameters
    ----------
    uncertainty, correct : array-like, shape (N,)
        The scores and correctness of the split the operating point is read on (the evaluation split).
    kind : {"tpr", "coverage", "errors"}
        ``"tpr"``: the fraction of correct predictions accepted; ``"coverage"``: of all predictions;
        ``"errors"``: the fraction of *errors rejected* (the errors-positive operating point: the highest
        threshold still rejecting at least ``target`` of the errors, tied samples rejected together, so its
        ``1 - tpr`` equals ``fpr_at_tpr(uncertainty, correct, target, positive="error")``; when even the least
        uncertain group must be rejected nothing is accepted: threshold -inf, risk NaN).
    target : float
        In (0, 1].

    Returns
    -------
    OperatingPoint
        Threshold, accepted mask, FPR, TPR, coverage and risk there; FPR (TPR) is 0 when there are no
        errors (no correct samples).

    Raises
    ------
    InputError
        For an unknown kind, a target outside (0, 1], or a TPR target without correct samples.

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> correct = [True, True, False, True, False]
    >>> point = rc.operating_point(uncertainty, correct, "tpr", 0.95)
    >>> point.threshold, point.fpr, point.coverage, point.accepted.tolist()
    (0.4, 0.5, 0.8, [True, True, True, True, False])
    """
    if kind not in ("tpr", "coverage", "errors"):
        raise InputError(f"unknown operating point kind {kind!r}: choose 'tpr', 'coverage' or 'errors'")
    _check_target(target, "the target")
    ranking = _rank(uncertainty, correct)
    if kind == "errors":
        return _errors_caught_point(uncertainty, ranking, float(target))
    if kind == "tpr":
        if ranking.total_correct == 0:
            raise InputError("a TPR target needs correctly classified samples")
        g = _first_reaching(ranking.n_correct, ranking.total_correct, float(target))
    else:
        g = _first_reaching(ranking.n_accepted, ranking.size, float(target))
    n_acc, n_corr, n_err = int(ranking.n_accepted[g]), int(ranking.n_correct[g]), int(ranking.n_errors[g])
    threshold = float(ranking.values[g])
    return OperatingPoint(
        threshold=threshold,
        accepted=_to_numpy(uncertainty).astype(np.float64, copy=False) <= threshold,
        fpr=n_err / ranking.total_errors if ranking.total_errors else 0.0,
        tpr=n_corr / ranking.total_correct if ranking.total_correct else 0.0,
        coverage=n_acc / ranking.size,
        risk=n_err / n_acc,
    )
