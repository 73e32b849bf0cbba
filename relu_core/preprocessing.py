"""Input pre-processing (the eps slider): score a fitted detector on adversarially nudged inputs.

Following ODIN (Liang et al., 2018), Doctor (Granese et al., 2021) and Rel-U (Dadalto et al., 2024), each
input is moved by one signed-gradient step in the model's *normalised* input space::

    x' = x - eps * sign(-grad_x log s(x))        (i.e. x + eps * sign(grad_x log s(x)))

where ``s`` is the detector's own score on the model's logits ``z(x)``:

Which score a detector uses is its declared ``perturbation`` (:class:`relu_core.detectors.Detector`):

- Rel-U: ``s = p D* p^T`` with ``p = softmax(z / T)`` and the fitted ``D*`` (its uncertainty);
- Doctor: ``s = 1 - sum p^2`` (Gini impurity of ``softmax(z / T)``, its uncertainty);
- ODIN (and MSP, ODIN at T = 1): ``s = max softmax(z / T)`` (its confidence, minus its uncertainty).

The step therefore *raises* ODIN's confidence and *raises* the Rel-U and Doctor uncertainty, as in the
authors' code: samples the model is unsure about move further than confident ones, which separates them.
The returned uncertainty is ``detector.score`` of the logits of ``x'``. The prediction, and so whether a
sample counts as correct, is always taken from the clean input (the caller's clean logits). ``log s`` is
computed in float64 so the gradient sign stays meaningful for near-one-hot predictions. Entropy and
Energy define no pre-processing here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from relu_core import cache, detectors, engine
from relu_core.detectors import Detector
from relu_core.errors import InputError
from relu_core.runs import Run

#: The paper's grid of input pre-processing magnitudes ε (0 = none), shared by Explore and the ablation.
PAPER_EPSILONS: tuple[float, ...] = (
    0.0,
    0.0002,
    0.0005,
    0.001,
    0.0012,
    0.0014,
    0.0016,
    0.0018,
    0.002,
    0.0025,
    0.003,
    0.0035,
    0.004,
)
#: The authors' ε grid (their ``src/RelU/main.py``: 0 to 0.004 in steps of 0.0005), the grid the honest selection
#: searches by default where a run has its model (:func:`relu_core.protocol.evaluate_with_selection`).
AUTHORS_EPSILONS: tuple[float, ...] = (0.0, 0.0005, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.0035, 0.004)
#: A bounded subset of :data:`AUTHORS_EPSILONS` for 2 CPU cores: no step, the authors' range cut in quarters
#: where their grid holds the value (0.001, 0.002) and its end (0.004); see docs/results/eps-selection.md.
CPU_EPSILONS: tuple[float, ...] = (0.0, 0.001, 0.002, 0.004)
#: The values of ``Detector.perturbation``: s = the detector's uncertainty, or s = max softmax(z / T).
UNCERTAINTY, CONFIDENCE = "uncertainty", "confidence"


def check_detector(detector: Detector) -> None:
    """InputError unless input pre-processing is defined for ``detector`` (its ``perturbation``)."""
    if detector.perturbation not in (UNCERTAINTY, CONFIDENCE):
        supported = ", ".join(cls.name for cls in detectors.REGISTRY.values() if cls.perturbation)
        raise InputError(f"input pre-processing is defined for {supported}, not {detector.name}")


def log_score(detector: Detector, logits: torch.Tensor) -> torch.Tensor:
    """Per-sample ``log s`` (differentiable, float64) of the detector's pre-processing score, see module doc."""
    check_detector(detector)
    logits = logits.to(torch.float64)
    if detector.perturbation == CONFIDENCE:
        return torch.log_softmax(logits / detector.temperature, dim=1).max(dim=1).values
    # s >= 0 (Gini, p D* p^T with D* >= 0); the clamp only guards an exactly one-hot float64 softmax.
    return torch.log(detector.score(logits).clamp_min(torch.finfo(torch.float64).tiny))


def _detector_key(detector: Detector) -> dict:
    key = {"name": detector.name, "temperature": detector.temperature}
    for name, value in detector.fitted_state().items():
        key[name] = cache.array_digest(np.asarray(value, dtype=np.float64)) if isinstance(value, np.ndarray) else value
    return key


def _prepared(model, images, detector: Detector, indices, options: dict, **what) -> tuple:
    """The engine's set-up, the images (``indices`` taken), and the cache key of a perturbed-scores pass: the
    weights hash, image fingerprint, mean/std, detector (name, T, fitted state), precision and device type, plus
    ``what`` (the kind of pass and its ε or ε tuple)."""
    setup = engine.inference(model, images, **options)
    check_detector(detector)
    if indices is not None:
        images = images[_check_indices(indices, images.shape[0])]

    from relu_core import models

    key = {
        "kind": what.pop("kind"),
        "weights": models.weights_hash(model),
        "images": cache.array_digest(images),
        "mean": setup.normalization.mean,
        "std": setup.normalization.std,
        "detector": _detector_key(detector),
        **what,
        "precision": setup.precision,
        "device": setup.device.type,  # a GPU's float32 is not the CPU's to the last bit
    }
    return setup, images, key


