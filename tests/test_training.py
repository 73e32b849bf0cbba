"""Seeded CPU training of the small CNNs: accuracy on digits, determinism, progress, cancellation, validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import save_file
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

from relu_core.errors import Cancelled, InputError
from relu_core.models import MODELS, weights_hash
from relu_core.training import train_small_cnn

Digits = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


@pytest.fixture(scope="module")
def digits() -> Digits:
    """scikit-learn digits as uint8 NHWC (0..16 rescaled to 0..255), seeded stratified 50/50 split."""
    data = load_digits()
    images = np.round(data.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    x_train, x_test, y_train, y_test = train_test_split(
        images, data.target, test_size=0.5, random_state=0, stratify=data.target
    )
    return x_train, y_train, x_test, y_test


def _accuracy(model: torch.nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    spec = MODELS["cnn8"]
    x = (torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255.0 - spec.mean[0]) / spec.std[0]
    with torch.inference_mode():
        return float((model(x).argmax(1).numpy() == labels).mean())


@pytest.mark.slow
def test_cnn8_reaches_95_percent_on_digits(digits: Digits) -> None:
    x_train, y_train, x_test, y_test = digits
    model = train_small_cnn(x_train, y_train, 10, arch="cnn8", epochs=15, seed=0, batch_size=64)
    assert not model.training
    assert _accuracy(model, x_test, y_test) >= 0.95


@pytest.mark.slow
def test_same_seed_same_weights_other_seed_other_weights(digits: Digits) -> None:
    x_train, y_train, _, _ = digits
    runs = [train_small_cnn(x_train, y_train, 10, arch="cnn8", epochs=2, seed=s, batch_size=64) for s in (7, 7, 8)]
    assert weights_hash(runs[0]) == weights_hash(runs[1])
    assert weights_hash(runs[0]) != weights_hash(runs[2])


def test_training_leaves_global_state_alone(digits: Digits, tmp_path: Path) -> None:
    x_train, y_train, _, _ = digits
    threads = torch.get_num_threads()
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    model = train_small_cnn(x_train[:100], y_train[:100], 10, arch="cnn8", epochs=1, seed=0, batch_size=32)
    assert torch.equal(torch.rand(3), expected)
    assert torch.get_num_threads() == threads and not torch.are_deterministic_algorithms_enabled()
    save_file(model.state_dict(), str(tmp_path / "cnn8.safetensors"))  # plain contiguous tensors


def test_progress_reports_every_batch(digits: Digits) -> None:
    x_train, y_train, _, _ = digits
    calls: list[tuple[int, int, str]] = []
    # 101 images in batches of 20: five full batches; the lone leftover image is skipped (BatchNorm needs 2).
    train_small_cnn(
        x_train[:101],
        y_train[:101],
        10,
        arch="cnn8",
        epochs=2,
        seed=0,
        batch_size=20,
        progress=lambda done, total, message: calls.append((done, total, message)),
    )
    assert [done for done, _, _ in calls] == list(range(1, 11))
    assert {total for _, total, _ in calls} == {10}
    assert calls[-1][2].startswith("training cnn8: epoch 2/2, loss ")


def test_cancel_stops_training(digits: Digits) -> None:
    x_train, y_train, _, _ = digits
    polls: list[int] = []

    def cancel() -> bool:
        polls.append(1)
        return len(polls) > 3

    with pytest.raises(Cancelled, match="cancelled at epoch 1/5"):
        train_small_cnn(x_train, y_train, 10, arch="cnn8", epochs=5, seed=0, batch_size=64, cancel=cancel)
    assert len(polls) == 4


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"images": np.zeros((10, 28, 28, 1), np.uint8)}, "cnn8 expects 8x8 images with 1 channel"),
        ({"images": np.zeros((10, 8, 8, 1), np.float32)}, "uint8 array"),
        ({"labels": np.full(10, 10)}, r"labels must lie in 0..9"),
        ({"labels": np.zeros(9, int)}, "labels must be 10 integers"),
        ({"arch": "resnet20"}, "trains the small CNNs"),
        ({"arch": "nope"}, "unknown model"),
        ({"num_classes": 1}, "num_classes must be an integer >= 2"),
        ({"epochs": 0}, "epochs must be a positive integer"),
        ({"images": np.zeros((1, 8, 8, 1), np.uint8), "labels": np.zeros(1, int)}, "at least 2 images"),
    ],
)
def test_bad_input_is_an_input_error(change: dict, message: str) -> None:
    arguments = {
        "images": np.zeros((10, 8, 8, 1), np.uint8),
        "labels": np.arange(10) % 10,
        "num_classes": 10,
        "arch": "cnn8",
        "epochs": 1,
    }
    arguments.update(change)
    with pytest.raises(InputError, match=message):
        train_small_cnn(
            arguments["images"],
            arguments["labels"],
            arguments["num_classes"],
            arch=arguments["arch"],
            epochs=arguments["epochs"],
            seed=0,
            batch_size=4,
        )
