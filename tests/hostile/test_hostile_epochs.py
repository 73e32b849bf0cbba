"""Hostile input, round five: a huge epoch cap allocates nothing per step and is refused in one line of our own
(exit 2), and long training says what it costs on stderr before any work starts, as the Objectives page does."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from relu_core import cli, runs
from relu_core.errors import InputError
from relu_core.training import estimate, recipes

HUGE = ["1000000000", str(10**12), str(2**63 - 1)]


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def _reference_final_phase_start(schedule: recipes.Schedule, total: int) -> int:
    """The final phase's first step from the table of every step (what the schedule computed before)."""
    if total <= 1:
        return 0
    if schedule.kind == "step":
        return min(max((round(m * total) for m in schedule.milestones), default=0), total - 1)
    table = schedule.multipliers(total)
    found = np.flatnonzero((np.arange(total) >= int(np.argmax(table))) & (table <= recipes.FINAL_PHASE_FRACTION))
    return int(found[0]) if found.size else total - 1


SCHEDULES = [
    recipes.PLAIN.schedule,
    recipes.FAST.schedule,
    recipes.PAPER.schedule,
    recipes.Schedule("one-cycle", warmup=0.0),
    recipes.Schedule("one-cycle", warmup=0.999),
    recipes.Schedule("linear", warmup=0.0),
    recipes.Schedule("linear", warmup=0.5),
]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s.kind}-{s.warmup}")
def test_the_final_phase_is_found_without_a_table(schedule):
    for total in [*range(1, 400), 1_001, 4_999, 70_000]:
        assert schedule.final_phase_start(total) == _reference_final_phase_start(schedule, total), total


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s.kind}-{s.warmup}")
def test_the_rate_at_a_step_is_the_tables(schedule):
    for total in (1, 2, 7, 390, 9_001):
        rate = schedule.lr_lambda(total)
        table = schedule.multipliers(total)
        picked = sorted({0, 1, total // 3, total // 2, total - 2, total - 1, total + 5} - {-1})
        assert [rate(s) for s in picked] == [float(table[min(s, total - 1)]) for s in picked]


@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: f"{s.kind}-{s.warmup}")
def test_a_schedule_of_any_length_allocates_nothing_per_step(schedule):
    total = 10**12 * 390  # 10^12 epochs of 390 steps: a table would need 3 PB
    tracemalloc.start()
    try:
        start = schedule.final_phase_start(total)
        first = schedule.first_stopping_epoch(10**12, 390)
        rate = schedule.lr_lambda(total)
        rates = [rate(0), rate(total // 2), rate(total - 1)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, peak
    assert 0 <= start < total and 1 <= first <= 10**12 and all(math.isfinite(r) for r in rates)


@pytest.mark.parametrize("epochs", HUGE)
def test_train_refuses_an_epoch_cap_it_cannot_honour(epochs, capsys, monkeypatch):
    def no_work(*args, **kwargs):
        raise AssertionError("training started")

    monkeypatch.setattr(runs, "trained_model", no_work)
    status = cli.main(["train", "--dataset", "digits", "--epochs", epochs])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "--epochs" in line and "10,000" in line and "MAX_EPOCHS" in line


@pytest.mark.parametrize("epochs", HUGE[1:])
def test_study_objectives_refuses_an_epoch_cap_it_cannot_honour(epochs, capsys):
    status = cli.main(["study", "objectives", "--dataset", "digits", "--epochs", epochs])
    line = _one_error_line(capsys.readouterr().err)
    assert status == 2 and "--epochs" in line and "MAX_EPOCHS" in line


def test_the_library_refuses_an_epoch_cap_it_cannot_honour():
    from relu_core import training

    images = np.zeros((8, 8, 8, 1), np.uint8)
    with pytest.raises(InputError, match="MAX_EPOCHS"):
        training.train(images, np.arange(8) % 2, 2, arch="cnn8", epochs=10**9)
    assert recipes.check_epochs(recipes.MAX_EPOCHS) == recipes.MAX_EPOCHS


# ------------------------------------------------------------------------------- the cost, said before the work
class Stop(InputError):
    """Raised where the work would start, so that the test sees what was said before it."""


@pytest.fixture
def quiet_cpu(monkeypatch):
    """The CPU as the reference measured it (2 threads, no load), so the estimate is the same on any machine."""
    machine = estimate.Machine(threads=2, load=0.0, cores=2)
    monkeypatch.setattr(estimate, "current_machine", lambda threads=None, load=None: machine)
    return machine


def test_train_says_a_long_training_s_cost_before_it_starts(capsys, monkeypatch, quiet_cpu):
    def stop(*args, **kwargs):
        raise Stop("the work would start here")

    monkeypatch.setattr(runs, "trained_model", stop)
    argv = ["train", "--dataset", "cifar10", "--model", "resnet34", "--recipe", "paper", "--device", "cpu"]
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status == 2 and err.rstrip().endswith("error: the work would start here")
    said = err[: err.index("error: the work would start here")]
    guess = estimate.estimate("resnet34_cifar", "cifar10", ["cross-entropy"], 200, "cpu", machine=quiet_cpu)
    assert guess.too_long_for_a_cpu  # days on 2 cores
    assert guess.sentence() in said
    assert estimate.cpu_warning("resnet34_cifar", "cifar10", ["cross-entropy"], 200, machine=quiet_cpu) in said


def test_study_objectives_says_its_cost_before_it_starts(capsys, monkeypatch, quiet_cpu):
    from relu_core.studies import objectives

    def stop(*args, **kwargs):
        raise Stop("the work would start here")

    monkeypatch.setattr(objectives, "objectives_study", stop)
    argv = ["study", "objectives", "--dataset", "cifar10", "--model", "resnet34", "--device", "cpu"]
    argv += ["--objectives", "cross-entropy,mixup", "--epochs", "30"]
    status = cli.main(argv)
    err = capsys.readouterr().err
    assert status == 2 and "error: the work would start here" in err
    # the models the command will read back rather than train, found as it finds them (none on a fresh cache)
    chosen = ["cross-entropy", "mixup"]
    cached = objectives.cached_objectives("cifar10", "resnet34_cifar", chosen, epochs=30)
    guess = estimate.estimate("resnet34_cifar", "cifar10", chosen, 30, "cpu", machine=quiet_cpu, cached=cached)
    assert guess.sentence() in err and "No GPU here" in err
