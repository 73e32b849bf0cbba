"""Time the 1000-class x 50,000-sample case (the stated limit, ``relu_core.limits``) end to end, server side.

On ImageNet-like logits (:func:`imagenet_like_run`: a ResNet-50's accuracy and confidence spread, printed
first). Stages: reading the upload (``runs.load_logits_upload`` on the npz bytes, headers checked first), the
first Explore view (softmax, split, Rel-U fit, scores, curves, metrics; caches emptied as on a fresh server),
λ moves and T moves (each to a value not computed before) with the figures (D* and confusion heatmaps show
the top 50 classes); medians of ``repeats``, quiet then with one core busy (``bench/busy.py``), then Rel-U's
metrics against the dense reference. Dense moves are timed with no λ grid; then the λ grid of T = 1 is prepared
(``explore.cached.lambda_grid_job``, timed) and λ moves and their neighbours are timed with it ready. Run once
small to check it works (a run large enough to get a λ grid: ``explore.cached.GRID_MIN_WORK``), full size on a
quiet machine:

    .venv/bin/python bench/bench_scale.py               # 50,000 x 1000, 3 repeats
    .venv/bin/python bench/bench_scale.py 5000 300 1    # a quick check

With ``--device cuda`` (a GPU machine) the same stages run with the views' dense algebra on the GPU
(``RELU_STUDIO_SLIDER_DEVICE``, ``explore.cached.slider_device``) and, in the same minutes, on the CPU's numpy
path for comparison (quiet only, no λ grid; the neighbours' views are timed on the GPU).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_app import slider_change
from bench.busy import one_core_busy
from relu_core import detectors, explore, limits, metrics, runs
from relu_core.runs import Run


def imagenet_like_run(n: int, n_classes: int, seed: int = 0) -> Run:
    """Logits shaped like a ResNet-50's on ImageNet's validation set (at 50k x 1000: top-1 ~77 %, mean
    max-probability ~0.78, ~0.48 on the errors, entropy median ~0.4 nats, 90th percentile ~3): classes in
    groups of ten similar ones (dog breeds) that share a raise on every sample of the group, a true-class
    margin that varies from hard to easy samples, and noise on every class (the diffuse tail a real model has)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, n_classes, n)
    group = np.arange(n_classes) // 10
    same = group[None, :] == group[labels][:, None]
    logits = rng.normal(0.0, 1.2, size=(n, n_classes)).astype(np.float32)
    logits += same * (rng.uniform(2.0, 6.0, (n, 1)) + rng.normal(0.0, 1.5, (n, n_classes))).astype(np.float32)
    logits[np.arange(n), labels] += (rng.gamma(2.0, 2.5, n) + 1.0).astype(np.float32)
    logits *= 1.3
    return Run.from_logits(logits, labels, tuple(f"class {c}" for c in range(n_classes)), source="ImageNet-like")


def describe(run: Run) -> str:
    """Accuracy, max-probability and entropy spread of the run's softmax at T = 1 (the realism check)."""
    probs = detectors.softmax(run.logits)
    msp, correct = probs.max(axis=1), probs.argmax(axis=1) == run.labels
    entropy = -(probs * np.log(np.maximum(probs, np.finfo(np.float64).tiny))).sum(axis=1)
    return (
        f"top-1 {correct.mean():.3f}; max-probability mean {msp.mean():.2f} (errors {msp[~correct].mean():.2f}), "
        f"median {np.median(msp):.2f}; entropy median {np.median(entropy):.2f}, 90th percentile "
        f"{np.quantile(entropy, 0.9):.2f} nats"
    )


def _ms(step) -> float:
    start = time.perf_counter()
    step()
    return 1000 * (time.perf_counter() - start)


@contextlib.contextmanager
def no_lambda_grid():
    """No λ grid job is started (it would run beside the timed moves): views of a (T, split) whose grid is not
    ready are scored densely, as before the grid."""
    kept = explore.cached.GRID_MIN_WORK
    explore.cached.GRID_MIN_WORK = math.inf
    try:
        yield
    finally:
        explore.cached.GRID_MIN_WORK = kept


