"""Tuning-split size (the paper's Figure 3): Rel-U and Doctor against the share of samples used for tuning.

For every tuning fraction (10/20/33/50 % by default, or any list in (0, 1)) and every seed, the protocol's
split (:func:`relu_core.protocol.split_indices`, stratified by correctness) fits D* on the tuning part and
scores the evaluation part, at the paper's defaults T = 1, ε = 0, λ = 0.5. One softmax serves every fraction
and seed. :func:`fraction_sweep` is also the engine of the label-domain mismatch study.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from relu_core import detectors, protocol, validation
from relu_core.errors import InputError
from relu_core.progress import report
from relu_core.studies import base
from relu_core.threads import small_work

NAME = "tuning-split"
TITLE = "Tuning-split size: Rel-U and Doctor against the tuning fraction"
FRACTIONS: tuple[float, ...] = protocol.TUNE_FRACTION_PRESETS
TEMPERATURE, LAMBDA = 1.0, 0.5
SERIES_INFO = {"x_label": "tuning fraction", "log_x": False}


def check_fractions(fractions: Sequence[float]) -> tuple[float, ...]:
    """Validated, de-duplicated fractions in increasing order."""
    values = sorted({validation.fraction(f, "every tuning fraction") for f in fractions})
    if not values:
        raise InputError("give at least one tuning fraction")
    return tuple(values)


@small_work
def fraction_sweep(
    logits: np.ndarray,
    correct: np.ndarray,
    fractions: Sequence[float],
    collector: base.Collector,
    common: base.Options,
    series: str = "fraction",
) -> None:
    """Rel-U (T = 1, λ = 0.5) and Doctor (T = 1) at every fraction and seed of ``common``, into ``collector``."""
    probs = detectors.softmax(logits, TEMPERATURE)
    doctor = detectors.gini(probs)
    hamming = detectors.hamming_matrix(probs.shape[1])
    for i, fraction in enumerate(fractions):
        report(common.progress, i, len(fractions), f"{series}: tuning fraction {fraction:g}")
        for seed in common.seeds:
            base.checkpoint(common.cancel, "tuning-split study")
            tune, evaluation = protocol.split_indices(len(correct), fraction, seed, stratify=correct)
            fitted = base.moments(probs[tune], correct[tune])
            matrix = hamming if fitted is None else detectors.relu_matrix_from_moments(*fitted, LAMBDA)
            if fitted is None or np.array_equal(matrix, hamming):
                collector.note_fallback(series, fraction)
            c_eval = correct[evaluation]
            collector.add(
                series,
                fraction,
                base.RELU,
                seed,
                detectors.quadratic_score(probs[evaluation], matrix),
                c_eval,
                samples=evaluation,
            )
            collector.add(series, fraction, base.DOCTOR, seed, doctor[evaluation], c_eval, samples=evaluation)


def run_study(run, *, fractions: Sequence[float] = FRACTIONS, **options) -> base.StudyResult:
    """The tuning-split study on ``run``; the keyword ``options`` as :func:`base.options`."""
    fractions = check_fractions(fractions)
    common = base.options(**options)
    correct = protocol.correctness(run.logits, run.labels)

    def compute() -> base.StudyResult:
        collector = base.Collector()
        fraction_sweep(run.logits, correct, fractions, collector, common)
        curves, paired, per_seed = common.finish(collector)
        report(common.progress, len(fractions), len(fractions), "done")
        settings = {
            "fractions": list(fractions),
            "seeds": list(common.seeds),
            "T": TEMPERATURE,
            "lambda": LAMBDA,
            "eps": 0.0,
            "n_resamples": common.n_resamples,
        }
        notes = collector.fallback_notes()
        return base.StudyResult(
            NAME, TITLE, curves, paired, per_seed, settings, {"fraction": dict(SERIES_INFO)}, notes=notes
        )

    return common.cached(NAME, run, {"fractions": fractions}, compute)
