"""The fast paths of a slider move against the dense reference: Rel-U fitted from moments kept per (T, split),
Rel-U scored on the evaluation split only (every sample's scores computed when first asked), Doctor kept per T,
and the softmax's in-place float64 pass; on random and realistic logits, with ties and the Hamming fallback,
at several λ and T. Metrics must agree to 1e-6."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relu_core import detectors, explore, metrics
from relu_core.errors import InputError
from relu_core.explore import cached, views
from relu_core.runs import Run

LAMBDAS = (0.0, 0.2, 0.5, 0.83, 1.0)
TEMPERATURES = (0.5, 1.0, 2.0, 1000.0)


def _random_logits(n: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    logits = rng.normal(size=(n, c)) + 2.0 * np.eye(c)[labels]
    return logits.astype(np.float32), labels


def _realistic_logits(n: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A trained classifier's shape: groups of similar classes that share a raise, a margin from hard to easy
    samples, a diffuse tail (bench/bench_scale.py's ImageNet-like logits, smaller)."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, c, n)
    group = np.arange(c) // 5
    same = group[None, :] == group[labels][:, None]
    logits = rng.normal(0.0, 1.2, size=(n, c)) + same * (rng.uniform(2.0, 6.0, (n, 1)) + rng.normal(0, 1.5, (n, c)))
    logits[np.arange(n), labels] += rng.gamma(2.0, 2.5, n) + 1.0
    return (1.3 * logits).astype(np.float32), labels


def _tied_logits(n: int, c: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Few distinct rows, repeated: many exactly tied scores, with correct and wrong samples in one tie group."""
    logits, labels = _random_logits(40, c, seed)
    rows = np.random.default_rng(seed + 1).integers(0, 40, n)
    flipped = np.random.default_rng(seed + 2).random(n) < 0.3
    return logits[rows], np.where(flipped, (labels[rows] + 1) % c, labels[rows])


def _run(kind, n: int = 1200, c: int = 30, seed: int = 0) -> Run:
    logits, labels = kind(n, c, seed)
    return Run.from_logits(logits, labels, tuple(f"c{k}" for k in range(c)), source=f"{kind.__name__} {seed}")


def _dense_reference(run: Run, setting: explore.Setting) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """(D*, Rel-U's uncertainty on the evaluation split, its metrics), computed the plain way, with none of the
    library's code but the split and the metrics: the softmax in numpy, D* as the paper writes it from the tuning
    split's rows (the Hamming matrix when it is all zero), ``p^T D* p`` per row by an einsum. ``setting.lam`` is
    a number."""
    z = run.logits.astype(np.float64) / setting.temperature
    probs = np.exp(z - z.max(axis=1, keepdims=True))
    probs /= probs.sum(axis=1, keepdims=True)
    correct = run.logits.argmax(axis=1) == run.labels
    tune_idx, eval_idx = cached.split_for(run, setting.tune_fraction, setting.seed)
    right, wrong = probs[tune_idx][correct[tune_idx]], probs[tune_idx][~correct[tune_idx]]
    lam = float(setting.lam)
    matrix = np.maximum(lam * wrong.T @ wrong / len(wrong) - (1 - lam) * right.T @ right / len(right), 0.0)
    np.fill_diagonal(matrix, 0.0)
    norm = np.linalg.norm(matrix)
    n_classes = matrix.shape[0]
    matrix = matrix / norm if norm > 0 else (1 - np.eye(n_classes)) / np.sqrt(n_classes * (n_classes - 1))
    scores = np.einsum("nc,cd,nd->n", probs[eval_idx], matrix, probs[eval_idx])
    return matrix, scores, metrics.summary(scores, correct[eval_idx])


@pytest.mark.parametrize("kind", [_random_logits, _realistic_logits, _tied_logits])
def test_the_view_agrees_with_the_dense_reference_at_every_lambda_and_temperature(kind):
    run = _run(kind)
    for temperature in TEMPERATURES:
        for lam in LAMBDAS:
            setting = explore.Setting(temperature=temperature, lam=lam, tune_fraction=0.4)
            view = views.compute(run, setting)
            matrix, scores, reference = _dense_reference(run, setting)
            np.testing.assert_allclose(view.dstar, matrix, rtol=1e-9, atol=1e-12)
            relu = view.detectors["relu"]
            np.testing.assert_allclose(relu.eval_uncertainty, scores, rtol=1e-9, atol=1e-15)
            for key in ("fpr95", "auroc", "aurc"):
                assert relu.summary[key] == pytest.approx(reference[key], abs=1e-6), (temperature, lam, key)
            # every sample's scores, computed when a gallery first asks, agree on the evaluation split
            np.testing.assert_allclose(relu.uncertainty[view.eval_idx], relu.eval_uncertainty, rtol=1e-12, atol=1e-15)
            assert view.fallback == detectors.is_fallback(matrix)


