"""Paired statistics: is detector A (Rel-U) better than detector B (Doctor) on the same samples?

:func:`paired_bootstrap` answers it for FPR at 95 % TPR, AUROC, AURC and AUGRC with a percentile bootstrap
interval of the difference ``metric(A) - metric(B)``. The resampling is *paired*: every resample draws
evaluation samples with replacement (seeded) and scores both detectors on that same resample, so the
interval reflects how much the difference itself varies, not each metric on its own.

Conventions are those of :mod:`relu_core.metrics`: positives are the correctly classified samples, a
detector accepts a sample when its uncertainty is low, FPR95 is read over every distinct threshold, ties
count one half in AUROC, and AURC takes the expected risk inside a tie group. A resampled sample that is
drawn several times is a group of tied copies. Resamples that hold no error or no correct sample leave
the ROC metrics undefined and are skipped (``n_resamples`` of each result counts the ones used).

Speed: each detector is sorted once; a resample is a vector of draw counts in that order, so the
metrics of a block of resamples are cumulative sums over a (resamples x samples) integer matrix.
Nothing loops over samples or resamples in Python beyond blocks of :data:`BLOCK` resamples.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from relu_core import metric_info, validation
from relu_core import metrics as _metrics
from relu_core.errors import Cancelled, InputError

DEFAULT_RESAMPLES = 1000
#: How an interval is labelled when the compared detectors' settings were selected on the data (``--select``, the
#: objectives table, the corruption study): the bootstrap resamples the evaluation samples for the *selected*
#: settings only; the selection's own variability is not resampled, so as an answer to "does Rel-U with its
#: selection beat Doctor with its selection" the interval is too narrow (docs/explanation/protocol.md).
CONDITIONAL_LABEL = "conditional on the selected settings"
#: How an interval is labelled when a detector fitted on the tuning part (Rel-U's D*) was kept fixed while the
#: evaluation samples were resampled: it leaves out how much the fit itself varies, so it is too narrow as an answer
#: about the detector fitted anew on other samples (``relu_core.run_comparison`` refits D* in each resample where that is
#: affordable, and says this where it is not).
FITTED_LABEL = "conditional on the fitted D*"
#: Resamples processed together (arrays of BLOCK x N stay in the CPU cache up to N of about 10^4).
BLOCK = 16


@dataclass(frozen=True)
class PairedDifference:
    """``metric(A) - metric(B)`` on one evaluation split, with its paired bootstrap interval.

    ``estimate`` is the difference on the samples themselves; ``low``/``high`` bound the central
    ``confidence`` share of the bootstrap differences (percentile method); ``n_resamples`` is the number
    of resamples used (those where the metric is defined). ``conditional``: the detectors' settings were selected
    on the data and the interval holds for those settings only (:data:`CONDITIONAL_LABEL`, in every text).
    """

    metric: str
    estimate: float
    low: float
    high: float
    higher_is_better: bool
    n_resamples: int
    confidence: float = 0.95
    conditional: bool = False
    #: What the interval is conditional on when ``conditional`` (:data:`CONDITIONAL_LABEL` or :data:`FITTED_LABEL`).
    condition: str = CONDITIONAL_LABEL

    @property
    def significant(self) -> bool:
        """True when the interval excludes 0."""
        return self.low > 0.0 or self.high < 0.0

    def a_is_better(self) -> bool:
        """Whether the estimate favours A (lower FPR95/AURC, higher AUROC)."""
        return self.estimate > 0 if self.higher_is_better else self.estimate < 0

    def interval_text(self) -> str:
        return (
            f"{100 * self.confidence:g} % CI {metric_info.signed(self.low)} to {metric_info.signed(self.high)}"
            f"{self._condition()}"
        )

    def _condition(self) -> str:
        return f", {self.condition}" if self.conditional else ""

    def outcome(self, a: str = "Rel-U", b: str = "Doctor") -> str:
        """The verdict without its numbers: "no significant difference" or "A better" / "B better"."""
        if not self.significant:
            return "no significant difference"
        return f"{a if self.a_is_better() else b} better"

    def verdict(self, a: str = "Rel-U", b: str = "Doctor") -> str:
        """One line: "no significant difference" with the difference A − B and its interval, or who is better
        and by how much, with the interval of that margin (both positive, in the metric's unit: one sign
        convention per sentence)."""
        label = metric_info.BY_KEY[self.metric].label if self.metric in metric_info.BY_KEY else self.metric
        if not self.significant:
            return f"{label}: {self.outcome(a, b)} ({a} − {b} = {metric_info.signed(self.estimate)}, {self.interval_text()})"
        winner, loser = (a, b) if self.a_is_better() else (b, a)
        # the winner's margin is |A − B|; its interval is the difference's, mirrored when it is negative
        low, high = sorted((abs(self.low), abs(self.high)))
        return (
            f"{label}: {winner} better than {loser} by {abs(self.estimate):.4f} "
            f"({100 * self.confidence:g} % CI {low:.4f} to {high:.4f}{self._condition()})"
        )


def conditional_on_selection(paired: Mapping[str, PairedDifference]) -> dict[str, PairedDifference]:
    """``paired`` labelled :data:`CONDITIONAL_LABEL`: what every result whose settings were selected states."""
    return {k: dataclasses.replace(d, conditional=True) for k, d in paired.items()}


def _check_inputs(uncertainty_a, uncertainty_b, correct) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(a, flags_a, b, flags_b)``; ``correct`` is one (N,) bool array, or a pair of them when A and B judge
    two classifiers' predictions on the same samples (two runs of one data set)."""
    correct_a, correct_b = correct if isinstance(correct, tuple) else (correct, correct)
    a, flags_a = _metrics._validate_scores(uncertainty_a, correct_a)
    b, flags_b = _metrics._validate_scores(uncertainty_b, correct_b)
    if a.shape != b.shape:
        raise InputError("the two detectors must score the same samples")
    for flags in (flags_a, flags_b):
        if flags.all() or not flags.any():
            raise InputError("a paired comparison needs correctly and wrongly classified samples")
    return a, flags_a, b, flags_b


