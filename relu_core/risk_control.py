"""Deploying a detector with a guarantee: the threshold that bounds the error rate among the predictions it
accepts (the selective risk) by a target r*, with confidence 1 − δ, and how many predictions it lets you act on.

The method (:func:`guaranteed_risk`) is Learn-then-Test's fixed-sequence testing (Angelopoulos et al., 2021)
applied to selection with guaranteed risk (Geifman & El-Yaniv, NeurIPS 2017), with the exact binomial
(Clopper–Pearson) bound:

- A detector accepts the predictions whose uncertainty is at most a threshold t; its selective risk at t is
  errors among accepted / accepted, its coverage accepted / all.
- The candidate thresholds are the distinct uncertainties of the calibration split (samples of equal
  uncertainty are accepted together: the project's operating-point convention), tested from the most
  confident down. Threshold t with n accepted calibration samples, e of them wrong, passes when the exact
  binomial p-value of "risk > r*" is at most δ, ``P(Binomial(n, r*) ≤ e) ≤ δ``, i.e. when the one-sided
  Clopper–Pearson upper bound of the risk at level 1 − δ is at most r*. Given the number accepted, the
  accepted samples are an i.i.d. draw of the accepted population, so that p-value is valid (its binomial law
  holds exactly given n).
- Fixed-sequence testing stops at the first threshold that fails and keeps the last one that passed, the one
  of largest coverage: the tests come in a fixed order, so no multiplicity correction is needed and, with
  probability at least 1 − δ over the calibration draw, the risk among accepted future samples is at most r*.
  Where it starts: with n accepted and no error the bound is 1 − δ^(1/n), so thresholds accepting fewer than
  ``n_min = ceil(log δ / log(1 − r*))`` samples can never pass whatever the labels, and a sequence begun at the
  most confident sample would stop at once. The protocol starts it at a threshold fixed before calibration
  (:func:`start_threshold`: from the evaluation half's scores, their labels unread, where enough more than
  ``n_min`` calibration samples are expected that fewer fall below it only about 2 draws in 10,000), so that
  the test order depends on nothing in the calibration split and the test is valid (level at most δ). Without such a start, :func:`guaranteed_risk` begins at the first calibration
  threshold that can pass, a start that depends on the calibration scores (not their labels): approximate.
- A clear refusal instead of a threshold when none can be certified: too few calibration samples for r* and δ
  (r* = 0 is never certifiable from a finite sample), or the first testable threshold already fails (r* below
  what this detector reaches on this model).

Assumptions (the guarantee holds under them only): the calibration samples and the future ones are
exchangeable (drawn from the same distribution: no shift between calibration and deployment), and the detector
is fixed before calibration, fitted on other data (Rel-U's D* on the tuning split, never on the calibration
split). The guarantee is over the calibration draw: about δ of calibration splits give a threshold whose true
risk exceeds r*. The settings (T, λ, r*, δ) are chosen before the held-out metrics are looked at: Explore's
metrics, curves and realised rates read the calibration half's labels too, and settings picked while watching
them are fitted to those labels, which voids the guarantee (choose them on the tuning split, or on other data).

The protocol (:func:`calibration_split`, :func:`at_risk`): the detector is fitted on the seeded tuning split
(``protocol.split_indices``, stratified by correctness); the rest is cut at random, not stratified, into a
calibration half (the threshold) and an evaluation half (the realised risk and coverage); given the held-out
part, calibration and evaluation samples are exchangeable, which is what the guarantee needs (a stratified cut
would fix the calibration split's error count). The evaluation split never calibrates.

Rel-U against Doctor (:class:`CoverageDifference`): the difference of the coverage each certified threshold
gives on the evaluation split, at the same r* and δ, and two answers to "how sure is it":

- a 95 % paired bootstrap interval for the thresholds certified here (:func:`coverage_difference`: the evaluation
  samples resampled, one draw for both detectors and, over seeds, one for all seeds; the thresholds held fixed,
  so the interval is conditional on the calibration draw, and says so). A bootstrap that also resamples the
  calibration split and certifies again was tried and dropped: a resample repeats samples, so an error drawn
  three times makes a cluster of three among the most confident, fixed-sequence testing stops there earlier
  than on real data, and the resampled coverages sat below the estimate (on the ResNet-56 at r* = 2 %: estimate
  +14.6 points, interval +1.9 to +15.2);
- how much another calibration draw of the same size moves the difference: the range over the seeds (each
  seed a fresh split), or over random re-cuts of one split's held-out samples into calibration and evaluation
  halves with the detectors fixed (:func:`calibration_draws`).

The verdict (:attr:`CoverageDifference.significant`, :data:`VERDICT_RULE`) names a winner only when both exclude
0 on the same side: the interval alone holds the calibration draw fixed (on the ResNet-56 at r* = 2 % it was +14.5
to +15.6 points while the ten seeds' differences ranged from −2.7 to +37.2).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats as _scipy_stats

from relu_core import detectors, protocol, stats, ties, validation
from relu_core.errors import Cancelled, InputError
from relu_core.progress import Cancel, Progress, count

#: The confidence a guarantee is given with unless told otherwise: 1 − δ = 90 %.
DEFAULT_DELTA = 0.1
#: The share of the held-out samples (those not in the tuning split) that calibrates the threshold.
CALIBRATION_FRACTION = 0.5
#: Mixed into the split seed so that the calibration cut is not the tuning split's random stream.
_CALIBRATION_STREAM = 0x5E1EC7
#: Resampled samples held at once by the bootstrap (resamples x samples), to bound its memory.
_BLOCK_CELLS = 4_000_000
#: What a guarantee assumes, in words (the card, the CLI, the pages).
ASSUMPTIONS = (
    "exchangeable data: the calibration samples and the future ones come from the same distribution (no shift); "
    "the detector is fixed, fitted on other samples than the calibration split (the tuning split); the "
    "guarantee is over the calibration draw: with probability at least 1 − δ the risk among accepted future "
    "predictions is at most r*; T, λ, r* and δ are chosen before the held-out metrics are looked at (those "
    "metrics include the calibration half's labels: settings picked while watching them void the guarantee)"
)
METHOD = (
    "fixed-sequence testing (Learn-then-Test; selection with guaranteed risk, Geifman & El-Yaniv 2017) of the "
    "calibration split's distinct uncertainties from the most confident down, each with the exact binomial "
    "(Clopper–Pearson) upper bound of the risk among accepted at level 1 − δ; the last threshold whose bound "
    "is at most r* is kept"
)


def percent(value: float) -> str:
    """A rate in words: "2 %", "5.5 %", "0.25 %"; a confidence just under 1 keeps the digits that tell it
    from 100 % ("99.9999999 %")."""
    digits = 3
    while digits < 15 and value < 1 and float(f"{100 * value:.{digits}g}") >= 100:
        digits += 1
    return f"{100 * value:.{digits}g} %"


@dataclass(frozen=True)
class GuaranteedRisk:
    """The certified threshold of :func:`guaranteed_risk`, or its refusal.

    ``threshold``: accept a prediction when its uncertainty is at most it (``-inf`` when refused: nothing is
    accepted); ``coverage``: the share of the calibration split it accepts (0 when refused); ``bound``: the
    Clopper–Pearson upper bound at level 1 − δ of the risk among accepted there (at most ``target_risk``; when
    refused, the bound of the first threshold tested, NaN when none could be); ``n_calibration``,
    ``n_accepted``, ``n_errors``: the counts behind it; ``refusal``: why nothing is certified, one line ("" when
    it is)."""

    target_risk: float
    delta: float
    n_calibration: int
    threshold: float
    coverage: float
    n_accepted: int
    n_errors: int
    bound: float
    refusal: str = ""

    @property
    def certified(self) -> bool:
        return not self.refusal

    @property
    def confidence(self) -> float:
        return 1.0 - self.delta

    @property
    def risk(self) -> float:
        """The error rate among the accepted calibration samples (NaN when none are)."""
        return self.n_errors / self.n_accepted if self.n_accepted else math.nan

    def guarantee_words(self) -> str:
        """ "at most 2 % errors among accepted, with 90 % confidence"."""
        return guarantee_words(self.target_risk, self.delta)

    def accept(self, uncertainty) -> np.ndarray:
        """The accept decisions of this threshold: uncertainty <= threshold (none when refused)."""
        return np.asarray(uncertainty, dtype=np.float64) <= self.threshold


def guarantee_words(risk: float, delta: float) -> str:
    """ "at most 2 % errors among accepted, with 90 % confidence"."""
    return f"at most {percent(risk)} errors among accepted, with {percent(1 - delta)} confidence"


def check_risk(risk: object, what: str = "the target risk r*") -> float:
    """``risk`` as a float in [0, 1) (r* = 1 asks for nothing); else InputError naming ``what``."""
    try:
        value = float(risk)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise InputError(f"{what} must be a number in [0, 1), got {risk!r}") from None
    if not 0.0 <= value < 1.0:  # NaN fails too
        raise InputError(f"{what} must lie in [0, 1) (an error rate among accepted predictions), got {risk!r}")
    return value


def check_delta(delta: object, what: str = "δ") -> float:
    """``delta`` strictly between 0 and 1 (the guarantee holds with confidence 1 − δ)."""
    return validation.fraction(delta, f"{what} (the guarantee holds with confidence 1 − δ)")


#: The most samples any calibration split can hold, for :func:`check_certifiable`: 2^53, the largest count a
#: float counts exactly (an array of that many float64 scores would need 64 PiB). An r* whose fewest certifying
#: samples (:func:`min_accepted`) exceed it is certified by no sample size.
MAX_CERTIFYING_SAMPLES = 2**53


def _passes_with_no_error(n: float, log1p_risk: float, log_delta: float) -> bool:
    """Whether n accepted samples, none wrong, pass: ``P(Binomial(n, r*) = 0) = (1 − r*)^n <= δ``, computed as
    scipy's binomial does it (``exp(n log1p(−r*))``: ``1 − r*`` itself rounds to 1 for r* below 1e-16)."""
    return n * log1p_risk <= log_delta


