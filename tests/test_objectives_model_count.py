"""How many models the Training objectives page says the study will train (issue 43: "Training 2 models …
about 36 min" for a study that trained one). The study trains one model per objective chosen, and reads back those
already in the cache: 36 min is a cross-entropy and a two-batch model of resnet9_small at 14 epochs, 12 + 24 min,
with the cross-entropy one cached. The count is of the models not cached, and names the cached ones; and the page
opens on the current run's data set, whose run is named like a real one ("digits-test", not "digits")."""

from __future__ import annotations

import dataclasses

import pytest

from relu_core.studies import objectives
from relu_core.training import estimate
from studio import session

QUIET = estimate.Machine(threads=2, load=0.0, cores=2)
TWO = ("cross-entropy", "openmix")


def test_a_cached_model_is_neither_counted_nor_timed_and_the_sentence_names_it() -> None:
    unknown = estimate.estimate("resnet9_small", "cifar10", TWO, 14, "cpu", machine=QUIET)
    assert (
        unknown.models == 2 and "Training 2 models" in unknown.sentence() and "if none is cached" in unknown.sentence()
    )
    guess = estimate.estimate("resnet9_small", "cifar10", TWO, 14, "cpu", machine=QUIET, cached=("cross-entropy",))
    alone = estimate.estimate("resnet9_small", "cifar10", ("openmix",), 14, "cpu", machine=QUIET)
    assert guess.models == 1 and guess.seconds == pytest.approx(alone.seconds)  # the OpenMix model's time only
    assert guess.seconds == pytest.approx(unknown.seconds * 2 / 3)  # 24 of the 36 min
    words = guess.sentence()
    assert words.startswith("Training 1 model of resnet9_small")
    assert "for openmix (cross-entropy is cached, read back;" in words and "if none is cached" not in words


def test_none_or_every_model_cached_is_said_as_such() -> None:
    none = estimate.estimate("resnet9_small", "cifar10", TWO, 14, "cpu", machine=QUIET, cached=())
    assert none.models == 2 and "for cross-entropy, openmix (none is cached;" in none.sentence()
    every = estimate.estimate("resnet9_small", "cifar10", TWO, 14, "cpu", machine=QUIET, cached=TWO)
    assert every.models == 0 and every.seconds == 0 and not every.too_long_for_a_cpu
    assert every.sentence() == "No training: 2 models of resnet9_small (cross-entropy, openmix) cached."
    # a cached model also leaves the CPU warning's count
    slow = estimate.cpu_warning("resnet34_cifar", "cifar10", TWO, 200, machine=QUIET, cached=("openmix",))
    assert slow is not None and "for all 1;" in slow
    assert estimate.cpu_warning("resnet34_cifar", "cifar10", TWO, 200, machine=QUIET, cached=TWO) is None


def test_cached_objectives_finds_the_model_the_study_trained() -> None:
    before = objectives.cached_objectives("digits", "cnn8", ["logitnorm", "mixup"], epochs=1, seed=7)
    assert before == ()
    objectives.objective_run("digits", "cnn8", "logitnorm", epochs=1, seed=7, device="cpu")
    assert objectives.cached_objectives("digits", "cnn8", ["logitnorm", "mixup"], epochs=1, seed=7) == ("logitnorm",)
    assert objectives.cached_objectives("digits", "cnn8", ["logitnorm"], epochs=2, seed=7) == ()  # another cap
    assert objectives.cached_objectives("digits", "cnn8", ["openmix"], epochs=1) is None  # refused: no outliers


def test_the_run_of_a_registered_set_names_that_set(digits_run) -> None:
    available = ["digits", "fashion-mnist", "cifar10"]
    named = dataclasses.replace(digits_run, dataset_name="cifar10-test")  # a real run's name: the set and its split
    assert objectives.run_dataset(named, available) == "cifar10"
    recipe = dataclasses.replace(digits_run, dataset_name="x", recipe=(("dataset_spec", "fashion-mnist"),))
    assert objectives.run_dataset(recipe, available) == "fashion-mnist"
    assert objectives.run_dataset(dataclasses.replace(digits_run, dataset_name="upload"), available) is None


def _dataset(at) -> str:
    return next(box for box in at.selectbox if box.key == session.OBJ_DATASET).value


@pytest.mark.slow
def test_the_page_opens_on_a_real_runs_data_set_and_counts_only_the_models_to_train(digits_run, pages) -> None:
    run = dataclasses.replace(digits_run, run_id="digits-test-named", dataset_name="digits-test")
    at = pages.open("Objectives.py", run)
    pages.ok(at)
    box = next(box for box in at.selectbox if box.key == session.OBJ_DATASET)
    if box.options == ["digits"]:
        pytest.skip("digits is the only data set offered here: the page would open on it anyway")
    assert _dataset(at) == "digits"  # it opened on Fashion-MNIST: "digits-test" is no registered name
    # the page's settings for digits: cnn8, the plain recipe, its epoch cap, training seed 0
    epochs = int(at.session_state[session.OBJ_EPOCHS])
    objectives.objective_run("digits", "cnn8", "mixup", epochs=epochs, device="cpu")
    next(m for m in at.multiselect if m.key == session.OBJ_OBJECTIVES).set_value(["cross-entropy", "mixup"])
    at.run()
    pages.ok(at)
    hint = " ".join(info.value for info in at.info)
    cached = objectives.cached_objectives("digits", "cnn8", ["cross-entropy", "mixup"], epochs=epochs)
    assert cached is not None and "mixup" in cached
    if "cross-entropy" in cached:  # another test of this session trained it
        assert "No training: 2 models of cnn8 (cross-entropy, mixup) cached." in hint
    else:
        assert "Training 1 model of cnn8" in hint and "for cross-entropy (mixup is cached, read back;" in hint
