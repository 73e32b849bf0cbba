"""Training on a CUDA GPU (skipped without one; ``bench/gpu_check.sh`` runs these on a lent GPU): the batched
augmentation gives on the GPU exactly what it gives on the CPU for the same draws, and the training loop under bf16
autocast and channels-last trains the fast recipe's network and the small CNNs to finite weights, returned on the
CPU like every model trained here."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relu_core import datasets
from relu_core.models import Normalization, build_model, get_spec
from relu_core.training import Objective, loop, recipes
from relu_core.training.augment import Augmentation

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")


def test_augmentation_on_the_gpu_equals_the_cpu() -> None:
    images = np.random.default_rng(0).integers(0, 256, (512, 32, 32, 3), dtype=np.uint8)
    aug = Augmentation(4, True)
    draws = aug.draw(512, np.random.default_rng(1))
    cpu = aug.apply(torch.from_numpy(images), draws)
    gpu = aug.apply(torch.from_numpy(images).cuda(), draws)
    assert gpu.device.type == "cuda" and torch.equal(gpu.cpu(), cpu)


@pytest.mark.parametrize("objective", ["cross-entropy", "regmixup"])
def test_one_epoch_of_the_fast_recipe_on_the_gpu(objective: str) -> None:
    rng = np.random.default_rng(2)
    images = rng.integers(0, 256, (1200, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 1200)
    trained = loop.fit(
        lambda: build_model("resnet9_small", 10),
        get_spec("resnet9_small").normalization,
        images,
        labels,
        10,
        objective=Objective(objective),
        epochs=2,
        seed=0,
        batch_size=256,
        recipe=recipes.FAST,
        augmentation=Augmentation(4, True),
        holdout_fraction=0.1,
        patience=1,
        device="cuda",
    )
    weights = trained.model.state_dict()
    assert all(t.device.type == "cpu" for t in weights.values())
    assert all(torch.isfinite(t).all() for t in weights.values() if t.is_floating_point())
    assert len(trained.history) == 2 and all(np.isfinite(r.loss) for r in trained.history)


def test_the_plain_recipe_trains_a_small_cnn_on_the_gpu() -> None:
    train = datasets.load_dataset("digits", split="train")
    trained = loop.fit(
        lambda: build_model("cnn8", 10),
        Normalization((0.5,), (0.5,)),
        train.images,
        train.labels,
        10,
        epochs=3,
        seed=0,
        batch_size=64,
        holdout_fraction=0.1,
        device="cuda",
    )
    assert trained.final_accuracy > 0.5  # digits: well above the 10 % of chance after three epochs