def test_the_hamming_fallback_from_moments_ranks_like_doctor():
    run = _run(_realistic_logits, seed=3)
    view = views.compute(run, explore.Setting(lam=0.0))  # every entry of D* is zero at λ = 0
    assert view.fallback and detectors.is_fallback(view.dstar)
    relu, doctor = view.detectors["relu"], view.detectors["doctor"]
    for key in ("fpr95", "auroc", "aurc"):
        assert relu.summary[key] == pytest.approx(doctor.summary[key], abs=1e-9)
    # a tuning split without errors: the moments hold one side only and D* falls back
    logits, _ = _random_logits(200, 6, 4)
    moments = detectors.second_moments(detectors.softmax(logits), np.ones(200, dtype=bool))
    assert moments.pos is None and moments.neg is None
    fitted = detectors.RelU(lam=0.5).fit_moments(moments)
    assert fitted.fallback_ and np.array_equal(fitted.matrix_, detectors.hamming_matrix(6))


def test_fit_from_moments_equals_fit_on_rows_and_moments_are_kept_per_temperature_and_split():
    run = _run(_realistic_logits, seed=5)
    _, correct = cached.correctness(run)
    tune_idx, _ = cached.split_for(run, 0.5, 2)
    probs = cached.probs_at(run, 2.0)
    moments = cached.moments_at(run, 2.0, 0.5, 2)
    assert cached.moments_at(run, 2.0, 0.5, 2) is moments  # once per (run, T, split), never per λ
    for lam in (*LAMBDAS, "auto"):
        on_rows = detectors.RelU(lam=lam, temperature=2.0).fit_probs(probs[tune_idx], correct[tune_idx])
        from_moments = detectors.RelU(lam=lam, temperature=2.0).fit_moments(moments)
        assert from_moments.lam_ == on_rows.lam_ and from_moments.fallback_ == on_rows.fallback_
        np.testing.assert_allclose(from_moments.matrix_, on_rows.matrix_, rtol=1e-12, atol=1e-15)
    positives, negatives = probs[tune_idx][correct[tune_idx]], probs[tune_idx][~correct[tune_idx]]
    np.testing.assert_allclose(moments.pos, positives.T @ positives / len(positives), rtol=1e-12)
    np.testing.assert_allclose(moments.neg, negatives.T @ negatives / len(negatives), rtol=1e-12)
    np.testing.assert_array_equal(cached.doctor_at(run, 2.0), detectors.gini(probs))


@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_softmax_matches_the_textbook_formula_on_float32_and_float64_logits(temperature):
    for logits, _ in (_realistic_logits(500, 40, 6), _random_logits(500, 40, 7)):
        for array in (logits, logits.astype(np.float64)):
            z = array.astype(np.float64) / temperature
            expected = np.exp(z - z.max(axis=1, keepdims=True))
            expected /= expected.sum(axis=1, keepdims=True)
            np.testing.assert_allclose(detectors.softmax(array, temperature), expected, rtol=1e-12, atol=1e-300)
    read_only = logits.copy()
    read_only.flags.writeable = False
    np.testing.assert_allclose(detectors.softmax(read_only, 2.0), detectors.softmax(logits, 2.0))


def test_quadratic_score_of_chosen_rows_equals_the_score_of_those_rows():
    import torch

    probs = detectors.softmax(_realistic_logits(900, 25, 8)[0])
    matrix = detectors.relu_matrix(probs, np.arange(900) % 4 != 0, 0.6)
    rows = np.random.default_rng(9).permutation(900)[:350]
    expected = np.einsum("nc,cd,nd->n", probs[rows], matrix, probs[rows])
    np.testing.assert_allclose(detectors.quadratic_score(probs, matrix, rows), expected, rtol=1e-12, atol=1e-16)
    on_torch = detectors.quadratic_score(torch.from_numpy(probs), matrix, rows)
    np.testing.assert_allclose(on_torch.numpy(), expected, rtol=1e-12, atol=1e-16)
    np.testing.assert_allclose(detectors.gini(probs), 1.0 - (probs**2).sum(axis=1), rtol=1e-12, atol=1e-14)


