"""The training-time estimate a page shows before work starts (relu_core.training.estimate): its arithmetic, its
data sizes against the data, and its words."""

from __future__ import annotations

import pytest

from relu_core import datasets, models, training
from relu_core.training import estimate

FIVE = ("cross-entropy", "logitnorm", "mixup", "regmixup", "openmix")


def test_the_estimate_is_images_over_the_measured_throughput_twice_for_two_batch_objectives(monkeypatch) -> None:
    monkeypatch.setitem(estimate.THROUGHPUT, ("net", "cpu"), 900.0)
    monkeypatch.setitem(estimate.TRAIN_IMAGES, "set", 1_000)
    one_epoch = 1_000 * (1 - training.HOLDOUT_FRACTION) / 900.0  # the held-out tenth is never trained on
    guess = estimate.estimate("net", "set", FIVE, 3, "cpu")
    assert guess.seconds == pytest.approx(one_epoch * 3 * (1 + 1 + 1 + 2 + 2))  # RegMixUp, OpenMix: two batches
    assert guess.per_model_seconds == pytest.approx(one_epoch * 3 * 2) and guess.models == 5
    assert estimate.estimate("net", "set", ["mixup"], 3, "cpu").seconds == pytest.approx(one_epoch * 3)


def test_no_measured_throughput_gives_no_number_and_says_so() -> None:
    for guess in (
        estimate.estimate("resnet9", "cifar10", FIVE, 24, "mps"),
        estimate.estimate("no-such-net", "cifar10", FIVE, 24, "cpu"),
        estimate.estimate("resnet9", "no-such-set", FIVE, 24, "cuda"),
    ):
        assert guess.seconds is None and not guess.too_long_for_a_cpu
        assert "no estimate" in guess.sentence()


def test_a_gpu_network_on_a_cpu_is_flagged_and_the_cpu_network_is_not() -> None:
    assert estimate.estimate("resnet34_cifar", "cifar10", FIVE, 200, "cpu").too_long_for_a_cpu
    assert estimate.estimate("resnet9", "cifar10", FIVE, 24, "cpu").too_long_for_a_cpu
    cpu_network = models.trainable_models("cifar10", gpu=False)[0]
    epochs = training.recipes.default_epochs(training.recipes.get("fast"), cpu_network)
    assert not estimate.estimate(cpu_network, "cifar10", FIVE, epochs, "cpu").too_long_for_a_cpu
    assert not estimate.estimate("resnet34_cifar", "cifar10", FIVE, 200, "cuda").too_long_for_a_cpu  # a GPU's
    warning = estimate.cpu_warning("resnet34_cifar", "cifar10", FIVE, 200)
    assert warning.startswith(
        "No GPU here: resnet34_cifar takes up to about 7 days a model"
    )  # 45,000 x 200 x 2 / 31 per s
    assert (
        f"{cpu_network} is this data set's CPU network (up to about 24 min a model" in warning
    )  # RegMixUp's 2 x 12 min
    assert estimate.cpu_warning(cpu_network, "cifar10", FIVE, epochs) is None


def test_every_network_a_page_offers_by_default_has_an_estimate() -> None:
    for dataset in estimate.TRAIN_IMAGES:
        for gpu in (False, True):
            network = models.trainable_models(dataset, gpu)[0]
            device = "cuda" if gpu and (network, "cuda") in estimate.THROUGHPUT else "cpu"
            assert estimate.estimate(network, dataset, FIVE, 1, device).seconds is not None, (dataset, gpu)


@pytest.mark.parametrize(
    ("seconds", "words"),
    [
        (0.2, "1 s"),
        (40, "40 s"),
        (89, "89 s"),
        (91, "2 min"),
        (12 * 60, "12 min"),
        (95 * 60, "1 h 35 min"),
        (3 * 3600, "3 h"),
        (31.4 * 3600, "31 h"),
        (564 * 3600, "24 days"),
    ],
)
def test_durations_read_as_a_person_would_say_them(seconds, words) -> None:
    assert estimate.duration(seconds) == words


def test_the_training_split_sizes_are_the_data_s(shared_data) -> None:
    assert len(datasets.load_dataset("digits", split="train").labels) == estimate.TRAIN_IMAGES["digits"]
    assert len(datasets.load_dataset("fashion-mnist", split="train").labels) == estimate.TRAIN_IMAGES["fashion-mnist"]
    jpegs = shared_data / "cifar10" / "train_jpeg_q75"
    assert (
        sum(1 for path in jpegs.rglob("*") if path.is_file() and path.suffix.lower() in (".jpg", ".jpeg"))
        == (estimate.TRAIN_IMAGES["cifar10"])
    )
