"""Benchmark of one dashboard "slider update", the vectorised way against the naive way.

One update = fit Rel-U on the tuning half, score Rel-U, Doctor, MSP and ODIN on the evaluation half,
and compute the ROC curve, FPR at 95% TPR, AUROC, the risk-coverage curve and AURC of each.

* fast: ``relu_core`` as the app uses it: one softmax per temperature shared through
  ``fit_probs``/``score_probs`` (T = 1 for Rel-U, Doctor and MSP; T = 1000 for ODIN), ``P^T P / N``
  second moments, the row-wise ``((P @ D) * P).sum(1)`` score, one sort per detector for the metrics.
* naive: a softmax per detector, an N x C x C ``einsum`` of outer products for the fit, batched
  ``diag(P D P^T)`` scoring, scikit-learn for the ROC metrics and a Python loop over thresholds for
  the risk-coverage curve and AURC.

Both run in the same process on the same synthetic float32 logits; the split into halves is done
once, outside the timing (the app keeps it across slider moves). Where the naive way does not fit in
memory or time (50k x 1000) it runs on a random subsample and its time is extrapolated linearly in N,
which *under*-states the naive time (its AURC loop is quadratic), so the speed-up shown is conservative.

Run: ``.venv/bin/python bench/bench_core.py`` (add ``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import sklearn.metrics as skm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.busy import one_core_busy  # noqa: E402
from relu_core import metrics  # noqa: E402
from relu_core.detectors import MSP, ODIN, Doctor, RelU, softmax  # noqa: E402

LAMBDA = 0.5
ODIN_T = 1000.0
SIZES = ((10_000, 10), (10_000, 100), (50_000, 1000))
#: Naive runs above this many samples use a subsample of this size (the N x C x C tensor is N C^2 doubles).
NAIVE_MAX_SAMPLES = {10: 10_000, 100: 10_000, 1000: 300}


def synthetic_split(n: int, n_classes: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Float32 logits of a ~75%-accurate classifier, split into (tune logits, tune labels, eval logits, eval labels)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    logits = rng.standard_normal((n, n_classes)).astype(np.float32) * 2.0
    # The true class gets a random boost scaled with the expected maximum of C Gaussians.
    boost = rng.uniform(0.0, 6.0 * np.sqrt(2.0 * np.log(n_classes)), n)
    logits[np.arange(n), labels] += boost.astype(np.float32)
    half = n // 2
    return logits[:half].copy(), labels[:half].copy(), logits[half:].copy(), labels[half:].copy()


def fast_update(tune_logits, tune_labels, eval_logits, eval_labels) -> dict[str, tuple[float, float, float]]:
    """One slider update with relu_core; returns (fpr95, auroc, aurc) per detector."""
    tune_correct = tune_logits.argmax(1) == tune_labels
    eval_correct = eval_logits.argmax(1) == eval_labels
    eval_probs = softmax(eval_logits, 1.0)  # shared by Rel-U, Doctor and MSP
    relu = RelU(lam=LAMBDA).fit_probs(softmax(tune_logits, 1.0), tune_correct)
    scores = {
        "relu": relu.score_probs(eval_probs),
        "doctor": Doctor().score_probs(eval_probs),
        "msp": MSP().score_probs(eval_probs),
        "odin": ODIN(ODIN_T).score_probs(softmax(eval_logits, ODIN_T)),
    }
    results = {}
    for key, uncertainty in scores.items():
        metrics.roc_curve(uncertainty, eval_correct)
        metrics.risk_coverage_curve(uncertainty, eval_correct)
        results[key] = (
            metrics.fpr_at_tpr(uncertainty, eval_correct),
            metrics.auroc(uncertainty, eval_correct),
            metrics.aurc(uncertainty, eval_correct),
        )
    return results


def _naive_softmax(logits: np.ndarray, temperature: float) -> np.ndarray:
    z = logits.astype(np.float64) / temperature
    e = np.exp(z - z.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def _naive_aurc(uncertainty: np.ndarray, correct: np.ndarray) -> tuple[np.ndarray, float]:
    risks = []
    for threshold in np.sort(uncertainty):  # the synthetic scores have no ties
        accepted = uncertainty <= threshold
        risks.append(np.mean(~correct[accepted]))
    return np.array(risks), float(np.mean(risks))


def naive_update(tune_logits, tune_labels, eval_logits, eval_labels) -> dict[str, tuple[float, float, float]]:
    """The same update without the closed-form shortcuts (see the module docstring)."""
    tune_correct = tune_logits.argmax(1) == tune_labels
    eval_correct = eval_logits.argmax(1) == eval_labels
    tune_probs = _naive_softmax(tune_logits, 1.0)
    outer = np.einsum("ni,nj->nij", tune_probs, tune_probs)
    matrix = np.maximum(LAMBDA * outer[~tune_correct].mean(0) - (1 - LAMBDA) * outer[tune_correct].mean(0), 0.0)
    del outer
    np.fill_diagonal(matrix, 0.0)
    matrix /= np.linalg.norm(matrix)
    probs = _naive_softmax(eval_logits, 1.0)
    relu_scores = np.concatenate(
        [np.diag(chunk @ matrix @ chunk.T) for chunk in np.array_split(probs, max(1, len(probs) // 256))]
    )
    scores = {
        "relu": relu_scores,
        "doctor": 1 - (_naive_softmax(eval_logits, 1.0) ** 2).sum(1),
        "msp": -_naive_softmax(eval_logits, 1.0).max(1),
        "odin": -_naive_softmax(eval_logits, ODIN_T).max(1),
    }
    results = {}
    for key, uncertainty in scores.items():
        fpr, tpr, _ = skm.roc_curve(eval_correct, -uncertainty)
        _, aurc = _naive_aurc(uncertainty, eval_correct)
        results[key] = (float(fpr[np.argmax(tpr >= 0.95)]), skm.roc_auc_score(eval_correct, -uncertainty), aurc)
    return results


def median_seconds(function: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median (wall, CPU) seconds of ``function()``; CPU time sums all threads of this process."""
    function()  # warm-up: first-touch page faults and BLAS thread start-up
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)


