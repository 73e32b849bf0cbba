"""Runs compared side by side: two to four runs of one data set (one architecture trained with several objectives,
two architectures, ...), every detector's metrics per run on the same seeded splits, and the difference between
each run and the first, per detector and metric, with a paired bootstrap interval.

Conventions are the studio's (:mod:`relu_core.metrics`): positives are correctly classified samples, a detector
accepts a sample when its uncertainty is low. A run's detector is judged on that run's own predictions: FPR95,
AUROC and AURC of run B − run A compare how well each run's detector separates *its own* classifier's errors,
and accuracy differs between runs as well (the table shows it beside them).

Splits: the runs must hold the same samples (same labels in the same order: one data set). Each seed's split
is stratified on the runs' joint correctness (with one run, exactly the split of ``protocol.seeded_splits``), so
every run's tuning and evaluation parts keep their share of its errors; a pattern of right and wrong too rare to
be split (one sample) is merged with others (:func:`joint_strata`), so that no valid input is refused. D* is
fitted on the tuning part only and every metric is read on the evaluation part only.

Intervals: the bootstrap resamples samples, the same draws scoring both runs, pooled over seeds. For the
detectors without a fit (MSP, ODIN, Doctor) it resamples the evaluation samples (``stats.pooled_bootstrap`` with a
pair of correctness arrays). Rel-U's score depends on the D* fitted on the tuning part, and keeping that D* fixed
left out how much the fit varies: on synthetic runs with no true difference the AUROC interval covered 0 in about
86 % of the cases at 95 %. So each resample draws every sample (tuning and evaluation parts alike), refits each
run's D* on the tuning samples it drew (``detectors.weighted_relu_matrices``, all resamples in one batched
product) and scores the evaluation samples it drew (``stats.rescored_metrics``); Rel-U − Doctor within a run uses
the same draws for Doctor. Where that would cost more than :data:`REFIT_MAX_WORK` multiply-adds (many classes,
many samples) D* stays fixed and the Rel-U rows say they are "conditional on the fitted D*" (``stats.FITTED_LABEL``).
"""

from __future__ import annotations

import dataclasses
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
#: The most multiply-adds spent refitting Rel-U's D* inside the bootstrap (resamples x runs x seeds x samples x
#: C², :func:`refit_work`): 10,000 samples of 10 classes, 4 runs, 3 seeds and 1,000 resamples are 1.2·10¹⁰; above
#: it D* is kept fixed and the Rel-U intervals are labelled conditional on the fitted D*.
REFIT_MAX_WORK = 2e10


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
        why = why_not_comparable(first, run)
        if why:
            raise InputError(f"{run.source} and {first.source} {why}")
    return first.labels


def why_not_comparable(first, other) -> str:
    """Why the run ``other`` cannot be compared with ``first`` (the words after both runs' names), "" when it
    can: both must hold the same samples (labels equal in the same order) and the same number of classes."""
    if other.labels.shape != first.labels.shape or not np.array_equal(other.labels, first.labels):
        return (
            "do not hold the same samples (another data set, or another order): runs are compared sample by "
            "sample, so choose runs of one data set"
        )
    if other.logits.shape[1] != first.logits.shape[1]:
        return "have different numbers of classes"
    return ""


def comparable_with(first, candidates: Sequence) -> tuple[list, list]:
    """``candidates`` split into those comparable with the run ``first`` (:func:`why_not_comparable`; ``first``
    itself among them when it is a candidate) and the others, each in the given order."""
    fits = [run for run in candidates if run is first or not why_not_comparable(first, run)]
    return fits, [run for run in candidates if all(run is not f for f in fits)]


def joint_strata(correct: np.ndarray) -> np.ndarray:
    """The strata of every seed's split (``correct``: runs x samples, bool): one per pattern of right and wrong
    across the runs, each holding at least two samples (``protocol.split_indices`` puts one in each part).

    A pattern of one sample (two runs that disagree on a single image) is merged: first, for each run and each of
    right and wrong that no pattern of two or more samples holds, the lone samples of that kind become one stratum
    (so that this run still has such a sample in both parts); the lone samples left are grouped by the first run's
    correctness, and one left alone joins the largest stratum of its first-run correctness. Patterns of two or
    more samples are kept as they are. Each run must hold two right and two wrong predictions
    (``protocol.check_evaluable``), else a sample may stay alone. On tiny inputs with many runs no split may give
    every run a right and a wrong sample in both parts; :func:`compare_runs` then says which run lacks which."""
    correct = np.asarray(correct, dtype=bool)
    n_runs = correct.shape[0]
    strata = (correct.astype(np.int64) << np.arange(n_runs)[:, None]).sum(axis=0)
    patterns, inverse, sizes = np.unique(strata, return_inverse=True, return_counts=True)
    rare = sizes[inverse.ravel()] < 2
    if not rare.any():
        return strata
    next_id = 1 << n_runs  # above every pattern's code
    pools: list[np.ndarray] = []
    assigned = np.zeros_like(rare)

    def new_stratum(members: np.ndarray) -> None:
        nonlocal next_id
        strata[members] = next_id
        next_id += 1
        assigned[members] = True
        pools.append(members)

    for r in range(n_runs):
        for value in (True, False):
            kind = correct[r] == value
            kept = (((patterns >> r) & 1).astype(bool) == value) & (sizes >= 2)
            if kept.any() or any(kind[pool].all() and pool.sum() >= 2 for pool in pools):
                continue
            lone = rare & ~assigned & kind
            if lone.sum() >= 2:
                new_stratum(lone)
    for value in (True, False):
        left = rare & ~assigned & (correct[0] == value)
        if left.sum() >= 2:
            new_stratum(left)
        elif left.any():  # one sample: into the largest stratum of its first-run correctness
            others = ~left & (correct[0] == value)
            ids, counts = np.unique(strata[others], return_counts=True)
            agreeing = [(c, i) for i, c in zip(ids, counts, strict=True) if (correct[0][strata == i] == value).all()]
            if agreeing:
                strata[left] = max(agreeing)[1]
    return strata


