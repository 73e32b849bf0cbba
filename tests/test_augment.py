"""Data augmentation as batched tensor operations (``relu_core.training.augment``) against a per-image reference
(torchvision's RandomCrop with zero padding, then a horizontal flip), seeded and deterministic, applied to training
batches only (never the held-out part, never the test split), at CPU scale: a few hundred images, one epoch."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relu_core import datasets, runs
from relu_core.models import Normalization, build_model
from relu_core.training import augment, loop, recipes
from relu_core.training.augment import Augmentation

GREY = Normalization((0.5,), (0.5,))


def _reference(images: np.ndarray, aug: Augmentation, draws: augment.Draws) -> np.ndarray:
    """One image at a time: pad with zeros, crop at (dy, dx), then mirror."""
    out = np.empty_like(images)
    p = aug.pad
    _, height, width, _ = images.shape
    for i, image in enumerate(images):
        padded = np.pad(image, ((p, p), (p, p), (0, 0)))
        crop = padded[draws.dy[i] : draws.dy[i] + height, draws.dx[i] : draws.dx[i] + width]
        out[i] = crop[:, ::-1] if draws.flip[i] else crop
    return out


@pytest.mark.parametrize(
    ("shape", "aug"), [((300, 8, 8, 1), Augmentation(1, False)), ((200, 32, 32, 3), Augmentation(4, True))]
)
def test_the_batched_crop_and_flip_equal_the_per_image_reference(shape, aug: Augmentation) -> None:
    rng = np.random.default_rng(3)
    images = rng.integers(0, 256, shape, dtype=np.uint8)
    draws = aug.draw(shape[0], np.random.default_rng(7))
    got = aug.apply(torch.from_numpy(images), draws)
    assert got.shape == images.shape and got.dtype == torch.uint8
    np.testing.assert_array_equal(got.numpy(), _reference(images, aug, draws))
    assert set(np.unique(draws.dy)) == set(range(2 * aug.pad + 1))  # every offset is drawn
    assert draws.flip.any() == aug.flip


def test_the_draws_are_seeded_and_no_augmentation_is_the_identity() -> None:
    aug = Augmentation(4, True)
    first, again = aug.draw(500, np.random.default_rng((0, 1))), aug.draw(500, np.random.default_rng((0, 1)))
    other = aug.draw(500, np.random.default_rng((0, 2)))
    assert all(np.array_equal(getattr(first, f), getattr(again, f)) for f in ("dy", "dx", "flip"))
    assert not np.array_equal(first.dx, other.dx)
    images = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (5, 32, 32, 3), dtype=np.uint8))
    assert augment.NONE.apply(images, augment.NONE.draw(5, np.random.default_rng(0))) is images
    centred = Augmentation(4, False).apply(images, augment.Draws(np.full(5, 4), np.full(5, 4), np.zeros(5, bool)))
    assert torch.equal(centred, images)  # the crop at the centre of the padding is the image


def test_each_data_set_gets_its_standard_augmentation() -> None:
    assert augment.for_dataset("cifar10", (32, 32, 3)) == Augmentation(4, True)
    assert augment.for_dataset("cifar100", (32, 32, 3)) == Augmentation(4, True)
    assert augment.for_dataset("svhn", (32, 32, 3)) == Augmentation(4, False)  # digits are never mirrored
    assert augment.for_dataset("mnist", (28, 28, 1)) == Augmentation(3, False)
    assert augment.for_dataset("fashion-mnist", (28, 28, 1)) == Augmentation(3, True)
    assert augment.for_dataset("digits", (8, 8, 1)) == Augmentation(1, False)
    assert augment.Augmentation(4, True).describe() == "random crop (pad 4) + horizontal flip"


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    train = datasets.load_dataset("digits", split="train")
    return train.images[:300], train.labels[:300]


def test_the_loop_augments_training_batches_only_and_keeps_their_labels(digits, monkeypatch) -> None:
    """Every augmented batch holds training images (never held-out ones), of the batch's shape; the labels the loss
    reads are the batch's own labels (augmentation moves pixels, not classes)."""
    images, labels = digits
    seen_images, seen_labels = [], []
    apply = Augmentation.apply

    def recording(self, batch, draws):
        seen_images.append(batch.numpy().copy())
        out = apply(self, batch, draws)
        assert out.shape == batch.shape and out.dtype == torch.uint8
        return out

    def loss(self, model, x, y, num_classes, **draws):
        seen_labels.append(y.numpy().copy())
        return torch.nn.functional.cross_entropy(model(x), y)

    monkeypatch.setattr(Augmentation, "apply", recording)
    monkeypatch.setattr(loop.Objective, "loss", loss)
    trained = loop.fit(
        lambda: build_model("cnn8", 10),
        GREY,
        images,
        labels,
        10,
        epochs=1,
        seed=0,
        batch_size=64,
        holdout_fraction=0.2,
        augmentation=Augmentation(1, False),
    )
    held = {image.tobytes() for image in images[trained.holdout_index]}
    training = np.setdiff1d(np.arange(len(labels)), trained.holdout_index)
    rows = {image.tobytes(): label for image, label in zip(images[training], labels[training], strict=True)}
    batch_images = np.concatenate(seen_images)
    assert len(batch_images) == len(training)  # one epoch: every training image once, each augmented
    assert not {image.tobytes() for image in batch_images} & (held - set(rows))
    assert [rows[image.tobytes()] for image in batch_images] == np.concatenate(seen_labels).tolist()


