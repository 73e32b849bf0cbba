"""relu_core.studies: every study's numbers against direct computations, the mismatch data assembly,
calibration (ECE, temperature scaling), caching, cancellation and the ``study`` CLI."""

from __future__ import annotations

import json

import numpy as np
import pytest

from relu_core import cli, datasets, detectors, metric_info, metrics, protocol, runs, stats
from relu_core.cli import shared as cli_shared
from relu_core.cli import study as studies_cli
from relu_core.errors import Cancelled, InputError
from relu_core.registry import by_name
from relu_core.studies import STUDIES, ablation, base, calibration, mismatch, tuning_split
from relu_core.studies import figures as study_figures

RTOL = 1e-6


def synthetic_run(n: int = 900, c: int = 6, scale: float = 1.0, seed: int = 0) -> runs.Run:
    """Logits with a planted class signal: about 75 % accurate, errors spread over the classes."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) * 1.5
    logits[np.arange(n), labels] += 2.0
    logits = (scale * logits).astype(np.float32)
    names = tuple(f"c{k}" for k in range(c))
    return runs.Run.from_logits(logits, labels, names, source="synthetic")


@pytest.fixture(scope="module")
def run() -> runs.Run:
    return synthetic_run()


def _curve(result: base.StudyResult, series: str, detector: str, metric: str):
    """The rows of one line of the study's curves, in sweep order."""
    curves = result.curves
    return curves[(curves["series"] == series) & (curves["detector"] == detector) & (curves["metric"] == metric)]


def _point(result: base.StudyResult, series: str, x: float, detector: str, metric: str) -> tuple[float, float]:
    rows = _curve(result, series, detector, metric)
    row = rows[np.isclose(rows["x"], x)]
    assert len(row) == 1
    return float(row["mean"].iloc[0]), float(row["std"].iloc[0])


# ------------------------------------------------------------------------------------------ ablation
def test_lambda_curve_at_one_half_equals_protocol_evaluate(run) -> None:
    result = ablation.run_study(run, axes=("lambda",), seeds=5, n_resamples=0, use_cache=False)
    reference = protocol.evaluate(
        run.logits, run.labels, ["relu", "doctor"], temperature=1.0, lam=0.5, tune_fraction=0.5, seeds=5, n_resamples=0
    )
    for key, name in (("relu", "Rel-U"), ("doctor", "Doctor")):
        for metric in metric_info.KEYS:
            mean, std = _point(result, "lambda", 0.5, name, metric)
            np.testing.assert_allclose(mean, reference.mean(key, metric), rtol=RTOL)
            np.testing.assert_allclose(std, reference.std(key, metric), rtol=RTOL, atol=1e-12)
    assert _curve(result, "lambda", "Rel-U", "fpr95")["x"].tolist() == list(ablation.LAMBDAS)


def test_studies_give_samples_of_identical_logits_one_score_as_evaluate_does(monkeypatch) -> None:
    from tests.test_fast_paths import _tied_logits

    logits, labels = _tied_logits(900, 8, 5)
    tied = runs.Run.from_logits(logits.astype(np.float32), labels, tuple(f"c{k}" for k in range(8)), source="tied")
    # a BLAS product may round the same row differently at different positions (machine-dependent): make it so
    real = detectors.quadratic_score
    monkeypatch.setattr(detectors, "quadratic_score", lambda p, m, r=None: real(p, m, r) + 1e-18 * np.arange(len(p)))
    reference = protocol.evaluate(
        tied.logits,
        tied.labels,
        ["relu", "doctor"],
        temperature=1.0,
        lam=0.5,
        tune_fraction=0.5,
        seeds=3,
        n_resamples=0,
    )
    ablated = ablation.run_study(tied, axes=("lambda",), lambdas=(0.5,), seeds=3, n_resamples=0, use_cache=False)
    fractions = tuning_split.run_study(tied, fractions=(0.5,), seeds=3, n_resamples=0, use_cache=False)
    for result, series in ((ablated, "lambda"), (fractions, "fraction")):
        for key, name in (("relu", "Rel-U"), ("doctor", "Doctor")):
            for metric in metric_info.KEYS:
                mean, _ = _point(result, series, 0.5, name, metric)
                assert mean == pytest.approx(reference.mean(key, metric), rel=1e-12, abs=1e-15), (series, name, metric)


