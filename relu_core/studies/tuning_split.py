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
#: ``x_range``: a fraction's axis spans [0, 1] (one fraction alone drew a dot on an axis from -0.5 to 1.5)
SERIES_INFO = {"x_label": "tuning fraction", "log_x": False, "x_range": [0.0, 1.0]}


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
    collector.tie_on(logits)
    for i, fraction in enumerate(fractions):
        report(common.progress, i, len(fractions), f"{series}: tuning fraction {fraction:g}")
        splits = protocol.seeded_splits(correct, fraction, common.seeds)
        for seed, tune, evaluation in splits.checked(common.cancel, "tuning-split study"):
            collector.add_relu(series, fraction, seed, base.RelUFit(probs, correct, tune), LAMBDA, evaluation)
            collector.add(
                series, fraction, base.DOCTOR, seed, doctor[evaluation], correct[evaluation], samples=evaluation
            )


def run_study(run, *, fractions: Sequence[float] = FRACTIONS, **options) -> base.StudyResult:
    """The tuning-split study on ``run``; the keyword ``options`` as :func:`base.options`."""
    fractions = check_fractions(fractions)
    common = base.options(**options)
    correct = protocol.correctness(run.logits, run.labels)

    def sweep(collector: base.Collector) -> base.Sweep:
        fraction_sweep(run.logits, correct, fractions, collector, common)
        settings = {"fractions": list(fractions), "T": TEMPERATURE, "lambda": LAMBDA, "eps": 0.0}
        return base.Sweep(settings, {"fraction": dict(SERIES_INFO)})

    return common.study(NAME, TITLE, run, {"fractions": fractions}, sweep)