def _moves(run, setting: explore.Setting, repeats: int) -> tuple[float, float]:
    """Median ms of ``repeats`` λ moves (each to a λ not computed before) and of ``repeats`` T moves (each to a
    temperature not seen before, so its softmax and moments are computed in the move), scored densely."""
    lams = [round(0.55 + 0.01 * k, 2) for k in range(repeats)]
    temperatures = [t for t in explore.TEMPERATURES if t > 1.0][:repeats]
    with no_lambda_grid():
        lam_ms = [_ms(lambda lam=lam: slider_change(run, setting.replace(lam=lam))) for lam in lams]
        t_ms = [_ms(lambda t=t: slider_change(run, setting.replace(lam=lams[-1], temperature=t))) for t in temperatures]
    return statistics.median(lam_ms), statistics.median(t_ms)


def _grid_moves(run, setting: explore.Setting, repeats: int) -> tuple[float, float, float]:
    """(Seconds the background job takes to prepare the λ grid of the setting's T and split; then the median ms of
    ``repeats`` λ moves, each to a λ not computed before, and of computing each moved view's two neighbours.)"""
    explore.cached.GRIDS.clear()
    explore.views.VIEWS.clear()  # the neighbours are computed here, not found from the last round
    start = time.perf_counter()
    job = explore.cached.lambda_grid_job(run, setting.temperature, setting.tune_fraction, setting.seed)
    if job is None or not job.wait() or job.state != "done":
        raise RuntimeError(f"no λ grid for this run: {job and job.error}")
    prepared_s = time.perf_counter() - start
    lam_ms, neighbour_ms = [], []
    for k in range(repeats):
        moved = setting.replace(lam=round(0.35 + 0.03 * k, 2))
        lam_ms.append(_ms(lambda moved=moved: slider_change(run, moved)))
        if not explore.neighbours.follows_lambda(run, moved):
            raise RuntimeError("the λ neighbours are off with the grid ready")
        neighbour_ms.append(_ms(lambda moved=moved: explore.neighbour_views(run, moved)))
    return prepared_s, statistics.median(lam_ms), statistics.median(neighbour_ms)


def agreement(run, setting: explore.Setting) -> float:
    """Largest difference of Rel-U's FPR95, AUROC and AURC between the view and the dense reference (Rel-U fitted
    on the tuning split's softmax, every sample scored by ``p^T D* p``)."""
    _, correct = explore.cached.correctness(run)
    tune_idx, eval_idx = explore.cached.split_for(run, setting.tune_fraction, setting.seed)
    probs = detectors.softmax(run.logits, setting.temperature)
    dense = detectors.RelU(setting.lam, setting.temperature).fit_probs(probs[tune_idx], correct[tune_idx])
    reference = metrics.summary(dense.score_probs(probs)[eval_idx], correct[eval_idx])
    shown = explore.views.compute(run, setting).detectors["relu"].summary
    return max(abs(shown[k] - reference[k]) for k in ("fpr95", "auroc", "aurc", "augrc"))


def _first_views(data: bytes, setting: explore.Setting, repeats: int) -> tuple[Run, float, float]:
    """(The run read from the upload, median ms of reading it, median ms of its first view from empty caches.)"""
    reads, firsts = [], []
    for _ in range(repeats):
        start = time.perf_counter()
        run = runs.load_logits_upload(data, "scale.npz")
        reads.append(1000 * (time.perf_counter() - start))
        explore.views.clear()  # as a fresh server would find them
        with no_lambda_grid():
            firsts.append(_ms(lambda: slider_change(run, setting)))
    return run, statistics.median(reads), statistics.median(firsts)


