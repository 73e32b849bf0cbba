"""The per-run pieces every view of a run shares (softmax per T, correctness, splits, the training-free
detectors' scores, the confusion matrix), each in a bounded process-wide cache keyed on the run's id (a content
hash) and plain numbers, never on arrays. They take the run itself, so a run need not be registered."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TypeVar

import numpy as np
import torch

from relu_core import detectors, figures, jobs, lambda_grid, metrics, protocol, ties
from relu_core.errors import InputError
from relu_core.explore.setting import LAM_DECIMALS, LAM_STEP
from relu_core.registry import LRURegistry

F = TypeVar("F", bound=Callable)


def per_run(bound: int, max_bytes: int | None = None, by_device: bool = False) -> Callable[[F], F]:
    """Cache a function of a run and hashable arguments on ``(run.run_id, *arguments)`` in a process-wide
    :class:`LRURegistry` of ``bound`` entries (and ``max_bytes`` of arrays), shared by every session; ``.cache``
    is that registry. ``by_device``: the key also names where the run's dense algebra runs (:func:`device_key`),
    for functions whose result comes from it."""

    def decorate(function: F) -> F:
        cache = LRURegistry(bound, max_bytes)

        @functools.wraps(function)
        def wrapper(run, *args):
            key = (run.run_id, *args, device_key(run)) if by_device else (run.run_id, *args)
            try:
                return cache[key]
            except KeyError:
                pass
            value = function(run, *args)
            cache[key] = value
            return value

        wrapper.cache = cache  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate


#: The bytes of CPU softmaxes :func:`probs_at` keeps (24 of a 10k x 100 run, 5 of a 50k x 1000 one: 400 MB each).
PROBS_MAX_BYTES = 2 * 2**30


@per_run(24, PROBS_MAX_BYTES)
def probs_at(run, temperature: float) -> np.ndarray:
    """``softmax(logits / T)`` of a run, once per (run, T), in numpy on the CPU."""
    return detectors.softmax(run.logits, temperature)


#: The environment variable that says where views do their dense algebra (the softmax, D*'s moments, the
#: scores): "auto" (the default: :func:`slider_device`), "numpy" (the CPU, always), or a torch device ("cuda",
#: "cuda:1"; "cpu" runs the torch code on the CPU, as the tests of this path do).
SLIDER_DEVICE_ENV = "RELU_STUDIO_SLIDER_DEVICE"
#: Runs of at most this many N x C² multiply-adds take milliseconds per dense view on the CPU: under "auto" they
#: stay in numpy (a GPU would add transfers), and they need no λ grid (:func:`lambda_grid_job`); above it λ's
#: neighbours wait for the grid (``neighbours.FOLLOW_MAX_WORK``).
GRID_MIN_WORK = 3e8
#: Under "auto", the GPU is used when the run's float64 logits and this many float64 softmaxes fit in half of
#: its free memory (:func:`device_probs_at` keeps up to that many).
DEVICE_PROBS_KEPT = 4


def slider_device(run) -> torch.device | None:
    """The torch device of ``run``'s dense algebra, or None for numpy on the CPU (:data:`SLIDER_DEVICE_ENV`).
    Under "auto": a CUDA GPU for runs of more than :data:`GRID_MIN_WORK` N x C² multiply-adds that fit in half
    of its free memory, decided once per run (the memory the run then holds must not turn it off again)."""
    choice = os.environ.get(SLIDER_DEVICE_ENV, "").strip().lower() or "auto"
    if choice == "numpy":
        return None
    if choice != "auto":
        try:
            device = torch.device(choice)
        except RuntimeError:
            device = None
        if device is None or device.type not in ("cpu", "cuda"):
            raise InputError(f"{SLIDER_DEVICE_ENV}={choice!r} is not one of auto, numpy, cpu, cuda or cuda:N")
        if device.type == "cuda" and not torch.cuda.is_available():
            raise InputError(f"{SLIDER_DEVICE_ENV}={choice!r}, but no CUDA GPU is available; use auto or numpy")
        return device
    return _auto_device(run)


def on_gpu(run) -> bool:
    """Whether ``run``'s dense algebra runs on a CUDA GPU (:func:`slider_device`): a λ move there takes milliseconds,
    so it needs no λ grid and λ's neighbours are always computed. Torch on the CPU (``cpu``: how the tests check the
    torch path) is no faster than numpy, so it is treated like numpy."""
    device = slider_device(run)
    return device is not None and device.type == "cuda"


def device_key(run) -> str:
    """Where ``run``'s dense algebra runs, as a cache key: "numpy" or the torch device's name. Results computed in
    one place are never served for another (the choice may change: the environment, or "auto" deciding again)."""
    device = slider_device(run)
    return "numpy" if device is None else str(device)


@per_run(64)
def _auto_device(run) -> torch.device | None:
    n_samples, n_classes = run.logits.shape
    if n_samples * n_classes**2 <= GRID_MIN_WORK or not torch.cuda.is_available():
        return None
    free_bytes, _ = torch.cuda.mem_get_info()
    needed = (1 + DEVICE_PROBS_KEPT) * n_samples * n_classes * 8
    return torch.device("cuda") if needed <= free_bytes / 2 else None


@per_run(2)
def _logits_on(run, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(run.logits).to(device=device, dtype=torch.float64)


@per_run(DEVICE_PROBS_KEPT)
def device_probs_at(run, temperature: float, device: torch.device) -> torch.Tensor:
    """``softmax(logits / T)`` of a run as a float64 tensor on ``device``, once per (run, T, device)."""
    return detectors.softmax(_logits_on(run, device), temperature)


def scoring_probs(run, temperature: float) -> np.ndarray | torch.Tensor:
    """The softmax at T where the run's dense algebra runs (:func:`slider_device`): a tensor on that device, or
    :func:`probs_at`'s numpy array."""
    device = slider_device(run)
    return probs_at(run, temperature) if device is None else device_probs_at(run, temperature, device)