def test_lambda_zero_is_the_hamming_fallback_and_ranks_like_doctor(run) -> None:
    result = ablation.run_study(run, axes=("lambda",), lambdas=(0.0, 0.8), seeds=3, n_resamples=0, use_cache=False)
    for metric in metric_info.KEYS:
        np.testing.assert_allclose(
            _point(result, "lambda", 0.0, "Rel-U", metric)[0],
            _point(result, "lambda", 0.0, "Doctor", metric)[0],
            rtol=RTOL,
        )
    assert any(n.startswith("λ = 0: D* is the Hamming fallback (= Doctor) on 3 seed(s)") for n in result.notes)
    auto = result.settings["lambda_auto"]
    correct = protocol.correctness(run.logits, run.labels)
    expected = np.mean([correct[tune].mean() for _, tune, _ in protocol.seeded_splits(correct, 0.5, range(3))])
    np.testing.assert_allclose(auto, expected, rtol=RTOL)
    assert result.series["lambda"]["marks"][f"λ = N₊/(N₊ + N₋) = {auto:.2f}"] == pytest.approx(auto)  # value shown


def test_temperature_curve_matches_evaluate_at_each_temperature(run) -> None:
    temps = (0.1, 3.0, 1000.0)
    result = ablation.run_study(run, axes=("temperature",), temperatures=temps, seeds=3, n_resamples=0, use_cache=False)
    for t in temps:
        reference = protocol.evaluate(
            run.logits, run.labels, ["relu", "doctor", "odin"], temperature=t, lam=0.5, seeds=3, n_resamples=0
        )
        for key, name in (("relu", "Rel-U"), ("doctor", "Doctor"), ("odin", "ODIN")):
            for metric in ("fpr95", "auroc"):
                np.testing.assert_allclose(
                    _point(result, "temperature", t, name, metric)[0], reference.mean(key, metric), rtol=RTOL
                )


def test_default_temperature_grid_is_log_spaced_from_0_1_to_1000() -> None:
    grid = np.array(ablation.TEMPERATURES)
    assert grid[0] == 0.1 and grid[-1] == 1000.0 and 1.0 in grid and 10.0 in grid
    np.testing.assert_allclose(np.diff(np.log10(grid)), 0.25, atol=2e-3)


def test_eps_axis_needs_a_model(run) -> None:
    with pytest.raises(InputError, match="needs a run with its model"):
        ablation.run_study(run, axes=("eps",), use_cache=False)


def test_eps_axis_on_a_subsample_scores_clean_logits_at_zero(digits_run) -> None:
    result = ablation.run_study(
        digits_run,
        axes=("eps",),
        epsilons=(0.0, 0.004),
        seeds=2,
        subsample=400,
        n_resamples=0,
        device="cpu",
        use_cache=False,
    )
    assert result.settings["subsample"] == 400 and result.settings["seeds_eps"] == [0, 1]
    assert any("subsample of 400 of 899 images and 2 seed(s)" in n for n in result.notes)
    assert set(result.curves["detector"]) == {"Rel-U", "Doctor", "ODIN"}
    # ε = 0 is the tuning-split computation on the same subsample
    from relu_core import corruptions

    sample = corruptions.subsample_indices(len(digits_run.labels), 400, 0)
    logits, labels = digits_run.logits[sample], digits_run.labels[sample]
    reference = protocol.evaluate(logits, labels, ["relu", "doctor"], seeds=2, n_resamples=0)
    for key, name in (("relu", "Rel-U"), ("doctor", "Doctor")):
        np.testing.assert_allclose(
            _point(result, "eps", 0.0, name, "auroc")[0], reference.mean(key, "auroc"), rtol=1e-5
        )
    assert np.isfinite(result.curves["mean"]).all()


