"""Train one CIFAR-10 model with a recipe and time it: the CIFAR-10 training split (the 50,000-image JPEG folder of
``$RELU_STUDIO_DATA``), a held-out tenth for early stopping as every model trained here, then its accuracy on the
10,000-image JPEG test folder. Nothing is read from or written to the models cache: the training is timed every time.

    # the CPU recipe: resnet9_small, fast recipe, its 14 epochs, on this machine's cores (target: <= 15 minutes)
    RELU_STUDIO_DATA=../shared/data .venv/bin/python bench/bench_cifar.py --model resnet9_small --device cpu
    # the GPU target: resnet9, fast recipe, 24 epochs, >= 92 % on the JPEG test folder in <= 60 s
    python bench/bench_cifar.py --model resnet9 --device cuda [--compile] [--epochs 40]

It prints what it measured, one ``FIGURE`` line to paste into README: the device (and GPU name), the data's load time
(first decode or the cached read), the training's wall seconds (the loop alone; data already in memory), its
images per second, the epochs run and the best epoch, and the held-out and test accuracy.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from relu_core import datasets, engine, models, threads, training  # noqa: E402


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    idle = threads.idle_cpus()
    return f"CPU ({os.cpu_count()} cores, {'?' if idle is None else f'{idle:.1f}'} idle at the start)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet9_small")
    parser.add_argument("--recipe", default="fast", choices=list(training.PRESETS))
    parser.add_argument("--objective", default="cross-entropy", choices=list(training.OBJECTIVES))
    parser.add_argument("--epochs", type=int, default=None, help="epoch cap (default: the recipe's for the model)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (CUDA only)")
    parser.add_argument("--subset", type=int, default=None, help="train on a seeded subset of N images (a smoke test)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    args = parser.parse_args()

    device = engine.select_device(args.device)
    recipe = training.recipes.get(args.recipe)
    epochs = args.epochs or training.recipes.default_epochs(recipe, args.model)
    began = time.perf_counter()
    train = datasets.load_dataset("cifar10", split="train")
    test = datasets.load_dataset("cifar10", split="test")
    load_s = time.perf_counter() - began
    train_images, train_labels = train.images, train.labels
    if args.subset:
        keep = np.sort(np.random.default_rng(args.seed).permutation(len(train_labels))[: args.subset])
        train_images, train_labels = train_images[keep], train_labels[keep]
    augmentation = training.augment.for_dataset("cifar10", train.images.shape[1:]) if recipe.augment else None
    outliers = datasets.load_dataset("dead-leaves", split="train").images if args.objective == "openmix" else None
    print(
        f"{args.model}, {recipe.name} recipe ({recipe.description}), {args.objective}, cap {epochs} epochs, "
        f"on {device_name(device)}; data loaded in {load_s:.1f} s",
        flush=True,
    )

    def progress(done: int, total: int, message: str) -> None:
        if "held-out accuracy" in message:
            print(f"  {message}", flush=True)

    if device.type == "cuda":
        torch.cuda.synchronize()
    began = time.perf_counter()
    trained = training.train(
        train_images,
        train_labels,
        10,
        arch=args.model,
        objective=training.Objective(args.objective),
        outliers=outliers,
        epochs=epochs,
        seed=args.seed,
        recipe=recipe,
        augmentation=augmentation,
        patience=recipe.patience,
        device=device,
        compile_model=args.compile,
        progress=progress,
    )
    if device.type == "cuda":
        torch.cuda.synchronize()
    train_s = time.perf_counter() - began
    spec = models.get_spec(args.model)
    logits = engine.compute_logits(trained.model, test.images, mean=spec.mean, std=spec.std, device=device)
    accuracy = float(np.mean(logits.argmax(1) == test.labels))
    seen = (len(train_labels) - len(trained.holdout_index)) * len(trained.history)
    figures = {
        "model": args.model,
        "recipe": recipe.name,
        "objective": args.objective,
        "device": device_name(device),
        "compiled": bool(args.compile and device.type == "cuda"),
        "epochs_cap": epochs,
        "epochs_run": len(trained.history),
        "best_epoch": trained.best_epoch,
        "train_seconds": round(train_s, 1),
        "images_per_second": round(seen / train_s),
        "heldout_accuracy": trained.final_accuracy,
        "test_accuracy": accuracy,
        "load_seconds": round(load_s, 1),
        "training_images": len(train_labels),
    }
    print(
        f"FIGURE cifar10 {args.model} {recipe.name} {args.objective}: test accuracy {accuracy:.2%} (JPEG test folder), "
        f"held-out {trained.final_accuracy:.2%}, {len(trained.history)}/{epochs} epochs (weights of epoch "
        f"{trained.best_epoch}), training {train_s:.1f} s ({figures['images_per_second']:,} images/s) on "
        f"{figures['device']}{' (compiled)' if figures['compiled'] else ''}",
        flush=True,
    )
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
