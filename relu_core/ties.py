"""Exact ties between samples whose logits are identical.

Identical logits rows are exact ties of every detector, but a BLAS product (the CPU's or a GPU's) may round the
same row differently at different positions in a block (by ~1e-19) and so split the tie, which moves a metric
that counts ties as halves (AUROC by up to 1e-5 on tied data). :func:`twins` finds such rows once per set of
logits; :func:`tied_equal` gives them one score again. Explore's views (``explore.cached.duplicate_of``), the
protocol's evaluation and grid search, and the studies (``studies.base.Collector.tie_on``) go through here; scores of
ε-perturbed inputs do not (two images of identical clean logits need not score alike once each is perturbed).
"""

from __future__ import annotations

import numpy as np

#: :func:`twins` first compares rows on about this many of their columns, then only the rows that agree there on
#: all of theirs: sorting 50,000 whole rows of 1000 logits took 0.8 s, the probe 62 ms.
PROBE_COLUMNS = 16


def twins(logits: np.ndarray) -> np.ndarray | None:
    """Per row of ``logits`` (N, C), the first row that is the same bit for bit (itself when none is), or None
    when every row is distinct. Rows are compared as opaque bytes (no hash to collide): first on
    :data:`PROBE_COLUMNS` of their columns, then in full among those that agree there."""
    logits = np.ascontiguousarray(logits)
    n_samples, n_classes = logits.shape
    probe = logits[:, :: max(1, n_classes // PROBE_COLUMNS)]
    _, inverse, counts = np.unique(_byte_rows(probe), return_inverse=True, return_counts=True)
    candidates = np.flatnonzero(counts[inverse.ravel()] > 1)
    if candidates.size == 0:
        return None
    _, first, inverse = np.unique(_byte_rows(logits[candidates]), return_index=True, return_inverse=True)
    if first.size == candidates.size:
        return None
    found = np.arange(n_samples)
    found[candidates] = candidates[first[inverse.ravel()]]
    return found


def tied_equal(twins_of: np.ndarray | None, rows: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (one per sample of ``rows``) with every sample whose logits equal another's given the value of
    the first of them in ``rows`` (``twins_of``: :func:`twins` of the whole set); ``values`` itself when there
    are no twins."""
    if twins_of is None:
        return values
    _, first, inverse = np.unique(twins_of[rows], return_index=True, return_inverse=True)
    return values[first][inverse.ravel()]


def _byte_rows(rows: np.ndarray) -> np.ndarray:
    """Each row of a 2-D array as one opaque item (sorted and compared by its bytes)."""
    rows = np.ascontiguousarray(rows)
    return rows.view(np.dtype((np.void, rows.itemsize * rows.shape[1]))).ravel()