def test_unknown_axis_and_bad_grids_are_refused(run) -> None:
    with pytest.raises(InputError, match="unknown ablation axis"):
        ablation.run_study(run, axes=("gamma",))
    with pytest.raises(InputError, match="lambda must lie in"):
        ablation.run_study(run, lambdas=(0.5, 1.5))
    with pytest.raises(InputError, match="temperature must be a positive"):
        ablation.run_study(run, temperatures=(0.0,))


# ------------------------------------------------------------------------------------- tuning split
def test_tuning_split_matches_direct_computation_for_a_seed(run) -> None:
    result = tuning_split.run_study(run, fractions=(0.2, 0.5), seeds=(3, 7), n_resamples=0, use_cache=False)
    correct = protocol.correctness(run.logits, run.labels)
    for fraction in (0.2, 0.5):
        tune, evaluation = protocol.split_indices(len(run.labels), fraction, 7, stratify=correct)
        relu = detectors.RelU(lam=0.5, temperature=1.0).fit(run.logits[tune], run.labels[tune])
        direct = {
            "Rel-U": metrics.summary(relu.score(run.logits[evaluation]), correct[evaluation]),
            "Doctor": metrics.summary(detectors.Doctor().score(run.logits[evaluation]), correct[evaluation]),
        }
        rows = result.per_seed[(result.per_seed["seed"] == 7) & np.isclose(result.per_seed["x"], fraction)]
        for name, values in direct.items():
            for metric, value in values.items():
                got = rows[(rows["detector"] == name) & (rows["metric"] == metric)]["value"]
                np.testing.assert_allclose(float(got.iloc[0]), value, rtol=RTOL)


def test_paired_difference_is_the_pooled_bootstrap_of_the_seeds(run) -> None:
    result = tuning_split.run_study(run, fractions=(0.33,), seeds=3, n_resamples=200, use_cache=False)
    correct = protocol.correctness(run.logits, run.labels)
    triples, samples = [], []
    for seed in range(3):
        tune, evaluation = protocol.split_indices(len(run.labels), 0.33, seed, stratify=correct)
        relu = detectors.RelU().fit(run.logits[tune], run.labels[tune])
        triples.append(
            (relu.score(run.logits[evaluation]), detectors.Doctor().score(run.logits[evaluation]), correct[evaluation])
        )
        samples.append(evaluation)
    pooled = stats.pooled_bootstrap(triples, sample_ids=samples, n_resamples=200)  # the seeds share samples
    for metric, diff in pooled.items():
        row = result.paired[result.paired["metric"] == metric].iloc[0]
        np.testing.assert_allclose(
            [row["estimate"], row["ci_low"], row["ci_high"]],
            [diff.estimate, diff.low, diff.high],
            rtol=RTOL,
            atol=1e-12,
        )
        assert row["verdict"] == diff.verdict()
        per_seed = [metrics.summary(a, c)[metric] - metrics.summary(b, c)[metric] for a, b, c in triples]
        np.testing.assert_allclose(
            [row["mean"], row["std"]], [np.mean(per_seed), np.std(per_seed)], rtol=RTOL, atol=1e-12
        )


def test_user_fractions_are_sorted_and_validated(run) -> None:
    result = tuning_split.run_study(run, fractions=(0.7, 0.05, 0.7), seeds=2, n_resamples=0, use_cache=False)
    assert result.settings["fractions"] == [0.05, 0.7]
    for bad in ((), (0.0,), (1.0,), ("x",)):
        with pytest.raises(InputError):
            tuning_split.run_study(run, fractions=bad, seeds=2)


def test_results_are_cached_by_their_settings(run, monkeypatch) -> None:
    first = tuning_split.run_study(run, fractions=(0.5,), seeds=2, n_resamples=50)

    def fail(*args, **kwargs):
        raise AssertionError("recomputed a cached study")

    monkeypatch.setattr(tuning_split, "fraction_sweep", fail)
    again = tuning_split.run_study(run, fractions=(0.5,), seeds=2, n_resamples=50)
    assert again.to_dict() == first.to_dict()
    with pytest.raises(AssertionError, match="recomputed"):  # another setting is another key
        tuning_split.run_study(run, fractions=(0.5,), seeds=3, n_resamples=50)


