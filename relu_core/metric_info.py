"""The metrics every result states, declared once: key, labels, which direction is better, format.

The CLI, every page, the studies and the report read their columns, headers, selection criteria and the
direction of a verdict from :data:`METRICS`; the formulas are :mod:`relu_core.metrics`'. Plain data, no
numpy: the command line's parser reads it without loading the library.
"""

from __future__ import annotations

from dataclasses import dataclass

from relu_core.errors import InputError


def signed(value: float, decimals: int = 4) -> str:
    """A difference with its sign, to ``decimals`` places: "+0.0000" where it rounds to zero, never "-0.0000" (a
    difference too small to show has no side)."""
    rounded = round(float(value), decimals)
    return f"{rounded + 0.0 if rounded == 0 else rounded:+.{decimals}f}"


@dataclass(frozen=True)
class Metric:
    """One metric of a detector on an evaluation split.

    ``label`` is the short name of tables and verdicts ("FPR95"), ``name`` the one of figure titles and
    menus ("FPR at 95 % TPR"); ``paired`` says whether the Rel-U − Doctor paired bootstrap reports it;
    ``format`` is the format spec of its values in text.
    """

    key: str
    label: str
    name: str
    higher_is_better: bool
    paired: bool
    description: str
    format: str = ".4f"

    @property
    def better(self) -> str:
        """``"higher"`` or ``"lower"``: the direction that is better."""
        return "higher" if self.higher_is_better else "lower"

    @property
    def header(self) -> str:
        """The label with the better direction as an arrow ("FPR95 ↓"), the metrics tables' header."""
        return f"{self.label} {'↑' if self.higher_is_better else '↓'}"

    @property
    def title(self) -> str:
        """The name with the better direction ("FPR at 95 % TPR (lower is better)"), the figures' title."""
        return f"{self.name} ({self.better} is better)"

    def mean_std(self, mean: float, std: float) -> str:
        """``"mean ± std"`` in this metric's format."""
        return f"{mean:{self.format}} ± {std:{self.format}}"


FPR95 = Metric(
    "fpr95",
    "FPR95",
    "FPR at 95 % TPR",
    False,
    True,
    "share of the errors accepted at the threshold where 95 % of the correct predictions are accepted",
)
AUROC = Metric(
    "auroc", "AUROC", "AUROC", True, True, "probability that a correct prediction is less uncertain than an error"
)
AURC = Metric("aurc", "AURC", "AURC", False, True, "area under the risk-coverage curve (mean risk over coverages)")
# On the same samples the best possible AURC is the same for both detectors: E-AURC's paired difference is AURC's.
EAURC = Metric("eaurc", "E-AURC", "E-AURC", False, False, "AURC minus the best AURC any ranking of these samples has")

AUGRC = Metric(
    "augrc",
    "AUGRC",
    "AUGRC",
    False,
    True,
    "area under the generalised risk-coverage curve (risk that a sample is accepted and wrong, over coverages)",
)

#: Every metric a result reports, in display order (the keys of ``metrics.summary``).
METRICS: tuple[Metric, ...] = (FPR95, AUROC, AURC, EAURC, AUGRC)
BY_KEY: dict[str, Metric] = {m.key: m for m in METRICS}
KEYS: tuple[str, ...] = tuple(BY_KEY)
#: The metrics of the Rel-U − Doctor paired bootstrap (``stats``), in display order.
PAIRED_KEYS: tuple[str, ...] = tuple(m.key for m in METRICS if m.paired)


def get(key: str, what: str = "metric") -> Metric:
    """The metric ``key``; :class:`InputError` naming the choices otherwise (``what``: the word for it)."""
    if key not in BY_KEY:
        raise InputError(f"unknown {what} {key!r}; choose from {', '.join(KEYS)}")
    return BY_KEY[key]
