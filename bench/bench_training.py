"""Benchmark of the seeded CPU training of the small CNNs (a benchmark, not a timed test).

Targets (issue 3): ``cnn28`` trained on the full Fashion-MNIST training set (60,000 images) reaches at least
90 % test accuracy within 5 minutes on the 2-core development machine; ``cnn8`` on scikit-learn's digits
reaches at least 95 %. Prints accuracy, wall time and CPU time per run and the load average (other processes on
a shared machine slow the wall time down: CPU time / threads estimates an idle machine's wall time), and exits
with 1 when a target is missed.

    .venv/bin/python bench/bench_training.py [--epochs 5] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("RELU_STUDIO_DATA", str(REPO.parent / "shared" / "data"))

from relu_core.datasets import load_dataset  # noqa: E402
from relu_core.models import get_spec  # noqa: E402
from relu_core.training import RECIPES, train_small_cnn  # noqa: E402

FASHION_TARGET, FASHION_BUDGET_S, DIGITS_TARGET = 0.90, 300.0, 0.95


def test_accuracy(model: torch.nn.Module, arch: str, images: np.ndarray, labels: np.ndarray) -> float:
    """Top-1 accuracy of a plain normalised forward pass (independent of the engine module)."""
    spec = get_spec(arch)
    mean = torch.tensor(spec.mean) * 255.0
    std = torch.tensor(spec.std) * 255.0
    predictions = []
    with torch.inference_mode():
        for start in range(0, len(images), 2000):
            batch = (torch.from_numpy(images[start : start + 2000].copy()).float() - mean) / std
            predictions.append(model(batch.permute(0, 3, 1, 2)).argmax(1))
    return float((torch.cat(predictions).numpy() == labels).mean())


def run(name: str, arch: str, epochs: int, batch_size: int, lr: float) -> tuple[float, float]:
    train, test = load_dataset(name, split="train"), load_dataset(name, split="test")
    start, cpu_start = time.perf_counter(), time.process_time()
    model = train_small_cnn(
        train.images,
        train.labels,
        len(train.class_names),
        arch=arch,
        epochs=epochs,
        seed=0,
        batch_size=batch_size,
        lr=lr,
    )
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    accuracy = test_accuracy(model, arch, test.images, test.labels)
    print(
        f"{name:<14} {arch:<6} train {len(train.labels):>6} test {len(test.labels):>6}  epochs {epochs:>2}  "
        f"batch {batch_size:>3}  accuracy {accuracy:.2%}  training {seconds:6.1f} s wall, {cpu_seconds:6.1f} s CPU",
        flush=True,
    )
    return accuracy, seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=RECIPES["cnn28"].epochs, help="Fashion-MNIST epochs")
    parser.add_argument("--batch-size", type=int, default=RECIPES["cnn28"].batch_size, help="Fashion-MNIST batch size")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak one-cycle learning rate")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {os.cpu_count()} CPUs, load average before: {os.getloadavg()}")
    digits_accuracy, _ = run("digits", "cnn8", RECIPES["cnn8"].epochs, RECIPES["cnn8"].batch_size, args.lr)
    fashion_accuracy, fashion_s = run("fashion-mnist", "cnn28", args.epochs, args.batch_size, args.lr)
    print(f"load average after: {os.getloadavg()}")
    checks = {
        f"digits >= {DIGITS_TARGET:.0%}": digits_accuracy >= DIGITS_TARGET,
        f"fashion-mnist >= {FASHION_TARGET:.0%}": fashion_accuracy >= FASHION_TARGET,
        f"fashion-mnist within {FASHION_BUDGET_S:.0f} s": fashion_s <= FASHION_BUDGET_S,
    }
    for label, ok in checks.items():
        print(f"{'PASS' if ok else 'FAIL'}  {label}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