def test_cancel_stops_a_study(run) -> None:
    with pytest.raises(Cancelled):
        ablation.run_study(run, seeds=2, n_resamples=0, use_cache=False, cancel=lambda: True)


# ----------------------------------------------------------------------------------------- mismatch
CIFAR100_LIKE = tuple(f"other{k}" for k in range(87)) + mismatch.CIFAR100_REMOVED


def _other_set(n: int = 500, shape=(8, 8, 1), seed: int = 1) -> datasets.ImageSet:
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, *shape), dtype=np.uint8)
    return datasets.ImageSet("noise", images, rng.integers(0, 100, n), CIFAR100_LIKE)


def test_mismatch_assembly_drops_the_13_classes_and_balances_counts() -> None:
    rng = np.random.default_rng(0)
    other_labels = rng.integers(0, 100, 1200)
    logits_in, logits_out = rng.normal(size=(700, 10)), rng.normal(size=(1200, 10)) + 100.0
    correct_in = rng.random(700) < 0.8
    exclude = mismatch.default_exclusions(CIFAR100_LIKE)
    assert exclude == mismatch.CIFAR100_REMOVED and len(exclude) == 13
    mix = mismatch.assemble(logits_in, correct_in, logits_out, other_labels, CIFAR100_LIKE, exclude)
    dropped = [CIFAR100_LIKE.index(c) for c in exclude]
    assert mix["kept"] == int((~np.isin(other_labels, dropped)).sum())
    assert not np.isin(other_labels[mix["out_idx"]], dropped).any()
    n = len(mix["in_idx"])
    assert n == len(mix["out_idx"]) == 700 and len(mix["logits"]) == 2 * n
    np.testing.assert_array_equal(mix["logits"][:n], logits_in[mix["in_idx"]])
    np.testing.assert_array_equal(mix["logits"][n:], logits_out[mix["out_idx"]])
    np.testing.assert_array_equal(mix["correct"], np.concatenate([correct_in[mix["in_idx"]], np.zeros(n, bool)]))
    assert mismatch.default_exclusions(("a", "b")) == ()
    with pytest.raises(InputError, match="not classes of the other data set"):
        mismatch.assemble(logits_in, correct_in, logits_out, other_labels, CIFAR100_LIKE, ["unicorn"])


def test_mismatch_study_runs_the_model_on_the_other_set(digits_run) -> None:
    other = _other_set()
    result = mismatch.run_study(
        digits_run, other=other, fractions=(0.2, 0.5), seeds=2, n_resamples=0, device="cpu", use_cache=False
    )
    kept = int((~np.isin(other.labels, [CIFAR100_LIKE.index(c) for c in mismatch.CIFAR100_REMOVED])).sum())
    assert result.settings["n_per_side"] == min(kept, len(digits_run.labels))
    assert result.settings["excluded_classes"] == list(mismatch.CIFAR100_REMOVED)
    assert set(result.curves["x"]) == {0.2, 0.5} and set(result.curves["n_seeds"]) == {2}
    # the study is the tuning-split sweep on the mixture: rebuild it and compare one point
    logits_out = mismatch.other_logits(digits_run, other, device="cpu")
    mix = mismatch.assemble(
        digits_run.logits,
        protocol.correctness(digits_run.logits, digits_run.labels),
        logits_out,
        other.labels,
        other.class_names,
        mismatch.CIFAR100_REMOVED,
    )
    tune, evaluation = protocol.split_indices(len(mix["correct"]), 0.5, 1, stratify=mix["correct"])
    probs = detectors.softmax(mix["logits"])
    relu = detectors.RelU().fit_probs(probs[tune], mix["correct"][tune])
    expected = metrics.auroc(relu.score_probs(probs[evaluation]), mix["correct"][evaluation])
    got = result.per_seed[
        (result.per_seed["seed"] == 1)
        & (result.per_seed["x"] == 0.5)
        & (result.per_seed["detector"] == "Rel-U")
        & (result.per_seed["metric"] == "auroc")
    ]
    np.testing.assert_allclose(float(got["value"].iloc[0]), expected, rtol=RTOL)


