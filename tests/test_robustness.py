"""The mismatch study (relu_core.robustness): clean-only selection, corrupted evaluation, caching, real ResNet-56."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from relu_core import corruptions, detectors, engine, protocol, robustness, runs, stats
from relu_core.errors import Cancelled
from relu_core.runs import Run

FEW = ("gaussian_noise", "contrast", "pixelate")


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory for tests that count computations."""
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(tmp_path))
    return tmp_path


def _study(run: Run, **kwargs) -> robustness.RobustnessResult:
    options = {"corruption_names": FEW, "seeds": (0, 1), "subsample": 300, "tune_fraction": 0.2, "device": "cpu"}
    return robustness.mismatch_study(run, **{**options, **kwargs})


def _counting(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Count model passes and corruption generations (the two expensive steps)."""
    calls = {"logits": 0, "corrupt": 0}
    compute_logits, corrupted_set = engine.compute_logits, corruptions.corrupted_set

    def counted_logits(*args, **kwargs):
        calls["logits"] += 1
        return compute_logits(*args, **kwargs)

    def counted_set(*args, **kwargs):
        calls["corrupt"] += 1
        return corrupted_set(*args, **kwargs)

    monkeypatch.setattr(engine, "compute_logits", counted_logits)
    monkeypatch.setattr(corruptions, "corrupted_set", counted_set)
    return calls


def test_result_frames(digits_run: Run, fresh_cache: Path) -> None:
    result = _study(digits_run)
    table = result.table
    assert list(table.columns) == list(robustness.TABLE_COLUMNS)
    assert len(table) == (1 + len(FEW)) * 2 * len(robustness.METRIC_NAMES)
    assert list(dict.fromkeys(table["corruption"])) == ["clean", *FEW]
    assert set(table["detector"]) == {"Rel-U", "Doctor"}
    assert (table["severity"] == np.where(table["corruption"] == "clean", 0, 5)).all()
    assert table["mean"].between(0, 1).all() and (table["std"] >= 0).all()
    assert len(result.per_seed) == len(table) * 2
    assert list(result.accuracy["corruption"]) == ["clean", *FEW]
    assert result.hyperparameters.shape[0] == 2 * 2
    hyper = result.hyperparameters.set_index("detector")
    # the paper's lambda grid: Rel-U is never Doctor in disguise unless asked
    assert hyper.loc["Rel-U", "lam"].isin(detectors.LAMBDA_GRID).all()
    assert result.hyperparameters["hamming_fallback"].dtype == bool  # True only where the tuning split empties D*
    assert list(hyper.loc["Rel-U", "settings_searched"]) == [50, 50] and list(
        hyper.loc["Doctor", "settings_searched"]
    ) == [10, 10]
    assert list(result.paired.columns) == list(robustness.PAIRED_COLUMNS)
    assert len(result.paired) == (1 + len(FEW)) * 4 and list(dict.fromkeys(result.paired["corruption"])) == [
        "clean",
        *FEW,
    ]
    assert (result.paired["ci_low"] <= result.paired["estimate"]).all()
    # T and λ are selected on the tuning splits: every interval says it holds for the selected settings only
    assert result.paired["verdict"].str.contains(stats.CONDITIONAL_LABEL, regex=False).all()
    assert (result.paired["estimate"] <= result.paired["ci_high"]).all()
    assert result.sources == {name: robustness.GENERATED for name in FEW}
    # every seed evaluates the subsampled images of its evaluation part, never its tuning part
    sample = corruptions.subsample_indices(len(digits_run.labels), 300, 0)
    correct = protocol.correctness(digits_run.logits, digits_run.labels)
    for seed, n_eval in zip((0, 1), result.n_eval):
        tune_idx, eval_idx = protocol.split_indices(len(correct), 0.2, seed, stratify=correct)
        assert n_eval == len(np.intersect1d(eval_idx, sample)) < 300
    assert result.clean_accuracy > result.accuracy["mean"].iloc[1:].mean()
    pivot = result.pivot("auroc")
    assert pivot.shape == (len(FEW), 2) and list(pivot.index) == list(FEW)
    summary = result.summary_table()
    assert summary.shape == ((1 + len(FEW)) * 2, 2 + len(robustness.METRIC_NAMES)) and "±" in summary["auroc"].iloc[0]


def test_metrics_match_an_independent_computation(digits_run: Run, fresh_cache: Path) -> None:
    """Re-derive one cell (contrast, Rel-U, seed 1) from scratch with scikit-learn's AUROC."""
    result = _study(digits_run, seeds=(1,))
    chosen = result.hyperparameters.set_index("detector").loc["Rel-U"]
    correct = protocol.correctness(digits_run.logits, digits_run.labels)
    tune_idx, eval_idx = protocol.split_indices(len(correct), 0.2, 1, stratify=correct)
    relu = detectors.RelU(lam=chosen["lam"], temperature=chosen["temperature"])
    relu.fit(digits_run.logits[tune_idx], digits_run.labels[tune_idx])
    sample = corruptions.subsample_indices(len(correct), 300, 0)
    rows = np.intersect1d(eval_idx, sample)
    images = corruptions.corrupted_set(
        digits_run.images, digits_run.labels, "independent", "contrast", 5, 0, 300
    ).images
    logits = engine.compute_logits(digits_run.model, images, mean=(0.5,), std=(0.5,), device="cpu")
    logits = logits[np.searchsorted(sample, rows)]
    right = logits.argmax(1) == digits_run.labels[rows]
    cell = result.table.set_index(["corruption", "detector", "metric"])["mean"]
    assert cell["contrast", "Rel-U", "auroc"] == pytest.approx(roc_auc_score(right, -relu.score(logits)), abs=1e-12)
    assert cell["contrast", "Rel-U", "accuracy"] == pytest.approx(right.mean())
    # the paired Rel-U − Doctor interval is the bootstrap of these same scores (one seed: stream seed 0)
    doctor_t = result.hyperparameters.set_index("detector").loc["Doctor", "temperature"]
    expected = stats.paired_bootstrap(relu.score(logits), detectors.Doctor(doctor_t).score(logits), right)
    row = result.paired.set_index(["corruption", "metric"]).loc[("contrast", "auroc")]
    assert (row["estimate"], row["ci_low"], row["ci_high"]) == pytest.approx(
        (expected["auroc"].estimate, expected["auroc"].low, expected["auroc"].high), abs=1e-12
    )


def test_rerun_and_severity_change_hit_the_cache(
    digits_run: Run, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting(monkeypatch)
    first = _study(digits_run)
    assert calls == {"logits": len(FEW), "corrupt": len(FEW)}
    again = _study(digits_run)
    assert calls == {"logits": len(FEW), "corrupt": len(FEW)}  # nothing recomputed
    assert again.table.equals(first.table)
    _study(digits_run, severity=3, corruption_names=FEW[:2])
    assert calls == {"logits": len(FEW) + 2, "corrupt": len(FEW) + 2}  # only the new severity
    _study(digits_run, severity=3)
    assert calls == {"logits": len(FEW) + 3, "corrupt": len(FEW) + 3}
    _study(digits_run, seeds=(0, 1, 2), tune_fraction=0.5)  # new splits, same corrupted images
    assert calls == {"logits": len(FEW) + 3, "corrupt": len(FEW) + 3}


def test_selection_sees_only_the_clean_tuning_split(
    digits_run: Run, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[np.ndarray] = []
    grid_search = protocol.grid_search

    def spy(logits, labels, **kwargs):
        seen.append(np.asarray(logits).copy())
        return grid_search(logits, labels, **kwargs)

    monkeypatch.setattr(protocol, "grid_search", spy)
    baseline = _study(digits_run)
    correct = protocol.correctness(digits_run.logits, digits_run.labels)
    tuning = [digits_run.logits[protocol.split_indices(len(correct), 0.2, s, stratify=correct)[0]] for s in (0, 1)]
    assert len(seen) == 2 * 2  # (Rel-U, Doctor) x 2 seeds
    for logits, seed in zip(seen, (0, 0, 1, 1)):
        assert np.array_equal(logits, tuning[seed])

    # Poison the clean evaluation rows (same predictions, so the stratified splits do not move) ...
    poisoned = digits_run.logits.copy()
    eval_rows = np.setdiff1d(
        np.arange(len(correct)),
        np.union1d(*(protocol.split_indices(len(correct), 0.2, s, stratify=correct)[0] for s in (0, 1))),
    )
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 5, poisoned[eval_rows].shape).astype(np.float32)
    noise[np.arange(len(eval_rows)), poisoned[eval_rows].argmax(1)] = 100.0
    poisoned[eval_rows] = noise
    run = dataclasses.replace(digits_run, logits=poisoned, run_id="poisoned-eval")
    assert np.array_equal(protocol.correctness(poisoned, digits_run.labels), correct)
    assert run.logits[eval_rows].max(1).min() == 100.0
    assert _study(run).hyperparameters.equals(baseline.hyperparameters)

    # ... and the corrupted images (random pixels): the selection cannot move either.
    monkeypatch.setattr(
        corruptions,
        "corrupted_set",
        lambda images, labels, *a, **k: corruptions.CorruptedSet(
            np.random.default_rng(1).integers(0, 256, (300, *images.shape[1:]), dtype=np.uint8),
            labels[:300],
            np.arange(300),
        ),
    )
    monkeypatch.setenv("RELU_STUDIO_CACHE", str(fresh_cache / "poisoned"))
    garbage = _study(digits_run)
    assert garbage.hyperparameters.equals(baseline.hyperparameters)
    assert not garbage.table["mean"].equals(baseline.table["mean"])  # the poison did reach the evaluation


def test_published_files_are_used_when_aligned(
    digits_run: Run, fresh_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inverted = 255 - digits_run.images  # a recognisable stand-in for the published corrupted pixels
    labels = np.concatenate([digits_run.labels, [0, 1, 2]])
    images = np.concatenate([inverted, inverted[:3]])
    monkeypatch.setattr(corruptions, "load_cifar10c", lambda name, severity: (images, labels))
    classified: list[np.ndarray] = []  # the pixels each model pass saw
    compute_logits = engine.compute_logits

    def recorded(model, pixels, **kwargs):
        classified.append(np.array(pixels))
        return compute_logits(model, pixels, **kwargs)

    monkeypatch.setattr(engine, "compute_logits", recorded)
    run = dataclasses.replace(digits_run, dataset_name="cifar10", run_id="as-cifar10")
    assert _study(run, corruption_names=("fog",), seeds=(0,)).sources == {"fog": robustness.PUBLISHED}
    sample = corruptions.subsample_indices(len(run.labels), 300, 0)
    assert len(classified) == 1
    np.testing.assert_array_equal(classified[0], inverted[sample])
    # another data set, or labels in another order (the class-ordered JPEG folder), never use the files
    assert _study(digits_run, corruption_names=("fog",), seeds=(0,)).sources == {"fog": robustness.GENERATED}
    shuffled = dataclasses.replace(run, labels=np.sort(run.labels), run_id="sorted")
    assert _study(shuffled, corruption_names=("fog",), seeds=(0,)).sources == {"fog": robustness.GENERATED}


def test_progress_and_cancel(digits_run: Run, fresh_cache: Path) -> None:
    reports: list[tuple[int, int, str]] = []
    _study(digits_run, progress=lambda done, total, message: reports.append((done, total, message)))
    assert reports[-1][0] == reports[-1][1] == len(FEW) + 1
    assert [d for d, _, _ in reports] == sorted(d for d, _, _ in reports)
    with pytest.raises(Cancelled):
        _study(digits_run, cancel=lambda: True)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"corruption_names": ("rain",)}, "unknown corruption"),
        ({"detector_keys": ("mahalanobis",)}, "unknown detector"),
        ({"severity": 6}, "severity"),
        ({"tune_fraction": 1.0}, "tuning fraction"),
        ({"seeds": ()}, "seed"),
        ({"subsample": 1}, "subsample"),
        ({"criterion": "accuracy"}, "criterion"),
    ],
)
def test_bad_options(digits_run: Run, change: dict, message: str) -> None:
    with pytest.raises(robustness.RobustnessError, match=message):
        _study(digits_run, **change)


