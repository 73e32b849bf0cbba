"""The paper's evaluation protocol: seeded tuning/evaluation splits, detectors averaged over seeds, grid search.

Conventions (shared with :mod:`relu_core.metrics`):

- ``correct[i]`` is True when ``argmax(logits[i]) == labels[i]``; positives are correctly classified
  samples, and a detector accepts a sample when its uncertainty is low. FPR95 is the false positive
  rate (share of errors accepted) at the first ROC threshold where the TPR reaches 95 %.
- A labelled set is split, per seed, into a *tuning* part (fraction ``tune_fraction``) and a disjoint
  *evaluation* part. Learned detectors (Rel-U's D*) are fitted on the tuning part only; every metric is
  computed on the evaluation part only. The split is stratified by correctness so both parts hold
  correct and misclassified samples.
- Results are the mean and the population standard deviation (``ddof=0``) over seeds.
- Hyperparameter selection (:func:`grid_search`, then :func:`select_and_fit` refits on the whole tuning
  part; :func:`evaluate_with_selection` and :mod:`relu_core.robustness` both use it) reads the tuning part
  only, by stratified k-fold cross-validation inside it: D* is fitted on k-1 folds and scored on the
  held-out fold, so it is never scored on the samples it was fitted on. ``selection="oracle"`` selects
  on the evaluation part instead (D* fitted on the whole tuning part); that optimistic mode is how the
  authors' tables were produced and is always labelled :data:`ORACLE_LABEL`. The grids searched are
  each detector's declared ``grids`` (:mod:`relu_core.detectors`); which detectors run, whether they
  are fitted and whether a temperature applies also come from their declarations in the registry.
- Ties in a grid go to the first setting in grid order; tied uncertainties are handled by
  :mod:`relu_core.metrics`.

Speed: the softmax at temperature T is computed once per T and reused across detectors, seeds and,
in the grid, across every lam: Rel-U's matrix only depends on the two second-moment matrices
``P+^T P+ / N+`` and ``P-^T P- / N-``, computed once per (T, fold) and combined per lam.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from relu_core import detectors, metric_info, metrics, operating_points, stats, ties, validation
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress
from relu_core.threads import small_work

#: The detectors whose paired difference every result reports (A - B): the paper's comparison.
PAIRED = ("relu", "doctor")
#: The tuning fractions the paper and the app offer (any value in (0, 1) is accepted).
TUNE_FRACTION_PRESETS: tuple[float, ...] = (0.1, 0.2, 0.33, 0.5)
#: Upper bound on the number of seeded splits (every split is held in memory; the paper uses 10).
MAX_SEEDS = 1000
TUNING_LABEL = "tuning (k-fold cross-validation on the tuning split)"
ORACLE_LABEL = "oracle (selected on the evaluation split)"
FIXED_LABEL = "fixed (as given)"
#: How a Rel-U result whose D* is the Hamming fallback is labelled: it ranks exactly like Doctor.
FALLBACK_LABEL = "Hamming fallback (= Doctor)"
#: How FPR at 95 % TPR is read, per ``fpr_positive`` (which samples are the positives); shown with every FPR.
FPR_CONVENTIONS: dict[str, str] = {
    "correct": "FPR at 95% TPR, positives = correctly classified",
    "error": "FPR at 95% TPR, positives = misclassified (errors; not the paper's convention)",
}
FPR_CONVENTION = FPR_CONVENTIONS["correct"]

PerturbedScorer = Callable[[object, np.ndarray], np.ndarray]
#: ``perturbation(fitted detector, rows, epsilons) -> (len(epsilons), len(rows))`` float64 uncertainty of the rows'
#: inputs pre-processed with each ε: what ε selection calls (:class:`relu_core.preprocessing.Perturbation`, made from
#: a run with its model and images by :func:`relu_core.preprocessing.make_perturbation`).
Perturbation = Callable[[object, np.ndarray, tuple[float, ...]], np.ndarray]
#: The authors' ε grid (``relu_core.preprocessing.AUTHORS_EPSILONS``, repeated here so the formulas layer needs no
#: torch); a test checks the two agree.
AUTHORS_EPSILONS: tuple[float, ...] = (0.0, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035, 0.004)


# --------------------------------------------------------------------------------------------- splits
def split_indices(
    n: int, tune_fraction: float, seed: int, stratify: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of ``range(n)`` into a tuning part and a disjoint evaluation part.

    Parameters
    ----------
    n : int
        Number of samples (>= 2).
    tune_fraction : float
        In (0, 1): ``round(tune_fraction * n)`` samples go to the tuning part (per stratum with ``stratify``).
    seed : int
    stratify : array of bool or int, shape (n,), optional
        Groups (e.g. ``correct``); each group with at least two members puts at least one in each part.

    Returns
    -------
    tune_idx, eval_idx : ndarray of int
        Sorted, disjoint, covering every index.

    Raises
    ------
    InputError
        When a part would be empty, the fraction is not in (0, 1), or, with ``stratify``, there is a
        single group or a group has fewer than two samples (a one-class split).

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> correct = np.array([True] * 8 + [False] * 4)
    >>> tune, held_out = rc.split_indices(12, 0.5, seed=0, stratify=correct)
    >>> len(tune), len(held_out), int(correct[tune].sum()), int(correct[held_out].sum())
    (6, 6, 4, 4)
    """
    if not validation.is_integer(n) or n < 2:
        raise InputError(f"need at least 2 samples to split, got {n!r}")
    tune_fraction = validation.fraction(tune_fraction, "the tuning fraction")
    rng = np.random.default_rng(seed)
    if stratify is None:
        perm = rng.permutation(n)
        n_tune = int(round(tune_fraction * n))
        if not 0 < n_tune < n:
            raise InputError(f"a tuning fraction of {tune_fraction:g} of {n} samples leaves one part empty")
        return np.sort(perm[:n_tune]), np.sort(perm[n_tune:])
    strata = np.asarray(stratify)
    if strata.shape != (n,):
        raise InputError(f"stratify must have shape ({n},), got {strata.shape}")
    if strata.dtype == bool:  # a correctness split: its groups have names a user knows
        check_evaluable(strata)
    groups = np.unique(strata)
    if groups.size < 2:
        raise InputError(f"all {n:,} samples are in one group ({groups[0].item()!r}): a stratified split needs two")
    tune_parts, eval_parts = [], []
    for value in groups:
        members = np.flatnonzero(strata == value)
        if members.size < 2:
            raise InputError(
                f"only {members.size} sample in group {value.item()!r}: each group needs one in the tuning and one "
                "in the evaluation split"
            )
        members = rng.permutation(members)
        n_tune = min(max(int(round(tune_fraction * members.size)), 1), members.size - 1)
        tune_parts.append(members[:n_tune])
        eval_parts.append(members[n_tune:])
    return np.sort(np.concatenate(tune_parts)), np.sort(np.concatenate(eval_parts))


@dataclass(frozen=True, eq=False)
class SeededSplits:
    """Samples' correctness and their seeded tuning/evaluation splits: ``parts[i]`` is ``(tune, evaluation)``
    for ``seeds[i]``; iterating gives ``(seed, tune, evaluation)``."""

    correct: np.ndarray
    seeds: tuple[int, ...]
    parts: tuple[tuple[np.ndarray, np.ndarray], ...]

    def __iter__(self) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        return ((seed, tune, evaluation) for seed, (tune, evaluation) in zip(self.seeds, self.parts))

    def checked(self, cancel: Cancel | None, what: str) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
        """The seeds' splits as iterating gives them, raising :class:`Cancelled` ("<what> cancelled") before a
        seed once ``cancel()`` says so: the seed loop of every study."""
        for split in self:
            if cancel is not None and cancel():
                raise Cancelled(f"{what} cancelled")
            yield split


