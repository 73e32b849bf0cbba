"""The widget-free part of the app: Explore's compute path (one setting of run, T, λ, split, detectors, ε ->
scores, curves, metrics), the Start page's verdict, the display tables the pages share, and the process's
registry of runs these computations are keyed on.

Caches are keyed on run ids (content hashes) and plain hyperparameters, never on the big arrays: a run lives
once per process in :data:`RUNS` (bounded, least recently used dropped) and every cached function receives
its ``run_id``; each cache is a bounded least-recently-used mapping (:func:`_memo`). Nothing here imports
Streamlit, so ``bench/bench_app.py`` times exactly what a slider change runs.
"""

from __future__ import annotations

import functools
import io
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np
import pandas as pd

from relu_core import (
    cache,
    detectors,
    figures,
    jobs,
    limits,
    metrics,
    preprocessing,
    protocol,
    stats,
    threads,
)
from relu_core.errors import InputError
from relu_core.registry import LRURegistry

F = TypeVar("F", bound=Callable)

# ------------------------------------------------------------------------------------------- constants

#: The T slider: ten steps per decade from 0.1 to 1000 (two significant digits) plus the paper's grid.
TEMPERATURES: tuple[float, ...] = tuple(
    sorted({float(f"{10 ** (k / 10):.2g}") for k in range(-10, 31)} | set(detectors.TEMPERATURE_GRID))
)
#: Input pre-processing magnitudes (the paper's grid, 0 = no pre-processing).
EPSILONS = preprocessing.PAPER_EPSILONS
#: The detectors Explore offers, the paired Rel-U and Doctor first (they follow the T and ε controls; the
#: others keep their standard setting).
DETECTOR_CHOICES: tuple[str, ...] = tuple(dict.fromkeys([*protocol.PAIRED, *detectors.protocol_keys()]))
#: Thin ROC / risk-coverage lines to this many points when drawing (metrics use every sample).
CURVE_POINTS = 400

# ------------------------------------------------------------------------------------------- runs

#: Runs kept for this process (content-addressed, so sessions share them), least recently used dropped.
RUNS = LRURegistry(limits.MAX_RUNS)


def register_run(run) -> str:
    """Keep ``run`` for this process (runs are content-addressed, so sessions can share them)."""
    RUNS.setdefault(run.run_id, run)
    return run.run_id


def get_run(run_id: str):
    """The registered run ``run_id`` (InputError when unknown, e.g. dropped from the bounded registry)."""
    try:
        return RUNS[run_id]
    except KeyError:
        raise InputError(
            f"this run was dropped from memory (the server keeps the {limits.MAX_RUNS} most recently "
            "used runs): load it again"
        ) from None


def device_name() -> str:
    """The device the engine would compute on (named in the progress box; a GPU computes ε passes whole)."""
    try:
        from relu_core import engine

        device = engine.select_device("auto")
    except ImportError:
        return "cpu"
    if device.type == "cuda":
        import torch

        return f"GPU ({torch.cuda.get_device_name(device)})"
    return str(device)


# ------------------------------------------------------------------------------------------- explore compute


def _memo(bound: int) -> Callable[[F], F]:
    """Cache a function of hashable arguments (run ids, hyperparameters) in a process-wide
    :class:`LRURegistry` of ``bound`` entries, shared by every session; ``.cache`` is that registry."""

    def decorate(function: F) -> F:
        cache = LRURegistry(bound)

        @functools.wraps(function)
        def wrapper(*args):
            try:
                return cache[args]
            except KeyError:
                pass
            value = function(*args)
            cache[args] = value
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


@_memo(24)
def probs_at(run_id: str, temperature: float) -> np.ndarray:
    """``softmax(logits / T)`` of a run, once per (run, T)."""
    return detectors.softmax(get_run(run_id).logits, temperature)


@_memo(8)
def correctness(run_id: str) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, correct) of a run."""
    run = get_run(run_id)
    return np.argmax(run.logits, axis=1), protocol.correctness(run.logits, run.labels)


@_memo(32)
def split_for(run_id: str, tune_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(tune_idx, eval_idx), stratified by correctness as in ``protocol.evaluate``."""
    _, correct = correctness(run_id)
    return protocol.split_indices(len(correct), tune_fraction, seed, stratify=correct)


@_memo(64)
def fixed_scores(run_id: str, key: str) -> np.ndarray:
    """Uncertainty of a training-free detector at its standard setting, on every sample of the run."""
    run = get_run(run_id)
    detector = detectors.make_detector(key)
    if not detector.accepts_probs:
        return detector.score(run.logits)
    return detector.score_probs(probs_at(run_id, detector.temperature))