def on_device(data: bytes, setting: explore.Setting, repeats: int, device: str) -> None:
    """The first view, λ moves, T moves and a move's two neighbours with the views' dense algebra on ``device``,
    then the same on the CPU's numpy path (no λ grid) in the same minutes. Every timed step ends with its scores
    back in numpy on the CPU, so the GPU's queued work is counted."""
    where = torch.device(device)
    name = torch.cuda.get_device_name(where) if where.type == "cuda" else where.type  # a CPU run is a smoke test
    print(f"device {device}: {name}; {os.cpu_count()} CPUs")
    for label, choice in ((device, device), ("numpy on the CPU", "numpy")):
        os.environ[explore.cached.SLIDER_DEVICE_ENV] = choice
        run, read_ms, first_ms = _first_views(data, setting, repeats)
        lam_ms, t_ms = _moves(run, setting, repeats)
        line = (
            f"{label:<17}: read the upload {read_ms:7.1f} ms, first view {first_ms:7.1f} ms, λ move {lam_ms:7.1f} "
            f"ms, T move {t_ms:7.1f} ms"
        )
        if choice == "numpy":
            print(line + f" (medians of {repeats})")
            continue
        neighbour_ms = []
        for k in range(repeats):
            moved = setting.replace(lam=round(0.35 + 0.03 * k, 2))
            slider_change(run, moved)
            if not explore.neighbours.follows_lambda(run, moved):
                raise RuntimeError(f"the λ neighbours are off on {device}")
            neighbour_ms.append(_ms(lambda moved=moved: explore.neighbour_views(run, moved)))
        print(line + f", its two neighbours {statistics.median(neighbour_ms):7.1f} ms (medians of {repeats})")
        print(
            f"Rel-U metrics ({device}) against the dense CPU reference: largest difference {agreement(run, setting):.1e}"
        )
    del os.environ[explore.cached.SLIDER_DEVICE_ENV]


def main(n: int = 50_000, n_classes: int = limits.MAX_CLASSES, repeats: int = 3, device: str | None = None) -> None:
    limits.check_logits_shape(n, n_classes, "the benchmark's logits")
    synthetic = imagenet_like_run(n, n_classes)
    print(describe(synthetic))
    buffer = io.BytesIO()
    np.savez(buffer, logits=synthetic.logits, labels=synthetic.labels)
    data = buffer.getvalue()
    print(f"{n:,} samples x {n_classes} classes ({len(data) / 2**20:.0f} MiB npz)")
    setting = explore.Setting(tune_fraction=0.2)
    if device is not None:
        on_device(data, setting, repeats, device)
        return
    os.environ[explore.cached.SLIDER_DEVICE_ENV] = "numpy"  # this machine's CPU path, even where a GPU is present
    for label, busy in (("quiet", contextlib.nullcontext), ("one core busy", one_core_busy)):
        with busy():
            load = os.getloadavg()[0]
            run, read_ms, first_ms = _first_views(data, setting, repeats)
            lam_ms, t_ms = _moves(run, setting, repeats)
            prepared_s, grid_lam_ms, neighbour_ms = _grid_moves(run, setting, repeats)
        print(
            f"{label:<14} (load average {load:.1f}): read the upload {read_ms:7.1f} ms, first view "
            f"{first_ms:7.1f} ms, λ move {lam_ms:7.1f} ms, T move {t_ms:7.1f} ms; λ grid prepared "
            f"in {prepared_s:.1f} s (background), then λ move {grid_lam_ms:7.1f} ms, its two neighbours "
            f"{neighbour_ms:7.1f} ms (medians of {repeats})"
        )
    print(f"Rel-U metrics (λ grid) against the dense reference: largest difference {agreement(run, setting):.1e}")


if __name__ == "__main__":
    arguments = sys.argv[1:]
    chosen_device = None
    if "--device" in arguments:
        at = arguments.index("--device")
        chosen_device = arguments[at + 1]
        del arguments[at : at + 2]
    main(*(int(arg) for arg in arguments[:3]), device=chosen_device)
