"""Ablations (the paper's Figure 4 and its hyperparameter appendix): FPR95 and AUROC against λ, T and ε.

One setting at a time, the others at their defaults (T = 1, λ = 0.5, ε = 0; ODIN at T = 1000), on the
protocol's seeded splits (:func:`relu_core.protocol.split_indices`, stratified by correctness): D* is fitted
on each tuning part only, every metric is computed on the evaluation part only, so the λ = 0.5 point of the
λ curve is exactly :func:`relu_core.protocol.evaluate` at λ = 0.5.

- λ ∈ [0, 1] (default 0, 0.1, ..., 1): Rel-U, and Doctor (which has no λ: a flat line). λ = 0 empties D*,
  whose Hamming fallback ranks exactly like Doctor (counted in the notes). The mark is λ = N₊/(N₊ + N₋) of
  the tuning parts (``"auto"``), mean over seeds.
- T on a log grid 0.1 .. 1000 (4 points per decade): Rel-U (λ = 0.5), Doctor and ODIN (−max softmax(z/T)).
- ε on the paper's grid (runs with a model and its images only): Rel-U, Doctor (T = 1) and ODIN (T = 1000)
  on inputs moved by one signed-gradient step (:mod:`relu_core.preprocessing`); D* is fitted on the clean
  tuning logits. On a CPU the ε axis runs on a seeded subsample of the images and fewer seeds (both stated
  in the result), because every point runs the model forward and backward.

Speed: one softmax per T for the whole set, the second moments of each tuning part once per (T, seed) and
D* per λ from them (:func:`relu_core.detectors.relu_matrix_from_moments`); Doctor's scores once per (T, seed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relu_core import (
    cache,
    corruptions,
    detectors,
    engine,
    metrics,
    models,
    preprocessing,
    protocol,
    robustness,
    validation,
)
from relu_core.errors import InputError
from relu_core.progress import Cancel, Progress, report
from relu_core.studies import base
from relu_core.threads import small_work

NAME = "ablation"
TITLE = "Ablations: FPR95 and AUROC against λ, T and ε"
AXES = ("lambda", "temperature", "eps")
LAMBDAS: tuple[float, ...] = tuple(round(k / 10, 1) for k in range(11))
#: 0.1 .. 1000, four points per decade (1 and the decades exactly).
TEMPERATURES: tuple[float, ...] = tuple(float(f"{10 ** (k / 4):.3g}") for k in range(-4, 13))
#: The paper's input pre-processing grid (0 = none).
EPSILONS = preprocessing.PAPER_EPSILONS
DEFAULT_T, DEFAULT_LAMBDA, ODIN_T = 1.0, 0.5, 1000.0
#: Seeds of the ε axis on a CPU when no seeds are given (every point runs the model).
CPU_EPS_SEEDS = 3
SERIES = {
    "lambda": {"x_label": "λ", "log_x": False},
    "temperature": {"x_label": "T", "log_x": True},
    "eps": {"x_label": "ε", "log_x": False},
}


def _grid(values: Sequence[float], check, what: str) -> tuple[float, ...]:
    grid = tuple(float(check(v)) for v in values)
    if not grid:
        raise InputError(f"the {what} grid is empty")
    return grid


@small_work
def lambda_sweep(
    logits: np.ndarray,
    splits: protocol.SeededSplits,
    lambdas: Sequence[float],
    collector: base.Collector,
    cancel: Cancel | None = None,
) -> None:
    """Rel-U at every λ and Doctor (flat) at T = 1 on every split, into ``collector`` (series "lambda")."""
    correct = splits.correct
    probs = detectors.softmax(logits, DEFAULT_T)
    collector.tie_on(logits)
    for seed, tune, evaluation in splits.checked(cancel, "λ ablation"):
        c_eval = correct[evaluation]
        doctor = collector.tied(evaluation, detectors.gini(probs[evaluation]))
        doctor_values = metrics.summary(doctor, c_eval)
        fit = base.RelUFit(probs, correct, tune)  # the tuning part's moments once, D* per λ
        for lam in lambdas:
            collector.add_relu("lambda", lam, seed, fit, lam, evaluation)
            collector.add("lambda", lam, base.DOCTOR, seed, doctor, c_eval, doctor_values, samples=evaluation)


@small_work
def temperature_sweep(
    logits: np.ndarray,
    splits: protocol.SeededSplits,
    temperatures: Sequence[float],
    collector: base.Collector,
    cancel: Cancel | None = None,
    progress: Progress | None = None,
) -> None:
    """Rel-U (λ = 0.5), Doctor and ODIN at every T on every split (series "temperature"), one softmax per T."""
    correct = splits.correct
    collector.tie_on(logits)
    for i, t in enumerate(temperatures):
        base.checkpoint(cancel, "T ablation")
        report(progress, i, len(temperatures), f"T = {t:g}")
        probs = detectors.softmax(logits, t)
        for seed, tune, evaluation in splits:
            p_eval, c_eval = probs[evaluation], correct[evaluation]
            collector.add_relu("temperature", t, seed, base.RelUFit(probs, correct, tune), DEFAULT_LAMBDA, evaluation)
            collector.add("temperature", t, base.DOCTOR, seed, detectors.gini(p_eval), c_eval, samples=evaluation)
            collector.add("temperature", t, "ODIN", seed, -p_eval.max(axis=1), c_eval, samples=evaluation)


def eps_sweep(
    run,
    sample: np.ndarray,
    splits: protocol.SeededSplits,
    epsilons: Sequence[float],
    collector: base.Collector,
    *,
    device: str = "auto",
    cancel: Cancel | None = None,
    progress: Progress | None = None,
) -> None:
    """Rel-U (T = 1, λ = 0.5), Doctor (T = 1) and ODIN (T = 1000) at every ε (series "eps").

    ``sample`` holds the run's image indices in play (sorted); ``splits`` are of those images (positions inside
    ``sample``). D* is fitted on the clean tuning logits; ε = 0 scores the clean logits, ε > 0 the perturbed
    inputs (cached on disk by :func:`preprocessing.perturbed_scores`). Doctor and ODIN do not depend on the
    split, so their perturbed scores are computed once for the whole sample.
    """
    logits, correct = np.asarray(run.logits)[sample], splits.correct
    probs = detectors.softmax(logits, DEFAULT_T)
    collector.tie_on(logits)
    fixed = {base.DOCTOR: detectors.make_detector("doctor", DEFAULT_T), "ODIN": detectors.make_detector("odin", ODIN_T)}
    total = len(epsilons) * (len(fixed) + len(splits.seeds))
    done = 0
    for eps in epsilons:
        perturbed = preprocessing.make_perturbed_scorer(run, eps, device=device, cancel=cancel)

        def scores(detector, positions, eps=eps, perturbed=perturbed):
            nonlocal done
            base.checkpoint(cancel, "ε ablation")
            report(progress, done, total, f"ε = {eps:g}: {detector.name}")
            done += 1
            if eps == 0:
                return np.asarray(detector.score(logits[positions]), dtype=np.float64)
            return perturbed(detector, sample[positions])

        everything = np.arange(len(sample))
        fixed_scores = {name: scores(d, everything) for name, d in fixed.items()}
        for seed, tune, evaluation in splits:
            relu = detectors.make_detector("relu", DEFAULT_T, DEFAULT_LAMBDA).fit_probs(probs[tune], correct[tune])
            if relu.fallback_:
                collector.note_fallback("eps", eps)
            c_eval = correct[evaluation]
            perturbed = eps > 0
            relu_scores = scores(relu, evaluation)
            collector.add("eps", eps, base.RELU, seed, relu_scores, c_eval, samples=evaluation, perturbed=perturbed)
            for name, values in fixed_scores.items():
                collector.add(
                    "eps", eps, name, seed, values[evaluation], c_eval, samples=evaluation, perturbed=perturbed
                )


def run_study(
    run,
    *,
    axes: Sequence[str] = ("lambda", "temperature"),
    lambdas: Sequence[float] = LAMBDAS,
    temperatures: Sequence[float] = TEMPERATURES,
    epsilons: Sequence[float] = EPSILONS,
    tune_fraction: float = 0.5,
    seeds: int | Sequence[int] | None = None,
    subsample: int | None | str = "auto",
    device: str = "auto",
    **options,
) -> base.StudyResult:
    """The ablation study on ``run`` (a :class:`relu_core.runs.Run`).

    ``axes``: any of :data:`AXES`; ``"eps"`` needs the run's model and images. ``seeds``: a count or the
    seeds; None means :data:`base.DEFAULT_SEEDS`, and :data:`CPU_EPS_SEEDS` for the ε axis on a CPU.
    ``subsample`` (ε axis only): images drawn (seeded) before splitting; ``"auto"`` is
    :data:`relu_core.robustness.CPU_SUBSAMPLE` on a CPU and every image on a GPU; None is every image.
    ``device`` runs the model for the ε axis. The other keyword ``options`` as :func:`base.options`.
    """
    axes = tuple(dict.fromkeys(axes))
    unknown = [a for a in axes if a not in AXES]
    if not axes:
        raise InputError(f"choose at least one axis of the ablation: {', '.join(AXES)}")
    if unknown:
        raise InputError(f"unknown ablation axis {unknown}: choose from {', '.join(AXES)}")
    lambdas = _grid(lambdas, detectors.check_lambda, "λ")
    if any(isinstance(v, str) for v in lambdas):
        raise InputError('the λ grid takes numbers in [0, 1] ("auto" is marked on the plot)')
    temperatures = _grid(temperatures, detectors.check_temperature, "T")
    epsilons = _grid(epsilons, lambda value: validation.non_negative(value, "ε"), "ε")
    tune_fraction = validation.fraction(tune_fraction, "the tuning fraction")
    common = base.options(seeds=seeds, **options)
    progress, cancel = common.progress, common.cancel
    correct = protocol.correctness(run.logits, run.labels)
    cpu = engine.select_device(device).type == "cpu"
    key = {"axes": axes, "lambdas": lambdas, "temperatures": temperatures, "tune_fraction": tune_fraction}
    sample = None
    if "eps" in axes:
        if run.model is None or run.images is None:
            raise InputError(
                "the ε ablation perturbs the inputs, so it needs a run with its model and images "
                "(uploaded logits cannot be perturbed)"
            )
        seeds_eps = base.resolve_seeds(seeds, CPU_EPS_SEEDS if cpu else base.DEFAULT_SEEDS)
        if subsample == "auto":
            subsample = robustness.CPU_SUBSAMPLE if cpu else None
        sample = corruptions.subsample_indices(len(run.labels), subsample, 0)
        key.update(
            epsilons=epsilons,
            seeds_eps=seeds_eps,
            subsample=len(sample),
            weights=models.weights_hash(run.model),
            images=cache.array_digest(run.images),
            precision=engine.resolve_precision("auto", engine.select_device(device)),
        )

    def sweep(collector: base.Collector) -> base.Sweep:
        notes: list[str] = []
        series: dict[str, dict] = {}
        settings = {
            "axes": list(axes),
            "tune_fraction": tune_fraction,
            "defaults": {"T": DEFAULT_T, "lambda": DEFAULT_LAMBDA, "eps": 0.0, "odin_T": ODIN_T},
        }
        splits = protocol.seeded_splits(correct, tune_fraction, common.seeds)
        if "lambda" in axes:
            report(progress, 0, len(axes), "λ ablation")
            lambda_sweep(run.logits, splits, lambdas, collector, cancel=cancel)
            auto = float(np.mean([correct[tune].mean() for _, tune, _ in splits]))
            series["lambda"] = {
                **SERIES["lambda"],
                "marks": {f"λ = N₊/(N₊ + N₋) = {auto:.2f}": auto, "default λ = 0.5": 0.5},
            }
            settings.update(lambdas=list(lambdas), lambda_auto=auto)
        if "temperature" in axes:
            report(progress, len(series), len(axes), "T ablation")
            temperature_sweep(run.logits, splits, temperatures, collector, cancel=cancel, progress=progress)
            series["temperature"] = {**SERIES["temperature"], "marks": {"T = 1": 1.0}}
            settings["temperatures"] = list(temperatures)
        if "eps" in axes:
            splits_eps = protocol.seeded_splits(correct[sample], tune_fraction, seeds_eps)

            def eps_progress(done: int, total: int, message: str) -> None:
                report(progress, len(series) * total + done, len(axes) * total, message)

            eps_sweep(run, sample, splits_eps, epsilons, collector, device=device, cancel=cancel, progress=eps_progress)
            series["eps"] = {**SERIES["eps"], "marks": {"ε = 0": 0.0}}
            settings.update(epsilons=list(epsilons), seeds_eps=list(seeds_eps), subsample=len(sample))
            if len(sample) < len(run.labels) or len(seeds_eps) != len(common.seeds):
                notes.append(
                    f"ε axis: a seeded subsample of {len(sample):,} of {len(run.labels):,} images and "
                    f"{len(seeds_eps)} seed(s)"
                    + (" (CPU: every point runs the model forward and backward)" if cpu else "")
                )
        return base.Sweep(settings, series, notes, point=lambda name, x: f"{SERIES[name]['x_label']} = {x:g}")

    return common.study(NAME, TITLE, run, key, sweep)
