"""ε selected inside the tuning split like T and lam (issue 41): the two-stage pass (one backward pass, one forward
pass per ε) equals the direct per-ε scores, the search reads the tuning rows only and agrees with a brute-force
search written here from the definitions, a run of logits only is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.metrics import roc_curve

from relu_core import detectors, preprocessing, protocol
from relu_core.errors import InputError
from relu_core.runs import Run

ROWS = np.arange(0, 899, 4)  # 225 digits test images keep the gradient passes short
EPSILONS = (0.0, 0.01, 0.05)  # larger than the paper's: the digits' linear model needs a visible step


def _fitted(run: Run, key: str, temperature: float = 1.0) -> detectors.Detector:
    tune = np.setdiff1d(np.arange(len(run)), ROWS)
    return detectors.make_detector(key, temperature=temperature).fit(run.logits[tune], run.labels[tune])


@pytest.mark.parametrize(("key", "temperature"), [("relu", 1.0), ("doctor", 1.5), ("odin", 2.0)])
def test_two_stage_equals_the_direct_per_eps_scores(digits_run, key, temperature):
    detector = _fitted(digits_run, key, temperature)
    run = digits_run
    grid = preprocessing.perturbed_scores_grid(
        run.model, run.images, detector, EPSILONS, mean=run.mean, std=run.std, indices=ROWS, device="cpu"
    )
    assert grid.shape == (len(EPSILONS), ROWS.size)
    for k, eps in enumerate(EPSILONS):
        direct = preprocessing.perturbed_scores(
            run.model, run.images, detector, eps, mean=run.mean, std=run.std, indices=ROWS, device="cpu"
        )
        np.testing.assert_allclose(grid[k], direct, rtol=1e-6, atol=1e-9)
    assert not np.allclose(grid[0], grid[-1])  # the step moves the scores: the comparison above has teeth


def test_the_perturbation_counts_one_backward_per_call(digits_run):
    perturbation = preprocessing.make_perturbation(digits_run, device="cpu")
    scores = perturbation(_fitted(digits_run, "doctor"), ROWS[:50], (0.01, 0.02, 0.03))
    assert scores.shape == (3, 50)
    assert (perturbation.calls, perturbation.backward_images, perturbation.forward_images) == (1, 50, 150)
    assert perturbation.backward_images_per_eps == 150  # a pass per ε: three gradients instead of one


def test_a_run_of_logits_only_is_refused_in_one_line(digits_run):
    logits_only = Run.from_logits(digits_run.logits, digits_run.labels, digits_run.class_names)
    with pytest.raises(InputError, match="needs the model and the images") as caught:
        preprocessing.make_perturbation(logits_only)
    assert "\n" not in str(caught.value)
    with pytest.raises(InputError, match="a run of logits only cannot be perturbed"):
        protocol.evaluate_with_selection(
            digits_run.logits, digits_run.labels, ["doctor"], seeds=1, epsilons=(0.0, 0.001), n_resamples=0
        )
    with pytest.raises(InputError, match="does not go with"):
        protocol.evaluate_with_selection(
            digits_run.logits,
            digits_run.labels,
            ["doctor"],
            seeds=1,
            epsilons=(0.0, 0.001),
            perturbation=preprocessing.make_perturbation(digits_run),
            eps=0.001,
        )


@pytest.mark.parametrize("bad", [(), (0.0, -0.001), (0.001, 0.001), (float("nan"),)])
def test_bad_eps_grids_are_refused(bad):
    with pytest.raises(InputError):
        protocol.check_epsilons(bad)


def test_the_grid_is_named_a_subset_when_it_is_one():
    assert protocol.AUTHORS_EPSILONS == preprocessing.AUTHORS_EPSILONS
    assert "(the authors' grid)" in protocol.describe_eps_grid(preprocessing.AUTHORS_EPSILONS)
    assert "a subset of the authors' grid: 3 of its 9 values" in protocol.describe_eps_grid((0, 0.002, 0.004))
    assert "not the authors' grid" in protocol.describe_eps_grid((0, 0.01))


class _Recording:
    """A perturbation that records the rows it is asked for."""

    def __init__(self, inner):
        self.inner, self.asked = inner, []

    def __call__(self, detector, rows, epsilons):
        self.asked.append((np.asarray(rows).copy(), tuple(epsilons)))
        return self.inner(detector, rows, epsilons)


def _fpr95(uncertainty: np.ndarray, correct: np.ndarray) -> float:
    """FPR at 95 % TPR, correct samples positive, from scikit-learn's full ROC curve (confidence = -uncertainty)."""
    fpr, tpr, _ = roc_curve(correct, -uncertainty, drop_intermediate=False)
    return float(fpr[np.argmax(tpr >= 0.95)])


