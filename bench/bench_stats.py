"""Paired bootstrap of Rel-U − Doctor (``relu_core.stats.paired_bootstrap``): FPR95, AUROC and AURC.

Times 1,000 paired resamples of an evaluation split of 1k, 10k and 50k samples (synthetic scores of a
~85 %-accurate classifier, continuous and heavily tied), median of a few repeats, against the naive way
(materialise each resample with fancy indexing and call ``metrics.summary`` twice) measured on 50
resamples and scaled to 1,000. Target: at most 300 ms at 10k. Run: ``.venv/bin/python bench/bench_stats.py``.

Then Explore's interval as it is made now (``explore.views.paired_for``): D* refitted in every one of the 1,000
resamples (``stats.refitted_paired``) on synthetic runs of 10 classes, 1k, 10k and 50k samples, beside the same
view's bootstrap with D* held fixed; one run each (a second or more: the median of few would add little).
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import explore, metrics, stats  # noqa: E402
from relu_core.explore import views  # noqa: E402
from relu_core.runs import Run  # noqa: E402

REPEATS = 5


def scores(n: int, tied: bool, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    correct = rng.random(n) < 0.85
    a = rng.normal(size=n) + (~correct) * 1.2
    b = a + rng.normal(size=n) * 0.4
    if tied:
        a, b = np.round(a, 1), np.round(b, 1)
    return a, b, correct


def naive(a: np.ndarray, b: np.ndarray, correct: np.ndarray, n_resamples: int) -> None:
    rng = np.random.default_rng(0)
    for _ in range(n_resamples):
        idx = rng.integers(0, len(a), len(a))
        metrics.summary(a[idx], correct[idx])
        metrics.summary(b[idx], correct[idx])


def timed(function, *args) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        function(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    print(
        f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; 1,000 paired resamples, "
        f"FPR95 + AUROC + AURC, median of {REPEATS}"
    )
    print(f"{'N':>7} {'scores':>11} {'vectorised':>11} {'naive':>10} {'speed-up':>9}")
    for n in (1_000, 10_000, 50_000):
        for tied in (False, True):
            a, b, correct = scores(n, tied)
            fast = timed(lambda: stats.paired_bootstrap(a, b, correct, n_resamples=1000))
            start = time.perf_counter()
            naive(a, b, correct, 50)
            slow = (time.perf_counter() - start) * 1000 / 50
            print(
                f"{n:>7,} {'tied' if tied else 'continuous':>11} {fast * 1000:>9.0f} ms {slow * 1000:>7.0f} ms "
                f"{slow / fast:>8.1f}x"
            )


def refitted() -> None:
    """Explore's paired bootstrap with D* refitted in each resample against the same with D* fixed."""
    print(f"\nExplore's interval, 10 classes, 1,000 resamples (load average {os.getloadavg()[0]:.2f}):")
    print(f"{'N':>7} {'D* refitted':>12} {'D* fixed':>9}")
    for n in (1_000, 10_000, 50_000):
        rng = np.random.default_rng(n)
        labels = rng.integers(0, 10, n)
        logits = (rng.normal(size=(n, 10)) + 3 * np.eye(10)[labels] * rng.random((n, 1))).astype(np.float32)
        view = explore.view(
            Run.from_logits(logits, labels, tuple("abcdefghij"), source=f"bench {n}"), explore.Setting()
        )
        refit, view.refit = view.refit, None  # None above views.PAIRED_REFIT_MAX_WORK: the page keeps D* fixed
        fixed = timed(lambda: views.paired_for(view))
        took = "too large"
        if refit is not None:
            view.refit, start = refit, time.perf_counter()
            views.paired_for(view)
            took = f"{(time.perf_counter() - start) * 1000:.0f} ms"
        print(f"{n:>7,} {took:>12} {fixed * 1000:>6.0f} ms")


if __name__ == "__main__":
    main()
    refitted()
