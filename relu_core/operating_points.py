"""The two operating points of FPR at 95 % TPR, in words: each convention answers its own user question.

- ``"correct"`` (positives = correct predictions, the paper's text): *keep 95 % of the correct predictions: how
  many errors slip through?* The threshold accepts at least 95 % of the correct predictions; FPR95 is the share
  of the errors accepted with them.
- ``"error"`` (positives = errors, the authors' code): *catch 95 % of the errors: how many good predictions are
  lost?* The threshold rejects at least 95 % of the errors; FPR95 is the share of the correct predictions
  rejected with them.

Both are read by :func:`relu_core.metrics.fpr_at_tpr` (``positive``); a Rel-U − Doctor difference of each comes
with its own paired interval (:mod:`relu_core.stats`, the same ``fpr_positive``). A verdict states both: on one
run they can disagree (the pretrained CIFAR-10 ResNet-56), and which one matters is the user's
question, not the method's. Formulas layer: no pages, no runs.
"""

from __future__ import annotations

from collections.abc import Mapping

from relu_core import metric_info, stats
from relu_core.errors import InputError

#: The conventions, in the order every verdict states them.
POSITIVES: tuple[str, ...] = ("correct", "error")
#: The user question each convention answers.
QUESTIONS: dict[str, str] = {
    "correct": "keep 95 % of the correct predictions: how many errors slip through?",
    "error": "catch 95 % of the errors: how many good predictions are lost?",
}
#: What the FPR95 of each convention counts, as the sentence names it.
WHAT: dict[str, str] = {
    "correct": "of the errors slip through",
    "error": "of the good predictions are lost",
}
#: Short headers (table columns).
HEADERS: dict[str, str] = {
    "correct": "keep 95 % correct: errors slipping through",
    "error": "catch 95 % errors: good predictions lost",
}


def check_positive(positive: str) -> str:
    """``positive`` when it is one of :data:`POSITIVES`; InputError otherwise."""
    if positive not in POSITIVES:
        raise InputError(f"the FPR95 convention must be one of {', '.join(POSITIVES)}, got {positive!r}")
    return positive


def sentence(
    positive: str,
    values: Mapping[str, float],
    difference: stats.PairedDifference | None = None,
    names: tuple[str, str] = ("Rel-U", "Doctor"),
) -> str:
    """One convention in plain words, e.g. "Keep 95 % of the correct predictions: 61.2 % of the errors slip
    through with Rel-U, 60.8 % with Doctor; no significant difference (Rel-U − Doctor +0.4 points, 95 % CI −1.2 to
    +2.0)."

    ``values`` maps the two names to their FPR95 (fractions) under ``positive``; ``difference`` is the paired
    Rel-U − Doctor difference of that FPR95 (same convention), None when no interval was computed (then the
    sentence says so). Lower is better for both conventions."""
    check_positive(positive)
    a, b = names
    question = QUESTIONS[positive].split(":")[0]
    text = (
        f"{question[0].upper()}{question[1:]}: {100 * values[a]:.1f} % {WHAT[positive]} with {a}, "
        f"{100 * values[b]:.1f} % with {b}"
    )
    if difference is None:
        return f"{text} (no paired interval computed)."
    low, high = sorted((100 * difference.low, 100 * difference.high))
    margin = (
        f"{a} − {b} {metric_info.signed(100 * difference.estimate, 1)} points, {100 * difference.confidence:g} % CI "
        f"{metric_info.signed(low, 1)} to {metric_info.signed(high, 1)}"
        + (f", {difference.condition}" if difference.conditional else "")
    )
    return f"{text}; {difference.outcome(a, b)} ({margin})."


def sentences(
    values: Mapping[str, Mapping[str, float]],
    differences: Mapping[str, stats.PairedDifference | None],
    names: tuple[str, str] = ("Rel-U", "Doctor"),
) -> list[str]:
    """:func:`sentence` of both conventions, correct-positive first: ``values[positive][name]`` and
    ``differences[positive]``."""
    return [sentence(p, values[p], differences.get(p), names) for p in POSITIVES]


def other(positive: str) -> str:
    """The convention that is not ``positive``."""
    return POSITIVES[1] if check_positive(positive) == POSITIVES[0] else POSITIVES[0]