@_memo(32)
def confusion_figure(run_id: str, tune_fraction: float, seed: int):
    """The tuning split's confusion matrix and its figure (independent of T and lambda: built once)."""
    run = get_run(run_id)
    predictions, _ = correctness(run_id)
    tune_idx, _ = split_for(run_id, tune_fraction, seed)
    cm = metrics.confusion_matrix(predictions[tune_idx], run.labels[tune_idx], len(run.class_names))
    return cm, figures.confusion_heatmap(cm, run.class_names, title="Confusion matrix (tuning split)")


@dataclass
class DetectorView:
    """One detector on a view: uncertainty on every sample and on the evaluation split, curves, metrics."""

    name: str
    uncertainty: np.ndarray  # all samples (the evaluation split's may be replaced by perturbed scores)
    eval_uncertainty: np.ndarray
    fpr: np.ndarray
    tpr: np.ndarray
    coverage: np.ndarray
    risk: np.ndarray
    summary: dict[str, float]


@dataclass
class ExploreView:
    """Everything the Explore panels show for one setting of (run, T, lambda, split, detectors, eps)."""

    run_id: str
    tune_idx: np.ndarray
    eval_idx: np.ndarray
    predictions: np.ndarray
    correct: np.ndarray
    dstar: np.ndarray
    lam_used: float
    fallback: bool
    accuracy_eval: float
    detectors: dict[str, DetectorView] = field(default_factory=dict)
    #: Rel-U − Doctor on the evaluation split with its paired bootstrap interval, per metric.
    paired: dict[str, stats.PairedDifference] = field(default_factory=dict)


@threads.small_work
def explore(
    run_id: str,
    temperature: float,
    lam: float | str,
    tune_fraction: float,
    seed: int,
    keys: Sequence[str],
    perturbed: dict[str, np.ndarray] | None = None,
    eval_subset: np.ndarray | None = None,
) -> ExploreView:
    """The compute path of one Explore setting: Rel-U fit on the tuning split at T, every detector scored,
    ROC / risk-coverage curves and metrics on the evaluation split.

    Rel-U and Doctor are always computed (the D* panel and the Rel-U-vs-Doctor gallery need them); the
    training-free baselines come from a per-run cache. ``perturbed`` maps detector keys to their
    evaluation-split uncertainty under input pre-processing, replacing the clean one; with ``eval_subset`` (a
    subsample of the evaluation split, as :func:`eps_subsample`) every detector is evaluated on it only.
    ``paired`` is left empty: :func:`paired_for` or :func:`paired_job` computes it.
    """
    get_run(run_id)  # one line (InputError) when the run was dropped from the bounded registry
    predictions, correct = correctness(run_id)
    tune_idx, eval_idx = split_for(run_id, tune_fraction, seed)
    if eval_subset is not None:
        eval_idx = eval_subset
    probs = probs_at(run_id, temperature)
    relu = detectors.RelU(lam=lam, temperature=temperature).fit_probs(probs[tune_idx], correct[tune_idx])
    scores = {"relu": relu.score_probs(probs), "doctor": detectors.Doctor(temperature).score_probs(probs)}
    for key in keys:
        if key not in scores:
            scores[key] = fixed_scores(run_id, key)
    correct_eval = correct[eval_idx]
    view = ExploreView(
        run_id,
        tune_idx,
        eval_idx,
        predictions,
        correct,
        relu.matrix_,
        float(relu.lam_),
        bool(relu.fallback_),
        float(correct_eval.mean()),
    )
    for key in dict.fromkeys([*keys, "relu", "doctor"]):
        uncertainty = scores[key]
        eval_u = perturbed[key] if perturbed and key in perturbed else uncertainty[eval_idx]
        fpr, tpr, _ = metrics.roc_curve(eval_u, correct_eval)
        coverage, risk = metrics.risk_coverage_curve(eval_u, correct_eval)
        view.detectors[key] = DetectorView(
            detectors.label(key), uncertainty, eval_u, fpr, tpr, coverage, risk, metrics.summary(eval_u, correct_eval)
        )
    return view


def paired_for(view: ExploreView, seed: int) -> dict[str, stats.PairedDifference]:
    """Rel-U − Doctor on the view's evaluation split with its paired bootstrap interval (1,000 resamples
    seeded with the split seed; about 100 ms at 10k samples, so Explore runs it as :func:`paired_job`)."""
    return stats.paired_bootstrap(
        view.detectors["relu"].eval_uncertainty,
        view.detectors["doctor"].eval_uncertainty,
        view.correct[view.eval_idx],
        seed=seed,
    )


def paired_job_key(view: ExploreView, seed: int) -> str:
    """The key of :func:`paired_job`: the content the bootstrap depends on (both detectors' evaluation scores,
    the correctness, the seed)."""
    digest = cache.array_digest(
        view.detectors["relu"].eval_uncertainty,
        view.detectors["doctor"].eval_uncertainty,
        view.correct[view.eval_idx],
        np.int64(seed),
    )
    return f"paired:{digest}"