def min_accepted(risk: float, delta: float) -> float:
    """The fewest accepted samples with which any threshold can be certified: with n accepted and no error the
    bound is 1 − δ^(1/n) <= r* from n = ceil(log δ / log(1 − r*)); infinite for r* = 0.

    In closed form, with logs (``log1p``, so that a tiny r* keeps its digits), then the rounding of the division
    checked a step either way with the binomial test's own arithmetic (:func:`_passes_with_no_error`); a count
    beyond :data:`MAX_CERTIFYING_SAMPLES` is returned as it comes (``inf`` where the division overflows) and
    :func:`check_certifiable` refuses it. Never loops over n."""
    if risk <= 0.0:
        return math.inf
    log1p_risk, log_delta = math.log1p(-risk), math.log(delta)
    try:
        exact = log_delta / log1p_risk
    except (OverflowError, ZeroDivisionError):  # r* = 5e-324: log(1 − r*) is the smallest float
        return math.inf
    if not math.isfinite(exact):
        return math.inf
    n = max(1, math.ceil(exact))
    if n > MAX_CERTIFYING_SAMPLES:  # past exact integers: one step is below the rounding
        return float(n)
    for _ in range(2):  # the division's rounding, at most a step or two either way
        if n > 1 and _passes_with_no_error(n - 1, log1p_risk, log_delta):
            n -= 1
        elif not _passes_with_no_error(n, log1p_risk, log_delta):
            n += 1
    return float(n)


def check_certifiable(risk: object, delta: object, what: str = "r*") -> tuple[float, float]:
    """``(r*, δ)`` checked (:func:`check_risk`, :func:`check_delta`) and certifiable by some sample size: r* = 0
    passes (:func:`guaranteed_risk` refuses it with its own line), an r* > 0 whose fewest certifying samples
    exceed :data:`MAX_CERTIFYING_SAMPLES` is refused in one line (InputError naming ``what``), before any work.
    Every place r* enters calls it: the CLI's ``evaluate``/``export --risk``, :class:`explore.Setting`, a URL's
    ``risk=``, :func:`guaranteed_risk` and :func:`start_threshold`."""
    risk, delta = check_risk(risk, what), check_delta(delta)
    n_min = min_accepted(risk, delta)
    if risk > 0.0 and n_min > MAX_CERTIFYING_SAMPLES:
        needed = "more than 10^308" if math.isinf(n_min) else f"{n_min:.3g}"
        smallest = -math.expm1(math.log(delta) / MAX_CERTIFYING_SAMPLES)
        raise InputError(
            f"{what} = {risk:g} at {percent(1 - delta)} confidence is certified by no sample size: it needs "
            f"{needed} accepted samples, none wrong, more than any calibration split can hold (2^53, "
            f"relu_core.risk_control.MAX_CERTIFYING_SAMPLES); the smallest r* certifiable at this δ is "
            f"{smallest:.3g}"
        )
    return risk, delta


