"""Issue 37, items 5 and 9 (the training and objectives parts): ``study objectives --out`` does what its help says
and refuses a file before any work; ``study objectives --dataset digits`` runs what digits supports (no OpenMix, said
in one line); a model whose training diverged (NaN or infinite) is never stored in the models cache, so it cannot
fail from the cache forever; ``study objectives --help`` lists its own options only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from relu_core import cli, datasets, paths, protocol, runs, training
from relu_core.models import Normalization, build_model
from relu_core.studies import objectives
from relu_core.training import loop


@pytest.fixture()
def own_cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(paths.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def _logits_run(seed: int):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 5, 600)
    logits = rng.normal(size=(600, 5)).astype(np.float32)
    logits[np.arange(600), labels] += rng.normal(2.0, 1.0, 600).astype(np.float32)
    return runs.Run.from_logits(logits, labels, tuple("abcde"), source=f"synthetic {seed}")


def _table(*_, **options) -> objectives.ObjectivesResult:
    """A finished table without any training (what ``objectives_study`` returns), of two synthetic runs."""
    rows = []
    for name, seed in (("cross-entropy", 1), ("mixup", 2)):
        run = _logits_run(seed)
        honest = protocol.evaluate_with_selection(
            run.logits, run.labels, objectives.TABLE_KEYS, seeds=2, n_resamples=50
        )
        oracle = protocol.evaluate_with_selection(
            run.logits, run.labels, objectives.TABLE_KEYS, seeds=2, n_resamples=50, selection="oracle"
        )
        rows.append(objectives.ObjectiveRow(name, run, honest, oracle))
    return objectives.ObjectivesResult("digits", "cnn8", 1, 0, None, (0, 1), 0.5, "tuning", tuple(rows))


def test_study_objectives_out_writes_what_its_help_promises(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(objectives, "objectives_study", _table)
    out = tmp_path / "table"
    assert cli.main(["study", "objectives", "--dataset", "digits", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["auroc.csv", "result.json", "table.csv"]
    data = json.loads((out / "result.json").read_text())
    assert set(data["objectives"]) == {"cross-entropy", "mixup"} and "oracle" in data["objectives"]["mixup"]
    assert (out / "table.csv").read_text().startswith("objective,accuracy,Rel-U − Doctor FPR95")
    assert "wrote 3 files" in capsys.readouterr().err


def test_study_objectives_out_refuses_a_file_before_any_training(tmp_path, monkeypatch, capsys) -> None:
    def no_work(*args, **kwargs):
        raise AssertionError("the work started before --out was checked")

    monkeypatch.setattr(objectives, "objectives_study", no_work)
    squatter = tmp_path / "a_file"
    squatter.write_text("mine")
    assert cli.main(["study", "objectives", "--dataset", "digits", "--out", str(squatter)]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out") and "is a file, not a folder" in err and "\n" not in err
    assert squatter.read_text() == "mine"


def test_study_objectives_help_lists_its_own_options_only(capsys) -> None:
    assert cli.main(["study", "objectives", "--help"]) == 0
    own = capsys.readouterr().out
    assert all(flag in own for flag in ("--recipe", "--objectives", "--outliers", "--selection", "--out"))
    assert not any(flag in own for flag in ("--axes", "--fractions", "--lambdas", "--other", "--logits", "--subsample"))
    assert cli.main(["study", "ablation", "--help"]) == 0
    ablation = capsys.readouterr().out
    assert "--axes" in ablation and "--recipe" not in ablation and "--fractions" not in ablation


def test_an_unknown_study_is_named_in_one_line(capsys) -> None:
    assert cli.main(["study", "nope"]) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: unknown study 'nope'; choose one of:") and "objectives" in err


def test_digits_defaults_to_the_objectives_it_supports_and_says_so() -> None:
    """Digits has no outlier set of its size: OpenMix is left out of the default, in one line (it used to be in
    the default and fail after the other models were trained)."""
    assert "openmix" not in objectives.supported_objectives("digits")
    assert objectives.supported_objectives("fashion-mnist") == objectives.OBJECTIVES
    assert objectives.supported_objectives("cifar10") == objectives.OBJECTIVES  # dead-leaves outliers
    note = objectives.left_out_note("digits")
    assert note.startswith("OpenMix is left out") and "\n" not in note
    assert objectives.left_out_note("cifar10") is None


@pytest.mark.slow
def test_study_objectives_on_digits_runs_with_its_defaults(capsys) -> None:
    argv = ["study", "objectives", "--dataset", "digits", "--epochs", "1", "--seeds", "2", "--bootstrap", "0", "--json"]
    assert cli.main(argv) == 0, capsys.readouterr().err
    printed = json.loads(capsys.readouterr().out)
    assert list(printed["objectives"]) == ["cross-entropy", "logitnorm", "mixup", "regmixup"]
    assert printed["notes"][0].startswith("OpenMix is left out")


def _stored_models(own_cache: Path) -> list[Path]:
    folder = own_cache / "models"
    return sorted(folder.rglob("*.npz")) if folder.exists() else []


def _diverged(*args, **kwargs):
    """A "trained" small CNN whose weights went NaN."""
    model = build_model("cnn8", 10).eval()
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    return model


def test_a_diverged_small_cnn_is_never_stored(own_cache, monkeypatch) -> None:
    monkeypatch.setattr(training, "train_small_cnn", _diverged)
    with pytest.raises(training.Diverged, match="diverged: its weights or logits are not finite") as caught:
        runs.small_cnn("cnn8", "digits", epochs=1)
    assert "\n" not in str(caught.value)
    assert _stored_models(own_cache) == []
    monkeypatch.undo()
    monkeypatch.setenv(paths.CACHE_ENV, str(own_cache))
    model = runs.small_cnn("cnn8", "digits", epochs=1)  # the next attempt trains instead of failing from the cache
    assert all(torch.isfinite(t).all() for t in model.state_dict().values() if t.is_floating_point())
    assert len(_stored_models(own_cache)) == 1  # stored where the check above looked


def test_a_diverged_objective_model_is_never_stored_nor_resumed(own_cache, monkeypatch) -> None:
    real = training.train

    def diverging(*args, **kwargs):
        trained = real(*args, **kwargs)
        with torch.no_grad():
            next(trained.model.parameters()).fill_(float("inf"))
        return trained

    monkeypatch.setattr(training, "train", diverging)
    settings = {"objective": {"name": "cross-entropy"}, "epochs": 1, "seed": 3}
    with pytest.raises(training.Diverged, match="not finite"):
        runs.trained_model("cnn8", "digits", settings)
    assert _stored_models(own_cache) == [] and not list(paths.cache_dir("checkpoints").glob("*.pt"))
    monkeypatch.setattr(training, "train", real)
    trained = runs.trained_model("cnn8", "digits", settings)
    assert np.isfinite(trained.metadata["final_heldout_accuracy"])


def test_a_loss_that_becomes_nan_stops_the_training_in_one_line() -> None:
    train = datasets.load_dataset("digits", split="train")
    absurd = training.recipes.FAST.with_lr(1e30)
    with pytest.raises(loop.Diverged, match=r"diverged at epoch 1/3: the loss is not finite") as caught:
        loop.fit(
            lambda: build_model("cnn8", 10),
            Normalization((0.5,), (0.5,)),
            train.images[:300],
            train.labels[:300],
            10,
            epochs=3,
            seed=0,
            batch_size=64,
            recipe=absurd,
        )
    assert "\n" not in str(caught.value)