def refit_work(n_resamples: int, n_runs: int, n_seeds: int, n_samples: int, n_classes: int) -> float:
    """The multiply-adds of refitting Rel-U in every resample: per resample, run and seed, the tuning part's
    weighted moments and the evaluation part's scores, ``n_samples x C²`` together."""
    return float(n_resamples) * n_runs * n_seeds * n_samples * n_classes**2


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
    labels_of = [f"{i + 1}. {run.source}" for i, run in enumerate(runs)]
    for r, label in enumerate(labels_of):
        try:
            protocol.check_evaluable(correct[r])
        except InputError as exc:
            raise InputError(f"{label}: {exc}") from None
    strata = joint_strata(correct)
    splits = [(seed, *protocol.split_indices(labels.size, tune_fraction, seed, stratify=strata)) for seed in seeds]
    for seed, tune, evaluation in splits:
        for r, label in enumerate(labels_of):
            for part, rows in (("tuning", tune), ("evaluation", evaluation)):
                if correct[r, rows].all() or not correct[r, rows].any():
                    kind = "misclassified" if correct[r, rows].all() else "correctly classified"
                    raise InputError(
                        f"{label}: seed {seed}'s {part} part holds none of its {kind} samples (too few of them to "
                        "split alongside the other runs' right and wrong predictions): choose another tuning "
                        "fraction or fewer runs"
                    )
    # scores[r][key]: per seed, the run's uncertainty on that seed's evaluation part
    scores = [{k: [] for k in keys} for _ in runs]
    n_classes = runs[0].logits.shape[1]
    refits = bool(n_resamples) and "relu" in keys
    refits = refits and refit_work(n_resamples, len(runs), len(seeds), labels.size, n_classes) <= REFIT_MAX_WORK
    blocks = -(-n_resamples // stats.BLOCK) if refits else 0
    steps, done = len(runs) * len(seeds) + blocks, 0  # the refitting bootstrap reports its blocks
    for seed, tune, evaluation in splits:
        if cancel is not None and cancel():
            raise Cancelled("the comparison cancelled")
        for r, run in enumerate(runs):
            for k in keys:
                detector = detectors.make_detector(k, temperature if k in protocol.PAIRED else None, lam)
                detector.fit(run.logits[tune], labels[tune])
                scores[r][k].append(detector.score(run.logits[evaluation]))
            done += 1
            report(progress, done, steps, f"seed {seed}: {labels_of[r]} scored")
    table = _table(labels_of, keys, scores, correct, splits)
    evaluations = [evaluation for _, _, evaluation in splits]
    refit = None
    if refits:

        def block_done(block: int) -> None:
            report(progress, done + block, steps, f"bootstrap with D* refitted: {block * stats.BLOCK:,} resamples")

        refit = _refitted_draws(runs, correct, splits, scores, keys, temperature, lam, n_resamples, cancel, block_done)
    differences, within = [], []
    for r, label in enumerate(labels_of):
        for k in keys if r else ():  # run r − the first run, detector by detector
            if cancel is not None and cancel():
                raise Cancelled("the comparison cancelled")
            name = detectors.label(k)
            pairs = [(b, a, (correct[r, e], correct[0, e])) for b, a, e in zip(scores[r][k], scores[0][k], evaluations)]
            names = f"{name} on run {r + 1}", f"{name} on run 1"
            if k == "relu" and refit is not None:
                rows = _paired_draws(pairs, [refit[r]["relu"], refit[0]["relu"]], *names)
            else:
                rows = _paired(pairs, evaluations, n_resamples, *names, fitted=k == "relu")
            differences += [{"run": label, "reference": labels_of[0], "detector": name, **row} for row in rows]
        if set(protocol.PAIRED) <= set(keys):
            pairs = [(b, a, correct[r, e]) for b, a, e in zip(scores[r]["relu"], scores[r]["doctor"], evaluations)]
            if refit is not None:
                rows = _paired_draws(pairs, [refit[r]["relu"], refit[r]["doctor"]], "Rel-U", "Doctor")
            else:
                rows = _paired(pairs, evaluations, n_resamples, "Rel-U", "Doctor", fitted=True)
            within += [{"run": label, **row} for row in rows]
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


def _per_seed(pairs) -> dict[str, list[float]]:
    """A − B on each seed's evaluation part, per metric, from the seeds' ``pairs``."""
    per_seed = {m: [] for m in metric_info.PAIRED_KEYS}
    for uncertainty_a, uncertainty_b, correct in pairs:
        correct_a, correct_b = correct if isinstance(correct, tuple) else (correct, correct)
        summary_a, summary_b = metrics.summary(uncertainty_a, correct_a), metrics.summary(uncertainty_b, correct_b)
        for m in per_seed:
            per_seed[m].append(summary_a[m] - summary_b[m])
    return per_seed


def _rows(per_seed, pooled, a: str, b: str) -> list[dict]:
    rows = stats.paired_rows(per_seed, pooled)
    for row in rows:
        if row["metric"] in pooled:
            row["verdict"] = pooled[row["metric"]].verdict(a, b)
    return rows


def _paired(pairs, evaluations, n_resamples: int, a: str, b: str, fitted: bool = False) -> list[dict]:
    """``stats.paired_rows`` of A − B over the seeds' ``pairs`` (``(uncertainty_a, uncertainty_b, correct)``,
    ``correct`` one array or a pair, as ``stats.pooled_bootstrap`` takes them), the verdict naming A and B; with
    ``fitted`` (a Rel-U row whose D* was not refitted in the resamples) labelled ``stats.FITTED_LABEL``."""
    pooled = stats.pooled_bootstrap(pairs, sample_ids=evaluations, n_resamples=n_resamples) if n_resamples else {}
    if fitted:
        pooled = {m: dataclasses.replace(d, conditional=True, condition=stats.FITTED_LABEL) for m, d in pooled.items()}
    return _rows(_per_seed(pairs), pooled, a, b)


def _paired_draws(pairs, draws, a: str, b: str) -> list[dict]:
    """The rows of :func:`_paired` with the interval of the resampled metrics ``draws`` (A's and B's: per seed, a
    metric's value in each resample, :func:`_refitted_draws`), the mean over seeds of A − B."""
    per_seed = _per_seed(pairs)
    draws_a, draws_b = draws
    pooled = {
        m: stats.percentile_difference(
            m, float(np.mean(per_seed[m])), np.mean([da[m] - db[m] for da, db in zip(draws_a, draws_b)], axis=0)
        )
        for m in metric_info.PAIRED_KEYS
    }
    return _rows(per_seed, pooled, a, b)


def _refitted_draws(
    runs, correct, splits, scores, keys, temperature, lam, n_resamples, cancel, block_done
) -> list[dict]:
    """Per run, Rel-U's (and Doctor's, when compared) metrics in every bootstrap resample, D* refitted in each:
    ``out[r][key][s][metric]`` is an array of one value per resample for seed s.

    Resample b draws every sample with replacement (``stats.count_blocks`` over all N samples, seed 0), so that each
    seed's tuning part and evaluation part are resampled together; each run's D* is fitted on the tuning samples
    drawn, weighted by their draw counts (``detectors.weighted_relu_matrices``), and scores that seed's evaluation
    samples, whose metrics count the evaluation samples drawn (``stats.rescored_metrics``). Doctor, which fits
    nothing, is read on the same draws (``stats.resampled_metrics``)."""
    n = correct.shape[1]
    wanted = [k for k in ("relu", "doctor") if k in keys]
    out = [
        {k: [{m: np.empty(n_resamples) for m in metric_info.PAIRED_KEYS} for _ in splits] for k in wanted} for _ in runs
    ]
    probs = [detectors.softmax(run.logits, temperature) for run in runs]
    for first, counts in stats.count_blocks(n, n_resamples, 0):
        if cancel is not None and cancel():
            raise Cancelled("the comparison cancelled")
        block = slice(first, first + counts.shape[1])
        for s, (_, tune, evaluation) in enumerate(splits):
            weights, drawn = counts[tune].T, counts[evaluation]
            for r, flags in enumerate(correct):
                matrices = detectors.weighted_relu_matrices(probs[r][tune], flags[tune], weights, lam)
                rescored = detectors.quadratic_scores(probs[r][evaluation], matrices)
                found = {"relu": stats.rescored_metrics(rescored, flags[evaluation], drawn)}
                if "doctor" in wanted:
                    found["doctor"] = stats.resampled_metrics(scores[r]["doctor"][s], flags[evaluation], drawn)
                for k, values in found.items():
                    for m in metric_info.PAIRED_KEYS:
                        out[r][k][s][m][block] = values[m]
        block_done(first // stats.BLOCK + 1)
    return out
