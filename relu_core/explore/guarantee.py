"""A view at a guaranteed risk: each detector's threshold certified to keep at most r* errors among accepted
with confidence 1 − δ (``relu_core.risk_control``), what it does on new samples, and Rel-U against Doctor by how
much each lets you accept.

The view's evaluation split (the samples not in the tuning split that fits D*) is cut in two at random with the
split seed (``risk_control.calibration_split``, as the exported detector cuts it): a calibration half certifies
each threshold, the evaluation half shows the realised risk and coverage, with bootstrap intervals. The Rel-U −
Doctor coverage difference on the evaluation half has a paired bootstrap interval for the thresholds certified
here (``risk_control.coverage_difference``) and the range 200 random re-cuts of the same samples into calibration
and evaluation halves give (``risk_control.calibration_draws``): how much another calibration draw moves it."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from relu_core import cache, jobs, metrics, protocol, risk_control, stats

#: What a guaranteed operating point shows, in words (the page's, the report's).
NOTE = (
    "Each detector's threshold is certified on a calibration half of the evaluation split (drawn at random with "
    "the split seed) to keep at most r* errors among the predictions it accepts, with confidence 1 − δ "
    "({method}); the other half shows what it does on new samples (realised risk and coverage, 95 % bootstrap "
    "intervals). Assumes {assumptions}."
)


@dataclass(eq=False)
class GuaranteeView:
    """One view's detectors at a guarantee (``risk``, ``delta``): ``cal_pos`` / ``eval_pos`` are positions in the
    view's evaluation split; ``results`` each detector's certificate and realised rates; ``points`` its operating
    point on the evaluation half (what the curves mark); ``paired``: Rel-U − Doctor in coverage, computed when
    first asked (a bootstrap)."""

    risk: float
    delta: float
    seed: int
    names: dict[str, str]
    eval_idx: np.ndarray
    correct_eval: np.ndarray
    cal_pos: np.ndarray
    eval_pos: np.ndarray
    scores: dict[str, np.ndarray] = field(repr=False)
    correct_held: np.ndarray = field(repr=False)
    results: dict[str, risk_control.AtGuarantee] = field(default_factory=dict)
    points: dict[str, metrics.OperatingPoint] = field(default_factory=dict)
    paired: risk_control.CoverageDifference | None = None

    @functools.cached_property
    def rates(self) -> dict[str, dict[str, stats.RateInterval]]:
        """Per detector, the coverage and risk of its accept decisions on the evaluation half, with 95 % bootstrap
        intervals (``stats.acceptance_rates``, seeded with the split seed)."""
        return {
            k: stats.acceptance_rates(p.accepted, self.correct_eval, seed=self.seed) for k, p in self.points.items()
        }

    def compute_paired(self, cancel=None) -> risk_control.CoverageDifference:
        """Rel-U − Doctor: coverage on the evaluation half at the same guarantee, with its paired bootstrap
        interval for these thresholds and the range over 200 random re-cuts of the held-out samples (about a
        second at 5,000 samples, so Explore runs it as :func:`paired_job`)."""
        a, b = protocol.PAIRED
        pair = (self.scores[a], self.scores[b])
        thresholds = (self.results[a].certificate.threshold, self.results[b].certificate.threshold)
        n = self.correct_held.size
        split = risk_control.split_scores(pair, self.correct_held, np.arange(n), self.eval_pos, thresholds)
        found = risk_control.coverage_difference([split], n_pool=n, seed=self.seed, cancel=cancel)
        draws = risk_control.calibration_draws(
            pair, self.correct_held, self.risk, self.delta, seed=self.seed, cancel=cancel
        )
        return risk_control.with_draws(found, draws, "random re-cuts of these held-out samples")

    def ensure_paired(self) -> risk_control.CoverageDifference:
        """:attr:`paired`, computed here when it has not landed (the report, headless use)."""
        if self.paired is None:
            self.paired = self.compute_paired()
        return self.paired

    @property
    def words(self) -> str:
        """ "at most 2 % errors among accepted, with 90 % confidence"."""
        return risk_control.guarantee_words(self.risk, self.delta)

    def sentence(self, keys: tuple[str, ...] = protocol.PAIRED) -> str:
        """The guarantee in plain words with the coverage each of ``keys`` gives on the evaluation half (or why
        it cannot give it)."""
        coverage: dict[str, float | str] = {}
        for k in keys:
            r = self.results[k]
            coverage[self.names[k]] = r.evaluation.coverage if r.certificate.certified else r.certificate.refusal
        return risk_control.sentence(self.risk, self.delta, coverage, "coverage on the evaluation half")

    def table(self, keys: tuple[str, ...]) -> pd.DataFrame:
        """One row per detector: the certificate on the calibration half and the realised rates on the
        evaluation half with their intervals."""
        rows = {}
        for k in keys:
            g, rates = self.results[k].certificate, self.rates[k]
            rows[self.names[k]] = {
                "certified": "yes" if g.certified else f"no: {g.refusal}",
                "threshold": g.threshold if g.certified else math.nan,
                "coverage (calibration)": g.coverage,
                "bound (calibration)": g.bound,
                "coverage (evaluation)": rates["coverage"].estimate,
                "coverage CI": _ci(rates["coverage"]),
                "risk (evaluation)": rates["risk"].estimate,
                "risk CI": _ci(rates["risk"]),
                "accepted / errors (evaluation)": f"{self.results[k].evaluation.n_accepted:,} / "
                f"{self.results[k].evaluation.n_errors:,}",
            }
        return pd.DataFrame.from_dict(rows, orient="index")

    def realised_note(self, keys: tuple[str, ...] = protocol.PAIRED) -> str:
        """One line on why the realised risk on the evaluation half may exceed r* while the guarantee holds,
        naming the detectors of ``keys`` whose realised risk is above r* here."""
        above = [
            f"{self.names[k]}'s ({self.rates[k]['risk'].estimate:.4f})"  # "Rel-U's (0.0543)"
            for k in keys
            if self.results[k].certificate.certified and self.rates[k]["risk"].estimate > self.risk
        ]
        lead = (
            f"{' and '.join(above)} realised risk{' is' if len(above) == 1 else 's are'} above r* = "
            f"{risk_control.percent(self.risk)} on this evaluation half, and the guarantee still holds: "
            if above
            else "The realised risk on the evaluation half may exceed r* while the guarantee holds: "
        )
        return lead + (
            "r* bounds the risk among accepted predictions of the population the samples come from, with "
            f"confidence {risk_control.percent(1 - self.delta)} over the calibration draw; "
            f"{self.eval_pos.size:,} evaluation samples are one finite draw of that population, so their share of "
            "errors scatters around the true risk (its interval beside it), above r* in some draws."
        )

    def note(self) -> str:
        """How the thresholds were found, the split sizes and the assumptions, in words."""
        return (
            NOTE.format(method=risk_control.METHOD, assumptions=risk_control.ASSUMPTIONS)
            + f" Calibration half: {self.cal_pos.size:,} samples; evaluation half: {self.eval_pos.size:,}."
        )


def _ci(rate: stats.RateInterval) -> str:
    if not np.isfinite(rate.low):
        return "–"
    return f"[{rate.low:.4f}, {rate.high:.4f}]"


def _point(threshold: float, uncertainty: np.ndarray, correct: np.ndarray) -> metrics.OperatingPoint:
    """A threshold's operating point on samples (accepting nothing when it is -inf: refused)."""
    accepted = uncertainty <= threshold
    n_acc, n_err = int(accepted.sum()), int((accepted & ~correct).sum())
    n_correct, n_errors = int(correct.sum()), int((~correct).sum())
    return metrics.OperatingPoint(
        threshold=float(threshold),
        accepted=accepted,
        fpr=n_err / n_errors if n_errors else 0.0,
        tpr=(n_acc - n_err) / n_correct if n_correct else 0.0,
        coverage=n_acc / uncertainty.size,
        risk=n_err / n_acc if n_acc else math.nan,
    )