@functools.lru_cache(maxsize=16)
def _table(n_max: int, risk: float, delta: float) -> np.ndarray:
    """:func:`max_errors`, kept for repeated certifications (read-only)."""
    table = max_errors(n_max, risk, delta)
    table.flags.writeable = False
    return table


def max_errors(n_max: int, risk: float, delta: float) -> np.ndarray:
    """For n = 0 .. ``n_max`` accepted samples, the most errors among them with which a threshold passes: the
    largest e with ``P(Binomial(n, r*) <= e) <= δ`` (-1 where none does). Passing is exactly "the Clopper–Pearson
    upper bound at level 1 − δ is at most r*"."""
    n = np.arange(n_max + 1)
    if risk <= 0.0:
        return np.full(n_max + 1, -1, dtype=np.int64)
    binom = _scipy_stats.binom
    e = np.nan_to_num(binom.ppf(delta, n, risk), nan=0.0).astype(np.int64)  # smallest e with cdf(e) >= δ
    e = np.where(binom.cdf(e, n, risk) <= delta, e, e - 1)
    for _ in range(3):  # scipy's ppf is exact to the count but checked: cdf(e) <= δ < cdf(e + 1)
        e = np.where((e >= 0) & (binom.cdf(e, n, risk) > delta), e - 1, e)
        e = np.where((e + 1 < n + 1) & (binom.cdf(e + 1, n, risk) <= delta), e + 1, e)
    e[0] = -1  # nothing accepted: nothing to certify
    return np.minimum(e, n).astype(np.int64)


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """The one-sided Clopper–Pearson upper bound at level 1 − δ of a rate with ``errors`` of ``n``."""
    if n <= 0:
        return 1.0
    if errors >= n:
        return 1.0
    return float(_scipy_stats.beta.ppf(1.0 - delta, errors + 1, n - errors))


def _checked(uncertainty, correct) -> tuple[np.ndarray, np.ndarray]:
    u = np.asarray(uncertainty, dtype=np.float64)
    c = np.asarray(correct)
    if u.ndim != 1 or c.shape != u.shape:
        raise InputError(
            f"uncertainty and correct must be 1-D arrays of the same length, got shapes {u.shape} and {c.shape}"
        )
    if c.dtype != np.bool_:
        if not np.isin(c, (0, 1)).all():
            raise InputError("correct must hold booleans (True = correctly classified)")
        c = c.astype(bool)
    if not np.isfinite(u).all():
        raise InputError(f"{int((~np.isfinite(u)).sum()):,} uncertainty scores are NaN or infinite")
    return u, c


def _groups(u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, values)``: the ascending order of ``u``, where each group of equal values starts in it,
    and the groups' values."""
    order = np.argsort(u, kind="stable")
    ordered = u[order]
    starts = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
    return order, starts, ordered[starts]


def _last_passed(cum_n: np.ndarray, cum_e: np.ndarray, table: np.ndarray, n_min: float) -> tuple[np.ndarray, ...]:
    """Fixed-sequence testing on (resamples x groups) cumulative counts: per row, the first testable group, the
    first that fails (the number of groups when none does) and whether a threshold is certified (a group before
    the first failure passed)."""
    testable = cum_n >= n_min
    fails = testable & (cum_e > table[np.minimum(cum_n, table.size - 1)])
    has_testable = testable.any(axis=1)
    first = np.argmax(testable, axis=1)
    first_fail = np.where(fails.any(axis=1), np.argmax(fails, axis=1), cum_n.shape[1])
    return first, first_fail, has_testable & (first_fail > first)


#: How many standard deviations the start's expected calibration count keeps above the fewest that can pass
#: (:func:`start_threshold`): 3.5 leaves a start with too few samples about 2 in 10,000 draws.
START_MARGIN_SD = 3.5


def start_threshold(other_scores, n_calibration: int, risk: float, delta: float = DEFAULT_DELTA) -> float:
    """Where fixed-sequence testing starts (:func:`guaranteed_risk`'s ``start``), fixed before calibration from
    scores the calibration split does not hold (the protocol's: the evaluation half's, their labels unread).

    The start is the quantile of ``other_scores`` below which ``m`` of the ``n_calibration`` calibration samples
    are expected, ``m`` chosen so that the count actually below it stays at least ``n_min`` (:func:`min_accepted`,
    the fewest accepted samples that can pass) but with a tiny probability: the count varies with the
    calibration draw and with the quantile's own sampling error, a variance of about ``m (1 + n_cal / n_other)``,
    and ``m - START_MARGIN_SD * sd >= n_min``. (A first design expected ``n_min + 3 sqrt(n_min) + 1`` and left 44
    samples below the start, one short, on one of 10 seeds of the ResNet-56.) Early enough to lose no coverage in
    practice: a sequence from the data's own start must pass there too. ``inf`` (accept everything: one test) when
    ``m`` exceeds ``n_calibration``; ``-inf`` for r* = 0 (nothing can be certified) or no other scores."""
    other = np.sort(np.asarray(other_scores, dtype=np.float64).ravel())
    n_min = min_accepted(*check_certifiable(risk, delta))
    if not math.isfinite(n_min) or other.size == 0 or n_calibration <= 0:
        return -math.inf
    spread = START_MARGIN_SD * math.sqrt(1.0 + n_calibration / other.size)
    wanted = ((spread + math.sqrt(spread**2 + 4.0 * n_min)) / 2.0) ** 2  # m - spread * sqrt(m) = n_min
    if wanted >= n_calibration:
        return math.inf
    rank = min(other.size, max(1, math.ceil(wanted / n_calibration * other.size)))
    return float(other[rank - 1])