def test_mismatch_refuses_images_the_model_cannot_take(digits_run, run) -> None:
    with pytest.raises(InputError, match=r"takes 8x8x1 images .* noise has 32x32x3 images"):
        mismatch.run_study(digits_run, other=_other_set(50, (32, 32, 3)), use_cache=False)
    with pytest.raises(InputError, match="needs a run with its model"):
        mismatch.run_study(run, other=_other_set(50), use_cache=False)


def test_mismatch_refuses_unknown_classes_before_running_the_model(digits_run, monkeypatch) -> None:
    monkeypatch.setattr(mismatch, "other_logits", lambda *a, **k: pytest.fail("the model ran first"))
    with pytest.raises(InputError, match="bogusclass to exclude are not classes of the other data set"):
        mismatch.run_study(digits_run, other=_other_set(50), exclude=["bogusclass"], use_cache=False)


# -------------------------------------------------------------------------------------- calibration
def test_ece_from_reliability_bins_matches_metrics_and_a_direct_loop(run) -> None:
    probs = detectors.softmax(run.logits)
    correct = protocol.correctness(run.logits, run.labels)
    ece = calibration.ece_from_bins(*calibration.reliability_bins(probs, correct))
    np.testing.assert_allclose(ece, metrics.ece(run.logits, run.labels), rtol=1e-10)
    confidence = probs.max(axis=1)
    direct = 0.0
    for b in range(15):  # right-closed bins (b/15, (b+1)/15], the first also holds 0
        low, high = b / 15, (b + 1) / 15
        inside = (confidence > low) & (confidence <= high) if b else (confidence <= high)
        if inside.any():
            direct += inside.mean() * abs(correct[inside].mean() - confidence[inside].mean())
    np.testing.assert_allclose(ece, direct, rtol=1e-9)


def test_temperature_scaling_lowers_nll_on_an_overconfident_model() -> None:
    over = synthetic_run(n=2000, scale=4.0, seed=3)  # the same signal, logits multiplied by 4: over-confident
    tune, held_out = np.arange(0, 1000), np.arange(1000, 2000)
    t_cal, _cv_nll = calibration.cross_validated_temperature(over.logits[tune], over.labels[tune])
    assert t_cal > 2.0
    assert calibration.nll(over.logits[held_out], over.labels[held_out], t_cal) < calibration.nll(
        over.logits[held_out], over.labels[held_out], 1.0
    )
    grid = [float(10 ** (k / 46.0)) for k in range(-60, 61)]  # the 121-point grid T_cal used to be chosen on
    brute = [calibration.nll(over.logits[tune], over.labels[tune], t) for t in grid]
    assert abs(np.log(t_cal / grid[int(np.argmin(brute))])) <= 0.06  # within one grid step of the grid's best
    np.testing.assert_allclose(calibration.nll(np.array([[0.0, np.log(3.0)]]), np.array([1])), np.log(4 / 3))


@pytest.mark.parametrize(("scale", "seed", "n_folds"), [(4.0, 3, 5), (0.4, 5, 5), (1.0, 7, 3)])
def test_temperature_is_fitted_continuously_as_scipy_fits_it(scale, seed, n_folds) -> None:
    """T_cal against an independent fit: scipy's bounded minimiser on T itself (not log T) of the mean over the
    same folds of the held-out NLL, written here from log_softmax."""
    from scipy.optimize import minimize_scalar
    from scipy.special import log_softmax

    data = synthetic_run(n=1500, scale=scale, seed=seed)
    logits, labels = np.asarray(data.logits, dtype=np.float64), np.asarray(data.labels)
    fold = np.random.default_rng(seed).permutation(len(labels)) % n_folds  # the folds the docstring names

    def cv_nll(t: float) -> float:
        nll = -log_softmax(logits / t, axis=1)[np.arange(len(labels)), labels]
        return float(np.mean([nll[fold == f].mean() for f in range(n_folds)]))

    reference = minimize_scalar(cv_nll, bounds=(0.05, 20.0), method="bounded", options={"xatol": 1e-9})
    t_cal, cv_value = calibration.cross_validated_temperature(logits, labels, n_folds=n_folds, seed=seed)
    assert t_cal == pytest.approx(reference.x, rel=1e-3)
    assert cv_value <= reference.fun + 1e-9  # as low a criterion as scipy's own fit reaches
    assert cv_value <= min(cv_nll(float(10 ** (k / 46.0))) for k in range(-60, 61))  # never worse than the grid