def test_selection_reads_the_tuning_rows_only_and_matches_a_brute_force_search(digits_run):
    run = digits_run
    correct = run.logits.argmax(1) == run.labels
    tune, held_out = protocol.split_indices(len(run), 0.5, seed=3, stratify=correct)
    recording = _Recording(preprocessing.make_perturbation(run, device="cpu"))
    temperatures, lambdas, n_folds = (1.0, 2.0), (0.5, 0.8), 3
    grid = protocol.grid_search(
        run.logits,
        run.labels,
        tune_idx=tune,
        eval_idx=held_out,
        temperatures=temperatures,
        lambdas=lambdas,
        n_folds=n_folds,
        epsilons=EPSILONS,
        perturbation=recording,
        fold_seed=3,
    )
    asked = np.concatenate([rows for rows, _ in recording.asked])
    assert np.isin(asked, tune).all() and not np.isin(asked, held_out).any()
    # one call per (T, lam, fold), each asking for every positive ε at once: one backward pass per D*
    assert len(recording.asked) == len(temperatures) * len(lambdas) * n_folds
    assert {eps for _, eps in recording.asked} == {EPSILONS[1:]}
    assert grid.table.shape == (len(temperatures), len(lambdas), len(EPSILONS))

    # brute force: folds as documented (each class permuted with the fold seed, dealt round-robin), D* fitted by
    # RelU.fit on the other folds' logits, the held-out fold scored with the direct per-ε pass
    rng = np.random.default_rng(3)
    fold = np.empty(tune.size, dtype=int)
    offset = 0
    for value in (True, False):
        members = rng.permutation(np.flatnonzero(correct[tune] == value))
        fold[members] = (np.arange(members.size) + offset) % n_folds
        offset += members.size
    expected = np.zeros_like(grid.table)
    for i, t in enumerate(temperatures):
        for j, lam in enumerate(lambdas):
            for f in range(n_folds):
                fit_rows, score_rows = tune[fold != f], tune[fold == f]
                relu = detectors.RelU(lam=lam, temperature=t).fit(run.logits[fit_rows], run.labels[fit_rows])
                for k, eps in enumerate(EPSILONS):
                    scores = (
                        relu.score(run.logits[score_rows])
                        if eps == 0
                        else preprocessing.perturbed_scores(
                            run.model, run.images, relu, eps, mean=run.mean, std=run.std, indices=score_rows
                        )
                    )
                    expected[i, j, k] += _fpr95(scores, correct[score_rows]) / n_folds
    np.testing.assert_allclose(grid.table, expected, atol=1e-9)
    i, j, k = np.unravel_index(np.argmin(expected), expected.shape)
    assert (grid.best_temperature, grid.best_lam, grid.best_eps) == (temperatures[i], lambdas[j], EPSILONS[k])


def test_a_detector_without_preprocessing_has_no_eps_to_select(digits_run):
    with pytest.raises(InputError, match="no input pre-processing"):
        protocol.grid_search(
            digits_run.logits,
            digits_run.labels,
            tune_idx=np.arange(400),
            method="entropy",
            epsilons=EPSILONS,
            perturbation=preprocessing.make_perturbation(digits_run),
        )


