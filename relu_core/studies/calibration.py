"""Calibration (the paper's table tab:calibration): does temperature scaling change the detectors?

Per seed (the protocol's split, stratified by correctness):

1. The calibration temperature T_cal is fitted on the tuning part only, by k-fold cross-validation of the
   negative log-likelihood, continuously: T_cal minimises the mean over folds of each held-out fold's NLL
   over log T in [:data:`CAL_T_MIN`, :data:`CAL_T_MAX`] (``scipy.optimize.minimize_scalar``, bounded Brent, as
   temperature scaling is usually fitted). Temperature scaling has no parameter besides T, so nothing is fitted
   on the other folds and the criterion is (up to the fold weights) the NLL of the whole tuning part; the folds
   are kept so that the choice is literally the cross-validated one the paper describes.
2. On the evaluation part: the expected calibration error (ECE, top-1 confidence, 15 equal-width bins, as
   :func:`relu_core.metrics.ece`) and the NLL at T = 1 and at T_cal.
3. Doctor and Rel-U (λ = 0.5, ε = 0, D* fitted on the tuning part at the same temperature) at T = 1
   ("uncalibrated") and at T_cal ("calibrated"): FPR95, AUROC, AURC, with the paired Rel-U − Doctor
   difference at each.

The reliability diagram pools every seed's evaluation part (bin counts, mean confidence and accuracy).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.special import logsumexp

from relu_core import detectors, metric_info, protocol, validation
from relu_core.errors import InputError
from relu_core.progress import report
from relu_core.studies import base
from relu_core.threads import small_work

NAME = "calibration"
TITLE = "Calibration: ECE and the detectors before and after temperature scaling"
#: The range T_cal is fitted in (the bounds of the search over log T).
CAL_T_MIN, CAL_T_MAX = 0.05, 20.0
#: The search's tolerance on log T (T_cal to about 1e-6 relative; the NLL is flat to far below that there).
_LOG_T_TOLERANCE = 1e-6
N_BINS = 15
LAMBDA = 0.5
N_FOLDS = 5
SERIES = "calibration"
#: x of the two points of the calibration series.
UNCALIBRATED, CALIBRATED = 0.0, 1.0
STATE_NAMES = {UNCALIBRATED: "uncalibrated (T = 1)", CALIBRATED: "calibrated (T = T_cal)"}


def nll(logits: np.ndarray, labels: np.ndarray, temperature: float = 1.0) -> float:
    """Mean negative log-likelihood ``-log softmax(z / T)[y]`` (natural log)."""
    scaled = np.asarray(logits, dtype=np.float64) / detectors.check_temperature(temperature)
    return float(np.mean(logsumexp(scaled, axis=1) - scaled[np.arange(len(labels)), labels]))


@small_work
def cross_validated_temperature(
    logits: np.ndarray,
    labels: np.ndarray,
    *,
    bounds: tuple[float, float] = (CAL_T_MIN, CAL_T_MAX),
    n_folds: int = N_FOLDS,
    seed: int = 0,
) -> tuple[float, float]:
    """``(T_cal, its cross-validated NLL)``: the T in ``bounds`` with the lowest mean over folds of the held-out
    NLL, fitted continuously over log T (bounded Brent, ``scipy.optimize.minimize_scalar``).

    Folds are a seeded random partition of the given (tuning) samples into ``min(n_folds, N)`` parts.
    """
    from scipy.optimize import minimize_scalar  # scipy.optimize loads on use

    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels)
    if len(labels) < 2:
        raise InputError("temperature scaling needs at least 2 tuning samples")
    low, high = (detectors.check_temperature(t) for t in bounds)
    k = min(int(n_folds), len(labels))
    fold = np.random.default_rng(seed).permutation(len(labels)) % k
    counts = np.bincount(fold, minlength=k)
    target = logits[np.arange(len(labels)), labels]

    def cv_nll(log_t: float) -> float:
        t = np.exp(log_t)
        per_sample = logsumexp(logits / t, axis=1) - target / t
        return float(np.mean(np.bincount(fold, weights=per_sample, minlength=k) / counts))

    found = minimize_scalar(
        cv_nll, bounds=(np.log(low), np.log(high)), method="bounded", options={"xatol": _LOG_T_TOLERANCE}
    )
    return float(np.exp(found.x)), float(found.fun)


def reliability_bins(probs: np.ndarray, correct: np.ndarray, n_bins: int = N_BINS) -> tuple[np.ndarray, ...]:
    """``(count, confidence_sum, hit_sum)`` per equal-width bin of the top-1 confidence (right-closed bins, as
    :func:`relu_core.metrics.ece`)."""
    confidence = np.asarray(probs).max(axis=1)
    bins = np.searchsorted(np.linspace(0.0, 1.0, n_bins + 1)[1:-1], confidence, side="left")
    return (
        np.bincount(bins, minlength=n_bins).astype(np.float64),
        np.bincount(bins, weights=confidence, minlength=n_bins),
        np.bincount(bins, weights=np.asarray(correct, dtype=np.float64), minlength=n_bins),
    )


def ece_from_bins(count: np.ndarray, confidence_sum: np.ndarray, hit_sum: np.ndarray) -> float:
    """``sum_b |B_b|/N |acc(B_b) − conf(B_b)|`` from :func:`reliability_bins`."""
    return float(np.abs(hit_sum - confidence_sum).sum() / count.sum())


@small_work
def calibration_seed(
    logits: np.ndarray,
    labels: np.ndarray,
    correct: np.ndarray,
    tune: np.ndarray,
    evaluation: np.ndarray,
    seed: int,
    collector: base.Collector,
    bins: dict,
) -> dict:
    """One seed: T_cal on ``tune``, then ECE/NLL and the detectors on ``evaluation`` at T = 1 and at T_cal."""
    t_cal, cv_nll = cross_validated_temperature(logits[tune], labels[tune], seed=seed)
    collector.mark_selected(SERIES, CALIBRATED)  # T_cal is fitted on the tuning split
    row = {"seed": seed, "T_cal": t_cal, "cv_nll": cv_nll}
    c_eval = correct[evaluation]
    for state, t in ((UNCALIBRATED, 1.0), (CALIBRATED, t_cal)):
        probs = detectors.softmax(logits, t)
        counts = reliability_bins(probs[evaluation], c_eval)
        bins[state] = [a + b for a, b in zip(bins[state], counts)] if state in bins else list(counts)
        tag = "uncalibrated" if state == UNCALIBRATED else "calibrated"
        row[f"ece_{tag}"] = ece_from_bins(*counts)
        row[f"nll_{tag}"] = nll(logits[evaluation], labels[evaluation], t)
        collector.add_relu(SERIES, state, seed, base.RelUFit(probs, correct, tune), LAMBDA, evaluation)
        collector.add(SERIES, state, base.DOCTOR, seed, detectors.gini(probs[evaluation]), c_eval, samples=evaluation)
    return row


def _summary(per_seed_rows: pd.DataFrame, curves: pd.DataFrame) -> pd.DataFrame:
    """One row per quantity: mean and std over seeds, uncalibrated and calibrated (the paper's table)."""
    rows = []
    for quantity in ("ece", "nll"):
        before, after = per_seed_rows[f"{quantity}_uncalibrated"], per_seed_rows[f"{quantity}_calibrated"]
        rows.append(
            {
                "quantity": quantity.upper(),
                "uncalibrated_mean": before.mean(),
                "uncalibrated_std": before.std(ddof=0),
                "calibrated_mean": after.mean(),
                "calibrated_std": after.std(ddof=0),
            }
        )
    for detector in (base.DOCTOR, base.RELU):
        for metric in ("fpr95", "auroc"):
            pick = curves[(curves["detector"] == detector) & (curves["metric"] == metric)].set_index("x")
            rows.append(
                {
                    "quantity": f"{detector} {metric_info.get(metric).name}",
                    "uncalibrated_mean": pick.loc[UNCALIBRATED, "mean"],
                    "uncalibrated_std": pick.loc[UNCALIBRATED, "std"],
                    "calibrated_mean": pick.loc[CALIBRATED, "mean"],
                    "calibrated_std": pick.loc[CALIBRATED, "std"],
                }
            )
    return pd.DataFrame(rows)


def run_study(run, *, tune_fraction: float = 0.5, **options) -> base.StudyResult:
    """The calibration study on ``run``; the keyword ``options`` as :func:`base.options`."""
    tune_fraction = validation.fraction(tune_fraction, "the tuning fraction")
    common = base.options(**options)
    seeds = common.seeds
    logits = np.asarray(run.logits, dtype=np.float64)
    labels = np.asarray(run.labels)
    correct = protocol.correctness(logits, labels)
    key = {
        "tune_fraction": tune_fraction,
        "bounds": [CAL_T_MIN, CAL_T_MAX, "continuous"],
        "folds": N_FOLDS,
        "bins": N_BINS,
    }

    def sweep(collector: base.Collector) -> base.Sweep:
        bins: dict = {}
        rows = []
        splits = protocol.seeded_splits(correct, tune_fraction, seeds)
        collector.tie_on(logits)
        for i, (seed, tune, evaluation) in enumerate(splits.checked(common.cancel, "calibration study")):
            report(common.progress, i, len(seeds), f"seed {i + 1}/{len(seeds)}: temperature scaling")
            rows.append(calibration_seed(logits, labels, correct, tune, evaluation, seed, collector, bins))
        seeds_frame = pd.DataFrame(rows)
        edges = np.linspace(0.0, 1.0, N_BINS + 1)
        reliability = pd.DataFrame(
            [
                {
                    "state": STATE_NAMES[state],
                    "bin_low": edges[b],
                    "bin_high": edges[b + 1],
                    "count": int(count[b]),
                    "confidence": conf[b] / count[b] if count[b] else np.nan,
                    "accuracy": hits[b] / count[b] if count[b] else np.nan,
                }
                for state, (count, conf, hits) in bins.items()
                for b in range(N_BINS)
            ]
        )
        settings = {
            "tune_fraction": tune_fraction,
            "lambda": LAMBDA,
            "eps": 0.0,
            "n_bins": N_BINS,
            "n_folds": N_FOLDS,
            "calibration_bounds": [CAL_T_MIN, CAL_T_MAX],
        }
        note = (
            f"T_cal per seed: {', '.join(f'{t:.3g}' for t in seeds_frame['T_cal'])} (cross-validated NLL on the "
            "tuning split)"
        )
        series = {
            SERIES: {
                "x_label": "temperature scaling",
                "log_x": False,
                "ticks": {str(k): v for k, v in STATE_NAMES.items()},
            }
        }
        return base.Sweep(
            settings,
            series,
            [note],
            tables=lambda curves: {
                "summary": _summary(seeds_frame, curves),
                "temperatures": seeds_frame,
                "reliability": reliability,
            },
            point=lambda _, x: STATE_NAMES[x],
        )

    return common.study(NAME, TITLE, run, key, sweep)


# ------------------------------------------------------------------------------------- the paper's table beside ours

#: The paper's calibration columns (``tab:calibration``) and their headers here, in the paper's units.
PAPER_COLUMNS = {
    "ece_T1": "ECE, T = 1",
    "ece_calibrated": "ECE, calibrated",
    "doctor_uncal_fpr95": "Doctor FPR95 %, T = 1",
    "doctor_cal_fpr95": "Doctor FPR95 %, calibrated",
    "relu_uncal_fpr95": "Rel-U FPR95 %, T = 1",
    "relu_cal_fpr95": "Rel-U FPR95 %, calibrated",
}
#: The summary's quantity behind each paper column (state ``uncalibrated``/``calibrated``, and whether the value
#: is a fraction turned into % for the paper's units).
_OURS = {
    "ece_T1": ("ECE", "uncalibrated", False),
    "ece_calibrated": ("ECE", "calibrated", False),
    "doctor_uncal_fpr95": (f"{base.DOCTOR} {metric_info.get('fpr95').name}", "uncalibrated", True),
    "doctor_cal_fpr95": (f"{base.DOCTOR} {metric_info.get('fpr95').name}", "calibrated", True),
    "relu_uncal_fpr95": (f"{base.RELU} {metric_info.get('fpr95').name}", "uncalibrated", True),
    "relu_cal_fpr95": (f"{base.RELU} {metric_info.get('fpr95').name}", "calibrated", True),
}


def paper_heading() -> str:
    """The line above the paper's calibration rows: label, units, selection."""
    from relu_core.studies import paper_table

    return paper_table.heading(
        "calibration", "ECE as a fraction and FPR95 in %, the paper's units (our FPR95 converted from fractions)"
    )


def paper_reference(result: base.StudyResult, run) -> tuple[pd.DataFrame, list[str]]:
    """Our calibration summary beside the paper's ``tab:calibration`` rows of the run's data set (every network,
    the run's first), in the paper's units (ECE a fraction, FPR95 in %, mean (std)), each paper row labelled with
    its table and a note naming the paper's network (and saying so where ours differs); and the lines to show
    under it (the data set without a paper row: one line; our JPEG test images). Another study's ``result``: an
    empty frame and no line."""
    from relu_core.studies import paper_table

    if getattr(result, "study", NAME) != NAME:  # another study's result (its summary is not this one's)
        return pd.DataFrame(), []
    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    found = paper_table.calibration_rows(dataset, model=model)
    if not found:
        return pd.DataFrame(), [paper_table.no_table("calibration", dataset)]
    summary = result.tables["summary"].set_index("quantity")
    ours = {"row": "ours", "network": model or "logits only", "accuracy %": paper_table.our_accuracy(run)}
    for column, header in PAPER_COLUMNS.items():
        quantity, state, percent = _OURS[column]
        scale = 100.0 if percent else 1.0
        mean, std = summary.loc[quantity, f"{state}_mean"] * scale, summary.loc[quantity, f"{state}_std"] * scale
        ours[header] = f"{mean:.1f} ({std:.1f})" if percent else f"{mean:.3f} ({std:.3f})"
    ours["note"] = "mean (std) over our seeds"
    lines = [ours]
    for row in found:
        line = {"row": row.label, "network": row.network, "accuracy %": row.accuracy_text()}
        for column, header in PAPER_COLUMNS.items():
            line[header] = row.value(column).text()
        line["note"] = paper_table.network_note(row, model)
        lines.append(line)
    notes = [note for note in (paper_table.images_note(run),) if note]
    return pd.DataFrame(lines), notes


def paper_reference_dict(run) -> dict[str, object]:
    """The paper's calibration rows of the run's data set for a JSON output: heading, rows (``PaperRow.to_dict``
    with the network note), or the one line saying the paper has none, and the line on our CIFAR-10 JPEG test
    images (None where they are not)."""
    from relu_core.studies import paper_table

    dataset, model = getattr(run, "dataset_name", ""), getattr(run, "model_name", "") or None
    found = paper_table.calibration_rows(dataset, model=model)
    return {
        "heading": paper_heading(),
        "rows": [{**row.to_dict(), "network_note": paper_table.network_note(row, model)} for row in found],
        "note": None if found else paper_table.no_table("calibration", dataset),
        "images_note": paper_table.images_note(run),
    }
