"""The training loop of the objectives: early stopping on a held-out part of the training set, checkpoints and
resume, cancel, runs of trained models (one epoch of each objective end to end), jobs, and the ``train`` command."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from relu_core import cli, datasets, jobs, paths, runs, training
from relu_core.errors import Cancelled, InputError
from relu_core.models import Normalization, build_model, weights_hash
from relu_core.training import Objective, loop, recipes

GREY = Normalization((0.5,), (0.5,))


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    """The digits training split: 898 uint8 8x8 grey images."""
    train = datasets.load_dataset("digits", split="train")
    return train.images, train.labels


def _linear() -> nn.Module:
    """A model without BatchNorm or dropout: with lr = 0 its held-out accuracy cannot change."""
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 10))


def _accuracy(model: nn.Module, images: np.ndarray, labels: np.ndarray) -> float:
    with torch.inference_mode():
        x = GREY.on(torch.device("cpu"))(torch.from_numpy(np.ascontiguousarray(images)))
        return float((model(x).argmax(1).numpy() == labels).mean())


# ------------------------------------------------------------------------------------------ early stopping


def test_early_stopping_rule() -> None:
    stopper = loop.EarlyStopping(patience=2)
    decisions = []
    for epoch, accuracy in enumerate([0.5, 0.7, 0.7, 0.69, 0.8], start=1):
        if stopper.stop:
            break
        improved = stopper.update(epoch, accuracy)
        decisions.append((improved, stopper.stop))
    # a tie is no improvement: two epochs without one (0.7, 0.69) stop it
    assert decisions == [(True, False), (True, False), (False, False), (False, True)]
    assert (stopper.best, stopper.best_epoch) == (0.7, 2)
    never = loop.EarlyStopping(patience=None)
    for epoch in range(1, 20):
        never.update(epoch, 0.5)
    assert not never.stop


def test_epochs_before_the_final_phase_neither_count_nor_win() -> None:
    """The issue's case: the held-out accuracy peaks during the warm-up (epoch 4) and then plateaus; counted from
    epoch 1 a patience of 2 stopped at epoch 6 with epoch 4's weights. Counted from the final phase it runs on."""
    accuracies = [0.80, 0.85, 0.87, 0.90, 0.89, 0.88, 0.89, 0.88, 0.89, 0.90, 0.91, 0.92]
    old, new = loop.EarlyStopping(2), loop.EarlyStopping(2, counts_from=9)
    stops = {}
    for stopper, label in ((old, "old"), (new, "new")):
        for epoch, accuracy in enumerate(accuracies, start=1):
            stopper.update(epoch, accuracy)
            if stopper.stop:
                stops[label] = epoch
                break
    assert stops == {"old": 6}  # the rule without the final phase: cut at the plateau
    assert (new.best_epoch, new.best) == (12, 0.92) and not new.stop


SCHEDULES = {name: recipe.schedule for name, recipe in recipes.PRESETS.items()}


@pytest.mark.parametrize("name", list(SCHEDULES))
def test_no_accuracy_sequence_stops_a_run_before_its_final_phase(name: str) -> None:
    """For any held-out accuracies (random, or best in the first epoch then flat), any cap and any epoch length,
    training stops and picks its weights only in the schedule's final phase, where the learning rate is at most
    a tenth of its peak after the peak (after the last drop for a step schedule); a larger cap never starts that
    phase sooner."""
    schedule = SCHEDULES[name]
    rng = np.random.default_rng(0)
    for steps_per_epoch in (1, 7, 390):
        first = []
        for cap in range(1, 41):
            counts_from = schedule.first_stopping_epoch(cap, steps_per_epoch)
            first.append(counts_from)
            table = schedule.multipliers(cap * steps_per_epoch)
            peak = int(np.argmax(table))
            for sequence in (rng.random(cap), np.r_[1.0, np.zeros(cap - 1)], np.full(cap, 0.5)):
                stopper = loop.EarlyStopping(2, counts_from)
                stopped_at = cap
                for epoch, accuracy in enumerate(sequence, start=1):
                    stopper.update(epoch, float(accuracy))
                    if stopper.stop:
                        stopped_at = epoch
                        break
                assert stopped_at >= counts_from and stopper.best_epoch >= counts_from
                last_step = stopper.best_epoch * steps_per_epoch - 1  # the step that ends the returned epoch
                if cap * steps_per_epoch > 1:
                    assert last_step >= peak
                    if schedule.kind == "step":
                        assert table[last_step] == pytest.approx(table[-1])
                    else:
                        assert table[last_step] <= recipes.FINAL_PHASE_FRACTION + 1e-12
        assert first == sorted(first)  # a larger cap never counts from an earlier epoch