def guaranteed_risk(
    uncertainty, correct, risk: float, delta: float = DEFAULT_DELTA, *, start: float | None = None
) -> GuaranteedRisk:
    """The threshold that bounds the risk among accepted predictions by ``risk`` with confidence 1 − ``delta``.

    Fixed-sequence testing over the calibration split's distinct uncertainties, most confident first, each with
    the exact binomial (Clopper–Pearson) upper bound of the risk among the samples it accepts; the last one
    whose bound is at most ``risk`` (the largest coverage) is kept. Samples of equal uncertainty are accepted
    together.

    Where the sequence starts: with ``start``, a threshold fixed before this calibration split was read
    (:func:`start_threshold`, from other samples' scores), the first test is at ``start`` itself and the
    sequence goes on from there; the test order then depends on nothing in the calibration split, which is what
    makes fixed-sequence testing valid. Without it (None), the sequence starts at the first calibration
    threshold that can pass at all (module docstring): that start depends on the calibration scores (not their
    labels), so the level is approximate. Where the risk does not fall as the threshold grows, a false
    certificate at that start needs the ``n_min`` most confident samples all correct, so its probability is at
    most δ / (1 − r*) there, and the total at most about 2δ in the worst case. The protocol's functions (and
    Explore, the CLI, the export) pass ``start``.

    Assumptions: the calibration samples and the future ones are exchangeable, and the detector is fixed,
    fitted on other data (the tuning split), never on this calibration split; with probability at least
    1 − ``delta`` over the calibration draw, the risk among accepted future predictions is then at most
    ``risk``. Which split does what: the detector is fitted on the tuning split, this function reads the
    calibration split, and the realised risk and coverage are read on an evaluation split disjoint from both
    (:func:`calibration_split`, :func:`realised`).

    Parameters
    ----------
    uncertainty : array-like, shape (N,)
        The detector's uncertainty on the calibration split (higher = more likely wrong).
    correct : array-like of bool, shape (N,)
        Whether the classifier is right on each calibration sample.
    risk : float
        The target r*, in [0, 1): the error rate among accepted predictions not to exceed.
    delta : float, default 0.1
        In (0, 1): the guarantee holds with confidence 1 − delta.

    Returns
    -------
    GuaranteedRisk
        Threshold, coverage, Clopper–Pearson bound and counts on the calibration split; or, when no threshold can
        be certified (too few samples, r* = 0, r* below what the detector reaches), ``refusal`` in one line,
        a threshold of ``-inf`` and coverage 0.

    Raises
    ------
    InputError
        For arrays of different lengths, NaN scores, r* outside [0, 1) or δ outside (0, 1).

    Examples
    --------
    >>> import relu_core as rc
    >>> uncertainty = [0.1] * 60 + [0.2] * 40 + [0.5] * 20
    >>> correct = [True] * 60 + [True] * 38 + [False] * 2 + [False] * 20
    >>> g = rc.guaranteed_risk(uncertainty, correct, risk=0.1, delta=0.1)
    >>> g.threshold, round(g.coverage, 3), g.n_errors, round(g.bound, 4)
    (0.2, 0.833, 2, 0.0523)
    >>> g.guarantee_words()
    'at most 10 % errors among accepted, with 90 % confidence'
    >>> small = rc.guaranteed_risk(uncertainty[:10], correct[:10], risk=0.1)
    >>> small.certified, small.refusal.split(":")[0], small.coverage
    (False, 'too few calibration samples', 0.0)
    """
    u, c = _checked(uncertainty, correct)
    risk, delta = check_certifiable(risk, delta)
    n = u.size
    words = guarantee_words(risk, delta)

    def refused(reason: str, bound: float = math.nan) -> GuaranteedRisk:
        return GuaranteedRisk(risk, delta, n, -math.inf, 0.0, 0, 0, bound, reason)

    n_min = min_accepted(risk, delta)
    if risk == 0.0:
        return refused("r* = 0 cannot be certified: no finite calibration split rules out every error (choose r* > 0)")
    if n < n_min:
        return refused(
            f"too few calibration samples: certifying {words} needs at least {int(n_min):,} (none of them "
            f"wrong), this split has {n:,}"
        )
    order, starts, values = _groups(u)
    errors = (~c[order]).astype(np.int64)
    cum_n = np.r_[starts[1:], n][None, :]  # accepted up to and including each group
    cum_e = np.cumsum(errors)[cum_n[0] - 1][None, :]
    table = _table(n, risk, delta)
    if start is not None:  # the first test at the fixed start, then the groups above it; no test is skipped
        start = float(start)
        above = int(np.searchsorted(values, start, side="right"))  # groups at or below the start: accepted there
        k0 = int(np.searchsorted(u[order], start, side="right"))
        e0 = int(errors[:k0].sum())
        cum_n = np.r_[k0, cum_n[0, above:]][None, :]
        cum_e = np.r_[e0, cum_e[0, above:]][None, :]
        values = np.r_[start, values[above:]]
    # from a fixed start every threshold of the sequence is tested (one that cannot pass ends it); without one,
    # the sequence begins at the first threshold accepting n_min samples
    tested_from = 0.0 if start is not None else n_min
    first, first_fail, certified = (x[0] for x in _last_passed(cum_n, cum_e, table, tested_from))
    if not certified:
        k, e = int(cum_n[0, first]), int(cum_e[0, first])
        bound = clopper_pearson_upper(e, k, delta)
        if start is not None and k < n_min:
            return refused(
                f"too few calibration samples below the sequence's first threshold (fixed before calibration): "
                f"{k:,}, and certifying {words} needs at least {int(n_min):,} (none of them wrong); choose a "
                "larger r* or δ, or calibrate on more samples",
                bound,
            )
        held = (  # "the 180 most confident calibration samples already hold 4 errors", plural as the counts want
            f"the {count(k, 'most confident calibration sample')} already {'holds' if k == 1 else 'hold'} "
            f"{count(e, 'error')}"
        )
        if start is not None and _passes_at_least(u[order], c[order], n_min, risk, delta):
            # the fixed start refused, not r*: fewer samples (at least n_min) would have passed
            return refused(
                f"the sequence's first threshold (fixed before calibration) already fails: {held} (upper bound "
                f"{percent(bound)} at {percent(1 - delta)} confidence), although the {int(n_min):,} most confident, "
                f"the fewest that can certify r* = {percent(risk)}, would pass: the start refused, not r* (it is "
                "fixed before calibration so that the guarantee stays valid); choose a larger r* or δ, or "
                "calibrate on more samples",
                bound,
            )
        return refused(
            f"r* = {percent(risk)} is out of reach: {held} (upper bound "
            f"{percent(bound)} at {percent(1 - delta)} confidence); choose a larger r* or δ",
            bound,
        )
    g = int(first_fail) - 1
    k, e = int(cum_n[0, g]), int(cum_e[0, g])
    return GuaranteedRisk(risk, delta, n, float(values[g]), k / n, k, e, clopper_pearson_upper(e, k, delta))