def _gradient_sign(net: nn.Module, x: torch.Tensor, detector: Detector, setup) -> torch.Tensor:
    """``sign(-grad_x log s(x))`` on the normalised batch ``x``. Autocast covers the model only
    (engine.forward): the gradient is taken w.r.t. the float32 input, the backward in full float32 too, and
    log s is computed in float64 outside it."""
    x = x.detach().requires_grad_(True)
    with engine.full_float32(x.device, setup.precision):  # the backward too, not only the forward
        with torch.enable_grad():
            objective = log_score(detector, engine.forward(net, x, setup.precision)).sum()
        (grad,) = torch.autograd.grad(objective, x)
    return torch.sign(-grad)


def perturbed_scores(
    model: nn.Module,
    images: np.ndarray,
    detector: Detector,
    eps: float,
    *,
    indices: np.ndarray | None = None,
    **options,
) -> np.ndarray:
    """Uncertainty (float64, one per image, or per ``indices`` in that order) of the fitted ``detector`` on
    the inputs perturbed with step ``eps`` >= 0 (see the module docstring).

    ``images`` is uint8 NHWC; the keyword ``options`` (``mean`` and ``std``, required; ``device``,
    ``batch_size``, ``precision``, ``input_size``, ``progress``, ``cancel``) as :func:`engine.inference`, the
    set-up :func:`engine.compute_logits` shares. With ``eps = 0`` the result is
    ``detector.score(compute_logits(...))`` for the same batch size and precision. Results are cached per
    (weights hash, image fingerprint, indices, mean/std, detector name, T, lam and D* hash, eps, precision,
    device type).
    """
    eps = float(eps)
    if not math.isfinite(eps) or eps < 0:
        raise InputError(f"eps must be a finite number >= 0, got {eps!r}")
    setup, images, key = _prepared(model, images, detector, indices, options, kind="perturbed-scores", eps=eps)

    def perturbed_logits(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """Gradient step on the normalised batch ``x``, then a clean forward pass (float32 logits)."""
        if eps > 0:
            x = x.detach() - eps * _gradient_sign(net, x, detector, setup)
        with torch.inference_mode():
            return engine.forward(net, x, setup.precision)

    def compute() -> dict[str, np.ndarray]:
        logits = setup.outputs(perturbed_logits, images, f"input pre-processing (eps={eps:g})")
        return {"uncertainty": np.asarray(detector.score(logits), dtype=np.float64)}

    return cache.cached("perturbed", key, compute)["uncertainty"]


#: The most float32 logits one batched pass of :func:`perturbed_scores_grid` keeps at once (rows x ε x classes);
#: more rows are scored in chunks.
GRID_CHUNK_VALUES = 2**26


def _check_epsilons(epsilons) -> tuple[float, ...]:
    """The ε values as floats, each finite and >= 0, at least one, none repeated (InputError otherwise)."""
    try:
        values = tuple(float(e) for e in epsilons)
    except (TypeError, ValueError):
        raise InputError(f"epsilons must be numbers, got {epsilons!r}") from None
    if not values:
        raise InputError("give at least one ε")
    bad = [e for e in values if not math.isfinite(e) or e < 0]
    if bad:
        raise InputError(f"ε must be a finite number >= 0, got {bad[0]!r}")
    if len(set(values)) < len(values):
        raise InputError(f"ε values must differ, got {', '.join(f'{e:g}' for e in values)}")
    return values


def perturbed_scores_grid(
    model: nn.Module,
    images: np.ndarray,
    detector: Detector,
    epsilons,
    *,
    indices: np.ndarray | None = None,
    **options,
) -> np.ndarray:
    """Uncertainty (float64, shape ``(len(epsilons), n)``) of the fitted ``detector`` on the images (or
    ``indices``) perturbed with every step in ``epsilons``, in two stages per batch: one backward pass gives
    ``sign(-grad_x log s(x))`` (it depends on the detector and its setting, T and D*, never on ε), then one
    forward pass per ε > 0 of ``x - eps * sign`` (ε = 0: the clean forward pass).

    Row ``k`` equals :func:`perturbed_scores` with ``eps = epsilons[k]`` (the same arithmetic per batch: the
    tests check it), at the cost of one backward pass instead of one per ε. Options as :func:`perturbed_scores`;
    cached on disk per (weights, images, indices, normalisation, detector and its fitted state, the ε tuple,
    precision, device type).
    """
    epsilons = _check_epsilons(epsilons)
    setup, images, key = _prepared(
        model, images, detector, indices, options, kind="perturbed-scores-grid", epsilons=list(epsilons)
    )
    steps = torch.tensor(epsilons, dtype=torch.float32)
    need_grad = bool((steps > 0).any())

    def grid_logits(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        """The gradient sign once, then one forward pass per ε: (batch, E * C) float32 logits, ε-major."""
        sign = _gradient_sign(net, x, detector, setup) if need_grad else None
        x = x.detach()
        outs = []
        with torch.inference_mode():
            for eps in epsilons:
                outs.append(engine.forward(net, x if eps == 0 else x - eps * sign, setup.precision))
        return torch.cat(outs, dim=1)

    def compute() -> dict[str, np.ndarray]:
        n = images.shape[0]
        n_classes = None
        scores = np.empty((len(epsilons), n), dtype=np.float64)
        start = 0
        chunk = n
        while start < n:
            part = images[start : start + chunk]
            flat = setup.outputs(grid_logits, part, f"input pre-processing ({len(epsilons)} ε, one gradient)")
            n_classes = flat.shape[1] // len(epsilons)
            for k, block in enumerate(np.split(flat, len(epsilons), axis=1)):
                scores[k, start : start + part.shape[0]] = np.asarray(detector.score(block), dtype=np.float64)
            start += part.shape[0]
            chunk = max(1, GRID_CHUNK_VALUES // (len(epsilons) * n_classes))
        return {"uncertainty": scores}

    return cache.cached("perturbed-grid", key, compute)["uncertainty"]


def _check_indices(indices, n: int) -> np.ndarray:
    indices = np.asarray(indices)
    if indices.ndim != 1 or indices.dtype.kind not in "iu" or indices.size == 0:
        raise InputError("indices must be a non-empty 1-D array of integers")
    if indices.min() < -n or indices.max() >= n:
        raise InputError(f"indices must lie in [0, {n - 1}]")
    return indices


class Perturbation:
    """The ``perturbation`` :func:`relu_core.protocol.evaluate_with_selection` and ``grid_search`` take: a run's
    model and images, called as ``perturbation(fitted detector, rows, epsilons)`` -> float64
    ``(len(epsilons), len(rows))`` uncertainty of the rows' inputs perturbed with each ε
    (:func:`perturbed_scores_grid`: one backward pass per call, one forward pass per ε).

    ``engine_kw`` go to the engine (device, batch_size, precision, progress, cancel). ``calls``,
    ``backward_images`` and ``forward_images`` count the work asked of it (cache hits included), ``seconds`` the
    time spent in it: what ε selection cost; ``backward_images_per_eps`` the backward passes a pass per ε > 0
    (:func:`perturbed_scores` once per value) would have needed for the same calls. Made by :func:`make_perturbation`, which refuses a run without its
    model and images.
    """

    def __init__(self, run: Run, **engine_kw) -> None:
        self.run = run
        self.engine_kw = engine_kw
        self.calls = 0
        self.backward_images = 0
        self.forward_images = 0
        self.backward_images_per_eps = 0
        self.seconds = 0.0

    def __call__(self, detector: Detector, rows: np.ndarray, epsilons) -> np.ndarray:
        import time

        started = time.perf_counter()
        epsilons = _check_epsilons(epsilons)
        rows = np.asarray(rows)
        scores = perturbed_scores_grid(
            self.run.model,
            self.run.images,
            detector,
            epsilons,
            indices=rows,
            mean=self.run.mean,
            std=self.run.std,
            **self.engine_kw,
        )
        self.calls += 1
        self.backward_images += rows.size if any(e > 0 for e in epsilons) else 0
        self.forward_images += rows.size * len(epsilons)
        self.backward_images_per_eps += rows.size * sum(e > 0 for e in epsilons)
        self.seconds += time.perf_counter() - started
        return scores


NO_MODEL = "input pre-processing needs the model and the images: uploaded logits cannot be perturbed"


def make_perturbation(run: Run, **engine_kw) -> Perturbation:
    """The :class:`Perturbation` of ``run`` for ε selection; InputError (one line) for a run of logits only
    (an upload, a stored logits file) or an ONNX run (no gradients)."""
    if run.model is None or run.images is None:
        raise InputError(f"ε selection: {NO_MODEL}")
    return Perturbation(run, **engine_kw)


def make_perturbed_scorer(run: Run, eps: float, **engine_kw) -> Callable[[Detector, np.ndarray], np.ndarray]:
    """The hook ``protocol.evaluate(perturbed_scorer=...)`` takes: ``(fitted detector, eval_idx) -> uncertainty``
    of the run's images ``eval_idx`` perturbed with step ``eps``. ``engine_kw`` go to :func:`perturbed_scores`
    (device, batch_size, precision, progress, cancel). Needs a run with its model and images (not an upload).
    """
    if run.model is None or run.images is None:
        raise InputError("input pre-processing needs the model and the images: uploaded logits cannot be perturbed")

    def scorer(detector: Detector, eval_idx: np.ndarray) -> np.ndarray:
        return perturbed_scores(
            run.model, run.images, detector, eps, mean=run.mean, std=run.std, indices=eval_idx, **engine_kw
        )

    return scorer