def test_schedules_are_torch_s_own() -> None:
    """``Schedule.multipliers`` against the learning rates torch's schedulers give, step by step."""
    total = 97
    model = nn.Linear(2, 2)

    def rates(make) -> np.ndarray:
        optimizer = torch.optim.SGD(model.parameters(), lr=0.4)
        scheduler = make(optimizer)
        out = []
        for _ in range(total):
            out.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            scheduler.step()
        return np.array(out) / 0.4

    one_cycle = recipes.Schedule("one-cycle", warmup=0.3)
    torch_one_cycle = rates(lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.4, total_steps=total))
    np.testing.assert_allclose(one_cycle.multipliers(total), torch_one_cycle, rtol=1e-9, atol=1e-12)
    step = recipes.Schedule("step", milestones=(0.5, 0.75), gamma=0.1)
    milestones = [round(0.5 * total), round(0.75 * total)]
    torch_step = rates(lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=milestones, gamma=0.1))
    np.testing.assert_allclose(step.multipliers(total), torch_step, rtol=1e-12)
    linear = recipes.Schedule("linear", warmup=0.2)
    peak = 0.2 * total
    by_hand = [s / peak if s <= peak else (total - 1 - s) / (total - 1 - peak) for s in range(total)]
    np.testing.assert_allclose(linear.multipliers(total), by_hand, rtol=1e-12, atol=1e-15)
    assert linear.multipliers(total)[-1] == 0.0 and linear.multipliers(total).max() == pytest.approx(1.0, abs=0.03)


def test_holdout_split_is_seeded_disjoint_and_complete() -> None:
    train, held = loop.holdout_split(100, 0.1, seed=3)
    assert len(held) == 10 and len(train) == 90
    assert np.array_equal(np.sort(np.concatenate([train, held])), np.arange(100))
    assert np.array_equal(loop.holdout_split(100, 0.1, seed=3)[1], held)
    assert not np.array_equal(loop.holdout_split(100, 0.1, seed=4)[1], held)
    with pytest.raises(InputError, match="held-out fraction"):
        loop.holdout_split(100, 1.0, seed=0)


def test_training_stops_when_the_heldout_accuracy_stops_improving(digits) -> None:
    images, labels = digits
    cap = 30
    trained = loop.fit(
        _linear, GREY, images, labels, 10, epochs=cap, seed=0, batch_size=128, lr=0.0, holdout_fraction=0.2, patience=2
    )
    steps = 718 // 128 + 1  # 718 training images after holding out 180
    counts_from = recipes.PLAIN.schedule.first_stopping_epoch(cap, steps)
    assert 1 < counts_from < cap - 2
    # the accuracy never changes (lr = 0): the first epoch of the final phase is the best, two more stop it
    assert [r.epoch for r in trained.history] == list(range(1, counts_from + 3))
    assert trained.stopped_early and trained.best_epoch == counts_from
    assert len({r.heldout_accuracy for r in trained.history}) == 1


def test_a_larger_cap_returns_weights_of_its_own_final_phase(digits) -> None:
    """A tiny real training at two caps: whatever accuracies it met, each run's weights come from its schedule's
    final phase (never from the warm-up or the plateau before the anneal), and it stopped early only there."""
    images, labels = digits[0][:400], digits[1][:400]
    for cap in (2, 6):
        trained = loop.fit(
            lambda: build_model("cnn8", 10),
            GREY,
            images,
            labels,
            10,
            epochs=cap,
            seed=0,
            batch_size=64,
            holdout_fraction=0.2,
            patience=1,
        )
        steps = 320 // 64
        counts_from = recipes.PLAIN.schedule.first_stopping_epoch(cap, steps)
        assert trained.best_epoch >= counts_from
        assert (
            len(trained.history) >= min(cap, counts_from + 1) if trained.stopped_early else len(trained.history) == cap
        )


