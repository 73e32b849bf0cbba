"""Time the 1000-class x 50,000-sample case (the stated limit, ``relu_core.limits``) end to end, server side.

Stages: reading the upload (``runs.load_logits_upload`` on the npz bytes, headers checked first), the first
Explore view (softmax, split, Rel-U fit, scores, curves, metrics, the paired bootstrap), one λ move, one T
move, and building the figures (D* and confusion heatmaps show the top 50 classes). Run once small to check
it works, full size on a quiet machine for the figures:

    .venv/bin/python bench/bench_scale.py             # 50,000 x 1000
    .venv/bin/python bench/bench_scale.py 2000 100    # a quick check
"""

from __future__ import annotations

import io
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_app import slider_change, synthetic_run
from relu_core import explore, limits, runs


def _timed(label: str, step) -> object:
    start = time.perf_counter()
    result = step()
    print(f"{label:<40} {1000 * (time.perf_counter() - start):9.1f} ms")
    return result


def main(n: int = 50_000, n_classes: int = limits.MAX_CLASSES) -> None:
    limits.check_logits_shape(n, n_classes, "the benchmark's logits")
    synthetic = synthetic_run(n, n_classes)
    buffer = io.BytesIO()
    np.savez(buffer, logits=synthetic.logits, labels=synthetic.labels)
    data = buffer.getvalue()
    print(f"{n:,} samples x {n_classes} classes ({len(data) / 2**20:.0f} MiB npz)")
    run = _timed("read the upload (headers, arrays, checks)", lambda: runs.load_logits_upload(data, "scale.npz"))
    setting = explore.Setting(tune_fraction=0.2)
    _timed("first view (softmax, split, fit, figures)", lambda: slider_change(run, setting))
    _timed("λ move", lambda: slider_change(run, setting.replace(lam=0.6)))
    _timed("T move", lambda: slider_change(run, setting.replace(lam=0.6, temperature=2.0)))


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))