def _check_options(metric_keys: Sequence[str], n_resamples: int, confidence: float) -> tuple[str, ...]:
    keys = tuple(metric_keys)
    unknown = [k for k in keys if k not in metric_info.PAIRED_KEYS]
    if unknown or not keys:
        raise InputError(f"unknown metric(s) {unknown}: choose from {', '.join(metric_info.PAIRED_KEYS)}")
    validation.integer(n_resamples, "n_resamples", minimum=1, maximum=100_000)
    validation.fraction(confidence, "confidence")
    return keys


def _check_positive(fpr_positive: str) -> None:
    if fpr_positive not in ("correct", "error"):
        raise InputError(f'fpr_positive must be "correct" or "error", got {fpr_positive!r}')


def _undefined_roc(out: dict[str, np.ndarray], total_correct: np.ndarray, total_errors: np.ndarray) -> None:
    """NaN for FPR95 in the resamples without a correct or without a wrong sample (AUROC is NaN there already:
    0 / 0), so that they are skipped like the module says."""
    if "fpr95" in out:
        out["fpr95"][(total_correct == 0) | (total_errors == 0)] = np.nan


class _SortedDetector:
    """One detector's ordering: the permutation by increasing uncertainty and its tie-group starts."""

    def __init__(self, uncertainty: np.ndarray, correct: np.ndarray) -> None:
        self.order = np.argsort(uncertainty, kind="stable")
        ranked = uncertainty[self.order]
        self.starts = np.flatnonzero(np.concatenate(([True], ranked[1:] != ranked[:-1])))
        ranked_correct = correct[self.order]
        self.correct = ranked_correct.astype(np.int32)
        self.tied = self.starts.size < ranked.size
        # Untied scores: a sample is its own group, so correct and wrong samples can be summed apart and
        # interleaved by static indices (see _untied_metrics).
        self.order_correct = self.order[ranked_correct]
        self.order_errors = self.order[~ranked_correct]
        #: per error sample (rank order), how many correct samples rank before it; and vice versa.
        self.correct_before_error = np.cumsum(ranked_correct)[~ranked_correct]
        self.errors_before_correct = np.cumsum(~ranked_correct)[ranked_correct]

    def _untied_metrics(
        self, counts: np.ndarray, keys: tuple[str, ...], harmonic: np.ndarray, tail: np.ndarray, fpr_positive: str
    ) -> dict[str, np.ndarray]:
        """The metrics when no two samples tie: every group is one sample drawn d >= 0 times, wholly
        correct or wholly wrong, so only cumulative counts over the correct rows and over the error rows
        are needed (about four passes over the draws instead of twenty)."""
        drawn_correct = counts[self.order_correct]
        drawn_errors = counts[self.order_errors]
        n_correct = np.cumsum(drawn_correct, axis=0, dtype=np.int32)  # over correct samples, rank order
        n_errors = np.cumsum(drawn_errors, axis=0, dtype=np.int32)
        total_correct = n_correct[-1].astype(np.float64)
        total_errors = n_errors[-1].astype(np.float64)
        columns = np.arange(counts.shape[1])

        def before(cumulative: np.ndarray, k: np.ndarray) -> np.ndarray:
            """Rows ``cumulative[k - 1]`` with 0 where k = 0 (nothing before)."""
            picked = cumulative[np.maximum(k - 1, 0)]
            picked[k == 0] = 0
            return picked

        correct_at_errors = before(n_correct, self.correct_before_error)  # correct draws ranked before each error
        out: dict[str, np.ndarray] = {}
        with np.errstate(divide="ignore", invalid="ignore"):
            if "auroc" in keys:
                doubled = 2.0 * np.einsum("gr,gr->r", drawn_errors, correct_at_errors, dtype=np.float64)
                out["auroc"] = doubled / (2.0 * total_correct * total_errors)
            if "fpr95" in keys and fpr_positive == "correct":
                first = np.minimum(np.count_nonzero(n_correct < 0.95 * total_correct, axis=0), len(n_correct) - 1)
                errors_before = np.where(
                    self.errors_before_correct[first] > 0,
                    n_errors[np.maximum(self.errors_before_correct[first] - 1, 0), columns],
                    0,
                )
                out["fpr95"] = errors_before / total_errors
            elif "fpr95" in keys:
                flagged_errors = total_errors - (n_errors - drawn_errors)
                last = np.maximum(np.count_nonzero(flagged_errors >= 0.95 * total_errors, axis=0) - 1, 0)
                out["fpr95"] = (total_correct - correct_at_errors[last, columns]) / total_correct
            if "aurc" in keys:
                # AURC N = sum over error draws at positions p of (H_N - H_(p-1)) = E H_N - sum (S_end - S_start),
                # S_m = H_0 + ... + H_(m-1): the copies of one error sample sit at positions start+1..end.
                end = correct_at_errors + n_errors
                sums = tail[end] - tail[end - drawn_errors]
                drawn_total = n_correct[-1] + n_errors[-1]  # the resample's size (not always N: see _draw)
                out["aurc"] = (total_errors * harmonic[drawn_total] - sums.sum(axis=0)) / drawn_total
            if "augrc" in keys:
                # AUGRC N² = sum over groups of n_g (E_before + e_g / 2): every draw after an error sample's
                # copies counts them once, and its own copies half each (see metrics._augrc).
                size = (n_correct[-1] + n_errors[-1]).astype(np.float64)
                end = correct_at_errors + n_errors
                later = np.einsum("gr,gr->r", drawn_errors, size - end, dtype=np.float64)
                own = 0.5 * np.einsum("gr,gr->r", drawn_errors, drawn_errors, dtype=np.float64)
                out["augrc"] = (later + own) / (size * size)
        _undefined_roc(out, total_correct, total_errors)
        return out

    def metrics(
        self, counts: np.ndarray, keys: tuple[str, ...], harmonic: np.ndarray, tail: np.ndarray, fpr_positive: str
    ) -> dict[str, np.ndarray]:
        """Each metric for every column of ``counts`` (samples x resamples, int32 draw counts, input order).

        Samples run down the rows, so cumulative sums add whole contiguous rows; blocks are small enough
        to stay in the CPU cache. Counts and cumulative counts are exact integers.
        """
        if not self.tied:
            return self._untied_metrics(counts, keys, harmonic, tail, fpr_positive)
        drawn = counts[self.order]
        correct_drawn = drawn * self.correct[:, None]
        if self.tied:
            drawn = np.add.reduceat(drawn, self.starts, axis=0)
            correct_drawn = np.add.reduceat(correct_drawn, self.starts, axis=0)
        errors_drawn = drawn - correct_drawn
        n_correct = np.cumsum(correct_drawn, axis=0, dtype=np.int32)
        n_errors = np.cumsum(errors_drawn, axis=0, dtype=np.int32)
        total_correct = n_correct[-1].astype(np.float64)
        total_errors = n_errors[-1].astype(np.float64)
        columns = np.arange(counts.shape[1])
        with np.errstate(divide="ignore", invalid="ignore"):
            out: dict[str, np.ndarray] = {}
            if "auroc" in keys:
                # Mann-Whitney over groups: errors x (correct before + half the group's correct), doubled:
                # e_g (2 C_before + c_g) = e_g (2 C_g - c_g).
                doubled = np.einsum("gr,gr->r", errors_drawn, 2 * n_correct - correct_drawn, dtype=np.float64)
                out["auroc"] = doubled / (2.0 * total_correct * total_errors)
            if "fpr95" in keys and fpr_positive == "correct":
                # n_correct never decreases down a column: the first group reaching 95 % is the count below it.
                first = np.count_nonzero(n_correct < 0.95 * total_correct, axis=0)
                out["fpr95"] = n_errors[np.minimum(first, n_correct.shape[0] - 1), columns] / total_errors
            elif "fpr95" in keys:
                # Errors as positives, flagged when u >= t: flagged counts never increase down a column, so the
                # last group still flagging 95 % of the errors is one before the count of those that do.
                flagged_errors = total_errors - (n_errors - errors_drawn)
                last = np.count_nonzero(flagged_errors >= 0.95 * total_errors, axis=0) - 1
                flagged_correct = total_correct - (n_correct - correct_drawn)
                out["fpr95"] = flagged_correct[np.maximum(last, 0), columns] / total_correct
            if "aurc" in keys:
                # AURC = (1/N) sum_k E(k)/k with E linear inside a group at positions (a, b]:
                # sum_{k=a+1..b} E(k)/k = E_a (H_b - H_a) + e_g/n_g ((b - a) - a (H_b - H_a)).
                end = n_correct + n_errors
                start = end - drawn
                span = harmonic[end] - harmonic[start]
                slope = errors_drawn / np.maximum(drawn, 1)  # 0 for groups not drawn (e_g = 0)
                total = np.einsum("gr,gr->r", n_errors - errors_drawn, span)
                total += np.einsum("gr,gr->r", slope, drawn - start * span)
                out["aurc"] = total / end[-1]
            if "augrc" in keys:
                # AUGRC N² = sum over groups of n_g (E_g - e_g / 2), the trapezoids of metrics._augrc.
                size = (n_correct[-1] + n_errors[-1]).astype(np.float64)
                doubled = np.einsum("gr,gr->r", drawn, 2 * n_errors - errors_drawn, dtype=np.float64)
                out["augrc"] = doubled / (2.0 * size * size)
        _undefined_roc(out, total_correct, total_errors)
        return out