def _passes_at_least(sorted_u: np.ndarray, sorted_c: np.ndarray, n_min: float, risk: float, delta: float) -> bool:
    """Whether the first threshold accepting at least ``n_min`` of these samples (sorted most confident first,
    ties accepted together) passes: the data's own start, where a sequence without a fixed start tests first."""
    k = int(np.searchsorted(sorted_u, sorted_u[min(int(n_min), sorted_u.size) - 1], side="right"))
    e = int((~sorted_c[:k]).sum())
    return clopper_pearson_upper(e, k, delta) <= risk


# ------------------------------------------------------------------------------------------- the protocol


def calibration_split(
    held_out: np.ndarray, seed: int, fraction: float = CALIBRATION_FRACTION
) -> tuple[np.ndarray, np.ndarray]:
    """The held-out samples (those not in the tuning split) cut at random into a calibration part
    (``round(fraction * n)`` of them) and an evaluation part, seeded by the split ``seed`` (on a stream of its
    own); not stratified, so that calibration and evaluation samples are exchangeable. Both sorted; InputError
    when either would be empty."""
    held_out = np.asarray(held_out)
    fraction = validation.fraction(fraction, "the calibration fraction")
    n_cal = int(round(fraction * held_out.size))
    if n_cal < 1 or n_cal >= held_out.size:
        raise InputError(f"{held_out.size:,} held-out samples cannot be cut into a calibration and an evaluation part")
    order = np.random.default_rng([int(seed), _CALIBRATION_STREAM]).permutation(held_out.size)
    return np.sort(held_out[order[:n_cal]]), np.sort(held_out[order[n_cal:]])


@dataclass(frozen=True)
class Realised:
    """What a threshold does on the evaluation split: coverage (accepted / all) and risk (errors among accepted,
    NaN when nothing is accepted), with the counts."""

    n: int
    n_accepted: int
    n_errors: int

    @property
    def coverage(self) -> float:
        return self.n_accepted / self.n if self.n else math.nan

    @property
    def risk(self) -> float:
        return self.n_errors / self.n_accepted if self.n_accepted else math.nan


def realised(certificate: GuaranteedRisk, uncertainty, correct) -> Realised:
    """The coverage and risk of ``certificate``'s threshold on an evaluation split."""
    u, c = _checked(uncertainty, correct)
    accepted = certificate.accept(u)
    return Realised(int(u.size), int(accepted.sum()), int((accepted & ~c).sum()))


@dataclass(frozen=True)
class AtGuarantee:
    """One detector at a guarantee on one split: its certificate (calibration split) and what its threshold
    does on the evaluation split."""

    certificate: GuaranteedRisk
    evaluation: Realised


@dataclass(frozen=True)
class SplitScores:
    """One split's samples for :func:`coverage_difference`: ids (into the pool a resample draws from) of the
    evaluation part, its correctness, and each detector's (A, B) uncertainty there and certified threshold."""

    eval_ids: np.ndarray
    correct_eval: np.ndarray
    evaluation: tuple[np.ndarray, np.ndarray]
    thresholds: tuple[float, float]

    def accepted(self) -> tuple[np.ndarray, np.ndarray]:
        a, b = (u <= t for u, t in zip(self.evaluation, self.thresholds, strict=True))
        return a, b


#: When Rel-U − Doctor in coverage at a guarantee is called a difference (:attr:`CoverageDifference.significant`).
VERDICT_RULE = (
    "a winner needs both the interval for the certified thresholds and the range over calibration draws (seeds, "
    "or random re-cuts of one split) to exclude 0"
)