def seeded_splits(correct: np.ndarray, tune_fraction: float, seeds: Sequence[int]) -> SeededSplits:
    """Every seed's :func:`split_indices` of the samples, stratified by ``correct`` (bool, N): the splits the
    protocol, the studies and the baselines share."""
    parts = tuple(split_indices(len(correct), tune_fraction, seed, stratify=correct) for seed in seeds)
    return SeededSplits(correct, tuple(int(s) for s in seeds), parts)


def check_evaluable(correct: np.ndarray) -> None:
    """Raise :class:`InputError` (one line a user understands) unless ``correct`` (bool, N) holds at least two
    correctly and two wrongly classified samples: every split puts one of each in its tuning part (to fit D*)
    and one in its evaluation part (to measure the detectors)."""
    correct = np.asarray(correct, dtype=bool)
    n_right = int(correct.sum())
    n_wrong = correct.size - n_right
    if n_wrong < 2:
        raise InputError(
            f"{n_wrong if n_wrong else 'none'} of the {correct.size:,} predictions {'is' if n_wrong == 1 else 'are'} "
            "wrong: misclassification detection needs at least 2 misclassified samples (one to fit D*, one to "
            "evaluate)"
        )
    if n_right < 2:
        raise InputError(
            f"{n_right if n_right else 'none'} of the {correct.size:,} predictions {'is' if n_right == 1 else 'are'} "
            "correct: misclassification detection needs at least 2 correctly classified samples"
        )