def bootstrap_differences(
    uncertainty_a,
    uncertainty_b,
    correct,
    *,
    metrics: Sequence[str] = metric_info.PAIRED_KEYS,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    fpr_positive: str = "correct",
) -> dict[str, np.ndarray]:
    """``metric(A) - metric(B)`` on each of ``n_resamples`` paired resamples (NaN where undefined).

    Resample r draws N indices uniformly with replacement from a ``numpy.random.default_rng(seed)``
    stream (blocks of :data:`BLOCK` resamples, so the draws do not depend on anything but the seed, N and
    the count). Both detectors are scored on the same draws. ``fpr_positive`` is the FPR95 convention of
    :func:`metrics.fpr_at_tpr`.
    """
    _check_positive(fpr_positive)
    keys = _check_options(metrics, n_resamples, 0.95)
    checked = _check_inputs(uncertainty_a, uncertainty_b, correct)
    n = checked[0].shape[0]
    (out,) = _draw([checked], [np.arange(n)], n, keys, n_resamples, seed, fpr_positive)
    return out


def _harmonic_tables(size: int) -> tuple[np.ndarray, np.ndarray]:
    """``H_0 .. H_size`` (harmonic numbers) and ``S_m = H_0 + ... + H_(m-1)``, m = 0 .. size: what AURC reads."""
    harmonic = np.concatenate(([0.0], np.cumsum(1.0 / np.arange(1, size + 1))))
    return harmonic, np.concatenate(([0.0], np.cumsum(harmonic[:-1])))