def test_a_lambda_move_reuses_the_detector_views_that_do_not_depend_on_lambda():
    run = _run(_realistic_logits, n=600, c=12, seed=4)
    setting = explore.Setting(tune_fraction=0.3, detectors=("relu", "doctor", "msp"))
    first, moved = views.compute(run, setting), views.compute(run, setting.replace(lam=0.8))
    assert moved.detectors["doctor"] is first.detectors["doctor"] and moved.detectors["msp"] is first.detectors["msp"]
    assert moved.detectors["relu"] is not first.detectors["relu"]
    hotter = views.compute(run, setting.replace(temperature=2.0))  # Doctor follows T, MSP keeps its own
    assert (
        hotter.detectors["doctor"] is not first.detectors["doctor"]
        and hotter.detectors["msp"] is first.detectors["msp"]
    )
    resplit = views.compute(run, setting.replace(seed=1))
    assert resplit.detectors["msp"] is not first.detectors["msp"]
    expected = metrics.summary(cached.fixed_scores(run, "msp")[resplit.eval_idx], resplit.correct_eval)
    assert resplit.detectors["msp"].summary == expected


def test_moments_are_exactly_symmetric_and_their_dstar_is_the_public_formulas():
    logits, labels = _realistic_logits(800, 15, 2)
    probs = detectors.softmax(logits, 1.5)
    moments = detectors.second_moments(probs, logits.argmax(1) == labels)
    assert np.array_equal(moments.pos, moments.pos.T) and np.array_equal(moments.neg, moments.neg.T)
    for lam in (0.0, 0.2, 0.5, 0.77, 1.0):
        np.testing.assert_array_equal(
            moments.matrix(lam), detectors.relu_matrix_from_moments(moments.pos, moments.neg, lam)
        )
        np.testing.assert_array_equal(
            moments.unnormalised(lam), detectors.unnormalised_relu_matrix(moments.pos, moments.neg, lam)
        )
    assert detectors.is_fallback(moments.matrix(0.0)) and not detectors.is_fallback(moments.matrix(0.5))
    assert detectors.is_fallback(detectors.hamming_matrix(2)) and not detectors.is_fallback(np.zeros((3, 3)))


@pytest.mark.parametrize("blocks", ["one", "many"])
def test_second_moments_of_chosen_rows_equal_the_direct_products(blocks, monkeypatch):
    from relu_core import threads

    if blocks == "many":  # row blocks on the pool, each a syrk of its own, summed
        monkeypatch.setattr(threads, "LARGE_WORK_FLOPS", 0)
        monkeypatch.setattr(threads, "MIN_BLOCK_ROWS", 1)
        monkeypatch.setattr(threads, "_workers", lambda: 2)
    logits, labels = _realistic_logits(900, 14, 6)
    probs = detectors.softmax(logits, 0.7)
    correct_all = logits.argmax(1) == labels
    rows = np.random.default_rng(1).permutation(900)[:500]
    moments = detectors.second_moments(probs, correct_all[rows], rows=rows)
    positives, negatives = probs[rows[correct_all[rows]]], probs[rows[~correct_all[rows]]]
    assert (moments.n_correct, moments.n_errors) == (len(positives), len(negatives))
    np.testing.assert_allclose(moments.pos, positives.T @ positives / len(positives), rtol=1e-12)
    np.testing.assert_allclose(moments.neg, negatives.T @ negatives / len(negatives), rtol=1e-12)
    on_tensor = detectors.second_moments(torch.from_numpy(probs), correct_all[rows], rows=rows)
    for moment in (moments.pos, moments.neg, on_tensor.pos, on_tensor.neg):
        assert np.array_equal(moment, moment.T)  # exactly: a D* takes no average with its transpose
    np.testing.assert_allclose(on_tensor.pos, moments.pos, rtol=1e-12)
    np.testing.assert_allclose(on_tensor.neg, moments.neg, rtol=1e-12)
    with pytest.raises(InputError, match="500 rows"):
        detectors.second_moments(probs, correct_all, rows=rows)