def correctness(logits: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """``argmax(logits, 1) == labels`` for (N, C) logits and (N,) integer labels: which samples the classifier
    gets right, the positives of every metric and the stratum of every split (bool, N).

    Raises :class:`InputError` for logits or labels that ``detectors.validate_logits`` / ``validate_labels``
    refuse.
    """
    logits = np.asarray(logits)
    labels = np.asarray(labels)
    detectors.validate_logits(logits)
    detectors.validate_labels(labels, logits.shape[0], logits.shape[1])
    return np.argmax(logits, axis=1) == labels


def resolve_seeds(seeds: int | Sequence[int]) -> tuple[int, ...]:
    """The seeds of a protocol run.

    Parameters
    ----------
    seeds : int or sequence of int
        A count S (seeds 0..S-1) or the seeds themselves.

    Returns
    -------
    tuple of int

    Raises
    ------
    InputError
        Unless there are between 1 and :data:`MAX_SEEDS` of them.
    """
    if validation.is_integer(seeds):
        return tuple(range(validation.integer(seeds, "the number of seeds", minimum=1, maximum=MAX_SEEDS)))
    resolved = tuple(int(s) for s in seeds)
    if not 1 <= len(resolved) <= MAX_SEEDS:
        raise InputError(f"give between 1 and {MAX_SEEDS} seeds, got {len(resolved)}")
    return resolved


def resolve_methods(methods: Sequence[str] | str | None) -> tuple[str, ...]:
    """Validated, de-duplicated detector keys from a list or a comma-separated string.

    Parameters
    ----------
    methods : sequence of str, str or None
        Keys or labels (:func:`detectors.detector_key`); None: every :func:`detectors.protocol_keys`.

    Returns
    -------
    tuple of str
        Registry keys, in the order given.

    Raises
    ------
    InputError
        For an unknown name, a detector this protocol cannot run (it needs the model, or labels to fit),
        or an empty list.
    """
    if methods is None:
        return detectors.protocol_keys()
    if isinstance(methods, str):
        methods = methods.split(",")
    keys = tuple(dict.fromkeys(detectors.detector_key(m) for m in methods if str(m).strip()))
    if not keys:
        raise InputError("give at least one method")
    other = [detectors.REGISTRY[k].name for k in keys if not detectors.REGISTRY[k].protocol]
    if other:
        raise InputError(
            f"{', '.join(other)} cannot be evaluated from logits here: choose from "
            f"{', '.join(detectors.protocol_keys())}"
        )
    return keys


# ------------------------------------------------------------------------------------------- results
def describe_values(values: Sequence[float | None]) -> str:
    """``"1.5"`` when every seed used one value, ``"0.5..2"`` when they vary, ``"-"`` when there is none."""
    present = [v for v in values if v is not None]
    if not present:
        return "-"
    low, high = min(present), max(present)
    return f"{low:g}" if low == high else f"{low:g}..{high:g}"


def _seed_values(values: Sequence[float | None]) -> float | list[float | None] | None:
    """One value when every seed used it (None when there is none), else the list per seed."""
    if all(v == values[0] for v in values):
        return values[0]
    return list(values)


@dataclass
class EvaluationResult:
    """Per-seed metrics of several detectors on the evaluation parts of seeded splits.

    ``per_seed[key][metric]`` is an array over seeds (the keys of :data:`metric_info.KEYS`), ``accuracy`` the
    classifier's accuracy on each seed's evaluation part, ``params[key]`` the ``(temperature, lam)``
    used on each seed (lam is None for detectors without one; for Rel-U it is the lam actually used,
    so ``lam="auto"`` shows its value), ``fallback[key]`` per seed whether Rel-U's D* was the Hamming
    fallback (then it ranks like Doctor; always False for the other detectors), ``selection`` says how
    the hyperparameters were chosen and ``n_settings[key]`` how many (T, lam) settings that choice
    searched (1 when fixed). ``eps`` is the input pre-processing magnitude of the scores.
    ``paired`` holds, when both Rel-U and Doctor were evaluated, the interval of the mean over seeds of
    Rel-U − Doctor per metric (:func:`stats.pooled_bootstrap` on each seed's evaluation part), labelled
    :data:`stats.CONDITIONAL_LABEL` unless the settings were fixed.
    """

    methods: tuple[str, ...]
    names: dict[str, str]
    seeds: tuple[int, ...]
    tune_fraction: float
    n_tune: int
    n_eval: int
    per_seed: dict[str, dict[str, np.ndarray]]
    accuracy: np.ndarray
    params: dict[str, list[tuple[float | None, float | None]]]
    fallback: dict[str, list[bool]]
    n_settings: dict[str, int]
    selection: str = FIXED_LABEL
    perturbed: bool = False
    fpr_positive: str = "correct"
    eps: float = 0.0
    paired: dict[str, stats.PairedDifference] | None = None
    #: With ε selection (``evaluate_with_selection(epsilons=...)``): the ε grid searched, and per detector the ε
    #: selected on each seed (0 for a detector without input pre-processing); None otherwise.
    eps_grid: tuple[float, ...] | None = None
    eps_per_seed: dict[str, list[float]] | None = None
    #: FPR95 under the other convention than ``fpr_positive`` (:func:`operating_points.other`), per detector and
    #: seed, and Rel-U − Doctor of it with its own paired interval (None without a bootstrap or without both):
    #: every verdict states both operating points (:meth:`fpr95_by_positive`, :meth:`operating_points`).
    fpr95_other: dict[str, np.ndarray] | None = None
    paired_fpr95_other: stats.PairedDifference | None = None

    def fpr95_by_positive(self, key: str) -> dict[str, float]:
        """``{"correct": mean FPR95, "error": mean FPR95}`` of ``key`` over seeds (both conventions; the other one
        only when it was computed)."""
        out = {self.fpr_positive: self.mean(key, "fpr95")}
        if self.fpr95_other is not None:
            out[operating_points.other(self.fpr_positive)] = float(np.mean(self.fpr95_other[key]))
        return {p: out[p] for p in operating_points.POSITIVES if p in out}

    def operating_points(self) -> list[str]:
        """Rel-U vs Doctor at both operating points in plain words, each with its paired interval of the mean
        over seeds (:func:`operating_points.sentences`); empty unless both were evaluated."""
        if not all(k in self.methods for k in PAIRED) or self.fpr95_other is None:
            return []
        names = tuple(self.names[k] for k in PAIRED)
        other = operating_points.other(self.fpr_positive)
        values = {p: {self.names[k]: self.fpr95_by_positive(k)[p] for k in PAIRED} for p in operating_points.POSITIVES}
        differences = {self.fpr_positive: (self.paired or {}).get("fpr95"), other: self.paired_fpr95_other}
        return operating_points.sentences(values, differences, names)

    @property
    def eps_label(self) -> str:
        """How ε was set, in words: ``"ε = 0.001"``, or the grid searched (:func:`describe_eps_grid`)."""
        if self.eps_grid is None:
            return f"input pre-processing ε = {self.eps:g}"
        return f"input pre-processing ε selected like T over {describe_eps_grid(self.eps_grid)}"

    @property
    def fpr_convention(self) -> str:
        """The label every display of ``fpr95`` carries (see :data:`FPR_CONVENTIONS`)."""
        return FPR_CONVENTIONS[self.fpr_positive]

    def mean(self, key: str, metric: str) -> float:
        return float(np.mean(self.per_seed[key][metric]))

    def std(self, key: str, metric: str) -> float:
        return float(np.std(self.per_seed[key][metric]))

    def difference_per_seed(self, metric: str, a: str = PAIRED[0], b: str = PAIRED[1]) -> np.ndarray:
        """``metric(a) - metric(b)`` on each seed's evaluation part (the same samples for both)."""
        return self.per_seed[a][metric] - self.per_seed[b][metric]

    def settings(self, key: str) -> dict[str, object]:
        """What ``key`` used: ``temperature`` and ``lambda`` (one value, or a list per seed when selected
        values differ; None where the detector has none), ``eps``, ``hamming_fallback`` (Rel-U only) and
        ``settings_searched``."""
        used = {
            "temperature": _seed_values([t for t, _ in self.params[key]]),
            "lambda": _seed_values([lam for _, lam in self.params[key]]),
            "eps": self.eps if self.eps_per_seed is None else _seed_values(self.eps_per_seed[key]),
            "settings_searched": self.n_settings[key],
        }
        if self.eps_grid is not None:
            used["eps_grid"] = list(self.eps_grid) if eps_searchable(key) else [0.0]
        if detectors.REGISTRY[key].can_fall_back:
            used["hamming_fallback"] = _seed_values(self.fallback[key])
        return used

    def paired_summary(self) -> dict[str, dict[str, object]] | None:
        """Rel-U − Doctor per metric: mean and std over seeds, per-seed values, the estimate, its interval,
        whether it is significant, ``conditional_on_selection`` (the settings were selected and the interval holds
        for them only, :data:`stats.CONDITIONAL_LABEL`: the selection is not resampled), and the verdict in words; None unless both were evaluated. Without a
        bootstrap (0 resamples) the interval fields are None and the verdict says there is none."""
        if not all(k in self.methods for k in PAIRED):
            return None
        rows = stats.paired_rows({m: self.difference_per_seed(m) for m in metric_info.PAIRED_KEYS}, self.paired or {})
        fields = (
            "mean",
            "std",
            "per_seed",
            "ci_low",
            "ci_high",
            "confidence",
            "n_resamples",
            "significant",
            "conditional_on_selection",
            "verdict",
        )
        undefined = () if self.paired else ("ci_low", "ci_high", "confidence", "significant")  # JSON null
        return {row["metric"]: {k: None if k in undefined else row[k] for k in fields} for row in rows}

    def to_dict(self) -> dict[str, dict[str, object]]:
        """``{method key: {fpr95, fpr95_std, ..., eaurc_std, accuracy, temperature, lambda, eps,
        settings_searched[, hamming_fallback]}}``; Rel-U's row also holds ``minus_doctor``
        (:meth:`paired_summary`) when Doctor was evaluated with it."""
        out: dict[str, dict[str, object]] = {}
        for key in self.methods:
            row: dict[str, object] = {}
            for metric in metric_info.KEYS:
                row[metric] = self.mean(key, metric)
                row[f"{metric}_std"] = self.std(key, metric)
            row["accuracy"] = float(np.mean(self.accuracy))
            row["fpr95_by_positive"] = self.fpr95_by_positive(key)
            row.update(self.settings(key))
            if key == PAIRED[0] and (paired := self.paired_summary()) is not None:
                row["minus_doctor"] = paired
                row["operating_points"] = self.operating_points()
            out[key] = row
        return out


@dataclass
class GridResult:
    """Scores of one detector over a temperature x lam grid and the selected pair.

    ``table[i, j]`` is the criterion for ``temperatures[i]`` and ``lambdas[j]`` (one column, and
    ``lambdas == ()``, for detectors without lam). Ties go to the first pair in grid order. With an ε grid
    (``epsilons`` non-empty) ``table[i, j, k]`` is the criterion at ``epsilons[k]`` too and ``best_eps`` the
    selected ε (ties: the first (T, lam, ε) in grid order); without one, ``epsilons == ()`` and ``best_eps`` 0.
    """

    method: str
    criterion: str
    selection: str
    temperatures: tuple[float, ...]
    lambdas: tuple[float, ...]
    table: np.ndarray
    best_temperature: float
    best_lam: float | None
    n_folds: int | None = None
    epsilons: tuple[float, ...] = ()
    best_eps: float = 0.0


# ---------------------------------------------------------------------------------------- internals
class _ProbsCache:
    """softmax(logits / T) of the whole set, computed once per T and kept within a memory budget."""

    def __init__(self, logits: np.ndarray, max_bytes: float = 1.5e9):
        self.logits = logits
        self.max_bytes = max_bytes
        self._store: dict[float, np.ndarray] = {}

    @functools.cached_property
    def twins(self) -> np.ndarray | None:
        """:func:`relu_core.ties.twins` of the logits, found once per set."""
        return ties.twins(np.asarray(self.logits))

    def tied_equal(self, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
        """``values`` of ``rows`` with samples of identical logits given one value (:mod:`relu_core.ties`)."""
        return ties.tied_equal(self.twins, rows, values)

    def __call__(self, temperature: float) -> np.ndarray:
        probs = self._store.get(temperature)
        if probs is None:
            probs = np.asarray(detectors.softmax(self.logits, temperature))
            while self._store and sum(p.nbytes for p in self._store.values()) + probs.nbytes > self.max_bytes:
                self._store.pop(next(iter(self._store)))
            self._store[temperature] = probs
        return probs


def _score(detector, cache: _ProbsCache, idx: np.ndarray) -> np.ndarray:
    """Uncertainty of a (fitted) detector on the samples ``idx``: from the cached softmax at its
    temperature, or from the logits where it needs them (Energy, which then costs no softmax); samples of identical
    logits get one score (:mod:`relu_core.ties`)."""
    if detector.accepts_probs:
        scores = detector.score_probs(cache(detector.temperature)[idx])
    else:
        scores = detector.score(cache.logits[idx])
    return cache.tied_equal(idx, np.asarray(scores, dtype=np.float64))


def _fit(
    detector: detectors.Detector, cache: _ProbsCache, correct: np.ndarray, tune_idx: np.ndarray
) -> detectors.Detector:
    """``detector`` fitted on the tuning rows (from the cached softmax at its temperature) when it learns."""
    if detector.requires_fit:
        detector.fit_probs(cache(detector.temperature)[tune_idx], correct[tune_idx])
    return detector


#: The pace of :func:`evaluate` on a 2-core machine without other work (measured with 100,000 x 10 and x 100
#: logits, checked against 1,000,000 x 10 at its defaults: 3-4 min), per seed: paired bootstrap resamples times
#: evaluation samples, logits times detectors scored, and samples (splits, sorting for the metrics) per second.
EVALUATION_RATES = {"resampled samples": 2.5e7, "logits x detectors": 3e7, "samples": 5e5}


def evaluation_seconds(
    n: int, n_classes: int, seeds: int, methods: Sequence[str], n_resamples: int, tune_fraction: float = 0.5
) -> float:
    """Roughly how long :func:`evaluate` takes on ``n`` x ``n_classes`` logits at :data:`EVALUATION_RATES`
    (grid searches, ``--select``, come on top)."""
    paired = n_resamples > 0 and all(k in methods for k in PAIRED)
    per_seed = (
        (n * (1 - tune_fraction) * n_resamples / EVALUATION_RATES["resampled samples"] if paired else 0.0)
        + n * n_classes * len(methods) / EVALUATION_RATES["logits x detectors"]
        + n / EVALUATION_RATES["samples"]
    )
    return seeds * per_seed


def _check_finite(detector: detectors.Detector, uncertainty: np.ndarray) -> None:
    """InputError naming the detector and its temperature when its scores overflow (e.g. Energy at T = 1e308)."""
    bad = int(np.count_nonzero(~np.isfinite(uncertainty)))
    if bad:
        t = detector.settings().get("temperature")
        at = "" if t is None else f" at T = {float(t):g}"
        raise InputError(
            f"{detector.name}{at} gives NaN or infinite uncertainty for {bad:,} of {uncertainty.size:,} samples "
            "(beyond float64's range, about 1.8e308): choose a smaller temperature"
        )


def _used_params(detector: detectors.Detector) -> tuple[float | None, float | None]:
    """``(temperature, lam)`` the detector used, None where it has no such setting."""
    used = detector.settings()
    t, lam = used.get("temperature"), used.get("lam")
    return (None if t is None else float(t)), (None if lam is None else float(lam))


def _evaluate_splits(
    correct: np.ndarray,
    methods: tuple[str, ...],
    splits: list[tuple[np.ndarray, np.ndarray]],
    fitted_for: Callable[[int, str], detectors.Detector],
    cache: _ProbsCache,
    perturbed_scorer: PerturbedScorer | None,
    progress: Progress | None,
    cancel: Cancel | None,
    fpr_positive: str = "correct",
    other_fpr: dict[str, np.ndarray] | None = None,
) -> tuple[dict, np.ndarray, dict, dict, list]:
    """Score every method on every split, ``fitted_for(seed index, key)`` giving the detector fitted on that
    split's tuning part. Returns ``(per_seed, accuracy, params, fallback,
    paired_scores)``; ``paired_scores`` holds per seed ``(Rel-U, Doctor, correct)`` on the evaluation
    part when both methods are present (empty otherwise)."""
    per_seed = {k: {m: np.empty(len(splits)) for m in metric_info.KEYS} for k in methods}
    params: dict[str, list] = {k: [] for k in methods}
    fallback: dict[str, list[bool]] = {k: [] for k in methods}
    paired_scores: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    keep = all(k in methods for k in PAIRED)
    accuracy = np.empty(len(splits))
    total = len(splits) * len(methods)
    for s, (tune_idx, eval_idx) in enumerate(splits):
        accuracy[s] = correct[eval_idx].mean()
        kept: dict[str, np.ndarray] = {}
        for j, key in enumerate(methods):
            if cancel is not None and cancel():
                raise Cancelled("evaluation cancelled")
            detector = fitted_for(s, key)
            if perturbed_scorer is not None:
                uncertainty = np.asarray(perturbed_scorer(detector, eval_idx), dtype=np.float64)
            else:
                uncertainty = _score(detector, cache, eval_idx)
            _check_finite(detector, uncertainty)
            for metric, value in metrics.summary(uncertainty, correct[eval_idx], fpr_positive).items():
                if metric in per_seed[key]:
                    per_seed[key][metric][s] = value
            if other_fpr is not None:  # the other operating point (every verdict states both)
                other = operating_points.other(fpr_positive)
                other_fpr[key][s] = metrics.fpr_at_tpr(uncertainty, correct[eval_idx], 0.95, positive=other)
            params[key].append(_used_params(detector))
            fallback[key].append(bool(detector.fallback_))
            if keep and key in PAIRED:
                kept[key] = uncertainty
            if progress is not None:
                progress(s * len(methods) + j + 1, total, f"seed {s + 1}/{len(splits)}: {detector.name}")
        if keep:
            paired_scores.append((kept[PAIRED[0]], kept[PAIRED[1]], correct[eval_idx]))
    return per_seed, accuracy, params, fallback, paired_scores


@dataclass(frozen=True)
class _Splits:
    """One protocol run's data: logits, labels, correctness, the seeds with their (tune, eval) splits, and
    the softmax cache every fit and score shares."""

    logits: np.ndarray
    labels: np.ndarray
    correct: np.ndarray
    seeds: tuple[int, ...]
    splits: list[tuple[np.ndarray, np.ndarray]]
    cache: _ProbsCache


#: ``fit(data, seed index, key)``: the detector ``key`` fitted on that seed's tuning part.
_Fit = Callable[[_Splits, int, str], detectors.Detector]


def _run_protocol(
    logits,
    labels,
    methods,
    tune_fraction,
    seeds,
    fitting: Callable[[tuple[str, ...]], _Fit],
    settings_searched: Callable[[str], int],
    selection: str,
    *,
    perturbed_scorer: PerturbedScorer | None = None,
    eps: float = 0.0,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    fpr_positive: str = "correct",
    n_resamples: int = stats.DEFAULT_RESAMPLES,
) -> EvaluationResult:
    """The protocol :func:`evaluate` and :func:`evaluate_with_selection` share; its keyword options are
    theirs (documented in :func:`evaluate`), so their defaults live here once.

    Checks the options, resolves ``methods``, lets ``fitting(methods)`` check the caller's own settings and
    give the :data:`_Fit`, splits every seed, scores every method on the evaluation parts
    (:func:`_evaluate_splits`), and adds the paired Rel-U − Doctor bootstrap when both were evaluated and
    ``n_resamples`` > 0.
    """
    _check_fpr_positive(fpr_positive)
    n_resamples = check_resamples(n_resamples)
    methods = resolve_methods(methods)
    fit = fitting(methods)
    logits, labels = np.asarray(logits), np.asarray(labels)
    correct = correctness(logits, labels)
    seeds = resolve_seeds(seeds)
    splits = list(seeded_splits(correct, tune_fraction, seeds).parts)
    data = _Splits(logits, labels, correct, seeds, splits, _ProbsCache(logits))
    other_fpr = {k: np.empty(len(splits)) for k in methods}
    per_seed, accuracy, params, fallback, paired_scores = _evaluate_splits(
        correct,
        methods,
        splits,
        lambda s, key: fit(data, s, key),
        data.cache,
        perturbed_scorer,
        progress,
        cancel,
        fpr_positive,
        other_fpr,
    )
    paired = paired_other = None
    if paired_scores and n_resamples:
        paired = stats.pooled_bootstrap(
            paired_scores,
            sample_ids=[eval_idx for _, eval_idx in splits],  # the seeds' splits share samples
            n_resamples=n_resamples,
            fpr_positive=fpr_positive,
        )
        paired_other = stats.pooled_bootstrap(
            paired_scores,
            sample_ids=[eval_idx for _, eval_idx in splits],
            metrics=("fpr95",),
            n_resamples=n_resamples,
            fpr_positive=operating_points.other(fpr_positive),
        )
        if selection != FIXED_LABEL:  # the bootstrap resamples the evaluation samples, never the selection
            paired = stats.conditional_on_selection(paired)
            paired_other = stats.conditional_on_selection(paired_other)
        paired_other = paired_other["fpr95"]
    return EvaluationResult(
        methods=methods,
        names={k: detectors.label(k) for k in methods},
        seeds=seeds,
        tune_fraction=float(tune_fraction),
        n_tune=len(splits[0][0]),
        n_eval=len(splits[0][1]),
        per_seed=per_seed,
        accuracy=accuracy,
        params=params,
        fallback=fallback,
        n_settings={k: settings_searched(k) for k in methods},
        selection=selection,
        perturbed=perturbed_scorer is not None,
        fpr_positive=fpr_positive,
        eps=float(eps),
        paired=paired,
        fpr95_other=other_fpr,
        paired_fpr95_other=paired_other,
    )


def check_resamples(n_resamples: int) -> int:
    """The bootstrap resample count as an int (0: no interval).

    Raises
    ------
    InputError
        Unless it is an integer in [0, 100000].
    """
    return validation.integer(n_resamples, "n_resamples", minimum=0, maximum=100_000, hint=" (0: no bootstrap)")


@small_work
def evaluate(
    logits: np.ndarray,
    labels: np.ndarray,
    methods: Sequence[str] | str | None = None,
    *,
    temperature: float | Mapping[str, float] | None = 1.0,
    lam: float | str = 0.5,
    tune_fraction: float = 0.5,
    seeds: int | Sequence[int] = 10,
    **options,
) -> EvaluationResult:
    """Evaluate detectors with fixed hyperparameters over seeded, stratified tuning/evaluation splits.

    For every seed: split with :func:`split_indices`, fit each detector on the tuning part, score the
    evaluation part and compute :func:`metrics.summary` there. The keyword options (Other Parameters) are shared
    with :func:`evaluate_with_selection`.

    Parameters
    ----------
    logits, labels : array-like
        (N, C) logits and (N,) integer labels.
    methods : sequence of str, str or None
        Detector keys or labels (:func:`resolve_methods`); None: every protocol detector.
    temperature : float, mapping or None, default 1.0
        T for every detector whose ``temperature_applies`` (MSP always uses T = 1); a mapping
        ``{key: T}`` sets it per method (methods it omits use 1.0); None: each detector's
        ``default_temperature`` (ODIN 1000).
    lam : float or "auto", default 0.5
        Rel-U's lam in [0, 1], or ``"auto"`` (N+/(N+ + N-) of the tuning part).
    tune_fraction : float
        Share of each split used for fitting, in (0, 1).
    seeds : int or sequence of int
        A count (seeds 0..S-1) or explicit seeds.

    Other Parameters
    ----------------
    perturbed_scorer : callable, optional
        ``perturbed_scorer(fitted_detector, eval_idx)`` replaces the clean evaluation scores (input
        pre-processing, :mod:`relu_core.preprocessing`); fitting stays on the clean tuning logits.
    eps : float, default 0
        The pre-processing magnitude, recorded in the result.
    progress, cancel : callable, optional
        ``progress(done, total, message)``; ``cancel()`` returning True raises :class:`Cancelled`.
    fpr_positive : {"correct", "error"}, default "correct"
        The FPR convention (:data:`FPR_CONVENTIONS`).
    n_resamples : int, default :data:`stats.DEFAULT_RESAMPLES`
        Bootstrap resamples of each evaluation part for the Rel-U − Doctor interval (0: none).

    Returns
    -------
    EvaluationResult
        ``result.paired`` holds the paired interval when both :data:`PAIRED` detectors are evaluated.

    Raises
    ------
    InputError
        For bad logits, labels, methods, settings, or a split without errors or correct samples.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 400)
    >>> logits = rng.normal(size=(400, 3)) + 2.0 * np.eye(3)[labels]
    >>> result = rc.evaluate(logits, labels, ["relu", "doctor"], seeds=3, n_resamples=200)
    >>> result.methods, result.seeds, (result.n_tune, result.n_eval)
    (('relu', 'doctor'), (0, 1, 2), (200, 200))
    >>> row = result.to_dict()["relu"]
    >>> row["lambda"], 0.5 < row["auroc"] <= 1.0, row["minus_doctor"]["auroc"]["n_resamples"]
    (0.5, True, 200)
    """

    def fitting(methods: tuple[str, ...]) -> _Fit:
        checked_lam = detectors.check_lambda(lam)
        if temperature is None:
            temps = {k: detectors.REGISTRY[k].default_temperature for k in methods}
        elif isinstance(temperature, Mapping):
            given = {resolve_methods([k])[0]: detectors.check_temperature(t) for k, t in temperature.items()}
            temps = {k: given.get(k, 1.0) for k in methods}
        else:
            t = detectors.check_temperature(temperature)
            temps = {k: t for k in methods}

        def fit(data: _Splits, s: int, key: str) -> detectors.Detector:
            detector = detectors.make_detector(key, temperature=temps[key], lam=checked_lam)
            return _fit(detector, data.cache, data.correct, data.splits[s][0])

        return fit

    return _run_protocol(logits, labels, methods, tune_fraction, seeds, fitting, lambda key: 1, FIXED_LABEL, **options)


def _check_fpr_positive(fpr_positive: str) -> None:
    if fpr_positive not in FPR_CONVENTIONS:
        raise InputError(f"fpr_positive must be one of {', '.join(FPR_CONVENTIONS)}, got {fpr_positive!r}")


# ------------------------------------------------------------------------------------- grid search
def _relu_matrix_from_sums(s_pos: np.ndarray, s_neg: np.ndarray, n_pos: int, n_neg: int, lam: float) -> np.ndarray:
    """Rel-U's D* from the sums ``sum p p^T`` of correct (pos) and wrong (neg) fitting samples."""
    if n_pos == 0 or n_neg == 0:
        return detectors.hamming_matrix(s_pos.shape[0])
    return detectors.relu_matrix_from_moments(s_pos / n_pos, s_neg / n_neg, lam)


def _moment_sums(probs: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, np.ndarray, int, int]:
    """``(P+^T P+, P-^T P-, N+, N-)`` in float64."""
    pos = np.asarray(probs[correct], dtype=np.float64)
    neg = np.asarray(probs[~correct], dtype=np.float64)
    return pos.T @ pos, neg.T @ neg, len(pos), len(neg)


def _criterion_value(criterion: str, uncertainty: np.ndarray, correct: np.ndarray, positive: str = "correct") -> float:
    if criterion == "fpr95":
        return float(metrics.fpr_at_tpr(uncertainty, correct, 0.95, positive=positive))
    return float(getattr(metrics, criterion)(uncertainty, correct))


def _stratified_folds(correct: np.ndarray, n_folds: int, seed: int) -> np.ndarray:
    """Fold id per sample: each class permuted (seeded) and dealt round-robin into ``n_folds`` folds."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(correct), dtype=np.int64)
    offset = 0
    for value in (True, False):
        members = rng.permutation(np.flatnonzero(correct == value))
        fold[members] = (np.arange(members.size) + offset) % n_folds
        offset += members.size
    return fold


def _grid_table(
    correct: np.ndarray,
    cache: _ProbsCache,
    method: str,
    temperatures: tuple[float, ...],
    lambdas: tuple[float, ...],
    fit_idx: np.ndarray,
    score_groups: list[np.ndarray],
    criterion: str,
    holdout: bool,
    positive: str = "correct",
    epsilons: tuple[float, ...] = (),
    perturbation: Perturbation | None = None,
) -> np.ndarray:
    """Mean criterion over the ``score_groups`` for every (T, lam) [, ε], with one softmax per T.

    ``holdout=True`` (cross-validation): the groups partition ``fit_idx`` and each group is scored by
    the detector fitted on ``fit_idx`` minus that group; the fold's second moments are the totals minus
    the group's sums. ``holdout=False`` (oracle): fitted on all of ``fit_idx``, scored on each group.
    Rel-U's D* comes from those sums for every lam at once; another learned detector is refitted per cell.

    With ``epsilons`` (and ``perturbation``) the table is (T, lam, ε): ε = 0 is scored from the clean logits,
    every ε > 0 of a cell by one ``perturbation(detector, group, positive ε)`` call, that is one backward pass
    over the group for the cell's detector (its T and D*) and one forward pass per ε.
    """
    cls = detectors.REGISTRY[method]
    moments = issubclass(cls, detectors.RelU)
    steps = epsilons or (0.0,)
    positive_eps = tuple(e for e in steps if e > 0)
    table = np.zeros((len(temperatures), len(lambdas) or 1, len(steps)))

    def add(i: int, j: int, detector: detectors.Detector | None, clean: np.ndarray, group, c_score) -> None:
        """The cell's criterion at every ε: the clean scores at ε = 0, the perturbed ones at each ε > 0."""
        perturbed = iter(perturbation(detector, group, positive_eps)) if positive_eps else iter(())
        for k, eps in enumerate(steps):
            scores = clean if eps == 0 else np.asarray(next(perturbed), dtype=np.float64)
            table[i, j, k] += _criterion_value(criterion, scores, c_score, positive)

    for i, t in enumerate(temperatures):
        if moments:
            probs = cache(t)
            total = _moment_sums(probs[fit_idx], correct[fit_idx])
        for group in score_groups:
            c_score = correct[group]
            if moments:
                p_score = probs[group]
                if holdout:
                    own = _moment_sums(p_score, c_score)
                    sums = tuple(a - b for a, b in zip(total, own))
                else:
                    sums = total
                for j, lam in enumerate(lambdas):
                    d = _relu_matrix_from_sums(*sums, lam)
                    scores = cache.tied_equal(group, detectors.quadratic_score(p_score, d))
                    add(i, j, _relu_with_matrix(t, lam, d) if positive_eps else None, scores, group, c_score)
            else:
                fit_rows = np.setdiff1d(fit_idx, group) if holdout else fit_idx
                for j, lam in enumerate(lambdas or (0.5,)):
                    detector = _fit(detectors.make_detector(method, temperature=t, lam=lam), cache, correct, fit_rows)
                    add(i, j, detector, _score(detector, cache, group), group, c_score)
    table /= len(score_groups)
    return table if epsilons else table[:, :, 0]


def _relu_with_matrix(temperature: float, lam: float, matrix: np.ndarray) -> detectors.RelU:
    """A Rel-U detector at ``temperature`` holding the fold's ``matrix`` (D* at ``lam``), as its fit would."""
    detector = detectors.RelU(lam=lam, temperature=temperature)
    detector.lam_, detector.matrix_, detector.fallback_ = float(lam), matrix, detectors.is_fallback(matrix)
    return detector


def eps_searchable(method: str) -> bool:
    """Whether ε selection searches an ε grid for ``method``: it has hyperparameters to select (``grids``) and
    an input pre-processing (``perturbation``): Rel-U, Doctor and ODIN; MSP (no setting, as in the authors'
    code), Entropy and Energy (no pre-processing) are evaluated at ε = 0."""
    cls = detectors.REGISTRY[detectors.detector_key(method)]
    return bool(cls.grids) and cls.perturbation is not None


def check_epsilons(epsilons: Sequence[float]) -> tuple[float, ...]:
    """The ε grid of a selection as a sorted tuple of distinct floats, each finite and >= 0; InputError
    otherwise (an empty grid, a negative or repeated value)."""
    try:
        values = tuple(float(e) for e in epsilons)
    except (TypeError, ValueError):
        raise InputError(f"the ε grid must hold numbers, got {epsilons!r}") from None
    if not values:
        raise InputError("the ε grid is empty")
    bad = [e for e in values if not np.isfinite(e) or e < 0]
    if bad:
        raise InputError(f"every ε must be a finite number >= 0, got {bad[0]!r}")
    if len(set(values)) < len(values):
        raise InputError("the ε grid repeats a value")
    return tuple(sorted(values))


def describe_eps_grid(epsilons: Sequence[float]) -> str:
    """The ε grid in words, saying whether it is the authors' grid, a subset of it (and how many of its values),
    or another grid: ``"ε ∈ {0, 0.002, 0.004} (a subset of the authors' grid: 3 of its 9 values)"``."""
    values = tuple(sorted(float(e) for e in epsilons))
    text = "ε ∈ {" + ", ".join(f"{e:g}" for e in values) + "}"
    authors = set(AUTHORS_EPSILONS)
    if set(values) == authors:
        return f"{text} (the authors' grid)"
    if set(values) < authors:
        return f"{text} (a subset of the authors' grid: {len(values)} of its {len(authors)} values)"
    return f"{text} (not the authors' grid)"


def _grids(
    method: str, temperatures: Sequence[float] | None, lambdas: Sequence[float] | None
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The (T, lam) grids searched for ``method``: the given ones, else the detector's own (``grids``);
    lam only for detectors that have one (empty otherwise)."""
    cls = detectors.REGISTRY[method]
    temperatures = cls.grids.get("temperature", ()) if temperatures is None else temperatures
    lambdas = cls.grids.get("lam", ()) if lambdas is None else lambdas
    return tuple(temperatures), (tuple(lambdas) if "lam" in cls.grids else ())


@small_work
def grid_search(
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    tune_idx: np.ndarray,
    eval_idx: np.ndarray | None = None,
    temperatures: Sequence[float] | None = None,
    lambdas: Sequence[float] | None = None,
    n_folds: int = 5,
    criterion: str = "fpr95",
    selection: Literal["tuning", "oracle"] = "tuning",
    method: str = "relu",
    fold_seed: int = 0,
    criterion_positive: str = "correct",
    epsilons: Sequence[float] | None = None,
    perturbation: Perturbation | None = None,
    _cache: _ProbsCache | None = None,
) -> GridResult:
    """Select (T, lam) [and ε] for one detector over a grid, without looking at the evaluation part.

    Parameters
    ----------
    logits, labels : array-like
        The whole labelled set; only the rows ``tune_idx`` (and ``eval_idx`` in oracle mode) are read.
    tune_idx : array of int
        The tuning part: every fit uses these rows only.
    eval_idx : array of int, optional
        The evaluation part; read only by ``selection="oracle"``.
    temperatures, lambdas : sequence of float, optional
        The grid; None: the detector's ``grids`` (:data:`detectors.TEMPERATURE_GRID`,
        :data:`detectors.LAMBDA_GRID`). ``lambdas`` only matter for detectors with a lam (Rel-U).
    n_folds : int
        ``selection="tuning"``: stratified k-fold cross-validation inside ``tune_idx`` (fewer folds when
        the tuning part holds fewer errors or correct samples); each (T, lam) is fitted on k-1 folds and
        judged on the held-out fold, averaged over folds.
    criterion : str
        One of :data:`metric_info.KEYS` (FPR95 with positives = correctly classified).
    selection : {"tuning", "oracle"}
        ``"oracle"``: fit on the whole tuning part, judge on ``eval_idx`` (labelled :data:`ORACLE_LABEL`).
    method : str
        Detector key or label.
    fold_seed : int
        Seeds the fold assignment.
    criterion_positive : {"correct", "error"}, default "correct"
        The FPR convention of the ``"fpr95"`` criterion (:data:`FPR_CONVENTIONS`; ``"error"`` is the authors'
        code's); the other criteria do not depend on it.
    epsilons : sequence of float, optional
        An input pre-processing grid searched jointly with (T, lam) (e.g. :data:`AUTHORS_EPSILONS`); needs
        ``perturbation``. Each fold's detector (its T and fold-fitted D*) is scored on its held-out fold at every
        ε: ε = 0 from the clean logits, the positive ε by one ``perturbation(detector, held-out rows, ε > 0)``
        call (one backward pass, one forward pass per ε). Only the tuning rows are perturbed (``"oracle"``:
        the evaluation rows). For a detector without pre-processing (:func:`eps_searchable` False) only
        ε = 0 is meaningful: an InputError says so.
    perturbation : callable, optional
        :data:`Perturbation` (``relu_core.preprocessing.make_perturbation(run)``).

    Returns
    -------
    GridResult
        The table and the selected pair (and ε); ties go to the first setting in grid order.

    Raises
    ------
    InputError
        For a detector without hyperparameters (MSP), an unknown criterion or selection, an empty grid,
        too few errors / correct samples to cross-validate, an ε grid without a perturbation or for a
        detector without input pre-processing.
    """
    method = resolve_methods([method])[0]
    _check_fpr_positive(criterion_positive)
    if epsilons is not None:
        epsilons = check_epsilons(epsilons)
        if not eps_searchable(method):
            raise InputError(f"{detectors.label(method)} has no input pre-processing: it has no ε to select")
        if perturbation is None and any(e > 0 for e in epsilons):
            raise InputError(
                "ε selection needs the model and the images (a perturbation); a run of logits only cannot be perturbed"
            )
    else:
        epsilons = ()
    if not detectors.REGISTRY[method].grids:
        raise InputError(f"{method} has no hyperparameters to select")
    higher_is_better = metric_info.get(criterion, "criterion").higher_is_better
    temperatures, lambdas = _grids(method, temperatures, lambdas)
    temperatures = tuple(detectors.check_temperature(t) for t in temperatures)
    lambdas = tuple(float(detectors.check_lambda(float(lam))) for lam in lambdas)
    if not temperatures or ("lam" in detectors.REGISTRY[method].grids and not lambdas):
        raise InputError("the grid is empty")
    logits = np.asarray(logits)
    correct = correctness(logits, np.asarray(labels))
    tune_idx = np.asarray(tune_idx, dtype=np.int64)
    cache = _cache if _cache is not None else _ProbsCache(logits)
    tune_correct = correct[tune_idx]
    if selection == "tuning":
        k = min(int(n_folds), int(tune_correct.sum()), int((~tune_correct).sum()))
        if k < 2:
            raise InputError(
                "cross-validation needs at least 2 correctly and 2 wrongly classified samples in the tuning split"
            )
        fold = _stratified_folds(tune_correct, k, fold_seed)
        score_groups = [tune_idx[fold == f] for f in range(k)]
        label = TUNING_LABEL
    elif selection == "oracle":
        if eval_idx is None:
            raise InputError("oracle selection needs the evaluation indices")
        eval_idx = np.asarray(eval_idx, dtype=np.int64)
        if correct[eval_idx].all() or not correct[eval_idx].any():
            raise InputError("the evaluation split must hold correctly and wrongly classified samples")
        k = None
        score_groups = [eval_idx]
        label = ORACLE_LABEL
    else:
        raise InputError(f"selection must be 'tuning' or 'oracle', got {selection!r}")
    table = _grid_table(
        correct,
        cache,
        method,
        temperatures,
        lambdas,
        tune_idx,
        score_groups,
        criterion,
        holdout=k is not None,
        positive=criterion_positive,
        epsilons=epsilons,
        perturbation=perturbation,
    )
    flat = int(np.argmax(table) if higher_is_better else np.argmin(table))
    i, j, *e = np.unravel_index(flat, table.shape)
    return GridResult(
        method=method,
        criterion=criterion,
        selection=label,
        temperatures=temperatures,
        lambdas=lambdas,
        table=table,
        best_temperature=temperatures[i],
        best_lam=lambdas[j] if lambdas else None,
        n_folds=k,
        epsilons=epsilons,
        best_eps=float(epsilons[e[0]]) if epsilons else 0.0,
    )


def select_and_fit(
    logits: np.ndarray,
    labels: np.ndarray,
    method: str,
    *,
    tune_idx: np.ndarray,
    _cache: _ProbsCache | None = None,
    **search,
) -> detectors.Detector:
    """Select a detector's hyperparameters with :func:`grid_search`, then refit it on the whole tuning part.

    ``tune_idx`` and the keyword ``search`` (``eval_idx``, ``selection``, ``temperatures``, ``lambdas``,
    ``n_folds``, ``criterion``, ``fold_seed``) go to :func:`grid_search`, with their defaults there. A detector
    without hyperparameters (MSP) is built at its standard setting, with no search. The fit (Rel-U's D*)
    reads the rows ``tune_idx`` only.

    With ``epsilons`` and ``perturbation`` in ``search`` the ε is selected jointly with (T, lam); the
    detector returned does not carry it: :func:`evaluate_with_selection` reads it from the grid
    (:attr:`GridResult.best_eps`). A detector without pre-processing (:func:`eps_searchable` False) is
    searched over (T, lam) only.

    Returns
    -------
    Detector
        Fitted on ``tune_idx`` with the selected (T, lam), ready to score the evaluation part.

    Raises
    ------
    InputError
        As :func:`grid_search`, and for bad logits or labels.
    """
    return _select_and_fit(logits, labels, method, tune_idx=tune_idx, _cache=_cache, **search)[0]


def _select_and_fit(
    logits: np.ndarray,
    labels: np.ndarray,
    method: str,
    *,
    tune_idx: np.ndarray,
    _cache: _ProbsCache | None = None,
    **search,
) -> tuple[detectors.Detector, float]:
    """:func:`select_and_fit` and the ε selected (0 where none was searched)."""
    method = resolve_methods([method])[0]
    inspect.signature(grid_search).bind_partial(**search)  # a misspelt option fails even where nothing is searched
    if not eps_searchable(method):
        search = {k: v for k, v in search.items() if k not in ("epsilons", "perturbation")}
    logits = np.asarray(logits)
    cache = _cache if _cache is not None else _ProbsCache(logits)
    eps = 0.0
    if detectors.REGISTRY[method].grids:
        grid = grid_search(logits, labels, tune_idx=tune_idx, method=method, _cache=cache, **search)
        lam = grid.best_lam if grid.best_lam is not None else 0.5
        detector = detectors.make_detector(method, temperature=grid.best_temperature, lam=lam)
        eps = grid.best_eps
    else:
        detector = detectors.make_detector(method)
    fitted = _fit(detector, cache, correctness(logits, np.asarray(labels)), np.asarray(tune_idx, dtype=np.int64))
    return fitted, eps


@small_work
def evaluate_with_selection(
    logits: np.ndarray,
    labels: np.ndarray,
    methods: Sequence[str] | str | None = None,
    *,
    selection: Literal["tuning", "oracle"] = "tuning",
    temperatures: Sequence[float] | None = None,
    lambdas: Sequence[float] | None = None,
    tune_fraction: float = 0.5,
    seeds: int | Sequence[int] = 10,
    n_folds: int = 5,
    criterion: str = "fpr95",
    criterion_positive: str = "correct",
    epsilons: Sequence[float] | None = None,
    perturbation: Perturbation | None = None,
    **options,
) -> EvaluationResult:
    """The paper's protocol with selection: per seed and detector, :func:`select_and_fit`, then evaluate.

    (T, lam) are selected by :func:`grid_search` (``selection="tuning"``: cross-validated on that seed's
    tuning part only; ``"oracle"``: on its evaluation part, labelled so), the detector is refitted on the
    whole tuning part with them and scored on the evaluation part; MSP has nothing to select. Parameters
    as :func:`grid_search` (``temperatures``/``lambdas`` None: each detector's grids); ``tune_fraction``,
    ``seeds`` and the keyword ``options`` (``perturbed_scorer``, ``eps``, ``progress``, ``cancel``,
    ``fpr_positive``, ``n_resamples``) as :func:`evaluate`.
    Selection reads clean scores; ``perturbed_scorer`` only replaces the final evaluation-part scores.
    ``fpr_positive`` sets the reported FPR convention only; the ``"fpr95"`` selection criterion uses
    ``criterion_positive`` (default the paper's text's, correct = positive; ``"error"`` the authors' code's).

    ε selection (the paper: "we tuned the best lambda parameter (λ), T, and ε"): with ``epsilons`` (e.g.
    :data:`AUTHORS_EPSILONS`, or a subset of it on a CPU) and ``perturbation`` (a
    :data:`Perturbation`: ``relu_core.preprocessing.make_perturbation(run)``, which refuses a run of logits
    only), the ε of Rel-U, Doctor and ODIN (:func:`eps_searchable`) is selected jointly with (T, lam) by the
    same search, on the same rows: cross-validated inside each seed's tuning part (``"oracle"``: on its
    evaluation part). The detector is refitted on the clean tuning part (D* never sees perturbed inputs) and
    its evaluation-part scores are those of the inputs perturbed with the selected ε (the clean ones at
    ε = 0); whether a sample is an error is read from the clean logits. MSP, Entropy and Energy run at ε = 0.
    Cost per seed: one backward pass over the searched rows per (detector, T, lam and fold for Rel-U) and
    one forward pass per positive ε, then one backward and one forward pass over the evaluation part per
    detector whose selected ε is positive. The result's ``eps_grid`` is the grid searched (its
    :attr:`EvaluationResult.eps_label` names it, and says when it is a subset of the authors' grid) and
    ``eps_per_seed`` the ε chosen per detector and seed; ``perturbed_scorer`` and ``eps`` do not go with it.

    Returns
    -------
    EvaluationResult
        ``params`` holds the pair chosen on each seed, ``n_settings`` how many settings each search
        compared (:func:`grid_size`), to be read next to the result.

    Raises
    ------
    InputError
        As :func:`evaluate` and :func:`grid_search`; for an ε grid without a perturbation (a run of logits
        only), or beside ``perturbed_scorer`` / ``eps``.
    """
    if epsilons is not None:
        epsilons = check_epsilons(epsilons)
        if options.get("perturbed_scorer") is not None or options.get("eps"):
            raise InputError("ε selection chooses ε itself: it does not go with a fixed eps or perturbed_scorer")
        if perturbation is None and any(e > 0 for e in epsilons):
            raise InputError(
                "ε selection needs the model and the images (a perturbation): a run of logits only cannot be perturbed"
            )
    elif perturbation is not None:
        raise InputError("a perturbation goes with an ε grid (epsilons)")

    search = {
        "selection": selection,
        "temperatures": temperatures,
        "lambdas": lambdas,
        "n_folds": n_folds,
        "criterion": criterion,
        "criterion_positive": criterion_positive,
    }
    if epsilons is not None:
        search.update(epsilons=epsilons, perturbation=perturbation)
    #: id(fitted detector) -> (detector, selected ε, the run's softmax cache), read by the evaluation's scorer
    chosen: dict[int, tuple[detectors.Detector, float, _ProbsCache]] = {}
    eps_per_seed: dict[str, list[float]] = {}

    def fit(data: _Splits, s: int, key: str) -> detectors.Detector:
        tune_idx, eval_idx = data.splits[s]
        detector, eps = _select_and_fit(
            data.logits,
            data.labels,
            key,
            tune_idx=tune_idx,
            eval_idx=eval_idx,
            fold_seed=data.seeds[s],
            _cache=data.cache,
            **search,
        )
        chosen[id(detector)] = (detector, eps, data.cache)
        eps_per_seed.setdefault(key, []).append(eps)
        return detector

    def selected_eps_scores(detector: detectors.Detector, eval_idx: np.ndarray) -> np.ndarray:
        """The evaluation part's uncertainty at the detector's selected ε (clean at ε = 0)."""
        _, eps, cache = chosen[id(detector)]
        if eps == 0:
            return _score(detector, cache, eval_idx)
        return np.asarray(perturbation(detector, eval_idx, (eps,))[0], dtype=np.float64)

    if epsilons is not None:
        options["perturbed_scorer"] = selected_eps_scores
    label = ORACLE_LABEL if selection == "oracle" else TUNING_LABEL
    result = _run_protocol(
        logits,
        labels,
        methods,
        tune_fraction,
        seeds,
        lambda methods: fit,
        lambda key: grid_size(key, temperatures, lambdas, epsilons),
        label,
        **options,
    )
    if epsilons is not None:
        result.eps_grid = epsilons
        result.eps_per_seed = {key: eps_per_seed[key] for key in result.methods}
    return result


def grid_size(
    method: str,
    temperatures: Sequence[float] | None = None,
    lambdas: Sequence[float] | None = None,
    epsilons: Sequence[float] | None = None,
) -> int:
    """How many settings a search over ``temperatures`` x ``lambdas`` (None: the detector's grids) [x
    ``epsilons``, for a detector with input pre-processing] compares for ``method``: 1 for a detector without
    hyperparameters."""
    key = detectors.detector_key(method)
    if not detectors.REGISTRY[key].grids:
        return 1
    temperatures, lambdas = _grids(key, temperatures, lambdas)
    n_eps = len(epsilons) if epsilons is not None and eps_searchable(key) else 1
    return len(temperatures) * (len(lambdas) or 1) * n_eps
