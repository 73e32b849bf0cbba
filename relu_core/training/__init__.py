"""Training classifiers: the default run's recipe, and any of five objectives with early stopping, checkpoints and
several processes.

- :func:`train_small_cnn` and :data:`RECIPES`: how the app and the CLI make a small CNN when the user brings no
  weights (the default run): plain cross-entropy on the whole training split for a fixed number of epochs, since
  the detectors downstream study the model's own confidence.
- :func:`train`: any registered architecture with one of the objectives of
  :mod:`relu_core.training.objectives` (cross-entropy, LogitNorm, MixUp, RegMixUp, OpenMix), under a named recipe
  (:mod:`relu_core.training.recipes`: optimiser, schedule, batch, augmentation of
  :mod:`relu_core.training.augment`), stopping early on a held-out part of the training set within the schedule's
  final phase, resuming from a per-epoch checkpoint (:mod:`relu_core.training.loop`).

Both run the same loop (:func:`relu_core.training.loop.fit`): seeded, deterministic on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from relu_core import validation
from relu_core.errors import InputError
from relu_core.models import build_model, get_spec
from relu_core.progress import Cancel, Progress
from relu_core.training import augment, loop, recipes
from relu_core.training.augment import Augmentation
from relu_core.training.loop import DEFAULT_LR, WEIGHT_DECAY, Diverged, EpochRecord, Trained
from relu_core.training.objectives import OBJECTIVES, PAPER_OBJECTIVES, DropOutlierClass, Objective
from relu_core.training.recipes import PRESETS, TrainingRecipe

__all__ = [
    "PAPER_OBJECTIVES",
    "PRESETS",
    "Augmentation",
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_LR",
    "DEFAULT_PATIENCE",
    "HOLDOUT_FRACTION",
    "OBJECTIVES",
    "RECIPES",
    "WEIGHT_DECAY",
    "Diverged",
    "DropOutlierClass",
    "EpochRecord",
    "Objective",
    "Recipe",
    "Trained",
    "TrainingRecipe",
    "augment",
    "batch_size_for",
    "recipes",
    "train",
    "train_small_cnn",
]

#: Share of the training set held out for early stopping, and the epochs without improvement that stop it.
HOLDOUT_FRACTION = 0.1
DEFAULT_PATIENCE = 2
#: Batch size of the architectures without a recipe (the CIFAR ResNet-34 / DenseNet-121: 128, as the papers).
DEFAULT_BATCH_SIZE = 128


@dataclass(frozen=True)
class Recipe:
    """How the app and the CLI train a small CNN when the user brings no weights (``bench/bench_training.py``
    measures exactly these: digits/cnn8 98.8 %, full Fashion-MNIST/cnn28 92.3 % in under two minutes on 2 cores)."""

    epochs: int
    batch_size: int


RECIPES: dict[str, Recipe] = {"cnn8": Recipe(30, 64), "cnn28": Recipe(5, 256), "cnn32": Recipe(15, 128)}


def batch_size_for(arch: str, recipe: TrainingRecipe) -> int:
    """The batch size ``arch`` trains with under ``recipe``: the recipe's when it names one, else the small CNN's
    (:data:`RECIPES`), else :data:`DEFAULT_BATCH_SIZE`."""
    if recipe.batch_size is not None:
        return recipe.batch_size
    return RECIPES[arch].batch_size if arch in RECIPES else DEFAULT_BATCH_SIZE


def _check_images(images: object, arch: str, what: str = "images") -> tuple[int, ...]:
    """The shape of ``images`` when they are uint8 NHWC of the size and channels ``arch`` reads."""
    spec = get_spec(arch)
    if not isinstance(images, np.ndarray) or images.dtype != np.uint8 or images.ndim != 4:
        raise InputError(f"{what} must be a uint8 array of shape (N, H, W, C)")
    n, height, width, channels = images.shape
    if (height, width, channels) != (spec.input_size, spec.input_size, spec.in_channels):
        raise InputError(
            f"{arch} expects {spec.input_size}x{spec.input_size} images with {spec.in_channels} channel(s), "
            f"got {what} of {height}x{width}x{channels}"
        )
    return images.shape


def _validate(
    images: np.ndarray, labels: np.ndarray, num_classes: int, arch: str, epochs: int, batch_size: int
) -> np.ndarray:
    n = _check_images(images, arch)[0]
    if n < 2:
        raise InputError(f"training needs at least 2 images, got {n}")
    labels = np.asarray(labels)
    if labels.shape != (n,) or not np.issubdtype(labels.dtype, np.integer):
        raise InputError(f"labels must be {n} integers, got shape {labels.shape} of {labels.dtype}")
    validation.integer(num_classes, "num_classes", minimum=2)
    if labels.min() < 0 or labels.max() >= num_classes:
        raise InputError(f"labels must lie in 0..{num_classes - 1}, found {labels.min()}..{labels.max()}")
    if labels.min() == labels.max():  # a classifier of one class learns nothing to tell apart
        raise InputError(
            f"training needs images of at least 2 classes; all {n:,} training images are of class {int(labels[0])}"
        )
    recipes.check_epochs(epochs, "epochs")
    validation.integer(batch_size, "batch_size", minimum=1)
    return labels.astype(np.int64)


def train_small_cnn(
    images_uint8_nhwc: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    arch: str = "cnn8",
    epochs: int = 10,
    seed: int = 0,
    batch_size: int = 128,
    lr: float = DEFAULT_LR,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> nn.Module:
    """Train ``arch`` from scratch on CPU with cross-entropy on every image for ``epochs`` epochs; returns it in
    eval mode.

    AdamW (weight decay 5e-4) with a one-cycle learning-rate schedule peaking at ``lr``, inputs normalised with
    the architecture's ``ModelSpec.normalization`` (the engine's arithmetic), mini-batches in a seeded order
    (:func:`relu_core.training.loop.fit`). The same inputs and seed give bit-identical weights on the same
    machine and thread count. ``progress(done, total, message)``
    is called after every batch; when ``cancel()`` returns True the training stops with ``Cancelled``.
    """
    if not get_spec(arch).name.startswith("cnn"):
        raise InputError(f"train_small_cnn trains the small CNNs (cnn8, cnn28, cnn32), not {arch!r}")
    targets = _validate(images_uint8_nhwc, labels, num_classes, arch, epochs, batch_size)
    trained = loop.fit(
        lambda: build_model(arch, num_classes),
        get_spec(arch).normalization,
        images_uint8_nhwc,
        targets,
        num_classes,
        epochs=epochs,
        seed=seed,
        batch_size=batch_size,
        lr=lr,
        name=arch,
        progress=progress,
        cancel=cancel,
    )
    return trained.model


def train(
    images_uint8_nhwc: np.ndarray,
    labels: np.ndarray,
    num_classes: int,
    *,
    arch: str,
    objective: Objective | None = None,
    outliers: np.ndarray | None = None,
    epochs: int,
    seed: int = 0,
    batch_size: int | None = None,
    lr: float = DEFAULT_LR,
    recipe: str | TrainingRecipe | None = None,
    augmentation: Augmentation | None = None,
    holdout_fraction: float = HOLDOUT_FRACTION,
    patience: int | None = DEFAULT_PATIENCE,
    checkpoint: Path | None = None,
    checkpoint_key: str = "",
    device: str | torch.device = "cpu",
    compile_model: bool | None = None,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> Trained:
    """Train a fresh ``arch`` with ``objective`` (default cross-entropy) on the training images, stopping early on a
    held-out part of them; returns the weights of the best held-out epoch with the training curve.

    ``recipe`` (a preset name of :data:`PRESETS` or a :class:`TrainingRecipe`; None: ``plain`` at learning rate
    ``lr``) gives the optimiser and its schedule over the ``epochs`` cap; ``batch_size`` None takes
    :func:`batch_size_for`; ``augmentation`` (default none; :func:`augment.for_dataset` gives a data set's
    standard one) is applied to every training batch. ``holdout_fraction`` of the images (seeded) is held out and
    training stops after ``patience`` epochs of the schedule's final phase without a better held-out accuracy
    (:mod:`relu_core.training.loop`, :mod:`relu_core.training.recipes`). OpenMix needs
    ``outliers`` (uint8 NHWC images of the training images' size and channels) and trains C + 1 outputs; the
    returned model is wrapped in :class:`DropOutlierClass` (its logits' last column removed), so it is a C-class
    classifier like the others. ``checkpoint``/``checkpoint_key``: resume from (and write) a per-epoch
    checkpoint. Bad input raises InputError with one line.
    """
    objective = (objective or Objective()).for_classes(num_classes)
    chosen = recipes.PLAIN.with_lr(lr) if recipe is None else recipes.get(recipe)
    batch_size = batch_size_for(arch, chosen) if batch_size is None else batch_size
    targets = _validate(images_uint8_nhwc, labels, num_classes, arch, epochs, batch_size)
    if objective.uses_outliers:
        if outliers is None:
            raise InputError("openmix needs an outlier data set (e.g. --outliers mnist for Fashion-MNIST)")
        if _check_images(outliers, arch, "outlier images")[0] < 1:
            raise InputError("the outlier data set has no images")
    elif outliers is not None:
        raise InputError(f"outliers are used by openmix only, not by {objective.name}")
    if patience is not None:
        validation.integer(patience, "patience", minimum=1)
    trained = loop.fit(
        lambda: build_model(arch, num_classes + objective.extra_classes),
        get_spec(arch).normalization,
        images_uint8_nhwc,
        targets,
        num_classes,
        objective=objective,
        outliers=outliers,
        epochs=epochs,
        seed=seed,
        batch_size=batch_size,
        recipe=chosen,
        augmentation=augmentation,
        holdout_fraction=holdout_fraction,
        patience=patience,
        checkpoint=checkpoint,
        checkpoint_key=checkpoint_key,
        device=device,
        compile_model=compile_model,
        name=f"{arch} ({objective.name})",
        progress=progress,
        cancel=cancel,
    )
    if not objective.extra_classes:
        return trained
    wrapped = DropOutlierClass(trained.model, num_classes).eval()
    return Trained(
        wrapped, trained.history, trained.best_epoch, trained.stopped_early, trained.holdout_index, trained.resumed_from
    )