def paired_job(view: ExploreView, seed: int) -> jobs.Job:
    """:func:`paired_for` as a background job, so that a slider never waits on the bootstrap. Keyed by the
    content it depends on (:func:`paired_job_key`): a setting seen again, in any session, reuses its result."""
    return jobs.MANAGER.submit(
        paired_job_key(view, seed), "Rel-U − Doctor paired bootstrap", lambda progress, cancel: paired_for(view, seed)
    )


#: The default settings the Start page's verdict uses (Explore opens on the same ones).
START_SETTINGS = {"temperature": 1.0, "lam": 0.5, "tune_fraction": 0.5, "seed": 0}


def start_view(run_id: str) -> ExploreView:
    """Rel-U and Doctor on ``run_id`` at :data:`START_SETTINGS`, with their paired interval."""
    s = START_SETTINGS
    view = explore(run_id, s["temperature"], s["lam"], s["tune_fraction"], s["seed"], list(protocol.PAIRED))
    view.paired = paired_for(view, s["seed"])
    return view


def start_verdict(view: ExploreView) -> str:
    """One line: Rel-U vs Doctor on the evaluation split (AUROC and FPR95, each with its paired 95 % interval,
    "no significant difference" where it covers 0)."""
    s = START_SETTINGS
    settings = f"T = {s['temperature']:g}, λ = {s['lam']:g}, {s['tune_fraction']:.0%} tuning split, seed {s['seed']}"
    n_errors = int((~view.correct[view.eval_idx]).sum())
    return (
        f"Rel-U vs Doctor at the default settings ({settings}; {view.eval_idx.size:,} evaluation samples, "
        f"{n_errors:,} errors): " + "; ".join(view.paired[m].verdict() for m in ("auroc", "fpr95")) + "."
    )


#: On CPU an ε pass first scores this many evaluation images (shown at once), then the whole split.
EPS_SUBSAMPLE = 1000


def eps_subsample(run_id: str, tune_fraction: float, seed: int) -> np.ndarray | None:
    """The evaluation-split subsample an ε pass computes first on CPU (seeded, sorted), or None (a GPU, or an
    evaluation split of at most :data:`EPS_SUBSAMPLE` samples: the whole split at once)."""
    _, eval_idx = split_for(run_id, tune_fraction, seed)
    if eval_idx.size <= EPS_SUBSAMPLE or device_name().startswith("GPU"):
        return None
    return np.sort(np.random.default_rng(seed).choice(eval_idx, EPS_SUBSAMPLE, replace=False))


def eps_job(
    run_id: str,
    temperature: float,
    lam: float | str,
    tune_fraction: float,
    seed: int,
    eps: float,
    subset: np.ndarray | None,
    *,
    session: str,
) -> jobs.Job:
    """The background ε pass of one setting: Rel-U and Doctor uncertainty on inputs pre-processed with magnitude
    ``eps`` (``preprocessing.perturbed_scores``; the engine caches it on disk), on ``subset`` of the evaluation
    split or the whole split when None. Rel-U is fitted on the clean tuning split, as in the paper.

    The job (:data:`jobs.MANAGER`) is shared by every session asking for the same setting; a new setting asked
    by ``session`` (a session id) cancels that session's previous ε passes, so only the last value is computed.
    Its result is ``{"relu": (M,), "doctor": (M,)}``."""

    def compute(progress, cancel) -> dict[str, np.ndarray]:
        run = get_run(run_id)
        if run.model is None or run.images is None:
            raise InputError("input pre-processing needs the model and the images; this run has logits only")
        _, correct = correctness(run_id)
        tune_idx, eval_idx = split_for(run_id, tune_fraction, seed)
        probs = probs_at(run_id, temperature)
        fitted = {
            "relu": detectors.RelU(lam=lam, temperature=temperature).fit_probs(probs[tune_idx], correct[tune_idx]),
            "doctor": detectors.Doctor(temperature),
        }
        return {
            key: np.asarray(
                preprocessing.perturbed_scores(
                    run.model,
                    run.images,
                    detector,
                    eps,
                    mean=run.mean,
                    std=run.std,
                    indices=eval_idx if subset is None else subset,
                    progress=progress,
                    cancel=cancel,
                ),
                dtype=np.float64,
            )
            for key, detector in fitted.items()
        }

    what = "the whole evaluation split" if subset is None else f"{subset.size:,} evaluation images"
    part = "all" if subset is None else f"sub{subset.size}"
    return jobs.MANAGER.submit(
        eps_job_key(run_id, temperature, lam, tune_fraction, seed, eps, subset),
        f"Input pre-processing ε = {eps:g} on {what}",
        compute,
        group=f"eps:{session}:{part}",
    )