def test_the_heldout_accuracy_is_measured_on_training_images_it_held_out(digits) -> None:
    images, labels = digits
    trained = loop.fit(
        _linear, GREY, images, labels, 10, epochs=3, seed=1, batch_size=64, holdout_fraction=0.25, patience=None
    )
    held = trained.holdout_index
    assert len(held) == round(0.25 * len(labels))
    n_train = len(labels) - len(held)
    counts_from = recipes.PLAIN.schedule.first_stopping_epoch(3, n_train // 64 + (n_train % 64 >= 2))
    # the returned weights are the best counted epoch's, and their recorded accuracy is on these training images
    assert trained.final_accuracy == max(r.heldout_accuracy for r in trained.history[counts_from - 1 :])
    assert _accuracy(trained.model, images[held], labels[held]) == pytest.approx(trained.final_accuracy)


def test_training_a_run_never_reads_the_test_split(monkeypatch) -> None:
    read = []
    load = datasets.load_dataset

    def training_splits_only(spec, split="test", **options):
        read.append(split)
        if split == "test":
            raise AssertionError("training read the test split")
        return load(spec, split=split, **options)

    monkeypatch.setattr(datasets, "load_dataset", training_splits_only)
    trained = runs.trained_model("cnn8", "digits", {"objective": {"name": "logitnorm"}, "epochs": 1, "seed": 5})
    assert read == ["train"]
    assert trained.metadata["settings"]["holdout_fraction"] == training.HOLDOUT_FRACTION
    assert 0.0 <= trained.metadata["final_heldout_accuracy"] <= 1.0


# ------------------------------------------------------------------------------------ checkpoints and cancel


def _fit_mixup(images, labels, checkpoint: Path, cancel=None, progress=None) -> loop.Trained:
    return loop.fit(
        lambda: build_model("cnn8", 10),  # BatchNorm and dropout: the random state must resume too
        GREY,
        images,
        labels,
        10,
        objective=Objective("mixup"),
        epochs=3,
        seed=0,
        batch_size=64,
        holdout_fraction=0.1,
        patience=None,
        checkpoint=checkpoint,
        checkpoint_key="k",
        cancel=cancel,
        progress=progress,
    )


def test_a_cancelled_run_resumes_from_its_checkpoint_to_the_same_weights(digits, tmp_path: Path) -> None:
    images, labels = digits[0][:300], digits[1][:300]
    whole = _fit_mixup(images, labels, tmp_path / "whole.pt")
    epochs_done: list[str] = []

    def progress(done: int, total: int, message: str) -> None:
        if "held-out accuracy" in message:
            epochs_done.append(message)

    with pytest.raises(Cancelled, match="cancelled at epoch 2/3"):
        _fit_mixup(images, labels, tmp_path / "cut.pt", cancel=lambda: len(epochs_done) >= 1, progress=progress)
    assert (tmp_path / "cut.pt").is_file()
    resumed = _fit_mixup(images, labels, tmp_path / "cut.pt")
    assert resumed.resumed_from == 1 and [r.epoch for r in resumed.history] == [1, 2, 3]
    for a, b in zip(whole.history, resumed.history):
        assert (a.loss, a.heldout_accuracy) == pytest.approx((b.loss, b.heldout_accuracy), rel=1e-6)
    expected, got = whole.model.state_dict(), resumed.model.state_dict()
    for name in expected:
        torch.testing.assert_close(got[name], expected[name], rtol=1e-5, atol=1e-6)


def test_a_checkpoint_of_other_settings_is_ignored(digits, tmp_path: Path) -> None:
    images, labels = digits[0][:200], digits[1][:200]
    path = tmp_path / "c.pt"
    first = loop.fit(
        _linear, GREY, images, labels, 10, epochs=2, seed=0, batch_size=64, checkpoint=path, checkpoint_key="a"
    )
    other = loop.fit(
        _linear, GREY, images, labels, 10, epochs=2, seed=0, batch_size=64, checkpoint=path, checkpoint_key="b"
    )
    assert other.resumed_from == 0 and weights_hash(other.model) == weights_hash(first.model)
    path.write_bytes(b"not a checkpoint")
    again = loop.fit(
        _linear, GREY, images, labels, 10, epochs=2, seed=0, batch_size=64, checkpoint=path, checkpoint_key="b"
    )
    assert again.resumed_from == 0 and weights_hash(again.model) == weights_hash(first.model)


def test_bad_training_input_is_a_one_line_input_error(digits) -> None:
    images, labels = digits
    fashion_like = np.zeros((5, 28, 28, 1), np.uint8)
    cases = [
        ({"objective": Objective("openmix")}, "openmix needs an outlier data set"),
        (
            {"objective": Objective("openmix"), "outliers": fashion_like},
            "expects 8x8 images .* got outlier images of 28x28x1",
        ),
        ({"objective": Objective("mixup"), "outliers": images[:5]}, "outliers are used by openmix only"),
        ({"patience": 0}, "patience must be a positive integer"),
        ({"epochs": 0}, "epochs must be a positive integer"),
    ]
    for change, message in cases:
        arguments = {"arch": "cnn8", "epochs": 1, **change}
        with pytest.raises(InputError, match=message):
            training.train(images, labels, 10, **arguments)


# ------------------------------------------------------------------------------------- runs, jobs, the CLI


@pytest.fixture
def noise_outliers(tmp_path: Path) -> str:
    """8x8 grey noise as an ``npz:`` data set: OpenMix's outliers for digits (a single, test split)."""
    path = tmp_path / "noise.npz"
    rng = np.random.default_rng(0)
    np.savez(path, x=rng.integers(0, 256, (300, 8, 8, 1), dtype=np.uint8), y=np.zeros(300, np.int64))
    return f"npz:{path}"


@pytest.mark.slow
@pytest.mark.parametrize("name", training.OBJECTIVES)
def test_one_epoch_of_each_objective_end_to_end(name: str, noise_outliers: str) -> None:
    settings = {"objective": Objective(name).settings(), "epochs": 1, "seed": 0}
    if name == "openmix":
        settings["outliers"] = noise_outliers
    run = runs.logits_for("cnn8", None, "digits", device="cpu", training_settings=settings)
    assert run.logits.shape == (len(run.labels), 10) and np.isfinite(run.logits).all()
    assert np.mean(run.logits.argmax(1) == run.labels) > 0.3  # chance is 0.1
    assert name in run.source
    trained = runs.trained_model("cnn8", "digits", settings)
    meta = trained.metadata
    assert meta["epochs_run"] == 1 and meta["settings"]["objective"]["name"] == name
    assert meta["settings"]["seed"] == 0 and len(trained.curve["loss"]) == 1
    assert trained.curve["heldout_accuracy"][0] == pytest.approx(meta["final_heldout_accuracy"])
    assert isinstance(trained.model, training.DropOutlierClass) == (name == "openmix")
    assert not list(paths.cache_dir("checkpoints").glob("*.pt"))  # the weights are stored: no checkpoint left
    runs.remember(run)
    assert np.array_equal(runs.reopen(run.run_id).logits, run.logits)


@pytest.mark.slow
def test_a_cancelled_training_job_resumes_when_submitted_again() -> None:
    settings = {"objective": {"name": "mixup"}, "epochs": 4, "seed": 11}

    def work(progress, cancel):
        return runs.trained_model("cnn8", "digits", settings, progress=progress, cancel=cancel)

    manager = jobs.JobManager()
    job = manager.submit("train:test", "training", work)
    checkpoints = paths.cache_dir("checkpoints")
    while job.running and not list(checkpoints.glob("*.pt")):  # the first epoch's checkpoint
        job.wait(0.05)
    job.cancel()
    assert job.wait(120) and job.state == jobs.CANCELLED
    again = manager.submit("train:test", "training", work)
    assert again.wait(300) and again.state == jobs.DONE, again.error
    assert again.result.metadata["resumed_from"] >= 1
    assert again.result.metadata["epochs_run"] == 4


@pytest.mark.slow
def test_the_train_command_writes_a_run(tmp_path: Path, capsys) -> None:
    out = tmp_path / "logits.npz"
    status = cli.main(
        [
            "train",
            "--dataset",
            "digits",
            "--model",
            "cnn",
            "--objective",
            "regmixup",
            "--epochs",
            "1",
            "--seed",
            "2",
            "--out",
            str(out),
        ]
    )
    assert status == 0, capsys.readouterr().err
    printed = capsys.readouterr().out
    run_id = printed.split()[1].rstrip(":")
    assert runs.describe(run_id) is not None  # remembered: every page can open it
    stored = np.load(out)
    np.testing.assert_array_equal(runs.reopen(run_id).logits, stored["logits"])
    assert "cnn8 regmixup (trained here: plain recipe, seed 2, epoch 1/1)" in printed and "held-out accuracy" in printed


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--objective", "openmix"], "openmix needs --outliers"),
        (["--objective", "mixup", "--outliers", "mnist"], "--outliers is used by openmix only"),
        (["--objective", "logitnorm", "--tau", "0"], "must be a finite number > 0"),
        (["--objective", "regmixup-appendix", "--gamma", "-1"], "must be a finite number >= 0"),
        (["--objective", "regmixup", "--gamma", "1"], "applies to regmixup-appendix and openmix, not regmixup"),
        (["--recipe", "slow"], "invalid choice: 'slow'"),
        (["--objective", "focal"], "invalid choice: 'focal'"),
        (["--epochs", "0"], "--epochs must be a positive integer"),
        (["--model", "nope"], "unknown model 'nope'"),
        (["--objective", "openmix", "--outliers", "npz:{big}"], "got outlier images of 28x28x1"),
    ],
)
def test_the_train_command_refuses_bad_input_in_one_line(arguments: list[str], message: str, capsys, tmp_path) -> None:
    big = tmp_path / "big.npz"  # 28x28 outliers for 8x8 digits
    np.savez(big, x=np.zeros((4, 28, 28, 1), np.uint8), y=np.zeros(4, np.int64))
    arguments = [a.format(big=big) for a in arguments]
    assert cli.main(["train", "--dataset", "digits", *arguments]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: ") and message in err[-1], err
    assert not list(paths.cache_dir("checkpoints").glob("*.pt"))


def test_the_train_command_refuses_user_data(capsys) -> None:
    assert cli.main(["train", "--dataset", "npz:/nowhere.npz"]) == cli.EXIT_BAD_INPUT
    assert "registered data set with a training split" in capsys.readouterr().err


def test_the_train_command_offers_every_objective_and_recipe() -> None:
    from relu_core.cli import train as train_cli

    assert train_cli.OBJECTIVE_CHOICES == training.OBJECTIVES
    assert train_cli.RECIPE_CHOICES == tuple(training.PRESETS)


def test_runs_trained_here_share_one_naming_scheme() -> None:
    """The default-style small CNN (fixed epochs, no early stopping) and a model trained with an objective are
    named alike: network, objective, then recipe, seed and the epoch whose weights the run uses, of the cap."""
    plain = runs.logits_for("cnn8", None, "digits", device="cpu", epochs=1)
    trained = runs.logits_for(
        "cnn8", None, "digits", device="cpu", training_settings={"objective": {"name": "mixup"}, "epochs": 1}
    )
    assert plain.source == "cnn8 cross-entropy (trained here: plain recipe, seed 0, epoch 1/1) on digits-test"
    assert trained.source == "cnn8 mixup (trained here: plain recipe, seed 0, epoch 1/1) on digits-test"
    assert plain.source == runs.trained_source("cnn8", "cross-entropy", "plain", 0, 1, 1, "digits-test")
