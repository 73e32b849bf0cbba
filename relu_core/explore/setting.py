"""One Explore setting, validated once: what a view of a run is computed for.

:class:`Setting` is frozen and hashable (the view cache's key); its constructor is the one place where a
temperature, a λ, an ε, a split or a detector list is checked, so the computations below trust it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from relu_core import detectors, preprocessing, protocol, risk_control, validation
from relu_core.errors import InputError

#: The T slider: ten steps per decade from 0.1 to 1000 (two significant digits) plus the paper's grid.
TEMPERATURES: tuple[float, ...] = tuple(
    sorted({float(f"{10 ** (k / 10):.2g}") for k in range(-10, 31)} | set(detectors.TEMPERATURE_GRID))
)
#: Input pre-processing magnitudes (the paper's grid, 0 = no pre-processing).
EPSILONS = preprocessing.PAPER_EPSILONS
#: The detectors Explore offers, the paired Rel-U and Doctor first (they follow the T and ε controls; the
#: others keep their standard setting).
DETECTOR_CHOICES: tuple[str, ...] = tuple(dict.fromkeys([*protocol.PAIRED, *detectors.protocol_keys()]))
#: The kinds of operating point: a target TPR (share of correct predictions accepted: "keep 95 % of the correct
#: predictions"), a target share of errors caught (rejected: "catch 95 % of the errors", the errors-positive
#: convention; the ROC's open circles and the exported detector's threshold follow it), a target coverage, or a
#: guaranteed risk (at most ``op_target`` errors among accepted with confidence 1 − ``op_delta``, the threshold
#: certified on a calibration part of the evaluation split: ``relu_core.risk_control``).
OPERATING_KINDS = ("tpr", "errors", "coverage", "risk")
#: The guaranteed risk's choices of r* (at most this error rate among accepted) and of δ (confidence 1 − δ).
RISKS: tuple[float, ...] = risk_control.RISK_CHOICES
DELTAS: tuple[float, ...] = (0.01, 0.05, 0.1, 0.2)
#: λ's step (the slider's) and its decimals: the λ-neighbours are one step away.
LAM_STEP, LAM_DECIMALS = 0.01, 2


@dataclass(frozen=True)
class Setting:
    """A view's setting: Rel-U and Doctor at ``temperature`` (the other detectors keep their standard one),
    Rel-U's ``lam`` (a float in [0, 1] or ``"auto"``), input pre-processing of magnitude ``eps`` (0: none), the
    seeded tuning/evaluation split (``tune_fraction``, ``seed``), the ``detectors`` shown (registry keys), and
    the operating point (``op_kind`` in :data:`OPERATING_KINDS`, ``op_target`` in (0, 1]; for a guaranteed risk
    ``op_target`` is r* in [0, 1) and ``op_delta`` the δ of confidence 1 − δ, in (0, 1)).

    The defaults are the ones the Start page's verdict and a first visit to Explore use. Every field is checked
    here (InputError, one line), so a setting that exists is valid."""

    temperature: float = 1.0
    lam: float | str = 0.5
    eps: float = 0.0
    tune_fraction: float = 0.5
    seed: int = 0
    detectors: tuple[str, ...] = protocol.PAIRED
    op_kind: str = "tpr"
    op_target: float = 0.95
    op_delta: float = risk_control.DEFAULT_DELTA

    def __post_init__(self) -> None:
        checked = {
            "temperature": detectors.check_temperature(self.temperature),
            "lam": detectors.check_lambda(self.lam),
            "eps": validation.non_negative(self.eps, "ε"),
            "tune_fraction": validation.fraction(self.tune_fraction, "the tuning split fraction"),
            "seed": validation.integer(self.seed, "the split seed", minimum=0),
            "detectors": protocol.resolve_methods(self.detectors),
            "op_target": risk_control.check_risk(self.op_target) if self.op_kind == "risk" else _target(self.op_target),
            "op_delta": risk_control.check_delta(self.op_delta),
        }
        if self.op_kind not in OPERATING_KINDS:
            raise InputError(f"the operating point must be one of {', '.join(OPERATING_KINDS)}, got {self.op_kind!r}")
        if self.op_kind == "risk":  # an r* that no sample size can certify: refused here, before any work
            risk_control.check_certifiable(checked["op_target"], checked["op_delta"])
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def replace(self, **changes) -> Setting:
        """This setting with ``changes`` (checked like any new setting)."""
        return dataclasses.replace(self, **changes)

    def scoring(self) -> Setting:
        """This setting with the default operating point: what a view's scores, curves and metrics depend on (the
        view cache's key; the operating point only moves the marks on the curves, ``View.marked``)."""
        return self.replace(op_kind=Setting.op_kind, op_target=Setting.op_target, op_delta=Setting.op_delta)

    @property
    def fpr_positive(self) -> str:
        """Which FPR95 convention the operating point, the ROC's open circles and the export use: ``"error"``
        under the errors-caught operating point, ``"correct"`` otherwise (``relu_core.operating_points``)."""
        return "error" if self.op_kind == "errors" else "correct"

    @property
    def guaranteed(self) -> bool:
        """Whether the operating point is a guaranteed risk (the threshold certified on a calibration split)."""
        return self.op_kind == "risk"

    def target_words(self) -> str:
        """The operating point in words, e.g. "TPR ≥ 95%", "at most 2 % errors among accepted, with 90 %
        confidence"."""
        if self.guaranteed:
            return risk_control.guarantee_words(self.op_target, self.op_delta)
        if self.op_kind == "errors":
            return f"errors caught ≥ {self.op_target:.0%}"
        return f"{'TPR' if self.op_kind == 'tpr' else 'coverage'} ≥ {self.op_target:.0%}"

    def lam_words(self) -> str:
        """λ as the URL and the report write it: "auto" or the number, e.g. "0.5"."""
        return self.lam if isinstance(self.lam, str) else f"{self.lam:g}"


def _target(value: object) -> float:
    try:
        target = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        target = float("nan")
    if not 0.0 < target <= 1.0:
        raise InputError(f"the operating point's target must lie in (0, 1], got {value!r}")
    return target
