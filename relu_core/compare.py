"""Runs compared side by side: two to four runs of one data set (one architecture trained with several objectives,
two architectures, ...), every detector's metrics per run on the same seeded splits, and the difference between
each run and the first, per detector and metric, with a paired bootstrap interval.

Conventions are the studio's (:mod:`relu_core.metrics`): positives are correctly classified samples, a detector
accepts a sample when its uncertainty is low. A run's detector is judged on that run's own predictions: FPR95,
AUROC and AURC of run B − run A compare how well each run's detector separates *its own* classifier's errors,
and accuracy differs between runs as well (the table shows it beside them).

Splits: the runs must hold the same samples (same labels in the same order: one data set). Each seed's split
is stratified on the runs' joint correctness (with one run, exactly the split of ``protocol.seeded_splits``), so
every run's tuning and evaluation parts keep their share of its errors. D* is fitted on the tuning part only and
every metric is read on the evaluation part only. The bootstrap resamples the evaluation samples, the same draws
scoring both runs (``stats.pooled_bootstrap`` with a pair of correctness arrays, pooled over seeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from relu_core import detectors, metric_info, metrics, protocol, stats
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress, report

#: How many runs one comparison takes (a chart with more colours stops being readable).
MIN_RUNS, MAX_RUNS = 2, 4
#: The detectors of the paper's Table 1, compared by default.
DEFAULT_KEYS = ("msp", "odin", "doctor", "relu")


@dataclass(frozen=True)
class RunsComparison:
    """The result of :func:`compare_runs`.

    ``table``: one row per run and detector: ``run``, ``detector``, ``accuracy`` (the classifier's, on the
    evaluation parts), then per metric of :data:`metric_info.PAIRED_KEYS` its mean and std over seeds.
    ``differences``: one row per later run, detector and metric: run B − the first run A, with
    ``stats.PAIRED_ROW_COLUMNS`` (mean and std over seeds, estimate, interval, significance, verdict in words).
    ``relu_minus_doctor``: per run, Rel-U − Doctor in the same row form (empty unless both are compared).
    ``curves``: ``(run label, detector name) -> (fpr, tpr, auroc, coverage, risk, aurc)`` on the first seed's
    evaluation part.
    """

    run_labels: tuple[str, ...]
    keys: tuple[str, ...]
    table: pd.DataFrame
    differences: pd.DataFrame
    relu_minus_doctor: pd.DataFrame
    curves: dict[tuple[str, str], tuple]
    seeds: tuple[int, ...]
    tune_fraction: float
    temperature: float
    lam: float | str
    n_tune: int
    n_eval: int


def _check_runs(runs: Sequence) -> np.ndarray:
    """The runs' shared labels; InputError unless there are 2 to 4 different runs of one data set."""
    if not MIN_RUNS <= len(runs) <= MAX_RUNS:
        raise InputError(f"choose {MIN_RUNS} to {MAX_RUNS} runs to compare (got {len(runs)})")
    if len({run.run_id for run in runs}) != len(runs):
        raise InputError("the same run is chosen twice: choose different runs")
    first = runs[0]
    for run in runs[1:]:
        if run.labels.shape != first.labels.shape or not np.array_equal(run.labels, first.labels):
            raise InputError(
                f"{run.source} and {first.source} do not hold the same samples (another data set, or another "
                "order): runs are compared sample by sample, so choose runs of one data set"
            )
        if run.logits.shape[1] != first.logits.shape[1]:
            raise InputError(f"{run.source} and {first.source} have different numbers of classes")
    return first.labels


def _joint_strata(correct: np.ndarray) -> np.ndarray:
    """One stratum per pattern of right and wrong across the runs (``correct``: runs x samples)."""
    return (correct.astype(np.int64) << np.arange(correct.shape[0])[:, None]).sum(axis=0)