def count_blocks(population: int, n_resamples: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The bootstrap's draws, block by block: ``(first, counts)`` where ``counts[i, r]`` (population x rows, int32)
    is how often resample ``first + r`` drew member i. Resample r draws ``population`` members uniformly with
    replacement; blocks of :data:`BLOCK` resamples come from one ``default_rng(seed)`` stream, so the draws depend
    on nothing but the seed, the population and the count (samples run down the rows, see :class:`_SortedDetector`)."""
    rng = np.random.default_rng(seed)
    for first in range(0, n_resamples, BLOCK):
        rows = min(BLOCK, n_resamples - first)
        draws = rng.integers(0, population, size=(rows, population))
        flat = (draws * rows + np.arange(rows)[:, None]).ravel()
        yield first, np.bincount(flat, minlength=population * rows).astype(np.int32).reshape(population, rows)


def _draw(
    pairs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
    positions: Sequence[np.ndarray],
    population: int,
    keys: tuple[str, ...],
    n_resamples: int,
    seed: int,
    fpr_positive: str,
) -> list[dict[str, np.ndarray]]:
    """``metric(A) - metric(B)`` per pair ``(a, flags_a, b, flags_b)`` and resample, every pair scored on the same
    draws of a population.

    Resample r draws ``population`` indices uniformly with replacement (blocks of :data:`BLOCK` resamples from
    one ``default_rng(seed)`` stream); pair s's samples are the population members ``positions[s]``, each
    counted as often as it was drawn, so a pair's resample size varies unless it is the whole population."""
    harmonic, tail = _harmonic_tables(population)
    detectors = [(_SortedDetector(a, flags_a), _SortedDetector(b, flags_b)) for a, flags_a, b, flags_b in pairs]
    out = [{k: np.empty(n_resamples) for k in keys} for _ in pairs]
    for first, counts in count_blocks(population, n_resamples, seed):
        rows = counts.shape[1]
        for (detector_a, detector_b), where, values in zip(detectors, positions, out, strict=True):
            drawn = counts[where]
            values_a = detector_a.metrics(drawn, keys, harmonic, tail, fpr_positive)
            values_b = detector_b.metrics(drawn, keys, harmonic, tail, fpr_positive)
            for k in keys:
                values[k][first : first + rows] = values_a[k] - values_b[k]
    return out


def paired_bootstrap(uncertainty_a, uncertainty_b, correct, **options) -> dict[str, PairedDifference]:
    """Paired bootstrap comparison of two detectors' uncertainties on the same evaluation samples:
    :func:`pooled_bootstrap` of this one split, whose signature holds the options and their defaults.

    Parameters
    ----------
    uncertainty_a, uncertainty_b : (N,) float
        Uncertainties of detector A (e.g. Rel-U) and B (e.g. Doctor); higher = more likely misclassified.
    correct : (N,) bool, or a pair ``(correct_a, correct_b)`` of them
        Whether each prediction was right (the positives). Both kinds must be present. A pair when A and B
        judge two classifiers' predictions on the same samples (two runs of one data set: ``relu_core.run_comparison``);
        each detector's metrics then use its own classifier's correctness.

    Other Parameters
    ----------------
    metrics : subset of ``("fpr95", "auroc", "aurc", "augrc")``, keyword
        All four by default.
    n_resamples : int, keyword
        Paired resamples (the issue's minimum is 1,000, the default).
    seed : int, keyword
        Seed of the resampling stream (same seed, same interval; 0 by default).
    confidence : float, keyword
        Coverage of the percentile interval (0.95 by default).
    fpr_positive : {"correct", "error"}, keyword
        FPR95 convention (:func:`metrics.fpr_at_tpr`); the paper's (correct samples positive) by default.

    Returns
    -------
    dict
        ``{metric: PairedDifference}`` with the difference A - B on the samples and its interval.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rng = np.random.default_rng(0)
    >>> correct = rng.random(500) < 0.8
    >>> doctor = rng.normal(size=500) - correct         # errors somewhat more uncertain
    >>> relu = doctor - 0.5 * correct                   # a sharper ranking of the same samples
    >>> paired = rc.paired_bootstrap(relu, doctor, correct, n_resamples=300, seed=0)
    >>> auroc = paired["auroc"]
    >>> auroc.n_resamples, auroc.significant, auroc.low < auroc.estimate < auroc.high
    (300, True, True)
    >>> auroc.outcome()
    'Rel-U better'
    """
    return pooled_bootstrap([(uncertainty_a, uncertainty_b, correct)], **options)


@dataclass(frozen=True)
class RateInterval:
    """A rate on the samples (``estimate``) with its percentile bootstrap interval (``low``, ``high``) over the
    ``n_resamples`` resamples where it is defined."""

    estimate: float
    low: float
    high: float
    n_resamples: int
    confidence: float = 0.95


def acceptance_rates(
    accepted, correct, *, n_resamples: int = DEFAULT_RESAMPLES, seed: int = 0, confidence: float = 0.95
) -> dict[str, RateInterval]:
    """TPR (correct predictions accepted), FPR (errors accepted), coverage and risk (errors among the accepted)
    of fixed accept decisions, each with its percentile bootstrap interval.

    A resample of the N samples with replacement only changes how many fall in each of the four cells
    (accepted or not x correct or not), so its cell counts are drawn at once as ``multinomial(N, cell shares)``
    (seeded); a rate is skipped in the resamples where its denominator is 0 (NaN where it always is).
    """
    accepted = np.asarray(accepted, dtype=bool)
    correct = np.asarray(correct, dtype=bool)
    if accepted.ndim != 1 or accepted.shape != correct.shape or accepted.size == 0:
        raise InputError("accepted and correct must be non-empty 1-D arrays of the same length")
    validation.integer(n_resamples, "n_resamples", minimum=0, maximum=100_000)  # 0: no intervals (NaN)
    validation.fraction(confidence, "confidence")
    cells = np.array(
        [
            np.sum(accepted & correct),
            np.sum(~accepted & correct),
            np.sum(accepted & ~correct),
            np.sum(~accepted & ~correct),
        ]
    )
    drawn = np.random.default_rng(seed).multinomial(cells.sum(), cells / cells.sum(), size=n_resamples)
    counts = np.vstack([cells, drawn]).astype(np.float64)  # row 0: the samples themselves
    tp, fn, fp, tn = counts.T
    with np.errstate(invalid="ignore", divide="ignore"):
        rates = {
            "tpr": tp / (tp + fn),
            "fpr": fp / (fp + tn),
            "coverage": (tp + fp) / counts.sum(1),
            "risk": fp / (tp + fp),
        }
    tail = 100 * (1 - confidence) / 2
    out = {}
    for name, values in rates.items():
        defined = values[1:][np.isfinite(values[1:])]
        low, high = np.percentile(defined, [tail, 100 - tail]) if defined.size else (np.nan, np.nan)
        out[name] = RateInterval(float(values[0]), float(low), float(high), int(defined.size), confidence)
    return out


def pooled_bootstrap(
    pairs: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray]],
    *,
    sample_ids: Sequence[np.ndarray] | None = None,
    metrics: Sequence[str] = metric_info.PAIRED_KEYS,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    fpr_positive: str = "correct",
) -> dict[str, PairedDifference]:
    """The interval of the *mean over seeds* of ``metric(A) - metric(B)``.

    ``pairs`` holds one ``(uncertainty_a, uncertainty_b, correct)`` per seed (each seed's evaluation
    split; ``correct`` as in :func:`paired_bootstrap`); ``sample_ids`` names each split's samples (e.g. image indices in the data set), one array per
    pair. Seeds' evaluation splits share most of their samples, so the resampled unit is the sample: resample r
    draws the union of the splits with replacement once, every seed's split keeps the drawn samples it holds
    (paired: both detectors score the same draws), and the seeds' differences are averaged. The percentile
    interval of those averages is returned; ``estimate`` is the mean of the seeds' differences on the samples
    themselves. Without ``sample_ids`` the splits are taken to share no sample: split s is resampled on its
    own, with stream ``seed + s`` (too narrow an interval when they do overlap). With one seed it equals
    :func:`paired_bootstrap` (with ``sample_ids``: when they are in increasing order, as split indices are).
    """
    _check_positive(fpr_positive)
    keys = _check_options(metrics, n_resamples, confidence)
    if not pairs:
        raise InputError("no evaluation splits to compare")
    checked = [_check_inputs(a, b, flags) for a, b, flags in pairs]
    sizes = [pair[0].shape[0] for pair in checked]
    if sample_ids is None:
        draws = [
            _draw([pair], [np.arange(n)], n, keys, n_resamples, seed + s, fpr_positive)[0]
            for s, (pair, n) in enumerate(zip(checked, sizes, strict=True))
        ]
    else:
        ids = [np.asarray(i) for i in sample_ids]
        if len(ids) != len(checked) or any(i.shape != (n,) for i, n in zip(ids, sizes, strict=False)):
            raise InputError("sample_ids needs one array per pair, as long as that pair's scores")
        if any(np.unique(i).size != i.size for i in ids):
            raise InputError("sample_ids repeats a sample within one split")
        members, where = np.unique(np.concatenate(ids), return_inverse=True)
        positions = np.split(where.ravel(), np.cumsum(sizes)[:-1])
        draws = _draw(checked, positions, members.size, keys, n_resamples, seed, fpr_positive)
    sums = {k: sum(d[k] for d in draws) for k in keys}
    estimates = {k: 0.0 for k in keys}
    for a, flags_a, b, flags_b in checked:
        point_a, point_b = _metrics.summary(a, flags_a, fpr_positive), _metrics.summary(b, flags_b, fpr_positive)
        for k in keys:
            estimates[k] += point_a[k] - point_b[k]
    return {
        k: percentile_difference(k, estimates[k] / len(pairs), sums[k] / len(pairs), confidence=confidence)
        for k in keys
    }