def guarantee_view(view, risk: float, delta: float) -> GuaranteeView:
    """The detectors of ``view`` at a guarantee of at most ``risk`` errors among accepted with confidence
    1 − ``delta`` (module docstring: how the evaluation split is cut)."""
    held = view.eval_idx
    cal_idx, _ = risk_control.calibration_split(held, view.setting.seed)
    is_cal = np.isin(held, cal_idx)
    cal_pos, eval_pos = np.flatnonzero(is_cal), np.flatnonzero(~is_cal)
    correct_held = view.correct_eval
    scores = {k: np.asarray(d.eval_uncertainty, dtype=np.float64) for k, d in view.detectors.items()}
    result = GuaranteeView(
        risk,
        delta,
        view.setting.seed,
        {k: d.name for k, d in view.detectors.items()},
        held[eval_pos],
        correct_held[eval_pos],
        cal_pos,
        eval_pos,
        scores,
        correct_held,
    )
    result.results.update(risk_control.at_split(scores, correct_held, cal_pos, eval_pos, risk, delta))
    for k, u in scores.items():
        threshold = result.results[k].certificate.threshold
        result.points[k] = _point(threshold, u[eval_pos], correct_held[eval_pos])
    return result


def paired_job_key(certified: GuaranteeView) -> str:
    """The key of :func:`paired_job`: the content the bootstrap depends on."""
    relu, doctor = (certified.scores[k] for k in protocol.PAIRED)
    settings = np.array([certified.risk, certified.delta, certified.seed], dtype=np.float64)
    digest = cache.array_digest(relu, doctor, certified.correct_held, certified.cal_pos, settings)
    return f"guarantee-paired:{digest}"


def paired_job(certified: GuaranteeView) -> jobs.Job:
    """:meth:`GuaranteeView.compute_paired` as a background job keyed by its content (a guarantee seen again, in
    any session, reuses its result)."""
    return jobs.MANAGER.submit(
        paired_job_key(certified),
        "Rel-U − Doctor coverage at the guarantee",
        lambda progress, cancel: certified.compute_paired(cancel),
    )


def settle_paired(certified: GuaranteeView, job: jobs.Job | None, wait_s: float) -> tuple[bool, str]:
    """Waits up to ``wait_s`` for ``job`` and keeps its result. Returns (whether it is still running, the message
    of a failure); a failed or cancelled job is forgotten, so that asking again retries."""
    if job is None:
        return False, ""
    return job.settle(wait_s, lambda result: setattr(certified, "paired", result))