def compare_runs(
    runs: Sequence,
    *,
    keys: Sequence[str] = DEFAULT_KEYS,
    temperature: float = 1.0,
    lam: float | str = 0.5,
    tune_fraction: float = 0.5,
    seeds: int | Sequence[int] = (0,),
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> RunsComparison:
    """Every detector of ``keys`` on every run of ``runs`` (2 to 4 runs of one data set, the first the
    reference), on the same seeded splits.

    Rel-U and Doctor use ``temperature`` (Rel-U ``lam`` too), the other detectors their standard setting (ODIN
    T = 1000), as on Explore. ``seeds``: a count S (seeds 0..S-1) or the seeds. ``n_resamples`` = 0 skips the bootstrap (the differences then have no interval).
    """
    labels = _check_runs(runs)
    keys = tuple(detectors.detector_key(k) for k in keys)
    if not keys:
        raise InputError("choose at least one detector")
    seeds = protocol.resolve_seeds(seeds)
    n_resamples = protocol.check_resamples(n_resamples)
    correct = np.stack([protocol.correctness(run.logits, labels) for run in runs])
    strata = _joint_strata(correct)
    splits = [(seed, *protocol.split_indices(labels.size, tune_fraction, seed, stratify=strata)) for seed in seeds]
    labels_of = [f"{i + 1}. {run.source}" for i, run in enumerate(runs)]
    # scores[r][key]: per seed, the run's uncertainty on that seed's evaluation part
    scores = [{k: [] for k in keys} for _ in runs]
    steps, done = len(runs) * len(seeds), 0
    for seed, tune, evaluation in splits:
        if cancel is not None and cancel():
            raise Cancelled("the comparison cancelled")
        for r, run in enumerate(runs):
            try:
                protocol.check_evaluable(correct[r, tune])
            except InputError as exc:
                raise InputError(f"{labels_of[r]}, seed {seed}, tuning part: {exc}") from None
            for k in keys:
                detector = detectors.make_detector(k, temperature if k in protocol.PAIRED else None, lam)
                detector.fit(run.logits[tune], labels[tune])
                scores[r][k].append(detector.score(run.logits[evaluation]))
            done += 1
            report(progress, done, steps, f"seed {seed}: {labels_of[r]} scored")
    table = _table(labels_of, keys, scores, correct, splits)
    evaluations = [evaluation for _, _, evaluation in splits]
    differences, within = [], []
    for r, label in enumerate(labels_of):
        for k in keys if r else ():  # run r − the first run, detector by detector
            if cancel is not None and cancel():
                raise Cancelled("the comparison cancelled")
            name = detectors.label(k)
            pairs = [(b, a, (correct[r, e], correct[0, e])) for b, a, e in zip(scores[r][k], scores[0][k], evaluations)]
            rows = _paired(pairs, evaluations, n_resamples, f"{name} on run {r + 1}", f"{name} on run 1")
            differences += [{"run": label, "reference": labels_of[0], "detector": name, **row} for row in rows]
        if set(protocol.PAIRED) <= set(keys):
            pairs = [(b, a, correct[r, e]) for b, a, e in zip(scores[r]["relu"], scores[r]["doctor"], evaluations)]
            within += [{"run": label, **row} for row in _paired(pairs, evaluations, n_resamples, "Rel-U", "Doctor")]
    _, tune0, eval0 = splits[0]
    curves = {}
    for r, label in enumerate(labels_of):
        for k in keys:
            uncertainty, flags = scores[r][k][0], correct[r, eval0]
            fpr, tpr, _ = metrics.roc_curve(uncertainty, flags, drop_intermediate=False)
            coverage, risk = metrics.risk_coverage_curve(uncertainty, flags)
            curves[(label, detectors.label(k))] = (
                fpr,
                tpr,
                metrics.auroc(uncertainty, flags),
                coverage,
                risk,
                metrics.aurc(uncertainty, flags),
            )
    return RunsComparison(
        tuple(labels_of),
        keys,
        table,
        pd.DataFrame(differences),
        pd.DataFrame(within),
        curves,
        seeds,
        float(tune_fraction),
        float(temperature),
        lam,
        int(tune0.size),
        int(eval0.size),
    )


def _table(labels_of, keys, scores, correct, splits) -> pd.DataFrame:
    rows = []
    for r, label in enumerate(labels_of):
        accuracy = float(np.mean([correct[r, evaluation].mean() for _, _, evaluation in splits]))
        for k in keys:
            per_seed = [
                metrics.summary(uncertainty, correct[r, evaluation])
                for uncertainty, (_, _, evaluation) in zip(scores[r][k], splits, strict=True)
            ]
            row = {"run": label, "detector": detectors.label(k), "accuracy": accuracy}
            for m in metric_info.PAIRED_KEYS:
                values = np.array([summary[m] for summary in per_seed])
                row[m], row[f"{m}_std"] = float(values.mean()), float(values.std())
            rows.append(row)
    return pd.DataFrame(rows)


def _paired(pairs, evaluations, n_resamples: int, a: str, b: str) -> list[dict]:
    """``stats.paired_rows`` of A − B over the seeds' ``pairs`` (``(uncertainty_a, uncertainty_b, correct)``,
    ``correct`` one array or a pair, as ``stats.pooled_bootstrap`` takes them), the verdict naming A and B."""
    per_seed = {m: [] for m in metric_info.PAIRED_KEYS}
    for uncertainty_a, uncertainty_b, correct in pairs:
        correct_a, correct_b = correct if isinstance(correct, tuple) else (correct, correct)
        summary_a, summary_b = metrics.summary(uncertainty_a, correct_a), metrics.summary(uncertainty_b, correct_b)
        for m in per_seed:
            per_seed[m].append(summary_a[m] - summary_b[m])
    pooled = stats.pooled_bootstrap(pairs, sample_ids=evaluations, n_resamples=n_resamples) if n_resamples else {}
    rows = stats.paired_rows(per_seed, pooled)
    for row in rows:
        if row["metric"] in pooled:
            row["verdict"] = pooled[row["metric"]].verdict(a, b)
    return rows
