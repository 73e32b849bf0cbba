"""An independent reference for the paired bootstrap that refits Rel-U's D* in every resample (Explore's, the
report's, the Start page's): Rel-U fitted anew on each resample's drawn tuning samples, repeated as often as they
were drawn (not the weighted batched fit the product uses), then ``stats.refitted_paired``'s resampling."""

from __future__ import annotations

import numpy as np

from relu_core import detectors, metrics, stats


def refitted_paired(probs, correct, tune, evaluation, lam, seed: int) -> dict[str, stats.PairedDifference]:
    """Rel-U − Doctor on ``evaluation`` (Rel-U fitted on ``tune`` at ``lam``; ``probs`` at the setting's T)."""
    probs, correct = np.asarray(probs, dtype=np.float64), np.asarray(correct, dtype=bool)

    def refit(weights: np.ndarray) -> np.ndarray:
        return np.stack(
            [
                detectors.RelU(lam=lam)
                .fit_probs(np.repeat(probs[tune], w, axis=0), np.repeat(correct[tune], w))
                .score_probs(probs[evaluation])
                for w in weights.astype(int)
            ]
        )

    relu = detectors.RelU(lam=lam).fit_probs(probs[tune], correct[tune]).score_probs(probs[evaluation])
    doctor = 1.0 - (probs[evaluation] ** 2).sum(axis=1)
    a, b = metrics.summary(relu, correct[evaluation]), metrics.summary(doctor, correct[evaluation])
    estimates = {m: a[m] - b[m] for m in ("fpr95", "auroc", "aurc", "augrc")}
    return stats.refitted_paired(refit, doctor, correct, tune, evaluation, estimates, seed=seed)