def test_calibration_study_reports_ece_before_and_after_and_the_detectors(run) -> None:
    over = synthetic_run(n=1500, scale=4.0, seed=4)
    result = calibration.run_study(over, seeds=3, n_resamples=100, use_cache=False)
    summary = result.tables["summary"].set_index("quantity")
    assert summary.loc["ECE", "calibrated_mean"] < summary.loc["ECE", "uncalibrated_mean"]
    assert summary.loc["NLL", "calibrated_mean"] < summary.loc["NLL", "uncalibrated_mean"]
    temps = result.tables["temperatures"]
    assert len(temps) == 3 and (temps["T_cal"] > 1).all()
    # Doctor at the calibration temperature of seed 0, computed directly
    correct = protocol.correctness(over.logits, over.labels)
    _, evaluation = protocol.split_indices(len(correct), 0.5, 0, stratify=correct)
    doctor = detectors.Doctor(temperature=float(temps["T_cal"].iloc[0])).score(over.logits[evaluation])
    got = result.per_seed[
        (result.per_seed["seed"] == 0)
        & (result.per_seed["x"] == calibration.CALIBRATED)
        & (result.per_seed["detector"] == "Doctor")
        & (result.per_seed["metric"] == "fpr95")
    ]
    np.testing.assert_allclose(float(got["value"].iloc[0]), metrics.fpr_at_tpr(doctor, correct[evaluation]), rtol=RTOL)
    reliability = result.tables["reliability"]
    assert set(reliability["state"]) == set(calibration.STATE_NAMES.values())
    assert reliability.groupby("state")["count"].sum().tolist() == [3 * len(evaluation)] * 2
    assert len(result.paired) == 2 * 4  # two states x four metrics
    # T_cal is fitted on the tuning split: the calibrated point's intervals hold for it only, T = 1's are fixed
    conditional = result.paired["verdict"].str.contains(stats.CONDITIONAL_LABEL, regex=False)
    assert (conditional == (result.paired["x"] == calibration.CALIBRATED)).all()


# ---------------------------------------------------------------------------------- figures, registry
def test_every_figure_has_a_sentence_and_its_csv(run) -> None:
    result = ablation.run_study(run, seeds=2, n_resamples=50, use_cache=False)
    listed = study_figures.figures_for(result)
    assert [slug for slug, _, _ in listed] == [
        "lambda_fpr95",
        "lambda_auroc",
        "lambda_fpr95_difference",
        "temperature_fpr95",
        "temperature_auroc",
        "temperature_fpr95_difference",
    ]
    for slug, fig, sentence in listed:
        assert sentence.endswith(".") and len(sentence) > 40
        csv = study_figures.figure_csv(fig)
        assert csv.startswith("trace,x,y,z")
        assert "<p>" + sentence[:20] in study_figures.figure_html(fig, sentence)
    band = listed[0][1]
    names = [t.name for t in band.data]
    assert {"Rel-U", "Doctor", "Rel-U +1 std", "Rel-U −1 std"} <= set(names)
    assert band.layout.xaxis.title.text == "λ"
    assert listed[3][1].layout.xaxis.type == "log"


