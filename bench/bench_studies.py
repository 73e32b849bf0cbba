"""The studies' sweeps (``relu_core.studies``), without the paired bootstrap and without the result cache.

- λ ablation: 11 λ x 10 seeds at 10k x 100 logits (one softmax, the tuning moments once per seed, D* per λ
  from them, Rel-U and Doctor metrics per point). Target: under 2 s.
- Tuning-split study: 4 fractions x 10 seeds at 10k x 10 logits. Target: under 1 s.

Also printed: the same sweeps through ``protocol.evaluate`` once per point (the obvious way: a softmax and a
fit per call), and the paired bootstrap that the studies add per point (1,000 resamples of every seed's
evaluation part). Median of a few repeats; synthetic logits of a ~75 %-accurate classifier.
Run: ``.venv/bin/python bench/bench_studies.py [--quick]`` (``--quick``: 2k samples, one repeat, to check it runs).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import protocol  # noqa: E402
from relu_core.studies import ablation, base, tuning_split  # noqa: E402


def synthetic(n: int, c: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) * 1.5
    logits[np.arange(n), labels] += 2.0 + 0.02 * c
    return logits.astype(np.float32), labels


def timed(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def lambda_sweep(logits, labels, seeds) -> base.Collector:
    correct = protocol.correctness(logits, labels)
    collector = base.Collector()
    ablation.lambda_sweep(logits, protocol.seeded_splits(correct, 0.5, seeds), ablation.LAMBDAS, collector)
    return collector


def fraction_sweep(logits, labels, seeds) -> base.Collector:
    correct = protocol.correctness(logits, labels)
    collector = base.Collector()
    tuning_split.fraction_sweep(logits, correct, tuning_split.FRACTIONS, collector, base.options(seeds=seeds))
    return collector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes, one repeat (checks the script runs)")
    args = parser.parse_args()
    n, repeats = (2_000, 1) if args.quick else (10_000, 5)
    seeds = tuple(range(10))
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; median of {repeats}")

    compare("λ ablation, 11 λ x 10 seeds", n, 100, lambda_sweep, "lam", ablation.LAMBDAS, "λ", "2 s", seeds, repeats)
    compare(
        "tuning split, 4 fractions x 10 seeds",
        n,
        10,
        fraction_sweep,
        "tune_fraction",
        tuning_split.FRACTIONS,
        "fraction",
        "1 s",
        seeds,
        repeats,
    )


def compare(title, n, n_classes, sweep, setting, grid, point, target, seeds, repeats) -> None:
    """Print the vectorised ``sweep`` against ``protocol.evaluate`` at each ``setting`` of ``grid``, and the
    paired bootstrap of the sweep's points, on synthetic ``n`` x ``n_classes`` logits."""
    logits, labels = synthetic(n, n_classes)
    fast = timed(lambda: sweep(logits, labels, seeds), repeats)
    naive = timed(
        lambda: [
            protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=seeds, n_resamples=0, **{setting: value})
            for value in grid
        ],
        1,
    )
    collector = sweep(logits, labels, seeds)
    boot = timed(lambda: collector.finish(1000), 1)
    print(
        f"{title}, {n:,} x {n_classes}: {fast * 1e3:8.1f} ms (target < {target}); "
        f"protocol.evaluate per {point} {naive * 1e3:8.1f} ms; + paired bootstrap (1,000 per point) {boot:.1f} s"
    )


if __name__ == "__main__":
    main()