def _subsample(split: tuple[np.ndarray, ...], n: int) -> tuple[np.ndarray, ...]:
    half = n // 2
    return tuple(array[:half] for array in split)


def _assert_agree(a: dict, b: dict, label: str) -> None:
    for key in a:
        if not np.allclose(a[key], b[key], rtol=1e-6, atol=1e-9):
            raise SystemExit(f"fast and naive disagree on {key} ({label}): {a[key]} vs {b[key]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and only the two small sizes")
    args = parser.parse_args()
    sizes = SIZES[:2] if args.quick else SIZES
    rows = []
    notes = []
    for n, n_classes in sizes:
        split = synthetic_split(n, n_classes)
        fast_repeats = 3 if args.quick else (5 if n * n_classes > 10**7 else 21)
        fast, fast_cpu = median_seconds(lambda: fast_update(*split), fast_repeats)
        with one_core_busy():
            loaded, _ = median_seconds(lambda: fast_update(*split), fast_repeats)
        naive_n = min(n, NAIVE_MAX_SAMPLES[n_classes])
        naive_split = _subsample(split, naive_n) if naive_n < n else split
        _assert_agree(fast_update(*naive_split), naive_update(*naive_split), f"{n} x {n_classes}")
        naive = median_seconds(lambda: naive_update(*naive_split), 1 if args.quick else 3)[0] * n / naive_n
        if naive_n < n:
            notes.append(
                f"naive time at {n:,} x {n_classes} measured on {naive_n} samples and extrapolated linearly in N "
                "(conservative: its AURC loop is quadratic)"
            )
        accuracy = float(np.mean(np.concatenate([split[0].argmax(1) == split[1], split[2].argmax(1) == split[3]])))
        rows.append((f"{n:,} x {n_classes}", accuracy, fast, fast_cpu, loaded, naive))

    print("One slider update: fit Rel-U on the tuning half; score Rel-U, Doctor, MSP, ODIN on the evaluation half;")
    print("ROC, FPR95, AUROC, risk-coverage and AURC for each. Median wall time; both ways agree on every value.")
    print()
    print("'loaded': the same with another process saturating one core (started and stopped here).")
    print()
    print(
        "| logits (N x C) | accuracy | fast | fast, CPU time | fast, one core busy | loaded / quiet | naive "
        "| speed-up |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for label, accuracy, fast, fast_cpu, loaded, naive in rows:
        print(
            f"| {label} | {accuracy:.3f} | {_format(fast)} | {_format(fast_cpu)} | {_format(loaded)} "
            f"| {loaded / fast:.2f}x | {_format(naive)} | {naive / fast:,.0f}x |"
        )
    for note in notes:
        print(f"\nNote: {note}.")
    # Other work on the machine inflates wall times; the load average says how quiet the run was, and the
    # CPU time (both BLAS threads together) is the cost that contention inflates least.
    print(f"\nLoad average (1 min) at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs.")


def _format(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


if __name__ == "__main__":
    main()