def refitted_paired(
    refit_scores: Callable[[np.ndarray], np.ndarray],
    uncertainty_b,
    correct,
    tune_idx: np.ndarray,
    eval_idx: np.ndarray,
    estimates: Mapping[str, float],
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    cancel: Callable[[], bool] | None = None,
    fpr_positive: str = "correct",
) -> dict[str, PairedDifference]:
    """A − B with A refitted in every resample: the paired bootstrap of a detector fitted on the tuning part (Rel-U's
    D*) against one that fits nothing (Doctor), without holding A's fit fixed.

    Each resample draws every sample of the split with replacement (:func:`count_blocks` over the tuning and the
    evaluation part together, seeded with ``seed``); ``refit_scores(weights)`` fits A on the tuning samples drawn
    (``weights``: rows x len(tune_idx) draw counts, one row per resample) and returns its scores of the evaluation
    samples (rows x len(eval_idx)); A's metrics count the evaluation samples drawn (:func:`rescored_metrics`), B's
    fixed ``uncertainty_b`` (of the evaluation samples) is read on the same draws (:func:`resampled_metrics`). The
    interval then includes how much A's fit varies with its tuning samples, which a bootstrap of the evaluation
    samples alone leaves out (:data:`FITTED_LABEL`). ``correct`` is every sample's correctness (indexed by
    ``tune_idx`` and ``eval_idx``); ``estimates`` maps each metric key to A − B on the samples themselves;
    ``fpr_positive`` is the FPR95 convention (:func:`metrics.fpr_at_tpr`).
    """
    _check_positive(fpr_positive)
    keys = _check_options(tuple(estimates), n_resamples, confidence)
    correct = np.asarray(correct, dtype=bool)
    tune_idx, eval_idx = np.asarray(tune_idx), np.asarray(eval_idx)
    b = np.asarray(uncertainty_b, dtype=np.float64)
    flags = correct[eval_idx]
    together = np.r_[tune_idx, eval_idx]
    differences = {m: np.empty(n_resamples) for m in keys}
    for first, counts in count_blocks(together.size, n_resamples, seed):
        if cancel is not None and cancel():
            raise Cancelled("the paired bootstrap was cancelled")
        weights, drawn = counts[: tune_idx.size].T, counts[tune_idx.size :]
        refitted = rescored_metrics(refit_scores(weights), flags, drawn, metrics=keys, fpr_positive=fpr_positive)
        fixed = resampled_metrics(b, flags, drawn, metrics=keys, fpr_positive=fpr_positive)
        for m in keys:
            differences[m][first : first + counts.shape[1]] = refitted[m] - fixed[m]
    return {m: percentile_difference(m, float(estimates[m]), differences[m], confidence=confidence) for m in keys}


