"""The paper's protocol as the authors' code runs it: every setting evaluated, the five best rows kept.

Facts of the authors' public code (``edadaltocg/relative-uncertainty`` at commit ``507a224``; the project's
``shared/reference/paper/README.md`` lists them with their files), each a small function here; the detectors,
softmax, D*, ROC and metrics are the studio's own (:mod:`relu_core.detectors`, :mod:`relu_core.metrics`):

- **The grids** (``src/RelU/main.py``): T in :data:`TEMPERATURES`, ε in :data:`EPSILONS` (99 pairs); λ is one
  value a run (``--lbd``, default 0.5; the paper says λ was tuned, and which λ values the authors ran is not in
  their repository), searched here over :data:`LAMBDAS` (:data:`relu_core.detectors.LAMBDA_GRID`, which holds
  0.5; ``lambdas=(0.5,)`` is the code's default alone, with as many Rel-U rows as Doctor's). MSP runs at T = 1,
  ε = 0 only.
  ODIN is ``-max softmax(z / T)`` at the grid's T (not T = 1000), Doctor ``(1 - g) / g`` with ``g = Σ p²`` (the
  same ranking as the studio's ``1 - g``), Rel-U ``p D* pᵀ`` with D* fitted on the fit part.
- **The seed picks the model too** (``src/RelU/main.py``): the authors' seed ``s`` also loads the checkpoint
  ``<s>/best.pth``, a separately trained network per seed, so their spread and their five best rows include
  differences between models. Here one model (the run's logits) serves every seed: only the split varies.
  Seeds are numbered from 1 as the authors do (:func:`paper_seeds`), in every entry point.
- **The split** (:func:`authors_split`): the seed shuffles the test set with Python's ``random`` (the authors'
  ``random.seed(seed); random.shuffle(indices)``, so the same seed gives the same permutation of the same
  test-set order); the first ``n // r`` samples fit the detector (``r`` = 10, the code's default, or 2, the
  one its table script keeps); of the rest the first fifth is set aside (passed to the fit as a validation
  loader that the Rel-U fit never reads) and the other four fifths are evaluated. Not stratified: a fit part
  without errors (or without correct samples) gives D* the Hamming fallback here; the authors' code falls back
  to the same matrix only when every entry after the ReLU is <= 0, and with an empty side its mean is NaN (D*,
  the scores and the run then fail).
- **Their FPR95** (:func:`fpr95`): errors are the positives (a detector flags a sample when its uncertainty,
  higher = more likely an error, is at or above the threshold), read on scikit-learn's default *thinned* ROC
  curve (``drop_intermediate=True``) at the first threshold whose TPR reaches 0.95. On tied scores the thinned
  curve can skip the crossing point and report a higher FPR than the full curve.
- **Every setting evaluated on the evaluation part** (:func:`setting_rows`): one row per (method, T, ε, λ, seed)
  with FPR95 (theirs), AUROC (identical to theirs: ties count one half) and AURC (the studio's
  :func:`relu_core.metrics.aurc`, the expected risk under random order in tie groups; the authors' trapezoid over
  distinct thresholds differs from it slightly).
- **Their aggregation** (:func:`aggregate`, ``src/utils/tables.py`` as committed): per method, the five rows of
  lowest FPR95 over all settings and seeds together, then the mean and standard deviation (pandas' default,
  ``ddof=1``, NaN for one row) of FPR95, AUROC, AURC **and accuracy over those same five rows**
  (:data:`SELECT_BY`). The script's ``metric`` line can be edited to select by another metric; ``select_by=None``
  gives each metric its own five best rows, labelled "each metric's own five best (tables.py with its metric
  edited)". That is selection on the evaluation part over settings and seeds at once: it has no valid
  confidence interval, and a method with more settings has more rows to pick from. Ties at the fifth place go
  to the rows that come last in row order (the authors' stable descending sort, then ``tail(5)``).
- **Precision**: the authors run the model, the gradient step and the scores in float32 (no autocast); the ε
  path here runs at :data:`PRECISION` (``make_perturbation(run, precision=PRECISION)``), the scores in float64.

ε > 0 needs the run's model: the caller passes a ``perturbation`` (:data:`relu_core.protocol.Perturbation`, e.g.
``relu_core.preprocessing.make_perturbation(run, precision=PRECISION)``: one backward pass per fitted detector, one forward pass per ε);
this module never runs a model.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from relu_core import detectors, metric_info, metrics, protocol, validation
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress

#: How every result of this protocol is labelled.
LABEL = "the paper's protocol (authors' code)"
#: The authors' temperature grid (``src/RelU/main.py``).
TEMPERATURES: tuple[float, ...] = (0.2, 0.4, 0.6, 0.8, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 2.0)
#: The authors' input pre-processing grid (``src/RelU/main.py``).
EPSILONS: tuple[float, ...] = (0.0, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035, 0.004)
#: λ: the code takes one a run (default 0.5); the paper says it was tuned: the studio's λ grid.
LAMBDAS: tuple[float, ...] = detectors.LAMBDA_GRID
#: The ratios ``r`` offered: the fit part is ``n // r`` (10: the code's default; 2: the table script's filter).
RATIOS: tuple[int, ...] = (10, 2)
DEFAULT_RATIO = 2
#: The methods of the paper's Table 1, in its column order.
METHODS: tuple[str, ...] = ("msp", "odin", "doctor", "relu")
#: The five rows the table script keeps per method.
TOP_K = 5
#: The reported metrics and the convention of each.
ROW_METRICS: tuple[str, ...] = ("fpr95", "auroc", "aurc")
#: What the table script aggregates: the metrics and the evaluation part's accuracy of the same rows.
REPORTED: tuple[str, ...] = (*ROW_METRICS, "accuracy")
#: The committed ``tables.py`` keeps the five rows of lowest FPR95 and reports every metric at those rows.
SELECT_BY = "fpr95"
#: The ε path's precision: float32 as the authors' code (no bf16 / fp16 autocast on a GPU).
PRECISION = "fp32"
#: The label of each selection rule.
SELECTION_LABELS = {
    "fpr95": "the five rows of lowest FPR95, every metric and accuracy read at those rows (tables.py as committed)",
    None: "each metric's own five best rows (tables.py with its metric edited)",
}
#: The authors' seed also loads a checkpoint; here one model serves every seed.
ONE_MODEL = (
    "the authors' seed s also loads checkpoint <s>/best.pth (one trained network per seed); here one model "
    "serves every seed, so only the split varies"
)
FPR_CONVENTION = "FPR at 95% TPR, positives = misclassified (errors), on the thinned ROC curve (the authors' code)"
NO_INTERVAL = (
    "no confidence interval: the five best rows are a minimum over settings and seeds measured on the evaluation "
    "part, which no bootstrap of the evaluation samples covers"
)


# ------------------------------------------------------------------------------------------------- split
def paper_seeds(count: int) -> tuple[int, ...]:
    """The seeds of ``count`` runs numbered as the authors number them (``main.py``'s default seed is 1):
    ``1..count``. Every entry point of the paper's protocol (``evaluate``, the ladder's rung 6, the objectives
    table's paper column) uses this rule.

    Examples
    --------
    >>> paper_seeds(3)
    (1, 2, 3)
    """
    return tuple(range(1, int(validation.integer(count, "seeds", minimum=1, maximum=protocol.MAX_SEEDS)) + 1))


def lambda_note(lambdas: Sequence[float]) -> str:
    """The words on the λ grid the Rel-U rows are drawn from (the authors' λ values are not in their repository).

    Examples
    --------
    >>> lambda_note((0.5,))
    "Rel-U's λ over 0.5 (the authors' code default, one λ a run; which λ values the authors ran is unknown)"
    """
    grid = ", ".join(f"{float(x):g}" for x in lambdas)
    if tuple(float(x) for x in lambdas) == (0.5,):
        return (
            f"Rel-U's λ over {grid} (the authors' code default, one λ a run; which λ values the authors ran is unknown)"
        )
    return (
        f"Rel-U's λ over {grid}, {len(lambdas)} rows per (T, ε) against Doctor's one (the authors' λ values are "
        "unknown; their code's default is 0.5 a run)"
    )


def authors_permutation(n: int, seed: int) -> np.ndarray:
    """The authors' shuffle of ``range(n)``: ``random.seed(seed); random.shuffle(indices)`` (Python's Mersenne
    Twister), so the same seed permutes the same test-set order exactly as their ``main.py`` does.

    Examples
    --------
    >>> authors_permutation(5, 1).tolist()
    [2, 3, 4, 0, 1]
    """
    if not validation.is_integer(n) or n < 1:
        raise InputError(f"need at least one sample to shuffle, got {n!r}")
    order = list(range(int(n)))
    random.Random(int(seed)).shuffle(order)  # setup, once per seed: the authors' exact permutation
    return np.asarray(order, dtype=np.int64)


def split_sizes(n: int, r: int) -> tuple[int, int, int]:
    """``(fit, set aside, evaluated)`` sample counts of the authors' split: ``n // r`` fit; of the remaining
    ``m = n - n // r``, ``m // 5`` set aside and ``m - m // 5`` evaluated.

    Examples
    --------
    >>> split_sizes(10_000, 10), split_sizes(10_000, 2), split_sizes(7, 2)
    ((1000, 1800, 7200), (5000, 1000, 4000), (3, 0, 4))
    """
    r = check_ratio(r)
    n_fit = int(n) // r
    rest = int(n) - n_fit
    return n_fit, rest // 5, rest - rest // 5


def check_ratio(r: int) -> int:
    """``r`` as an int >= 2 (:data:`RATIOS` are the authors'; any integer >= 2 is accepted)."""
    return validation.integer(r, "the ratio r (fit part = n // r)", minimum=2, maximum=1_000_000)


def authors_split(n: int, r: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fit_idx, set_aside_idx, eval_idx)``: :func:`authors_permutation`, then :func:`split_sizes` in that
    order (first the fit part, then the set-aside fifth of the rest, then the evaluated four fifths).

    Raises
    ------
    InputError
        When a part the protocol uses (fit, evaluated) would be empty.
    """
    n_fit, n_aside, n_eval = split_sizes(n, r)
    if n_fit < 1 or n_eval < 1:
        raise InputError(f"{n} samples with r = {r} leave the fit or the evaluation part empty")
    perm = authors_permutation(n, seed)
    return perm[:n_fit], perm[n_fit : n_fit + n_aside], perm[n_fit + n_aside :]


# ------------------------------------------------------------------------------------------------ metric
def fpr95(uncertainty, correct) -> float:
    """The authors' FPR at 95 % TPR: ``roc_curve(~correct, uncertainty)`` (errors positive, scikit-learn's
    default thinned curve), the FPR (share of correct predictions flagged) at the first point with TPR >= 0.95.

    ``uncertainty``: higher = more likely an error (every studio detector's orientation). Tied scores share one
    threshold; on the thinned curve that first point can lie past the full curve's (the value is then higher
    than :func:`relu_core.metrics.fpr_at_tpr` with ``positive="error"``, which reads every threshold).

    Examples
    --------
    >>> fpr95([0.1, 0.2, 0.3, 0.4, 0.5], [True, True, False, True, False])
    0.3333333333333333
    """
    fpr, tpr, _ = metrics.roc_curve(uncertainty, correct, drop_intermediate=True, positive="error")
    return float(fpr[int(np.argmax(tpr >= 0.95))])


def row_metrics(uncertainty: np.ndarray, correct: np.ndarray) -> dict[str, float]:
    """One row's metrics on an evaluation part: :func:`fpr95` (theirs), AUROC and AURC (the studio's), and
    ``fpr95_full``, errors positive at every threshold (:func:`relu_core.metrics.fpr_at_tpr`): where it differs from
    ``fpr95`` the thinned curve skipped the crossing point (tied scores)."""
    return {
        "fpr95": fpr95(uncertainty, correct),
        "fpr95_full": metrics.fpr_at_tpr(uncertainty, correct, 0.95, positive="error"),
        "auroc": metrics.auroc(uncertainty, correct),
        "aurc": metrics.aurc(uncertainty, correct),
    }


# -------------------------------------------------------------------------------------------------- rows
@dataclass(frozen=True)
class Rows:
    """Every evaluated setting, one row each: ``method[i]`` (detector key), ``temperature[i]``, ``eps[i]``,
    ``lam[i]`` (NaN where the method has none), ``seed[i]``, ``fallback[i]`` (Rel-U's D* was the Hamming
    fallback), ``accuracy[i]`` (of the evaluation part) and ``values[metric][i]`` for :data:`ROW_METRICS`."""

    method: np.ndarray
    temperature: np.ndarray
    eps: np.ndarray
    lam: np.ndarray
    seed: np.ndarray
    fallback: np.ndarray
    accuracy: np.ndarray
    values: dict[str, np.ndarray]

    def __len__(self) -> int:
        return int(self.method.shape[0])

    def record(self, i: int) -> dict[str, object]:
        """Row ``i`` as plain JSON values (``lambda`` None where the method has none)."""
        lam = float(self.lam[i])
        return {
            "method": str(self.method[i]),
            "temperature": float(self.temperature[i]),
            "eps": float(self.eps[i]),
            "lambda": None if np.isnan(lam) else lam,
            "seed": int(self.seed[i]),
            "hamming_fallback": bool(self.fallback[i]),
            "accuracy": float(self.accuracy[i]),
            **{m: float(self.values[m][i]) for m in self.values},
        }


def settings(
    method: str,
    temperatures: Sequence[float] = TEMPERATURES,
    epsilons: Sequence[float] = (0.0,),
    lambdas: Sequence[float] = LAMBDAS,
) -> list[tuple[float, float, float | None]]:
    """The ``(T, ε, λ)`` settings the authors evaluate for ``method``: MSP only ``(1, 0, None)``; ODIN and
    Doctor every (T, ε); Rel-U every (T, ε, λ). In the order T, then λ, then ε (one fitted detector a (T, λ), its
    every ε together).

    Examples
    --------
    >>> len(settings("msp")), len(settings("doctor")), len(settings("relu", epsilons=EPSILONS))
    (1, 11, 495)
    """
    key = detectors.detector_key(method)
    if key not in METHODS:
        raise InputError(f"the paper's protocol runs {', '.join(METHODS)}, not {method!r}")
    if key == "msp":
        return [(1.0, 0.0, None)]
    lams: Sequence[float | None] = tuple(lambdas) if key == "relu" else (None,)
    return [(float(t), float(e), lam) for t in temperatures for lam in lams for e in epsilons]


def _check_grids(temperatures, epsilons, lambdas) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    temps = tuple(detectors.check_temperature(t) for t in temperatures)
    lams = tuple(float(detectors.check_lambda(float(x))) for x in lambdas)
    eps = tuple(validation.non_negative(e, "ε") for e in epsilons)
    if not temps or not lams or not eps:
        raise InputError("the paper's protocol needs non-empty T, ε and λ grids")
    return temps, eps, lams


def setting_rows(
    logits,
    labels,
    splits: Sequence[tuple[int, np.ndarray, np.ndarray]],
    *,
    methods: Sequence[str] = METHODS,
    temperatures: Sequence[float] = TEMPERATURES,
    epsilons: Sequence[float] = (0.0,),
    lambdas: Sequence[float] = LAMBDAS,
    perturbation: protocol.Perturbation | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> Rows:
    """Every (method, T, ε, λ) setting fitted on each split's fit part and evaluated on its evaluation part.

    Parameters
    ----------
    logits, labels : array-like
        (N, C) clean logits and (N,) labels; correctness is read from the clean logits (as the authors do).
    splits : sequence of (seed, fit_idx, eval_idx)
        :func:`authors_split` per seed for the paper's protocol; any other split (the ladder's) works the same.
    methods : sequence of str
        Among :data:`METHODS`.
    temperatures, epsilons, lambdas : sequence of float
        The grids (:func:`settings` says which method gets which).
    perturbation : callable, optional
        ``perturbation(fitted detector, eval_idx, positive εs) -> (len(εs), len(eval_idx))`` uncertainty
        (:class:`relu_core.preprocessing.Perturbation`; needs the run's model): one call per fitted detector and
        split. An ε > 0 without it raises InputError. ε = 0 is always scored from the clean logits.
    progress, cancel : callable, optional
        ``progress(done, total, message)`` per (split, method); ``cancel()`` True raises :class:`Cancelled`.

    Returns
    -------
    Rows
        In order split, method, then :func:`settings`' order.
    """
    temps, eps_grid, lams = _check_grids(temperatures, epsilons, lambdas)
    methods = tuple(detectors.detector_key(m) for m in methods)
    positive = tuple(e for e in eps_grid if e > 0)
    if positive and perturbation is None:
        raise InputError("ε > 0 needs the run's model and images (input pre-processing): this run has logits only")
    logits = np.asarray(logits)
    correct = protocol.correctness(logits, np.asarray(labels))
    probs_at: dict[float, np.ndarray] = {}

    def probs(t: float) -> np.ndarray:
        if t not in probs_at:
            probs_at[t] = np.asarray(detectors.softmax(logits, t))
        return probs_at[t]

    out: dict[str, list] = {k: [] for k in ("method", "t", "eps", "lam", "seed", "fallback", "accuracy")}
    values: dict[str, list[float]] = {m: [] for m in (*ROW_METRICS, "fpr95_full")}
    total = len(splits) * len(methods)
    for s, (seed, fit_idx, eval_idx) in enumerate(splits):
        fit_idx, eval_idx = np.asarray(fit_idx, dtype=np.int64), np.asarray(eval_idx, dtype=np.int64)
        c_eval = correct[eval_idx]
        protocol.check_evaluable(c_eval)
        accuracy = float(c_eval.mean())
        for j, key in enumerate(methods):
            if cancel is not None and cancel():
                raise Cancelled("the paper's protocol cancelled")
            moments: dict[float, detectors.Moments] = {}
            fitted: tuple | None = None  # (T, λ, detector, {ε > 0: its scores}) of the last fitted detector
            for t, e, lam in settings(key, temps, eps_grid, lams):
                if fitted is None or fitted[:2] != (t, lam):
                    detector = detectors.make_detector(key, temperature=t, lam=0.5 if lam is None else lam)
                    if key == "relu":
                        if t not in moments:
                            moments[t] = detectors.second_moments(probs(t)[fit_idx], correct[fit_idx])
                        detector.fit_moments(moments[t])
                    nudged = {}
                    if positive and key != "msp":  # one backward pass, one forward pass per ε
                        grid = np.asarray(perturbation(detector, eval_idx, positive), dtype=np.float64)
                        nudged = dict(zip(positive, grid))
                    fitted = (t, lam, detector, nudged)
                detector, nudged = fitted[2], fitted[3]
                if e > 0:
                    uncertainty = nudged[e]
                else:
                    uncertainty = np.asarray(detector.score_probs(probs(t)[eval_idx]), dtype=np.float64)
                for m, v in row_metrics(uncertainty, c_eval).items():
                    values[m].append(v)
                out["method"].append(key)
                out["t"].append(t)
                out["eps"].append(e)
                out["lam"].append(np.nan if lam is None else lam)
                out["seed"].append(int(seed))
                out["fallback"].append(bool(detector.fallback_))
                out["accuracy"].append(accuracy)
            if progress is not None:
                progress(s * len(methods) + j + 1, total, f"seed {seed}: {detectors.label(key)}")
    return Rows(
        method=np.asarray(out["method"], dtype=object),
        temperature=np.asarray(out["t"], dtype=np.float64),
        eps=np.asarray(out["eps"], dtype=np.float64),
        lam=np.asarray(out["lam"], dtype=np.float64),
        seed=np.asarray(out["seed"], dtype=np.int64),
        fallback=np.asarray(out["fallback"], dtype=bool),
        accuracy=np.asarray(out["accuracy"], dtype=np.float64),
        values={m: np.asarray(v, dtype=np.float64) for m, v in values.items()},
    )


# ------------------------------------------------------------------------------------------- aggregation
@dataclass(frozen=True)
class Aggregate:
    """One method's ``metric`` over its five best rows by ``selected_by``: the mean and std over those rows
    (``ddof=1``, pandas' default; NaN for a single row; the spread of five rows, not a standard error) and the
    row indices kept (best first)."""

    method: str
    metric: str
    mean: float
    std: float
    rows: tuple[int, ...]
    selected_by: str = SELECT_BY


def best_rows(values: np.ndarray, higher_is_better: bool, k: int = TOP_K) -> np.ndarray:
    """Indices of the ``k`` best ``values`` (best first), ties at the boundary going to the rows that come last
    (the authors' stable sort towards the best, then ``tail(k)``).

    Examples
    --------
    >>> best_rows(np.array([0.3, 0.1, 0.2, 0.1]), higher_is_better=False, k=2).tolist()
    [3, 1]
    """
    values = np.asarray(values, dtype=np.float64)
    later_first = -np.arange(values.shape[0])
    order = np.lexsort((later_first, -values if higher_is_better else values))
    return order[: min(int(k), values.shape[0])]


def _column(rows: Rows, metric: str) -> np.ndarray:
    if metric == "accuracy":
        return rows.accuracy
    if metric not in rows.values:
        raise InputError(f"metric must be one of {', '.join((*rows.values, 'accuracy'))}, got {metric!r}")
    return rows.values[metric]


def _higher_is_better(metric: str) -> bool:
    if metric == "accuracy":
        return True
    return metric_info.get(metric, "metric").higher_is_better if metric in ROW_METRICS else False  # fpr95_full


def aggregate(
    rows: Rows, metric: str = "fpr95", k: int = TOP_K, select_by: str | None = SELECT_BY
) -> dict[str, Aggregate]:
    """Per method, the mean and std (``ddof=1``) of ``metric`` over the ``k`` rows best by ``select_by`` over
    all settings and seeds together (``src/utils/tables.py``).

    ``select_by``: ``"fpr95"`` (default, the committed script: the ``k`` lowest-FPR95 rows, every metric and
    ``"accuracy"`` read at those same rows), another row metric, or None (each ``metric`` its own ``k`` best:
    the script with its ``metric`` line edited). The better direction is
    :data:`relu_core.metric_info.METRICS`' (``fpr95_full``: lower; accuracy: higher).

    Examples
    --------
    >>> rows = Rows(np.array(["relu"] * 3, dtype=object), np.ones(3), np.zeros(3), np.ones(3), np.arange(3),
    ...             np.zeros(3, bool), np.array([0.9, 0.8, 0.7]),
    ...             {"fpr95": np.array([0.2, 0.1, 0.3]), "auroc": np.array([0.9, 0.8, 0.95])})
    >>> aggregate(rows, "auroc", k=1)["relu"].mean, aggregate(rows, "auroc", k=1, select_by=None)["relu"].mean
    (0.8, 0.95)
    """
    values = _column(rows, metric)
    chooser = metric if select_by is None else select_by
    criterion, higher = _column(rows, chooser), _higher_is_better(chooser)
    out: dict[str, Aggregate] = {}
    for key in dict.fromkeys(rows.method.tolist()):
        members = np.flatnonzero(rows.method == key)
        kept = members[best_rows(criterion[members], higher, k)]
        chosen = values[kept]
        std = float(np.std(chosen, ddof=1)) if chosen.size > 1 else float("nan")
        out[key] = Aggregate(key, metric, float(np.mean(chosen)), std, tuple(int(i) for i in kept), chooser)
    return out


def aggregates_of(rows: Rows, select_by: str | None = SELECT_BY) -> dict[str, dict[str, Aggregate]]:
    """:func:`aggregate` of every :data:`REPORTED` metric (accuracy too) under one selection rule."""
    return {m: aggregate(rows, m, select_by=select_by) for m in REPORTED}


# ----------------------------------------------------------------------------------------------- protocol
@dataclass(frozen=True)
class PaperResult:
    """The paper's protocol on one run: every row, the aggregation per metric, and what was run."""

    rows: Rows
    aggregates: dict[str, dict[str, Aggregate]]
    r: int
    seeds: tuple[int, ...]
    n: int
    sizes: tuple[int, int, int]
    temperatures: tuple[float, ...]
    epsilons: tuple[float, ...]
    lambdas: tuple[float, ...]
    label: str = LABEL
    fpr_convention: str = FPR_CONVENTION
    notes: tuple[str, ...] = field(default=())
    select_by: str | None = SELECT_BY

    def difference(self, metric: str, a: str = "relu", b: str = "doctor") -> float:
        """``mean of a's five best − mean of b's five best`` for ``metric`` (no interval: :data:`NO_INTERVAL`)."""
        return self.aggregates[metric][a].mean - self.aggregates[metric][b].mean

    def to_dict(self) -> dict[str, object]:
        """Strict-JSON-ready: the label, split, grids, per method and metric the mean, std and kept rows."""
        methods = list(dict.fromkeys(self.rows.method.tolist()))
        out: dict[str, object] = {
            "protocol": self.label,
            "fpr_convention": self.fpr_convention,
            "r": self.r,
            "seeds": list(self.seeds),
            "n": self.n,
            "fit": self.sizes[0],
            "set_aside": self.sizes[1],
            "evaluated": self.sizes[2],
            "temperatures": list(self.temperatures),
            "epsilons": list(self.epsilons),
            "lambdas": list(self.lambdas),
            "rows_per_method": {k: int(np.count_nonzero(self.rows.method == k)) for k in methods},
            "aggregation": f"mean and std (ddof=1, the spread of {TOP_K} rows) of the {TOP_K} best rows per method "
            "over all settings x seeds",
            "selection": SELECTION_LABELS.get(self.select_by, f"the five best rows by {self.select_by}"),
            "precision": f"{PRECISION} on the ε path (scores float64)" if any(self.epsilons) else None,
            "methods": {
                k: {
                    m: {
                        "mean": agg[k].mean,
                        "std": None if np.isnan(agg[k].std) else agg[k].std,
                        "rows": [self.rows.record(i) for i in agg[k].rows],
                    }
                    for m, agg in self.aggregates.items()
                }
                for k in methods
            },
            "interval": NO_INTERVAL,
            "notes": list(self.notes),
        }
        if "relu" in methods and "doctor" in methods:
            out["relu_minus_doctor"] = {m: self.difference(m) for m in self.aggregates}
        return out


def evaluate(
    logits,
    labels,
    *,
    r: int = DEFAULT_RATIO,
    seeds: int | Sequence[int] = 10,
    methods: Sequence[str] = METHODS,
    temperatures: Sequence[float] = TEMPERATURES,
    epsilons: Sequence[float] = (0.0,),
    lambdas: Sequence[float] = LAMBDAS,
    perturbation: protocol.Perturbation | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
    select_by: str | None = SELECT_BY,
) -> PaperResult:
    """The paper's protocol end to end on one model: :func:`authors_split` per seed, :func:`setting_rows`,
    :func:`aggregate` of each of :data:`REPORTED` with ``select_by`` (default: the five lowest-FPR95 rows, every
    metric read at them, as the committed ``tables.py``; None: each metric's own five best).

    ``seeds``: a count (seeds 1..S, :func:`paper_seeds`, as the authors number them) or explicit seeds; every seed
    uses the same logits (:data:`ONE_MODEL`). ε defaults to 0 only (logits-only runs); pass :data:`EPSILONS` and a
    ``perturbation`` (:func:`setting_rows`, made with ``precision=PRECISION``) for a model run.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 600)
    >>> logits = rng.normal(size=(600, 3)) + 1.5 * np.eye(3)[labels]
    >>> result = evaluate(logits, labels, r=2, seeds=3)
    >>> result.sizes, len(result.rows), len(result.aggregates["fpr95"]["relu"].rows)  # 3 seeds x (1 + 11 + 11 + 55)
    ((300, 60, 240), 234, 5)
    """
    r = check_ratio(r)
    if validation.is_integer(seeds):
        seeds = paper_seeds(seeds)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise InputError("the paper's protocol needs at least one seed")
    logits = np.asarray(logits)
    n = int(logits.shape[0]) if logits.ndim == 2 else 0
    splits = []
    for seed in seeds:
        fit_idx, _aside, eval_idx = authors_split(n, r, seed)
        splits.append((seed, fit_idx, eval_idx))
    rows = setting_rows(
        logits,
        labels,
        splits,
        methods=methods,
        temperatures=temperatures,
        epsilons=epsilons,
        lambdas=lambdas,
        perturbation=perturbation,
        progress=progress,
        cancel=cancel,
    )
    temps, eps_grid, lams = _check_grids(temperatures, epsilons, lambdas)
    if select_by is not None:
        _column(rows, select_by)
    notes = [ONE_MODEL, lambda_note(lams)]
    if select_by is None:
        notes.append("each metric's own five best rows (tables.py with its metric edited, not as committed)")
    if eps_grid == (0.0,):
        notes.append("ε = 0 only (logits, no model): the authors also search ε over " + ", ".join(map(str, EPSILONS)))
    if rows.fallback.any():
        notes.append(f"{int(rows.fallback.sum())} Rel-U rows used the Hamming fallback (= Doctor's ranking)")
    return PaperResult(
        rows=rows,
        aggregates=aggregates_of(rows, select_by),
        r=r,
        seeds=seeds,
        n=n,
        sizes=split_sizes(n, r),
        temperatures=temps,
        epsilons=eps_grid,
        lambdas=lams,
        notes=tuple(notes),
        select_by=select_by,
    )
