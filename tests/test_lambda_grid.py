"""Rel-U's scores on the λ grid (``lambda_grid.relu_grid_scores``, one pass per (T, split)) against the dense
``quadratic_score`` at every grid λ, on random, realistic and tied logits, with the Hamming fallback (λ = 0, one
side of the split empty) and exact zeros in the moments; and the view and the neighbours that read the grid."""

from __future__ import annotations

import numpy as np
import pytest

from relu_core import detectors, explore, lambda_grid, metrics
from relu_core.errors import InputError
from relu_core.explore import cached, neighbours, views
from tests.test_fast_paths import _random_logits, _realistic_logits, _run, _tied_logits

GRID = cached.LAMBDA_GRID


def _dense(moments: detectors.Moments, probs: np.ndarray, lam: float, rows: np.ndarray) -> np.ndarray:
    """``p^T D* p`` by an einsum: the same operations for identical rows, so ties stay exact (the BLAS product in
    ``quadratic_score`` can split a tie by ~1e-19, enough to move AUROC by more than 1e-6 on tied logits)."""
    return np.einsum("nc,cd,nd->n", probs[rows], moments.matrix(float(lam)), probs[rows])


def _check_against_dense(probs, correct, tune, rows, temperature_note):
    moments = detectors.second_moments(probs[tune], correct[tune])
    grid = lambda_grid.relu_grid_scores(moments, probs, GRID, rows)
    assert grid.scores.shape == (GRID.size, rows.size)
    for k, lam in enumerate(GRID):
        dense = _dense(moments, probs, lam, rows)
        np.testing.assert_allclose(grid.scores[k], dense, rtol=1e-10, atol=1e-16, err_msg=f"{temperature_note} {lam}")
        assert grid.fallback[k] == detectors.is_fallback(moments.matrix(float(lam)))
        assert np.array_equal(grid.scores_at(lam), grid.scores[k])
        got, reference = metrics.summary(grid.scores[k], correct[rows]), metrics.summary(dense, correct[rows])
        for key in ("fpr95", "auroc", "aurc", "augrc"):
            assert got[key] == pytest.approx(reference[key], abs=1e-6), (temperature_note, lam, key)
    return grid


@pytest.mark.parametrize("kind", [_random_logits, _realistic_logits, _tied_logits])
@pytest.mark.parametrize("temperature", [0.5, 1.0, 1000.0])
def test_grid_scores_equal_the_dense_score_at_every_grid_lambda(kind, temperature, monkeypatch):
    monkeypatch.setattr(lambda_grid, "CHUNK_ROWS", 97)  # several row blocks: a tie across blocks must hold
    logits, labels = kind(700, 12, 3)
    probs = detectors.softmax(logits, temperature)
    correct = logits.argmax(axis=1) == labels
    tune = np.arange(700) % 3 == 0
    rows = np.flatnonzero(~tune)
    grid = _check_against_dense(probs, correct, tune, rows, f"{kind.__name__} T={temperature}")
    assert grid.fallback[0] and not grid.fallback[-1]  # λ = 0: every entry is zero; λ = 1: D* = E[p₋p₋ᵀ]
    if kind is _tied_logits:  # identical probability rows get identical scores at every λ
        _, first = np.unique(probs[rows], axis=0, return_index=True)
        _, group = np.unique(probs[rows], axis=0, return_inverse=True)
        assert first.size < rows.size / 5
        np.testing.assert_array_equal(grid.scores, grid.scores[:, first[group.ravel()]])


def test_grid_with_zero_moments_and_an_empty_side_of_the_split():
    # probabilities with exact zeros: entries of E[p₋p₋ᵀ] and E[p₊p₊ᵀ] that are 0, some never switching on
    rng = np.random.default_rng(5)
    probs = rng.dirichlet(np.ones(8), 600)
    probs[:, 6:] = 0.0
    probs[::2, 0] = 0.0
    probs /= probs.sum(axis=1, keepdims=True)
    correct = rng.random(600) < 0.7
    tune = np.arange(600) % 2 == 0
    _check_against_dense(probs, correct, tune, np.flatnonzero(~tune), "zeros")
    # no error in the fitting split: Hamming fallback at every λ, Doctor's ranking
    moments = detectors.second_moments(probs[tune], np.ones(tune.sum(), dtype=bool))
    grid = lambda_grid.relu_grid_scores(moments, probs, GRID)
    assert grid.fallback.all()
    np.testing.assert_allclose(grid.scores, np.tile(_dense(moments, probs, 0.5, np.arange(600)), (GRID.size, 1)))


