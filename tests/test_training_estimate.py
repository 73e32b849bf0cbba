"""The training-time estimate a page shows before work starts (relu_core.training.estimate): its arithmetic, its
data sizes against the data, and its words."""

from __future__ import annotations

import pytest

from relu_core import datasets, models, training
from relu_core.training import estimate

FIVE = ("cross-entropy", "logitnorm", "mixup", "regmixup", "openmix")
#: The machine the CPU figures were measured on: 2 threads on a quiet 2-core machine.
QUIET = estimate.Machine(threads=2, load=0.0, cores=2)


def test_the_estimate_is_images_over_the_measured_throughput_twice_for_two_batch_objectives(monkeypatch) -> None:
    monkeypatch.setitem(estimate.THROUGHPUT, ("net", "cpu"), 900.0)
    monkeypatch.setitem(estimate.TRAIN_IMAGES, "set", 1_000)
    one_epoch = 1_000 * (1 - training.HOLDOUT_FRACTION) / 900.0  # the held-out tenth is never trained on
    guess = estimate.estimate("net", "set", FIVE, 3, "cpu", machine=QUIET)
    assert guess.seconds == pytest.approx(one_epoch * 3 * (1 + 1 + 1 + 2 + 2))  # RegMixUp, OpenMix: two batches
    assert guess.per_model_seconds == pytest.approx(one_epoch * 3 * 2) and guess.models == 5
    assert estimate.estimate("net", "set", ["mixup"], 3, "cpu", machine=QUIET).seconds == pytest.approx(one_epoch * 3)


def test_no_measured_throughput_gives_no_number_and_says_so() -> None:
    for guess in (
        estimate.estimate("resnet9", "cifar10", FIVE, 24, "mps"),
        estimate.estimate("no-such-net", "cifar10", FIVE, 24, "cpu"),
        estimate.estimate("resnet9", "no-such-set", FIVE, 24, "cuda"),
    ):
        assert guess.seconds is None and not guess.too_long_for_a_cpu
        assert "no estimate" in guess.sentence()


def test_a_gpu_network_on_a_cpu_is_flagged_and_the_cpu_network_is_not() -> None:
    assert estimate.estimate("resnet34_cifar", "cifar10", FIVE, 200, "cpu", machine=QUIET).too_long_for_a_cpu
    assert estimate.estimate("resnet9", "cifar10", FIVE, 24, "cpu", machine=QUIET).too_long_for_a_cpu
    cpu_network = models.trainable_models("cifar10", gpu=False)[0]
    epochs = training.recipes.default_epochs(training.recipes.get("fast"), cpu_network)
    assert not estimate.estimate(cpu_network, "cifar10", FIVE, epochs, "cpu", machine=QUIET).too_long_for_a_cpu
    assert not estimate.estimate("resnet34_cifar", "cifar10", FIVE, 200, "cuda").too_long_for_a_cpu  # a GPU's
    warning = estimate.cpu_warning("resnet34_cifar", "cifar10", FIVE, 200, machine=QUIET)
    assert warning.startswith(
        "No GPU here: resnet34_cifar takes up to about 7 days a model"
    )  # 45,000 x 200 x 2 / 31 per s
    assert (
        f"{cpu_network} is this data set's CPU network (up to about 24 min a model" in warning
    )  # RegMixUp's 2 x 12 min
    assert estimate.cpu_warning(cpu_network, "cifar10", FIVE, epochs, machine=QUIET) is None


def test_the_estimate_follows_the_threads_the_work_gets_and_the_load() -> None:
    """Issue 43: "about 12 min" (the quiet figure) for a CIFAR-10 resnet9_small that took about 8 times that at one
    model thread and a load of 8-10 on 2 cores."""
    epochs = 14
    quiet = estimate.estimate("resnet9_small", "cifar10", ["cross-entropy"], epochs, "cpu", machine=QUIET)
    assert quiet.seconds == pytest.approx(45_000 * epochs / estimate.THROUGHPUT[("resnet9_small", "cpu")])
    one_thread = estimate.Machine(threads=1, load=0.0, cores=2)
    busy = estimate.Machine(threads=1, load=9.0, cores=2)
    seen = estimate.estimate("resnet9_small", "cifar10", ["cross-entropy"], epochs, "cpu", machine=busy)
    assert estimate.cpu_share(one_thread) == pytest.approx(0.5)  # half the reference's threads, each a whole core
    assert estimate.cpu_share(busy) == pytest.approx(1 * (2 / 10) / 2)  # 10 runnable threads share 2 cores
    assert seen.seconds == pytest.approx(quiet.seconds * 10)
    # what it took: 2 of its 14 epochs in 14 minutes, about 98 min in all (the quiet figure said 12)
    assert 98 * 60 / 2 < seen.seconds < 98 * 60 * 2
    assert "scaled to this machine now: 1 model thread, load 9.0 on 2 cores" in seen.sentence()
    # a load that leaves the threads their cores changes nothing; a GPU's figure is never scaled
    assert estimate.cpu_share(estimate.Machine(threads=2, load=0.0, cores=4)) == 1.0
    gpu = estimate.estimate("resnet9", "cifar10", ["cross-entropy"], 10, "cuda", machine=busy)
    assert gpu.machine is None and "scaled" not in gpu.sentence()
    # the models counted are the models trained: one per objective, an objective named twice trains one
    assert estimate.estimate("net", "set", ["mixup", "mixup"], 1, "cpu", machine=QUIET).models == 1


def test_the_current_machine_is_read_from_the_thread_policy_and_the_load(monkeypatch) -> None:
    monkeypatch.setenv("RELU_STUDIO_MODEL_THREADS", "1")
    monkeypatch.setattr(estimate.os, "getloadavg", lambda: (7.5, 0.0, 0.0))
    machine = estimate.current_machine()
    assert (machine.threads, machine.load) == (1, 7.5) and machine.cores >= 1
    guess = estimate.estimate("resnet9_small", "cifar10", ["cross-entropy"], 14, "cpu")
    assert guess.machine == machine


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