@dataclass(frozen=True)
class CoverageDifference:
    """Coverage of A − coverage of B at the same guarantee (:func:`coverage_difference`): the ``estimate`` on the
    evaluation split(s) and its paired bootstrap interval ``low``-``high`` for the thresholds certified there
    (conditional on the calibration draw); ``draw_low``-``draw_high``: the range another calibration draw of the
    same size gives (the central 95 % over ``draws`` seeds or random re-cuts, ``draw_kind``; NaN when none)."""

    estimate: float
    low: float
    high: float
    n_resamples: int
    confidence: float = 0.95
    draw_low: float = math.nan
    draw_high: float = math.nan
    draws: int = 0
    draw_kind: str = ""

    @property
    def significant_here(self) -> bool:
        """True when the interval for the thresholds certified here excludes 0 (conditional on the calibration
        draw: it says nothing of another one)."""
        return self.low > 0.0 or self.high < 0.0

    @property
    def significant(self) -> bool:
        """The verdict's rule (:data:`VERDICT_RULE`): the interval for the certified thresholds and the range
        over calibration draws both exclude 0, on the same side. Without draws (``draws`` = 0) nothing accounts
        for the calibration draw, so False: an interval that holds the certified thresholds fixed was
        "significant" at +14.5 to +15.6 points on the ResNet-56 at r* = 2 % while the seeds ranged from −2.7 to
        +37.2."""
        if not self.draws or not self.significant_here:
            return False
        return (self.low > 0.0 and self.draw_low > 0.0) or (self.high < 0.0 and self.draw_high < 0.0)

    def outcome(self, a: str = "Rel-U", b: str = "Doctor") -> str:
        if not self.significant:
            return "no significant difference"
        return f"{a if self.estimate > 0 else b} better"

    def verdict(self, a: str = "Rel-U", b: str = "Doctor") -> str:
        """One line in points of coverage: who lets you act on more predictions and by how much, with the interval
        (for these certified thresholds) and the range of another calibration draw; a winner only by
        :data:`VERDICT_RULE`, which the line names when the interval alone would have called one."""
        ci = f"{100 * self.confidence:g} % CI"
        first, second, sign = a, b, 1.0  # the difference as the words say it: the winner's minus the other's
        if self.significant:
            winner, loser = (a, b) if self.estimate > 0 else (b, a)
            first, second, sign = winner, loser, (1.0 if self.estimate > 0 else -1.0)
            low, high = sorted((abs(self.low), abs(self.high)))
            text = (
                f"{winner} lets you act on {100 * abs(self.estimate):.1f} points more predictions than {loser} "
                f"({ci} {100 * low:.1f} to {100 * high:.1f}, for the thresholds certified here)"
            )
        elif not (math.isfinite(self.low) and math.isfinite(self.high)):  # no resample read every split
            text = (
                f"no significant difference shown in coverage ({a} − {b} = {100 * self.estimate:+.1f} points, no "
                f"{ci}: too few evaluation samples for a resample to read every split)"
            )
        else:
            text = (
                f"no significant difference in coverage ({a} − {b} = {100 * self.estimate:+.1f} points, {ci} "
                f"{100 * self.low:+.1f} to {100 * self.high:+.1f}, for the thresholds certified here)"
            )
        if self.draws:
            low, high = sorted((sign * self.draw_low, sign * self.draw_high))
            text += (
                f"; another calibration draw of the same size gives {first} − {second} between {100 * low:+.1f} "
                f"and {100 * high:+.1f} points ({self.draws} {self.draw_kind})"
            )
        if self.significant_here and not self.significant:  # the interval alone would have named a winner
            text += (
                "; not called better: " + VERDICT_RULE
                if self.draws
                else "; not called better: no range over calibration draws was computed, and the interval holds "
                "the certified thresholds fixed"
            )
        return text

    def to_dict(self) -> dict[str, object]:
        """Plain data (the CLI's JSON), non-finite numbers as None."""

        def number(value: float) -> float | None:
            return float(value) if math.isfinite(value) else None

        return {
            "metric": "coverage on the evaluation split at the same guarantee",
            "estimate": number(self.estimate),
            "ci_low": number(self.low),
            "ci_high": number(self.high),
            "n_resamples": self.n_resamples,
            "significant": self.significant,
            "significant_for_these_thresholds": self.significant_here,
            "verdict_rule": VERDICT_RULE,
            "conditional_on": "the thresholds certified on the calibration splits (the evaluation samples are "
            "resampled, the calibration draw is not)",
            "calibration_draws": {
                "low": number(self.draw_low),
                "high": number(self.draw_high),
                "n": self.draws,
                "kind": self.draw_kind,
            },
            "verdict": self.verdict(),
        }