def percentile_difference(
    metric: str, estimate: float, resampled, *, confidence: float = 0.95, **labels
) -> PairedDifference:
    """The :class:`PairedDifference` of ``metric`` with the difference ``estimate`` on the samples and the
    percentile interval of the ``resampled`` differences (one per resample; NaN ones, where the metric is undefined,
    skipped); ``labels``: ``conditional``, ``condition``."""
    resampled = np.asarray(resampled, dtype=np.float64)
    valid = resampled[np.isfinite(resampled)]
    if valid.size == 0:
        raise InputError("no bootstrap resample held both correct and misclassified samples")
    tail = (1.0 - float(confidence)) / 2.0
    low, high = np.quantile(valid, [tail, 1.0 - tail])
    return PairedDifference(
        metric,
        float(estimate),
        float(low),
        float(high),
        metric_info.BY_KEY[metric].higher_is_better,
        int(valid.size),
        float(confidence),
        **labels,
    )


def resampled_metrics(
    uncertainty,
    correct,
    counts: np.ndarray,
    *,
    metrics: Sequence[str] = metric_info.PAIRED_KEYS,
    fpr_positive: str = "correct",
) -> dict[str, np.ndarray]:
    """Each metric of one detector's ``uncertainty`` (N,) on every resample of ``counts`` (N x rows int draw counts,
    :func:`count_blocks`' layout restricted to these samples): the metrics of the resampled samples, a sample drawn
    d times counting as d tied copies (NaN where a resample holds no correct or no wrong sample)."""
    _check_positive(fpr_positive)
    keys = _check_options(metrics, 1, 0.95)
    scores, flags = _metrics._validate_scores(uncertainty, correct)
    counts = _checked_counts(counts, scores.shape[0])
    harmonic, tail = _harmonic_tables(int(counts.sum(axis=0).max(initial=0)))
    return _SortedDetector(scores, flags).metrics(counts, keys, harmonic, tail, fpr_positive)


