"""Training throughput of the training loop (``relu_core.training.loop.fit``: augmentation as batched tensor
operations, bf16 autocast and channels-last on CUDA) in images per second, on random 32x32 images, per network and
recipe, eager or (``--compile``, CUDA only) compiled with ``torch.compile``: the second epoch's rate (the first pays for
cuDNN's autotuning and compilation; its time is printed too).

    python bench/bench_train_throughput.py --device cuda                 # a GPU, eager
    python bench/bench_train_throughput.py --device cuda --compile       # the same compiled
    .venv/bin/python bench/bench_train_throughput.py --device cpu --models resnet9_small --images 4096

One ``FIGURE`` line per network and mode, ready for README.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import engine, models, training  # noqa: E402
from relu_core.training import loop  # noqa: E402

#: Each network with the recipe it trains with here.
DEFAULT = "resnet9:fast,resnet9_small:fast,resnet34_cifar:paper,densenet121_cifar:paper"


def rate(arch: str, recipe: str, n: int, device: torch.device, compiled: bool) -> tuple[float, float]:
    """(images/s of the second epoch, seconds of the first) for ``arch`` under ``recipe`` on ``n`` images."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (n, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, n)
    chosen = training.recipes.get(recipe)
    trained = loop.fit(
        lambda: models.build_model(arch, 10),
        models.get_spec(arch).normalization,
        images,
        labels,
        10,
        epochs=2,
        seed=0,
        batch_size=training.batch_size_for(arch, chosen),
        recipe=chosen,
        augmentation=training.Augmentation(4, True),
        device=device,
        compile_model=compiled,
    )
    first, second = (record.seconds for record in trained.history)
    return n / second, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="auto")
    parser.add_argument("--models", default=DEFAULT, help=f"comma-separated NAME:RECIPE (default {DEFAULT})")
    parser.add_argument("--images", type=int, default=25_600, help="images per epoch (default 25,600)")
    parser.add_argument("--compile", action="store_true", help="time the networks compiled instead (CUDA only)")
    args = parser.parse_args()
    device = engine.select_device(args.device)
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    modes = [bool(args.compile and device.type == "cuda")]
    for entry in args.models.split(","):
        arch, _, recipe = entry.partition(":")
        for compiled in modes:
            began = time.perf_counter()
            per_second, first = rate(arch, recipe or "fast", args.images, device, compiled)
            print(
                f"FIGURE training throughput {arch} ({recipe or 'fast'} recipe, batch "
                f"{training.batch_size_for(arch, training.recipes.get(recipe or 'fast'))}"
                f"{', compiled' if compiled else ', eager'}): {per_second:,.0f} images/s on {name} "
                f"(first epoch {first:.1f} s, all {time.perf_counter() - began:.1f} s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