def eps_job_key(
    run_id: str, temperature: float, lam: float | str, tune_fraction: float, seed: int, eps: float, subset
) -> str:
    """The key of :func:`eps_job`'s job for this setting (e.g. to remember that it failed without asking again)."""
    part = "all" if subset is None else f"sub{subset.size}"
    return f"eps:{run_id}:{temperature:g}:{lam}:{tune_fraction:g}:{seed}:{eps:g}:{part}"


def view_figures(
    view: ExploreView,
    class_names: Sequence[str],
    points: dict[str, metrics.OperatingPoint] | None = None,
    show_keys: Sequence[str] | None = None,
):
    """(D* heatmap, ROC figure, risk-coverage figure) of a view, operating points marked."""
    keys = list(show_keys) if show_keys is not None else list(view.detectors)
    shown = {k: view.detectors[k] for k in keys}
    points = points or {}
    roc = figures.roc_figure(
        {d.name: (d.fpr, d.tpr, d.summary["auroc"]) for d in shown.values()},
        {view.detectors[k].name: (p.fpr, p.tpr) for k, p in points.items() if k in shown},
        max_points=CURVE_POINTS,
        title="ROC, evaluation split",
    )
    rc = figures.risk_coverage_figure(
        {d.name: (d.coverage, d.risk, d.summary["aurc"]) for d in shown.values()},
        {view.detectors[k].name: (p.coverage, p.risk) for k, p in points.items() if k in shown},
        max_points=CURVE_POINTS,
        title="Risk-coverage, evaluation split",
    )
    heat = figures.dstar_heatmap(view.dstar, class_names, title=f"D* (Rel-U, λ = {view.lam_used:.3g})")
    return heat, roc, rc


# ------------------------------------------------------------------------------------------- display helpers


def view_files(
    view: ExploreView,
    figs: dict[str, object],
    table: pd.DataFrame,
    settings: dict[str, object],
    class_names: Sequence[str],
    *,
    paired: dict[str, stats.PairedDifference],
    operating: pd.DataFrame,
    provenance: dict[str, str],
) -> dict[str, str | bytes]:
    """The data of a view, file name -> content: the fitted D* (``dstar_matrix.csv`` with class names,
    ``dstar.npy`` exact), each figure of ``figs`` but the D* heatmap as ``<name>.csv`` (its traces' data, as
    drawn: curves of at most a few hundred points, ``figures.figure_csv``), the metrics ``table``
    (``metrics.csv``), the ``paired`` Rel-U − Doctor differences with their intervals (``paired.csv``), the
    ``operating`` point table (``operating_point.csv``), and the ``settings`` with the run's ``provenance``
    (``settings.json``: run id, model, weights hash, data set, versions)."""
    buffer = io.BytesIO()
    np.save(buffer, view.dstar)
    paired_csv = pd.DataFrame(
        [
            {
                "metric": m,
                "relu_minus_doctor": d.estimate,
                "ci_low": d.low,
                "ci_high": d.high,
                "confidence": d.confidence,
                "n_resamples": d.n_resamples,
                "significant": d.significant,
                "verdict": d.verdict(),
            }
            for m, d in paired.items()
        ]
    )
    described = {"settings": {k: str(v) for k, v in settings.items()}, "provenance": dict(provenance)}
    return {
        "dstar_matrix.csv": figures.matrix_csv(view.dstar, class_names),
        "dstar.npy": buffer.getvalue(),
        **{f"{name}.csv": figures.figure_csv(fig) for name, fig in figs.items() if name != "dstar"},
        "metrics.csv": table.to_csv(),
        "paired.csv": paired_csv.to_csv(index=False),
        "operating_point.csv": operating.to_csv(),
        "settings.json": json.dumps(described, indent=2, ensure_ascii=False),
    }


def readable_hyperparameters(frame: pd.DataFrame) -> pd.DataFrame:
    """The selected hyperparameters with readable headers: T, λ (– where none), the fallback in words."""
    return pd.DataFrame(
        {
            "seed": frame["seed"],
            "detector": frame["detector"],
            "T": [f"{t:g}" for t in frame["temperature"]],
            "λ": ["–" if lam is None or pd.isna(lam) else f"{lam:g}" for lam in frame["lam"]],
            "D*": [
                protocol.FALLBACK_LABEL if f else ("learned" if d == "Rel-U" else "–")
                for f, d in zip(frame["hamming_fallback"], frame["detector"])
            ],
            "settings searched": frame["settings_searched"],
        }
    )


def thumbnail(image: np.ndarray, size: int = 72) -> np.ndarray:
    """An uint8 (H, W, C) image scaled up (nearest neighbour) so that tiny images stay visible."""
    image = image[..., 0] if image.shape[-1] == 1 else image
    factor = max(1, size // max(image.shape[:2]))
    return np.repeat(np.repeat(image, factor, axis=0), factor, axis=1)