def _checked_counts(counts, n: int) -> np.ndarray:
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[0] != n or counts.dtype.kind not in "iu" or (counts < 0).any():
        raise InputError(f"counts must be non-negative integer draw counts of shape ({n}, resamples)")
    return counts.astype(np.int32, copy=False)


def rescored_metrics(
    uncertainty: np.ndarray,
    correct,
    counts: np.ndarray,
    *,
    metrics: Sequence[str] = metric_info.PAIRED_KEYS,
    fpr_positive: str = "correct",
) -> dict[str, np.ndarray]:
    """:func:`resampled_metrics` when the scores change with the resample: ``uncertainty`` (rows x N) holds resample
    r's score of every sample in row r (a detector refitted on that resample's tuning samples), ``counts`` (N x rows)
    its draws. Each row is sorted on its own; tied scores (equal within a row, copies of one sample included) are one
    group, as :mod:`relu_core.metrics` treats ties. Vectorised over the rows: one sort per row, then cumulative sums.
    """
    _check_positive(fpr_positive)
    keys = _check_options(metrics, 1, 0.95)
    scores = np.asarray(uncertainty, dtype=np.float64)
    flags = np.asarray(correct, dtype=bool)
    if scores.ndim != 2 or flags.shape != (scores.shape[1],) or not np.isfinite(scores).all():
        raise InputError("uncertainty must be finite scores of shape (resamples, N), correct (N,)")
    counts = _checked_counts(counts, flags.size)
    if counts.shape[1] != scores.shape[0]:
        raise InputError("counts needs one column per row of uncertainty")
    rows, n = scores.shape
    order = np.argsort(scores, axis=1)  # not stable: tied scores are one group, their order inside it never counts
    ranked = np.take_along_axis(scores, order, axis=1)
    drawn = np.take_along_axis(counts.T, order, axis=1).astype(np.int64)
    correct_drawn = drawn * flags[order]
    errors_drawn = drawn - correct_drawn
    n_correct, n_errors = np.cumsum(correct_drawn, axis=1), np.cumsum(errors_drawn, axis=1)
    total_correct = n_correct[:, -1].astype(np.float64)
    total_errors = n_errors[:, -1].astype(np.float64)
    size = n_correct[:, -1] + n_errors[:, -1]
    # tie groups: a group starts where the sorted score changes and ends before the next start; every group-level
    # quantity is read at its last position (``ends``), the cumulative counts before it at the position before its start
    changes = ranked[:, 1:] != ranked[:, :-1]
    edge = np.ones((rows, 1), dtype=bool)
    starts, ends = np.hstack([edge, changes]), np.hstack([changes, edge])
    start_at = np.maximum.accumulate(np.where(starts, np.arange(n), 0), axis=1)

    def before(cumulative: np.ndarray) -> np.ndarray:
        """The cumulative count just before each position's group (0 for the first group)."""
        picked = np.take_along_axis(cumulative, np.maximum(start_at - 1, 0), axis=1)
        picked[start_at == 0] = 0
        return picked

    correct_before, errors_before = before(n_correct), before(n_errors)
    group_correct, group_errors = n_correct - correct_before, n_errors - errors_before  # valid at ``ends``
    group_drawn = group_correct + group_errors
    columns = np.arange(rows)
    out: dict[str, np.ndarray] = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        if "auroc" in keys:
            # Mann-Whitney over groups: e_g (2 C_before + c_g) = e_g (C_end + C_before)
            doubled = np.where(ends, group_errors * (n_correct + correct_before), 0).sum(axis=1, dtype=np.float64)
            out["auroc"] = doubled / (2.0 * total_correct * total_errors)
        if "fpr95" in keys and fpr_positive == "correct":
            reached = ends & (n_correct >= 0.95 * total_correct[:, None])
            out["fpr95"] = n_errors[columns, np.argmax(reached, axis=1)] / total_errors
        elif "fpr95" in keys:
            # errors as positives, flagged when u >= t: the last group still flagging 95 % of the errors
            flagging = ends & (total_errors[:, None] - errors_before >= 0.95 * total_errors[:, None])
            last = n - 1 - np.argmax(flagging[:, ::-1], axis=1)
            out["fpr95"] = (total_correct - correct_before[columns, last]) / total_correct
        if "aurc" in keys or "augrc" in keys:
            harmonic, _ = _harmonic_tables(int(size.max(initial=0)))
        if "aurc" in keys:
            # as _SortedDetector.metrics: E linear inside a group at positions (a, b]
            end = n_correct + n_errors
            start = end - group_drawn
            span = harmonic[end] - harmonic[start]
            slope = group_errors / np.maximum(group_drawn, 1)
            total = np.where(ends, errors_before * span + slope * (group_drawn - start * span), 0.0).sum(axis=1)
            out["aurc"] = total / size
        if "augrc" in keys:
            doubled = np.where(ends, group_drawn * (2 * n_errors - group_errors), 0).sum(axis=1, dtype=np.float64)
            out["augrc"] = doubled / (2.0 * size * size)
    _undefined_roc(out, total_correct, total_errors)
    return out