def test_grid_checks_its_input_and_its_size(monkeypatch):
    probs = detectors.softmax(_random_logits(50, 4, 1)[0])
    moments = detectors.second_moments(probs, np.arange(50) % 3 > 0)
    for bad in ([0.5, 0.2], [-0.1, 0.5], [0.5, 1.5], []):
        with pytest.raises(InputError, match="increasing"):
            lambda_grid.relu_grid_scores(moments, probs, bad)
    monkeypatch.setattr(lambda_grid, "GRID_MAX_VALUES", 101 * 49)
    assert not lambda_grid.fits(50, 101)
    with pytest.raises(InputError, match="exceeds"):
        lambda_grid.relu_grid_scores(moments, probs, GRID)
    assert lambda_grid.relu_grid_scores(moments, probs, GRID, np.arange(49)).scores_at(0.555) is None


def _ready_grid(run, setting):
    job = cached.lambda_grid_job(run, setting.temperature, setting.tune_fraction, setting.seed)
    assert job is not None
    assert job.wait(60) and job.state == "done", job.error
    grid = cached.ready_lambda_grid(run, setting.temperature, setting.tune_fraction, setting.seed)
    assert grid is not None
    return grid


@pytest.mark.parametrize("kind", [_realistic_logits, _tied_logits])
def test_the_view_from_the_grid_equals_the_dense_view_and_neighbours_follow_once_it_is_ready(kind, monkeypatch):
    run = _run(kind, n=900, c=20, seed=7)
    setting = explore.Setting(temperature=2.0, lam=0.37, tune_fraction=0.3)
    assert cached.lambda_grid_job(run, 2.0, 0.3, 0) is None  # a small run: dense moves are cheap, no grid
    dense_views = {lam: views.compute(run, setting.replace(lam=lam)) for lam in (0.0, 0.36, 0.37, 0.38, 1.0)}
    assert cached.ready_lambda_grid(run, 2.0, 0.3, 0) is None
    monkeypatch.setattr(cached, "GRID_MIN_WORK", 0)
    monkeypatch.setattr(neighbours, "FOLLOW_MAX_WORK", 0)  # as a 50k x 1000 run: no neighbours without the grid
    assert not neighbours.follows_lambda(run, setting)
    grid = _ready_grid(run, setting)
    assert neighbours.follows_lambda(run, setting)
    assert not neighbours.follows_lambda(run, setting.replace(lam="auto"))
    moments = cached.moments_at(run, 2.0, 0.3, 0)
    for lam, dense in dense_views.items():
        shown = views.compute(run, setting.replace(lam=lam))
        if cached.duplicate_of(run) is None:
            assert np.shares_memory(shown.detectors["relu"].eval_uncertainty, grid.scores)  # read from the grid
        else:  # ties are given one value again (a copy): the grid's are exact already
            np.testing.assert_array_equal(shown.detectors["relu"].eval_uncertainty, grid.scores_at(lam))
        np.testing.assert_allclose(
            shown.detectors["relu"].eval_uncertainty, dense.detectors["relu"].eval_uncertainty, rtol=1e-10, atol=1e-16
        )
        assert shown.fallback == dense.fallback and np.array_equal(shown.dstar, dense.dstar)
        reference = _dense(moments, cached.probs_at(run, 2.0), lam, shown.eval_idx)
        correct_eval = shown.correct_eval
        for key, detector in shown.detectors.items():
            expected = metrics.summary(reference, correct_eval) if key == "relu" else dense.detectors[key].summary
            for metric in ("fpr95", "auroc", "aurc", "augrc"):
                assert detector.summary[metric] == pytest.approx(expected[metric], abs=1e-6), (lam, key, metric)
    found = neighbours.neighbour_views(run, setting)
    assert sorted(found) == [0.36, 0.38]
    np.testing.assert_array_equal(found[0.38].detectors["relu"].eval_uncertainty, grid.scores_at(0.38))
    # a grid that left the cache is prepared again (its finished job does not stand in for it)
    cached.GRIDS.clear()
    assert cached.ready_lambda_grid(run, 2.0, 0.3, 0) is None
    again = _ready_grid(run, setting)
    np.testing.assert_array_equal(again.scores, grid.scores)
    assert cached.lambda_grid_job(run, 2.0, 0.3, 0) is None  # ready: nothing to start
    # a λ off the grid (the CLI's) is scored densely
    off = views.compute(run, setting.replace(lam=0.375))
    expected = detectors.quadratic_score(cached.probs_at(run, 2.0), off.dstar, off.eval_idx)
    np.testing.assert_array_equal(off.detectors["relu"].eval_uncertainty, expected)
