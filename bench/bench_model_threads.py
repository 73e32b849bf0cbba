"""Benchmark: model work (training, the engine's logits, an ε pass) quiet and with one core busy, in one run.

For each piece of work and each thread policy — ``follow`` (``relu_core.threads.model_work``: the idle CPUs)
and the fixed counts 1 and 2 — it prints the median wall time of ``--repeats`` runs on a quiet machine and
beside ``bench/busy.py``'s spinning process, and the ratio loaded / quiet (issue 27's target: ≤ 1.5 for the
policy). The work is sized to take a few seconds each: ``cnn28`` trained one epoch on ``--train-images``
random 28 × 28 images (batch 256), a CIFAR ResNet-20's logits on ``--images`` random 32 × 32 images, and
Doctor's ε pass on a quarter of them. Random weights and images: the speed is that of trained ones.

    .venv/bin/python bench/bench_model_threads.py [--repeats 3] [--train-images 4096] [--images 2048]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ["RELU_STUDIO_CACHE"] = tempfile.mkdtemp(prefix="relu-bench-")  # measure work, not cache hits

from bench.busy import one_core_busy  # noqa: E402
from relu_core import detectors, engine, preprocessing, threads  # noqa: E402
from relu_core.models import cnn28, resnet20  # noqa: E402
from relu_core.models.normalization import Normalization  # noqa: E402
from relu_core.training import loop  # noqa: E402

POLICIES = {"follow": None, "1 thread": 1, "2 threads": 2}


def workloads(train_images: int, images: int) -> dict[str, Callable[[], object]]:
    rng = np.random.default_rng(0)
    digits = rng.integers(0, 256, (train_images, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, 10, train_images)
    cifar = rng.integers(0, 256, (images, 32, 32, 3), dtype=np.uint8)
    torch.manual_seed(0)
    model = resnet20(num_classes=10).eval()
    grey, colour = Normalization((0.5,), (0.5,)), {"mean": (0.5, 0.5, 0.5), "std": (0.25, 0.25, 0.25)}
    doctor = detectors.Doctor()
    epsilons = iter(np.linspace(1e-4, 1e-2, 1000))  # a new ε each time: never a cached result
    return {
        f"training cnn28, 1 epoch of {train_images}": lambda: loop.fit(
            lambda: cnn28(num_classes=10), grey, digits, labels, 10, epochs=1, seed=0, batch_size=256
        ),
        f"logits resnet20, {images} images": lambda: engine.compute_logits(model, cifar, device="cpu", **colour),
        f"ε pass resnet20 (Doctor), {images // 4} images": lambda: preprocessing.perturbed_scores(
            model, cifar[: images // 4], doctor, float(next(epsilons)), device="cpu", **colour
        ),
    }


def median_seconds(work: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--train-images", type=int, default=4096)
    parser.add_argument("--images", type=int, default=2048)
    args = parser.parse_args()
    os.environ.pop("RELU_STUDIO_MODEL_THREADS", None)
    work = workloads(args.train_images, args.images)
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f} before; median of {args.repeats} runs")
    results: dict[tuple[str, str], list[float]] = {}
    for loaded in (False, True):
        for name, run in work.items():
            for policy, fixed in POLICIES.items():
                threads.configure(model_threads=fixed)
                run()  # warm-up (first-call allocations, oneDNN primitives)
                if loaded:
                    with one_core_busy(limit_s=600):
                        seconds = median_seconds(run, args.repeats)
                else:
                    seconds = median_seconds(run, args.repeats)
                results.setdefault((name, policy), []).append(seconds)
    threads.configure(model_threads=None)
    print(f"{'work':<44} {'policy':<10} {'quiet s':>8} {'loaded s':>9} {'loaded/quiet':>13}")
    for (name, policy), (quiet, loaded) in results.items():
        print(f"{name:<44} {policy:<10} {quiet:8.2f} {loaded:9.2f} {loaded / quiet:13.2f}")
    print(f"load average {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