def test_registry_names_its_modules() -> None:
    assert tuple(STUDIES) == ("ablation", "tuning-split", "mismatch", "calibration", "paper-protocol")
    # the command also runs the training-objectives table, which trains its own runs (studies.objectives)
    assert studies_cli.STUDY_NAMES == (*STUDIES, "objectives")
    for name, study in STUDIES.items():
        assert study.module.NAME == name and study.title == study.module.TITLE
    assert STUDIES["mismatch"].needs_model and not STUDIES["ablation"].needs_model
    with pytest.raises(ValueError, match="two entries are named 'ablation'"):
        by_name(STUDIES["ablation"], STUDIES["calibration"], STUDIES["ablation"])


@pytest.mark.slow  # a subprocess
def test_the_cli_parser_does_not_import_the_studies() -> None:
    import subprocess
    import sys

    code = (
        "import sys, relu_core.cli as c; c.build_parser(); "
        "print('relu_core.studies.ablation' in sys.modules, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


# ----------------------------------------------------------------------------------------------- CLI
@pytest.fixture
def logits_file(tmp_path, run):
    path = tmp_path / "run.npz"
    np.savez(path, logits=run.logits, labels=run.labels)
    return path


@pytest.mark.parametrize(
    "argv, message",
    [
        (["study", "nope"], "unknown study 'nope'"),
        (["study", "tuning-split", "--fractions", "0.2,1.5"], "strictly between 0 and 1"),
        (["study", "tuning-split", "--fractions", "a,b"], "--fractions must be comma-separated numbers"),
        (["study", "ablation", "--seeds", "x"], "--seeds must be a positive integer"),
        (["study", "ablation", "--seeds", "0"], "--seeds must be a positive integer"),  # leave it out: default
        (["study", "ablation", "--axes", "lambda,eps"], "needs a run with its model"),
        (["study", "mismatch"], "needs a run with its model"),
        (["study", "calibration", "--val-fraction", "2"], "strictly between 0 and 1"),
        (["study", "ablation", "--val-fraction", "0.5,0.2"], "--val-fraction"),  # one value (was: the first)
        (["study", "calibration", "--bogus"], "unrecognized arguments"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, message, logits_file, capsys) -> None:
    argv = [*argv, "--logits", str(logits_file)] if argv[1] != "nope" else argv
    assert cli.main(argv) == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err


def test_cli_json_and_out_folder(logits_file, tmp_path, capsys) -> None:
    out = tmp_path / "out"
    argv = [
        "study",
        "tuning-split",
        "--logits",
        str(logits_file),
        "--seeds",
        "2",
        "--fractions",
        "0.2,0.5",
        "--bootstrap",
        "50",
        "--json",
        "--out",
        str(out),
    ]
    assert cli.main(argv) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["study"] == "tuning-split" and data["settings"]["seeds"] == [0, 1]
    run = cli_shared.load_logits_file(logits_file)  # the output names its run
    assert data["run"] == {"source": run.source, "run_id": run.run_id} and logits_file.name in run.source
    assert {row["x"] for row in data["curves"]} == {0.2, 0.5}
    files = {p.name for p in out.iterdir()}
    assert {
        "curves.csv",
        "paired.csv",
        "per_seed.csv",
        "result.json",
        "fraction_fpr95.html",
        "fraction_fpr95.csv",
    } <= files
    # written atomically (cache.write_document): complete files, readable by all, no temporary file left
    assert json.loads((out / "result.json").read_text(encoding="utf-8")) == data
    assert all(p.stat().st_mode & 0o777 == 0o644 for p in out.iterdir()) and not list(out.glob(".tmp-*"))
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.suffix != ".html"}  # plotly's div ids vary

    class FailingText(str):
        def encode(self, *args, **kwargs):
            raise OSError("disk full")

    with pytest.MonkeyPatch.context() as patch:  # a figure's CSV fails while it is being written
        patch.setattr(study_figures, "figure_csv", lambda fig: FailingText("x,y"))
        assert cli.main(argv) == cli.EXIT_BAD_INPUT
    assert "disk full" in capsys.readouterr().err
    assert {p.name for p in out.iterdir()} == files  # no temporary file left
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.suffix != ".html"} == before  # each file whole
    assert cli.main(["study", "calibration", "--logits", str(logits_file), "--seeds", "2", "--bootstrap", "0"]) == 0
    text = capsys.readouterr().out
    assert "[summary]" in text and "ECE" in text and "no bootstrap interval" in text


def test_progress_reports_every_phase(run) -> None:
    calls: list[tuple[int, int, str]] = []
    tuning_split.run_study(
        run,
        fractions=(0.2, 0.5),
        seeds=2,
        n_resamples=20,
        use_cache=False,
        progress=lambda done, total, message: calls.append((done, total, message)),
    )
    assert all(0 <= done <= total for done, total, _ in calls)
    messages = [m for _, _, m in calls]
    assert any("tuning fraction 0.2" in m for m in messages) and any("paired bootstrap" in m for m in messages)
    assert calls[-1][0] == calls[-1][1]


@pytest.mark.slow
def test_offline_cifar_pair_keeps_87_classes_in_equal_counts(shared_data) -> None:
    """A pretrained CIFAR-10 ResNet-20 on the lossless CIFAR-10 prefix against the 916 lossless CIFAR-100 images."""
    cifar10 = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu")
    other = datasets.load_dataset("cifar100-exact", split="test")
    removed = [other.class_names.index(c) for c in mismatch.CIFAR100_REMOVED]
    kept = int((~np.isin(other.labels, removed)).sum())
    result = mismatch.run_study(
        cifar10, other="cifar100-exact", fractions=(0.5,), seeds=2, n_resamples=0, device="cpu", use_cache=False
    )
    assert result.settings["n_per_side"] == min(kept, len(cifar10.labels)) == kept
    assert result.settings["excluded_classes"] == list(mismatch.CIFAR100_REMOVED)
    auroc = _point(result, "mismatch", 0.5, "Doctor", "auroc")[0]
    assert 0.6 < auroc < 1.0  # other-domain images get less confident predictions than correct in-domain ones


def test_a_mark_label_sits_at_its_line_on_a_log_axis(run) -> None:
    """plotly.js reads an annotation's x on a log axis as log10(x): the "T = 1" label must say 0, not 1."""
    result = ablation.run_study(run, axes=("temperature", "lambda"), seeds=2, n_resamples=0, use_cache=False)
    for series, log_x in (("temperature", True), ("lambda", False)):
        fig = study_figures.band_figure(result, series, "auroc")
        marks = result.series[series]["marks"]
        lines = sorted(shape.x0 for shape in fig.layout.shapes)
        labels = {a.text: a.x for a in fig.layout.annotations}
        assert lines == sorted(marks.values())
        for label, value in marks.items():
            assert labels[label] == pytest.approx(np.log10(value) if log_x else value)
        # the difference figure under it keeps its legend below too, so that both x axes line up
        delta = study_figures.difference_figure(result, series, "auroc")
        assert delta.layout.legend.orientation == fig.layout.legend.orientation == "h"


def test_settings_read_in_words() -> None:
    from relu_core.studies import figures as study_figures

    text = study_figures.settings_text(
        {
            "tune_fraction": 0.5,
            "seeds": [0, 1],
            "defaults": {"T": 1.0, "odin_T": 1000.0},
            "n_resamples": 1000,
            "lambda_auto": 0.8123,
            "calibration_bounds": [0.05, 20.0],
        }
    )
    assert text == (
        "tuning fraction: 0.5 · defaults: T = 1, ODIN's T = 1000 · bootstrap resamples per point: 1000 · "
        "λ = N₊/(N₊ + N₋): 0.8123 · T_cal fitted in: 0.05 … 20 (continuous, over log T)"
    )


def test_a_tuning_fraction_axis_spans_zero_to_one_even_for_one_fraction(run) -> None:
    """One fraction alone drew a dot on an x axis from -0.5 to 1.5 (impossible fractions): the axis is [0, 1]."""
    result = tuning_split.run_study(run, fractions=(0.5,), seeds=2, n_resamples=0, use_cache=False)
    for figure in (study_figures.band_figure, study_figures.difference_figure):
        assert list(figure(result, "fraction", "auroc").layout.xaxis.range) == [0.0, 1.0]