@pytest.mark.slow
def test_evaluate_with_eps_selection_end_to_end(digits_run):
    """Two seeds, Rel-U, Doctor and MSP: ε selected per seed inside the tuning part, the evaluation part scored
    at the selected ε, the grid named in the result and its JSON."""
    run = digits_run
    recording = _Recording(preprocessing.make_perturbation(run, device="cpu"))
    result = protocol.evaluate_with_selection(
        run.logits,
        run.labels,
        ["relu", "doctor", "msp"],
        temperatures=(1.0, 2.0),
        lambdas=(0.5,),
        n_folds=3,
        seeds=2,
        epsilons=EPSILONS,
        perturbation=recording,
        n_resamples=50,
    )
    correct = run.logits.argmax(1) == run.labels
    splits = list(protocol.seeded_splits(correct, 0.5, (0, 1)))
    for rows, epsilons in recording.asked:  # each call: inside a seed's tuning part, or that seed's evaluation part
        assert any(
            np.isin(rows, tune).all() or (np.array_equal(rows, held_out) and len(epsilons) == 1)
            for _, tune, held_out in splits
        )
    assert sum(len(e) == 1 for _, e in recording.asked) <= 4  # at most Rel-U's and Doctor's evaluation, per seed
    assert result.eps_grid == EPSILONS
    assert set(result.eps_per_seed) == {"relu", "doctor", "msp"}
    assert result.eps_per_seed["msp"] == [0.0, 0.0]
    assert all(e in EPSILONS for key in ("relu", "doctor") for e in result.eps_per_seed[key])
    assert result.n_settings == {"relu": 2 * 1 * 3, "doctor": 2 * 3, "msp": 1}
    table = result.to_dict()
    assert table["relu"]["eps_grid"] == list(EPSILONS) and table["msp"]["eps_grid"] == [0.0]
    assert "subset" not in result.eps_label and "ε selected" in result.eps_label
    json.dumps(table)  # plain JSON
    assert result.paired is not None and "fpr95" in result.paired


def test_cli_evaluate_eps_grid_names_the_grid(digits_run, monkeypatch, capsys):
    from relu_core import cli
    from relu_core.cli import shared

    monkeypatch.setattr(shared, "model_run", lambda args, batch_size, progress: digits_run)
    argv = ["evaluate", "--model", "linear", "--dataset", "digits", "--select", "--t-grid", "1", "--folds", "3"]
    argv += ["--lambda-grid", "0.5", "--eps-grid", "0,0.01", "--seeds", "1", "--bootstrap", "0", "--device", "cpu"]
    assert cli.main([*argv, "--methods", "relu,doctor,msp", "--json"]) == 0
    captured = capsys.readouterr()
    table = json.loads(captured.out)
    assert table["relu"]["eps_grid"] == [0.0, 0.01] and table["msp"]["eps_grid"] == [0.0]
    assert "ε ∈ {0, 0.01} (not the authors' grid)" in table["doctor"]["eps_selection"]
    assert table["relu"]["settings_searched"] == 2
    assert "ε selection:" in captured.err and "backward pass" in captured.err
    assert cli.main([*argv, "--methods", "relu,doctor"]) == 0
    assert "input pre-processing ε selected like T over ε ∈ {0, 0.01}" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--select", "--eps-grid", "cpu"], "a logits file cannot be perturbed"),
        (["--eps-grid", "authors"], "goes with --select or --oracle"),
        (["--select", "--eps-grid", "0,0.001,0.001"], "repeats a value"),
    ],
)
def test_cli_eps_grid_on_logits_is_refused_with_one_line(tmp_path, capsys, extra, message):
    from relu_core import cli

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 300)
    np.savez(tmp_path / "l.npz", logits=(rng.normal(size=(300, 3)) + 2 * np.eye(3)[labels]), labels=labels)
    assert cli.main(["evaluate", "--logits", str(tmp_path / "l.npz"), *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


@pytest.mark.slow
def test_objectives_study_selects_eps_through_each_trained_model():
    from relu_core.studies import objectives

    def study():
        return objectives.objectives_study(
            "digits", "cnn8", objectives=("cross-entropy",), epochs=1, seeds=1, n_resamples=50, epsilons=(0, 0.01)
        )

    first = study()
    row = first.rows[0]
    assert row.result.eps_grid == (0.0, 0.01) and row.oracle.eps_grid == (0.0, 0.01)
    assert row.result.eps_per_seed["msp"] == [0.0]
    assert "T, λ and ε chosen inside the tuning split, ε ∈ {0, 0.01}" in first.answer()
    record = first.to_dict()
    assert record["eps_grid"] == [0.0, 0.01]
    assert record["objectives"]["cross-entropy"]["detectors"]["doctor"]["eps_grid"] == [0.0, 0.01]
    again = study().rows[0].result  # read back from the study's cache: ε travels with it
    assert again.eps_grid == row.result.eps_grid and again.eps_per_seed == row.result.eps_per_seed
    with pytest.raises(InputError, match="goes with selection 'tuning'"):
        objectives.objectives_study("digits", "cnn8", selection="fixed", epsilons=(0, 0.01))