#: The columns every frame of Rel-U − Doctor rows holds (:func:`paired_rows`), in order.
PAIRED_ROW_COLUMNS = ("metric", "mean", "std", "estimate", "ci_low", "ci_high", "significant", "verdict")


def paired_rows(
    per_seed: Mapping[str, Sequence[float]], pooled: Mapping[str, PairedDifference]
) -> list[dict[str, object]]:
    """Rel-U − Doctor (A − B), one row per metric of ``per_seed``: the one way every result states it.

    ``per_seed`` maps a metric key to the difference on each seed's evaluation split, ``pooled`` maps it to the
    interval of the mean (:func:`pooled_bootstrap`; empty when no bootstrap ran). A row holds
    :data:`PAIRED_ROW_COLUMNS` (the mean and population std over seeds, the estimate, the interval, whether it
    excludes 0, the verdict in words), then ``per_seed``, ``confidence``, ``n_resamples`` and
    ``conditional_on_selection`` (the interval holds for selected settings only: :data:`CONDITIONAL_LABEL`, also in
    the verdict). Without an interval the estimate is the mean, the bounds and the confidence are NaN,
    ``significant`` and ``conditional_on_selection`` are False, ``n_resamples`` 0, and the verdict says there is no interval.
    """
    rows = []
    for metric, values in per_seed.items():
        values = np.asarray(values, dtype=np.float64)
        mean = float(values.mean())
        diff = pooled.get(metric)
        if diff is None:
            interval = (
                mean,
                np.nan,
                np.nan,
                False,
                f"{metric_info.get(metric).label}: no bootstrap interval (0 resamples)",
            )
        else:
            interval = (diff.estimate, diff.low, diff.high, diff.significant, diff.verdict())
        rows.append(
            {
                **dict(zip(PAIRED_ROW_COLUMNS, (metric, mean, float(values.std()), *interval), strict=True)),
                "per_seed": [float(v) for v in values],
                "confidence": np.nan if diff is None else diff.confidence,
                "n_resamples": 0 if diff is None else diff.n_resamples,
                "conditional_on_selection": diff is not None
                and diff.conditional
                and diff.condition == CONDITIONAL_LABEL,
            }
        )
    return rows
