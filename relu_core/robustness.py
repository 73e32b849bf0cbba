"""The paper's mismatch study: detectors tuned on clean data, evaluated on corrupted inputs.

Protocol (Dadalto et al., ICLR 2024, robustness section), for one ``Run`` with images and a model:

1. For every seed, ``protocol.split_indices`` splits the clean set into a tuning part and an
   evaluation part. The hyperparameters (T, and lam for Rel-U) are chosen by
   ``protocol.grid_search(selection="tuning")`` on the clean tuning part only, and every detector
   (Rel-U's D* included) is fitted on that clean tuning part only. Neither the clean nor the corrupted
   evaluation images are ever seen by the selection or the fit.
2. For every corruption at the chosen severity, the corrupted copies of the evaluation images (the
   same indices as the clean evaluation part) go through the model; each fitted detector scores them
   and is judged against the correctness of the model's prediction *on the corrupted image*.

Conventions (as in ``metrics``): positives are correctly classified samples, so FPR at 95 % TPR is the
fraction of errors still accepted when 95 % of the correct predictions are accepted; AUROC and AURC use
the same uncertainty (higher = more likely wrong).

CPU users evaluate a seeded subsample of the images per corruption (``subsample``, drawn by
``corruptions.subsample_indices``); one subsample is drawn per study and intersected with each seed's
evaluation part, so every corrupted image goes through the model once, whatever the number of seeds,
and the tuning part stays the whole clean tuning split. Corrupted images come from the published
CIFAR-10-C files when the run is the CIFAR-10 test set (or its official-order prefix) and the files are
present, otherwise from ``corruptions.corrupted_set`` (generated, cached on disk). Their logits are
cached by the engine's cache under (weights hash, clean pixels, normalisation, precision, corruption,
severity, corruption seed, subsample, source), so revisiting a study or changing the severity only
computes what is missing; the hyperparameter search and the scoring are cheap and always rerun.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import cache, corruptions, detectors, engine, metric_info, metrics, models, protocol, runs, stats
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress
from relu_core.threads import small_work

#: The detectors' metrics and the model's accuracy on the same images, in display order.
METRIC_NAMES = (*metric_info.PAIRED_KEYS, "accuracy")
CPU_SUBSAMPLE = 1000
TABLE_COLUMNS = ("corruption", "severity", "detector", "metric", "mean", "std")
PAIRED_COLUMNS = ("corruption", *stats.PAIRED_ROW_COLUMNS)
CLEAN = "clean"
PUBLISHED = "CIFAR-10-C files"
GENERATED = "generated"
LOGITS_NAMESPACE = "corruption_logits"


class RobustnessError(InputError):
    """The run or the options cannot support a corruption study (no images, no model, bad option)."""


@dataclass(frozen=True)
class RobustnessResult:
    """What a mismatch study returns.

    ``table``: tidy frame with columns ``corruption, severity, detector, metric, mean, std`` (metrics
    ``fpr95, auroc, aurc, accuracy``; mean and population std (``ddof=0``) over seeds, a seed whose
    corrupted evaluation images are all right or all wrong gives NaN and is left out), one row per
    corruption x detector x metric, the clean evaluation images first (corruption ``"clean"``, severity 0); ``accuracy`` is the model's accuracy on that corrupted evaluation
    subset and is the same for every detector.
    ``per_seed``: the same with a ``seed`` column and one ``value`` per seed.
    ``accuracy``: frame ``corruption, severity, mean, std`` with the clean accuracy first (corruption
    ``"clean"``, severity 0) on the same evaluation images, then one row per corruption.
    ``hyperparameters``: frame ``seed, detector, temperature, lam, hamming_fallback, settings_searched``
    selected on each clean tuning split; ``hamming_fallback`` is True where Rel-U's D* is the Hamming matrix
    (only if lam = 0 was searched, or a side of the tuning split is empty), so that Rel-U ranks exactly like
    Doctor at the same T; ``settings_searched`` is the size of the grid the selection compared.
    ``paired``: frame :data:`PAIRED_COLUMNS`, one row per corruption (clean first) x metric (fpr95, auroc,
    aurc) when Rel-U and Doctor are both studied (else empty): the rows of ``stats.paired_rows``, Rel-U − Doctor
    mean and std over seeds and the pooled paired bootstrap interval of the mean (``stats.pooled_bootstrap`` on
    each seed's corrupted evaluation images).
    ``sources``: corruption -> ``"CIFAR-10-C files"`` or ``"generated"``.
    ``n_eval``: evaluation images per seed (after subsampling).
    """

    table: pd.DataFrame
    per_seed: pd.DataFrame
    accuracy: pd.DataFrame
    hyperparameters: pd.DataFrame
    paired: pd.DataFrame
    sources: dict[str, str]
    n_eval: tuple[int, ...]
    severity: int
    seeds: tuple[int, ...]
    tune_fraction: float

    @property
    def clean_accuracy(self) -> float:
        """Mean over seeds of the clean accuracy on the evaluation images."""
        return float(self.accuracy.loc[self.accuracy["corruption"] == CLEAN, "mean"].iloc[0])

    def pivot(self, metric: str, statistic: str = "mean") -> pd.DataFrame:
        """``metric`` as a corruption x detector frame (corruptions in study order, the clean row left out)."""
        if metric not in METRIC_NAMES:
            raise RobustnessError(f"unknown metric {metric!r}; choose one of {', '.join(METRIC_NAMES)}")
        rows = self.table[(self.table["metric"] == metric) & (self.table["corruption"] != CLEAN)]
        frame = rows.pivot(index="corruption", columns="detector", values=statistic)
        order = list(dict.fromkeys(rows["corruption"]))
        return frame.loc[order, list(dict.fromkeys(rows["detector"]))]

    def summary_table(self) -> pd.DataFrame:
        """One row per corruption x detector with "mean ± std" strings per metric (for display)."""
        wide = self.table.assign(
            value=[f"{m:.4f} ± {s:.4f}" for m, s in zip(self.table["mean"], self.table["std"])]
        ).pivot(index=["corruption", "detector"], columns="metric", values="value")
        order = list(dict.fromkeys(zip(self.table["corruption"], self.table["detector"])))
        return wide.loc[order, list(METRIC_NAMES)].reset_index()


def default_subsample(device: str = "auto") -> int | None:
    """Images per corruption: ``CPU_SUBSAMPLE`` without an accelerator, every image (None) with one."""
    return CPU_SUBSAMPLE if engine.select_device(device).type == "cpu" else None


def check_run(run) -> None:
    """Raise ``RobustnessError`` unless ``run`` has the images and the model a corruption study needs."""
    if run.images is None:
        raise RobustnessError("this run has logits only: a corruption study needs the images")
    if run.model is None:
        raise RobustnessError("this run has no model: a corruption study needs one to classify corrupted images")
    if len(run.images) != len(run.labels):
        raise RobustnessError(f"the run has {len(run.images)} images but {len(run.labels)} labels")


#: The corruption study's severity and selection criterion unless given (the paper's radar plots: severity 5).
DEFAULT_SEVERITY = 5
DEFAULT_CRITERION = "fpr95"


def mismatch_study(
    run,
    *,
    severity: int = DEFAULT_SEVERITY,
    corruption_names: Sequence[str] | None = None,
    detector_keys: Sequence[str] = protocol.PAIRED,
    tune_fraction: float = 0.2,
    seeds: Sequence[int] = (0, 1, 2),
    subsample: int | None = CPU_SUBSAMPLE,
    criterion: str = DEFAULT_CRITERION,
    corruption_seed: int = 0,
    device: str = "auto",
    batch_size: int | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> RobustnessResult:
    """Tune every detector on clean data, then evaluate it on each corruption at ``severity``.

    ``subsample``: images per corruption (a seeded draw, intersected with each seed's evaluation part),
    ``None`` for all. ``criterion`` is the cross-validated selection criterion of ``protocol.grid_search``
    (one of ``metric_info.KEYS``). ``corruption_seed`` seeds the generated corruptions and the subsample draw.
    Raises ``RobustnessError`` for a run without images or model and for bad options, ``Cancelled``
    when ``cancel()`` returns True.
    """
    check_run(run)
    names = tuple(corruptions.CORRUPTIONS if corruption_names is None else corruption_names)
    keys = tuple(detector_keys)
    seeds = tuple(int(s) for s in seeds)
    _check_options(names, keys, severity, tune_fraction, seeds, subsample)
    if criterion not in metric_info.KEYS:
        raise RobustnessError(f"unknown selection criterion {criterion!r}; choose from {', '.join(metric_info.KEYS)}")
    progress = progress or (lambda done, total, message: None)
    labels = np.asarray(run.labels)
    total = len(names) + 1

    progress(0, total, "selecting hyperparameters on the clean tuning splits")
    clean_correct = protocol.correctness(run.logits, labels)
    splits = {seed: (tune, ev) for seed, tune, ev in protocol.seeded_splits(clean_correct, tune_fraction, seeds)}
    fitted = {s: _fit_on_clean(run.logits, labels, tune, keys, s, criterion) for s, (tune, _) in splits.items()}
    sample = corruptions.subsample_indices(len(labels), subsample, corruption_seed)
    eval_rows = {seed: np.intersect1d(eval_idx, sample) for seed, (_, eval_idx) in splits.items()}
    # position of each evaluation image inside the corrupted subsample
    eval_pos = {seed: np.searchsorted(sample, rows) for seed, rows in eval_rows.items()}

    identity = _run_identity(run, device)
    logits_by_name: dict[str, np.ndarray] = {}
    sources: dict[str, str] = {}
    for done, name in enumerate(names):
        if cancel is not None and cancel():
            raise Cancelled("corruption study cancelled")
        progress(done, total, f"{name} (severity {severity}): corrupting and classifying {len(sample)} images")
        logits_by_name[name], sources[name] = _corrupted_logits(
            run, identity, name, severity, subsample, corruption_seed, device, batch_size, cancel
        )
    progress(len(names), total, "scoring the corrupted images")
    records, accuracy, paired_scores = _evaluate(run, names, logits_by_name, fitted, eval_rows, eval_pos)
    per_seed = pd.DataFrame.from_records(records)
    per_seed.insert(1, "severity", np.where(per_seed["corruption"] == CLEAN, 0, severity))
    table = (
        per_seed.groupby(["corruption", "severity", "detector", "metric"], sort=False)["value"]
        .agg(mean="mean", std=lambda v: v.std(ddof=0))
        .reset_index()
    )
    acc = pd.DataFrame(
        [
            {
                "corruption": n,
                "severity": 0 if n == CLEAN else severity,
                "mean": float(np.mean(v)),
                "std": float(np.std(v)),
            }
            for n, v in accuracy.items()
        ]
    )
    hyper = pd.DataFrame(
        [
            {
                "seed": seed,
                "detector": d.name,
                "temperature": d.temperature,
                "lam": d.settings().get("lam"),
                "hamming_fallback": bool(d.fallback_),
                "settings_searched": protocol.grid_size(key),
            }
            for seed in seeds
            for key, d in fitted[seed].items()
        ]
    )
    paired = _paired_frame(per_seed, paired_scores)
    progress(total, total, "done")
    return RobustnessResult(
        table=table[list(TABLE_COLUMNS)],
        per_seed=per_seed,
        accuracy=acc,
        hyperparameters=hyper,
        paired=paired,
        sources=sources,
        n_eval=tuple(len(eval_rows[s]) for s in seeds),
        severity=severity,
        seeds=seeds,
        tune_fraction=tune_fraction,
    )


def _run_identity(run, device: str) -> dict:
    """What a run's corrupted logits depend on besides the corruption: weights, clean pixels, normalisation."""
    return {
        "weights": models.weights_hash(run.model),
        "images": cache.array_digest(run.images),
        "mean": [float(v) for v in run.mean],
        "std": [float(v) for v in run.std],
        "precision": engine.resolve_precision("auto", engine.select_device(device)),
    }


def _corrupted_logits(run, identity, name, severity, subsample, corruption_seed, device, batch_size, cancel):
    """Logits of the run's images under corruption ``name`` at ``severity``, and their ``source``.

    The images classified are ``corruptions.subsample_indices(N, subsample, corruption_seed)`` (sorted; all
    of them for ``subsample=None``). ``source`` says where the corrupted pixels came from (:data:`PUBLISHED`
    or :data:`GENERATED`, the latter through ``corruptions.corrupted_set`` and its disk cache). The logits are cached under ``identity`` (:func:`_run_identity`) and the corruption,
    severity, seed, subsample and source: a repeated call neither corrupts nor runs the model.
    """
    sample = corruptions.subsample_indices(len(run.images), subsample, corruption_seed)
    published = _published_images(run, name, severity)
    source = PUBLISHED if published is not None else GENERATED
    key = {
        **identity,
        "what": "corrupted logits",
        "corruption": name,
        "severity": int(severity),
        "seed": int(corruption_seed),
        "subsample": None if subsample is None else int(subsample),
        "source": source,
    }

    def compute() -> dict[str, np.ndarray]:
        if published is not None:
            images = published[sample]
        else:
            images = corruptions.corrupted_set(
                run.images, run.labels, identity["images"], name, severity, corruption_seed, subsample, cancel=cancel
            ).images
        return {"logits": run.model_logits(images, device=device, batch_size=batch_size, cancel=cancel)}

    check = runs.check_logits(len(sample), run.n_classes, f"the logits under {name} at severity {severity}")
    return cache.cached(LOGITS_NAMESPACE, key, compute, check)["logits"], source


def _published_images(run, name: str, severity: int) -> np.ndarray | None:
    """The CIFAR-10-C images of ``name`` at ``severity`` aligned with the run's images, or None.

    Used only when the run is the CIFAR-10 test set or a prefix of it in the official order (its labels
    equal the first labels of the published files, which the torchvision files and the pixel-exact prefix
    satisfy; the class-ordered JPEG folder does not) and the files are present.
    """
    dataset = str(run.dataset_name).lower()
    if not dataset.startswith("cifar10") or dataset.startswith("cifar100"):
        return None
    published = corruptions.load_cifar10c(name, severity)
    if published is None:
        return None
    images, labels = published
    n = len(run.labels)
    if n > len(labels) or images.shape[1:] != run.images.shape[1:] or not np.array_equal(labels[:n], run.labels):
        return None
    return images[:n]


def corruption_gallery(
    image: np.ndarray,
    corruption_names: Sequence[str] | None = None,
    severities: Sequence[int] = corruptions.SEVERITIES,
    seed: int = 0,
) -> np.ndarray:
    """One uint8 image (H, W, C) under every corruption and severity: array (K, len(severities), H, W, C)."""
    image = np.asarray(image)
    if image.dtype != np.uint8 or image.ndim != 3:
        raise RobustnessError(f"the gallery needs one uint8 (H, W, C) image, got {image.dtype} {image.shape}")
    names = tuple(corruptions.CORRUPTIONS if corruption_names is None else corruption_names)
    return np.stack([np.stack([corruptions.corrupt(image[None], n, s, seed)[0] for s in severities]) for n in names])


def _check_options(names, keys, severity, tune_fraction, seeds, subsample) -> None:
    unknown = [n for n in names if n not in corruptions.CORRUPTIONS]
    if unknown or not names:
        raise RobustnessError(f"unknown corruption(s) {unknown}; choose from {', '.join(corruptions.CORRUPTIONS)}")
    bad = [k for k in keys if k not in detectors.protocol_keys()]
    if bad or not keys:
        raise RobustnessError(f"unknown detector(s) {bad}; choose from {', '.join(detectors.protocol_keys())}")
    if severity not in corruptions.SEVERITIES:
        raise RobustnessError(f"severity must be one of 1-5, got {severity}")
    if not 0.0 < tune_fraction < 1.0:
        raise RobustnessError(f"the tuning fraction must lie strictly between 0 and 1, got {tune_fraction}")
    if not seeds or len(set(seeds)) != len(seeds):
        raise RobustnessError("give at least one seed, without repeats")
    if subsample is not None and (
        isinstance(subsample, bool) or not isinstance(subsample, (int, np.integer)) or subsample < 2
    ):
        raise RobustnessError(
            f"the subsample must be an integer of at least 2 images (or None for all), got {subsample!r}"
        )


def _summary(uncertainty: np.ndarray, correct: np.ndarray) -> dict[str, float]:
    """``metrics.summary``, or NaNs where the evaluation images hold only one class (all right or all wrong)."""
    if correct.all() or not correct.any():
        return dict.fromkeys(metric_info.PAIRED_KEYS, float("nan"))
    return metrics.summary(uncertainty, correct)


def _evaluate(run, names, logits_by_name, fitted, eval_rows, eval_pos):
    """Score the clean and every corrupted evaluation set with every fitted detector.

    Returns ``(records, accuracy, paired_scores)``: per-seed metric records (the clean evaluation images
    as corruption ``"clean"`` first), accuracies per corruption, and ``paired_scores[corruption]``, one
    ``(Rel-U, Doctor, correct, image indices)`` per seed where both detectors were fitted (else empty).
    """
    labels = np.asarray(run.labels)
    stacked = np.stack([logits_by_name[n] for n in names])  # (K, S, C)
    records: list[dict] = []
    accuracy: dict[str, list[float]] = {CLEAN: [], **{n: [] for n in names}}
    paired_scores: dict[str, list] = {CLEAN: [], **{n: [] for n in names}}
    pair = tuple(detectors.label(k) for k in protocol.PAIRED)
    for seed, fitted_seed in fitted.items():
        rows = eval_rows[seed]
        y = labels[rows]
        # (K + 1, n, C): the clean evaluation logits first, then each corruption of the same images
        z = np.concatenate([np.asarray(run.logits)[rows][None], stacked[:, eval_pos[seed]]])
        correct = z.argmax(-1) == y  # (K + 1, n)
        for k, name in enumerate((CLEAN, *names)):
            accuracy[name].append(float(correct[k].mean()))
        scores = _score_all(fitted_seed, z.reshape(-1, z.shape[-1]))
        for k, name in enumerate((CLEAN, *names)):
            if all(p in scores for p in pair) and correct[k].any() and not correct[k].all():
                shape = correct.shape
                paired_scores[name].append(
                    (scores[pair[0]].reshape(shape)[k], scores[pair[1]].reshape(shape)[k], correct[k], rows)
                )
        for detector_name, uncertainty in scores.items():
            uncertainty = uncertainty.reshape(correct.shape)
            for k, name in enumerate((CLEAN, *names)):
                summary = _summary(uncertainty[k], correct[k])
                records += [
                    {
                        "corruption": name,
                        "detector": detector_name,
                        "metric": m,
                        "seed": seed,
                        "value": float(summary[m]),
                    }
                    for m in metric_info.PAIRED_KEYS
                ]
                records.append(
                    {
                        "corruption": name,
                        "detector": detector_name,
                        "metric": "accuracy",
                        "seed": seed,
                        "value": accuracy[name][-1],
                    }
                )
    return records, accuracy, paired_scores


def _paired_frame(per_seed: pd.DataFrame, paired_scores: dict[str, list]) -> pd.DataFrame:
    """Rel-U − Doctor per corruption and metric: per-seed mean/std and the pooled bootstrap interval."""
    relu, doctor = (detectors.label(k) for k in protocol.PAIRED)
    rows = []
    for name, pairs in paired_scores.items():
        if not pairs:
            continue
        # the seeds' evaluation images overlap (all of them lie in one subsample): resampled once per draw
        # T and λ were selected on the tuning splits: the interval holds for the selected settings
        pooled = stats.conditional_on_selection(
            stats.pooled_bootstrap([p[:3] for p in pairs], sample_ids=[p[3] for p in pairs])
        )
        differences = {}
        for metric in pooled:
            values = per_seed[(per_seed["corruption"] == name) & (per_seed["metric"] == metric)]
            by_detector = values.pivot(index="seed", columns="detector", values="value")
            differences[metric] = (by_detector[relu] - by_detector[doctor]).dropna().to_numpy()
        rows += [
            {"corruption": name, **{k: row[k] for k in stats.PAIRED_ROW_COLUMNS}}
            for row in stats.paired_rows(differences, pooled)
        ]
    return pd.DataFrame(rows, columns=list(PAIRED_COLUMNS))


@small_work
def _fit_on_clean(
    logits: np.ndarray, labels: np.ndarray, tune_idx: np.ndarray, keys, seed: int, criterion: str
) -> dict:
    """Detectors with (T, lam) selected and D* fitted on the clean tuning rows only.

    Only ``logits[tune_idx]`` is handed to ``protocol.select_and_fit`` (cross-validation inside it, then the
    fit): the clean evaluation rows and every corrupted image stay out of reach by construction.
    """
    z, y = np.asarray(logits)[tune_idx], labels[tune_idx]
    return {
        key: protocol.select_and_fit(
            z, y, key, tune_idx=np.arange(len(y)), selection="tuning", criterion=criterion, fold_seed=seed
        )
        for key in keys
    }


@small_work
def _score_all(fitted: dict, logits: np.ndarray) -> dict[str, np.ndarray]:
    """Uncertainty of each fitted detector on ``logits``, with one softmax per distinct temperature."""
    probs: dict[float, np.ndarray] = {}
    scores = {}
    for detector in fitted.values():
        if detector.accepts_probs:
            if detector.temperature not in probs:
                probs[detector.temperature] = detectors.softmax(logits, detector.temperature)
            scores[detector.name] = np.asarray(detector.score_probs(probs[detector.temperature]))
        else:
            scores[detector.name] = np.asarray(detector.score(logits))
    return scores