def coverage_difference(
    splits: Sequence[SplitScores],
    *,
    n_pool: int | None = None,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    seed: int = 0,
    confidence: float = 0.95,
    cancel: Cancel | None = None,
) -> CoverageDifference:
    """Coverage of A − coverage of B on the evaluation parts at their certified thresholds, averaged over
    ``splits`` (seeds), with a paired percentile bootstrap interval for those thresholds: each resample draws the
    pool (``n_pool`` samples, every evaluation id of every split) with replacement once, for both detectors and
    every split, and reads both coverages on it (module docstring: why the thresholds are not certified again on
    each resample). The range over calibration draws comes from :func:`calibration_draws` or the seeds
    (:func:`with_draws`). A resample that draws none of some split's evaluation samples has no coverage there
    and is left out (tiny splits; ``n_resamples`` counts the resamples kept, and the interval is NaN, None in
    :meth:`CoverageDifference.to_dict`, when none is)."""
    validation.integer(n_resamples, "n_resamples", minimum=1, maximum=100_000)
    n_pool = n_pool or 1 + max(int(s.eval_ids.max()) for s in splits)
    accepted = [s.accepted() for s in splits]

    def difference(weights: np.ndarray) -> np.ndarray:
        total = np.zeros(weights.shape[0])
        for s, (a, b) in zip(splits, accepted, strict=True):
            w = weights[:, s.eval_ids].astype(np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):  # NaN: a resample drew none of this split
                total += (w @ a.astype(np.float64) - w @ b.astype(np.float64)) / w.sum(axis=1)
        return total / len(splits)

    estimate = float(difference(np.ones((1, n_pool)))[0])
    rng = np.random.default_rng(seed)
    block = max(1, _BLOCK_CELLS // n_pool)
    drawn: list[np.ndarray] = []
    for start in range(0, n_resamples, block):
        if cancel is not None and cancel():
            raise Cancelled("the coverage bootstrap was cancelled")
        size = min(block, n_resamples - start)
        drawn.append(difference(_draw_counts(rng, size, n_pool)))
    values = np.concatenate(drawn)
    values = values[np.isfinite(values)]  # the resamples that drew samples of every split's evaluation part
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(values, [tail, 100 - tail]) if values.size else (math.nan, math.nan)
    return CoverageDifference(estimate, float(low), float(high), int(values.size), confidence)


def calibration_draws(
    scores: tuple[np.ndarray, np.ndarray],
    correct: np.ndarray,
    risk: float,
    delta: float = DEFAULT_DELTA,
    *,
    n_cuts: int = 200,
    seed: int = 0,
    fraction: float = CALIBRATION_FRACTION,
    cancel: Cancel | None = None,
) -> np.ndarray:
    """Coverage of A − coverage of B on the evaluation part for ``n_cuts`` random cuts of the same held-out
    samples (``scores`` of the two fixed detectors, ``correct``) into calibration and evaluation parts, each
    detector certified again on each cut: how much the comparison moves with the calibration draw."""
    rng = np.random.default_rng([int(seed), _CALIBRATION_STREAM, 1])
    n = correct.size
    n_cal = int(round(fraction * n))
    out = np.empty(n_cuts)
    for i in range(n_cuts):
        if cancel is not None and i % 20 == 0 and cancel():
            raise Cancelled("the calibration draws were cancelled")
        order = rng.permutation(n)
        cal, ev = order[:n_cal], order[n_cal:]
        covered = [
            realised(
                guaranteed_risk(u[cal], correct[cal], risk, delta, start=start_threshold(u[ev], n_cal, risk, delta)),
                u[ev],
                correct[ev],
            ).coverage
            for u in scores
        ]
        out[i] = covered[0] - covered[1]
    return out


def with_draws(difference: CoverageDifference, values, kind: str) -> CoverageDifference:
    """``difference`` with the central 95 % range of ``values`` (the differences other calibration draws give)."""
    values = np.asarray(values, dtype=np.float64)
    if values.size < 2:
        return difference
    low, high = np.percentile(values, [2.5, 97.5])
    return dataclasses.replace(
        difference, draw_low=float(low), draw_high=float(high), draws=int(values.size), draw_kind=kind
    )


def _draw_counts(rng: np.random.Generator, size: int, n: int) -> np.ndarray:
    """``size`` bootstrap resamples of ``n`` samples as draw counts (size x n): each row how often each sample
    was drawn in n draws with replacement (a multinomial draw, made as counts of uniform indices)."""
    drawn = rng.integers(0, n, size=(size, n)) + np.arange(size)[:, None] * n
    return np.bincount(drawn.ravel(), minlength=size * n).reshape(size, n)


def _one_split(held_out_scores, correct, cal_pos, eval_pos, risk, delta) -> AtGuarantee:
    """The certificate on the calibration positions, the sequence started where the evaluation half's scores
    (not their labels) put it, and what it does on the evaluation half."""
    start = start_threshold(held_out_scores[eval_pos], len(cal_pos), risk, delta)
    certificate = guaranteed_risk(held_out_scores[cal_pos], correct[cal_pos], risk, delta, start=start)
    return AtGuarantee(certificate, realised(certificate, held_out_scores[eval_pos], correct[eval_pos]))


def at_split(
    scores: dict[str, np.ndarray],
    correct: np.ndarray,
    cal_pos: np.ndarray,
    eval_pos: np.ndarray,
    risk: float,
    delta: float = DEFAULT_DELTA,
) -> dict[str, AtGuarantee]:
    """Each detector's certificate on the positions ``cal_pos`` of its ``scores`` and what it does on
    ``eval_pos`` (``correct`` aligned with the scores)."""
    return {k: _one_split(u, correct, cal_pos, eval_pos, risk, delta) for k, u in scores.items()}


def split_scores(
    scores: tuple[np.ndarray, np.ndarray],
    correct: np.ndarray,
    ids: np.ndarray,
    eval_pos: np.ndarray,
    thresholds: tuple[float, float],
) -> SplitScores:
    """A :class:`SplitScores` of two detectors' ``scores`` on samples ``ids`` (aligned with ``correct``), the
    positions ``eval_pos`` evaluating, at their certified ``thresholds``."""
    a, b = (np.asarray(u)[eval_pos] for u in scores)
    return SplitScores(ids[eval_pos], correct[eval_pos], (a, b), (float(thresholds[0]), float(thresholds[1])))


@dataclass(frozen=True)
class AtRiskResult:
    """:func:`at_risk`: per method, per seed (in ``seeds`` order) its :class:`AtGuarantee`; the Rel-U − Doctor
    coverage difference with its interval and the range over the seeds when both ran (None otherwise;
    ``minus_doctor_per_seed``: each seed's difference); the settings used."""

    risk: float
    delta: float
    seeds: tuple[int, ...]
    methods: tuple[str, ...]
    per_seed: dict[str, list[AtGuarantee]]
    n_tune: tuple[int, ...]
    settings: dict[str, object] = field(default_factory=dict)
    minus_doctor: CoverageDifference | None = None
    minus_doctor_per_seed: tuple[float, ...] = ()

    def summary(self, key: str) -> dict[str, object]:
        """One method over the seeds as plain data (the CLI's JSON): the certified coverage, threshold, bound
        and the evaluation split's realised risk and coverage per seed and on average, and the refusals."""
        found = self.per_seed[key]
        cert = [r.certificate for r in found]

        def mean(values: list[float]) -> float | None:
            finite = [v for v in values if math.isfinite(v)]
            return float(np.mean(finite)) if finite else None

        def listed(values: list[float]) -> list[float | None]:
            return [float(v) if math.isfinite(v) else None for v in values]

        coverage = [c.coverage for c in cert]
        realised_risk = [r.evaluation.risk for r in found]
        realised_coverage = [r.evaluation.coverage for r in found]
        return {
            "guarantee": guarantee_words(self.risk, self.delta),
            "risk": self.risk,
            "delta": self.delta,
            "certified": sum(c.certified for c in cert),
            "refusals": sorted({c.refusal for c in cert if c.refusal}),
            "n_calibration": [c.n_calibration for c in cert],
            "threshold": listed([c.threshold for c in cert]),
            "bound": listed([c.bound for c in cert]),
            "certified_coverage": mean(coverage),
            "certified_coverage_per_seed": listed(coverage),
            "evaluation_coverage": mean(realised_coverage),
            "evaluation_coverage_per_seed": listed(realised_coverage),
            "evaluation_risk": mean(realised_risk),
            "evaluation_risk_per_seed": listed(realised_risk),
            "evaluation_risk_above_target": sum(bool(math.isfinite(v) and v > self.risk) for v in realised_risk),
        }


def at_risk(
    logits: np.ndarray,
    labels: np.ndarray,
    methods: Sequence[str] = protocol.PAIRED,
    *,
    risk: float,
    delta: float = DEFAULT_DELTA,
    temperature: float | Mapping[str, float] | None = 1.0,
    lam: float | str = 0.5,
    tune_fraction: float = 0.5,
    seeds: int | Sequence[int] = 10,
    n_resamples: int = stats.DEFAULT_RESAMPLES,
    progress: Progress | None = None,
    cancel: Cancel | None = None,
) -> AtRiskResult:
    """Each method deployed at a guarantee over seeded splits: fitted on the tuning split (the protocol's,
    stratified by correctness), its threshold certified on the calibration half of the rest
    (:func:`calibration_split`), its realised risk and coverage read on the evaluation half; and, when Rel-U and
    Doctor both run, their coverage difference on the evaluation halves with the paired bootstrap interval of
    :func:`coverage_difference` for the certified thresholds (``n_resamples``, 0 for none) and the range over the
    seeds (one seed: over 200 random re-cuts of its held-out samples, :func:`calibration_draws`). Methods keep their own T where they have one
    (MSP), and ``temperature`` is read as ``protocol.evaluate`` reads it (one T, ``{key: T}``, or None: each
    detector's default, ODIN's 1000); samples of identical logits get one score."""
    risk, delta = check_certifiable(risk, delta)
    methods = protocol.resolve_methods(methods)
    seeds = protocol.resolve_seeds(seeds)
    logits = np.asarray(logits)
    correct = protocol.correctness(logits, labels)
    protocol.check_evaluable(correct)
    temps = _temperatures(methods, temperature)
    lam = detectors.check_lambda(lam)
    twins = ties.twins(logits)
    probs: dict[float, np.ndarray] = {}
    per_seed: dict[str, list[AtGuarantee]] = {k: [] for k in methods}
    paired: list[SplitScores] = []
    n_tune = []
    splits = protocol.seeded_splits(correct, tune_fraction, seeds)
    total = len(seeds) * len(methods)
    for s, (seed, tune_idx, held_out) in enumerate(splits.checked(cancel, "the guarantee study")):
        cal_idx, eval_idx = calibration_split(held_out, seed)
        cal_pos, eval_pos = np.searchsorted(held_out, cal_idx), np.searchsorted(held_out, eval_idx)
        n_tune.append(int(tune_idx.size))
        kept = {}
        for j, key in enumerate(methods):
            detector = detectors.make_detector(key, temps[key], lam)
            if detector.accepts_probs:
                p = probs.get(detector.temperature)
                if p is None:
                    p = probs[detector.temperature] = np.asarray(detectors.softmax(logits, detector.temperature))
                if detector.requires_fit:
                    detector.fit_probs(p[tune_idx], correct[tune_idx])
                u = np.asarray(detector.score_probs(p[held_out]), dtype=np.float64)
            else:
                if detector.requires_fit:
                    detector.fit(logits[tune_idx], labels[tune_idx])
                u = np.asarray(detector.score(logits[held_out]), dtype=np.float64)
            u = ties.tied_equal(twins, held_out, u)
            per_seed[key].append(_one_split(u, correct[held_out], cal_pos, eval_pos, risk, delta))
            kept[key] = u
            if progress is not None:
                progress(s * len(methods) + j + 1, total, f"seed {s + 1}/{len(seeds)}: {detector.name}")
        if all(k in kept for k in protocol.PAIRED):
            pair = (kept[protocol.PAIRED[0]], kept[protocol.PAIRED[1]])
            thresholds = tuple(per_seed[k][-1].certificate.threshold for k in protocol.PAIRED)
            paired.append(split_scores(pair, correct[held_out], held_out, eval_pos, thresholds))  # type: ignore[arg-type]
            single = (pair, correct[held_out])
    minus_doctor, differences = None, ()
    if paired:
        a, b = protocol.PAIRED
        differences = tuple(
            x.evaluation.coverage - y.evaluation.coverage for x, y in zip(per_seed[a], per_seed[b], strict=True)
        )
    if paired and n_resamples:
        minus_doctor = coverage_difference(
            paired, n_pool=len(correct), n_resamples=n_resamples, seed=seeds[0], cancel=cancel
        )
        if len(seeds) > 1:
            minus_doctor = with_draws(minus_doctor, differences, "seeds")
        else:
            draws = calibration_draws(*single, risk, delta, seed=seeds[0], cancel=cancel)
            minus_doctor = with_draws(minus_doctor, draws, "random re-cuts of the held-out samples")
    settings = {"temperature": temps, "lambda": lam, "tune_fraction": tune_fraction}
    return AtRiskResult(risk, delta, seeds, methods, per_seed, tuple(n_tune), settings, minus_doctor, differences)


def _temperatures(methods: Sequence[str], temperature) -> dict[str, float]:
    """Each method's T, as ``protocol.evaluate`` reads ``temperature``."""
    if temperature is None:
        return {k: detectors.REGISTRY[k].default_temperature for k in methods}
    if isinstance(temperature, Mapping):
        given = {protocol.resolve_methods([k])[0]: detectors.check_temperature(t) for k, t in temperature.items()}
        return {k: given.get(k, 1.0) for k in methods}
    t = detectors.check_temperature(temperature)
    return {k: t for k in methods}


def sentence(risk: float, delta: float, coverage: Mapping[str, float | str], note: str = "") -> str:
    """The guarantee in plain words with each detector's coverage (a share, or the one-line reason it cannot give
    the guarantee, "" to leave the reason out): "At most 2 % errors among accepted, with 90 % confidence: Rel-U lets you act on 71 % of
    predictions, Doctor on 68 %."; ``note`` goes in brackets before the full stop."""
    parts = []
    if len(coverage) == 2 and all(value == "" for value in coverage.values()):  # both refused, reasons elsewhere
        parts.append("neither {} nor {} can guarantee it here".format(*coverage))
    for n, (name, value) in enumerate(coverage.items() if not parts else ()):
        if isinstance(value, str):
            parts.append(f"{name} cannot guarantee it here" + (f" ({value})" if value else ""))
        elif n == 0 or isinstance(list(coverage.values())[n - 1], str):
            parts.append(f"{name} lets you act on {percent(value)} of predictions")
        else:
            parts.append(f"{name} on {percent(value)}")
    words = guarantee_words(risk, delta)
    return f"{words[0].upper()}{words[1:]}: {', '.join(parts)}{f' ({note})' if note else ''}."


#: The choices of r* a user is offered (Explore's control), and those a default r* is rounded onto, so that a
#: default can always be reproduced by hand.
RISK_CHOICES: tuple[float, ...] = (
    0.005,
    0.01,
    0.015,
    0.02,
    0.03,
    0.04,
    0.05,
    0.06,
    0.08,
    0.1,
    0.12,
    0.15,
    0.2,
    0.25,
    0.3,
)


def default_risk(correct_tune: np.ndarray) -> float:
    """A target r* suited to a run: half the classifier's error rate on the tuning split (known before any
    calibration or evaluation sample is read), rounded down onto :data:`RISK_CHOICES` (Explore's choices, so the
    Start scorecard's guarantee can be opened there), at least 0.5 %; a model with a 12 % error rate gets r* = 6 %,
    one with 11 % gets 5 %."""
    error_rate = float(np.mean(~np.asarray(correct_tune, dtype=bool)))
    half = error_rate / 2
    return max([c for c in RISK_CHOICES if c <= half + 1e-12], default=RISK_CHOICES[0])
