"""Rel-U's scores at every λ of a grid at once, from one (temperature, fitting split)'s moments.

At a fixed temperature and split, the unnormalised D*(λ)_ij = max(0, λ A_ij − (1 − λ) B_ij) (A = E[p₋p₋ᵀ],
B = E[p₊p₊ᵀ], diagonal 0) is 0 until λ reaches B_ij / (A + B)_ij and grows with slope (A + B)_ij after. So a
sample's numerator s(λ) = Σ_ij p_i p_j D*(λ)_ij changes at grid value λ_k by Δλ · G(λ_{k−1}) (the entries
already on, G = Σ_on p_i p_j (A + B)_ij) plus what the entries that switch on at λ_k bring. Each entry is read
once per sample, in the group of the grid value where it switches on: one pass over the C² entries per sample,
like one dense score. Then every λ of the grid costs nothing: ``scores[k] = s(λ_k) / ‖D*(λ_k)‖_F``.

Which entries are on at each λ_k, their values there and the norms are those of the dense fit
(:meth:`detectors.Moments.unnormalised`), so the on-sets and the Hamming fallback are exactly the dense
path's; the sums add non-negative terms only (no cancellation), so the scores equal the dense
:func:`detectors.quadratic_score` to rounding."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse

from relu_core import detectors
from relu_core.errors import Cancelled, InputError
from relu_core.threads import map_row_blocks

#: The most scores a grid keeps (grid values x rows): 101 x 50,000 float64, about 40 MB.
GRID_MAX_VALUES = 101 * 50_000
#: Rows scored together (each block's transposed probabilities, C x CHUNK_ROWS float64).
CHUNK_ROWS = 512


@dataclass(frozen=True)
class LambdaGrid:
    """Rel-U's uncertainty at each ``lams[k]`` (increasing) on each scored row (``scores[k]``, K x N), and whether
    D* is the Hamming fallback there (``fallback[k]``)."""

    lams: np.ndarray
    scores: np.ndarray
    fallback: np.ndarray

    def scores_at(self, lam: float) -> np.ndarray | None:
        """The scores at ``lam`` when it is a grid value (exactly), else None."""
        hits = np.flatnonzero(self.lams == lam)
        return self.scores[hits[0]] if hits.size else None


def fits(n_rows: int, n_lams: int) -> bool:
    """Whether a grid of ``n_lams`` values over ``n_rows`` rows stays within :data:`GRID_MAX_VALUES`."""
    return n_rows * n_lams <= GRID_MAX_VALUES


def relu_grid_scores(
    moments: detectors.Moments,
    probs: np.ndarray,
    lams: np.ndarray,
    rows: np.ndarray | None = None,
    cancel: Callable[[], bool] | None = None,
) -> LambdaGrid:
    """Rel-U's uncertainty ``p^T D*(λ) p`` at every ``λ`` of ``lams`` (increasing, in [0, 1]) for the rows of
    ``probs`` (N x C softmax; only ``rows`` when given), D*(λ) fitted from ``moments`` (the fitting split's, at
    the softmax's temperature). ``cancel()`` is polled between row blocks (raises :class:`Cancelled`).

    Raises InputError for a grid that is not increasing in [0, 1] or larger than :data:`GRID_MAX_VALUES`."""
    lams = np.asarray(lams, dtype=np.float64)
    if lams.ndim != 1 or lams.size == 0 or np.any(np.diff(lams) <= 0) or lams[0] < 0 or lams[-1] > 1:
        raise InputError("the λ grid must be increasing values in [0, 1]")
    probs = np.asarray(probs, dtype=np.float64)
    n_rows = probs.shape[0] if rows is None else len(rows)
    if not fits(n_rows, lams.size):
        raise InputError(f"a λ grid of {lams.size} values over {n_rows} rows exceeds {GRID_MAX_VALUES} scores")
    hamming = _hamming_scores(probs, rows, n_rows)
    if moments.pos is None or moments.neg is None:
        return LambdaGrid(lams, np.tile(hamming, (lams.size, 1)), np.ones(lams.size, dtype=bool))
    first_on, value_at_on, norms = _switch_on(moments, lams)
    slope = moments.neg + moments.pos  # d D*(λ)_ij / dλ once on (the moments are symmetric)
    groups = _groups(first_on, slope, value_at_on, lams.size)
    gained, arriving = _per_group_sums(probs, rows, n_rows, groups, lams.size, cancel)
    numerators = np.empty_like(gained)
    numerators[0] = arriving[0]
    on_weight = gained[0]
    for k in range(1, lams.size):
        numerators[k] = numerators[k - 1] + (lams[k] - lams[k - 1]) * on_weight + arriving[k]
        on_weight = on_weight + gained[k]
    fallback = norms == 0.0
    scores = numerators / np.where(fallback, 1.0, norms)[:, None]
    scores[fallback] = hamming
    return LambdaGrid(lams, scores, fallback)


def _hamming_scores(probs: np.ndarray, rows: np.ndarray | None, n_rows: int) -> np.ndarray:
    """``p^T H p`` with H :func:`detectors.hamming_matrix` (the fallback's score), as ``Σ_c p_c Σ_{d≠c} p_d / ‖1 − I‖_F``
    with the sums over d ≠ c from both sides (no cancellation): the same operations on every row, so identical
    rows tie exactly."""
    scores = np.empty(n_rows)
    for start in range(0, n_rows, CHUNK_ROWS):
        block = probs[start : start + CHUNK_ROWS] if rows is None else probs[rows[start : start + CHUNK_ROWS]]
        others = np.zeros_like(block)
        np.cumsum(block[:, :-1], axis=1, out=others[:, 1:])
        others[:, :-1] += np.cumsum(block[:, :0:-1], axis=1)[:, ::-1]
        scores[start : start + block.shape[0]] = np.einsum("nc,nc->n", block, others)
    n_classes = probs.shape[1]
    return scores / math.sqrt(n_classes * (n_classes - 1))


def _switch_on(moments: detectors.Moments, lams: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(grid index where each entry of D* switches on, ``lams.size`` when never; its unnormalised value there;
    the Frobenius norm of the unnormalised D* at each grid value), all from the dense fit's formula. The dense
    value is non-decreasing in λ (every rounding step of λ A − (1 − λ) B is monotone), so an entry stays on."""
    n_classes = moments.n_classes
    first_on = np.full((n_classes, n_classes), lams.size, dtype=np.int32)
    value_at_on = np.zeros((n_classes, n_classes))
    norms = np.empty(lams.size)
    for k, lam in enumerate(lams):
        matrix = moments.unnormalised(float(lam))
        norms[k] = np.linalg.norm(matrix)
        arriving = (matrix > 0.0) & (first_on == lams.size)
        first_on[arriving] = k
        value_at_on[arriving] = matrix[arriving]
    return first_on, value_at_on, norms


def _groups(
    first_on: np.ndarray, slope: np.ndarray, value_at_on: np.ndarray, n_lams: int
) -> list[tuple[int, np.ndarray, scipy.sparse.csr_matrix]]:
    """Per grid index with entries switching on: (index, the classes i of its entries (i < j), a sparse matrix
    whose first ``len(classes)`` rows hold 2 × slope_ij and the next ones 2 × value_at_on_ij), the factor 2 for
    the symmetric entry j, i."""
    upper_i, upper_j = np.triu_indices(first_on.shape[0], 1)
    index = first_on[upper_i, upper_j]
    keep = index < n_lams
    upper_i, upper_j, index = upper_i[keep], upper_j[keep], index[keep]
    order = np.argsort(index, kind="stable")
    upper_i, upper_j, index = upper_i[order], upper_j[order], index[order]
    bounds = np.searchsorted(index, np.arange(n_lams + 1))
    groups = []
    for k in range(n_lams):
        i, j = upper_i[bounds[k] : bounds[k + 1]], upper_j[bounds[k] : bounds[k + 1]]
        if i.size == 0:
            continue
        classes, local = np.unique(i, return_inverse=True)
        data = np.concatenate([2.0 * slope[i, j], 2.0 * value_at_on[i, j]])
        matrix = scipy.sparse.csr_matrix(
            (data, (np.concatenate([local, local + classes.size]), np.concatenate([j, j]))),
            shape=(2 * classes.size, first_on.shape[0]),
        )
        groups.append((k, classes, matrix))
    return groups


def _per_group_sums(probs, rows, n_rows, groups, n_lams, cancel) -> tuple[np.ndarray, np.ndarray]:
    """(gained[k], arriving[k]): per row, Σ p_i p_j slope_ij and Σ p_i p_j value_at_on_ij over the entries that
    switch on at grid index k (K x N each)."""
    gained, arriving = np.zeros((n_lams, n_rows)), np.zeros((n_lams, n_rows))

    def block(start: int, stop: int) -> None:
        for chunk in range(start, stop, CHUNK_ROWS):
            if cancel is not None and cancel():
                raise Cancelled
            end = min(chunk + CHUNK_ROWS, stop)
            transposed = np.ascontiguousarray((probs[chunk:end] if rows is None else probs[rows[chunk:end]]).T)
            for k, classes, matrix in groups:
                products = matrix @ transposed
                on_rows = transposed[classes]
                gained[k, chunk:end] = np.einsum("rn,rn->n", on_rows, products[: classes.size])
                arriving[k, chunk:end] = np.einsum("rn,rn->n", on_rows, products[classes.size :])

    n_classes = probs.shape[1]
    map_row_blocks(block, n_rows, 2.0 * n_rows * n_classes * n_classes)
    return gained, arriving