def as_numpy(values: np.ndarray | torch.Tensor) -> np.ndarray:
    """Scores computed on a device, back in float64 numpy for the metrics and the figures."""
    if isinstance(values, torch.Tensor):
        return values.detach().to(device="cpu", dtype=torch.float64).numpy()
    return values


@per_run(8)
def correctness(run) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, correct) of a run."""
    return np.argmax(run.logits, axis=1), protocol.correctness(run.logits, run.labels)


@per_run(8)
def duplicate_of(run) -> np.ndarray | None:
    """:func:`relu_core.ties.twins` of the run's logits: per sample, the first with the same logits row."""
    return ties.twins(run.logits)


def tied_equal(run, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (one per sample of ``rows``) with identical logits given one value (:mod:`relu_core.ties`)."""
    return ties.tied_equal(duplicate_of(run), rows, values)


@per_run(32)
def split_for(run, tune_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(tune_idx, eval_idx), stratified by correctness as in ``protocol.evaluate``."""
    _, correct = correctness(run)
    return protocol.split_indices(len(correct), tune_fraction, seed, stratify=correct)


@per_run(64, by_device=True)
def fixed_scores(run, key: str) -> np.ndarray:
    """Uncertainty of a training-free detector at its standard setting, on every sample of the run."""
    detector = detectors.make_detector(key)
    if not detector.accepts_probs:
        return detector.score(run.logits)
    return as_numpy(detector.score_probs(scoring_probs(run, detector.temperature)))


@per_run(32)
def confusion_figure(run, tune_fraction: float, seed: int):
    """The tuning split's confusion matrix and its figure (independent of T and λ: built once)."""
    predictions, _ = correctness(run)
    tune_idx, _ = split_for(run, tune_fraction, seed)
    cm = metrics.confusion_matrix(predictions[tune_idx], run.labels[tune_idx], len(run.class_names))
    return cm, figures.confusion_heatmap(cm, run.class_names, title="Confusion matrix (tuning split)")


@per_run(8, by_device=True)
def moments_at(run, temperature: float, tune_fraction: float, seed: int) -> detectors.Moments:
    """The tuning split's second moments at T (:func:`detectors.second_moments`): every λ of that T and split
    fits D* from them, so a λ move costs no pass over the tuning split (C x C x 2 float64 each: 16 MB at 1000
    classes, hence the small bound)."""
    _, correct = correctness(run)
    tune_idx, _ = split_for(run, tune_fraction, seed)
    return detectors.second_moments(scoring_probs(run, temperature), correct[tune_idx], rows=tune_idx)


@per_run(24, by_device=True)
def doctor_at(run, temperature: float) -> np.ndarray:
    """Doctor's uncertainty on every sample at T (it does not depend on λ or the split)."""
    return as_numpy(detectors.Doctor(temperature).score_probs(scoring_probs(run, temperature)))


def fitted_relu(run, setting) -> detectors.RelU:
    """Rel-U at the setting's T and λ, fitted on its tuning split (the view's and the ε pass's) from the
    moments kept per (T, split) (:func:`moments_at`)."""
    moments = moments_at(run, setting.temperature, setting.tune_fraction, setting.seed)
    return detectors.RelU(lam=setting.lam, temperature=setting.temperature).fit_moments(moments)


#: The slider's λ values, 0 to 1 by :data:`LAM_STEP`, rounded as the slider rounds them.
LAMBDA_GRID = np.round(np.arange(round(1 / LAM_STEP) + 1) * LAM_STEP, LAM_DECIMALS)
#: The λ grids of this process, least recently used dropped: (run id, T, tuning fraction, seed) ->
#: :class:`lambda_grid.LambdaGrid` (101 x N_eval float64 each: 32 MB at 40,000 evaluation rows).
GRIDS = LRURegistry(4)


def _grid_key(run, temperature: float, tune_fraction: float, seed: int) -> tuple:
    return (run.run_id, temperature, tune_fraction, seed)


def lambda_grid_job(run, temperature: float, tune_fraction: float, seed: int) -> jobs.Job | None:
    """Starts (or finds) the background job that prepares Rel-U's evaluation-split scores at every λ of
    :data:`LAMBDA_GRID` for this (run, T, split) (:func:`lambda_grid.relu_grid_scores`, one pass over the C²
    entries per sample), kept in :data:`GRIDS`. None when the run is too small to need one
    (:data:`GRID_MIN_WORK`), its dense algebra runs on a GPU (:func:`on_gpu`: it scores a λ move in
    milliseconds), its grid would not fit (:data:`lambda_grid.GRID_MAX_VALUES`), and once it is ready."""
    _, eval_idx = split_for(run, tune_fraction, seed)
    n_samples, n_classes = run.logits.shape
    if n_samples * n_classes**2 <= GRID_MIN_WORK or not lambda_grid.fits(eval_idx.size, LAMBDA_GRID.size):
        return None
    if on_gpu(run):
        return None
    key = _grid_key(run, temperature, tune_fraction, seed)
    if GRIDS.get(key) is not None:
        return None
    job_key = f"lambda-grid:{key}"
    job = jobs.MANAGER.get(job_key)
    if job is not None and job.state == jobs.DONE:  # done, but its grid has since left GRIDS: prepare it again
        jobs.MANAGER.forget(job_key)

    def work(progress, cancel) -> None:
        moments = moments_at(run, temperature, tune_fraction, seed)
        probs = probs_at(run, temperature)
        GRIDS[key] = lambda_grid.relu_grid_scores(moments, probs, LAMBDA_GRID, eval_idx, cancel)

    # one grid per run at a time: a T or split move cancels the grid of the one before
    return jobs.MANAGER.submit(job_key, "Rel-U at every λ", work, group=f"lambda-grid:{run.run_id}")


def ready_lambda_grid(run, temperature: float, tune_fraction: float, seed: int) -> lambda_grid.LambdaGrid | None:
    """The λ grid of this (run, T, split) when it is ready (:func:`lambda_grid_job`), else None."""
    return GRIDS.get(_grid_key(run, temperature, tune_fraction, seed))


def clear() -> None:
    """Empties every per-run cache of this module and the λ grids (:func:`relu_core.explore.views.clear` empties
    these and the views: what a fresh server process would find)."""
    for value in list(globals().values()):
        if isinstance(getattr(value, "cache", None), LRURegistry):
            value.cache.clear()
    GRIDS.clear()
