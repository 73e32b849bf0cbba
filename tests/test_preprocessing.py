"""Input pre-processing: eps = 0 is exact, eps > 0 moves each detector's score the documented way, caching."""

from __future__ import annotations

import numpy as np
import pytest

from relu_core import detectors, engine, preprocessing, runs
from relu_core.errors import Cancelled, InputError

EPS = 0.02
SUBSET = np.arange(0, 899, 3)  # 300 test images keep the gradient passes fast


@pytest.fixture(scope="module")
def run() -> runs.Run:
    return runs.default_run()


def _fitted(run: runs.Run, key: str, temperature: float | None = None) -> detectors.Detector:
    tune = np.setdiff1d(np.arange(len(run)), SUBSET)
    return detectors.make_detector(key, temperature=temperature).fit(run.logits[tune], run.labels[tune])


def _scores(run, detector, eps, **kw):
    return preprocessing.perturbed_scores(
        run.model, run.images, detector, eps, mean=run.mean, std=run.std, indices=SUBSET, device="cpu", **kw
    )


def test_the_gradient_step_runs_in_full_float32_too(run, monkeypatch):
    """On CUDA, fp32 turns TF32 off for the forward passes (engine.autocast) and for the ε step's backward."""
    import contextlib

    import torch

    depth, grad_inside = [0], []

    @contextlib.contextmanager
    def recording(device, precision):
        depth[0] += 1
        try:
            yield
        finally:
            depth[0] -= 1

    real_grad = torch.autograd.grad

    def grad(*args, **kwargs):
        grad_inside.append(depth[0] > 0)
        return real_grad(*args, **kwargs)

    monkeypatch.setattr(engine, "full_float32", recording)
    monkeypatch.setattr(torch.autograd, "grad", grad)
    _scores(run, _fitted(run, "doctor"), 0.0123)  # an ε no other test caches: the pass runs here
    assert grad_inside and all(grad_inside)


@pytest.mark.parametrize("key", ["relu", "doctor", "odin"])
def test_eps_zero_is_the_clean_score(run, key):
    # The same images in other batches: equal to float rounding (kernels differ per batch size and CPU).
    detector = _fitted(run, key)
    np.testing.assert_allclose(_scores(run, detector, 0.0), detector.score(run.logits[SUBSET]), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "key, temperature, rises", [("relu", 1.0, True), ("doctor", 1.0, True), ("odin", 1000.0, False)]
)
def test_eps_moves_the_uncertainty_in_the_stated_direction(run, key, temperature, rises):
    detector = _fitted(run, key, temperature)
    clean = detector.score(run.logits[SUBSET])
    perturbed = _scores(run, detector, EPS)
    change = perturbed - clean
    if rises:  # Rel-U and Doctor: the step raises their uncertainty
        assert change.mean() > 0 and (change > 0).mean() > 0.9
    else:  # ODIN: the step raises max softmax(z / T), i.e. lowers the uncertainty -max p
        assert change.mean() < 0 and (change < 0).mean() > 0.9


def test_cache_progress_cancel_and_hook(run, monkeypatch):
    detector = _fitted(run, "doctor")
    calls = []  # model passes over the perturbed inputs (the engine's batched loop)
    real = engine.batched_outputs

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(engine, "batched_outputs", counting)
    seen = []
    first = _scores(run, detector, 0.005, progress=lambda done, total, msg: seen.append((done, total)))
    assert seen[-1] == (len(SUBSET), len(SUBSET)) and len(calls) == 1
    assert np.array_equal(_scores(run, detector, 0.005), first) and len(calls) == 1  # cache hit
    _scores(run, detector, 0.006)
    assert len(calls) == 2  # eps is part of the key
    with pytest.raises(Cancelled):
        _scores(run, detector, 0.007, cancel=lambda: True)
    assert len(calls) == 3

    scorer = preprocessing.make_perturbed_scorer(run, 0.005, device="cpu")
    assert np.array_equal(scorer(detector, SUBSET), first) and len(calls) == 3  # the hook reuses the cached scores


def test_rel_u_key_includes_its_matrix(run):
    a = _fitted(run, "relu")
    b = detectors.make_detector("relu", lam=0.9).fit(run.logits[SUBSET], run.labels[SUBSET])
    assert not np.array_equal(_scores(run, a, 0.01), _scores(run, b, 0.01))


def test_invalid_requests(run):
    with pytest.raises(InputError, match="MSP, ODIN, Doctor, Rel-U"):
        _scores(run, _fitted(run, "entropy"), EPS)
    with pytest.raises(InputError, match="eps"):
        _scores(run, _fitted(run, "odin"), -0.1)
    with pytest.raises(InputError, match="not fitted"):
        _scores(run, detectors.RelU(), EPS)
    upload = runs.Run("x", run.logits, run.labels, run.class_names)
    with pytest.raises(InputError, match="uploaded logits"):
        preprocessing.make_perturbed_scorer(upload, EPS)
