"""Views whose dense algebra runs in torch on a device (``cached.slider_device``: a GPU under "auto", any torch
device when named) against the numpy path on the CPU: D*, every detector's scores and metrics; the policy that
picks the device; no λ grid and the neighbours on where the device runs. The torch path runs here on the CPU
(``RELU_STUDIO_SLIDER_DEVICE=cpu``) and, where a GPU is present, on CUDA."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from relu_core import explore, ties
from relu_core.errors import InputError
from relu_core.explore import cached, neighbours, views
from tests.test_fast_paths import _random_logits, _realistic_logits, _run, _tied_logits

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


@pytest.fixture(autouse=True)
def _fresh_caches():
    views.clear()
    yield
    views.clear()


def _views(run, settings, device: str, monkeypatch) -> list[views.View]:
    views.clear()  # each path computes its own, even where a cache would already keep them apart
    monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, device)
    try:
        return [views.compute(run, setting) for setting in settings]
    finally:
        monkeypatch.delenv(cached.SLIDER_DEVICE_ENV)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", [_random_logits, _realistic_logits, _tied_logits])
def test_views_on_a_torch_device_equal_the_numpy_views(kind, device, monkeypatch):
    run = _run(kind, n=1500, c=25, seed=3)
    base = explore.Setting(tune_fraction=0.3, detectors=("relu", "doctor", "msp", "odin", "entropy"))
    settings = [base, base.replace(lam=0.8, temperature=2.0), base.replace(lam=0.0), base.replace(temperature=0.5)]
    on_numpy = _views(run, settings, "numpy", monkeypatch)
    on_device = _views(run, settings, device, monkeypatch)
    assert cached.device_probs_at.cache  # the torch path did run
    for setting, expected, got in zip(settings, on_numpy, on_device, strict=True):
        assert got.fallback == expected.fallback
        np.testing.assert_allclose(got.dstar, expected.dstar, rtol=1e-9, atol=1e-12)
        assert set(got.detectors) == set(expected.detectors)
        for key, detector in got.detectors.items():
            reference = expected.detectors[key]
            assert isinstance(detector.eval_uncertainty, np.ndarray)
            assert detector.eval_uncertainty.dtype == np.float64
            np.testing.assert_allclose(detector.eval_uncertainty, reference.eval_uncertainty, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(detector.uncertainty, reference.uncertainty, rtol=1e-9, atol=1e-12)
            for metric in ("fpr95", "auroc", "aurc", "augrc"):
                assert detector.summary[metric] == pytest.approx(reference.summary[metric], abs=1e-6), (
                    setting,
                    key,
                    metric,
                )


def test_a_gpu_run_has_no_lambda_grid_and_its_neighbours_follow(monkeypatch):
    run = _run(_realistic_logits, n=900, c=20, seed=1)
    setting = explore.Setting(lam=0.4, tune_fraction=0.3)
    monkeypatch.setattr(cached, "GRID_MIN_WORK", 0)
    monkeypatch.setattr(neighbours, "FOLLOW_MAX_WORK", 0)  # as a 50k x 1000 run
    monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, "numpy")  # on a GPU machine the policy would pick the GPU
    assert not neighbours.follows_lambda(run, setting)  # numpy on the CPU, no grid yet: no neighbours
    monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, "cpu")  # torch on the CPU is no faster: it waits for the grid too
    assert not cached.on_gpu(run) and not neighbours.follows_lambda(run, setting)
    job = cached.lambda_grid_job(run, 1.0, 0.3, setting.seed)
    assert job is not None and job.wait(timeout=120) and job.state == "done"
    assert neighbours.follows_lambda(run, setting)
    assert sorted(neighbours.neighbour_views(run, setting)) == [0.39, 0.41]
    assert not neighbours.follows_lambda(run, setting.replace(lam="auto"))
    cached.GRIDS.clear()
    monkeypatch.setattr(cached, "slider_device", lambda run_: torch.device("cuda"))  # as on a GPU
    assert cached.on_gpu(run) and cached.lambda_grid_job(run, 1.0, 0.3, setting.seed) is None
    assert neighbours.follows_lambda(run, setting)


def test_the_device_policy(monkeypatch):
    small = _run(_random_logits, n=200, c=10, seed=0)
    large = _run(_random_logits, n=300, c=40, seed=0)
    monkeypatch.setattr(cached, "GRID_MIN_WORK", 300 * 40 * 40 - 1)  # only the large run is worth a GPU
    monkeypatch.delenv(cached.SLIDER_DEVICE_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cached.slider_device(small) is None and cached.slider_device(large) is None
    cached._auto_device.cache.clear()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (10**12, 10**12))
    assert cached.slider_device(small) is None
    assert cached.slider_device(large) == torch.device("cuda")
    # decided once per run: the memory the run then holds does not turn it off
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda: (0, 10**12))
    assert cached.slider_device(large) == torch.device("cuda")
    cached._auto_device.cache.clear()
    assert cached.slider_device(large) is None  # too little free memory: numpy on the CPU
    for choice, expected in (("numpy", None), ("cpu", torch.device("cpu")), (" CUDA:1 ", torch.device("cuda", 1))):
        monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, choice)
        assert cached.slider_device(small) == expected
    for choice in ("gpu please", "mps", "meta", "xpu"):  # torch devices the views' code does not run on, too
        monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, choice)
        with pytest.raises(InputError, match="RELU_STUDIO_SLIDER_DEVICE"):
            cached.slider_device(small)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, "cuda")
    with pytest.raises(InputError, match="no CUDA GPU is available"):
        cached.slider_device(small)


def test_identical_logits_get_one_score_on_every_path(monkeypatch):
    run = _run(_tied_logits, n=1500, c=25, seed=3)
    twins = cached.duplicate_of(run)
    assert twins is not None and np.unique(twins).size <= 40
    np.testing.assert_array_equal(run.logits, run.logits[twins])  # each row's first twin: the same row
    assert (twins <= np.arange(run.logits.shape[0])).all()
    assert cached.duplicate_of(_run(_random_logits, n=500, c=10, seed=0)) is None
    for device in ("numpy", "cpu"):
        (view,) = _views(run, [explore.Setting(tune_fraction=0.3, lam=0.7)], device, monkeypatch)
        groups = twins[view.eval_idx]
        for key, detector in view.detectors.items():
            first = {}
            for group, value in zip(groups, detector.eval_uncertainty, strict=True):
                assert first.setdefault(group, value) == value, (device, key, group)


def test_caches_never_serve_one_device_s_results_for_another(monkeypatch):
    run = _run(_realistic_logits, n=800, c=12, seed=2)
    setting = explore.Setting(tune_fraction=0.3)
    computed = []
    compute = views.compute
    monkeypatch.setattr(views, "compute", lambda *args: computed.append(args) or compute(*args))
    shown = {}
    for device in ("numpy", "cpu", "numpy"):
        monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, device)
        shown.setdefault(device, []).append(explore.view(run, setting))
        assert cached.device_key(run) == device
    assert len(computed) == 2  # one view per device; the second numpy request finds the first
    on_numpy, again = shown["numpy"]
    (on_cpu,) = shown["cpu"]
    assert again is on_numpy and on_cpu is not on_numpy
    assert on_cpu.detectors["doctor"] is not on_numpy.detectors["doctor"]  # the λ-independent views too
    moments = [cached.moments_at.cache.get((run.run_id, 1.0, 0.3, setting.seed, d)) for d in ("numpy", "cpu")]
    assert all(m is not None for m in moments) and moments[0] is not moments[1]
    views.clear()
    assert not views.VIEWS and not views.FIXED_DETECTOR_VIEWS and not cached.moments_at.cache


def test_perturbed_scores_of_identical_clean_logits_are_not_tied():
    from relu_core.explore import eps, views

    run = _run(_tied_logits, n=600, c=10, seed=5)
    twins = cached.duplicate_of(run)
    setting = explore.Setting(tune_fraction=0.5, eps=0.002)
    _, eval_idx = cached.split_for(run, 0.5, setting.seed)
    assert np.unique(twins[eval_idx]).size < eval_idx.size  # the evaluation split holds twins
    # an ε pass perturbs the images, not the logits: two images of identical clean logits score apart
    passed = {key: np.random.default_rng(1).random(eval_idx.size) for key in ("relu", "doctor")}
    view = views.compute(run, setting, eps.Perturbed(0.002, None, passed, "test-eps-pass"))
    for key, scores in passed.items():
        np.testing.assert_array_equal(view.detectors[key].eval_uncertainty, scores)
    clean = views.compute(run, setting.replace(eps=0.0))  # the clean scores of twins stay tied
    for key in passed:
        tied = clean.detectors[key].eval_uncertainty
        assert all(np.unique(tied[twins[eval_idx] == group]).size == 1 for group in np.unique(twins[eval_idx]))


def test_rows_that_agree_on_the_probed_columns_only_are_not_twins(monkeypatch):
    from relu_core.runs import Run

    monkeypatch.setattr(ties, "PROBE_COLUMNS", 2)
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(50, 8)).astype(np.float32)
    logits[10, ::4] = logits[3, ::4]  # the probed columns (0 and 4) agree, the others differ
    logits[20] = logits[7]  # a true twin
    logits[30, ::4] = logits[7, ::4]  # agrees with both on the probe only
    run = Run.from_logits(logits, rng.integers(0, 8, 50), tuple("abcdefgh"), source="probe test")
    twins = cached.duplicate_of(run)
    expected = np.arange(50)
    expected[20] = 7
    np.testing.assert_array_equal(twins, expected)
    logits[20, 1] += 1.0  # no twin left: None
    assert cached.duplicate_of(Run.from_logits(logits, run.labels, run.class_names, source="no twins")) is None


@pytest.mark.slow
@pytest.mark.parametrize("device", DEVICES)
def test_real_logits_on_every_path_agree_with_the_dense_reference(device, shared_data, monkeypatch):
    """The pretrained ResNet-20's logits on the exact CIFAR-10 images: the numpy views, the torch views and the
    λ grid against the plain dense computation (softmax, D* from the tuning rows, ``p^T D* p`` by an einsum)."""
    from relu_core import detectors, metrics, runs
    from tests.test_fast_paths import _dense_reference

    monkeypatch.setenv("RELU_STUDIO_DATA", str(shared_data))
    run = runs.logits_for("resnet20", None, "cifar10-exact", device="cpu")
    settings = [explore.Setting(lam=lam, temperature=t) for lam, t in ((0.5, 1.0), (0.8, 2.0), (0.0, 1.0))]
    for label, on_path in (("numpy", "numpy"), (device, device)):
        for setting, view in zip(settings, _views(run, settings, on_path, monkeypatch), strict=True):
            matrix, reference_scores, reference = _dense_reference(run, setting)
            np.testing.assert_allclose(view.dstar, matrix, rtol=1e-9, atol=1e-12)
            for metric in ("fpr95", "auroc", "aurc", "augrc"):
                assert view.detectors["relu"].summary[metric] == pytest.approx(reference[metric], abs=1e-6), (
                    label,
                    setting,
                    metric,
                )
    monkeypatch.setattr(cached, "GRID_MIN_WORK", 0)  # the λ grid on real logits (the numpy path's)
    monkeypatch.setenv(cached.SLIDER_DEVICE_ENV, "numpy")
    job = cached.lambda_grid_job(run, 1.0, 0.5, 0)
    assert job is not None and job.wait(120) and job.state == "done", job and job.error
    grid = cached.ready_lambda_grid(run, 1.0, 0.5, 0)
    for lam in (0.0, 0.3, 0.5, 1.0):
        _, reference_scores, reference = _dense_reference(run, explore.Setting(lam=lam))
        got = metrics.summary(grid.scores_at(lam), cached.correctness(run)[1][cached.split_for(run, 0.5, 0)[1]])
        for metric in ("fpr95", "auroc", "aurc", "augrc"):
            assert got[metric] == pytest.approx(reference[metric], abs=1e-6), (lam, metric)
    assert detectors.is_fallback(views.compute(run, explore.Setting(lam=0.0)).dstar)
