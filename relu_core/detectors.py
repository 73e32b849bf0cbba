"""Misclassification detectors: Rel-U (Dadalto et al., ICLR 2024) and the usual softmax baselines.

Every detector maps logits to an *uncertainty* per sample: higher means "more likely misclassified";
a sample is correctly classified when its top-1 prediction equals its label, and those samples are the
positives of every metric (:mod:`relu_core.metrics`). A detector is configured with its hyperparameters,
``fit(logits, labels)`` on a tuning split (a no-op for the training-free baselines), then
``score(logits)`` on a disjoint evaluation split (:mod:`relu_core.protocol` makes both). Callers that already
hold ``softmax(logits / T)`` use ``fit_probs(probs, correct)`` / ``score_probs(probs)`` instead, so one
softmax per temperature serves every detector (and every lambda) that shares it.

Array conventions: numpy (or array-like) input gives float64 numpy output; a torch tensor input stays
on its device and keeps its dtype, and the score is differentiable with respect to the input (the
input pre-processing of the engine back-propagates through ``detector.score(model(x))``). Nothing
builds an N x C x C or an N x N tensor: second moments are ``P^T P / N`` and the Rel-U score is the
row-wise ``((P @ D) * P).sum(1)``.

Every detector class declares what it is and what it supports (``key``, ``name``, ``requires_fit``,
``temperature_applies``, ``perturbation``, ``grids``, ``accepts_probs``, ``needs_model``, ``protocol``);
:func:`register_detector` adds it to :data:`REGISTRY`, the one list of detectors every other module
(protocol, CLI, studies, pages) reads, and :func:`make_detector` builds one by key.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar

import numpy as np
import torch
from scipy.linalg import blas

from relu_core.errors import InputError
from relu_core.threads import estimated_flops, limited, map_row_blocks, small_work

Array = np.ndarray | torch.Tensor

#: The temperature grid of the paper's hyperparameter search, declared by every detector with a temperature
#: (the authors' code searches 0.5, 0.8, 0.9, 1, 1.1, ..., 1.5, 2 for its own runs; pass ``temperatures=``
#: to :func:`relu_core.protocol.grid_search` to use that one).
TEMPERATURE_GRID: tuple[float, ...] = (0.5, 1.0, 1.1, 1.2, 1.5, 2.0, 5.0, 10.0, 100.0, 1000.0)
#: The paper's lam grid for Rel-U. lam = 0 is left out on purpose: D* is then empty, Rel-U falls back to
#: the Hamming matrix and ranks exactly like Doctor, so a search that may pick it can return Doctor under
#: Rel-U's name (and, in oracle mode, Rel-U could never lose to Doctor). Pass ``lambdas=`` to search it.
LAMBDA_GRID: tuple[float, ...] = (0.4, 0.5, 0.6, 0.8, 1.0)


# --------------------------------------------------------------------------- validation


def check_temperature(temperature: float) -> float:
    """``temperature`` as a float.

    Raises
    ------
    InputError
        Unless it is a positive finite number.
    """
    try:
        value = float(temperature)
    except (TypeError, ValueError):
        raise InputError(f"temperature must be a positive number, got {temperature!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"temperature must be a positive finite number, got {temperature!r}")
    return value


def check_lambda(lam: float | str) -> float | str:
    """``"auto"`` or ``lam`` as a float in [0, 1].

    Raises
    ------
    InputError
        For any other value.
    """
    if isinstance(lam, str):
        if lam != "auto":
            raise InputError(f'lambda must be a number in [0, 1] or "auto", got {lam!r}')
        return lam
    try:
        value = float(lam)
    except (TypeError, ValueError):
        raise InputError(f'lambda must be a number in [0, 1] or "auto", got {lam!r}') from None
    if not 0.0 <= value <= 1.0:
        raise InputError(f"lambda must lie in [0, 1], got {lam!r}")
    return value


def _as_float_array(logits: Array) -> Array:
    """Logits as a float64 numpy array, or the tensor itself (integer tensors become float32)."""
    if isinstance(logits, torch.Tensor):
        return logits if logits.is_floating_point() else logits.to(torch.get_default_dtype())
    return np.asarray(logits, dtype=np.float64)


def validate_logits(logits: Array) -> None:
    """Check a logits array (numpy, array-like or torch).

    Raises
    ------
    InputError
        Unless ``logits`` is a finite real (N, C) array with N >= 1 and C >= 2.
    """
    if isinstance(logits, torch.Tensor):
        shape, dtype_ok = tuple(logits.shape), not logits.is_complex() and logits.dtype != torch.bool
    else:
        array = np.asarray(logits)
        shape, dtype_ok = array.shape, array.dtype.kind in "iuf"
    if not dtype_ok:
        raise InputError("logits must be real numbers")
    if len(shape) != 2:
        raise InputError(f"logits must be a 2-D array (samples x classes), got shape {shape}")
    if shape[0] < 1:
        raise InputError("logits are empty: at least one sample is needed")
    if shape[1] < 2:
        raise InputError(f"logits need at least 2 classes (columns), got {shape[1]}")
    if isinstance(logits, torch.Tensor):
        finite = bool(torch.isfinite(logits.detach()).all())
    else:
        finite = bool(np.isfinite(array).all())
    if not finite:
        raise InputError("logits contain NaN or infinite values")


def validate_labels(labels: Array, n_samples: int, n_classes: int) -> None:
    """Check labels against the logits' shape.

    Raises
    ------
    InputError
        Unless ``labels`` is a 1-D integer array of ``n_samples`` values in [0, ``n_classes``).
    """
    if isinstance(labels, torch.Tensor):
        labels = labels.detach().cpu().numpy()
    array = np.asarray(labels)
    if array.ndim != 1:
        raise InputError(f"labels must be a 1-D array, got shape {array.shape}")
    if array.dtype.kind not in "iu":
        raise InputError(f"labels must be integers (class indices), got dtype {array.dtype}")
    if array.shape[0] != n_samples:
        raise InputError(f"labels and logits disagree on the number of samples: {array.shape[0]} vs {n_samples}")
    if n_samples < 1:
        raise InputError("labels are empty: at least one sample is needed")
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= n_classes:
        bad = low if low < 0 else high
        raise InputError(f"label {bad} is out of range: labels must lie in [0, {n_classes - 1}]")


def _correct_mask(logits: Array, labels: Array) -> Array:
    """Whether the top-1 prediction equals the label (bool, same library/device as the logits)."""
    if isinstance(logits, torch.Tensor):
        labels = torch.as_tensor(labels, device=logits.device)
        return logits.detach().argmax(dim=1) == labels
    return np.asarray(logits).argmax(axis=1) == np.asarray(labels)


# --------------------------------------------------------------------------- pure functions


@small_work
def softmax(logits: Array, temperature: float = 1.0) -> Array:
    """``softmax(logits / temperature)`` over the last axis, max-shifted so large logits cannot overflow.

    Parameters
    ----------
    logits : array-like or torch.Tensor, shape (..., C)
    temperature : float, default 1.0

    Returns
    -------
    ndarray or torch.Tensor
        numpy (or array-like) in -> float64 numpy out; torch in -> torch on the same device (differentiable).

    Raises
    ------
    InputError
        For a bad temperature, or where ``logits / T`` is not finite (NaN logits, T too small).

    Examples
    --------
    >>> import relu_core as rc
    >>> rc.softmax([[0.0, 0.0], [2.0, 0.0]]).round(3)
    array([[0.5  , 0.5  ],
           [0.881, 0.119]])
    >>> rc.softmax([[2.0, 0.0]], temperature=1000.0).round(3)
    array([[0.5, 0.5]])
    """
    if isinstance(logits, torch.Tensor):
        scaled, _ = _scaled_logits(logits, temperature)
        return torch.softmax(scaled, dim=-1)
    temperature = check_temperature(temperature)
    logits = np.asarray(logits)
    probs = np.empty(logits.shape, dtype=np.float64)

    def block_softmax(start: int, stop: int) -> None:
        # float64 throughout, in place, through torch: its vectorised exp is ~3x numpy's on CPUs without AVX-512
        block = probs[start:stop]
        block[...] = logits[start:stop]
        rows = torch.from_numpy(block)
        peak = rows.amax(dim=-1, keepdim=True)
        _check_scaled_peak(peak / temperature, temperature)
        rows.sub_(peak).div_(temperature).exp_()
        rows.div_(rows.sum(dim=-1, keepdim=True))

    if logits.ndim == 2:
        map_row_blocks(block_softmax, logits.shape[0], estimated_flops(logits))
    else:
        block_softmax(0, logits.shape[0])
    return probs


def _scaled_logits(logits: Array, temperature: float) -> tuple[Array, Array]:
    """``(logits / T, its row maxima)``; :class:`InputError` where a row maximum is not finite
    (:func:`_check_scaled_peak`). numpy in -> a fresh float64 array (the input is never modified); torch in ->
    a tensor on the same device (differentiable)."""
    temperature = check_temperature(temperature)
    if isinstance(logits, torch.Tensor):
        scaled = _as_float_array(logits) / temperature
        peak = scaled.amax(dim=-1, keepdim=True)
    else:
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.divide(np.asarray(logits), temperature, dtype=np.float64)
        peak = scaled.max(axis=-1, keepdims=True)
    _check_scaled_peak(peak, temperature)
    return scaled, peak


def _check_scaled_peak(peak: Array, temperature: float) -> None:
    """:class:`InputError` unless every row maximum of ``logits / T`` is finite: otherwise the logits hold NaN or
    infinite values, or T is so small that ``logits / T`` overflows (the softmax and the energy would silently
    turn it into NaN)."""
    if isinstance(peak, torch.Tensor):
        if torch.compiler.is_exporting():  # a graph being captured (torch.export) cannot branch on values: as
            return  # in a trace, non-finite logits then give a NaN uncertainty, which no threshold accepts
        finite = bool(torch.isfinite(peak.detach()).all())
    else:
        finite = bool(np.isfinite(peak).all())
    if not finite:
        raise InputError(
            f"logits / T is not finite at temperature T={temperature:g}: the logits contain NaN or infinite "
            "values, or T is too small for their scale"
        )


def _as_probs(probs: Array) -> Array:
    """The tensor itself, or a float64 numpy array, so every score comes out in the documented type."""
    return probs if isinstance(probs, torch.Tensor) else np.asarray(probs, dtype=np.float64)


def gini(probs: Array) -> Array:
    """Gini impurity ``1 - sum_c p_c^2`` per row (Doctor's score; the Rel-U score with the Hamming matrix)."""
    probs = _as_probs(probs)
    if isinstance(probs, torch.Tensor):
        return 1.0 - (probs * probs).sum(-1)
    return 1.0 - np.einsum("...c,...c->...", probs, probs)  # no N x C temporary


def resolve_lambda(lam: float | str, n_correct: int, n_errors: int) -> float:
    """The lambda Rel-U uses.

    Parameters
    ----------
    lam : float or "auto"
    n_correct, n_errors : int
        Correct (N+) and misclassified (N-) samples of the fitting split.

    Returns
    -------
    float
        ``lam`` itself in [0, 1], or ``N+ / (N+ + N-)`` for ``"auto"`` (the paper's choice).

    Raises
    ------
    InputError
        For a bad ``lam``, or ``"auto"`` without fitting samples.
    """
    return _resolved_lambda(check_lambda(lam), n_correct, n_errors)


def _resolved_lambda(lam: float | str, n_correct: int, n_errors: int) -> float:
    """:func:`resolve_lambda` of a ``lam`` already checked (:func:`check_lambda`)."""
    if lam != "auto":
        return lam
    total = n_correct + n_errors
    if total == 0:
        raise InputError('lambda="auto" needs at least one fitting sample')
    return n_correct / total


def hamming_matrix(n_classes: int) -> np.ndarray:
    """Ones off the diagonal, zeros on it, divided by its Frobenius norm ``sqrt(C (C - 1))``.

    It is Rel-U's fallback: its score is the Gini index divided by a constant, so it ranks samples
    exactly like Doctor. Normalising it keeps the invariant ``||matrix_||_F = 1`` for every fit.
    """
    matrix = 1.0 - np.eye(n_classes)
    return matrix / math.sqrt(n_classes * (n_classes - 1))


def is_fallback(matrix: np.ndarray) -> bool:
    """Whether a D* is the :func:`hamming_matrix` fallback (then Rel-U ranks exactly like Doctor): a zero diagonal
    and every other entry equal to the Hamming matrix's (compared in place, without building it)."""
    n_classes = matrix.shape[0]
    if n_classes < 2:
        return bool(np.array_equal(matrix, hamming_matrix(n_classes)))
    off_diagonal = 1.0 / math.sqrt(n_classes * (n_classes - 1))  # the value hamming_matrix divides into each 1
    return bool(
        not np.diagonal(matrix).any() and np.count_nonzero(matrix == off_diagonal) == n_classes * (n_classes - 1)
    )


def _second_moment(probs: Array, rows: Array) -> np.ndarray:
    """``mean_n p_n p_n^T`` over ``rows`` of ``probs`` as ``P^T P / N`` (float64 numpy; a tensor is reduced on its
    own device). Exactly symmetric. numpy: gathered block by block, each block's product by BLAS ``syrk`` (the
    upper triangle only: half the multiply-adds of ``P^T P``), mirrored once at the end."""
    if isinstance(probs, torch.Tensor):
        block = probs[rows]
        moment = block.T @ block / block.shape[0]
        return ((moment + moment.T) / 2.0).cpu().numpy()

    def upper(start: int, stop: int) -> np.ndarray:
        # the gathered block's transpose is Fortran-ordered: syrk reads it without a copy
        return blas.dsyrk(1.0, probs[rows[start:stop]].T, trans=0, lower=0)

    parts = map_row_blocks(upper, rows.shape[0], _rows_work(probs, rows))
    total = sum(parts[1:], parts[0])
    return (total + np.triu(total, 1).T) / rows.shape[0]


def relu_matrix(probs: Array, correct: Array, lam: float | str = 0.5) -> np.ndarray:
    """Rel-U's closed-form relative-uncertainty matrix ``D*``.

    ``D* = ReLU(lam * P-^T P- / N-  -  (1 - lam) * P+^T P+ / N+)`` with its diagonal set to zero,
    divided by its Frobenius norm, where ``P+`` / ``P-`` are the rows of ``probs`` of correctly / wrongly
    classified fitting samples.

    Parameters
    ----------
    probs : array-like or torch.Tensor, shape (N, C)
        Soft predictions of the fitting (tuning) split at the detector's temperature.
    correct : array-like of bool, shape (N,)
    lam : float or "auto", default 0.5
        ``"auto"`` uses ``N+ / (N+ + N-)``.

    Returns
    -------
    ndarray, shape (C, C), float64
        Unit Frobenius norm. The :func:`hamming_matrix` fallback (the Gini / Doctor ranking) when one side
        is empty (no errors, or no correct samples) or every entry is zero (e.g. ``lam = 0``). Torch input
        is reduced on its device (no gradient).

    Raises
    ------
    InputError
        For a bad ``lam``.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> probs = np.array([[0.9, 0.1, 0.0], [0.8, 0.2, 0.0], [0.5, 0.5, 0.0], [0.1, 0.5, 0.4]])
    >>> correct = np.array([True, True, False, False])
    >>> matrix = rc.relu_matrix(probs, correct, lam=0.5)
    >>> matrix.round(3)
    array([[0.   , 0.168, 0.135],
           [0.168, 0.   , 0.673],
           [0.135, 0.673, 0.   ]])
    >>> round(float(np.linalg.norm(matrix)), 6), bool((np.diag(matrix) == 0).all())
    (1.0, True)
    """
    return _relu_matrix(probs, correct, check_lambda(lam))


def _relu_matrix(probs: Array, correct: Array, lam: float | str) -> np.ndarray:
    """:func:`relu_matrix` with a ``lam`` already checked (:func:`check_lambda`)."""
    moments = second_moments(probs, correct)
    return moments.matrix(_resolved_lambda(lam, moments.n_correct, moments.n_errors))


@dataclass(frozen=True)
class Moments:
    """What Rel-U's fit reads of a fitting split at one temperature: ``E[p+ p+^T]`` (``pos``) and ``E[p- p-^T]``
    (``neg``) over its correct and wrong rows (C x C float64; None when that side is empty) and the counts.
    Every D* of that temperature and split comes from them (:meth:`matrix`), so a λ move reuses them. Made by
    :func:`second_moments`, exactly symmetric, so that a D* needs no averaging with its transpose (the slow part of
    a λ move at 1000 classes); their D* is then bit for bit :func:`relu_matrix_from_moments`'."""

    n_classes: int
    n_correct: int
    n_errors: int
    pos: np.ndarray | None
    neg: np.ndarray | None

    def unnormalised(self, lam: float) -> np.ndarray | None:
        """:func:`unnormalised_relu_matrix` of these moments at ``lam`` (None when a side is empty)."""
        if self.pos is None or self.neg is None:
            return None
        return _clipped_off_diagonal(lam * self.neg - (1.0 - lam) * self.pos)  # symmetric: no averaging

    def matrix(self, lam: float) -> np.ndarray:
        """D* at a numeric ``lam``; the Hamming fallback when a side is empty."""
        unnormalised = self.unnormalised(lam)
        return hamming_matrix(self.n_classes) if unnormalised is None else _normalised(unnormalised)


def _rows_work(probs: Array, rows: Array | None) -> float:
    """The multiply-adds of a pass over ``rows`` of ``probs`` (all of them when None): rows x C², the size the
    thread policy goes by (:func:`relu_core.threads.limited`), whatever the size of ``probs``; 0 for a symbolic
    batch size (torch.export capturing a graph: a float would pin it to the example's)."""
    n_rows, n_classes = np.shape(probs)[0] if rows is None else len(rows), np.shape(probs)[1]
    if not isinstance(n_rows, int):
        return 0.0
    return float(n_rows) * float(n_classes) ** 2


def second_moments(probs: Array, correct: Array, rows: np.ndarray | None = None) -> Moments:
    """The :class:`Moments` of ``probs`` (N, C: a fitting split's softmax) split by ``correct`` (N bool); with
    ``rows``, of those rows of ``probs`` only (``correct`` then has one value per row of ``rows``), gathered block
    by block rather than copied out first (the tuning split of a large run). Torch input is reduced on its device
    (no gradient)."""
    with limited(_rows_work(probs, rows)):
        return _second_moments(probs, correct, rows)


def _second_moments(probs: Array, correct: Array, rows: np.ndarray | None) -> Moments:
    if isinstance(probs, torch.Tensor):
        probs = probs.detach().to(torch.float64)
        correct = torch.as_tensor(correct, device=probs.device).to(torch.bool)
        rows = torch.arange(probs.shape[0], device=probs.device) if rows is None else torch.as_tensor(rows)
        rows = rows.to(probs.device)
    else:
        probs = np.asarray(probs, dtype=np.float64)
        if isinstance(correct, torch.Tensor):
            correct = correct.detach().cpu().numpy()
        correct = np.asarray(correct, dtype=bool)
        rows = np.arange(probs.shape[0]) if rows is None else np.asarray(rows)
    if correct.shape[0] != rows.shape[0]:
        raise InputError(f"correct has {correct.shape[0]} values for {rows.shape[0]} rows")
    positives, negatives = rows[correct], rows[~correct]
    n_pos, n_neg = positives.shape[0], negatives.shape[0]
    both = n_pos > 0 and n_neg > 0
    return Moments(
        probs.shape[1],
        n_pos,
        n_neg,
        _second_moment(probs, positives) if both else None,
        _second_moment(probs, negatives) if both else None,
    )


def relu_matrix_from_moments(moment_pos: np.ndarray, moment_neg: np.ndarray, lam: float) -> np.ndarray:
    """``D*`` from the second moments ``E[p+ p+^T]`` and ``E[p- p-^T]`` (C x C each) and a numeric ``lam``.

    The closed form behind :func:`relu_matrix`, exposed so a grid search can compute the moments once
    per (temperature, fold) and combine them for every lambda. Hamming fallback when all entries are zero.
    """
    return _normalised(unnormalised_relu_matrix(moment_pos, moment_neg, lam))


def _normalised(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` divided by its Frobenius norm; the Hamming fallback when every entry is zero."""
    norm = np.linalg.norm(matrix)
    if norm == 0.0:
        return hamming_matrix(matrix.shape[0])
    return matrix / norm


def unnormalised_relu_matrix(moment_pos: np.ndarray, moment_neg: np.ndarray, lam: float) -> np.ndarray:
    """``ReLU(lam E[p- p-^T] - (1 - lam) E[p+ p+^T])``, symmetrised, zero diagonal: :func:`relu_matrix_from_moments`
    before its Frobenius normalisation (which entries are on at ``lam``, and its norm, for the λ grid)."""
    matrix = lam * np.asarray(moment_neg, dtype=np.float64) - (1.0 - lam) * np.asarray(moment_pos, dtype=np.float64)
    # P^T P is symmetric in exact arithmetic; averaging with the transpose removes any rounding asymmetry.
    return _clipped_off_diagonal((matrix + matrix.T) / 2.0)


def _clipped_off_diagonal(matrix: np.ndarray) -> np.ndarray:
    """``matrix`` (a fresh array) with its negative entries and its diagonal set to zero, in place."""
    np.maximum(matrix, 0.0, out=matrix)
    np.fill_diagonal(matrix, 0.0)
    return matrix


def weighted_relu_matrices(probs: np.ndarray, correct: np.ndarray, weights: np.ndarray, lam: float | str) -> np.ndarray:
    """D* fitted once per row of ``weights``: :func:`relu_matrix` of the fitting rows ``probs`` (N, C) and ``correct``
    (N,) with row n counted ``weights[r, n]`` times (R x N non-negative: a bootstrap resample's draw counts), all R
    fits in one batched product (R x N x C² multiply-adds, no loop over R). ``lam="auto"`` resolves per fit from its
    weighted counts; a fit with no weight on one side, or whose matrix is all zero, is the Hamming fallback, as
    :func:`relu_matrix` does. Returns (R, C, C) float64, each of unit Frobenius norm."""
    lam = check_lambda(lam)
    probs = np.asarray(probs, dtype=np.float64)
    correct = np.asarray(correct, dtype=bool)
    weights = np.asarray(weights, dtype=np.float64)
    n_classes = probs.shape[1]
    if weights.ndim != 2 or weights.shape[1] != probs.shape[0] or correct.shape != (probs.shape[0],):
        raise InputError(f"weights must be (fits, {probs.shape[0]}) and correct ({probs.shape[0]},)")
    with limited(float(weights.shape[0]) * probs.shape[0] * n_classes**2):
        side = {}
        for name, rows in (("pos", correct), ("neg", ~correct)):
            w = weights[:, rows]
            total = w.sum(axis=1)
            moment = np.matmul((w[:, :, None] * probs[rows][None]).transpose(0, 2, 1), probs[rows])
            side[name] = (moment / np.where(total > 0, total, 1.0)[:, None, None], total)
    (pos, n_pos), (neg, n_neg) = side["pos"], side["neg"]
    if lam == "auto":
        lams = (n_pos / np.maximum(n_pos + n_neg, np.finfo(float).tiny))[:, None, None]
    else:
        lams = float(lam)
    matrices = lams * neg - (1.0 - lams) * pos
    matrices = (matrices + matrices.transpose(0, 2, 1)) / 2.0
    np.maximum(matrices, 0.0, out=matrices)
    matrices[:, np.arange(n_classes), np.arange(n_classes)] = 0.0
    norms = np.linalg.norm(matrices, axis=(1, 2))
    fallback = (norms == 0.0) | (n_pos == 0) | (n_neg == 0)
    matrices /= np.where(fallback, 1.0, norms)[:, None, None]
    matrices[fallback] = hamming_matrix(n_classes)
    return matrices


def quadratic_scores(probs: np.ndarray, matrices: np.ndarray) -> np.ndarray:
    """``p^T D_r p`` of every row of ``probs`` (N, C) for each matrix of ``matrices`` (R, C, C): (R, N) float64, in
    one batched product (the scores of :func:`weighted_relu_matrices`' fits)."""
    probs = np.asarray(probs, dtype=np.float64)
    matrices = np.asarray(matrices, dtype=np.float64)
    with limited(float(matrices.shape[0]) * probs.shape[0] * probs.shape[1] ** 2):
        return np.einsum("rnc,nc->rn", np.matmul(probs[None], matrices), probs)


def quadratic_score(probs: Array, matrix: Array, rows: np.ndarray | None = None) -> Array:
    """``p^T D p`` per row, i.e. ``((P @ D) * P).sum(1)`` (never the N x N ``P D P^T``).

    Parameters
    ----------
    probs : array-like or torch.Tensor, shape (N, C)
    matrix : array-like, shape (C, C)
    rows : int array, optional
        Score only these rows of ``probs`` (one value per index, in their order), gathered block by block
        rather than copied out first (an evaluation split of a large run).

    Returns
    -------
    ndarray or torch.Tensor, shape (N,) or (len(rows),)
        Torch input: exactly that expression (on the tensor's device, differentiable). numpy input: the
        same value through a triangular BLAS product that halves the work (float64).
    """
    probs = _as_probs(probs)
    with limited(_rows_work(probs, rows)):
        return _quadratic_score(probs, matrix, rows)


def _quadratic_score(probs: Array, matrix: Array, rows: np.ndarray | None) -> Array:
    if isinstance(probs, torch.Tensor):
        if rows is not None:
            probs = probs[torch.as_tensor(rows, device=probs.device)]
        matrix = torch.as_tensor(matrix, dtype=probs.dtype, device=probs.device)
        return ((probs @ matrix) * probs).sum(1)
    # p^T D p only sees the symmetric part S of D, and p^T S p = 2 p^T L p with L = tril(S, -1) + diag(S) / 2.
    # BLAS trmm multiplies by the triangular L with half the multiply-adds of P @ D (the hot spot for
    # large C). P.T is P's own memory in Fortran order, so trmm computes (P L)^T = L^T P^T without a transpose.
    matrix = np.asarray(matrix, dtype=np.float64)
    symmetric = (matrix + matrix.T) / 2.0
    lower = np.tril(symmetric, -1) + np.diag(np.diag(symmetric) / 2.0)

    n_rows = probs.shape[0] if rows is None else len(rows)

    def block_scores(start: int, stop: int) -> np.ndarray:
        block = probs[start:stop] if rows is None else probs[rows[start:stop]]
        product = blas.dtrmm(1.0, lower, block.T, side=0, lower=1, trans_a=1).T
        return 2.0 * np.einsum("nc,nc->n", product, block)

    return np.concatenate(map_row_blocks(block_scores, n_rows, _rows_work(probs, rows)))


def _max_prob_uncertainty(probs: Array) -> Array:
    probs = _as_probs(probs)
    if isinstance(probs, torch.Tensor):
        return -probs.max(dim=1).values
    return -probs.max(axis=1)


def _entropy(probs: Array) -> Array:
    # Clamping inside the log keeps 0 * log 0 = 0 and finite gradients where a probability underflows.
    probs = _as_probs(probs)
    if isinstance(probs, torch.Tensor):
        return -(probs * torch.log(probs.clamp_min(torch.finfo(probs.dtype).tiny))).sum(1)
    return -(probs * np.log(np.maximum(probs, np.finfo(np.float64).tiny))).sum(1)


# --------------------------------------------------------------------------- detector objects


class Detector:
    """Base class: ``fit`` then ``score``; subclasses define ``score_probs`` (and ``fit_probs`` if learned).

    ``temperature`` is the T of the softmax the detector reads; ``fit_probs``/``score_probs`` expect
    ``softmax(logits, temperature)`` from the caller. The class attributes below declare the detector
    (read from the class, without building one); :func:`register_detector` adds it to :data:`REGISTRY`.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> class Margin(rc.Detector):  # a training-free detector: one score of the probabilities
    ...     key, name = "margin", "Margin"
    ...
    ...     def score_probs(self, probs):
    ...         second, first = np.sort(probs, axis=1)[:, -2:].T
    ...         return second - first
    >>> Margin().score(np.array([[4.0, 0.0], [1.0, 1.0]])).round(3)
    array([-0.964,  0.   ])
    """

    #: Registry key (``"relu"``) and display label (``"Rel-U"``).
    key: ClassVar[str] = ""
    name: ClassVar[str] = ""
    #: True when ``fit`` learns from a tuning split; False for training-free detectors (``fit`` checks only).
    requires_fit: ClassVar[bool] = False
    #: True when the softmax temperature is a setting of the detector (False: defined at T = 1, like MSP).
    temperature_applies: ClassVar[bool] = True
    #: The temperature the detector uses unless told otherwise.
    default_temperature: ClassVar[float] = 1.0
    #: Input pre-processing score (:mod:`relu_core.preprocessing`): ``"uncertainty"`` (the step raises the
    #: uncertainty), ``"confidence"`` (it raises ``max softmax(z / T)``), or None where none is defined.
    perturbation: ClassVar[str | None] = None
    #: The hyperparameters a search selects, by constructor argument, with the paper's grids.
    grids: ClassVar[Mapping[str, tuple[float, ...]]] = MappingProxyType({})
    #: False where the score cannot be computed from probabilities alone (Energy needs the logits).
    accepts_probs: ClassVar[bool] = True
    #: True when it scores through the model (images in), not from a run's logits alone.
    needs_model: ClassVar[bool] = False
    #: True when :mod:`relu_core.protocol` (evaluate, selection, the CLI's ``evaluate``, Explore) can run it:
    #: logits in, fitted with ``fit_probs`` on the tuning part's softmax at its temperature when learned.
    protocol: ClassVar[bool] = True
    #: True when a fit can fall back to a fixed ranking (Rel-U's Hamming matrix ranks like Doctor);
    #: ``fallback_`` then says, once fitted, whether it did.
    can_fall_back: ClassVar[bool] = False
    fallback_: bool | None = False

    def __init__(self, temperature: float | None = None) -> None:
        self.temperature = check_temperature(self.default_temperature if temperature is None else temperature)

    def settings(self) -> dict[str, float | str]:
        """The hyperparameters in use, by name (fitted values where fitting resolves them)."""
        return {"temperature": self.temperature} if self.temperature_applies else {}

    def fitted_state(self) -> dict[str, object]:
        """What ``fit`` learned that changes the scores (empty for training-free detectors); cache keys use it."""
        return {}

    @small_work
    def fit(self, logits: Array, labels: Array) -> Detector:
        """Fit on a tuning split (never on the split it is evaluated on).

        Parameters
        ----------
        logits : array-like or torch.Tensor, shape (N, C)
        labels : array-like of int, shape (N,)
            Correctness is ``argmax(logits) == labels``.

        Returns
        -------
        Detector
            ``self``.

        Raises
        ------
        InputError
            For bad logits or labels (also for training-free detectors, which learn nothing).
        """
        validate_logits(logits)
        logits = _as_float_array(logits)
        validate_labels(labels, logits.shape[0], logits.shape[1])
        if self.requires_fit:
            self.fit_probs(softmax(logits, self.temperature), _correct_mask(logits, labels))
        return self

    def fit_probs(self, probs: Array, correct: Array) -> Detector:
        """Fit from ``softmax(logits, self.temperature)`` and the boolean correctness. No-op by default."""
        return self

    @small_work
    def score(self, logits: Array) -> Array:
        """Uncertainty per sample (higher = more likely misclassified), on an evaluation split.

        Parameters
        ----------
        logits : array-like or torch.Tensor, shape (N, C)

        Returns
        -------
        ndarray or torch.Tensor, shape (N,)
            float64 numpy for numpy input; a tensor on the input's device (differentiable) for torch input.

        Raises
        ------
        InputError
            For bad logits, or a learned detector that is not fitted.
        """
        validate_logits(logits)
        return self.score_probs(softmax(logits, self.temperature))

    def score_probs(self, probs: Array) -> Array:
        """Uncertainty per sample from ``softmax(logits, self.temperature)``.

        A score that is a plain function of the probabilities is bound directly (``staticmethod(gini)``).
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(temperature={self.temperature:g})"


class RelU(Detector):
    """Rel-U: uncertainty ``p^T D* p`` with the data-driven matrix ``D*`` of :func:`relu_matrix`.

    Fit on the tuning split only; ``matrix_`` (C x C numpy, unit Frobenius norm), ``lam_`` (the
    lambda actually used, resolved from ``"auto"``) and ``fallback_`` (True when ``matrix_`` is the
    Hamming fallback, so the scores rank exactly like Doctor's) are set by ``fit``/``fit_probs``.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rng = np.random.default_rng(0)
    >>> labels = rng.integers(0, 3, 300)
    >>> logits = rng.normal(size=(300, 3)) + 2.0 * np.eye(3)[labels]
    >>> relu = rc.RelU(lam=0.5).fit(logits[:150], labels[:150])  # D* from the tuning split only
    >>> relu.matrix_.shape, relu.fallback_
    ((3, 3), False)
    >>> uncertainty = relu.score(logits[150:])  # scored on the evaluation split
    >>> correct = logits[150:].argmax(1) == labels[150:]
    >>> uncertainty.shape, rc.auroc(uncertainty, correct) > 0.5
    ((150,), True)
    """

    key = "relu"
    name = "Rel-U"
    requires_fit = True
    perturbation = "uncertainty"
    grids = MappingProxyType({"temperature": TEMPERATURE_GRID, "lam": LAMBDA_GRID})
    can_fall_back = True

    def __init__(self, lam: float | str = 0.5, temperature: float = 1.0) -> None:
        super().__init__(temperature)
        self.lam = check_lambda(lam)  # "auto" is resolved at fit time
        self.matrix_: np.ndarray | None = None
        self.lam_: float | None = None
        self.fallback_: bool | None = None

    def fit_probs(self, probs: Array, correct: Array) -> RelU:
        if isinstance(correct, torch.Tensor):
            correct = correct.detach().cpu().numpy()
        correct = np.asarray(correct, dtype=bool)
        if correct.ndim != 1 or correct.shape[0] != probs.shape[0]:
            raise InputError(f"correct must be a 1-D mask with one value per row of probs ({probs.shape[0]})")
        if probs.shape[0] < 1:
            raise InputError("Rel-U needs at least one fitting sample")
        return self.fit_moments(second_moments(probs, correct))

    def fit_moments(self, moments: Moments) -> RelU:
        """The fit of :meth:`fit_probs` from the fitting split's :func:`second_moments` (what a caller that keeps
        them per temperature and split does on a λ move)."""
        # ``lam`` was checked when the detector was made: the fit resolves "auto" and checks nothing again
        self.lam_ = _resolved_lambda(self.lam, moments.n_correct, moments.n_errors)
        self.matrix_ = moments.matrix(self.lam_)
        self.fallback_ = is_fallback(self.matrix_)
        return self

    def score_probs(self, probs: Array) -> Array:
        if self.matrix_ is None:
            raise InputError("Rel-U is not fitted yet: call fit(logits, labels) on a tuning split first")
        if probs.shape[-1] != self.matrix_.shape[0]:
            raise InputError(f"Rel-U was fitted on {self.matrix_.shape[0]} classes but got {probs.shape[-1]} columns")
        return quadratic_score(probs, self.matrix_)

    def settings(self) -> dict[str, float | str]:
        """``temperature`` and ``lam`` (the lam actually used once fitted: ``"auto"`` resolved)."""
        return {"temperature": self.temperature, "lam": self.lam if self.lam_ is None else self.lam_}

    def fitted_state(self) -> dict[str, object]:
        return {} if self.matrix_ is None else {"lam": self.lam_, "matrix": self.matrix_}

    def __repr__(self) -> str:
        return f"RelU(lam={self.lam!r}, temperature={self.temperature:g})"


class Doctor(Detector):
    """Doctor (Granese et al., 2021): the Gini impurity ``1 - sum p^2`` of ``softmax(z / T)``.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> logits = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    >>> rc.Doctor().fit(logits, [0, 1]).score(logits).round(3)  # fit learns nothing: it checks the input
    array([0.069, 0.619])
    """

    key = "doctor"
    name = "Doctor"
    perturbation = "uncertainty"
    grids = MappingProxyType({"temperature": TEMPERATURE_GRID})

    score_probs = staticmethod(gini)


class MSP(Detector):
    """Maximum softmax probability (Hendrycks & Gimpel, 2017): ``-max p`` at T = 1.

    The classifier's own confidence, read as it comes out: no temperature, nothing learned.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rc.MSP().score(np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 0.0]])).round(3)
    array([-0.965, -0.422])
    """

    key = "msp"
    name = "MSP"
    temperature_applies = False
    perturbation = "confidence"

    def __init__(self) -> None:
        super().__init__(1.0)

    score_probs = staticmethod(_max_prob_uncertainty)

    def __repr__(self) -> str:
        return "MSP()"


class ODIN(Detector):
    """ODIN's temperature scaling (Liang et al., 2018): ``-max softmax(z / T)``, T = 1000 by default.

    Its input pre-processing lives in the engine (``relu_core.preprocessing``).

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rc.ODIN().score(np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 0.0]])).round(4)  # T = 1000
    array([-0.3342, -0.3334])
    """

    key = "odin"
    name = "ODIN"
    default_temperature = 1000.0
    perturbation = "confidence"
    grids = MappingProxyType({"temperature": TEMPERATURE_GRID})

    score_probs = staticmethod(_max_prob_uncertainty)


class Entropy(Detector):
    """Shannon entropy ``-sum p log p`` of ``softmax(z / T)`` (natural log).

    From 0 (a one-hot softmax) to ``log C`` (the uniform one); ``0 log 0`` counts as 0.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> rc.Entropy().score(np.array([[50.0, 0.0], [0.0, 0.0]])).round(4)  # 0 and log 2
    array([0.    , 0.6931])
    """

    key = "entropy"
    name = "Entropy"
    grids = MappingProxyType({"temperature": TEMPERATURE_GRID})

    score_probs = staticmethod(_entropy)


class Energy(Detector):
    """Energy score (Liu et al., 2020): ``-T logsumexp(z / T)``.

    It reads the logits themselves: the softmax discards the per-row shift the energy depends on,
    so ``score_probs`` raises and ``accepts_probs`` is False; callers holding probabilities call ``score``.

    Examples
    --------
    >>> import numpy as np
    >>> import relu_core as rc
    >>> z = np.array([[4.0, 0.0, 0.0], [1.0, 1.0, 0.0]])
    >>> rc.Energy().score(z).round(3)
    array([-4.036, -1.862])
    >>> (rc.Energy().score(z + 1.0) - rc.Energy().score(z)).round(3)  # a shift the softmax ignores moves it
    array([-1., -1.])
    """

    key = "energy"
    name = "Energy"
    accepts_probs = False
    grids = MappingProxyType({"temperature": TEMPERATURE_GRID})

    def score(self, logits: Array) -> Array:
        validate_logits(logits)
        scaled, peak = _scaled_logits(logits, self.temperature)
        if isinstance(scaled, torch.Tensor):
            return -self.temperature * torch.logsumexp(scaled, dim=1)
        scaled -= peak
        return -self.temperature * (peak[:, 0] + np.log(np.exp(scaled).sum(axis=1)))

    def score_probs(self, probs: Array) -> Array:
        raise InputError("the Energy score needs the logits, not probabilities: call score(logits)")


# --------------------------------------------------------------------------- registry

#: Every detector class by key, in registration order: the six above, then those other modules register
#: (``relu_core.baselines`` registers its own on import). :func:`register_detector` is the one way in.
REGISTRY: dict[str, type[Detector]] = {}


def register_detector(cls: type[Detector]) -> type[Detector]:
    """Add the detector class ``cls`` to :data:`REGISTRY` under ``cls.key`` (usable as a class decorator).

    Parameters
    ----------
    cls : type[Detector]
        A :class:`Detector` subclass declaring at least ``key`` and ``name``.

    Returns
    -------
    type[Detector]
        ``cls`` itself. Registering the same class again is a no-op.

    Raises
    ------
    ValueError
        When ``cls`` declares no key or name, or its key is already registered to another class
        (a programming error, not a user input error).
    """
    if not cls.key or not cls.name:
        raise ValueError(f"{cls.__name__} must declare a key and a name to be registered")
    if cls.key in REGISTRY and REGISTRY[cls.key] is not cls:
        raise ValueError(f"detector key {cls.key!r} is already registered")
    REGISTRY[cls.key] = cls
    return cls


def unregister_detector(key: str) -> None:
    """Remove ``key`` from :data:`REGISTRY` (for detectors registered temporarily, e.g. in tests)."""
    REGISTRY.pop(key, None)


for _cls in (MSP, ODIN, Doctor, RelU, Entropy, Energy):
    register_detector(_cls)


def protocol_keys() -> tuple[str, ...]:
    """Keys of the registered detectors :mod:`relu_core.protocol` can run, in registration order
    (``msp, odin, doctor, relu, entropy, energy``, then any registered later with ``protocol = True``)."""
    return tuple(key for key, cls in REGISTRY.items() if cls.protocol)


def label(key: str) -> str:
    """The display label of a registered detector key (``"relu"`` -> ``"Rel-U"``)."""
    return REGISTRY[detector_key(key)].name


def detector_key(name: str) -> str:
    """The registry key of a detector key or label.

    Parameters
    ----------
    name : str
        A key or a display label; case, spaces, ``-`` and ``_`` are ignored (``"Rel-U"``, ``" REL_U "``).

    Returns
    -------
    str
        The key in :data:`REGISTRY` (``"relu"``).

    Raises
    ------
    InputError
        For a name no registered detector answers to.
    """

    def fold(text: str) -> str:
        return str(text).strip().lower().replace("-", "").replace("_", "").replace(" ", "")

    wanted = fold(name)
    for key, cls in REGISTRY.items():
        if wanted in (fold(key), fold(cls.name)):
            return key
    raise InputError(f"unknown detector {name!r}: choose from {', '.join(REGISTRY)}")


def make_detector(key: str, temperature: float | None = None, lam: float | str = 0.5, **options) -> Detector:
    """A detector by key or label (see :func:`detector_key`), built from :data:`REGISTRY`.

    Parameters
    ----------
    key : str
        ``"relu"``, ``"Rel-U"``, ``"odin"`` ...
    temperature : float, optional
        Its softmax temperature; None keeps the detector's ``default_temperature`` (1, and 1000 for
        ODIN). Ignored where ``temperature_applies`` is False (MSP is defined at T = 1).
    lam : float or "auto", default 0.5
        Only passed to detectors whose ``grids`` hold ``"lam"`` (Rel-U).
    **options
        Other constructor arguments of the detector (e.g. ``seed`` for the MLP baseline).

    Returns
    -------
    Detector
        Unfitted.

    Raises
    ------
    InputError
        For an unknown key or a bad temperature or lam.

    Examples
    --------
    >>> import relu_core as rc
    >>> rc.make_detector("Rel-U", temperature=2.0, lam=0.6)
    RelU(lam=0.6, temperature=2)
    >>> rc.make_detector("odin")  # its own default temperature
    ODIN(temperature=1000)
    """
    cls = REGISTRY[detector_key(key)]
    kwargs = dict(options)
    if temperature is not None and cls.temperature_applies:
        kwargs["temperature"] = temperature
    if "lam" in cls.grids:
        kwargs["lam"] = lam
    return cls(**kwargs)