def test_runs_without_images_or_model_are_explained(digits_run: Run) -> None:
    with pytest.raises(robustness.RobustnessError, match="images"):
        robustness.check_run(dataclasses.replace(digits_run, images=None))
    with pytest.raises(robustness.RobustnessError, match="model"):
        robustness.check_run(dataclasses.replace(digits_run, model=None))


def test_gallery(digits_run: Run) -> None:
    gallery = robustness.corruption_gallery(digits_run.images[0])
    assert gallery.shape == (len(corruptions.CORRUPTIONS), 5, 8, 8, 1) and gallery.dtype == np.uint8
    for k, name in enumerate(corruptions.CORRUPTIONS[::6]):
        np.testing.assert_array_equal(gallery[6 * k, 2], corruptions.corrupt(digits_run.images[:1], name, 3, 0)[0])
    distance = np.abs(gallery.astype(int) - digits_run.images[0].astype(int)).mean(axis=(2, 3, 4))
    assert distance[:, 4].mean() > distance[:, 0].mean() > 0
    with pytest.raises(robustness.RobustnessError):
        robustness.corruption_gallery(digits_run.images[:2])


@pytest.mark.slow
def test_resnet56_accuracy_drops_under_severity_5(shared_data: Path) -> None:
    """The shared ResNet-56 on the 1,017 pixel-exact CIFAR-10 images: corruption costs accuracy.

    Uses the session cache, so the clean logits are shared with other test files that compute them.
    """
    run = runs.logits_for("resnet56", None, "cifar10-exact", device="cpu")
    assert "pretrained" in run.source and len(run.labels) == 1017
    names = ("gaussian_noise", "defocus_blur", "contrast", "jpeg_compression")
    result = robustness.mismatch_study(run, corruption_names=names, seeds=(0,), subsample=150, device="cpu")
    corrupted = result.accuracy["mean"].iloc[1:]
    assert result.clean_accuracy > 0.88
    assert corrupted.mean() < result.clean_accuracy - 0.15
    assert (corrupted < result.clean_accuracy).all()
    auroc = result.pivot("auroc")
    assert (auroc > 0.5).all().all()  # tuned on clean data, the detectors still beat chance on corrupted data