def test_a_seeded_augmented_training_is_deterministic_and_resumes_exactly(digits, tmp_path) -> None:
    images, labels = digits

    def fit(checkpoint=None, cancel=None):
        return loop.fit(
            lambda: build_model("cnn8", 10),
            GREY,
            images,
            labels,
            10,
            epochs=2,
            seed=4,
            batch_size=64,
            recipe=recipes.FAST,
            augmentation=Augmentation(1, True),
            holdout_fraction=0.1,
            patience=None,
            checkpoint=checkpoint,
            checkpoint_key="k",
            cancel=cancel,
        )

    first, second = fit(), fit()
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(tensor, second.model.state_dict()[name]), name
    calls = iter(range(10_000))
    with pytest.raises(loop.Cancelled):
        fit(tmp_path / "c.pt", cancel=lambda: next(calls) == 6)  # after the first epoch (5 steps)
    resumed = fit(tmp_path / "c.pt")
    assert resumed.resumed_from == 1
    for name, tensor in first.model.state_dict().items():
        assert torch.equal(tensor, resumed.model.state_dict()[name]), name


def test_the_fast_recipe_trains_a_run_from_the_training_split_only(monkeypatch) -> None:
    """One epoch of the fast recipe (SGD, crop, augmentation on) on digits: the training split is the only split
    read, the settings say which recipe and augmentation ran."""
    read = []
    load = datasets.load_dataset

    def training_splits_only(spec, split="test", **options):
        read.append(split)
        if split == "test":
            raise AssertionError("training read the test split")
        return load(spec, split=split, **options)

    monkeypatch.setattr(datasets, "load_dataset", training_splits_only)
    trained = runs.trained_model("cnn8", "digits", {"recipe": "fast", "epochs": 1, "seed": 1})
    assert read == ["train"]
    settings = trained.metadata["settings"]
    assert settings["recipe"]["name"] == "fast" and settings["augmentation"] == "random crop (pad 1)"
    assert settings["batch_size"] == recipes.FAST.batch_size and settings["lr"] == recipes.FAST.lr


def test_one_epoch_of_openmix_on_cifar_sized_images_with_dead_leaves_outliers(monkeypatch) -> None:
    """The CIFAR-10 path at CPU scale: resnet9_small, the fast recipe with the standard crop + flip, OpenMix mixing
    in generated dead-leaves images, a few hundred images, one epoch: finite weights, C + 1 outputs trained."""
    from relu_core.datasets import generated
    from relu_core.models import get_spec

    monkeypatch.setitem(generated.DEAD_LEAVES_SIZES, "train", 256)
    outliers = datasets.load_dataset("dead-leaves", split="train").images
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (300, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, 300)
    trained = loop.fit(
        lambda: build_model("resnet9_small", 11),
        get_spec("resnet9_small").normalization,
        images,
        labels,
        10,
        objective=loop.Objective("openmix"),
        outliers=outliers,
        epochs=1,
        seed=0,
        batch_size=128,
        recipe=recipes.FAST,
        augmentation=augment.for_dataset("cifar10", (32, 32, 3)),
        holdout_fraction=0.1,
    )
    assert trained.model.classifier.out_features == 11
    assert all(torch.isfinite(t).all() for t in trained.model.state_dict().values() if t.is_floating_point())
