"""Server-side time of one Explore slider change at CIFAR-10 size (10k x 10) and CIFAR-100 size (10k x 100).

Times what the Explore fragment runs when λ or T moves, on synthetic logits: the softmax per T (cached,
so a λ move reuses it; a T move computes it once), the Rel-U fit on the tuning split, the scores of
Rel-U and Doctor, ROC / risk-coverage curves and metrics on the evaluation split, the operating points,
and building the D*, ROC and risk-coverage figures (the confusion-matrix figure depends only on the
split and is cached). The paired bootstrap of Rel-U − Doctor runs beside that in a background job
(``relu_core.explore.paired_job``) and is timed on its own. Target: at most 50 ms at 10k x 100. Run: ``.venv/bin/python bench/bench_app.py``.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.busy import one_core_busy  # noqa: E402
from relu_core import explore  # noqa: E402
from relu_core.runs import Run  # noqa: E402

REPEATS = 15


def synthetic_run(n: int, n_classes: int, seed: int = 0) -> Run:
    """Logits of a ~90 %-accurate classifier whose errors concentrate on neighbouring class pairs."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    confused = np.where(rng.random(n) < 0.1, (labels + 1) % n_classes, labels)
    logits = rng.normal(size=(n, n_classes)).astype(np.float32)
    logits[np.arange(n), confused] += 4.0 * rng.random(n).astype(np.float32) + 1.0
    names = tuple(f"class {c}" for c in range(n_classes))
    return Run.from_logits(
        logits,
        labels,
        names,
        source=f"synthetic {n} x {n_classes}",
    )


def slider_change(run, setting: explore.Setting) -> None:
    """One fragment rerun's compute path (no widgets): the view (uncached, as on a setting not seen before), its
    operating points and the figures Explore draws by default (D*, ROC, risk-coverage)."""
    view = explore.views.compute(run, setting)
    explore.confusion_figure(run, setting.tune_fraction, setting.seed)
    marked = view.marked(setting)
    marked.roc, marked.rc, view.heat  # noqa: B018 - the figures Explore draws by default, built on first use


def bench(n: int, n_classes: int, label: str, seed: int) -> tuple[float, float]:
    """Median λ-move and T-move times (ms) on a fresh run (its own softmax cache)."""
    run = synthetic_run(n, n_classes, seed)
    setting = explore.Setting(tune_fraction=0.2)
    slider_change(run, setting)  # warm-up: softmax at T=1, split, confusion figure
    lam_times, t_times = [], []
    for i in range(REPEATS):
        start = time.perf_counter()
        slider_change(run, setting.replace(lam=round(0.3 + 0.02 * i, 2)))
        lam_times.append(time.perf_counter() - start)
    for i, temperature in enumerate(explore.TEMPERATURES[:REPEATS]):
        start = time.perf_counter()
        slider_change(run, setting.replace(temperature=temperature))  # a new T: its softmax is computed here
        t_times.append(time.perf_counter() - start)
    lam_ms, t_ms = 1e3 * statistics.median(lam_times), 1e3 * statistics.median(t_times)
    view = explore.view(run, setting)
    paired_times = []
    for _ in range(5):
        start = time.perf_counter()
        explore.views.paired_for(view)
        paired_times.append(time.perf_counter() - start)
    print(
        f"{n:>6} x {n_classes:<4} {label:<16} λ move: median {lam_ms:6.1f} ms (max {1e3 * max(lam_times):6.1f})"
        f"   T move (new softmax): median {t_ms:6.1f} ms (max {1e3 * max(t_times):6.1f})"
        f"   paired bootstrap (background): median {1e3 * statistics.median(paired_times):6.1f} ms"
    )
    return lam_ms, t_ms


if __name__ == "__main__":
    print(
        f"Explore slider change, server side (the paired bootstrap of Rel-U − Doctor runs beside it in a "
        f"background job, timed on its own below); "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs before the runs"
    )
    for shape in ((10_000, 10), (10_000, 100)):
        quiet = bench(*shape, "quiet", seed=0)
        with one_core_busy():
            loaded = bench(*shape, "one core busy", seed=1)
        print(f"{'':>12} loaded / quiet: λ {loaded[0] / quiet[0]:.2f}x, T {loaded[1] / quiet[1]:.2f}x")
